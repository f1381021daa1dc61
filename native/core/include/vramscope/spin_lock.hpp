// The lock of thread-safe allocators.
//
// Biased to the thread that uses it. An allocator is mostly called from one thread even where it
// must be safe to call from several, so the first thread to take the lock once other threads exist
// becomes its owner, and the owner takes and gives back the lock with plain loads and stores: no
// atomic read-modify-write, whose wait for the store buffer to drain cost 20-25 ns of caching's
// 40-55 ns pair on the H100 machine's Xeon (docs/benchmarks.md). The first time another thread
// wants the lock, it revokes the bias for good: it takes the shared lock, marks the bias revoked,
// makes the owner's thread execute a full memory barrier through membarrier(2) (the asymmetric
// half of Dekker's protocol: the owner announces itself and then reads the revoked flag, the other
// thread sets the flag and then reads the announcement, and the barrier on the owner's side orders
// the owner's store before its load without the owner paying for a fence), and waits for the owner
// to leave. From then on every thread, the owner too, takes the shared lock, as below. Where
// membarrier is not available (not Linux, an old kernel, a sandbox that refuses it) or under
// ThreadSanitizer (which cannot see the barrier's ordering), there is no bias.
//
// The shared lock: taking it when free costs one atomic exchange and giving it back a release
// store and a load, where std::mutex costs two atomic read-modify-writes and two library calls. A
// waiter spins briefly on a plain load, then parks on a condition variable until an unlock sees it
// waiting; a long critical section (a device call, a walk of a large layout) keeps no waiting core
// busy. The unlock's check of the waiter count is not fenced against the waiter's registration, so
// a wake-up can be missed: parked waiters also poll, which bounds that rare case to one poll
// interval of latency. In a process that has only ever had one thread (glibc says so, and uses it
// for its own mutex) there is nobody to exclude, and no atomic at all is used.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "vramscope/types.hpp"

#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define VRAMSCOPE_HAS_SINGLE_THREADED 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define VRAMSCOPE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VRAMSCOPE_TSAN 1
#endif
#endif

#if defined(__linux__) && !defined(VRAMSCOPE_TSAN) && !defined(VRAMSCOPE_NO_BIASED_LOCK)
#define VRAMSCOPE_BIASED_LOCK 1
#endif

namespace vramscope {

class spin_lock {
 public:
  enum class bias_state { none, biased, revoked };

  void lock() noexcept {
    if (only_thread()) {
      // A thread created while the lock is held sees it held: thread creation publishes the store.
      VRAMSCOPE_ASSERT(!locked_.load(std::memory_order_relaxed));
      locked_.store(true, std::memory_order_relaxed);
      return;
    }
#ifdef VRAMSCOPE_BIASED_LOCK
    if (VRAMSCOPE_LIKELY(owner_.load(std::memory_order_relaxed) == this_thread_id())) {
      // Announce, then look for a revocation. The two may be reordered by the processor (a load
      // may pass an earlier store); the revoking thread's membarrier orders them (see above).
      owner_in_.store(true, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (VRAMSCOPE_LIKELY(!revoked_.load(std::memory_order_acquire))) return;
      owner_in_.store(false, std::memory_order_release);
    }
#endif
    lock_shared();
  }

  void unlock() noexcept {
#ifdef VRAMSCOPE_BIASED_LOCK
    // owner_in_ is true only between the owner's announcement and its unlock, and only the owner
    // reads it here: another thread may see it true for a moment while the owner backs off.
    if (VRAMSCOPE_LIKELY(owner_.load(std::memory_order_relaxed) == this_thread_id()) &&
        owner_in_.load(std::memory_order_relaxed)) {
      owner_in_.store(false, std::memory_order_release);
      return;
    }
#endif
    locked_.store(false, std::memory_order_release);
    if (VRAMSCOPE_UNLIKELY(parked_.load(std::memory_order_relaxed) != 0)) wake_one();
  }

  // For tests and diagnostics: whether the lock is biased to a thread; revoked once that ended, or
  // once the shared lock was first taken in a process that cannot bias.
  bias_state bias() const noexcept {
    if (revoked_.load(std::memory_order_acquire)) return bias_state::revoked;
    return owner_.load(std::memory_order_acquire) != 0 ? bias_state::biased : bias_state::none;
  }
  // Whether this process can bias locks at all (membarrier available and registered).
  static bool biasing_available() noexcept;

 private:
  static bool only_thread() noexcept {
#ifdef VRAMSCOPE_HAS_SINGLE_THREADED
    return __libc_single_threaded != 0;
#else
    return false;
#endif
  }

  // An identity of the calling thread that is never 0: its thread pointer, one instruction on
  // x86-64 (a thread_local's address would be a call to __tls_get_addr inside the Node addon).
  static std::uintptr_t this_thread_id() noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    std::uintptr_t id;
    asm("mov %%fs:0, %0" : "=r"(id));
    return id;
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
    std::uintptr_t id;
    asm("mrs %0, tpidr_el0" : "=r"(id));
    return id;
#else
    static thread_local char marker;
    return reinterpret_cast<std::uintptr_t>(&marker);
#endif
  }

  bool try_lock_shared() noexcept {
    // Test before the exchange: waiters read a shared line instead of bouncing it between cores.
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }

  void lock_shared() noexcept {
    if (VRAMSCOPE_UNLIKELY(locked_.exchange(true, std::memory_order_acquire))) lock_contended();
#ifdef VRAMSCOPE_BIASED_LOCK
    if (VRAMSCOPE_UNLIKELY(!revoked_.load(std::memory_order_relaxed))) settle_bias();
#endif
  }

  // Holding the shared lock, with the bias not revoked: the caller becomes the owner when there
  // is none (and the bias is possible), or revokes the owner's bias and waits for it to leave.
  VRAMSCOPE_NOINLINE void settle_bias() noexcept;

  VRAMSCOPE_NOINLINE void lock_contended() noexcept {
    for (int spin = 0; spin < 32; ++spin) {
      if (try_lock_shared()) return;
      cpu_relax();
    }
    std::unique_lock<std::mutex> guard(park_mutex_);
    parked_.fetch_add(1, std::memory_order_relaxed);
    while (!try_lock_shared()) wake_.wait_for(guard, std::chrono::microseconds(200));
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
  std::atomic<bool> owner_in_{false};     // the owner holds the lock through its bias
  std::atomic<bool> revoked_{false};      // the bias ended: everybody takes locked_
  std::atomic<std::uintptr_t> owner_{0};  // this_thread_id() of the owner; 0: none yet
  std::atomic<unsigned> parked_{0};
  std::mutex park_mutex_;
  std::condition_variable wake_;
};

}  // namespace vramscope
