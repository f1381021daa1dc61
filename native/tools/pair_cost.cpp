// pair_cost: the cost of one warm alloc+free pair of one strategy, in instructions (under callgrind,
// which counts only the pair loop) or in this thread's CPU time. A profiling aid beside
// vramscope_bench: wall time on a shared machine is noisy, an instruction count is exact. The cells
// and parameters mirror the benchmark's (pair_cost.sh passes the same values the bench's JSON
// notes list), and so does the tracer: a ring buffer appended to inline.
//
//   pair_cost STRATEGY SIZE LIVE TRACING(0|1) PAIRS [key=value ...]
//
// PAIR_COST_IDLE_THREAD=1 starts an idle thread first: on a GPU the CUDA runtime's threads make
// the benchmark a multi-threaded process, where locks cost atomics that a one-thread process skips.
// PAIR_COST_HEAP_PAD=N holds an N-byte heap block allocated before the allocator, which moves the
// allocator and its tables on the heap: a sweep over N shows whether where they land (which hot
// lines share their address bits 0-11, "4K aliasing" on Intel cores) changes the time of a pair.
#include <valgrind/callgrind.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "vramscope/allocator.hpp"
#include "vramscope/backing.hpp"
#include "vramscope/errors.hpp"
#include "vramscope/params.hpp"

using namespace vramscope;

namespace {

double thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: pair_cost STRATEGY SIZE LIVE TRACING(0|1) PAIRS [key=value ...]\n");
    return 2;
  }
  const std::string strategy = argv[1];
  const std::size_t size = parse_size(argv[2], "SIZE");
  const std::size_t live = std::strtoull(argv[3], nullptr, 10);
  const bool tracing = std::atoi(argv[4]) != 0;
  const std::uint64_t pairs = std::strtoull(argv[5], nullptr, 10);
  params p;
  for (int i = 6; i < argc; ++i) {
    std::string kv = argv[i];
    auto eq = kv.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "pair_cost: parameter '%s' is not key=value\n", argv[i]);
      return 2;
    }
    p.set(kv.substr(0, eq), kv.substr(eq + 1));
  }
  std::thread idle;
  const char* idle_env = std::getenv("PAIR_COST_IDLE_THREAD");
  std::atomic<bool> done{false};
  if (idle_env != nullptr && std::atoi(idle_env) != 0)
    idle = std::thread([&] {
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    });
  // As the benchmark: held blocks of the request's size up to 1 MiB, 1 MiB beyond.
  const std::size_t held_size = size < MiB ? size : MiB;

  simulated_options sim;
  sim.capacity = 80 * GiB;
  auto b = make_backing(backing_kind::simulated, sim);
  ring_tracer recorder(1 << 16);
  const char* pad_env = std::getenv("PAIR_COST_HEAP_PAD");
  std::vector<char> heap_pad(pad_env != nullptr ? std::strtoull(pad_env, nullptr, 10) : 0);
  auto a = make_allocator(strategy, *b, p);
  if (tracing) a->set_tracer(&recorder);
  std::vector<void*> held;
  auto hold = [&] {
    held.clear();
    for (std::size_t i = 0; i < live; ++i) held.push_back(a->allocate(held_size));
  };
  hold();

  // Pairs in chunks. A bulk-free strategy runs out after some pairs: the first time, the pairs
  // that fitted since the last reset are counted, and from then on it is reset (and the blocks
  // held again) every that many pairs, outside what is counted, as the benchmark does outside what
  // it times. A chunk that ran out is not counted and runs again.
  double cpu_ns = 0;
  std::uint64_t pairs_per_reset = 0, since_reset = 0;
  auto reset = [&] {
    a->reset();
    hold();
    since_reset = 0;
  };
  auto run = [&](std::uint64_t n, bool counted) {
    std::uint64_t done = 0;
    while (done < n) {
      std::uint64_t i = 0, chunk = std::min<std::uint64_t>(n - done, 4096);
      if (pairs_per_reset) {
        if (since_reset == pairs_per_reset) reset();
        chunk = std::min(chunk, pairs_per_reset - since_reset);
      }
      const double start = thread_cpu_ns();
      if (counted) CALLGRIND_TOGGLE_COLLECT;
      try {
        for (; i < chunk; ++i) a->deallocate(a->allocate(size));
      } catch (const out_of_memory&) {
        if (counted) CALLGRIND_TOGGLE_COLLECT;
        if (!a->supports_reset() || since_reset + i == 0) throw;
        pairs_per_reset = since_reset + i;
        reset();
        continue;
      }
      if (counted) CALLGRIND_TOGGLE_COLLECT;
      if (counted) cpu_ns += thread_cpu_ns() - start;
      done += chunk;
      since_reset += chunk;
    }
  };
  try {
    run(pairs < 10000 ? pairs : 10000, false);  // warm: pools grown, caches filled
    run(pairs, true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pair_cost: %s\n", e.what());
    return 1;
  }
  std::printf("%s %zu live=%zu tracing=%d: %.2f ns/pair (thread CPU time, %llu pairs)\n",
              strategy.c_str(), size, live, tracing ? 1 : 0, cpu_ns / static_cast<double>(pairs),
              static_cast<unsigned long long>(pairs));
  for (void* ptr : held) a->deallocate(ptr);
  done = true;
  if (idle.joinable()) idle.join();
  return 0;
}
