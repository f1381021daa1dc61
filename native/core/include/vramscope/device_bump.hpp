// device_bump: a bump allocator whose offset kernels can advance themselves. The host side is an
// ordinary strategy (registered as "device_bump"); this header exposes the class so that CUDA code
// can hand a kernel the region and the offset, let it atomicAdd, and adopt the result.
//
// Protocol for kernel allocation (the CUDA side implements it with a device-resident counter):
//   1. view = bump.view();              the region exists from here on (base, capacity, alignment)
//   2. copy bump.offset() into a device counter; launch the kernel; inside it
//        old = atomicAdd(&counter, device_bump_round(bytes, view.alignment));
//        ok  = old + rounded <= view.capacity;  pointer = view.base + old
//   3. after the kernel: bump.set_offset_from_device(counter value)
// Host allocations must not run between 2 and 3: both sides bump the same bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "vramscope/allocator.hpp"

#if defined(__CUDACC__)
#define VRAMSCOPE_HOST_DEVICE __host__ __device__
#else
#define VRAMSCOPE_HOST_DEVICE
#endif

namespace vramscope {

// The rounding both sides apply before bumping the offset; alignment is a power of two.
VRAMSCOPE_HOST_DEVICE inline std::uint64_t device_bump_round(std::uint64_t bytes,
                                                             std::uint64_t alignment) {
  return (bytes + alignment - 1) & ~(alignment - 1);
}

// What a kernel needs, passed by value.
struct device_bump_view {
  std::uint64_t base;       // device address of the region
  std::uint64_t capacity;   // bytes in the region
  std::uint64_t alignment;  // every allocation is rounded to this
};

struct device_bump_options {
  std::uint64_t capacity = 1 * GiB;
  std::uint64_t alignment = 256;  // a power of two of at least 256 B
};

class device_bump final : public allocator {
 public:
  explicit device_bump(backing& b, const device_bump_options& options = {});
  ~device_bump() override;

  // The region's address; 0 until the first allocation or ensure_region().
  address_t base() const noexcept { return base_; }
  std::uint64_t capacity() const noexcept { return capacity_; }
  std::uint64_t alignment() const noexcept { return alignment_; }
  // Bytes taken from the start of the region, by the host and by adopted kernel allocations.
  std::uint64_t offset() const noexcept { return offset_.load(std::memory_order_acquire); }

  // Obtains the region now (a kernel needs it before any host allocation); returns base().
  // Throws out_of_memory when the device cannot provide it.
  address_t ensure_region();
  device_bump_view view() {
    ensure_region();
    return {base_, capacity_, alignment_};
  }

  // Adopts the offset a kernel's counter reached. The bytes between the host's offset and the new
  // one were handed out by kernels and are not tracked one by one: the walk shows them as one
  // unusable block (aux 1) until reset(). A counter past the capacity (kernels that failed still
  // added) is taken as the capacity. Throws invalid_argument when the offset moves backwards.
  void set_offset_from_device(std::uint64_t device_offset);

 private:
  allocation do_allocate(std::size_t bytes, stream_t stream, std::uint32_t& cookie) override;
  void do_deallocate(address_t address, std::uint64_t rounded, std::uint32_t cookie,
                     stream_t stream) override;
  void do_walk(layout_visitor& visitor) const override;
  bool do_was_freed(address_t address) const override;
  void do_trim() override;
  bool do_supports_reset() const noexcept override { return true; }
  void do_reset() override;
  allocation allocate_slow(std::size_t bytes, std::uint32_t& cookie);
  void mark_freed(address_t address);

  std::uint64_t capacity_;
  std::uint64_t alignment_;
  address_t base_ = 0;
  std::atomic<std::uint64_t> offset_{0};
  // Block starts of [base_, base_ + offset) in address order; each block ends where the next starts
  // (the last at the offset). Low bits: 1 = freed by the host, 2 = taken by kernels.
  std::vector<address_t> blocks_;
};

}  // namespace vramscope
