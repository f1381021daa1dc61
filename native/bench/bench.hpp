// What the benchmark's host part (bench.cpp) and its CUDA part (bench_gpu.cu) share: how a figure
// is measured (median of repetitions, each long enough to dwarf the clock) and what it records.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

namespace vramscope::bench {

struct timing_options {
  int reps = 11;           // repetitions; the figure is their median
  double min_rep_ms = 20;  // each repetition runs enough operations to last at least this long
  bool quick = false;      // smoke run: few, short repetitions and small kernels
  bool cpu_clock = false;  // time the strategies' pairs with thread CPU time instead of wall time
};

struct summary {
  double median_ns = 0;  // per operation
  double p10_ns = 0;
  double p90_ns = 0;
  int reps = 0;
  std::uint64_t ops_per_rep = 0;
};

// One measured (or deliberately not measured) cell of the results.
struct figure {
  std::string subject;   // table row: "caching.pytorch", "cudaMalloc+cudaFree", "device_bump_alloc"
  std::string kind;      // "strategy", "peer" (driver allocators) or "device" (in-kernel)
  std::string backing;   // "simulated", "cuda_malloc", ... or "CUDA runtime" for the peers
  std::string unit;      // what one operation is: "alloc+free pair", "device allocation"
  std::size_t size = 0;  // bytes per request
  std::size_t live_blocks = 0;  // blocks held live while the loop ran
  std::size_t live_block_size = 0;
  bool tracing = false;
  bool measured = false;
  summary result;
  std::string note;  // how it was timed, or why it was not measured
};

inline double percentile(std::vector<double> sorted, double q) {
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

// Wall time: what a caller waits, device synchronization included. The driver peers and kernels
// are always timed with it.
inline double wall_ns() {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count());
}

// This thread's CPU time: excludes the time the thread was not running, which on a busy machine
// (more runnable threads than cores) is otherwise counted in every repetition of 20 ms. Only
// meaningful for work that never waits (the strategies' pairs on the simulated backing).
inline double thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// `run(n)` performs n operations and returns the nanoseconds they took (it times itself, so it can
// leave out work that is not part of the operation, such as an arena's reset). n grows until one
// run lasts min_rep_ms, which also warms caches and pools.
template <class Run>
std::uint64_t calibrate(Run&& run, const timing_options& timing) {
  const double target_ns = timing.min_rep_ms * 1e6;
  std::uint64_t n = 1;
  double elapsed = run(n);
  while (elapsed < target_ns) {
    double factor = elapsed > 0 ? 1.25 * target_ns / elapsed : 100.0;
    factor = std::min(100.0, std::max(2.0, factor));
    n = static_cast<std::uint64_t>(std::ceil(static_cast<double>(n) * factor));
    elapsed = run(n);
  }
  return n;
}

inline summary summarize(const std::vector<double>& per_op, std::uint64_t n) {
  summary s;
  s.median_ns = percentile(per_op, 0.5);
  s.p10_ns = percentile(per_op, 0.1);
  s.p90_ns = percentile(per_op, 0.9);
  s.reps = static_cast<int>(per_op.size());
  s.ops_per_rep = n;
  return s;
}

// `reps` repetitions of n operations each give the per-operation median and spread.
template <class Run>
summary measure(Run&& run, const timing_options& timing) {
  const std::uint64_t n = calibrate(run, timing);
  std::vector<double> per_op;
  for (int r = 0; r < timing.reps; ++r) per_op.push_back(run(n) / static_cast<double>(n));
  return summarize(per_op, n);
}

// Two subjects measured in alternating repetitions, so that a change in the machine's load while
// they run weighs on both alike and their ratio stays meaningful (tracing on against off).
template <class RunA, class RunB>
std::pair<summary, summary> measure_interleaved(RunA&& run_a, RunB&& run_b,
                                                const timing_options& timing) {
  const std::uint64_t n_a = calibrate(run_a, timing);
  const std::uint64_t n_b = calibrate(run_b, timing);
  std::vector<double> per_a, per_b;
  for (int r = 0; r < timing.reps; ++r) {
    per_a.push_back(run_a(n_a) / static_cast<double>(n_a));
    per_b.push_back(run_b(n_b) / static_cast<double>(n_b));
  }
  return {summarize(per_a, n_a), summarize(per_b, n_b)};
}

#ifdef VRAMSCOPE_WITH_CUDA
// --- bench_gpu.cu: the driver's allocators as peers, the device, and in-kernel allocation.
struct gpu_description {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  std::string compute_capability;
  std::string driver_version;  // "13.0"
  std::string runtime_version;
  std::uint64_t total_memory = 0;
  std::uint64_t free_memory = 0;
};
gpu_description describe_gpu();

// cudaMalloc + cudaFree, each pair timed on the host; cudaFree's implicit synchronization is part of
// the figure.
figure measure_cuda_malloc_pair(std::size_t size, std::size_t live_blocks,
                                std::size_t live_block_size, const timing_options& timing);
// cudaMallocAsync + cudaFreeAsync on the device's default pool and the legacy default stream; n
// pairs, then one cudaStreamSynchronize, all timed.
figure measure_cuda_malloc_async_pair(std::size_t size, std::size_t live_blocks,
                                      std::size_t live_block_size, const timing_options& timing);
// device_bump_alloc from kernels (contended grid and one thread), with naive per-thread atomicAdd
// and device malloc/free as peers.
std::vector<figure> measure_device_allocation(const timing_options& timing);
#endif

}  // namespace vramscope::bench
