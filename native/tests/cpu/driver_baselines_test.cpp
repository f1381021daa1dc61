// The driver baselines' own policy on the simulated backing: cuda_malloc is one device region per
// request, rounded, returned at once, with double frees recognised for a bounded while; async_pool
// passes requests to the stream-ordered pool, keeps memory up to its release threshold across a
// synchronization, releases it on trim (or after each free with trim_on_free), and walks the
// pool's chunks so the invariants hold.
#include <map>
#include <vector>

#include "check.hpp"
#include "invariants.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;
using namespace vramscope::testing;

namespace {

std::unique_ptr<simulated_backing> device(std::size_t capacity = 1 * GiB) {
  simulated_options o;
  o.capacity = capacity;
  return make_simulated_backing(o);
}

#define CHECK_HOLDS(a, live)                                            \
  do {                                                                  \
    std::string broken_ = check_invariants(*(a), &(live));              \
    if (!broken_.empty()) ::check::report(__FILE__, __LINE__, broken_); \
  } while (0)

TEST("cuda_malloc: one device region per request, rounded, reserved equal to live at all times") {
  auto b = device();
  auto a = make_allocator("cuda_malloc", *b);
  std::map<address_t, std::size_t> live;
  std::uint64_t expected_rounded = 0;
  for (std::size_t n : {1ul, 511ul, 512ul, 513ul, 100000ul, 3 * MiB + 1}) {
    void* p = a->allocate(n);
    live[reinterpret_cast<address_t>(p)] = n;
    expected_rounded += align_up(n, 512);
  }
  auto s = a->stats();
  CHECK_EQ(s.rounded_live, expected_rounded);
  CHECK_EQ(s.reserved_live, expected_rounded);
  CHECK_EQ(s.device_calls.region_alloc, 6u);
  CHECK_EQ(s.free_bytes, 0u);
  CHECK_HOLDS(a, live);
  for (auto& [addr, n] : live) a->deallocate(reinterpret_cast<void*>(addr));
  live.clear();
  s = a->stats();
  CHECK_EQ(s.reserved_live, 0u);
  CHECK_EQ(s.device_calls.region_free, 6u);
  CHECK_EQ(b->physical_used(), 0u);
  CHECK_HOLDS(a, live);
}

TEST("cuda_malloc: the rounding parameter sets the granularity and must be a power of two") {
  auto b = device();
  auto a = make_allocator("cuda_malloc", *b, {{"rounding", "4KiB"}});
  void* p = a->allocate(1);
  CHECK_EQ(a->stats().rounded_live, 4 * KiB);
  a->deallocate(p);
  CHECK_THROWS_AS(make_allocator("cuda_malloc", *b, {{"rounding", "768"}}), invalid_argument);
  CHECK_THROWS_AS(make_allocator("cuda_malloc", *b, {{"rounding", "128"}}), invalid_argument);
}

TEST("cuda_malloc: a double free is typed while remembered; the memory is bounded") {
  auto b = device();
  auto a = make_allocator("cuda_malloc", *b, {{"remember_frees", "8"}});
  void* first = a->allocate(1000);
  void* pin = a->allocate(1000);  // bounds first's hole, so the larger blocks below go elsewhere
  a->deallocate(first);
  CHECK_THROWS_AS(a->deallocate(first), double_free);
  // Eight later frees push the first out of memory: then it is only an unknown address.
  std::vector<void*> others;
  for (int i = 0; i < 8; ++i) others.push_back(a->allocate(1000 + 512 * (i + 1)));
  for (void* p : others) {
    REQUIRE(p != first);
    a->deallocate(p);
  }
  CHECK_THROWS_AS(a->deallocate(first), invalid_free);
  a->deallocate(pin);
  // An address handed out again is live again: freeing it once is fine, twice is a double free.
  void* again = a->allocate(1000);
  a->deallocate(again);
  CHECK_THROWS_AS(a->deallocate(again), double_free);
}

TEST("cuda_malloc: out of memory names the caller's request and leaves everything as it was") {
  auto b = device(8 * MiB);
  auto a = make_allocator("cuda_malloc", *b);
  void* p = a->allocate(6 * MiB);
  auto before = a->stats();
  try {
    a->allocate(3 * MiB - 100);
    ::check::report(__FILE__, __LINE__, "no out_of_memory");
  } catch (const out_of_memory& e) {
    CHECK_EQ(e.requested(), 3 * MiB - 100);
    CHECK_EQ(e.available(), 2 * MiB);
  }
  CHECK_EQ(a->stats().reserved_live, before.reserved_live);
  CHECK_EQ(a->stats().failures, before.failures + 1);
  a->deallocate(p);
}

// The simulated pool follows what an H100's cudaMemPool did (scripts/gpu/probe-mempool.cu):
// 32 MiB chunks (or the request rounded up to 32 MiB), blocks rounded to 512 B at the lowest free
// address, fully free chunks released at synchronization down to the release threshold.
TEST("async_pool: the release threshold keeps pool memory across a synchronization") {
  auto b = device();
  auto a = make_allocator("async_pool", *b, {{"release_threshold", "64MiB"}});
  void* p = a->allocate(40 * MiB);  // a 64 MiB chunk: 40 MiB rounded up to 32 MiB multiples
  CHECK_EQ(b->async_stats().reserved_current, 64 * MiB);
  a->deallocate(p);
  b->synchronize();
  CHECK_EQ(b->async_stats().reserved_current, 64 * MiB);
  // The kept chunk serves the next request without growing the pool.
  void* q = a->allocate(40 * MiB);
  CHECK_EQ(q, p);
  CHECK_EQ(b->async_stats().reserved_high, 64 * MiB);
  a->deallocate(q);
  a->trim();
  CHECK_EQ(b->async_stats().reserved_current, 0u);
  CHECK_EQ(a->stats().reserved_live, 0u);
  CHECK_EQ(a->stats().reserved_peak, 64 * MiB);
}

TEST(
    "async_pool: with threshold 0 a synchronization releases the cache; counters catch up at the "
    "next call") {
  auto b = device();
  auto a = make_allocator("async_pool", *b);
  std::map<address_t, std::size_t> live;
  void* p = a->allocate(10 * MiB);
  a->deallocate(p);
  CHECK_EQ(a->stats().reserved_live, 32 * MiB);  // the whole chunk, cached until a synchronization
  CHECK_EQ(a->stats().free_bytes, 32 * MiB);
  CHECK_HOLDS(a, live);
  b->synchronize();
  CHECK_EQ(b->async_stats().reserved_current, 0u);
  void* small = a->allocate(1000);
  live[reinterpret_cast<address_t>(small)] = 1000;
  CHECK_EQ(a->stats().reserved_live, b->async_stats().reserved_current);
  CHECK_EQ(a->stats().reserved_live, 32 * MiB);
  CHECK_HOLDS(a, live);
  a->deallocate(small);
}

TEST("async_pool: trim_on_free returns fully free chunks above the threshold after every free") {
  auto b = device();
  auto a =
      make_allocator("async_pool", *b, {{"trim_on_free", "true"}, {"release_threshold", "4MiB"}});
  std::map<address_t, std::size_t> live;
  void* small = a->allocate(1 * MiB);  // chunk A, 32 MiB
  void* big = a->allocate(40 * MiB);   // does not fit A's 31 MiB: chunk B, 64 MiB
  live[reinterpret_cast<address_t>(small)] = 1 * MiB;
  CHECK_EQ(a->stats().reserved_live, 96 * MiB);
  a->deallocate(big);  // B is fully free: released; A still holds a block and stays
  CHECK_EQ(a->stats().reserved_live, 32 * MiB);
  CHECK_EQ(a->stats().reserved_live, b->async_stats().reserved_current);
  CHECK_HOLDS(a, live);
  a->deallocate(small);
}

TEST(
    "async_pool: blocks share a chunk at 512 B granularity; a freed block is reused at the lowest "
    "address") {
  auto b = device();
  auto a = make_allocator("async_pool", *b, {{"release_threshold", "1GiB"}});
  std::map<address_t, std::size_t> live;
  std::vector<void*> ps;
  for (std::size_t n : {1ul, 3 * MiB, 5 * MiB, 100000ul}) {
    void* p = a->allocate(n);
    ps.push_back(p);
    live[reinterpret_cast<address_t>(p)] = n;
  }
  // One chunk holds them all, packed: 512 B, then 3 MiB, then 5 MiB, then 100352 B.
  CHECK_EQ(reinterpret_cast<address_t>(ps[1]), reinterpret_cast<address_t>(ps[0]) + 512);
  CHECK_EQ(reinterpret_cast<address_t>(ps[2]), reinterpret_cast<address_t>(ps[1]) + 3 * MiB);
  a->deallocate(ps[1]);
  live.erase(reinterpret_cast<address_t>(ps[1]));
  layout_snapshot s = snapshot(*a);
  CHECK_EQ(s.regions.size(), 1u);
  CHECK_EQ(s.blocks.size(), 5u);  // live, free (the 3 MiB hole), live, live, free (the tail)
  std::size_t cached = 0;
  for (auto& blk : s.blocks) cached += blk.state == block_state::free;
  CHECK_EQ(cached, 2u);
  CHECK_EQ(a->stats().free_bytes, 32 * MiB - 512 - 5 * MiB - 100352);
  CHECK_EQ(a->stats().largest_free_block, 32 * MiB - 512 - 3 * MiB - 5 * MiB - 100352);
  CHECK_HOLDS(a, live);
  void* again = a->allocate(2 * MiB);  // first fit: the hole the 3 MiB block left
  CHECK_EQ(again, ps[1]);
  live[reinterpret_cast<address_t>(again)] = 2 * MiB;
  CHECK_HOLDS(a, live);
}

TEST(
    "async_pool: with track_pool off, reserved counts the blocks alone and the walk still tiles "
    "it") {
  auto b = device();
  auto a = make_allocator("async_pool", *b, {{"track_pool", "false"}});
  std::map<address_t, std::size_t> live;
  void* p = a->allocate(1000);
  void* q = a->allocate(3 * MiB);
  live[reinterpret_cast<address_t>(p)] = 1000;
  live[reinterpret_cast<address_t>(q)] = 3 * MiB;
  CHECK_EQ(a->stats().reserved_live, 1024u + 3 * MiB);
  CHECK_EQ(a->stats().rounded_live, 1024u + 3 * MiB);
  CHECK_HOLDS(a, live);
  a->deallocate(q);
  live.erase(reinterpret_cast<address_t>(q));
  CHECK_EQ(a->stats().reserved_live, 1024u);
  CHECK_HOLDS(a, live);
  a->deallocate(p);
}

TEST("async_pool: out of memory under the device cap is typed and counted") {
  auto b = device(16 * MiB);
  auto a = make_allocator("async_pool", *b);
  void* p = a->allocate(12 * MiB);
  auto before = a->stats();
  CHECK_THROWS_AS(a->allocate(8 * MiB), out_of_memory);
  CHECK_EQ(a->stats().failures, before.failures + 1);
  CHECK_EQ(a->stats().reserved_live, before.reserved_live);
  a->deallocate(p);
  CHECK(a->allocate(8 * MiB) != nullptr);
}

}  // namespace

CHECK_MAIN
