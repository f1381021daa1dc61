// The benchmark's CUDA half: what the GPU is, the driver's allocators measured as the strategies'
// peers (cudaMalloc+cudaFree, cudaMallocAsync+cudaFreeAsync), and device_bump_alloc measured
// inside kernels beside a naive per-thread atomicAdd and device-side malloc/free.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "bench.hpp"
#include "vramscope/device_bump.cuh"
#include "vramscope/errors.hpp"

namespace vramscope::bench {
namespace {

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(status));
  }
}

std::string version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

figure peer_figure(const char* subject, std::size_t size, std::size_t live_blocks,
                   std::size_t live_block_size) {
  figure f;
  f.subject = subject;
  f.kind = "peer";
  f.backing = "CUDA runtime";
  f.unit = "alloc+free pair";
  f.size = size;
  f.live_blocks = live_blocks;
  f.live_block_size = live_blocks ? live_block_size : 0;
  return f;
}

}  // namespace

gpu_description describe_gpu() {
  gpu_description d;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  d.name = prop.name;
  d.compute_capability = std::to_string(prop.major) + std::to_string(prop.minor);
  int driver = 0, runtime = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  d.driver_version = version_text(driver);
  d.runtime_version = version_text(runtime);
  std::size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  d.total_memory = total_bytes;
  d.free_memory = free_bytes;
  return d;
}

figure measure_cuda_malloc_pair(std::size_t size, std::size_t live_blocks,
                                std::size_t live_block_size, const timing_options& timing) {
  figure f = peer_figure("cudaMalloc+cudaFree", size, live_blocks, live_block_size);
  std::vector<void*> held;
  try {
    check(cudaSetDevice(0), "cudaSetDevice");
    for (std::size_t i = 0; i < live_blocks; ++i) {
      void* p = nullptr;
      check(cudaMalloc(&p, live_block_size), "cudaMalloc (held block)");
      held.push_back(p);
    }
    auto run = [&](std::uint64_t n) {
      const double start = wall_ns();
      for (std::uint64_t i = 0; i < n; ++i) {
        void* p = nullptr;
        check(cudaMalloc(&p, size), "cudaMalloc");
        check(cudaFree(p), "cudaFree");
      }
      return wall_ns() - start;
    };
    f.result = measure(run, timing);
    f.measured = true;
    f.note =
        "host wall time of cudaMalloc then cudaFree, pair after pair on an idle device "
        "(cudaFree synchronizes the device)";
  } catch (const std::exception& e) {
    f.note = std::string("not measured: ") + e.what();
  }
  for (void* p : held) (void)cudaFree(p);
  return f;
}

figure measure_cuda_malloc_async_pair(std::size_t size, std::size_t live_blocks,
                                      std::size_t live_block_size, const timing_options& timing) {
  figure f = peer_figure("cudaMallocAsync+cudaFreeAsync", size, live_blocks, live_block_size);
  const cudaStream_t stream = 0;  // the legacy default stream
  std::vector<void*> held;
  try {
    check(cudaSetDevice(0), "cudaSetDevice");
    cudaMemPool_t pool = nullptr;
    check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
    std::uint64_t threshold = 0;
    check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
          "cudaMemPoolGetAttribute");
    for (std::size_t i = 0; i < live_blocks; ++i) {
      void* p = nullptr;
      check(cudaMallocAsync(&p, live_block_size, stream), "cudaMallocAsync (held block)");
      held.push_back(p);
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    auto run = [&](std::uint64_t n) {
      const double start = wall_ns();
      for (std::uint64_t i = 0; i < n; ++i) {
        void* p = nullptr;
        check(cudaMallocAsync(&p, size, stream), "cudaMallocAsync");
        check(cudaFreeAsync(p, stream), "cudaFreeAsync");
      }
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      return wall_ns() - start;
    };
    f.result = measure(run, timing);
    f.measured = true;
    f.note =
        "host wall time of N × (cudaMallocAsync + cudaFreeAsync) on the device's default pool "
        "(release threshold " +
        format_bytes(threshold) +
        ") and the legacy default stream, "
        "then one cudaStreamSynchronize, divided by N";
  } catch (const std::exception& e) {
    f.note = std::string("not measured: ") + e.what();
  }
  for (void* p : held) (void)cudaFreeAsync(p, stream);
  (void)cudaStreamSynchronize(stream);
  return f;
}

// --- in-kernel allocation ----------------------------------------------------------------------------

namespace {

// Results are folded into one value written only when it is odd, which blocks of 256 B alignment
// never make it: nothing is stored, yet the compiler must compute every allocation.
__global__ void bump_kernel(device_bump_state* state, int allocs_per_thread,
                            unsigned long long bytes, unsigned long long* sink) {
  unsigned long long folded = 0;
  for (int i = 0; i < allocs_per_thread; ++i)
    folded ^= reinterpret_cast<unsigned long long>(device_bump_alloc(state, bytes));
  if (folded & 1) *sink = folded;
}

// The textbook alternative: one atomicAdd per thread and allocation.
__global__ void atomic_per_thread_kernel(device_bump_state* state, int allocs_per_thread,
                                         unsigned long long bytes, unsigned long long* sink) {
  const unsigned long long need = (bytes + 255) & ~255ull;
  unsigned long long folded = 0;
  for (int i = 0; i < allocs_per_thread; ++i) {
    const unsigned long long old = atomicAdd(&state->offset, need);
    folded ^= old + need <= state->capacity ? state->base + old : 0;
  }
  if (folded & 1) *sink = folded;
}

__global__ void device_malloc_kernel(int allocs_per_thread, unsigned long long bytes,
                                     unsigned long long* sink, unsigned long long* failures) {
  unsigned long long folded = 0, failed = 0;
  for (int i = 0; i < allocs_per_thread; ++i) {
    void* p = malloc(bytes);
    failed += p == nullptr;
    folded ^= reinterpret_cast<unsigned long long>(p);
    free(p);
  }
  if (failed) atomicAdd(failures, failed);
  if (folded & 1) *sink = folded;
}

struct kernel_shape {
  unsigned blocks;
  unsigned threads_per_block;
  int allocs_per_thread;
  unsigned long long allocations() const {
    return 1ull * blocks * threads_per_block * static_cast<unsigned long long>(allocs_per_thread);
  }
  std::string text(unsigned long long bytes) const {
    return std::to_string(blocks * threads_per_block) + " threads (" + std::to_string(blocks) +
           "×" + std::to_string(threads_per_block) + ") × " + std::to_string(allocs_per_thread) +
           " × " + format_bytes(bytes);
  }
};

class event_pair {
 public:
  event_pair() {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~event_pair() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  event_pair(const event_pair&) = delete;
  event_pair& operator=(const event_pair&) = delete;
  template <class Launch>
  double time_ns(Launch&& launch) {
    check(cudaEventRecord(start_), "cudaEventRecord");
    launch();
    check(cudaGetLastError(), "kernel launch");
    check(cudaEventRecord(stop_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return static_cast<double>(ms) * 1e6;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

figure device_figure(const std::string& subject, const std::string& workload, std::size_t bytes) {
  figure f;
  f.subject = subject;
  f.kind = "device";
  f.backing = "device";
  f.unit = "device allocation";
  f.size = bytes;
  f.note = workload;
  return f;
}

// n launches back to back between two events; per allocation = the events' time ÷ (n × allocations
// per launch). The kernels never touch the blocks, so the state's region is a made-up range with no
// memory behind it, large enough for every launch of a repetition (reset before each).
template <class Launch>
figure time_kernel(figure f, const kernel_shape& shape, device_bump_state* state,
                   const timing_options& timing, Launch&& launch) {
  try {
    event_pair events;
    auto run = [&](std::uint64_t launches) {
      if (state) {
        const device_bump_state fresh{1ull << 40, 1ull << 52, 0};
        check(cudaMemcpy(state, &fresh, sizeof fresh, cudaMemcpyHostToDevice), "cudaMemcpy");
      }
      return events.time_ns([&] {
        for (std::uint64_t i = 0; i < launches; ++i) launch();
      });
    };
    summary per_launch = measure(run, timing);
    const double n = static_cast<double>(shape.allocations());
    f.result = per_launch;
    f.result.median_ns /= n;
    f.result.p10_ns /= n;
    f.result.p90_ns /= n;
    f.result.ops_per_rep = per_launch.ops_per_rep * shape.allocations();
    f.measured = true;
  } catch (const std::exception& e) {
    f.note += std::string(": not measured: ") + e.what();
  }
  return f;
}

}  // namespace

std::vector<figure> measure_device_allocation(const timing_options& timing) {
  std::vector<figure> out;
  const unsigned long long bytes = 256;
  const kernel_shape grid = timing.quick ? kernel_shape{64, 256, 4} : kernel_shape{1024, 256, 16};
  const kernel_shape malloc_grid = {grid.blocks, grid.threads_per_block, 1};
  const kernel_shape one_thread = {1, 1, timing.quick ? 1000 : 10000};

  device_bump_state* state = nullptr;
  unsigned long long* scratch = nullptr;  // [0] sink, [1] device malloc failures
  try {
    check(cudaMalloc(&state, sizeof *state), "cudaMalloc");
    check(cudaMalloc(&scratch, 2 * sizeof *scratch), "cudaMalloc");
    check(cudaMemset(scratch, 0, 2 * sizeof *scratch), "cudaMemset");
  } catch (const std::exception& e) {
    figure f = device_figure("device_bump_alloc", std::string("not measured: ") + e.what(), bytes);
    out.push_back(f);
    return out;
  }

  auto add = [&](figure f) { out.push_back(f); };
  add(time_kernel(
      device_figure("device_bump_alloc (warp-aggregated)", grid.text(bytes) + ", one state", bytes),
      grid, state, timing, [&] {
        bump_kernel<<<grid.blocks, grid.threads_per_block>>>(state, grid.allocs_per_thread, bytes,
                                                             scratch);
      }));
  add(time_kernel(
      device_figure("atomicAdd per thread (peer)", grid.text(bytes) + ", one counter", bytes), grid,
      state, timing, [&] {
        atomic_per_thread_kernel<<<grid.blocks, grid.threads_per_block>>>(
            state, grid.allocs_per_thread, bytes, scratch);
      }));
  add(time_kernel(device_figure("device_bump_alloc, one thread",
                                one_thread.text(bytes) + " back to back", bytes),
                  one_thread, state, timing, [&] {
                    bump_kernel<<<1, 1>>>(state, one_thread.allocs_per_thread, bytes, scratch);
                  }));

  // Device malloc's heap (8 MiB by default) must hold one block per thread at once.
  figure heap = device_figure("device malloc+free (peer)",
                              malloc_grid.text(bytes) + ", pair per thread", bytes);
  heap.unit = "device alloc+free pair";
  const std::size_t heap_bytes = 4 * malloc_grid.allocations() * bytes + 64 * MiB;
  cudaError_t limit = cudaDeviceSetLimit(cudaLimitMallocHeapSize, heap_bytes);
  if (limit != cudaSuccess) {
    (void)cudaGetLastError();
    heap.note += std::string(": not measured: cudaDeviceSetLimit(cudaLimitMallocHeapSize): ") +
                 cudaGetErrorString(limit);
    add(heap);
  } else {
    figure f = time_kernel(heap, malloc_grid, nullptr, timing, [&] {
      device_malloc_kernel<<<malloc_grid.blocks, malloc_grid.threads_per_block>>>(
          malloc_grid.allocs_per_thread, bytes, scratch, scratch + 1);
    });
    unsigned long long failures = 0;
    if (cudaMemcpy(&failures, scratch + 1, sizeof failures, cudaMemcpyDeviceToHost) ==
            cudaSuccess &&
        failures)
      f.note += " (" + std::to_string(failures) + " mallocs returned NULL)";
    add(f);
  }
  (void)cudaFree(state);
  (void)cudaFree(scratch);
  return out;
}

}  // namespace vramscope::bench
