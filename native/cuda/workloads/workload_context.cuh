// What every built-in workload runs on: allocation through the strategy under test with its layout
// events timed and streamed, kernels that fill every allocated byte with a pattern of the block and
// verify it before the block is freed (so overlapping blocks or a block reused too early show up as
// corrupted bytes), streams, steps timed on the GPU, markers, and the out-of-memory that ends a
// workload. One workload_context per run (workloads.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "vramscope/allocator.hpp"
#include "vramscope/workloads.hpp"

namespace vramscope::workload {

// Thrown by the context when a request does not fit: the workload ends there (it was recorded).
struct out_of_memory_stop {
  std::string what;
};
// Thrown when the caller asked the run to stop.
struct cancelled_stop {};

struct block {
  void* ptr = nullptr;
  std::uint64_t bytes = 0;
  std::uint32_t id = 0;  // request id in the trace
  std::uint32_t serial =
      0;  // pattern seed: distinguishes a block from an earlier one at the same address
  unsigned stream = 0;  // stream index it was allocated on
};

class context {
 public:
  context(allocator& strategy, workload_sink& sink, unsigned streams,
          const std::atomic<bool>* cancel);
  ~context();
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  unsigned streams() const noexcept { return static_cast<unsigned>(streams_.size()); }
  cudaStream_t stream(unsigned index) const { return streams_.at(index); }

  // Allocates through the strategy on stream `s` (index); records the request and the layout.
  // Throws out_of_memory_stop (after recording an oom request and a failure) when it does not fit.
  block allocate(std::uint64_t bytes, unsigned s = 0);
  // Frees on stream `s` (stream-ordered when it is not the block's own).
  void free(const block& b, unsigned s);
  void free(const block& b) { free(b, b.stream); }

  // Kernels on stream `s`: write the block's pattern into every byte; check it (bad bytes add to a
  // device counter read at the end).
  void fill(const block& b, unsigned s);
  void verify(const block& b, unsigned s);
  void fill(const block& b) { fill(b, b.stream); }
  void verify(const block& b) { verify(b, b.stream); }
  // Copies the first `bytes` of `from` into `to` with the pattern of `from`, and makes `to` carry
  // that pattern over those bytes (growth by copy); verify(to) then checks the copy.
  void copy_prefix(const block& from, block& to, unsigned s);

  // Stream `waiter` waits for the work queued so far on `signaller`.
  void wait(unsigned waiter, unsigned signaller);

  // A step: GPU time from begin to end over every stream; ends with a marker "step N".
  void step_begin();
  void step_end();
  void marker(const std::string& name);
  // Drops every block of `live` at once: the strategy's reset() where it has one, else frees.
  void reset(std::vector<block>& live);

  std::mt19937_64& rng() noexcept { return rng_; }
  std::uint64_t uniform(std::uint64_t lo, std::uint64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng_);
  }
  void seed(std::uint64_t s) { rng_.seed(s); }

  // Verifies and frees every block still live (after an out-of-memory ended a workload mid-way).
  void release_all();
  // Waits for every stream; returns bytes verified and corrupted so far.
  void finish(workload_result& result);

  std::uint64_t allocations() const noexcept { return allocations_; }
  std::uint64_t frees() const noexcept { return frees_; }
  std::uint64_t steps() const noexcept { return step_; }
  double now_ns() const;

  allocator& strategy() noexcept { return strategy_; }
  workload_sink& sink() noexcept { return sink_; }

 private:
  class collecting_tracer;
  void emit_layout(double at, std::uint64_t latency_ns);
  void check_cancel() const;
  unsigned index_of(stream_t s) const;

  allocator& strategy_;
  workload_sink& sink_;
  const std::atomic<bool>* cancel_;
  std::vector<cudaStream_t> streams_;
  std::map<stream_t, unsigned> stream_index_;
  collecting_tracer* tracer_;
  std::chrono::steady_clock::time_point start_;
  std::mt19937_64 rng_{1};
  std::uint32_t next_id_ = 0;
  std::uint32_t next_serial_ = 1;
  std::uint64_t allocations_ = 0, frees_ = 0;
  std::uint32_t step_ = 0;
  cudaEvent_t step_start_ = nullptr, step_stop_ = nullptr;
  double step_host_start_ = 0;
  unsigned long long* bad_bytes_ = nullptr;  // device counter of verify kernels
  std::uint64_t verified_bytes_ = 0;
  std::map<std::uint32_t, block> live_;  // by id: what the workload holds now
};

}  // namespace vramscope::workload
