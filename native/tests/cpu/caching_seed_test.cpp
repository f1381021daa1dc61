// The caching strategy started from a recorded state (allocator::seed, replay_target's
// initial_state): a recording that began late holds segments with free space inside them, which
// PyTorch's allocator reuses before it obtains anything new; a replay seeded with them must too.
#include <vector>

#include "check.hpp"
#include "invariants.hpp"
#include "vramscope/allocator.hpp"
#include "vramscope/replay.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;
using vramscope::testing::check_invariants;

namespace {

constexpr address_t recorded_base = 0x7f1200000000;

// One 20 MiB large-pool segment: a live 6 MiB block at offset 4 MiB, free before and after it.
seed_state one_large_segment() {
  seed_state s;
  s.segments.push_back({recorded_base, 20 * MiB, 1, 0, false, false});
  s.blocks.push_back({recorded_base + 4 * MiB, 6 * MiB, 6 * MiB - 100, 1});
  return s;
}

}  // namespace

TEST("seeded caching (pytorch) serves a request from a free range that existed before the window") {
  auto backing = make_simulated_backing();
  auto pool = make_allocator("caching", *backing, {{"preset", "pytorch"}});
  const std::vector<address_t> at = pool->seed(one_large_segment());
  REQUIRE(at.size() == 1);
  CHECK_EQ(check_invariants(*pool, nullptr), std::string());
  const allocator_stats before = pool->stats();
  CHECK_EQ(before.reserved_live, 20 * MiB);
  CHECK_EQ(before.live_blocks, 1u);
  CHECK_EQ(before.requested_live, 6 * MiB - 100);
  CHECK_EQ(before.device_calls.region_alloc, 1u);
  const address_t base = at[0] - 4 * MiB;
  // 8 MiB fits only the 10 MiB free range after the live block (best fit): no new segment.
  void* p = pool->allocate(8 * MiB, 1);
  CHECK_EQ(reinterpret_cast<address_t>(p), base + 10 * MiB);
  CHECK_EQ(pool->stats().reserved_live, 20 * MiB);
  CHECK_EQ(pool->stats().device_calls.region_alloc, 1u);
  // 3 MiB best-fits the 4 MiB range before it.
  void* q = pool->allocate(3 * MiB, 1);
  CHECK_EQ(reinterpret_cast<address_t>(q), base);
  CHECK_EQ(pool->stats().device_calls.region_alloc, 1u);
  CHECK_EQ(check_invariants(*pool, nullptr), std::string());
}

TEST("a seeded live block frees like any other: merged with its free neighbours, then released") {
  auto backing = make_simulated_backing();
  auto pool = make_allocator("caching", *backing, {{"preset", "pytorch"}});
  const std::vector<address_t> at = pool->seed(one_large_segment());
  pool->deallocate(reinterpret_cast<void*>(at[0]), 1);
  const allocator_stats s = pool->stats();
  CHECK_EQ(s.live_blocks, 0u);
  CHECK_EQ(s.free_bytes, 20 * MiB);
  CHECK_EQ(s.largest_free_block, 20 * MiB);  // one block again: the whole segment
  pool->trim();
  CHECK_EQ(pool->stats().reserved_live, 0u);
  CHECK_THROWS_AS(pool->seed(one_large_segment()), invalid_argument);  // not a fresh allocator
}

TEST("a seeded large-pool block keeps the slack PyTorch would not have split off it") {
  auto backing = make_simulated_backing();
  auto pool = make_allocator("caching", *backing, {{"preset", "pytorch"}});
  seed_state s;
  // 19.5 MiB recorded (512-byte rounded request) in a 20 MiB segment: the 0.5 MiB after it is no
  // free block (PyTorch splits off only more than 1 MiB), it is the block's own.
  s.segments.push_back({recorded_base, 20 * MiB, 1, 0, false, false});
  s.blocks.push_back({recorded_base, 20 * MiB - 512 * KiB, 20 * MiB - 512 * KiB, 1});
  pool->seed(s);
  const allocator_stats st = pool->stats();
  CHECK_EQ(st.rounded_live, 20 * MiB);
  CHECK_EQ(st.free_bytes, 0u);
}

TEST("seeding refuses a block outside its segments and a state of the other segment kind") {
  auto backing = make_simulated_backing();
  auto pool = make_allocator("caching", *backing, {{"preset", "pytorch"}});
  seed_state s = one_large_segment();
  s.blocks.push_back({recorded_base + 40 * MiB, 1 * MiB, 1 * MiB, 1});
  CHECK_THROWS_AS(pool->seed(s), invalid_argument);
  auto expandable =
      make_allocator("caching", *backing, {{"preset", "pytorch"}, {"expandable_segments", "true"}});
  CHECK_THROWS_AS(expandable->seed(one_large_segment()), invalid_argument);
  auto pow2 = make_allocator("caching", *backing, {{"preset", "pow2"}});
  CHECK_THROWS_AS(pow2->seed(one_large_segment()), unsupported);
}

TEST("seeded expandable segments: mapped runs at their offsets, free space reused before mapping") {
  auto backing = make_simulated_backing();
  auto pool =
      make_allocator("caching", *backing, {{"preset", "pytorch"}, {"expandable_segments", "true"}});
  seed_state s;
  // Two mapped runs of one large-pool segment, 40 MiB apart: 40 MiB and 20 MiB.
  s.segments.push_back({recorded_base, 40 * MiB, 1, 0, false, true});
  s.segments.push_back({recorded_base + 80 * MiB, 20 * MiB, 1, 0, false, true});
  s.blocks.push_back({recorded_base, 30 * MiB, 30 * MiB, 1});
  s.blocks.push_back({recorded_base + 80 * MiB, 20 * MiB, 20 * MiB, 1});
  const std::vector<address_t> at = pool->seed(s);
  CHECK_EQ(at[1] - at[0], 80 * MiB);
  CHECK_EQ(pool->stats().reserved_live, 60 * MiB);
  // 10 MiB fits the free 10 MiB left in the first run: nothing mapped.
  void* p = pool->allocate(10 * MiB, 1);
  CHECK_EQ(reinterpret_cast<address_t>(p), at[0] + 30 * MiB);
  CHECK_EQ(pool->stats().reserved_live, 60 * MiB);
  CHECK_EQ(pool->stats().device_calls.map, 2u);
  CHECK_EQ(check_invariants(*pool, nullptr), std::string());
}

TEST("a seeded private pool's free range serves that pool only, as PyTorch's graph pools do") {
  auto backing = make_simulated_backing();
  auto pool = make_allocator("caching", *backing, {{"preset", "pytorch"}});
  seed_state s;
  s.segments.push_back({recorded_base, 20 * MiB, 1, 7, false, false});  // private pool 7
  s.blocks.push_back({recorded_base, 6 * MiB, 6 * MiB, 1});
  const std::vector<address_t> at = pool->seed(s);
  // The default pools have nothing cached: a new segment.
  void* outside = pool->allocate(8 * MiB, 1);
  CHECK(reinterpret_cast<address_t>(outside) != at[0] + 6 * MiB);
  CHECK_EQ(pool->stats().device_calls.region_alloc, 2u);
  pool->use_pool(7);
  void* inside = pool->allocate(8 * MiB, 1);
  CHECK_EQ(reinterpret_cast<address_t>(inside), at[0] + 6 * MiB);
  CHECK_EQ(pool->stats().device_calls.region_alloc, 2u);
  CHECK_EQ(check_invariants(*pool, nullptr), std::string());
}

TEST(
    "replay with an initial state: the stand-in alloc is not replayed again and its free frees "
    "it") {
  request_column_vectors e;
  // event 0: the stand-in of the live block (id 0); 1: a 30 MiB alloc; 2: free of the stand-in;
  // 3: free of the 30 MiB block. The recorded segment is 40 MiB (left by a larger request before
  // the window), the live block 6 MiB at its start.
  e.kind = {0, 0, 1, 1};
  e.id = {0, 1, 0, 1};
  e.size = {double(6 * MiB - 100), double(30 * MiB), 0, 0};
  e.stream = {0, 0, 0, 0};
  e.time = {0, 1, 2, 3};
  replay_target t;
  t.label = "caching (pytorch)";
  t.strategy = "caching";
  t.parameters = {{"preset", "pytorch"}};
  t.initial_state.segments.push_back({recorded_base, 40 * MiB, 0, 0, false, false});
  t.initial_state.blocks.push_back({recorded_base, 6 * MiB, 0});
  replay_target unseeded = t;
  unseeded.label = "empty";
  unseeded.initial_state = {};
  const auto results = replay(e.columns(), {t, unseeded});
  const replay_summary& s = results[0].summary;
  CHECK_EQ(s.seeded_segments, 1u);
  CHECK_EQ(s.seeded_blocks, 1u);
  CHECK_EQ(s.peak_reserved, 40 * MiB);  // the 30 MiB came from the seeded free range
  CHECK_EQ(s.failures, 0u);
  CHECK_EQ(s.unknown_frees, 0u);
  CHECK_EQ(s.final_requested, 0u);
  CHECK_EQ(s.allocs, 2u);
  // From empty, the stand-in gets a 20 MiB segment and the 30 MiB block one of its own.
  CHECK_EQ(results[1].summary.peak_reserved, 50 * MiB);
  CHECK_EQ(results[1].summary.seeded_segments, 0u);
  // A block naming an event that is not an alloc is refused, naming it.
  replay_target bad = t;
  bad.initial_state.blocks[0].event = 2;
  CHECK_THROWS_AS(replay(e.columns(), {bad}), invalid_argument);
}

CHECK_MAIN
