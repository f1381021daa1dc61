// The decisions of the caching strategy, one test each: for preset `pytorch` every expected number
// comes from PyTorch's c10/cuda/CUDACachingAllocator.cpp (round_size, get_allocation_size,
// should_split, get_free_block, free_block, release_available_cached_blocks,
// release_cached_blocks, garbage_collect_cached_blocks); for preset `pow2` from its power-of-two
// classes. The last tests replay traces recorded with real PyTorch on an H100, giving the strategy
// the segment addresses PyTorch got, and require every block at PyTorch's address.
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "check.hpp"
#include "invariants.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;
using namespace vramscope::testing;

namespace {

struct pool_under_test {
  std::unique_ptr<simulated_backing> backing;
  std::unique_ptr<allocator> alloc;
  vector_tracer events;

  pool_under_test(const std::string& preset, params extra = {}, std::size_t capacity = 1 * GiB) {
    simulated_options o;
    o.capacity = capacity;
    backing = make_simulated_backing(o);
    extra.set("preset", preset);
    alloc = make_allocator("caching", *backing, extra);
    alloc->set_tracer(&events);
  }

  void* allocate(std::size_t n, stream_t s = 0) { return alloc->allocate(n, s); }
  void deallocate(void* p, stream_t s = 0) { alloc->deallocate(p, s); }

  std::vector<region_info> segments() const { return snapshot(*alloc).regions; }
  // The block (live or free) that starts at `p`.
  block_info block_at(const void* p) const {
    for (const auto& b : snapshot(*alloc).blocks)
      if (b.address == reinterpret_cast<address_t>(p)) return b;
    return {0, 0, block_state::unusable, 0};
  }
  std::vector<block_info> blocks_of_segment(std::size_t i) const {
    auto s = snapshot(*alloc);
    std::vector<block_info> out;
    const region_info& r = s.regions.at(i);
    for (const auto& b : s.blocks)
      if (b.address >= r.address && b.address < r.address + r.size) out.push_back(b);
    return out;
  }
  std::uint64_t reserved() const { return alloc->stats().reserved_live; }
  std::uint64_t segments_obtained() const { return alloc->stats().device_calls.region_alloc; }
  std::uint64_t segments_released() const { return alloc->stats().device_calls.region_free; }
  std::size_t count(trace_op op) const {
    std::size_t n = 0;
    for (const auto& e : events) n += e.op == op;
    return n;
  }
  bool consistent() const {
    std::string broken = check_invariants(*alloc, nullptr);
    if (!broken.empty()) std::fprintf(stderr, "  %s\n", broken.c_str());
    return broken.empty();
  }
};

std::uint64_t rounded_size_of(std::size_t request, const std::string& preset, params extra = {}) {
  pool_under_test t(preset, extra);
  void* p = t.allocate(request);
  return t.block_at(p).size;
}

// --- pytorch: rounding (round_size) ------------------------------------------------------------

TEST("pytorch: sizes round up to a multiple of 512 B, at least 512 B (1 -> 512, 1000 -> 1024)") {
  CHECK_EQ(rounded_size_of(1, "pytorch"), 512u);
  CHECK_EQ(rounded_size_of(512, "pytorch"), 512u);
  CHECK_EQ(rounded_size_of(513, "pytorch"), 1024u);
  CHECK_EQ(rounded_size_of(1000, "pytorch"), 1024u);
  CHECK_EQ(rounded_size_of(1 * MiB - 1, "pytorch"), 1 * MiB);
}

TEST("pytorch: roundup_power2_divisions rounds to the next division above 512 B x divisions") {
  // 4 divisions: 1200 B is not above 512 x 4, so it stays a multiple of 512 (1536); 5 MiB + 1
  // lies in [4, 8) MiB cut in steps of 1 MiB, so it rounds to 6 MiB; powers of two stay.
  params four{{"roundup_power2_divisions", "4"}};
  CHECK_EQ(rounded_size_of(1200, "pytorch", four), 1536u);
  CHECK_EQ(rounded_size_of(5 * MiB + 1, "pytorch", four), 6 * MiB);
  CHECK_EQ(rounded_size_of(8 * MiB, "pytorch", four), 8 * MiB);
  CHECK_EQ(rounded_size_of(3000, "pytorch", four), 3072u);  // [2048, 4096) in steps of 512
  // Per interval (lower bounds in MiB): the first entry also covers smaller sizes, '>' the rest.
  params list{{"roundup_power2_divisions", "[1:4,2:8,>:2]"}};
  CHECK_EQ(rounded_size_of(3 * MiB / 2 + 1, "pytorch", list), 7 * MiB / 4);  // 4 steps of 256 KiB
  CHECK_EQ(rounded_size_of(3 * MiB + 1, "pytorch", list),
           3 * MiB + 256 * KiB);                                     // 8 steps of 256 KiB
  CHECK_EQ(rounded_size_of(5 * MiB + 1, "pytorch", list), 6 * MiB);  // 2 steps of 2 MiB
  CHECK_EQ(rounded_size_of(5 * MiB + 1, "pytorch"), 5 * MiB + 512);  // off by default
}

// --- pytorch: pools and segment sizes (get_pool, get_allocation_size) ----------------------------

TEST("pytorch: a 100 B request creates a 2 MiB small-pool segment, split after 512 B") {
  pool_under_test t("pytorch");
  void* p = t.allocate(100);
  auto segs = t.segments();
  REQUIRE(segs.size() == 1);
  CHECK_EQ(segs[0].size, 2 * MiB);
  CHECK_EQ(segs[0].kind, 0u);  // small pool
  auto blocks = t.blocks_of_segment(0);
  REQUIRE(blocks.size() == 2);
  CHECK_EQ(blocks[0].address, reinterpret_cast<address_t>(p));
  CHECK_EQ(blocks[0].size, 512u);
  CHECK(blocks[1].state == block_state::free);
  CHECK_EQ(blocks[1].size, 2 * MiB - 512);
  CHECK_EQ(t.count(trace_op::split), 1u);
  CHECK(t.consistent());
}

TEST("pytorch: 1 MiB is the largest small-pool request; 1 MiB + 1 B takes a 20 MiB large segment") {
  pool_under_test t("pytorch");
  t.allocate(1 * MiB);
  t.allocate(1 * MiB + 1);
  auto segs = t.segments();
  REQUIRE(segs.size() == 2);
  std::map<std::uint32_t, std::uint64_t> size_of_kind;
  for (auto& s : segs) size_of_kind[s.kind] = s.size;
  CHECK_EQ(size_of_kind[0], 2 * MiB);
  CHECK_EQ(size_of_kind[1], 20 * MiB);
}

TEST("pytorch: a 5 MiB request creates a 20 MiB segment and splits off the 15 MiB remainder") {
  pool_under_test t("pytorch");
  void* p = t.allocate(5 * MiB);
  auto segs = t.segments();
  REQUIRE(segs.size() == 1);
  CHECK_EQ(segs[0].size, 20 * MiB);
  CHECK_EQ(segs[0].kind, 1u);
  CHECK_EQ(t.block_at(p).size, 5 * MiB);
  auto blocks = t.blocks_of_segment(0);
  REQUIRE(blocks.size() == 2);
  CHECK_EQ(blocks[1].size, 15 * MiB);
  CHECK(blocks[1].state == block_state::free);
}

TEST("pytorch: requests of 10 MiB and more get their size rounded to 2 MiB as the segment") {
  struct expectation {
    std::size_t request, segment, block;
  };
  for (auto e :
       {expectation{10 * MiB - 512, 20 * MiB, 10 * MiB - 512},  // below kMinLargeAlloc
        expectation{10 * MiB, 10 * MiB, 10 * MiB}, expectation{12 * MiB, 12 * MiB, 12 * MiB},
        // 11 MiB in a 12 MiB segment: the 1 MiB remainder is not above kSmallSize, so
        // the block is the whole segment.
        expectation{11 * MiB, 12 * MiB, 12 * MiB},
        // 102 MiB segment; the 2 MiB - 512 B remainder is above 1 MiB: split.
        expectation{100 * MiB + 1, 102 * MiB, 100 * MiB + 512}}) {
    pool_under_test t("pytorch");
    void* p = t.allocate(e.request);
    auto segs = t.segments();
    REQUIRE(segs.size() == 1);
    CHECK_EQ(segs[0].size, e.segment);
    CHECK_EQ(t.block_at(p).size, e.block);
  }
}

// --- pytorch: splitting (should_split) -----------------------------------------------------------

TEST("pytorch: the small pool splits off any remainder of 512 B or more") {
  pool_under_test t("pytorch");
  t.allocate(1 * MiB);
  void* q = t.allocate(1 * MiB - 512);  // from the free 1 MiB: leaves exactly 512 B
  auto blocks = t.blocks_of_segment(0);
  REQUIRE(blocks.size() == 3);
  CHECK_EQ(t.block_at(q).size, 1 * MiB - 512);
  CHECK_EQ(blocks[2].size, 512u);
  CHECK(blocks[2].state == block_state::free);
  void* r = t.allocate(512);  // takes it whole
  CHECK_EQ(reinterpret_cast<address_t>(r), blocks[2].address);
  CHECK_EQ(t.segments().size(), 1u);
}

TEST("pytorch: the large pool splits only a remainder above 1 MiB") {
  pool_under_test t("pytorch");
  void* keep = t.allocate(5 * MiB);  // a 20 MiB segment: [5 live][15 free]
  void* p = t.allocate(14 * MiB);    // 1 MiB remainder: not split, the block is all 15 MiB
  CHECK_EQ(t.block_at(p).size, 15 * MiB);
  CHECK_EQ(t.segments().size(), 1u);
  t.deallocate(p);
  void* q = t.allocate(13 * MiB + 512);  // remainder 2 MiB - 512, above 1 MiB: split
  CHECK_EQ(t.block_at(q).size, 13 * MiB + 512);
  CHECK_EQ(t.blocks_of_segment(0).size(), 3u);
  t.deallocate(q);
  t.deallocate(keep);
  CHECK(t.consistent());
}

// --- pytorch: best fit (get_free_block) ----------------------------------------------------------

TEST("pytorch: best fit takes the smallest cached block that fits, then the lowest address") {
  pool_under_test t("pytorch");
  void* big = t.allocate(16 * MiB);
  void* small_a = t.allocate(12 * MiB);
  void* small_b = t.allocate(12 * MiB);
  t.deallocate(big);
  t.deallocate(small_b);
  t.deallocate(small_a);
  CHECK_EQ(t.segments_obtained(), 3u);
  void* p = t.allocate(11 * MiB + 512);  // the 12 MiB blocks fit better than the 16 MiB one
  address_t lower =
      std::min(reinterpret_cast<address_t>(small_a), reinterpret_cast<address_t>(small_b));
  CHECK_EQ(reinterpret_cast<address_t>(p), lower);
  void* q = t.allocate(13 * MiB);  // only the 16 MiB block fits
  CHECK_EQ(reinterpret_cast<address_t>(q), reinterpret_cast<address_t>(big));
  CHECK_EQ(t.segments_obtained(), 3u);
}

TEST("pytorch: a cached block of another stream is not reused; its own stream reuses it") {
  pool_under_test t("pytorch");
  void* a = t.allocate(12 * MiB, 1);
  t.deallocate(a, 1);
  void* b = t.allocate(12 * MiB, 2);
  CHECK(b != a);
  CHECK_EQ(t.segments_obtained(), 2u);
  void* c = t.allocate(12 * MiB, 1);
  CHECK_EQ(c, a);
  CHECK_EQ(t.segments_obtained(), 2u);
}

TEST("pytorch: a block freed on another stream returns to its own stream's pool after the event") {
  pool_under_test t("pytorch");
  void* a = t.allocate(4096, 1);
  t.deallocate(a, 2);  // pending on stream 2's event
  CHECK_EQ(t.alloc->stats().pending_blocks, 1u);
  t.backing->set_time(t.backing->time() + 1000000);
  CHECK_EQ(t.alloc->process_deferred(), 1u);
  void* on_other = t.allocate(4096, 2);
  CHECK(on_other != a);
  void* on_own = t.allocate(4096, 1);
  CHECK_EQ(on_own, a);
}

// --- pytorch: merging (free_block) ---------------------------------------------------------------

TEST("pytorch: freeing merges a block with free neighbours on both sides") {
  pool_under_test t("pytorch");
  void* a = t.allocate(512 * KiB);
  void* b = t.allocate(512 * KiB);
  void* c = t.allocate(512 * KiB);
  CHECK_EQ(t.blocks_of_segment(0).size(), 4u);  // a b c and the free 512 KiB after them
  t.deallocate(a);
  t.deallocate(c);  // merges with the free block after it
  CHECK_EQ(t.blocks_of_segment(0).size(), 3u);
  std::size_t merges_before = t.count(trace_op::merge);
  t.deallocate(b);  // merges with a before and c after
  CHECK_EQ(t.count(trace_op::merge) - merges_before, 2u);
  auto blocks = t.blocks_of_segment(0);
  REQUIRE(blocks.size() == 1);
  CHECK_EQ(blocks[0].size, 2 * MiB);
  CHECK(blocks[0].state == block_state::free);
  CHECK(t.consistent());
}

// --- pytorch: releasing (release_cached_blocks, release_available_cached_blocks) -----------------

TEST("pytorch: trim releases only the segments that are entirely free") {
  pool_under_test t("pytorch");
  void* whole = t.allocate(12 * MiB);
  void* part = t.allocate(5 * MiB);  // a 20 MiB segment, stays partly used
  void* part2 = t.allocate(5 * MiB);
  t.deallocate(whole);
  t.deallocate(part2);
  CHECK_EQ(t.reserved(), 32 * MiB);
  t.alloc->trim();
  CHECK_EQ(t.reserved(), 20 * MiB);
  CHECK_EQ(t.segments_released(), 1u);
  CHECK_EQ(t.count(trace_op::trim), 1u);
  t.deallocate(part);
  t.alloc->trim();
  CHECK_EQ(t.reserved(), 0u);
  CHECK(t.consistent());
}

TEST("pytorch: out of memory releases the cached segments, then the retry succeeds") {
  pool_under_test t("pytorch", {}, 64 * MiB);
  void* a = t.allocate(40 * MiB);
  t.deallocate(a);                 // 40 MiB cached
  void* b = t.allocate(50 * MiB);  // 24 MiB left on the device: release the 40, then obtain 50
  CHECK(b != nullptr);
  CHECK_EQ(t.reserved(), 50 * MiB);
  CHECK_EQ(t.segments_released(), 1u);
  CHECK(t.consistent());
}

TEST("pytorch: when even the whole cache would not make room, the failure releases nothing") {
  pool_under_test t("pytorch", {}, 64 * MiB);
  void* cached = t.allocate(20 * MiB);
  t.allocate(30 * MiB);
  t.deallocate(cached);
  auto before = snapshot(*t.alloc);
  try {
    t.allocate(40 * MiB);  // 14 MiB free on the device + 20 MiB cached < 40 MiB
    ::check::report(__FILE__, __LINE__, "no out_of_memory");
  } catch (const out_of_memory& e) {
    CHECK_EQ(e.requested(), 40 * MiB);
    CHECK_EQ(e.available(), 34 * MiB);
  }
  CHECK(same_layout(before, snapshot(*t.alloc)));
  CHECK_EQ(t.segments_released(), 0u);
}

TEST("pytorch: max_reserved caps reserved memory, releasing cached segments to stay under it") {
  pool_under_test t("pytorch", {{"max_reserved", "40MiB"}});
  void* a = t.allocate(24 * MiB);
  t.deallocate(a);
  void* b = t.allocate(30 * MiB);  // 24 + 30 > 40: the cached 24 MiB goes first
  CHECK(b != nullptr);
  CHECK_EQ(t.reserved(), 30 * MiB);
  CHECK_THROWS_AS(t.allocate(12 * MiB), out_of_memory);
  CHECK_EQ(t.reserved(), 30 * MiB);
}

// --- pytorch: max_split_size ---------------------------------------------------------------------

TEST("pytorch: max_split_size: a smaller request never takes an oversize cached block") {
  pool_under_test t("pytorch", {{"max_split_size", "40MiB"}});
  void* big = t.allocate(50 * MiB);
  t.deallocate(big);
  void* p = t.allocate(30 * MiB);
  CHECK(p != big);
  CHECK_EQ(t.segments_obtained(), 2u);
}

TEST("pytorch: max_split_size: oversize blocks serve oversize requests unsplit, within 20 MiB") {
  pool_under_test t("pytorch", {{"max_split_size", "40MiB"}});
  void* big = t.allocate(50 * MiB);
  t.deallocate(big);
  void* p = t.allocate(45 * MiB);  // 50 < 45 + 20: taken, and not split (45 >= max_split_size)
  CHECK_EQ(p, big);
  CHECK_EQ(t.block_at(p).size, 50 * MiB);
  t.deallocate(p);
  void* q = t.allocate(30 * MiB + 512);  // below max_split_size: refused
  CHECK(q != big);
  void* r = t.allocate(41 * MiB);  // 41 + 20 > 50: taken
  CHECK_EQ(r, big);
  t.deallocate(r);
  // With max_non_split_rounding_size the limit moves.
  pool_under_test u("pytorch",
                    {{"max_split_size", "40MiB"}, {"max_non_split_rounding_size", "20MiB"}});
  void* x = u.allocate(62 * MiB);
  u.deallocate(x);
  CHECK(u.allocate(41 * MiB) != x);  // 62 >= 41 + 20: refused
}

TEST(
    "pytorch: max_split_size: out of memory first releases just one oversize block that covers "
    "it") {
  // release_available_cached_blocks: the smallest cached oversize block of at least
  // max(request, max_split_size) goes, the others stay cached.
  pool_under_test t("pytorch", {{"max_split_size", "40MiB"}}, 128 * MiB);
  void* b60 = t.allocate(60 * MiB);
  void* b50 = t.allocate(50 * MiB);
  void* small = t.allocate(1000);
  t.deallocate(b60);
  t.deallocate(b50);
  t.deallocate(small);
  CHECK_EQ(t.reserved(), 112 * MiB);
  void* p = t.allocate(30 * MiB);  // 16 MiB free: the 50 MiB block goes, then 30 MiB fits
  CHECK(p != nullptr);
  CHECK_EQ(t.segments_released(), 1u);
  CHECK_EQ(t.reserved(), 60 * MiB + 2 * MiB + 30 * MiB);
  // No single oversize block covers 70 MiB: oversize blocks go from the largest down.
  pool_under_test u("pytorch", {{"max_split_size", "40MiB"}}, 128 * MiB);
  void* c60 = u.allocate(60 * MiB);
  void* c45 = u.allocate(45 * MiB);
  void* keep = u.allocate(1000);
  u.deallocate(c60);
  u.deallocate(c45);
  u.allocate(70 * MiB);
  CHECK_EQ(u.segments_released(), 2u);
  CHECK_EQ(u.reserved(), 2 * MiB + 70 * MiB);
  u.deallocate(keep);
}

// --- pytorch: garbage collection -----------------------------------------------------------------

TEST(
    "pytorch: garbage collection releases the cached segments unused longest, down to the "
    "threshold") {
  pool_under_test t("pytorch",
                    {{"max_reserved", "100MiB"}, {"garbage_collection_threshold", "0.5"}});
  void* a = t.allocate(30 * MiB);
  void* b = t.allocate(30 * MiB);
  void* c = t.allocate(12 * MiB);
  t.deallocate(a);  // a is cached first, then ages while c is reused
  for (int i = 0; i < 4; ++i) {
    t.deallocate(c);
    c = t.allocate(12 * MiB);
  }
  t.deallocate(b);
  // 72 MiB reserved > 50 MiB: a (older than the average) is released; b, younger, stays.
  void* d = t.allocate(40 * MiB);
  CHECK(d != nullptr);
  CHECK_EQ(t.segments_released(), 1u);
  CHECK_EQ(t.reserved(), 30 * MiB + 12 * MiB + 40 * MiB);
  CHECK_EQ(t.block_at(b).state, block_state::free);
  CHECK_EQ(t.block_at(a).size, 0u);  // gone
}

// --- pow2 preset --------------------------------------------------------------------------------

TEST("pow2: requests round up to a power of two of at least 512 B") {
  CHECK_EQ(rounded_size_of(1, "pow2"), 512u);
  CHECK_EQ(rounded_size_of(512, "pow2"), 512u);
  CHECK_EQ(rounded_size_of(513, "pow2"), 1024u);
  CHECK_EQ(rounded_size_of(3000, "pow2"), 4096u);
  CHECK_EQ(rounded_size_of(1 * MiB + 1, "pow2"), 2 * MiB);
  CHECK_EQ(rounded_size_of(5 * MiB, "pow2"), 8 * MiB);
}

TEST("pow2: segments are max(class, segment_size)") {
  pool_under_test t("pow2");
  t.allocate(100);
  t.allocate(3 * MiB);  // class 4 MiB
  auto segs = t.segments();
  REQUIRE(segs.size() == 2);
  CHECK_EQ(segs[0].size + segs[1].size, 2 * MiB + 4 * MiB);
  pool_under_test u("pow2", {{"segment_size", "8MiB"}});
  u.allocate(100);
  auto useg = u.segments();
  REQUIRE(useg.size() == 1);
  CHECK_EQ(useg[0].size, 8 * MiB);
}

TEST("pow2: a larger cached block is split for a smaller class, and coalesces again on free") {
  pool_under_test t("pow2");
  void* big = t.allocate(4 * MiB);
  t.deallocate(big);
  void* p = t.allocate(1000);
  CHECK_EQ(p, big);  // cut from the cached 4 MiB block, no new segment
  CHECK_EQ(t.segments_obtained(), 1u);
  auto blocks = t.blocks_of_segment(0);
  REQUIRE(blocks.size() == 2);
  CHECK_EQ(blocks[0].size, 1024u);
  CHECK_EQ(blocks[1].size, 4 * MiB - 1024);
  void* q = t.allocate(2000);  // class 2048 from the remainder
  CHECK_EQ(reinterpret_cast<address_t>(q), reinterpret_cast<address_t>(p) + 1024);
  t.deallocate(p);
  t.deallocate(q);
  blocks = t.blocks_of_segment(0);
  REQUIRE(blocks.size() == 1);
  CHECK_EQ(blocks[0].size, 4 * MiB);
  CHECK(t.consistent());
}

TEST("pow2: requests above 2 GiB fail with out_of_memory naming the limit; 2 GiB is served") {
  pool_under_test t("pow2", {}, 8 * GiB);
  try {
    t.allocate(2 * GiB + 1);
    ::check::report(__FILE__, __LINE__, "no out_of_memory");
  } catch (const out_of_memory& e) {
    CHECK(std::string(e.what()).find("2 GiB") != std::string::npos);
  }
  CHECK_EQ(t.reserved(), 0u);
  CHECK(t.allocate(2 * GiB) != nullptr);
}

TEST("seed, pow2's former name, is still accepted and behaves exactly as pow2") {
  for (std::size_t request : {std::size_t{1}, std::size_t{513}, std::size_t{3000}, 5 * MiB})
    CHECK_EQ(rounded_size_of(request, "seed"), rounded_size_of(request, "pow2"));
  pool_under_test t("seed", {{"segment_size", "8MiB"}});
  t.allocate(100);
  auto segs = t.segments();
  REQUIRE(segs.size() == 1);
  CHECK_EQ(segs[0].size, 8 * MiB);
}

TEST("each preset rejects the other preset's parameters by name") {
  auto b = make_simulated_backing();
  try {
    make_allocator("caching", *b, {{"preset", "pow2"}, {"max_split_size", "64MiB"}});
    ::check::report(__FILE__, __LINE__, "pow2 accepted max_split_size");
  } catch (const invalid_argument& e) {
    CHECK(std::string(e.what()).find("max_split_size") != std::string::npos);
  }
  try {
    make_allocator("caching", *b, {{"preset", "pytorch"}, {"segment_size", "4MiB"}});
    ::check::report(__FILE__, __LINE__, "pytorch accepted segment_size");
  } catch (const invalid_argument& e) {
    CHECK(std::string(e.what()).find("segment_size") != std::string::npos);
  }
  CHECK_THROWS_AS(
      make_allocator("caching", *b, {{"preset", "pytorch"}, {"max_split_size", "8MiB"}}),
      invalid_argument);  // PyTorch's minimum is 20 MiB
  CHECK_THROWS_AS(make_allocator("caching", *b, {{"preset", "tensorflow"}}), invalid_argument);
  CHECK_THROWS_AS(make_allocator("caching", *b,
                                 {{"preset", "pytorch"}, {"garbage_collection_threshold", "0.5"}}),
                  invalid_argument);  // needs max_reserved
}

// --- fidelity against real PyTorch, addresses included -------------------------------------------

// A backing that hands out, in order, the segment addresses a recorded PyTorch run got from
// cudaMalloc. Where several cached blocks fit equally well, PyTorch takes the lowest address, so
// which one it took depends on where the driver placed each segment; with the same placement every
// decision can be compared, block by block.
class recorded_addresses_backing final : public backing {
 public:
  explicit recorded_addresses_backing(std::deque<address_t> addresses)
      : next_(std::move(addresses)) {}
  backing_kind kind() const noexcept override { return backing_kind::simulated; }
  bool is_device_memory() const noexcept override { return false; }
  address_t allocate_region(std::size_t bytes) override {
    if (next_.empty()) throw out_of_memory(bytes, 0, "recorded run obtained no further segment");
    address_t a = next_.front();
    next_.pop_front();
    used_ += bytes;
    return a;
  }
  void free_region(address_t, std::size_t bytes) override { used_ -= bytes; }
  event_t record_event(stream_t) override { return 1; }
  bool event_complete(event_t) override { return true; }
  void wait_event(event_t) override {}
  void release_event(event_t) override {}
  void synchronize() override {}
  std::size_t capacity() const noexcept override { return 80 * GiB; }
  std::size_t available() const noexcept override { return capacity() - used_; }

 private:
  std::deque<address_t> next_;
  std::size_t used_ = 0;
};

struct trace_row {
  std::string action;
  std::uint64_t address, size;
  stream_t stream;
};

std::vector<trace_row> read_trace(const std::string& workload) {
  std::ifstream in(std::string(VRAMSCOPE_FIXTURES_DIR) + "/pytorch/" + workload + ".trace.csv");
  std::vector<trace_row> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string action, address, size, stream;
    std::getline(ss, action, ',');
    std::getline(ss, address, ',');
    std::getline(ss, size, ',');
    std::getline(ss, stream, ',');
    rows.push_back({action, std::stoull(address), std::stoull(size), std::stoull(stream)});
  }
  return rows;
}

void check_same_addresses_as_pytorch(const std::string& workload) {
  auto rows = read_trace(workload);
  if (rows.empty()) {
    std::printf("skipped: no recorded trace %s under %s\n", workload.c_str(),
                VRAMSCOPE_FIXTURES_DIR);
    return;
  }
  std::deque<address_t> segment_addresses;
  std::size_t segments_recorded = 0;
  for (auto& r : rows)
    if (r.action == "segment_alloc") {
      segment_addresses.push_back(r.address);
      ++segments_recorded;
    }
  recorded_addresses_backing device(segment_addresses);
  auto pool = make_allocator("caching", device, {{"preset", "pytorch"}});
  std::map<address_t, void*> ours_of_recorded;
  std::size_t allocations = 0, elsewhere = 0;
  for (auto& r : rows) {
    if (r.action == "alloc") {
      void* p = pool->allocate(r.size, r.stream);
      ours_of_recorded[r.address] = p;
      address_t got = reinterpret_cast<address_t>(p);
      ++allocations;
      if (got != r.address && elsewhere++ == 0)
        ::check::report(__FILE__, __LINE__,
                        workload + ": allocation " + std::to_string(allocations) + " of " +
                            std::to_string(r.size) + " B placed at " + format_address(got) +
                            ", PyTorch placed it at " + format_address(r.address));
    } else if (r.action == "free_completed") {
      auto it = ours_of_recorded.find(r.address);
      REQUIRE(it != ours_of_recorded.end());
      pool->deallocate(it->second, r.stream);
      ours_of_recorded.erase(it);
    }
  }
  CHECK_EQ(elsewhere, 0u);
  CHECK_EQ(pool->stats().device_calls.region_alloc, segments_recorded);
  std::fprintf(stderr,
               "  %s: %zu allocations, %zu at another address than PyTorch's, %zu segments\n",
               workload.c_str(), allocations, elsewhere, segments_recorded);
}

TEST("pytorch: every block lands where PyTorch put it, given PyTorch's segment addresses") {
  for (const char* w : {"mlp_varbatch", "transformer_varseq", "convnet_varimg", "inference_mixed"})
    check_same_addresses_as_pytorch(w);
}

}  // namespace

CHECK_MAIN
