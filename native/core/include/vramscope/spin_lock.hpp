// The lock of thread-safe allocators. Taking it when free costs one atomic exchange and giving it
// back a release store and a load, where std::mutex costs two atomic read-modify-writes (each
// waits for the store buffer to drain) and two library calls: about as much as a whole warm
// alloc+free pair. A waiter spins briefly on a plain load, then parks on a condition variable until
// an unlock sees it waiting; a long critical section (a device call, a walk of a large layout)
// keeps no waiting core busy. The unlock's check of the waiter count is not fenced against the
// waiter's registration, so a wake-up can be missed: parked waiters also poll, which bounds that
// rare case to one poll interval of latency. In a process that has only ever had one thread (glibc
// says so, and uses it for its own mutex) there is nobody to exclude, and no atomic at all is used.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "vramscope/types.hpp"

#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define VRAMSCOPE_HAS_SINGLE_THREADED 1
#endif
#endif

namespace vramscope {

class spin_lock {
 public:
  void lock() noexcept {
    if (only_thread()) {
      // A thread created while the lock is held sees it held: thread creation publishes the store.
      VRAMSCOPE_ASSERT(!locked_.load(std::memory_order_relaxed));
      locked_.store(true, std::memory_order_relaxed);
      return;
    }
    if (VRAMSCOPE_LIKELY(!locked_.exchange(true, std::memory_order_acquire))) return;
    lock_contended();
  }
  void unlock() noexcept {
    locked_.store(false, std::memory_order_release);
    if (VRAMSCOPE_UNLIKELY(parked_.load(std::memory_order_relaxed) != 0)) wake_one();
  }

 private:
  static bool only_thread() noexcept {
#ifdef VRAMSCOPE_HAS_SINGLE_THREADED
    return __libc_single_threaded != 0;
#else
    return false;
#endif
  }

  bool try_lock() noexcept {
    // Test before the exchange: waiters read a shared line instead of bouncing it between cores.
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }

  VRAMSCOPE_NOINLINE void lock_contended() noexcept {
    for (int spin = 0; spin < 32; ++spin) {
      if (try_lock()) return;
      cpu_relax();
    }
    std::unique_lock<std::mutex> guard(park_mutex_);
    parked_.fetch_add(1, std::memory_order_relaxed);
    while (!try_lock()) wake_.wait_for(guard, std::chrono::microseconds(200));
    parked_.fetch_sub(1, std::memory_order_relaxed);
  }

  VRAMSCOPE_NOINLINE void wake_one() noexcept {
    // Under park_mutex_, so that a waiter between its failed try_lock and its wait is not missed.
    std::lock_guard<std::mutex> guard(park_mutex_);
    wake_.notify_one();
  }

  static void cpu_relax() noexcept {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    __builtin_ia32_pause();
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
    asm volatile("yield");
#else
    std::this_thread::yield();
#endif
  }

  std::atomic<bool> locked_{false};
  std::atomic<unsigned> parked_{0};
  std::mutex park_mutex_;
  std::condition_variable wake_;
};

}  // namespace vramscope
