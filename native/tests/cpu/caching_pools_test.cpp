// The caching strategy's pytorch preset beyond its default pools: CUDA graphs' private memory pools
// (allocator::use_pool, PyTorch's beginAllocateToPool / endAllocateToPool and PrivatePool) and
// expandable segments (PyTorch's expandable_segments:True). Every expected number follows
// PyTorch's c10/cuda/CUDACachingAllocator.cpp (get_pool, get_free_block, alloc_block,
// release_cached_blocks, find_expandable_block, map_block, unmap_block, release_blocks).
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "check.hpp"
#include "invariants.hpp"
#include "vramscope/replay.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;
using namespace vramscope::testing;

namespace {

struct pool_under_test {
  std::unique_ptr<simulated_backing> backing;
  std::unique_ptr<allocator> alloc;

  explicit pool_under_test(params extra = {}, std::size_t capacity = 1 * GiB) {
    simulated_options o;
    o.capacity = capacity;
    backing = make_simulated_backing(o);
    extra.set("preset", "pytorch");
    alloc = make_allocator("caching", *backing, extra);
  }

  void* allocate(std::size_t n, stream_t s = 0) { return alloc->allocate(n, s); }
  void deallocate(void* p, stream_t s = 0) { alloc->deallocate(p, s); }
  address_t at(const void* p) const { return reinterpret_cast<address_t>(p); }
  std::uint64_t reserved() const { return alloc->stats().reserved_live; }
  device_call_counts calls() const { return alloc->stats().device_calls; }
  std::size_t regions() const { return snapshot(*alloc).regions.size(); }
  bool consistent() const {
    std::string broken = check_invariants(*alloc, nullptr);
    if (!broken.empty()) std::fprintf(stderr, "  %s\n", broken.c_str());
    return broken.empty();
  }
};

// --- private pools ---------------------------------------------------------------------------------

TEST("private pools: a private pool's blocks come from segments of its own") {
  pool_under_test t;
  void* a = t.allocate(100);  // default small pool: a 2 MiB segment
  t.alloc->use_pool(1);
  void* b = t.allocate(100);  // pool 1 has no segment yet: a 2 MiB one of its own
  CHECK_EQ(t.calls().region_alloc, 2u);
  CHECK_EQ(t.reserved(), 4 * MiB);
  CHECK(t.at(b) != t.at(a) + 512);  // not split from the default segment
  void* c = t.allocate(100);        // pool 1's segment serves pool 1
  CHECK_EQ(t.at(c), t.at(b) + 512);
  t.alloc->use_pool(0);
  void* d = t.allocate(100);  // the default segment again
  CHECK_EQ(t.at(d), t.at(a) + 512);
  t.alloc->use_pool(2);
  t.allocate(5 * MiB);  // pool 2's large pool: a 20 MiB segment
  CHECK_EQ(t.calls().region_alloc, 3u);
  CHECK(t.consistent());
}

TEST("private pools: a free returns the block to its own pool, whichever pool is current") {
  pool_under_test t;
  t.alloc->use_pool(1);
  void* x = t.allocate(3 * MiB);
  t.alloc->use_pool(0);
  t.deallocate(x);                // back to pool 1, though pool 0 is current
  void* y = t.allocate(3 * MiB);  // the default pool has nothing cached: a segment of its own
  CHECK(t.at(y) != t.at(x));
  CHECK_EQ(t.calls().region_alloc, 2u);
  t.alloc->use_pool(1);
  void* z = t.allocate(3 * MiB);  // pool 1's cached block
  CHECK_EQ(t.at(z), t.at(x));
  CHECK_EQ(t.calls().region_alloc, 2u);
  CHECK(t.consistent());
}

TEST("private pools: their segments count toward the cap and are never released") {
  pool_under_test t({{"max_reserved", "64MiB"}});
  t.alloc->use_pool(1);
  void* p = t.allocate(40 * MiB);
  t.deallocate(p);  // cached in pool 1
  t.alloc->use_pool(0);
  t.alloc->trim();  // empty_cache keeps the private pool's segment
  CHECK_EQ(t.reserved(), 40 * MiB);
  CHECK_EQ(t.calls().region_free, 0u);
  auto before = snapshot(*t.alloc);
  CHECK_THROWS_AS(t.allocate(30 * MiB), out_of_memory);  // 40 + 30 > 64, and 40 is not releasable
  CHECK(same_layout(before, snapshot(*t.alloc)));
  CHECK_EQ(t.calls().region_free, 0u);
  void* q = t.allocate(24 * MiB);  // 40 + 24 fits
  CHECK(q != nullptr);
  CHECK(t.consistent());
}

TEST("private pools: while one is current, out of memory releases no default cached segment") {
  pool_under_test t({{"max_reserved", "64MiB"}});
  void* a = t.allocate(40 * MiB);
  t.deallocate(a);  // cached in the default pool
  t.alloc->use_pool(1);
  // PyTorch's malloc skips release_cached_blocks while a capture is underway.
  CHECK_THROWS_AS(t.allocate(30 * MiB), out_of_memory);
  CHECK_EQ(t.reserved(), 40 * MiB);
  t.alloc->use_pool(0);
  void* b = t.allocate(50 * MiB);  // now the cached 40 MiB is released and 50 obtained
  CHECK(b != nullptr);
  CHECK_EQ(t.reserved(), 50 * MiB);
  CHECK_EQ(t.calls().region_free, 1u);
  CHECK(t.consistent());
}

TEST(
    "private pools: release_available_cached_blocks frees the private pool's own oversize blocks") {
  pool_under_test t({{"max_reserved", "100MiB"}, {"max_split_size", "40MiB"}});
  t.alloc->use_pool(1);
  void* a = t.allocate(45 * MiB);
  void* b = t.allocate(50 * MiB);
  t.deallocate(a);
  t.deallocate(b);  // two oversize cached blocks of pool 1
  // 95 + 60 > 100: pool 1's oversize blocks go from the largest down until 60 MiB are released.
  void* c = t.allocate(60 * MiB);
  CHECK(c != nullptr);
  CHECK_EQ(t.reserved(), 60 * MiB);
  CHECK_EQ(t.calls().region_free, 2u);
  CHECK(t.consistent());
}

TEST("private pools: strategies without them ignore use_pool") {
  auto backing = make_simulated_backing({});
  auto a = make_allocator("cuda_malloc", *backing, {});
  a->use_pool(3);
  void* p = a->allocate(1000);
  a->deallocate(p);
  CHECK_EQ(a->stats().allocations, 1u);
}

TEST("private pools: replay follows the trace's pool column") {
  request_column_vectors e;
  auto push = [&](std::uint8_t kind, std::uint32_t id, double size, std::uint32_t pool) {
    e.kind.push_back(kind);
    e.id.push_back(id);
    e.size.push_back(size);
    e.stream.push_back(0);
    e.time.push_back(static_cast<double>(e.kind.size()) * 1000);
    e.pool.push_back(pool);
  };
  push(0, 0, 3 * MiB, 0);  // default pool: 20 MiB
  push(1, 0, 0, 0);
  push(0, 1, 3 * MiB, 7);  // private pool 7: a 20 MiB segment of its own
  push(1, 1, 0, 0);
  push(0, 2, 3 * MiB, 0);  // the default pool's cached block
  push(0, 3, 3 * MiB, 7);  // pool 7's cached block
  const replay_target target{"c", "caching", {{"preset", "pytorch"}}, {}};
  replay_options o;
  o.layout = false;
  auto with = replay(e.columns(), {target}, o);
  CHECK_EQ(with[0].summary.peak_reserved, 40 * MiB);
  CHECK_EQ(with[0].summary.device_call_detail.region_alloc, 2u);
  e.pool.clear();  // without the column every alloc is the default pool's
  auto without = replay(e.columns(), {target}, o);
  CHECK_EQ(without[0].summary.peak_reserved, 20 * MiB);
}

// --- expandable segments -------------------------------------------------------------------------

pool_under_test expandable(params extra = {}, std::size_t capacity = 1 * GiB) {
  extra.set("expandable_segments", "true");
  return pool_under_test(extra, capacity);
}

TEST(
    "expandable: a small request maps one 2 MiB page of a new segment; reserved is what is "
    "mapped") {
  pool_under_test t = expandable();
  void* a = t.allocate(100);
  void* b = t.allocate(100);
  CHECK_EQ(t.at(b), t.at(a) + 512);
  CHECK_EQ(t.reserved(), 2 * MiB);
  CHECK_EQ(t.calls().va_reserve, 1u);
  CHECK_EQ(t.calls().map, 1u);
  CHECK_EQ(t.calls().region_alloc, 0u);
  CHECK_EQ(t.alloc->stats().address_space, align_up(GiB + GiB / 8, 2 * MiB));
  CHECK(t.consistent());
}

TEST("expandable: the large pool grows its segment at the end by 20 MiB pages") {
  pool_under_test t = expandable();
  void* a = t.allocate(5 * MiB);  // one 20 MiB page; 15 MiB free after the block
  CHECK_EQ(t.reserved(), 20 * MiB);
  void* b = t.allocate(30 * MiB);  // the free 15 MiB and one more page: contiguous
  CHECK_EQ(t.at(b), t.at(a) + 5 * MiB);
  CHECK_EQ(t.reserved(), 40 * MiB);
  CHECK_EQ(t.calls().map, 2u);
  CHECK_EQ(t.calls().va_reserve, 1u);
  void* c = t.allocate(2 * MiB);  // any remainder of 512 B or more is split off
  CHECK_EQ(t.at(c), t.at(a) + 35 * MiB);
  void* d = t.allocate(2 * MiB + 512);
  CHECK_EQ(t.at(d), t.at(a) + 37 * MiB);
  CHECK_EQ(t.reserved(), 40 * MiB);
  t.allocate(100, 2);  // another stream: a segment of its own
  CHECK_EQ(t.calls().va_reserve, 2u);
  CHECK(t.consistent());
}

TEST("expandable: best fit prefers a block that cannot grow to the one before unmapped space") {
  pool_under_test t = expandable();
  void* a = t.allocate(16 * MiB);  // page 1: a, 4 MiB free
  void* b = t.allocate(4 * MiB);   // the 4 MiB: page 1 full
  void* c = t.allocate(5 * MiB);   // page 2: c, 15 MiB free before the unmapped rest
  (void)b;
  (void)c;
  t.deallocate(a);  // 16 MiB free between nothing and b
  // The smallest fit is the 15 MiB at the end, which can grow to the whole address space; the
  // 16 MiB block can grow to 16 MiB only, so it is taken.
  void* d = t.allocate(10 * MiB);
  CHECK_EQ(t.at(d), t.at(a));
  CHECK_EQ(t.reserved(), 40 * MiB);
  CHECK(t.consistent());
}

TEST("expandable: trim unmaps the whole free pages; a segment with nothing mapped is released") {
  pool_under_test t = expandable();
  void* a = t.allocate(5 * MiB);
  void* b = t.allocate(30 * MiB);  // a [0, 5), b [5, 35), free [35, 40)
  t.deallocate(b);                 // free [5, 40)
  t.alloc->trim();                 // page [20, 40) is unmapped; [5, 20) stays free
  CHECK_EQ(t.reserved(), 20 * MiB);
  CHECK_EQ(t.calls().unmap, 1u);
  CHECK_EQ(t.calls().va_release, 0u);
  CHECK(t.consistent());
  void* c = t.allocate(10 * MiB);  // the free 15 MiB
  CHECK_EQ(t.at(c), t.at(a) + 5 * MiB);
  t.deallocate(c);
  t.deallocate(a);
  t.alloc->trim();  // nothing left mapped: the address space goes back too
  CHECK_EQ(t.reserved(), 0u);
  CHECK_EQ(t.calls().unmap, 2u);
  CHECK_EQ(t.calls().va_release, 1u);
  CHECK_EQ(t.alloc->stats().address_space, 0u);
  CHECK(t.consistent());
  void* d = t.allocate(5 * MiB);  // a new segment
  CHECK(d != nullptr);
  CHECK_EQ(t.calls().va_reserve, 2u);
}

TEST("expandable: out of memory unmaps free pages of every stream, then maps the request") {
  pool_under_test t = expandable({}, 64 * MiB);
  void* a = t.allocate(30 * MiB);  // 40 MiB mapped on stream 0
  t.deallocate(a);
  void* b = t.allocate(30 * MiB, 2);  // stream 2 needs 40 MiB, 24 MiB are left: stream 0's go
  CHECK(b != nullptr);
  CHECK_EQ(t.reserved(), 40 * MiB);
  CHECK_EQ(t.calls().unmap, 1u);
  CHECK_EQ(t.calls().va_release, 1u);
  auto before = snapshot(*t.alloc);
  CHECK_THROWS_AS(t.allocate(30 * MiB), out_of_memory);  // 24 MiB free, nothing to unmap
  CHECK(same_layout(before, snapshot(*t.alloc)));
  CHECK(t.consistent());
}

TEST("expandable: the cap is checked against the allocation size, not the pages mapped") {
  pool_under_test t = expandable({{"max_reserved", "40MiB"}});
  t.allocate(15 * MiB);  // 20 MiB mapped, 5 MiB free at the end
  // 24 MiB would map one more page (40 MiB in all), but PyTorch's alloc_block checks the
  // allocation size: 20 + 24 > 40.
  CHECK_THROWS_AS(t.allocate(24 * MiB), out_of_memory);
  CHECK_EQ(t.reserved(), 20 * MiB);
  void* b = t.allocate(20 * MiB);  // 20 + 20 <= 40
  CHECK(b != nullptr);
  CHECK_EQ(t.reserved(), 40 * MiB);
  CHECK(t.consistent());
}

TEST("expandable: max_split_size still keeps small requests off oversize free blocks") {
  pool_under_test t = expandable({{"max_split_size", "40MiB"}});
  void* a = t.allocate(50 * MiB);  // 60 MiB mapped: a, then 10 MiB free
  void* b = t.allocate(10 * MiB);  // the 10 MiB: all mapped memory is live
  (void)b;
  t.deallocate(a);                // an oversize free block of 50 MiB
  void* c = t.allocate(5 * MiB);  // refused the 50 MiB block: the segment grows instead
  CHECK_EQ(t.at(c), t.at(a) + 60 * MiB);
  CHECK_EQ(t.reserved(), 80 * MiB);
  void* d = t.allocate(45 * MiB);  // an oversize request takes it (within 20 MiB), split
  CHECK_EQ(t.at(d), t.at(a));
  CHECK(t.consistent());
}

TEST("expandable: a private pool grows a segment of its own, never unmapped by release") {
  pool_under_test t = expandable();
  t.alloc->use_pool(1);
  void* p = t.allocate(5 * MiB);
  t.deallocate(p);
  t.alloc->use_pool(0);
  void* q = t.allocate(5 * MiB);
  CHECK(t.at(q) != t.at(p));
  CHECK_EQ(t.calls().va_reserve, 2u);
  t.alloc->trim();  // the default pool's free pages go; pool 1's stay
  CHECK_EQ(t.reserved(), 40 * MiB);
  t.deallocate(q);
  t.alloc->trim();
  CHECK_EQ(t.reserved(), 20 * MiB);
  CHECK(t.consistent());
}

TEST(
    "expandable: on a device of 2^53 - 1 B every pool and stream of 64 streams gets a segment, "
    "each reserving a bounded address space, not 1 1/8 of the device") {
  pool_under_test t = expandable({}, (std::size_t{1} << 53) - 1);
  for (stream_t s = 0; s < 64; ++s) {
    CHECK(t.allocate(100, s) != nullptr);      // the small pool's segment
    CHECK(t.allocate(5 * MiB, s) != nullptr);  // the large pool's
  }
  CHECK_EQ(t.calls().va_reserve, 128u);
  CHECK_EQ(t.reserved(), 64 * (2 * MiB + 20 * MiB));
  // 2^43 B a segment, rounded up to its pages.
  CHECK(t.alloc->stats().address_space <= 128 * ((std::uint64_t{1} << 43) + 20 * MiB));
  CHECK(t.consistent());
}

TEST(
    "expandable: where PyTorch's 1 1/8 of the device fits the address space, a segment reserves "
    "it, even past 2^43 B") {
  const std::uint64_t device = std::uint64_t{1} << 51;
  pool_under_test t = expandable({}, device);
  CHECK(t.allocate(std::uint64_t{1} << 50) != nullptr);
  CHECK(t.allocate(std::uint64_t{1} << 49) != nullptr);  // the same segment grows
  CHECK_EQ(t.calls().va_reserve, 1u);
  CHECK_EQ(t.alloc->stats().address_space, align_up(device + device / 8, 20 * MiB));
  CHECK(t.consistent());
}

TEST(
    "expandable: a request past a segment's bounded address space maps a segment that holds it, "
    "and the next one in a segment of its own") {
  pool_under_test t = expandable({}, (std::size_t{1} << 53) - 1);
  const std::uint64_t big = std::uint64_t{1} << 50;
  void* a = t.allocate(100);
  void* b = t.allocate(big);
  void* c = t.allocate(big);
  void* d = t.allocate(std::uint64_t{1} << 51);
  CHECK(a != nullptr && b != nullptr && c != nullptr && d != nullptr);
  CHECK_EQ(t.reserved(), 2 * MiB + 2 * align_up(big, 20 * MiB) + align_up(2 * big, 20 * MiB));
  CHECK(t.consistent());
  t.deallocate(c);
  void* e = t.allocate(big);  // the freed block's mapped pages serve it again
  CHECK_EQ(t.at(e), t.at(c));
  CHECK(t.consistent());
}

TEST(
    "expandable: a late recording's ranges of two streams and both pools seed on a device of 3 PB "
    "(was: address space exhausted at the third segment)") {
  pool_under_test t = expandable({}, 3'000'000'000'000'000);
  const address_t base = 0x7f0000000000;
  const std::uint64_t far = 20 * MiB * (std::uint64_t{1} << 22);  // 5 * 2^44 B: past 2^43
  seed_state s;
  for (stream_t stream : {stream_t{1}, stream_t{2}}) {
    const address_t at = base + (stream - 1) * 2 * far;
    s.segments.push_back({at, 20 * MiB, stream, 0, false, true});          // large pool
    s.segments.push_back({at + far, 20 * MiB, stream, 0, false, true});    // the same range, far on
    s.segments.push_back({at + 4 * far, 2 * MiB, stream, 0, true, true});  // small pool
    s.blocks.push_back({at, 10 * MiB, 10 * MiB, stream});
    s.blocks.push_back({at + far, 20 * MiB, 20 * MiB, stream});
    s.blocks.push_back({at + 4 * far, 512, 512, stream});
  }
  const std::vector<address_t> at = t.alloc->seed(s);
  CHECK_EQ(at.size(), 6u);
  CHECK_EQ(at[1] - at[0], far);  // one segment holds both runs of a pool and stream
  CHECK_EQ(t.reserved(), 2 * (40 * MiB + 2 * MiB));
  CHECK(t.allocate(10 * MiB, 1) != nullptr);  // the free 10 MiB of the first run
  CHECK_EQ(t.reserved(), 2 * (40 * MiB + 2 * MiB));
  CHECK(t.allocate(100, 3) != nullptr);  // a third stream: a segment of its own
  CHECK(t.consistent());
}

TEST("expandable: only the pytorch preset takes it; the layout trace shows maps and unmaps") {
  auto backing = make_simulated_backing({});
  CHECK_THROWS_AS(make_allocator("caching", *backing, {{"expandable_segments", "true"}}),
                  invalid_argument);
  request_column_vectors e;
  for (std::uint32_t i = 0; i < 4; ++i) {
    e.kind.push_back(0);
    e.id.push_back(i);
    e.size.push_back(15 * MiB);
    e.stream.push_back(0);
    e.time.push_back(i);
  }
  const replay_target target{
      "c", "caching", {{"preset", "pytorch"}, {"expandable_segments", "true"}}, {}};
  auto r = replay(e.columns(), {target}, {});
  CHECK_EQ(r[0].summary.peak_reserved, 60 * MiB);  // 4 x 15 MiB in three 20 MiB pages
  CHECK_EQ(r[0].summary.device_call_detail.map, 3u);
  std::size_t maps = 0;
  for (std::uint8_t op : r[0].layout.op) maps += op == static_cast<std::uint8_t>(trace_op::map);
  CHECK_EQ(maps, 3u);
}

TEST("expandable and private pools: random use keeps every invariant, reserved = device memory") {
  for (const char* expandable_on : {"false", "true"}) {
    for (std::uint32_t seed = 1; seed <= 6; ++seed) {
      // Half the runs are bound by the cap, half by the device.
      const bool capped = seed % 2 == 0;
      params p{{"expandable_segments", expandable_on}};
      if (capped) p.set("max_reserved", "200MiB");
      pool_under_test t(p, capped ? 256 * MiB : 200 * MiB);
      std::mt19937 rng(seed);
      struct held {
        void* p;
        stream_t s;
      };
      std::vector<held> live;
      for (int i = 0; i < 3000; ++i) {
        const unsigned r = rng() % 100;
        if (r < 3) {
          t.alloc->use_pool(rng() % 3);
        } else if (r < 4) {
          t.alloc->trim();
        } else if (r < 50 && !live.empty()) {
          const std::size_t k = rng() % live.size();
          t.deallocate(live[k].p, live[k].s);
          live[k] = live.back();
          live.pop_back();
        } else {
          const stream_t s = 1 + rng() % 2;
          const std::size_t bytes = rng() % 4 == 0 ? 1 + rng() % (40 * MiB) : 1 + rng() % (1 * MiB);
          const layout_snapshot before = snapshot(*t.alloc);
          try {
            live.push_back({t.allocate(bytes, s), s});
          } catch (const out_of_memory&) {
            // The strong guarantee: a failure changes nothing, in every mode.
            REQUIRE(same_layout(before, snapshot(*t.alloc)));
          }
        }
        if (i % 100 == 0 || i > 2900) {
          REQUIRE(t.consistent());
          CHECK_EQ(t.reserved(), t.backing->physical_used());
          // With expandable segments the cap is checked against the allocation size (2 MiB
          // multiples) while 20 MiB pages are mapped: as in PyTorch, up to 18 MiB more.
          CHECK(t.reserved() <= 200 * MiB + (std::string(expandable_on) == "true" ? 18 * MiB : 0));
        }
      }
      // The random mix does reach the out-of-memory path and its releases.
      CHECK(t.alloc->stats().failures > 0);
      const device_call_counts c = t.calls();
      CHECK((std::string(expandable_on) == "true" ? c.unmap : c.region_free) > 0);
      for (auto& h : live) t.deallocate(h.p, h.s);
      t.alloc->use_pool(0);
      t.alloc->trim();
      REQUIRE(t.consistent());
    }
  }
}

TEST("expandable: while a private pool is current, out of memory unmaps no default page") {
  pool_under_test t = expandable({{"max_reserved", "64MiB"}});
  void* a = t.allocate(30 * MiB);  // 40 MiB mapped in the default large pool
  t.deallocate(a);
  t.alloc->use_pool(1);
  auto before = snapshot(*t.alloc);
  CHECK_THROWS_AS(t.allocate(30 * MiB), out_of_memory);  // 40 + 30 > 64, and no retry
  CHECK(same_layout(before, snapshot(*t.alloc)));
  CHECK_EQ(t.calls().unmap, 0u);
  t.alloc->use_pool(0);
  void* b = t.allocate(50 * MiB);  // the default pool's 40 MiB free serve 40 of it: maps 20
  CHECK_EQ(t.at(b), t.at(a));
  CHECK_EQ(t.reserved(), 60 * MiB);
  CHECK(t.consistent());
}

TEST("expandable: garbage collection releases nothing (no expandable block is a whole segment)") {
  pool_under_test t =
      expandable({{"max_reserved", "100MiB"}, {"garbage_collection_threshold", "0.2"}});
  void* a = t.allocate(30 * MiB);
  t.deallocate(a);                 // 40 MiB mapped and free: above 20 % of 100 MiB
  void* b = t.allocate(50 * MiB);  // no cached block fits: collection runs, then the segment grows
  CHECK_EQ(t.at(b), t.at(a));
  CHECK_EQ(t.calls().unmap, 0u);
  CHECK_EQ(t.reserved(), 60 * MiB);
  CHECK(t.consistent());
}

}  // namespace

CHECK_MAIN
