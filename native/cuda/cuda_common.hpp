// What every CUDA backing shares: turning CUDA errors into vramscope's typed errors, and a base
// class with regions (cudaMalloc/cudaFree), a pool of events, device synchronization, and the
// physical-memory cap that makes exhaustion testable on an 80 GiB device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "vramscope/backing.hpp"
#include "vramscope/errors.hpp"

namespace vramscope::cuda {

// Throws device_error naming `call`, with CUDA's own text. The runtime's last error is cleared so
// the failure does not resurface in an unrelated later check.
[[noreturn]] void throw_device_error(const char* call, cudaError_t status);
inline void check(cudaError_t status, const char* call) {
  if (VRAMSCOPE_UNLIKELY(status != cudaSuccess)) throw_device_error(call, status);
}
// The device's free memory now (cudaMemGetInfo); 0 if even that fails.
std::size_t device_free_memory() noexcept;

inline cudaStream_t to_cuda(stream_t s) noexcept { return reinterpret_cast<cudaStream_t>(s); }

class cuda_backing_base : public backing {
 public:
  cuda_backing_base(const cuda_options& options);
  ~cuda_backing_base() override;

  bool is_device_memory() const noexcept override { return true; }

  address_t allocate_region(std::size_t bytes) override;
  void free_region(address_t address, std::size_t bytes) override;

  event_t record_event(stream_t stream) override;
  bool event_complete(event_t event) override;
  void wait_event(event_t event) override;
  void release_event(event_t event) override;
  void synchronize() override;

  std::size_t capacity() const noexcept override { return capacity_; }
  std::size_t available() const noexcept override;

 protected:
  // Makes this backing's device current on the calling thread (cheap when it already is).
  void use_device() const;
  // Physical bytes this backing holds from the device, counted against capacity_.
  virtual std::size_t physical_in_use() const noexcept { return region_bytes_; }
  // Throws out_of_memory when `bytes` more would exceed capacity_ (the cap, when one was set).
  void check_cap(std::size_t bytes, const char* call) const;
  // The device said no: out_of_memory with what is left under the cap or on the device, whichever
  // is less.
  [[noreturn]] void throw_out_of_memory(const char* call, std::size_t requested) const;

  int device_;
  std::size_t capacity_;
  bool capped_;  // options.capacity was given: enforce it ourselves, before the device would
  std::size_t region_bytes_ = 0;

 private:
  cudaEvent_t event_of(event_t e) const;
  // Events are reused: creating one is a driver call, recording a cached one is not.
  std::vector<cudaEvent_t> events_;  // handle h is events_[h - 1]
  std::vector<event_t> free_events_;
};

// One file each: cuda_vmm_backing.cpp, cuda_async_backing.cpp.
std::unique_ptr<backing> make_vmm_backing(const cuda_options& options);
std::unique_ptr<backing> make_async_backing(const cuda_options& options);

}  // namespace vramscope::cuda
