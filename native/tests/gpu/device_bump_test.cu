// device_bump on a GPU: many threads allocate from a kernel with device_bump_alloc and stamp their
// id into every word of their block; a second kernel checks every stamp, so two blocks that overlap
// show up as a wrong id. The host then checks alignment, bounds and disjointness of the returned
// addresses, that the device offset is exactly the sum of what was taken, and that the host
// strategy adopts it (later host allocations start after the kernels' blocks).
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/gpu_common.cuh"
#include "vramscope/device_bump.cuh"
#include "vramscope/device_bump.hpp"

namespace {

using vramscope::device_bump;
using vramscope::device_bump_kernel_state;
using vramscope::device_bump_state;

// What one thread does: whether it calls at all (threads that do not make warps diverge), on which
// of two states, how many bytes (a multiple of 4, so it can stamp whole words) at what alignment.
struct thread_plan {
  unsigned long long bytes;
  unsigned alignment;
  unsigned char state;
  unsigned char calls;
};

__global__ void allocate_and_stamp(const thread_plan* plan, int threads, device_bump_state* state_a,
                                   device_bump_state* state_b, void** got) {
  const int id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id >= threads) return;
  const thread_plan p = plan[id];
  void* block = nullptr;
  if (p.calls)
    block = vramscope::device_bump_alloc(p.state ? state_b : state_a, p.bytes, p.alignment);
  got[id] = block;
  if (block != nullptr) {
    unsigned* words = static_cast<unsigned*>(block);
    for (unsigned long long i = 0; i < p.bytes / 4; ++i) words[i] = static_cast<unsigned>(id);
  }
}

__global__ void count_bad_stamps(const thread_plan* plan, void* const* got, int threads,
                                 unsigned long long* bad_words) {
  const int id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id >= threads || got[id] == nullptr) return;
  const unsigned* words = static_cast<const unsigned*>(got[id]);
  unsigned long long bad = 0;
  for (unsigned long long i = 0; i < plan[id].bytes / 4; ++i)
    bad += words[i] != static_cast<unsigned>(id);
  if (bad) atomicAdd(bad_words, bad);
}

// Every thread asks for 256 B `rounds` times, however full the region already is.
__global__ void allocate_repeatedly(device_bump_state* state, int rounds,
                                    unsigned long long* successes) {
  unsigned long long mine = 0;
  for (int r = 0; r < rounds; ++r) mine += vramscope::device_bump_alloc(state, 256) != nullptr;
  if (mine) atomicAdd(successes, mine);
}

constexpr unsigned long long round256(unsigned long long n) { return (n + 255) / 256 * 256; }

// The bytes of region a valid request takes from the offset (see device_bump_alloc).
unsigned long long need_of(const thread_plan& p) {
  const unsigned long long align = p.alignment < 256 ? 256 : p.alignment;
  if (!p.calls || p.bytes == 0 || (align & (align - 1)) != 0) return 0;
  return round256(p.bytes) + align - 256;
}

struct kernel_run {
  std::vector<void*> got;
  unsigned long long bad_words = 0;
};

kernel_run run_plan(const std::vector<thread_plan>& plan, device_bump_state* a,
                    device_bump_state* b) {
  const int threads = static_cast<int>(plan.size());
  thread_plan* d_plan = nullptr;
  void** d_got = nullptr;
  unsigned long long* d_bad = nullptr;
  GPU_CHECK(cudaMalloc(&d_plan, plan.size() * sizeof(thread_plan)));
  GPU_CHECK(cudaMalloc(&d_got, plan.size() * sizeof(void*)));
  GPU_CHECK(cudaMalloc(&d_bad, sizeof(unsigned long long)));
  GPU_CHECK(
      cudaMemcpy(d_plan, plan.data(), plan.size() * sizeof(thread_plan), cudaMemcpyHostToDevice));
  GPU_CHECK(cudaMemset(d_bad, 0, sizeof(unsigned long long)));
  const int per_block = 256, blocks = (threads + per_block - 1) / per_block;
  allocate_and_stamp<<<blocks, per_block>>>(d_plan, threads, a, b, d_got);
  GPU_CHECK(cudaGetLastError());
  count_bad_stamps<<<blocks, per_block>>>(d_plan, d_got, threads, d_bad);
  GPU_CHECK(cudaGetLastError());
  kernel_run run;
  run.got.resize(plan.size());
  GPU_CHECK(cudaMemcpy(run.got.data(), d_got, plan.size() * sizeof(void*), cudaMemcpyDeviceToHost));
  GPU_CHECK(cudaMemcpy(&run.bad_words, d_bad, sizeof run.bad_words, cudaMemcpyDeviceToHost));
  cudaFree(d_plan);
  cudaFree(d_got);
  cudaFree(d_bad);
  return run;
}

// Blocks of one region: inside it, aligned, pairwise disjoint. Returns how many there were.
std::size_t check_blocks(const std::vector<thread_plan>& plan, const kernel_run& run, int state,
                         const device_bump_state& region) {
  struct span {
    unsigned long long start, end;
  };
  std::vector<span> spans;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    if (run.got[i] == nullptr || plan[i].state != state) continue;
    const unsigned long long p = reinterpret_cast<unsigned long long>(run.got[i]);
    const unsigned long long align = plan[i].alignment < 256 ? 256 : plan[i].alignment;
    CHECK_EQ(p % align, 0ull);
    CHECK(p >= region.base);
    CHECK(p + plan[i].bytes <= region.base + region.capacity);
    spans.push_back({p, p + round256(plan[i].bytes)});
  }
  std::sort(spans.begin(), spans.end(),
            [](const span& x, const span& y) { return x.start < y.start; });
  std::size_t overlaps = 0;
  for (std::size_t i = 1; i < spans.size(); ++i) overlaps += spans[i].start < spans[i - 1].end;
  CHECK_EQ(overlaps, std::size_t{0});
  return spans.size();
}

struct bump_on_device {
  std::unique_ptr<vramscope::backing> backing =
      vramscope::make_backing(vramscope::backing_kind::cuda_malloc);
  std::unique_ptr<vramscope::allocator> owner;
  device_bump& bump;
  explicit bump_on_device(const char* capacity)
      : owner(vramscope::make_allocator("device_bump", *backing, {{"capacity", capacity}})),
        bump(dynamic_cast<device_bump&>(*owner)) {}
};

// Sizes 4 B to 2 KiB, alignments 256 B to 4 KiB (and some below 256, taken as 256).
std::vector<thread_plan> mixed_plan(int threads, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<thread_plan> plan(static_cast<std::size_t>(threads));
  for (auto& p : plan) {
    p.bytes = 4ull * (1 + rng() % 512);
    p.alignment = rng() % 8 == 0 ? 64u : 256u << (rng() % 5);
    p.state = 0;
    p.calls = 1;
  }
  return plan;
}

TEST("device_bump: a grid of threads gets aligned, disjoint blocks and the offset is their sum") {
  bump_on_device d("256MiB");
  const std::vector<thread_plan> plan = mixed_plan(64 * 1024, 1);
  unsigned long long expected = 0;
  for (auto& p : plan) expected += need_of(p);
  REQUIRE(expected <= 256ull * 1024 * 1024);

  device_bump_kernel_state state(d.bump);
  const kernel_run run = run_plan(plan, state.get(), state.get());
  CHECK_EQ(run.bad_words, 0ull);
  std::size_t got = 0;
  for (void* p : run.got) got += p != nullptr;
  CHECK_EQ(got, plan.size());
  const device_bump_state after = state.adopt();
  CHECK_EQ(check_blocks(plan, run, 0, after), plan.size());
  CHECK_EQ(after.offset, expected);
  CHECK_EQ(d.bump.offset(), expected);  // a multiple of 256: the strategy's alignment

  // The host carries on after the kernels' blocks, and its own frees leave them alone.
  void* host_block = d.owner->allocate(1000);
  CHECK_EQ(reinterpret_cast<unsigned long long>(host_block), after.base + expected);
  d.owner->deallocate(host_block);
  d.owner->reset();
  CHECK_EQ(d.bump.offset(), 0ull);
}

TEST("device_bump: threads past the capacity get nullptr, the rest fill it exactly") {
  bump_on_device d("1MiB");
  std::vector<thread_plan> plan(64 * 1024, thread_plan{512, 256, 0, 1});
  device_bump_kernel_state state(d.bump);
  const kernel_run run = run_plan(plan, state.get(), state.get());
  CHECK_EQ(run.bad_words, 0ull);
  const device_bump_state after = state.adopt();
  // Warps take contiguous ranges, so every 512 B slot below the capacity went to exactly one thread.
  CHECK_EQ(check_blocks(plan, run, 0, after), std::size_t{1024 * 1024 / 512});
  CHECK(after.offset >= after.capacity);
  CHECK_EQ(d.bump.offset(), after.capacity);  // adopted clamped to the capacity
  CHECK_THROWS_AS(d.owner->allocate(256), vramscope::out_of_memory);
}

TEST("device_bump: diverged warps, two states in one warp and bad arguments") {
  bump_on_device a("64MiB"), b("64MiB");
  std::vector<thread_plan> plan = mixed_plan(32 * 1024, 2);
  for (std::size_t i = 0; i < plan.size(); ++i) {
    plan[i].calls = i % 3 != 0;                // a third of each warp does not call
    plan[i].state = (i / 2) % 2;               // neighbours pairwise on different states
    if (i % 17 == 0) plan[i].bytes = 0;        // nullptr, takes nothing
    if (i % 23 == 0) plan[i].alignment = 768;  // not a power of two: nullptr
  }
  unsigned long long expected[2] = {0, 0};
  std::size_t valid[2] = {0, 0};
  for (auto& p : plan)
    if (need_of(p)) expected[p.state] += need_of(p), ++valid[p.state];

  device_bump_kernel_state state_a(a.bump), state_b(b.bump);
  const kernel_run run = run_plan(plan, state_a.get(), state_b.get());
  CHECK_EQ(run.bad_words, 0ull);
  for (std::size_t i = 0; i < plan.size(); ++i)
    if (need_of(plan[i]) == 0) CHECK(run.got[i] == nullptr);
  const device_bump_state after_a = state_a.adopt(), after_b = state_b.adopt();
  CHECK_EQ(check_blocks(plan, run, 0, after_a), valid[0]);
  CHECK_EQ(check_blocks(plan, run, 1, after_b), valid[1]);
  CHECK_EQ(after_a.offset, expected[0]);
  CHECK_EQ(after_b.offset, expected[1]);
}

TEST("device_bump: kernels start after the host's blocks and leave them intact") {
  bump_on_device d("32MiB");
  void* host_block = d.owner->allocate(64 * 1024);
  GPU_CHECK(cudaMemset(host_block, 0xAB, 64 * 1024));
  const unsigned long long host_offset = d.bump.offset();

  const std::vector<thread_plan> plan = mixed_plan(4 * 1024, 3);
  unsigned long long expected = host_offset;
  for (auto& p : plan) expected += need_of(p);
  device_bump_kernel_state state(d.bump);
  const kernel_run run = run_plan(plan, state.get(), state.get());
  CHECK_EQ(run.bad_words, 0ull);
  for (void* p : run.got)
    CHECK(p != nullptr && reinterpret_cast<unsigned long long>(p) >=
                              reinterpret_cast<unsigned long long>(host_block) + 64 * 1024);
  CHECK_EQ(state.adopt().offset, expected);

  std::vector<unsigned char> back(64 * 1024);
  GPU_CHECK(cudaMemcpy(back.data(), host_block, back.size(), cudaMemcpyDeviceToHost));
  CHECK(std::all_of(back.begin(), back.end(), [](unsigned char c) { return c == 0xAB; }));
  d.owner->deallocate(host_block);
}

TEST(
    "device_bump: retrying on a full region hands out every slot once and the offset cannot run "
    "away") {
  bump_on_device d("4MiB");
  device_bump_kernel_state state(d.bump);
  unsigned long long* successes = nullptr;
  GPU_CHECK(cudaMalloc(&successes, sizeof *successes));
  GPU_CHECK(cudaMemset(successes, 0, sizeof *successes));
  const int blocks = 128, per_block = 256, rounds = 200;
  allocate_repeatedly<<<blocks, per_block>>>(state.get(), rounds, successes);
  GPU_CHECK(cudaGetLastError());
  unsigned long long total = 0;
  GPU_CHECK(cudaMemcpy(&total, successes, sizeof total, cudaMemcpyDeviceToHost));
  cudaFree(successes);
  const device_bump_state after = state.adopt();
  CHECK_EQ(total, after.capacity / 256);
  CHECK(after.offset >= after.capacity);
  // Only warps that saw room add: past the capacity by less than one request per thread.
  CHECK(after.offset < after.capacity + 256ull * blocks * per_block);
}

}  // namespace

GPU_MAIN
