// In-kernel half of the device_bump strategy: threads take blocks from the strategy's region with
// one atomicAdd per warp (threads of a warp that allocate together from the same state share one
// atomic, as in NVIDIA's warp-aggregated atomics), and the host adopts the final offset afterwards.
// The host half is vramscope/device_bump.hpp; device_bump_kernel_state below joins the two.
//
//   vramscope::device_bump& bump = ...;                  // make_allocator("device_bump", ...)
//   vramscope::device_bump_kernel_state state(bump);     // copies base/capacity/offset to the device
//   my_kernel<<<g, b>>>(state.get());                    // device_bump_alloc(state, bytes)
//   state.adopt();                                       // waits, then bump.set_offset_from_device
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

#include "vramscope/device_bump.hpp"
#include "vramscope/errors.hpp"

namespace vramscope {

// Lives in device memory while kernels allocate from it. Invariant once they have finished: every
// block handed out lies in [base, base + min(offset, capacity)), and no two overlap. offset may pass
// capacity: a warp whose request did not fit has still added it (those bytes were never handed
// out), which is why the host adopts min(offset, capacity). A warp that finds offset already at or
// past capacity adds nothing, so the overshoot stays below a few requests per resident warp and the
// counter cannot wrap.
struct device_bump_state {
  unsigned long long base;      // device address of the region (256 B aligned)
  unsigned long long capacity;  // bytes in the region
  unsigned long long offset;    // bytes taken from its start; multiples of 256
};
static_assert(std::is_standard_layout<device_bump_state>::value &&
                  std::is_trivially_copyable<device_bump_state>::value,
              "device_bump_state is copied to and from the device as bytes");

#if defined(__CUDACC__)

namespace detail {
__device__ __forceinline__ unsigned device_bump_lane() {
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}
}  // namespace detail

// Returns a block of `bytes` whose address is a multiple of `alignment` (a power of two; below
// 256 B it is taken as 256 B), or nullptr when the region has no room left, `bytes` is 0 or the
// alignment is not a power of two. Any subset of a warp's threads may call it, with different
// states, sizes and alignments. Each block is sized and placed in 256 B units, so the offset stays
// a multiple of 256 B.
__device__ inline void* device_bump_alloc(device_bump_state* state, unsigned long long bytes,
                                          unsigned alignment = 256) {
  const unsigned long long capacity = state->capacity;
  const unsigned long long align = alignment < 256u ? 256ull : alignment;
  const bool valid =
      bytes != 0 && (align & (align - 1)) == 0 && bytes <= capacity && align - 256 <= capacity;
  // A chunk this long, starting on a 256 B boundary, holds an aligned block of `bytes`.
  const unsigned long long need = valid ? ((bytes + 255ull) & ~255ull) + (align - 256) : 0;

  // The threads of this warp allocating from the same state now: one of them (the lowest lane)
  // bumps the offset by all their needs, each takes its part after the needs of lower lanes.
  const unsigned active = __activemask();
  const unsigned peers = __match_any_sync(active, reinterpret_cast<unsigned long long>(state));
  const unsigned lane = detail::device_bump_lane();
  const unsigned leader = static_cast<unsigned>(__ffs(peers)) - 1;
  unsigned long long before = 0, total = 0;
  for (unsigned rest = peers; rest != 0; rest &= rest - 1) {
    const unsigned other = static_cast<unsigned>(__ffs(rest)) - 1;
    const unsigned long long other_need = __shfl_sync(peers, need, other);
    total += other_need;
    if (other < lane) before += other_need;
  }
  unsigned long long start = capacity;  // a region already full: everyone fails, nothing is added
  if (lane == leader && total != 0) {
    const unsigned long long seen = *reinterpret_cast<volatile unsigned long long*>(&state->offset);
    if (seen < capacity) start = atomicAdd(&state->offset, total);
  }
  start = __shfl_sync(peers, start, leader);

  const unsigned long long mine = start + before;
  if (need == 0 || mine >= capacity || need > capacity - mine) return nullptr;
  const unsigned long long chunk = state->base + mine;
  return reinterpret_cast<void*>((chunk + align - 1) & ~(align - 1));
}

#endif  // __CUDACC__

// Host: owns a device_bump_state in device memory for the kernels of one launch sequence, filled
// from a device_bump strategy, and hands what the kernels took back to it. The strategy must not
// allocate on the host between construction and adopt(): both sides bump the same bytes.
class device_bump_kernel_state {
 public:
  explicit device_bump_kernel_state(device_bump& bump, cudaStream_t stream = 0)
      : bump_(bump), stream_(stream) {
    const device_bump_view view = bump.view();  // the region exists from here on
    host_ = {view.base, view.capacity, bump.offset()};
    check(cudaMalloc(reinterpret_cast<void**>(&device_), sizeof(device_bump_state)), "cudaMalloc");
    cudaError_t status =
        cudaMemcpyAsync(device_, &host_, sizeof host_, cudaMemcpyHostToDevice, stream_);
    if (status == cudaSuccess) status = cudaStreamSynchronize(stream_);
    if (status != cudaSuccess) {
      (void)cudaFree(device_);
      check(status, "cudaMemcpyAsync");
    }
  }
  ~device_bump_kernel_state() { (void)cudaFree(device_); }
  device_bump_kernel_state(const device_bump_kernel_state&) = delete;
  device_bump_kernel_state& operator=(const device_bump_kernel_state&) = delete;

  // What kernels are given.
  device_bump_state* get() const noexcept { return device_; }

  // Waits for the stream's work, reads the state back and moves the strategy's offset to where the
  // kernels left it (rounded up to the strategy's alignment, at most its capacity). Returns the
  // state as the kernels left it.
  device_bump_state adopt() {
    check(cudaMemcpyAsync(&host_, device_, sizeof host_, cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    const std::uint64_t rounded = device_bump_round(host_.offset, bump_.alignment());
    bump_.set_offset_from_device(rounded < host_.offset ? host_.capacity : rounded);
    return host_;
  }

 private:
  static void check(cudaError_t status, const char* call) {
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      throw device_error(call, static_cast<int>(status), cudaGetErrorString(status));
    }
  }

  device_bump& bump_;
  cudaStream_t stream_;
  device_bump_state host_{};
  device_bump_state* device_ = nullptr;
};

}  // namespace vramscope
