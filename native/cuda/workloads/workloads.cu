// The built-in workloads (catalogue and parameters in vramscope/workloads.hpp) and run_workload,
// which builds the strategy on its real backing and runs one of them through a context
// (workload_context.cuh). Every block a workload allocates is filled by a kernel and verified
// before it is freed.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "vramscope/cuda_backing.hpp"
#include "vramscope/device_bump.cuh"
#include "vramscope/workloads.hpp"
#include "workload_context.cuh"

namespace vramscope {

namespace {

using workload::block;
using workload::context;

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    throw device_error(call, static_cast<int>(status), cudaGetErrorString(status));
  }
}

std::size_t pick(std::vector<block>& live, context& c) {
  return static_cast<std::size_t>(c.uniform(0, live.size() - 1));
}

void release(context& c, std::vector<block>& live, std::size_t i) {
  c.verify(live[i]);
  c.free(live[i]);
  live[i] = live.back();
  live.pop_back();
}

// --- the seeds' patterns ---------------------------------------------------------------------------

void async_pipeline(context& c, const params& p) {
  const auto steps = p.get_uint("steps", 200), buffers = p.get_uint("buffers", 3);
  const auto max_size = p.get_size("max_size", 8 * MiB);
  for (std::uint64_t step = 0; step < steps; ++step) {
    const unsigned s = static_cast<unsigned>(step % c.streams());
    if (s == 0) c.step_begin();
    std::vector<block> mine;
    for (std::uint64_t i = 0; i < buffers; ++i) {
      mine.push_back(c.allocate(c.uniform(256, max_size), s));
      c.fill(mine.back());
    }
    for (const block& b : mine) c.verify(b);
    for (const block& b : mine) c.free(b);  // on its own stream: reusable there at once
    if (s + 1 == c.streams() || step + 1 == steps) c.step_end();
  }
}

void cross_stream(context& c, const params& p) {
  const auto steps = p.get_uint("steps", 100);
  const auto size = p.get_size("size", 4 * MiB);
  for (std::uint64_t step = 0; step < steps; ++step) {
    if (step % 10 == 0) c.step_begin();
    block b = c.allocate(c.uniform(size / 4, size), 0);  // allocated on A
    c.fill(b, 0);
    c.wait(1, 0);    // B sees A's fill
    c.verify(b, 1);  // used on B
    c.free(b, 1);    // freed on B: not reused on A before B's verify has run
    if (step % 10 == 9 || step + 1 == steps) c.step_end();
  }
}

void random_mix(context& c, std::uint64_t ops, std::uint64_t live_max,
                const std::function<std::uint64_t()>& size) {
  std::vector<block> live;
  for (std::uint64_t op = 0; op < ops; ++op) {
    if (op % 1000 == 0) c.step_begin();
    while (live.size() >= live_max || (!live.empty() && c.uniform(0, 99) < 40))
      release(c, live, pick(live, c));
    live.push_back(c.allocate(size(), 0));
    c.fill(live.back());
    if (op % 1000 == 999 || op + 1 == ops) c.step_end();
  }
  while (!live.empty()) release(c, live, live.size() - 1);
}

void slab_mix(context& c, const params& p) {
  static const std::uint64_t classes[] = {256, 1 * KiB, 4 * KiB, 16 * KiB, 64 * KiB};
  random_mix(c, p.get_uint("ops", 20000), p.get_uint("live", 2000), [&c] {
    const std::uint64_t cls = classes[c.uniform(0, 4)];
    return c.uniform(cls / 2 + 1, cls);  // sizes that round up to the class
  });
}

void buddy_mix(context& c, const params& p) {
  random_mix(c, p.get_uint("ops", 5000), p.get_uint("live", 300), [&c] {
    const std::uint64_t order = c.uniform(8, 22);  // 256 B .. 4 MiB
    const std::uint64_t power = std::uint64_t{1} << order;
    return c.uniform(0, 1) ? power : c.uniform(power / 2 + 1, power);
  });
}

void arena_steps(context& c, const params& p) {
  const auto steps = p.get_uint("steps", 20), allocs = p.get_uint("allocs", 64);
  const auto max_size = p.get_size("max_size", 4 * MiB);
  for (std::uint64_t step = 0; step < steps; ++step) {
    c.step_begin();
    std::vector<block> scratch;
    for (std::uint64_t i = 0; i < allocs; ++i) {
      scratch.push_back(c.allocate(c.uniform(256, max_size), 0));
      c.fill(scratch.back());
    }
    c.reset(scratch);  // verifies each, then the arena's reset (or frees, elsewhere)
    c.step_end();
  }
}

void growable_buffer(context& c, const params& p) {
  const auto from = p.get_size("from", 1 * MiB), to = p.get_size("to", 100 * MiB);
  const double factor = p.get_double("factor", 1.5);
  if (factor <= 1.0) throw invalid_argument("growable_buffer: factor must be above 1");
  block buffer = c.allocate(from, 0);
  c.fill(buffer);
  while (buffer.bytes < to) {
    c.step_begin();
    const std::uint64_t next =
        std::min<std::uint64_t>(to, static_cast<std::uint64_t>(std::ceil(buffer.bytes * factor)));
    block grown = c.allocate(next, 0);
    c.copy_prefix(buffer, grown, 0);
    c.verify(buffer);
    c.free(buffer);
    buffer = grown;
    c.step_end();
  }
  c.verify(buffer);
  c.free(buffer);
}

// --- realistic patterns ------------------------------------------------------------------------------

void training(context& c, const params& p) {
  const auto steps = p.get_uint("steps", 30), layers = p.get_uint("layers", 12),
             hidden = p.get_uint("hidden", 1024);
  const auto min_batch = p.get_uint("min_batch", 4), max_batch = p.get_uint("max_batch", 32);
  const auto min_seq = p.get_uint("min_seq", 64), max_seq = p.get_uint("max_seq", 512);
  if (min_batch == 0 || min_batch > max_batch || min_seq == 0 || min_seq > max_seq)
    throw invalid_argument("training: need 0 < min_batch <= max_batch and 0 < min_seq <= max_seq");
  const std::uint64_t weight_bytes = 4 * hidden * hidden * 2;  // fp16, attention + MLP
  std::vector<block> weights, optimizer;
  for (std::uint64_t l = 0; l < layers; ++l) {
    weights.push_back(c.allocate(weight_bytes));
    c.fill(weights.back());
    optimizer.push_back(c.allocate(2 * weight_bytes * 2));  // Adam's two fp32 moments
    c.fill(optimizer.back());
  }
  c.marker("weights loaded");
  for (std::uint64_t step = 0; step < steps; ++step) {
    c.step_begin();
    const std::uint64_t tokens = c.uniform(min_batch, max_batch) * c.uniform(min_seq, max_seq);
    const std::uint64_t activation = tokens * hidden * 2;
    std::vector<block> saved;  // kept for backward
    for (std::uint64_t l = 0; l < layers; ++l) {
      block workspace = c.allocate(activation * 4);
      c.fill(workspace);
      saved.push_back(c.allocate(activation));
      c.fill(saved.back());
      saved.push_back(c.allocate(activation * 2));
      c.fill(saved.back());
      c.verify(workspace);
      c.free(workspace);
    }
    std::vector<block> grads;
    for (std::uint64_t l = layers; l-- > 0;) {
      block grad_out = c.allocate(activation);
      c.fill(grad_out);
      for (int k = 0; k < 2; ++k) {
        c.verify(saved.back());
        c.free(saved.back());
        saved.pop_back();
      }
      grads.push_back(c.allocate(weight_bytes));
      c.fill(grads.back());
      c.verify(grad_out);
      c.free(grad_out);
    }
    for (std::size_t l = 0; l < grads.size(); ++l) {  // optimizer step
      c.verify(grads[l]);
      c.fill(weights[l]);
      c.free(grads[l]);
    }
    c.step_end();
  }
  for (std::size_t l = 0; l < weights.size(); ++l) {
    c.verify(weights[l]);
    c.free(weights[l]);
    c.verify(optimizer[l]);
    c.free(optimizer[l]);
  }
}

void inference(context& c, const params& p) {
  const auto requests = p.get_uint("requests", 400), concurrent = p.get_uint("concurrent", 16);
  const auto max_tokens = p.get_uint("max_tokens", 4096);
  const auto per_token = p.get_size("bytes_per_token", 16 * KiB);
  struct request {
    block cache;
    std::uint64_t left;  // decode iterations to go
  };
  std::vector<request> active;
  std::uint64_t admitted = 0;
  while (admitted < requests || !active.empty()) {
    c.step_begin();
    while (active.size() < concurrent && admitted < requests) {
      const std::uint64_t tokens = c.uniform(16, max_tokens);
      request r{c.allocate(tokens * per_token), c.uniform(1, 12)};
      c.fill(r.cache);
      active.push_back(r);
      ++admitted;
    }
    block logits = c.allocate(active.size() * 128 * KiB);  // this iteration's scratch
    c.fill(logits);
    c.verify(logits);
    c.free(logits);
    for (std::size_t i = 0; i < active.size();) {
      if (--active[i].left == 0) {
        c.verify(active[i].cache);
        c.free(active[i].cache);
        active[i] = active.back();
        active.pop_back();
      } else {
        ++i;
      }
    }
    c.step_end();
  }
}

void fragmentation(context& c, const params& p) {
  const auto rounds = p.get_uint("rounds", 8), pairs = p.get_uint("pairs", 256);
  const auto small = p.get_size("small", 64 * KiB), large = p.get_size("large", 2 * MiB);
  for (std::uint64_t round = 0; round < rounds; ++round) {
    c.step_begin();
    std::vector<block> smalls, larges;
    for (std::uint64_t i = 0; i < pairs; ++i) {
      smalls.push_back(c.allocate(small));
      c.fill(smalls.back());
      larges.push_back(c.allocate(large));
      c.fill(larges.back());
    }
    std::vector<block> kept;
    for (std::size_t i = 0; i < smalls.size(); ++i) {  // every other small one: holes
      c.verify(smalls[i]);
      if (i % 2 == 0) c.free(smalls[i]);
      else kept.push_back(smalls[i]);
    }
    for (std::size_t i = 0; i < larges.size(); i += 2) {  // half the large ones: bigger holes
      c.verify(larges[i]);
      c.free(larges[i]);
      kept.push_back(larges[i + 1 < larges.size() ? i + 1 : i]);
    }
    if (larges.size() % 2 == 1) kept.pop_back();  // the last large one was freed above
    std::vector<block> wide;
    for (std::uint64_t i = 0; i < pairs / 4; ++i) {  // need more than any hole holds
      wide.push_back(c.allocate(large + small * 3));
      c.fill(wide.back());
    }
    for (auto* list : {&kept, &wide})
      for (const block& b : *list) {
        c.verify(b);
        c.free(b);
      }
    c.step_end();
  }
}

// --- device-side bump allocation ----------------------------------------------------------------------

struct kernel_log_entry {
  unsigned long long address;  // 0: the region had no room
  unsigned long long bytes;
};

__device__ unsigned bump_hash(unsigned long long x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<unsigned>(x);
}

__global__ void bump_kernel(device_bump_state* state, kernel_log_entry* log, unsigned threads,
                            unsigned long long max_size, unsigned long long seed,
                            unsigned long long* bad) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= threads) return;
  const unsigned long long bytes = 1 + bump_hash(seed * 0x9E3779B97F4A7C15ull + t) % max_size;
  void* p = device_bump_alloc(state, bytes);
  log[t] = {reinterpret_cast<unsigned long long>(p), bytes};
  if (p == nullptr) return;
  // Each thread writes then reads its own block: overlapping blocks would show up as bad bytes
  // once another thread's writes land in them (checked again after the launch).
  unsigned char* b = static_cast<unsigned char*>(p);
  for (unsigned long long i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>(t * 131 + i);
  for (unsigned long long i = 0; i < bytes; ++i)
    if (b[i] != static_cast<unsigned char>(t * 131 + i)) atomicAdd(bad, 1ull);
}

__global__ void bump_verify(const kernel_log_entry* log, unsigned threads,
                            unsigned long long* bad) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= threads || log[t].address == 0) return;
  const unsigned char* b = reinterpret_cast<const unsigned char*>(log[t].address);
  for (unsigned long long i = 0; i < log[t].bytes; ++i)
    if (b[i] != static_cast<unsigned char>(t * 131 + i)) atomicAdd(bad, 1ull);
}

void device_bump_workload(context& c, const params& p, workload_result& result) {
  auto& bump = dynamic_cast<device_bump&>(c.strategy());
  const auto launches = p.get_uint("launches", 8), threads = p.get_uint("threads", 4096);
  const auto max_size = p.get_size("max_size", 16 * KiB), seed = p.get_uint("seed", 6);
  kernel_log_entry* log = nullptr;
  unsigned long long* bad = nullptr;
  check(cudaMalloc(&log, threads * sizeof(kernel_log_entry)), "cudaMalloc");
  check(cudaMalloc(&bad, sizeof *bad), "cudaMalloc");
  check(cudaMemset(bad, 0, sizeof *bad), "cudaMemset");
  std::vector<kernel_log_entry> host(threads);
  std::uint32_t id = 0;
  std::uint64_t verified = 0;
  try {
    for (std::uint64_t launch = 0; launch < launches; ++launch) {
      c.step_begin();
      device_bump_kernel_state state(bump, c.stream(0));
      const unsigned blocks = static_cast<unsigned>((threads + 255) / 256);
      const double at = c.now_ns();
      bump_kernel<<<blocks, 256, 0, c.stream(0)>>>(state.get(), log, static_cast<unsigned>(threads),
                                                   max_size, seed + launch, bad);
      check(cudaGetLastError(), "bump_kernel launch");
      bump_verify<<<blocks, 256, 0, c.stream(0)>>>(log, static_cast<unsigned>(threads), bad);
      check(cudaGetLastError(), "bump_verify launch");
      state.adopt();
      check(
          cudaMemcpy(host.data(), log, threads * sizeof(kernel_log_entry), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
      // The kernels' own log becomes the trace: one request per thread, placed where it landed.
      std::vector<std::uint32_t> ids;
      for (const kernel_log_entry& e : host) {
        if (e.address == 0) {
          c.sink().request(3, 0, e.bytes, 0, at);
          c.sink().layout(trace_event{trace_op::failure, 0, 0, 0, e.bytes, e.bytes}, 0, at, 0);
          continue;
        }
        c.sink().request(0, id, e.bytes, 0, at);
        c.sink().layout(trace_event{trace_op::alloc, 1, 0, e.address,
                                    device_bump_round(e.bytes, bump.alignment()), e.bytes},
                        0, at, 0);
        ids.push_back(id++);
        verified += e.bytes;
      }
      const double reset_at = c.now_ns();
      bump.reset();
      for (std::size_t i = 0; i < ids.size(); ++i) c.sink().request(1, ids[i], 0, 0, reset_at);
      c.sink().layout(trace_event{trace_op::reset, 0, 0, bump.base(), 0, 0}, 0, reset_at, 0);
      c.step_end();
    }
    unsigned long long corrupted = 0;
    check(cudaMemcpy(&corrupted, bad, sizeof corrupted, cudaMemcpyDeviceToHost), "cudaMemcpy");
    result.corrupted_bytes += corrupted;
    result.verified_bytes += verified;
    result.allocations += id;
    result.frees += id;
  } catch (...) {
    (void)cudaFree(log);
    (void)cudaFree(bad);
    throw;
  }
  (void)cudaFree(log);
  (void)cudaFree(bad);
}

using body = void (*)(context&, const params&);

body body_of(const std::string& name) {
  if (name == "async_pipeline") return async_pipeline;
  if (name == "cross_stream") return cross_stream;
  if (name == "slab_mix") return slab_mix;
  if (name == "buddy_mix") return buddy_mix;
  if (name == "arena_steps") return arena_steps;
  if (name == "growable_buffer") return growable_buffer;
  if (name == "training") return training;
  if (name == "inference") return inference;
  if (name == "fragmentation") return fragmentation;
  return nullptr;
}

unsigned streams_of(const std::string& name, const params& p) {
  if (name == "async_pipeline")
    return static_cast<unsigned>(std::max<std::uint64_t>(1, p.get_uint("streams", 4)));
  if (name == "cross_stream") return 2;
  return 1;
}

}  // namespace

workload_result run_workload(const workload_options& o, workload_sink& sink,
                             const std::atomic<bool>* cancel) {
  const workload_info* info = find_workload(o.workload);
  if (info == nullptr) {
    std::string known;
    for (const workload_info& w : workloads()) known += (known.empty() ? "" : ", ") + w.name;
    throw invalid_argument("unknown workload '" + o.workload + "' (known: " + known + ")");
  }
  for (const auto& entry : o.workload_params.values()) {
    const std::string& key = entry.first;
    const bool known = std::any_of(info->params.begin(), info->params.end(),
                                   [&](const param_info& pi) { return pi.name == key; });
    if (!known)
      throw invalid_argument("workload " + info->name + ": unknown parameter '" + key + "'");
  }
  workload_result result;
  result.strategy = info->fixed_strategy.empty() ? o.strategy : info->fixed_strategy;
  const strategy_info& strategy = find_strategy(result.strategy);
  result.device = describe_cuda_device(o.device);
  cuda_options cuda;
  cuda.device = o.device;
  cuda.capacity = o.capacity;
  auto device = make_cuda_backing(strategy.cuda_backing, cuda);
  result.backing = device->name();
  auto allocator = make_allocator(result.strategy, *device, o.strategy_params);
  context c(*allocator, sink, streams_of(info->name, o.workload_params), cancel);
  // The catalogue's default seed where the workload has one (1 was used for all before).
  std::uint64_t default_seed = 1;
  for (const param_info& pi : info->params)
    if (pi.name == "seed") default_seed = std::stoull(pi.default_value);
  c.seed(o.workload_params.get_uint("seed", default_seed));
  try {
    if (info->name == "device_bump") device_bump_workload(c, o.workload_params, result);
    else body_of(info->name)(c, o.workload_params);
  } catch (const workload::out_of_memory_stop& stop) {
    result.out_of_memory = true;
    result.stopped_by = stop.what;
    c.release_all();
  } catch (const workload::cancelled_stop&) {
    result.stopped_by = "cancelled";
    c.release_all();
  } catch (const device_error& e) {
    // The context may be unusable after a CUDA error: report it and keep what was recorded, with
    // the counts so far (the GPU's verdict on the bytes cannot be read back any more).
    result.stopped_by = e.what();
    result.allocations += c.allocations();
    result.frees += c.frees();
    result.steps = c.steps();
    return result;
  }
  workload_result counted;
  c.finish(counted);
  result.allocations += counted.allocations;
  result.frees += counted.frees;
  result.steps = counted.steps;
  result.verified_bytes += counted.verified_bytes;
  result.corrupted_bytes += counted.corrupted_bytes;
  result.final_stats = allocator->stats();
  return result;
}

}  // namespace vramscope
