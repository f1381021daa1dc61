// The static plan (planned): its placement heuristics never overlap two blocks alive at once and
// never go under the floor (property tests over random lifetimes and random traces); the strategy
// serves a replay only, and says so on every other path. It has no entry in the typed suites, whose
// online random operations it cannot serve (strategy_suite.cpp says why).
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../../core/strategies/planned_placement.hpp"
#include "check.hpp"
#include "invariants.hpp"
#include "vramscope/replay.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;

namespace {

constexpr std::uint8_t k_alloc = static_cast<std::uint8_t>(request_kind::alloc);
constexpr std::uint8_t k_free = static_cast<std::uint8_t>(request_kind::free);
constexpr std::uint8_t k_marker = static_cast<std::uint8_t>(request_kind::marker);

// No two blocks alive at once share a byte; every block lies inside the extent.
void check_no_overlap(const std::vector<block_lifetime>& blocks, const planning::placement& p) {
  REQUIRE(p.offset.size() == blocks.size());
  for (std::size_t a = 0; a < blocks.size(); ++a) {
    CHECK(p.offset[a] + blocks[a].bytes <= p.extent);
    for (std::size_t b = a + 1; b < blocks.size(); ++b) {
      const bool together = blocks[a].start < blocks[b].end && blocks[b].start < blocks[a].end;
      const bool share = p.offset[a] < p.offset[b] + blocks[b].bytes &&
                         p.offset[b] < p.offset[a] + blocks[a].bytes;
      if (together && share)
        ::check::report(__FILE__, __LINE__,
                        "blocks " + std::to_string(a) + " and " + std::to_string(b) +
                            " are alive at once and overlap");
    }
  }
}

// Random lifetimes in start order: sizes of 512 B to 1 MiB in 512 B steps, lifetimes short and long.
std::vector<block_lifetime> random_lifetimes(std::mt19937& rng, std::size_t n) {
  std::vector<block_lifetime> blocks;
  const std::uint32_t events = static_cast<std::uint32_t>(4 * n);
  std::vector<std::uint32_t> starts(n);
  for (auto& s : starts) s = rng() % events;
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  for (std::uint32_t s : starts) {
    const std::uint64_t bytes = 512 * (1 + rng() % (rng() % 4 == 0 ? 2048 : 16));
    const std::uint32_t life = rng() % 8 == 0 ? events : 1 + rng() % 40;
    blocks.push_back({bytes, s, std::min(events, s + life)});
  }
  return blocks;
}

}  // namespace

TEST("planned placement: no two blocks alive at once overlap, and no plan is under the floor") {
  std::mt19937 rng(31);
  for (int round = 0; round < 60; ++round) {
    const std::vector<block_lifetime> blocks = random_lifetimes(rng, 20 + rng() % 400);
    const std::uint64_t floor = planning::peak_load(blocks);
    using planning::fit;
    using planning::order_by;
    for (const planning::placement& p :
         {planning::greedy(blocks, order_by::size, fit::first),
          planning::greedy(blocks, order_by::size_longer_first, fit::best),
          planning::greedy(blocks, order_by::peak_first, fit::best),
          planning::greedy(blocks, order_by::lifetime, fit::first),
          planning::time_order_best_fit(blocks), planning::place_blocks(blocks)}) {
      check_no_overlap(blocks, p);
      CHECK(p.extent >= floor);
    }
    const planning::placement best = planning::place_blocks(blocks);
    CHECK(best.extent <= planning::time_order_best_fit(blocks).extent);
  }
}

TEST("planned placement: a case whose best plan is known by hand") {
  // A (4 KiB) over events [0, 10), B (2 KiB) over [1, 4), C (2 KiB) over [5, 9), D (2 KiB) over
  // [6, 8): at most A + C + D = 8 KiB alive at once. Largest first puts A at 0, B above it, then
  // C in the space B left, D above C: 8 KiB, the floor.
  const std::vector<block_lifetime> blocks = {
      {4096, 0, 10}, {2048, 1, 4}, {2048, 5, 9}, {2048, 6, 8}};
  CHECK_EQ(planning::peak_load(blocks), 8192u);
  const planning::placement p =
      planning::greedy(blocks, planning::order_by::size, planning::fit::best);
  check_no_overlap(blocks, p);
  CHECK_EQ(p.extent, 8192u);
  CHECK_EQ(p.offset[0], 0u);
  CHECK_EQ(p.offset[1], 4096u);
  CHECK_EQ(planning::place_blocks(blocks).extent, 8192u);
}

TEST("planned placement: the overlapping pairs it counts are those of a direct count") {
  std::mt19937 rng(5);
  for (int round = 0; round < 20; ++round) {
    const std::vector<block_lifetime> blocks = random_lifetimes(rng, 10 + rng() % 300);
    std::uint64_t pairs = 0;
    for (std::size_t a = 0; a < blocks.size(); ++a)
      for (std::size_t b = a + 1; b < blocks.size(); ++b)
        pairs += blocks[a].start < blocks[b].end && blocks[b].start < blocks[a].end;
    CHECK_EQ(planning::overlapping_pairs(blocks), pairs);
  }
}

namespace {

struct trace : request_column_vectors {
  std::uint32_t next_id = 0;
  std::uint32_t alloc(double bytes, std::uint32_t s = 0) {
    push(k_alloc, next_id, bytes, s);
    return next_id++;
  }
  void alloc_id(std::uint32_t id, double bytes, std::uint32_t s = 0) {
    push(k_alloc, id, bytes, s);
  }
  void free(std::uint32_t block, std::uint32_t s = 0) { push(k_free, block, 0, s); }
  void push(std::uint8_t k, std::uint32_t i, double bytes, std::uint32_t s) {
    kind.push_back(k);
    id.push_back(i);
    size.push_back(bytes);
    stream.push_back(s);
    time.push_back(time.empty() ? 0.0 : time.back() + 1000.0);
  }
};

// Two streams, frees on the other stream now and then, markers, frees of ids never allocated,
// zero-byte allocs, an id allocated again while live, and blocks left live at the end.
trace random_trace(std::mt19937& rng, std::size_t n) {
  trace t;
  std::vector<std::uint32_t> live;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned roll = rng() % 100;
    if (roll < 2) {
      t.push(k_marker, 0, 0, 0);
    } else if (roll < 3) {
      t.free(1000000 + static_cast<std::uint32_t>(rng() % 50));  // never allocated
    } else if (roll < 4) {
      t.alloc(0);
    } else if (roll < 5 && !live.empty()) {
      t.alloc_id(live[rng() % live.size()], 512.0 * (1 + rng() % 64));  // an id still live
    } else if (!live.empty() && roll < 50) {
      const std::size_t k = rng() % live.size();
      t.free(live[k], rng() % 5 == 0 ? 1u : 0u);
      live[k] = live.back();
      live.pop_back();
    } else {
      const double bytes = rng() % 10 == 0 ? 1 + rng() % (8 << 20) : 1 + rng() % 70000;
      live.push_back(t.alloc(bytes, rng() % 2));
    }
  }
  return t;
}

// The floor as the replay defines the blocks: the peak of live bytes, rounded to 512 B. An id
// allocated again while live leaves its older block live to the end (replay.hpp).
std::uint64_t rounded_floor(const trace& t) {
  std::map<std::uint32_t, std::uint64_t> current;  // id -> its freeable block's bytes (0: none)
  std::uint64_t now = 0, peak = 0;
  for (std::size_t i = 0; i < t.kind.size(); ++i) {
    if (t.kind[i] == k_alloc) {
      const auto bytes = static_cast<std::uint64_t>(t.size[i]);
      const std::uint64_t rounded =
          bytes == 0 ? 0 : std::max<std::uint64_t>(512, (bytes + 511) / 512 * 512);
      current[t.id[i]] = rounded;
      now += rounded;
      peak = std::max(peak, now);
    } else if (t.kind[i] == k_free) {
      auto it = current.find(t.id[i]);
      if (it != current.end()) {
        now -= it->second;
        it->second = 0;
      }
    }
  }
  return peak;
}

replay_target planned_target() {
  replay_target t{"planned", "planned", {}, {}};
  t.simulated.capacity = std::uint64_t{1} << 40;
  return t;
}

}  // namespace

TEST(
    "planned replay: never under the floor, no overlap of live blocks, no failure, random traces") {
  std::mt19937 rng(2026);
  for (int round = 0; round < 25; ++round) {
    const trace t = random_trace(rng, 500 + rng() % 3000);
    replay_options o;
    o.full_metrics = true;
    const replay_result r = replay(t.columns(), {planned_target()}, o)[0];
    const replay_summary& s = r.summary;
    CHECK_EQ(s.failures, 0u);
    CHECK(s.peak_reserved >= s.peak_rounded);
    CHECK_EQ(s.peak_rounded, rounded_floor(t));
    // Live blocks as the layout reports them: no two share a byte at any event.
    std::map<std::uint64_t, std::uint64_t> live;  // address -> size
    for (std::size_t k = 0; k < r.layout.op.size(); ++k) {
      const auto op = static_cast<trace_op>(r.layout.op[k]);
      const std::uint64_t a = r.layout.address[k];
      if (op == trace_op::alloc) {
        const auto size = static_cast<std::uint64_t>(r.layout.size[k]);
        auto next = live.lower_bound(a);
        CHECK(next == live.end() || a + size <= next->first);
        if (next != live.begin()) CHECK(std::prev(next)->first + std::prev(next)->second <= a);
        live[a] = size;
      } else if (op == trace_op::free) {
        CHECK(live.erase(a) == 1);
      } else {
        CHECK(op == trace_op::region_reserve);  // the arena; frees never wait for a stream
      }
    }
    // Reserved is the plan's arena from the first allocation to the end.
    CHECK_EQ(s.final_reserved, s.peak_reserved);
  }
}

TEST(
    "planned replay: under a cap below the plan the blocks past it fail; the plan's size runs it") {
  std::mt19937 rng(7);
  const trace t = random_trace(rng, 2000);
  const replay_result whole = replay(t.columns(), {planned_target()})[0];
  REQUIRE(whole.summary.peak_reserved > 0);
  replay_options o;
  o.capacity = whole.summary.peak_reserved - 512;
  const replay_result under = replay(t.columns(), {planned_target()}, o)[0];
  CHECK(under.summary.failures > 0);
  CHECK(under.summary.failures < under.summary.allocs);
  CHECK_EQ(under.summary.peak_reserved, o.capacity);  // the region is the device
  o.capacity = whole.summary.peak_reserved;
  o.stop_at_failure = true;
  // Held first: CHECK_EQ binds a reference to its argument, which must outlive the statement.
  const replay_result fits = replay(t.columns(), {planned_target()}, o)[0];
  CHECK_EQ(fits.summary.failures, 0u);
}

TEST("planned replay: a preview at its peak is cut from its one region") {
  std::mt19937 rng(11);
  const trace t = random_trace(rng, 1500);
  replay_options o;
  o.preview_at_peak = true;
  const replay_result r = replay(t.columns(), {planned_target()}, o)[0];
  CHECK_EQ(r.preview.event, r.summary.peak_reserved_event);
  CHECK(!r.preview.kept.empty());
}

TEST("planned driven directly by its plan: the invariant checker holds after every operation") {
  std::mt19937 rng(99);
  for (int round = 0; round < 10; ++round) {
    // Random lifetimes as events: at event i either the block starting at i is allocated or the
    // blocks ending at i are freed, on one of two streams.
    const std::vector<block_lifetime> blocks = random_lifetimes(rng, 50 + rng() % 200);
    auto b = make_simulated_backing();
    auto a = make_allocator("planned", *b);
    a->plan(blocks);
    std::map<std::uint32_t, std::vector<std::size_t>> ends;
    for (std::size_t k = 0; k < blocks.size(); ++k) ends[blocks[k].end].push_back(k);
    std::map<address_t, std::size_t> live;
    std::vector<void*> pointer(blocks.size(), nullptr);
    std::size_t next = 0;
    const std::uint32_t last = ends.empty() ? 0 : ends.rbegin()->first;
    for (std::uint32_t event = 0; event <= last; ++event) {
      for (std::size_t k : ends[event])
        if (pointer[k]) {
          live.erase(reinterpret_cast<address_t>(pointer[k]));
          a->deallocate(pointer[k], replay_stream(static_cast<std::uint32_t>(k % 2)));
          pointer[k] = nullptr;
        }
      if (next < blocks.size() && blocks[next].start == event) {
        pointer[next] = a->allocate(blocks[next].bytes,
                                    replay_stream(static_cast<std::uint32_t>(next % 3 == 0)));
        live[reinterpret_cast<address_t>(pointer[next])] = blocks[next].bytes;
        ++next;
      }
      const std::string broken = testing::check_invariants(*a, &live);
      if (!broken.empty()) {
        ::check::report(__FILE__, __LINE__, broken);
        return;
      }
    }
    CHECK_EQ(a->stats().live_blocks, 0u);
    CHECK_EQ(a->stats().pending_blocks, 0u);  // frees on another stream completed at once
  }
}

TEST("planned serves a replay only: online use, a recorded state and a late plan say why") {
  auto b = make_simulated_backing();
  auto a = make_allocator("planned", *b);
  CHECK(find_strategy("planned").needs_plan);
  CHECK_THROWS_AS(a->allocate(4096), unsupported);
  // A plan given after an allocation is refused.
  a->plan({{4096, 0, 2}});
  void* p = a->allocate(4096);
  CHECK(p != nullptr);
  CHECK_THROWS_AS(a->plan({{4096, 0, 2}}), invalid_argument);
  CHECK_THROWS_AS(a->allocate(8192), invalid_argument);  // past the plan's one block
  a->deallocate(p);
  // A strategy that does not plan refuses a plan.
  auto caching = make_allocator("caching", *b);
  CHECK_THROWS_AS(caching->plan({{4096, 0, 2}}), unsupported);
  // A replay from a recorded state: the plan's blocks are the trace's, so it cannot start from one.
  trace t;
  const std::uint32_t id = t.alloc(4096);
  t.free(id);
  replay_target target = planned_target();
  target.initial_state.segments.push_back({0x10000000, 2 << 20, 0, 0, false, false});
  target.initial_state.blocks.push_back({0x10000000, 4096, 0});
  CHECK_THROWS_AS(replay(t.columns(), {target}), unsupported);
}

CHECK_MAIN
