// The process's replay threads (thread_pool.hpp): a queue under one mutex, threads that wait on it.
// A replay's task runs for milliseconds to minutes, so the queue's lock is never what they wait for.
#include "vramscope/thread_pool.hpp"

#include <algorithm>
#include <string>
#include <system_error>
#include <utility>

#include "vramscope/errors.hpp"

#if defined(__linux__)
#include <sched.h>
#endif

namespace vramscope {
namespace {

thread_local bool pool_thread = false;

// The cores this process may run on: on Linux those of its affinity mask (a container's or
// taskset's cpuset), which std::thread::hardware_concurrency() does not read; elsewhere, or where
// the mask cannot be read, the hardware threads the system reports.
std::size_t available_cores() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return static_cast<std::size_t>(CPU_COUNT(&set));
#endif
  return std::max<unsigned>(1, std::thread::hardware_concurrency());
}

}  // namespace

thread_pool::thread_pool(std::size_t threads) : wanted_(std::max<std::size_t>(1, threads)) {}

thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& t : threads_) t.join();
}

thread_pool& thread_pool::shared() {
  static thread_pool* const pool = new thread_pool(available_cores());
  return *pool;
}

std::size_t thread_pool::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_.empty() ? wanted_ : threads_.size();
}

bool thread_pool::on_pool_thread() { return pool_thread; }

void thread_pool::start_locked() {
  threads_.reserve(wanted_);
  std::string why;
  for (std::size_t i = 0; i < wanted_; ++i) {
    try {
      threads_.emplace_back([this] { run(); });
    } catch (const std::system_error& e) {
      // No more threads to be had: those started do the work.
      why = e.what();
      break;
    }
  }
  if (threads_.empty())
    throw error(error_code::unsupported, "no thread could be started for the replay: " + why);
}

void thread_pool::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (threads_.empty()) start_locked();
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

void thread_pool::run() {
  pool_thread = true;
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace vramscope
