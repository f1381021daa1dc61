// One typed suite over every strategy on the simulated backing (after RMM's mr_tests): zero and
// one byte, alignment, the largest request, exhaustion with the state intact, invalid and double
// frees with the state intact, streams, trim and reset, and a deterministic random stress of a
// million operations per strategy checking that no two live blocks overlap and that the stats
// equal a recount.
#include <algorithm>
#include <map>
#include <memory>
#include <random>

#include "check.hpp"
#include "invariants.hpp"
#include "suite_configs.hpp"
#include "suite_support.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;
using namespace vramscope::testing;

namespace {

struct fixture {
  std::unique_ptr<simulated_backing> backing;
  std::unique_ptr<allocator> alloc;
  std::map<address_t, std::size_t> live;  // what the test holds: address -> requested

  explicit fixture(const suite_config& c) {
    simulated_options o;
    o.capacity = c.capacity;
    backing = make_simulated_backing(o);
    alloc = make_allocator(c.strategy, *backing, c.parameters);
  }
  void* allocate(std::size_t n, stream_t s = 0) {
    void* p = alloc->allocate(n, s);
    if (p) live[reinterpret_cast<address_t>(p)] = n;
    return p;
  }
  void deallocate(void* p, stream_t s = 0) {
    alloc->deallocate(p, s);
    live.erase(reinterpret_cast<address_t>(p));
  }
  std::string invariants() const { return check_invariants(*alloc, &live); }
};

void each_config(void (*body)(const suite_config&)) {
  // A configuration whose strategy is missing is reported by the registration test below.
  for_each_config(body, [](const suite_config& c, bool registered) {
    if (registered) std::fprintf(stderr, "  [%s]\n", c.label.c_str());
    return registered;
  });
}

TEST("every registered strategy has a suite configuration, and every configuration a strategy") {
  auto configs = suite_configs();
  for (const auto& info : strategies()) {
    // A strategy that plans ahead (planned) serves a replay of a whole trace, not the suite's online
    // random operations: it has no configuration here and its own tests (planned_test.cpp).
    if (info.needs_plan) continue;
    bool found = std::any_of(configs.begin(), configs.end(),
                             [&](const suite_config& c) { return c.strategy == info.name; });
    if (!found) ::check::report(__FILE__, __LINE__, "no suite configuration for " + info.name);
  }
  for (const auto& c : configs) {
    bool found = std::any_of(strategies().begin(), strategies().end(),
                             [&](const strategy_info& i) { return i.name == c.strategy; });
    if (!found) ::check::report(__FILE__, __LINE__, "strategy not registered: " + c.strategy);
  }
}

TEST("zero bytes returns nullptr and changes nothing; freeing nullptr is a no-op") {
  each_config([](const suite_config& c) {
    fixture f(c);
    auto before = f.alloc->stats();
    CHECK(f.alloc->allocate(0) == nullptr);
    f.alloc->deallocate(nullptr);
    CHECK(same_stats_except_failures(before, f.alloc->stats()));
    CHECK_INVARIANTS(f);
  });
}

TEST("one byte gives an aligned block counted as 1 requested byte") {
  each_config([](const suite_config& c) {
    fixture f(c);
    void* p = f.allocate(1);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<address_t>(p) % min_alignment == 0);
    auto s = f.alloc->stats();
    CHECK_EQ(s.requested_live, 1u);
    CHECK(s.rounded_live >= 1);
    CHECK(s.reserved_live >= s.rounded_live);
    CHECK_EQ(s.live_blocks, 1u);
    CHECK_EQ(f.alloc->requested_size(p), 1u);
    CHECK_INVARIANTS(f);
    f.deallocate(p);
    CHECK_EQ(f.alloc->stats().requested_live, 0u);
    CHECK_INVARIANTS(f);
  });
}

TEST("every block is 256 B aligned, for sizes of every shape") {
  each_config([](const suite_config& c) {
    fixture f(c);
    std::vector<void*> ps;
    for (std::size_t n : {1ul, 7ul, 255ul, 256ul, 257ul, 511ul, 1000ul, 4096ul, 65535ul, 100000ul,
                          1048575ul, 3000000ul}) {
      if (n > c.max_request) continue;
      void* p = f.allocate(n);
      REQUIRE(p != nullptr);
      CHECK(reinterpret_cast<address_t>(p) % min_alignment == 0);
      ps.push_back(p);
    }
    CHECK_INVARIANTS(f);
    for (void* p : ps) f.deallocate(p);
    CHECK_INVARIANTS(f);
  });
}

TEST("the largest request of the configuration succeeds; one beyond the device fails") {
  each_config([](const suite_config& c) {
    fixture f(c);
    void* p = f.allocate(c.max_request);
    CHECK(p != nullptr);
    CHECK_INVARIANTS(f);
    auto before = f.alloc->stats();
    auto layout = snapshot(*f.alloc);
    CHECK_THROWS_AS(f.alloc->allocate(c.capacity + 1), out_of_memory);
    CHECK(same_stats_except_failures(before, f.alloc->stats()));
    CHECK(same_layout(layout, snapshot(*f.alloc)));
    CHECK_EQ(f.alloc->stats().failures, before.failures + 1);
    f.deallocate(p);
    CHECK_INVARIANTS(f);
  });
}

TEST("requests of 2^40 B to 2^64 - 1 B fail at once with out_of_memory, the state intact") {
  // Sizes far past the device: no strategy or backing may loop or size anything by them.
  each_config([](const suite_config& c) {
    fixture f(c);
    void* p = f.allocate(std::min<std::size_t>(c.max_request, 1000));
    REQUIRE(p != nullptr);
    auto before = f.alloc->stats();
    auto layout = snapshot(*f.alloc);
    int failed = 0;
    for (std::size_t n : {std::size_t{1} << 40, std::size_t{1} << 50, (std::size_t{1} << 53) - 1,
                          std::size_t{1} << 53, ~std::size_t{0} - 255, ~std::size_t{0}}) {
      try {
        f.alloc->allocate(n);
      } catch (const out_of_memory&) {
        ++failed;
      }
    }
    CHECK_EQ(failed, 6);
    CHECK(same_stats_except_failures(before, f.alloc->stats()));
    CHECK(same_layout(layout, snapshot(*f.alloc)));
    f.deallocate(p);
    CHECK_INVARIANTS(f);
  });
}

TEST("exhaustion raises out_of_memory with requested and available, state intact, and recovers") {
  each_config([](const suite_config& c) {
    fixture f(c);
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
        CHECK(std::string(e.what()).find("out of memory") != std::string::npos);
        CHECK(same_stats_except_failures(before, f.alloc->stats()));
        CHECK(same_layout(layout, snapshot(*f.alloc)));
      }
    }
    CHECK(failed);
    CHECK_INVARIANTS(f);
    // Freeing makes room again (strategies that never reuse need a reset).
    for (void* p : ps) f.deallocate(p);
    if (f.alloc->supports_reset()) {
      f.alloc->reset();
      f.live.clear();
    }
    void* p = f.allocate(n);
    CHECK(p != nullptr);
    CHECK_INVARIANTS(f);
  });
}

TEST("invalid free and double free raise typed errors and change nothing") {
  each_config([](const suite_config& c) {
    fixture f(c);
    void* a = f.allocate(std::min<std::size_t>(1000, c.max_request));
    void* b = f.allocate(std::min<std::size_t>(5000, c.max_request));
    auto before = f.alloc->stats();
    auto layout = snapshot(*f.alloc);
    CHECK_THROWS_AS(f.alloc->deallocate(reinterpret_cast<void*>(0x1234500)), invalid_free);
    CHECK_THROWS_AS(f.alloc->deallocate(static_cast<char*>(b) + 256), invalid_free);
    CHECK(same_stats_except_failures(before, f.alloc->stats()));
    CHECK(same_layout(layout, snapshot(*f.alloc)));
    f.deallocate(a);
    auto after_free = f.alloc->stats();
    auto layout2 = snapshot(*f.alloc);
    try {
      f.alloc->deallocate(a);
      ::check::report(__FILE__, __LINE__, "double free did not throw");
    } catch (const double_free& e) {
      CHECK_EQ(e.code(), error_code::double_free);
    } catch (const invalid_free&) {
      // A strategy that hands the memory back to the device at once may not remember it.
      CHECK(c.strategy == "cuda_malloc" || c.strategy == "async_pool");
    }
    CHECK(same_stats_except_failures(after_free, f.alloc->stats()));
    CHECK(same_layout(layout2, snapshot(*f.alloc)));
    f.deallocate(b);
    CHECK_INVARIANTS(f);
  });
}

TEST(
    "a block freed on its own stream is reusable at once; on another stream it waits for the "
    "event") {
  each_config([](const suite_config& c) {
    fixture f(c);
    std::size_t n = std::min<std::size_t>(4096, c.max_request);
    void* a = f.allocate(n, 1);
    f.deallocate(a, 2);  // freed on stream 2: pending until stream 2's event completes
    auto s = f.alloc->stats();
    CHECK_EQ(s.pending_blocks, 1u);
    CHECK_EQ(s.requested_live, 0u);
    CHECK_INVARIANTS(f);
    CHECK_THROWS_AS(f.alloc->deallocate(a, 1), double_free);
    f.backing->set_time(f.backing->time() + 1000000);  // the event completes
    CHECK_EQ(f.alloc->process_deferred(), 1u);
    CHECK_EQ(f.alloc->stats().pending_blocks, 0u);
    CHECK_INVARIANTS(f);
    // record_stream: used on stream 3, freed on its own stream 1: still waits for stream 3.
    void* b = f.allocate(n, 1);
    f.alloc->record_stream(b, 3);
    f.deallocate(b, 1);
    CHECK_EQ(f.alloc->stats().pending_blocks, 1u);
    f.alloc->synchronize_deferred();
    CHECK_EQ(f.alloc->stats().pending_blocks, 0u);
    CHECK_INVARIANTS(f);
  });
}

TEST("trim and reset leave a consistent allocator") {
  each_config([](const suite_config& c) {
    fixture f(c);
    std::vector<void*> ps;
    for (int i = 0; i < 20; ++i)
      ps.push_back(f.allocate(std::min<std::size_t>(4096u << (i % 5), c.max_request)));
    for (std::size_t i = 0; i < ps.size(); i += 2) f.deallocate(ps[i]);
    f.alloc->trim();
    CHECK_INVARIANTS(f);
    if (f.alloc->supports_reset()) {
      f.alloc->reset();
      f.live.clear();
      auto s = f.alloc->stats();
      CHECK_EQ(s.requested_live, 0u);
      CHECK_EQ(s.live_blocks, 0u);
      CHECK_INVARIANTS(f);
      CHECK(f.allocate(100) != nullptr);
    } else {
      CHECK_THROWS_AS(f.alloc->reset(), unsupported);
      for (std::size_t i = 1; i < ps.size(); i += 2) f.deallocate(ps[i]);
      f.alloc->trim();
      CHECK_EQ(f.alloc->stats().requested_live, 0u);
    }
    CHECK_INVARIANTS(f);
  });
}

TEST("unknown parameters and bad values are rejected with their names") {
  auto b = make_simulated_backing();
  for (const auto& info : strategies()) {
    try {
      make_allocator(info.name, *b, {{"no_such_parameter", "1"}});
      ::check::report(__FILE__, __LINE__, info.name + " accepted an unknown parameter");
    } catch (const invalid_argument& e) {
      CHECK(std::string(e.what()).find("no_such_parameter") != std::string::npos);
    }
    for (const auto& p : info.params) {
      if (p.kind != "size" && p.kind != "uint") continue;
      try {
        make_allocator(info.name, *b, {{p.name, "twelve"}});
        ::check::report(__FILE__, __LINE__, info.name + " accepted " + p.name + "=twelve");
      } catch (const invalid_argument& e) {
        CHECK(std::string(e.what()).find(p.name) != std::string::npos);
      }
    }
  }
}

// A million operations per strategy: random sizes (log-uniform up to the configuration's largest
// request), random frees, several streams. Every allocation is checked against the live set for
// overlap; the full invariant walk runs periodically and at the end.
TEST("random stress: 1M operations per strategy, no overlap, stats equal a recount") {
  each_config([](const suite_config& c) {
    fixture f(c);
    std::mt19937_64 rng(0x5eed ^ std::hash<std::string>{}(c.label));
    std::vector<address_t> order;  // live addresses, for picking one at random
    std::map<address_t, address_t>
        extent;  // address -> end (rounded extents from the walk not needed)
    const double log_max = std::log(static_cast<double>(c.max_request));
    std::size_t ooms = 0, resets = 0;
    const int operations = 1000000;
    for (int op = 0; op < operations; ++op) {
      bool do_alloc = order.empty() || (order.size() < 3000 && (rng() % 100) < 55);
      if (do_alloc) {
        std::size_t n = static_cast<std::size_t>(
            std::exp(std::uniform_real_distribution<double>(0, log_max)(rng)));
        n = std::clamp<std::size_t>(n, 1, c.max_request);
        stream_t s = rng() % 8 == 0 ? 2 : 1;
        void* p;
        try {
          p = f.alloc->allocate(n, s);
        } catch (const out_of_memory&) {
          ++ooms;
          if (f.alloc->supports_reset() && rng() % 2 == 0) {
            f.alloc->reset();
            f.live.clear();
            order.clear();
            extent.clear();
            ++resets;
          } else {
            // Free half of what is live.
            for (std::size_t k = 0; k < order.size() / 2; ++k) {
              std::size_t i = rng() % order.size();
              f.alloc->deallocate(reinterpret_cast<void*>(order[i]), 1);
              f.live.erase(order[i]);
              extent.erase(order[i]);
              order[i] = order.back();
              order.pop_back();
            }
          }
          continue;
        }
        address_t a = reinterpret_cast<address_t>(p);
        address_t end = a + n;
        auto next = extent.lower_bound(a);
        bool overlap = (next != extent.end() && next->first < end) ||
                       (next != extent.begin() && std::prev(next)->second > a);
        if (overlap) {
          ::check::report(__FILE__, __LINE__,
                          c.label + ": block overlaps a live block at op " + std::to_string(op));
          return;
        }
        extent[a] = end;
        f.live[a] = n;
        order.push_back(a);
      } else {
        std::size_t i = rng() % order.size();
        address_t a = order[i];
        f.alloc->deallocate(reinterpret_cast<void*>(a), rng() % 16 == 0 ? 2 : 1);
        f.live.erase(a);
        extent.erase(a);
        order[i] = order.back();
        order.pop_back();
      }
      if (op % 8192 == 0) f.backing->set_time(f.backing->time() + 50000);
      if (op % 200000 == 0 || op == operations - 1) {
        std::string broken = f.invariants();
        if (!broken.empty()) {
          ::check::report(__FILE__, __LINE__, broken + " (op " + std::to_string(op) + ")");
          return;
        }
      }
    }
    f.alloc->synchronize_deferred();
    CHECK_INVARIANTS(f);
    std::fprintf(stderr, "    %zu out-of-memory, %zu resets, peak reserved %s\n", ooms, resets,
                 format_bytes(f.alloc->stats().reserved_peak).c_str());
  });
}

}  // namespace

CHECK_MAIN
