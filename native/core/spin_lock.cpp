// The biased lock's rare paths: becoming the owner, revoking the bias, and the process-wide memory
// barrier that makes revoking safe (spin_lock.hpp says why).
#include "vramscope/spin_lock.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#ifdef VRAMSCOPE_BIASED_LOCK
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace vramscope {

#ifdef VRAMSCOPE_BIASED_LOCK
namespace {

// membarrier(2)'s commands (Linux ABI, <linux/membarrier.h>; spelled out so that old kernel headers,
// which lack the expedited ones, still build: where the system call itself is unknown there is no bias).
constexpr int cmd_query = 0;
constexpr int cmd_global = 1 << 0;
constexpr int cmd_private_expedited = 1 << 3;
constexpr int cmd_register_private_expedited = 1 << 4;

long membarrier(int command) {
#ifdef __NR_membarrier
  return syscall(__NR_membarrier, command, 0, 0);
#else
  (void)command;
  errno = ENOSYS;
  return -1;
#endif
}

// The private expedited barrier: an interrupt to each CPU now running one of this process's
// threads (the others pass a barrier when they are next scheduled). A process registers once.
bool register_private_expedited() {
  const long supported = membarrier(cmd_query);
  if (supported < 0 || (supported & cmd_private_expedited) == 0 ||
      (supported & cmd_register_private_expedited) == 0)
    return false;
  return membarrier(cmd_register_private_expedited) == 0;
}

// Every thread of the process has executed a full memory barrier between the call and its return.
void process_wide_barrier() {
  if (membarrier(cmd_private_expedited) == 0) return;
  // A child after fork() may have to register again.
  if (errno == EPERM && register_private_expedited() && membarrier(cmd_private_expedited) == 0)
    return;
  // The slow global barrier (a grace period of every CPU) gives the same guarantee.
  const long supported = membarrier(cmd_query);
  if (supported > 0 && (supported & cmd_global) != 0 && membarrier(cmd_global) == 0) return;
  // The owner could be inside its critical section unseen: going on would break the exclusion.
  std::fputs(
      "vramscope: membarrier(2) failed while revoking a lock's bias; cannot continue safely\n",
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
    if (biasing_available()) owner_.store(this_thread_id(), std::memory_order_relaxed);
    else revoked_.store(true, std::memory_order_relaxed);  // no bias in this process
    return;
  }
  // Another thread: the owner only comes here once the bias is revoked, which it is not.
  revoked_.store(true, std::memory_order_relaxed);
  process_wide_barrier();
  // Now either the owner's announcement is visible here, or its next look at revoked_ sees true.
  for (int spin = 0; owner_in_.load(std::memory_order_acquire); ++spin) {
    if (spin < 64) cpu_relax();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

#else

bool spin_lock::biasing_available() noexcept { return false; }

void spin_lock::settle_bias() noexcept {}

#endif

}  // namespace vramscope
