// The shared part of the CUDA backings: typed errors from CUDA status codes, regions through
// cudaMalloc/cudaFree, a reusable pool of timing-free events, and the optional capacity cap.
#include "cuda_common.hpp"

#include <string>

namespace vramscope::cuda {

void throw_device_error(const char* call, cudaError_t status) {
  (void)cudaGetLastError();
  throw device_error(call, static_cast<int>(status), cudaGetErrorString(status));
}

std::size_t device_free_memory() noexcept {
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return free_bytes;
}

cuda_backing_base::cuda_backing_base(const cuda_options& options)
    : device_(options.device), capacity_(options.capacity), capped_(options.capacity != 0) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  if (!capped_) {
    std::size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    capacity_ = free_bytes;
  }
}

cuda_backing_base::~cuda_backing_base() {
  for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
}

void cuda_backing_base::use_device() const {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != device_)
    check(cudaSetDevice(device_), "cudaSetDevice");
}

void cuda_backing_base::check_cap(std::size_t bytes, const char* call) const {
  if (capped_ && bytes > available())
    throw out_of_memory(
        bytes, available(),
        std::string("device capped at ") + format_bytes(capacity_) + " (" + call + ")");
}

void cuda_backing_base::throw_out_of_memory(const char* call, std::size_t requested) const {
  (void)cudaGetLastError();
  const std::size_t device_free = device_free_memory();
  const std::size_t left = available() < device_free ? available() : device_free;
  throw out_of_memory(requested, left, std::string("device (") + call + ")");
}

std::size_t cuda_backing_base::available() const noexcept {
  const std::size_t used = physical_in_use();
  return used >= capacity_ ? 0 : capacity_ - used;
}

// --- regions -------------------------------------------------------------------------------------

address_t cuda_backing_base::allocate_region(std::size_t bytes) {
  if (bytes == 0) throw invalid_argument(std::string(name()) + " backing: region of 0 bytes");
  check_cap(bytes, "cudaMalloc");
  use_device();
  void* p = nullptr;
  cudaError_t status = cudaMalloc(&p, bytes);
  if (status == cudaErrorMemoryAllocation) throw_out_of_memory("cudaMalloc", bytes);
  if (status != cudaSuccess) throw_device_error("cudaMalloc", status);
  region_bytes_ += bytes;
  ++calls_.region_alloc;
  return reinterpret_cast<address_t>(p);
}

void cuda_backing_base::free_region(address_t address, std::size_t bytes) {
  use_device();
  check(cudaFree(reinterpret_cast<void*>(address)), "cudaFree");
  region_bytes_ -= bytes;
  ++calls_.region_free;
}

// --- events ----------------------------------------------------------------------------------------

cudaEvent_t cuda_backing_base::event_of(event_t e) const {
  if (e == 0 || e > events_.size()) throw invalid_argument("CUDA backing: unknown event handle");
  return events_[e - 1];
}

event_t cuda_backing_base::record_event(stream_t stream) {
  event_t e;
  if (!free_events_.empty()) {
    e = free_events_.back();
    free_events_.pop_back();
  } else {
    use_device();
    cudaEvent_t created;
    check(cudaEventCreateWithFlags(&created, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    events_.push_back(created);
    e = events_.size();
  }
  cudaError_t status = cudaEventRecord(events_[e - 1], to_cuda(stream));
  if (status != cudaSuccess) {
    free_events_.push_back(e);
    throw_device_error("cudaEventRecord", status);
  }
  ++calls_.event_record;
  return e;
}

bool cuda_backing_base::event_complete(event_t event) {
  cudaError_t status = cudaEventQuery(event_of(event));
  if (status == cudaSuccess) return true;
  // Not ready is an answer, not an error; clearing the last error here could swallow one of the
  // program's own.
  if (status == cudaErrorNotReady) return false;
  throw_device_error("cudaEventQuery", status);
}

void cuda_backing_base::wait_event(event_t event) {
  check(cudaEventSynchronize(event_of(event)), "cudaEventSynchronize");
  ++calls_.synchronize;
}

void cuda_backing_base::release_event(event_t event) {
  if (event != 0 && event <= events_.size()) free_events_.push_back(event);
}

void cuda_backing_base::synchronize() {
  use_device();
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  ++calls_.synchronize;
}

}  // namespace vramscope::cuda
