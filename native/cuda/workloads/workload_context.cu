// The workload context (workload_context.cuh): allocation with timed, streamed layout events, and
// the pattern kernels that make each workload touch every byte it allocates.
#include "workload_context.cuh"

#include <cuda_runtime.h>

#include "vramscope/errors.hpp"

namespace vramscope::workload {

namespace {

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    throw device_error(call, static_cast<int>(status), cudaGetErrorString(status));
  }
}

__host__ __device__ inline unsigned cookie_of(unsigned long long address, unsigned serial) {
  unsigned long long h = (address >> 8) * 0x9E3779B97F4A7C15ull ^ (serial * 0xBF58476D1CE4E5B9ull);
  h ^= h >> 31;
  return static_cast<unsigned>(h) | 1u;
}
__device__ inline unsigned word_at(unsigned cookie, unsigned long long i) {
  return cookie ^ static_cast<unsigned>(i * 0x85EBCA6Bull);
}

// Blocks handed out are 256 B aligned, so whole words; a tail that is not a multiple of 4 bytes
// is written byte by byte from the same word pattern.
__global__ void fill_kernel(unsigned char* p, unsigned long long bytes, unsigned cookie) {
  const unsigned long long words = bytes / 4;
  unsigned* w = reinterpret_cast<unsigned*>(p);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride)
    w[i] = word_at(cookie, i);
  if (blockIdx.x == 0)
    for (unsigned long long i = words * 4 + threadIdx.x; i < bytes; i += blockDim.x)
      p[i] = static_cast<unsigned char>(word_at(cookie, i / 4) >> (8 * (i & 3)));
}

__global__ void verify_kernel(const unsigned char* p, unsigned long long bytes, unsigned cookie,
                              unsigned long long* bad) {
  const unsigned long long words = bytes / 4;
  const unsigned* w = reinterpret_cast<const unsigned*>(p);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  unsigned long long wrong = 0;
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride)
    if (w[i] != word_at(cookie, i)) wrong += 4;
  if (blockIdx.x == 0)
    for (unsigned long long i = words * 4 + threadIdx.x; i < bytes; i += blockDim.x)
      if (p[i] != static_cast<unsigned char>(word_at(cookie, i / 4) >> (8 * (i & 3)))) ++wrong;
  if (wrong != 0) atomicAdd(bad, wrong);
}

// `to` gets `from`'s words over the first `bytes` (a copy, so its pattern is from's).
__global__ void copy_kernel(unsigned* to, const unsigned* from, unsigned long long words) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride)
    to[i] = from[i];
}

unsigned grid_for(unsigned long long bytes) {
  const unsigned long long blocks = (bytes / 4 + 1023) / 1024;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 1024 ? 1024 : blocks));
}

}  // namespace

// Collects the events one allocate/deallocate produces; the context stamps them with the call's
// time and latency once it returns.
class context::collecting_tracer final : public tracer {
 public:
  void record(const trace_event& event) override { events.push_back(event); }
  std::vector<trace_event> events;
};

context::context(allocator& strategy, workload_sink& sink, unsigned streams,
                 const std::atomic<bool>* cancel)
    : strategy_(strategy),
      sink_(sink),
      cancel_(cancel),
      tracer_(new collecting_tracer),
      start_(std::chrono::steady_clock::now()) {
  try {
    for (unsigned i = 0; i < (streams == 0 ? 1 : streams); ++i) {
      cudaStream_t s = nullptr;
      check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      stream_index_[reinterpret_cast<stream_t>(s)] = static_cast<unsigned>(streams_.size());
      streams_.push_back(s);
    }
    check(cudaEventCreate(&step_start_), "cudaEventCreate");
    check(cudaEventCreate(&step_stop_), "cudaEventCreate");
    // The verify counter comes from cudaMalloc directly: it is the harness's, not the workload's.
    check(cudaMalloc(reinterpret_cast<void**>(&bad_bytes_), sizeof *bad_bytes_), "cudaMalloc");
    check(cudaMemset(bad_bytes_, 0, sizeof *bad_bytes_), "cudaMemset");
  } catch (...) {
    delete tracer_;
    throw;
  }
  strategy_.set_tracer(tracer_);
}

context::~context() {
  strategy_.set_tracer(nullptr);
  delete tracer_;
  for (cudaStream_t s : streams_) (void)cudaStreamDestroy(s);
  if (step_start_) (void)cudaEventDestroy(step_start_);
  if (step_stop_) (void)cudaEventDestroy(step_stop_);
  if (bad_bytes_) (void)cudaFree(bad_bytes_);
}

double context::now_ns() const {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start_)
      .count();
}

void context::check_cancel() const {
  if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) throw cancelled_stop{};
}

unsigned context::index_of(stream_t s) const {
  auto it = stream_index_.find(s);
  return it == stream_index_.end() ? 0xffffffffu : it->second;
}

void context::emit_layout(double at, std::uint64_t latency_ns) {
  const std::uint32_t latency =
      latency_ns > 0xffffffffull ? 0xffffffffu : static_cast<std::uint32_t>(latency_ns);
  for (const trace_event& e : tracer_->events) sink_.layout(e, index_of(e.stream), at, latency);
  tracer_->events.clear();
}

block context::allocate(std::uint64_t bytes, unsigned s) {
  check_cancel();
  const stream_t handle = reinterpret_cast<stream_t>(streams_.at(s));
  const double at = now_ns();
  const auto t0 = std::chrono::steady_clock::now();
  void* p = nullptr;
  try {
    p = strategy_.allocate(bytes, handle);
  } catch (const vramscope::out_of_memory& e) {
    const auto t1 = std::chrono::steady_clock::now();
    sink_.request(3, 0, bytes, s, at);
    emit_layout(at, static_cast<std::uint64_t>(
                        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
    throw out_of_memory_stop{e.what()};
  }
  const auto t1 = std::chrono::steady_clock::now();
  block b{p, bytes, next_id_++, next_serial_++, s};
  ++allocations_;
  live_[b.id] = b;
  sink_.request(0, b.id, bytes, s, at);
  emit_layout(at, static_cast<std::uint64_t>(
                      std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
  return b;
}

void context::free(const block& b, unsigned s) {
  const stream_t handle = reinterpret_cast<stream_t>(streams_.at(s));
  const double at = now_ns();
  const auto t0 = std::chrono::steady_clock::now();
  strategy_.deallocate(b.ptr, handle);
  const auto t1 = std::chrono::steady_clock::now();
  ++frees_;
  live_.erase(b.id);
  sink_.request(1, b.id, 0, s, at);
  emit_layout(at, static_cast<std::uint64_t>(
                      std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
}

void context::fill(const block& b, unsigned s) {
  if (b.bytes == 0) return;
  fill_kernel<<<grid_for(b.bytes), 256, 0, streams_.at(s)>>>(
      static_cast<unsigned char*>(b.ptr), b.bytes,
      cookie_of(reinterpret_cast<unsigned long long>(b.ptr), b.serial));
  check(cudaGetLastError(), "fill kernel launch");
}

void context::verify(const block& b, unsigned s) {
  if (b.bytes == 0) return;
  verify_kernel<<<grid_for(b.bytes), 256, 0, streams_.at(s)>>>(
      static_cast<const unsigned char*>(b.ptr), b.bytes,
      cookie_of(reinterpret_cast<unsigned long long>(b.ptr), b.serial), bad_bytes_);
  check(cudaGetLastError(), "verify kernel launch");
  verified_bytes_ += b.bytes;
}

void context::copy_prefix(const block& from, block& to, unsigned s) {
  const std::uint64_t bytes = from.bytes < to.bytes ? from.bytes : to.bytes;
  // The copied prefix must read back as `from`'s pattern; then `to` is given its own pattern, so
  // that a later verify(to) checks all of it.
  fill(to, s);
  copy_kernel<<<grid_for(bytes), 256, 0, streams_.at(s)>>>(
      static_cast<unsigned*>(to.ptr), static_cast<const unsigned*>(from.ptr), bytes / 4);
  check(cudaGetLastError(), "copy kernel launch");
  // The copied words must equal the source's pattern at the source's address.
  block as_source = from;
  as_source.ptr = to.ptr;
  as_source.bytes = bytes / 4 * 4;
  verify_kernel<<<grid_for(as_source.bytes), 256, 0, streams_.at(s)>>>(
      static_cast<const unsigned char*>(to.ptr), as_source.bytes,
      cookie_of(reinterpret_cast<unsigned long long>(from.ptr), from.serial), bad_bytes_);
  check(cudaGetLastError(), "verify kernel launch");
  verified_bytes_ += as_source.bytes;
  fill(to, s);  // from here on `to` holds its own pattern again
}

void context::wait(unsigned waiter, unsigned signaller) {
  cudaEvent_t e;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  check(cudaEventRecord(e, streams_.at(signaller)), "cudaEventRecord");
  check(cudaStreamWaitEvent(streams_.at(waiter), e, 0), "cudaStreamWaitEvent");
  check(cudaEventDestroy(e), "cudaEventDestroy");
}

void context::step_begin() {
  check_cancel();
  for (unsigned i = 1; i < streams(); ++i) wait(0, i);
  check(cudaEventRecord(step_start_, streams_[0]), "cudaEventRecord");
  for (unsigned i = 1; i < streams(); ++i) wait(i, 0);
  step_host_start_ = now_ns();
}

void context::step_end() {
  for (unsigned i = 1; i < streams(); ++i) wait(0, i);
  check(cudaEventRecord(step_stop_, streams_[0]), "cudaEventRecord");
  check(cudaEventSynchronize(step_stop_), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, step_start_, step_stop_), "cudaEventElapsedTime");
  const double end = now_ns();
  sink_.step(step_, static_cast<double>(ms) * 1e6, end - step_host_start_);
  marker("step " + std::to_string(step_));
  ++step_;
  // Frees deferred to other streams complete once those are done.
  strategy_.process_deferred();
  emit_layout(end, 0);
}

void context::marker(const std::string& name) { sink_.marker(name, now_ns()); }

void context::reset(std::vector<block>& live) {
  for (block& b : live) verify(b);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  if (strategy_.supports_reset()) {
    const double at = now_ns();
    const auto t0 = std::chrono::steady_clock::now();
    strategy_.reset();
    const auto t1 = std::chrono::steady_clock::now();
    for (const block& b : live)
      sink_.request(1, b.id, 0, b.stream, at), ++frees_, live_.erase(b.id);
    emit_layout(at, static_cast<std::uint64_t>(
                        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
  } else {
    for (const block& b : live) free(b);
  }
  live.clear();
}

void context::release_all() {
  std::vector<block> still;
  for (auto& [id, b] : live_) still.push_back(b);
  for (const block& b : still) {
    verify(b);
    free(b);
  }
}

void context::finish(workload_result& result) {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  strategy_.synchronize_deferred();
  emit_layout(now_ns(), 0);
  unsigned long long bad = 0;
  check(cudaMemcpy(&bad, bad_bytes_, sizeof bad, cudaMemcpyDeviceToHost), "cudaMemcpy");
  result.corrupted_bytes = bad;
  result.verified_bytes = verified_bytes_;
  result.allocations = allocations_;
  result.frees = frees_;
  result.steps = step_;
}

}  // namespace vramscope::workload
