// Built-in GPU workloads for recording (issue 6): real CUDA programs whose kernels write and then
// verify every byte they allocate, run through any strategy on its real backing. A run streams what
// happened to a sink as it goes: the request trace (what the workload asked for), the strategy's
// layout events (real device addresses) each with the measured host latency of the call that
// caused it, and the GPU time of each step. No CUDA header: the catalogue (names, parameters) is
// usable by a build without CUDA; run_workload exists only where CUDA was built
// (native/cuda/workloads/).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "vramscope/allocator.hpp"
#include "vramscope/params.hpp"

namespace vramscope {

struct workload_info {
  std::string name;
  std::string description;
  std::vector<param_info> params;  // as strategies' parameters: name, kind, default, description
  bool multi_stream = false;       // kernels on several streams at once (racecheck them)
  // The workload is a strategy of its own (device_bump): --strategy does not apply.
  std::string fixed_strategy;
};

// The catalogue, in the order the CLI lists it.
inline const std::vector<workload_info>& workloads() {
  static const std::vector<workload_info> list = {
      {"async_pipeline",
       "a pipeline over several streams: each step allocates, fills and verifies buffers on its "
       "stream and frees them there",
       {{"streams", "uint", "4", "streams the steps rotate over"},
        {"steps", "uint", "200", "pipeline steps"},
        {"buffers", "uint", "3", "buffers a step allocates"},
        {"max_size", "size", "8MiB", "largest buffer"},
        {"seed", "uint", "1", "random seed"}},
       true,
       ""},
      {"cross_stream",
       "allocate on stream A, use on stream B, free on B after B's work (stream-ordered reuse)",
       {{"steps", "uint", "100", "blocks handed from A to B"},
        {"size", "size", "4MiB", "largest block"},
        {"seed", "uint", "2", "random seed"}},
       true,
       ""},
      {"slab_mix",
       "many small blocks of the slab size classes (256 B to 64 KiB), random frees",
       {{"ops", "uint", "20000", "allocations"},
        {"live", "uint", "2000", "most blocks live at once"},
        {"seed", "uint", "3", "random seed"}},
       false,
       ""},
      {"buddy_mix",
       "power-of-two and odd sizes from 256 B to 4 MiB, random frees",
       {{"ops", "uint", "5000", "allocations"},
        {"live", "uint", "300", "most blocks live at once"},
        {"seed", "uint", "4", "random seed"}},
       false,
       ""},
      {"arena_steps",
       "steps that allocate many scratch blocks and drop them all at once (arena reset at each "
       "step)",
       {{"steps", "uint", "20", "steps"},
        {"allocs", "uint", "64", "blocks a step allocates"},
        {"max_size", "size", "4MiB", "largest block"},
        {"seed", "uint", "5", "random seed"}},
       false,
       ""},
      {"growable_buffer",
       "a buffer grown from 1 MiB to 100 MiB: allocate the larger one, copy, free the old",
       {{"from", "size", "1MiB", "first size"},
        {"to", "size", "100MiB", "last size"},
        {"factor", "double", "1.5", "growth factor"}},
       false,
       ""},
      {"device_bump",
       "kernel threads allocate with one atomicAdd per warp; the trace comes from the kernels' own "
       "log",
       {{"launches", "uint", "8", "kernel launches (steps)"},
        {"threads", "uint", "4096", "allocating threads per launch"},
        {"max_size", "size", "16KiB", "largest block a thread takes"},
        {"capacity", "size", "1GiB", "bump region"},
        {"seed", "uint", "6", "random seed"}},
       false,
       "device_bump"},
      {"training",
       "training steps with changing batch and sequence sizes: weights, optimizer state, "
       "activations kept for backward, gradients",
       {{"steps", "uint", "30", "training steps"},
        {"layers", "uint", "12", "layers"},
        {"hidden", "uint", "1024", "hidden size"},
        {"min_batch", "uint", "4", "smallest batch"},
        {"max_batch", "uint", "32", "largest batch"},
        {"min_seq", "uint", "64", "shortest sequence"},
        {"max_seq", "uint", "512", "longest sequence"},
        {"seed", "uint", "7", "random seed"}},
       false,
       ""},
      {"inference",
       "an inference server: requests of random sizes arrive, hold a KV cache while they decode, "
       "leave",
       {{"requests", "uint", "400", "requests served"},
        {"concurrent", "uint", "16", "requests decoding at once"},
        {"max_tokens", "uint", "4096", "longest request"},
        {"bytes_per_token", "size", "16KiB", "KV cache per token"},
        {"seed", "uint", "8", "random seed"}},
       false,
       ""},
      {"fragmentation",
       "interleaved small and large blocks, every other small one freed, then large requests that "
       "need contiguous room",
       {{"rounds", "uint", "8", "rounds"},
        {"pairs", "uint", "256", "small/large pairs per round"},
        {"small", "size", "64KiB", "small block"},
        {"large", "size", "2MiB", "large block"},
        {"seed", "uint", "9", "random seed"}},
       false,
       ""},
  };
  return list;
}

inline const workload_info* find_workload(const std::string& name) {
  for (const workload_info& w : workloads())
    if (w.name == name) return &w;
  return nullptr;
}

// What a run streams out, on the thread that runs it.
class workload_sink {
 public:
  virtual ~workload_sink() = default;
  // kind: 0 alloc, 1 free, 2 marker, 3 oom (model.ts EventKind); stream: the workload's stream
  // index (0 = the first stream); time: ns since the run started.
  virtual void request(std::uint8_t kind, std::uint32_t id, std::uint64_t size,
                       std::uint32_t stream, double time_ns) = 0;
  // A layout event of the strategy; latency_ns: host time of the allocate/deallocate that made it.
  virtual void layout(const trace_event& event, std::uint32_t stream, double time_ns,
                      std::uint32_t latency_ns) = 0;
  virtual void marker(const std::string& name, double time_ns) = 0;
  virtual void step(std::uint32_t index, double gpu_ns, double host_ns) = 0;
};

struct workload_options {
  std::string workload;
  std::string strategy = "caching";
  params strategy_params;
  params workload_params;
  int device = 0;
  std::size_t capacity = 0;  // a cap on the backing (0: the device's free memory)
};

struct workload_result {
  std::string strategy;  // what ran (device_bump for that workload)
  std::string backing;
  std::string device;  // describe_cuda_device
  std::uint64_t allocations = 0;
  std::uint64_t frees = 0;
  std::uint64_t steps = 0;
  std::uint64_t verified_bytes = 0;   // bytes the kernels wrote and read back
  std::uint64_t corrupted_bytes = 0;  // bytes that did not hold their pattern (must be 0)
  bool out_of_memory = false;         // ended early by an out-of-memory; the trace ends with it
  std::string stopped_by;             // the out-of-memory or CUDA error text, when one ended it
  allocator_stats final_stats;
};

// Runs a workload on options.strategy over its real backing. An out-of-memory ends the workload
// (recorded as an oom request and a failure layout event) and returns normally; a CUDA error
// returns with stopped_by set and what was recorded up to it kept. Throws invalid_argument for an
// unknown workload, strategy or parameter, no_cuda_device without a GPU, unsupported without CUDA.
workload_result run_workload(const workload_options& options, workload_sink& sink,
                             const std::atomic<bool>* cancel = nullptr);

}  // namespace vramscope
