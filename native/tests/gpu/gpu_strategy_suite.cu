// The typed suite on real memory: every registered strategy on its natural CUDA backing
// (strategy_info::cuda_backing), in the configurations of suite_configs.hpp, with the device capped
// at the configuration's capacity. Kernels write a per-block pattern into every requested byte and
// verify all live blocks after each round of allocations, so an overlap is real corruption; the
// invariant checker runs on the real layout; exhaustion, invalid and double frees, and frees on
// another stream behave as on the simulated backing.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>

#include "gpu_common.cuh"
#include "invariants.hpp"
#include "suite_configs.hpp"
#include "suite_support.hpp"

using namespace vramscope;
using namespace vramscope::testing;

namespace {

// A real cudaMemPool cannot be walked: async_pool's walk then shows only the blocks handed out,
// not the memory the pool caches, so reserved memory is not tiled. Those checks are skipped there.
bool walk_is_opaque(const allocator& a) {
  return a.get_backing().kind() == backing_kind::cuda_async;
}

struct gpu_fixture {
  std::unique_ptr<backing> device;
  std::unique_ptr<allocator> alloc;
  std::map<address_t, std::size_t> live;  // address -> requested
  std::map<address_t, unsigned> serial;   // address -> the serial its pattern was written with
  unsigned next_serial = 1;

  explicit gpu_fixture(const suite_config& c) {
    const strategy_info& info = find_strategy(c.strategy);
    cuda_options o;
    o.capacity = c.capacity;
    device = make_backing(info.cuda_backing, {}, o);
    alloc = make_allocator(c.strategy, *device, c.parameters);
  }
  void* allocate(std::size_t n, stream_t s = 0) {
    void* p = alloc->allocate(n, s);
    if (p) {
      live[reinterpret_cast<address_t>(p)] = n;
      serial[reinterpret_cast<address_t>(p)] = next_serial++;
    }
    return p;
  }
  void deallocate(void* p, stream_t s = 0) {
    alloc->deallocate(p, s);
    live.erase(reinterpret_cast<address_t>(p));
    serial.erase(reinterpret_cast<address_t>(p));
  }
  void forget_all() {
    live.clear();
    serial.clear();
  }
  std::vector<gpu::block_desc> descs() const {
    std::vector<gpu::block_desc> d;
    for (auto& [a, n] : live) d.push_back({a, n, serial.at(a)});
    return d;
  }

  std::string invariants() const {
    if (!walk_is_opaque(*alloc)) return check_invariants(*alloc, &live);
    // What can be checked of an opaque pool: the blocks handed out, their sizes and counters.
    layout_snapshot s = snapshot(*alloc);
    allocator_stats st = alloc->stats();
    std::uint64_t requested = 0, rounded = 0, live_count = 0;
    for (auto& [a, n] : live) requested += n;
    std::sort(s.blocks.begin(), s.blocks.end(),
              [](const block_info& x, const block_info& y) { return x.address < y.address; });
    for (std::size_t i = 0; i < s.blocks.size(); ++i) {
      const block_info& b = s.blocks[i];
      if (i > 0 && s.blocks[i - 1].address + s.blocks[i - 1].size > b.address)
        return "async_pool: blocks overlap at " + format_address(b.address);
      if (b.state != block_state::live) continue;
      ++live_count;
      rounded += b.size;
      auto it = live.find(b.address);
      if (it == live.end()) return "async_pool: walk shows a block the test never got";
      if (b.size < it->second) return "async_pool: block smaller than its request";
    }
    if (live_count != live.size()) return "async_pool: live block count differs from the test's";
    if (st.requested_live != requested) return "async_pool: requested_live differs from a recount";
    if (st.rounded_live != rounded) return "async_pool: rounded_live differs from the walk";
    if (st.reserved_peak < st.rounded_peak) return "async_pool: reserved peak below rounded peak";
    return {};
  }
};

void each_config(void (*body)(const suite_config&)) {
  for_each_config(body, [](const suite_config& c, bool registered) {
    if (!registered) {
      std::printf("  [%s] skipped: strategy not registered in this build\n", c.label.c_str());
      return false;
    }
    std::printf("  [%s] on %s\n", c.label.c_str(),
                backing_kind_name(find_strategy(c.strategy).cuda_backing));
    std::fflush(stdout);
    return true;
  });
}

TEST(
    "every strategy's blocks hold their own pattern through rounds of allocate, write, verify, "
    "free") {
  each_config([](const suite_config& c) {
    gpu_fixture f(c);
    if (walk_is_opaque(*f.alloc))
      std::printf(
          "    cudaMemPool is opaque: checking blocks and counters, not the tiling of "
          "reserved memory\n");
    gpu::pattern_checker patterns;
    std::mt19937_64 rng(0x6a11 ^ std::hash<std::string>{}(c.label));
    const double log_max = std::log(static_cast<double>(c.max_request));
    std::size_t ooms = 0, blocks_written = 0;
    for (int round = 0; round < 12; ++round) {
      // Allocate up to 48 new blocks, or until the capped device says no.
      std::vector<gpu::block_desc> fresh;
      for (int i = 0; i < 48; ++i) {
        std::size_t n = static_cast<std::size_t>(
            std::exp(std::uniform_real_distribution<double>(0, log_max)(rng)));
        n = std::clamp<std::size_t>(n, 1, c.max_request);
        void* p;
        try {
          p = f.allocate(n);
        } catch (const out_of_memory&) {
          ++ooms;
          break;
        }
        address_t a = reinterpret_cast<address_t>(p);
        fresh.push_back({a, n, f.serial[a]});
      }
      // Only the new blocks are written: an old block that a new one overlaps loses its pattern.
      patterns.fill(fresh);
      blocks_written += fresh.size();
      auto all = f.descs();
      int first_bad = -1;
      unsigned long long bad = patterns.verify(all, &first_bad);
      if (bad != 0) {
        ::check::report(__FILE__, __LINE__,
                        c.label + ": " + std::to_string(bad) + " bytes corrupted in round " +
                            std::to_string(round) + ", first in block " +
                            format_address(all[first_bad].address) + " of " +
                            format_bytes(all[first_bad].bytes));
        return;
      }
      std::string broken = f.invariants();
      if (!broken.empty()) {
        ::check::report(__FILE__, __LINE__, broken + " (round " + std::to_string(round) + ")");
        return;
      }
      // Free a random half (all of it, or a reset, for strategies that reclaim only at reset).
      std::vector<address_t> addresses;
      for (auto& [a, n] : f.live) addresses.push_back(a);
      std::shuffle(addresses.begin(), addresses.end(), rng);
      if (f.alloc->supports_reset() && round % 3 == 2) {
        f.alloc->reset();
        f.forget_all();
      } else {
        for (std::size_t i = 0; i < addresses.size() / 2; ++i)
          f.deallocate(reinterpret_cast<void*>(addresses[i]));
      }
      CHECK_INVARIANTS(f);
    }
    std::printf(
        "    %zu blocks written and verified, %zu out-of-memory under the %s cap, peak "
        "reserved %s\n",
        blocks_written, ooms, format_bytes(c.capacity).c_str(),
        format_bytes(f.alloc->stats().reserved_peak).c_str());
  });
}

TEST("exhaustion under the capacity cap raises out_of_memory with the state intact, and recovers") {
  each_config([](const suite_config& c) {
    gpu_fixture f(c);
    std::size_t n = std::max<std::size_t>(c.max_request / 2, 256);
    std::vector<void*> ps;
    bool failed = false;
    for (int i = 0; i < 100000 && !failed; ++i) {
      auto before = f.alloc->stats();
      auto layout = snapshot(*f.alloc);
      try {
        ps.push_back(f.allocate(n));
      } catch (const out_of_memory& e) {
        failed = true;
        CHECK_EQ(e.requested(), n);
        CHECK(e.available() <= c.capacity);
        CHECK(same_stats_except_failures(before, f.alloc->stats()));
        CHECK(same_layout(layout, snapshot(*f.alloc)));
      }
    }
    CHECK(failed);
    CHECK_INVARIANTS(f);
    // The memory handed out before the failure is real and intact.
    gpu::pattern_checker patterns;
    patterns.fill(f.descs());
    CHECK_EQ(patterns.verify(f.descs()), 0ull);
    for (void* p : ps) f.deallocate(p);
    if (f.alloc->supports_reset()) {
      f.alloc->reset();
      f.forget_all();
    }
    void* p = f.allocate(n);
    CHECK(p != nullptr);
    CHECK_INVARIANTS(f);
  });
}

TEST("invalid and double frees raise typed errors on real memory and change nothing") {
  each_config([](const suite_config& c) {
    gpu_fixture f(c);
    void* a = f.allocate(std::min<std::size_t>(1000, c.max_request));
    void* b = f.allocate(std::min<std::size_t>(5000, c.max_request));
    auto before = f.alloc->stats();
    auto layout = snapshot(*f.alloc);
    CHECK_THROWS_AS(f.alloc->deallocate(static_cast<char*>(b) + 256), invalid_free);
    CHECK_THROWS_AS(f.alloc->deallocate(reinterpret_cast<void*>(0x1234500)), invalid_free);
    CHECK(same_stats_except_failures(before, f.alloc->stats()));
    CHECK(same_layout(layout, snapshot(*f.alloc)));
    f.deallocate(a);
    auto after_free = f.alloc->stats();
    try {
      f.alloc->deallocate(a);
      ::check::report(__FILE__, __LINE__, c.label + ": double free did not throw");
    } catch (const double_free&) {
    } catch (const invalid_free&) {
      CHECK(c.strategy == "cuda_malloc" || c.strategy == "async_pool");
    }
    CHECK(same_stats_except_failures(after_free, f.alloc->stats()));
    gpu::pattern_checker patterns;
    patterns.fill(f.descs());
    CHECK_EQ(patterns.verify(f.descs()), 0ull);
    f.deallocate(b);
    CHECK_INVARIANTS(f);
  });
}

TEST("a block freed on another stream stays pending while that stream's kernel runs") {
  each_config([](const suite_config& c) {
    gpu_fixture f(c);
    cudaStream_t owner = gpu::new_stream(), user = gpu::new_stream();
    const std::size_t n = std::min<std::size_t>(64 * KiB, c.max_request);
    void* p = f.allocate(n, gpu::as_stream(owner));
    address_t a = reinterpret_cast<address_t>(p);
    // A stream-ordered allocation is usable on another stream once its own stream got there.
    GPU_CHECK(cudaStreamSynchronize(owner));
    gpu::busy_then_fill<<<1, 256, 0, user>>>({a, n, f.serial[a]}, 200ull * 1000 * 1000);
    GPU_CHECK(cudaGetLastError());
    f.deallocate(p, gpu::as_stream(user));
    bool still_running = cudaStreamQuery(user) == cudaErrorNotReady;
    (void)cudaGetLastError();
    if (still_running) {
      CHECK_EQ(f.alloc->process_deferred(), 0u);
      CHECK_EQ(f.alloc->stats().pending_blocks, 1u);
    } else {
      std::printf("    the 200 ms kernel already finished; pending state not observable\n");
    }
    CHECK_INVARIANTS(f);
    f.alloc->synchronize_deferred();
    CHECK_EQ(f.alloc->stats().pending_blocks, 0u);
    CHECK(cudaStreamQuery(user) == cudaSuccess);
    CHECK_INVARIANTS(f);
    GPU_CHECK(cudaStreamDestroy(owner));
    GPU_CHECK(cudaStreamDestroy(user));
  });
}

}  // namespace

GPU_MAIN
