// The biased lock's rare paths: becoming the owner, revoking the bias, and the process-wide memory
// barrier that makes revoking safe (spin_lock.hpp says why).
#include "vramscope/spin_lock.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#ifdef VRAMSCOPE_BIASED_LOCK
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace vramscope {

#ifdef VRAMSCOPE_BIASED_LOCK
namespace {

long membarrier(int command) { return syscall(__NR_membarrier, command, 0, 0); }

// The private expedited barrier: an interrupt to each CPU now running one of this process's
// threads (the others pass a barrier when they are next scheduled). A process registers once.
bool register_private_expedited() {
  const long supported = membarrier(MEMBARRIER_CMD_QUERY);
  if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0 ||
      (supported & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0)
    return false;
  return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

// Every thread of the process has executed a full memory barrier between the call and its return.
void process_wide_barrier() {
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
  // A child after fork() may have to register again.
  if (errno == EPERM && register_private_expedited() &&
      membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
    return;
  // The slow global barrier (a grace period of every CPU) gives the same guarantee.
  const long supported = membarrier(MEMBARRIER_CMD_QUERY);
  if (supported > 0 && (supported & MEMBARRIER_CMD_GLOBAL) != 0 &&
      membarrier(MEMBARRIER_CMD_GLOBAL) == 0)
    return;
  // The owner could be inside its critical section unseen: going on would break the exclusion.
  std::fputs("vramscope: membarrier(2) failed while revoking a lock's bias; cannot continue safely\n",
             stderr);
  std::abort();
}

}  // namespace

bool spin_lock::biasing_available() noexcept {
  static const bool available = register_private_expedited();
  return available;
}

void spin_lock::settle_bias() noexcept {
  const std::uintptr_t owner = owner_.load(std::memory_order_relaxed);
  if (owner == 0) {
    // The first thread to take the lock while others exist: it is the owner from its next lock.
    if (biasing_available())
      owner_.store(this_thread_id(), std::memory_order_relaxed);
    else
      revoked_.store(true, std::memory_order_relaxed);  // no bias in this process
    return;
  }
  // Another thread: the owner only comes here once the bias is revoked, which it is not.
  revoked_.store(true, std::memory_order_relaxed);
  process_wide_barrier();
  // Now either the owner's announcement is visible here, or its next look at revoked_ sees true.
  for (int spin = 0; owner_in_.load(std::memory_order_acquire); ++spin) {
    if (spin < 64)
      cpu_relax();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

#else

bool spin_lock::biasing_available() noexcept { return false; }

void spin_lock::settle_bias() noexcept {}

#endif

}  // namespace vramscope
