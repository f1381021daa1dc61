// The replay threads of a process (docs/architecture.md#one-pool-of-replay-threads): one a hardware
// thread, started on first use and kept for the process's life, shared by every replay in it
// whoever asks (the app's maps, the what-if lab's configurations, a CLI's run), so that replays
// side by side never hold more threads than there are cores, and a JavaScript host's own thread
// pool (libuv's, four threads unless told) neither bounds them nor is taken by them.
//
// Tasks run in the order they were submitted, each to its end on one thread. A task that must wait
// for other tasks of the pool must not be one of them (on_pool_thread() says where it runs): with
// every thread waiting, nothing would run what they wait for.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vramscope {

class thread_pool {
 public:
  // A pool of `threads` threads (at least one), started when the first task is submitted.
  explicit thread_pool(std::size_t threads);
  // Waits for the tasks submitted to finish, then joins the threads.
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  // The process's pool: a thread for each core the process may run on (on Linux, its affinity
  // mask's; elsewhere std::thread::hardware_concurrency(), at least 1).
  // Never destroyed: a process that exits while a replay runs does not wait for it.
  static thread_pool& shared();

  // The threads it runs tasks on once started (fewer than asked where the system refused more).
  std::size_t size() const;

  // Queues `task`; returns at once. The task must not throw (what it throws ends the process, as
  // from any thread's function). Throws a library error where not one thread could be started.
  void submit(std::function<void()> task);

  // Whether the calling thread is one of any pool's.
  static bool on_pool_thread();

 private:
  void start_locked();
  void run();

  const std::size_t wanted_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

}  // namespace vramscope
