// Backings: where an allocator's bytes come from. Every strategy runs on the simulated backing (a
// fake address space, nothing touched) and on a real one (cudaMalloc, CUDA VMM, cudaMallocAsync).
// A backing offers up to three capabilities: plain regions, virtual memory (reserve address space,
// map and unmap granules) and stream-ordered allocation; and events, to order reuse across streams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vramscope/types.hpp"

namespace vramscope {

// Counts of calls into the device's memory API (or their simulated equivalents).
struct device_call_counts {
  std::uint64_t region_alloc = 0;  // cudaMalloc
  std::uint64_t region_free = 0;   // cudaFree
  std::uint64_t va_reserve = 0;    // cuMemAddressReserve
  std::uint64_t va_release = 0;    // cuMemAddressFree
  std::uint64_t map = 0;           // cuMemCreate + cuMemMap + cuMemSetAccess, per call
  std::uint64_t unmap = 0;         // cuMemUnmap + cuMemRelease, per call (a remap counts one
                                   // unmap and one map: cuMemUnmap, then cuMemMap of its handles)
  std::uint64_t async_alloc = 0;   // cudaMallocAsync
  std::uint64_t async_free = 0;    // cudaFreeAsync
  std::uint64_t event_record = 0;  // cudaEventRecord
  std::uint64_t synchronize = 0;   // waits on events or streams

  std::uint64_t total() const {
    return region_alloc + region_free + va_reserve + va_release + map + unmap + async_alloc +
           async_free;
  }
};

// What a stream-ordered pool (cudaMemPool) reports: bytes in use by the application and bytes the
// pool holds from the device, now and at their high-water marks.
struct async_pool_stats {
  std::uint64_t used_current = 0;
  std::uint64_t used_high = 0;
  std::uint64_t reserved_current = 0;
  std::uint64_t reserved_high = 0;
};

using event_t = std::uint64_t;  // an opaque event handle; 0 is never a valid event

enum class backing_kind { simulated, cuda_malloc, cuda_vmm, cuda_async };
const char* backing_kind_name(backing_kind kind) noexcept;
backing_kind parse_backing_kind(const std::string& name);  // throws invalid_argument

class backing {
 public:
  virtual ~backing() = default;
  backing(const backing&) = delete;
  backing& operator=(const backing&) = delete;

  virtual backing_kind kind() const noexcept = 0;
  const char* name() const noexcept { return backing_kind_name(kind()); }
  // True when the addresses are real device memory that kernels may touch.
  virtual bool is_device_memory() const noexcept = 0;

  virtual bool has_regions() const noexcept { return true; }
  virtual bool has_vmm() const noexcept { return false; }
  virtual bool has_async() const noexcept { return false; }

  // --- plain regions (cudaMalloc): aligned to at least 256 B; throws out_of_memory.
  virtual address_t allocate_region(std::size_t bytes) = 0;
  virtual void free_region(address_t address, std::size_t bytes) = 0;

  // --- virtual memory (CUDA VMM): all throw unsupported where has_vmm() is false.
  // Mapping granularity (2 MiB on current GPUs); map/unmap sizes and addresses are multiples.
  virtual std::size_t granularity() const noexcept { return 2 * MiB; }
  virtual address_t reserve_address_space(std::size_t bytes, std::size_t alignment);
  virtual void release_address_space(address_t address, std::size_t bytes);
  // Backs [address, address + bytes) with physical memory; all or nothing; throws out_of_memory.
  virtual void map(address_t address, std::size_t bytes);
  virtual void unmap(address_t address, std::size_t bytes);
  // Moves the physical memory mapped at [from, from + bytes) to the unmapped, reserved range
  // [to, to + bytes) (both granule-aligned): what was mapped at `from` is mapped at `to` instead,
  // with no memory obtained or released on the way (cuMemUnmap, then cuMemMap of the same
  // handles). The default unmaps and maps afresh, which costs the same memory but not the same
  // contents; the CUDA VMM backing keeps the handles.
  virtual void remap(address_t from, address_t to, std::size_t bytes);

  // --- stream-ordered allocation (cudaMallocAsync on an owned pool).
  virtual address_t allocate_async(std::size_t bytes, stream_t stream);
  virtual void free_async(address_t address, std::size_t bytes, stream_t stream);
  virtual void set_release_threshold(std::uint64_t bytes);
  virtual void trim_async_pool(std::size_t min_bytes_to_keep);
  virtual async_pool_stats async_stats() const;

  // --- events: order reuse of a block freed on one stream after work queued on another.
  virtual event_t record_event(stream_t stream) = 0;
  virtual bool event_complete(event_t event) = 0;  // non-blocking
  virtual void wait_event(event_t event) = 0;      // blocks until complete
  virtual void release_event(event_t event) = 0;
  virtual void synchronize() = 0;  // the whole device

  // --- memory: bytes of physical memory this backing may still hand out, and its total.
  virtual std::size_t capacity() const noexcept = 0;
  virtual std::size_t available() const noexcept = 0;

  const device_call_counts& calls() const noexcept { return calls_; }

 protected:
  backing() = default;
  device_call_counts calls_;
};

// The simulated backing: a deterministic fake address space with a physical-memory cap. Events
// complete in logical time: an event recorded at time t completes once the clock reaches
// t + completion_delay_ns (advance the clock with set_time), or at synchronize().
struct simulated_options {
  std::size_t capacity = 80 * GiB;            // physical bytes that may be mapped or allocated
  std::size_t granularity = 2 * MiB;          // VMM granule
  std::uint64_t completion_delay_ns = 10000;  // how long queued stream work takes to finish
  address_t base_address =
      0x7f0000000000;  // where first-fit addresses start (placements may be below)
  std::uint64_t async_release_threshold = 0;  // cudaMemPool default: release at each sync
  std::size_t async_chunk_size = 32 * MiB;    // what cudaMemPool obtains at a time (H100, CUDA 13)
  // Where the driver placed each region of a recorded run, in order (e.g. the segment_alloc
  // addresses of a PyTorch snapshot). Region i goes to region_placement[i] when that range is
  // free (anywhere from 64 KiB up, below base_address too), else first fit. Placement matters to policies that break ties by address (PyTorch's
  // best fit), so replaying a recording with its own placement reproduces it exactly.
  std::vector<address_t> region_placement;
};

class simulated_backing;
std::unique_ptr<simulated_backing> make_simulated_backing(const simulated_options& options = {});

// Any backing by kind. The CUDA kinds come from the backing registry (backing_registry.hpp), filled
// by the CUDA backings (native/cuda/) where the program links them: asking for one throws
// unsupported where it does not (a build without CUDA) and no_cuda_device where there is no driver
// or device; never at load time.
struct cuda_options {
  int device = 0;
  std::size_t capacity = 0;                   // 0: the device's free memory at creation
  std::uint64_t async_release_threshold = 0;  // cuda_async: cudaMemPoolAttrReleaseThreshold
};
std::unique_ptr<backing> make_backing(backing_kind kind, const simulated_options& simulated = {},
                                      const cuda_options& cuda = {});

// Whether this program links the CUDA backings, and whether a device can be used now. The second
// is false, with a reason, where there is no driver, no device or no CUDA built; it never throws.
bool built_with_cuda() noexcept;
bool cuda_device_available(std::string* reason = nullptr) noexcept;

}  // namespace vramscope
