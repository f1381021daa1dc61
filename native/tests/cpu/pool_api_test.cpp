// The seed-style pool API: caching_pool's stream-ordered allocate/deallocate, deferred frees and
// their processing, PoolConfig's sizes and thresholds, and PoolPtr's ownership rules.
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>

#include "check.hpp"
#include "invariants.hpp"
#include "vramscope/pool.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;

namespace {

std::unique_ptr<simulated_backing> device(std::size_t capacity = 1 * GiB) {
  simulated_options o;
  o.capacity = capacity;
  return make_simulated_backing(o);
}

void let_streams_finish(simulated_backing& b) { b.set_time(b.time() + 1000000); }

TEST("a block freed on its own stream is reused by the next request of that size at once") {
  auto d = device();
  caching_pool pool(*d);
  void* a = pool.allocate_async(1000, 1);
  pool.deallocate_async(a, 1);
  CHECK_EQ(pool.stats().pending_blocks, 0u);
  CHECK_EQ(pool.allocate_async(1000, 1), a);
  CHECK_EQ(pool.stats().device_calls.region_alloc, 1u);
}

TEST(
    "a block freed on another stream waits for that stream's event, then process_deferred "
    "completes it") {
  auto d = device();
  caching_pool pool(*d);
  void* a = pool.allocate_async(4096, 1);
  pool.deallocate_async(a, 2);
  CHECK_EQ(pool.stats().pending_blocks, 1u);
  CHECK_EQ(pool.process_deferred(), 0u);  // the event has not completed
  CHECK(pool.allocate_async(4096, 1) != a);
  let_streams_finish(*d);
  CHECK_EQ(pool.process_deferred(), 1u);
  CHECK_EQ(pool.stats().pending_blocks, 0u);
  CHECK_EQ(pool.allocate_async(4096, 1), a);
}

TEST("with deferred frees off, a cross-stream free waits for the event and is done on return") {
  auto d = device();
  PoolConfig c;
  c.enable_deferred_frees = false;
  caching_pool pool(*d, c);
  void* a = pool.allocate_async(4096, 1);
  pool.deallocate_async(a, 2);
  CHECK_EQ(pool.stats().pending_blocks, 0u);
  CHECK_EQ(pool.allocate_async(4096, 1), a);
  CHECK(d->calls().synchronize >= 1);
}

TEST("initial_pool_size is reserved at construction and serves requests without a new segment") {
  auto d = device();
  PoolConfig c;
  c.initial_pool_size = 64 * MiB;
  caching_pool pool(*d, c);
  CHECK(pool.stats().reserved_live >= 64 * MiB);
  CHECK_EQ(pool.stats().live_blocks, 0u);
  std::uint64_t segments = pool.stats().device_calls.region_alloc;
  void* a = pool.allocate_async(10 * MiB, 0);
  void* b = pool.allocate_async(30 * MiB, 0);
  CHECK(a != nullptr && b != nullptr);
  CHECK_EQ(pool.stats().device_calls.region_alloc, segments);
  PoolConfig too_big;
  too_big.initial_pool_size = 64 * MiB;
  too_big.max_pool_size = 32 * MiB;
  CHECK_THROWS_AS(caching_pool(*d, too_big), invalid_argument);
}

TEST("max_pool_size caps reserved memory with out_of_memory, the pool unchanged") {
  auto d = device();
  PoolConfig c;
  c.max_pool_size = 16 * MiB;
  caching_pool pool(*d, c);
  void* a = pool.allocate_async(8 * MiB, 0);
  auto before = pool.stats();
  CHECK_THROWS_AS(pool.allocate_async(16 * MiB, 0), out_of_memory);
  CHECK_EQ(pool.stats().reserved_live, before.reserved_live);
  CHECK_EQ(pool.stats().live_blocks, 1u);
  pool.deallocate_async(a, 0);
  CHECK(pool.allocate_async(16 * MiB, 0) != nullptr);  // the cached 8 MiB goes back first
  CHECK(pool.stats().reserved_live <= 16 * MiB);
}

TEST(
    "process_deferred releases unused segments down to the release threshold; the default keeps "
    "them") {
  auto d = device();
  PoolConfig keep;
  caching_pool cached(*d, keep);
  for (int i = 0; i < 4; ++i) cached.deallocate_async(cached.allocate_async(4 * MiB, 0), 0);
  std::uint64_t reserved = cached.stats().reserved_live;
  cached.process_deferred();
  CHECK_EQ(cached.stats().reserved_live, reserved);

  PoolConfig c;
  c.release_threshold = 4 * MiB;
  caching_pool pool(*d, c);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i)
    blocks.push_back(pool.allocate_async(4 * MiB, 0));  // four 4 MiB segments
  for (void* p : blocks) pool.deallocate_async(p, 0);
  CHECK_EQ(pool.stats().reserved_live, 16 * MiB);
  pool.process_deferred();
  CHECK_EQ(pool.stats().reserved_live, 4 * MiB);
  pool.trim();
  CHECK_EQ(pool.stats().reserved_live, 4 * MiB);  // trim honours the threshold too
}

TEST("the pytorch preset is available through PoolConfig; a pow2-only setting is refused by name") {
  auto d = device();
  PoolConfig c;
  c.preset = "pytorch";
  caching_pool pool(*d, c);
  pool.allocate_async(100, 0);
  CHECK_EQ(pool.stats().reserved_live, 2 * MiB);
  c.segment_size = 8 * MiB;
  try {
    caching_pool wrong(*d, c);
    ::check::report(__FILE__, __LINE__, "pytorch accepted segment_size");
  } catch (const invalid_argument& e) {
    CHECK(std::string(e.what()).find("segment_size") != std::string::npos);
  }
}

TEST("PoolPtr frees its block on its own stream when destroyed") {
  auto d = device();
  caching_pool pool(*d);
  float* raw;
  {
    PoolPtr<float> p = make_pool_ptr<float>(pool, 1000, 3);
    REQUIRE(p);
    raw = p.get();
    CHECK_EQ(p.size(), 1000u);
    CHECK_EQ(p.stream(), 3u);
    CHECK_EQ(pool.underlying().requested_size(raw), 1000 * sizeof(float));
    CHECK_EQ(pool.stats().live_blocks, 1u);
  }
  CHECK_EQ(pool.stats().live_blocks, 0u);
  CHECK_EQ(pool.stats().pending_blocks, 0u);  // freed on stream 3, its own
  CHECK_EQ(pool.allocate_async(4000, 3), static_cast<void*>(raw));
}

TEST("PoolPtr is move-only: a move transfers ownership and the block is freed once") {
  static_assert(!std::is_copy_constructible_v<PoolPtr<int>>);
  static_assert(!std::is_copy_assignable_v<PoolPtr<int>>);
  auto d = device();
  caching_pool pool(*d);
  PoolPtr<int> a = make_pool_ptr<int>(pool, 64, 0);
  int* raw = a.get();
  PoolPtr<int> b = std::move(a);
  CHECK(!a);
  CHECK(a.get() == nullptr);
  CHECK_EQ(b.get(), raw);
  PoolPtr<int> c = make_pool_ptr<int>(pool, 64, 0);
  c = std::move(b);  // c's old block is freed, c now owns raw
  CHECK_EQ(c.get(), raw);
  CHECK_EQ(pool.stats().live_blocks, 1u);
  c.reset();
  CHECK(!c);
  CHECK_EQ(pool.stats().live_blocks, 0u);
  c.reset();  // empty: nothing to free
  CHECK_EQ(pool.stats().deallocations, 2u);
}

TEST("PoolPtr::release gives up ownership; the caller frees with deallocate_async") {
  auto d = device();
  caching_pool pool(*d);
  double* raw;
  {
    PoolPtr<double> p = make_pool_ptr<double>(pool, 10, 0);
    raw = p.release();
    CHECK(!p);
  }
  CHECK_EQ(pool.stats().live_blocks, 1u);
  pool.deallocate_async(raw, 0);
  CHECK_EQ(pool.stats().live_blocks, 0u);
}

TEST("make_pool_ptr: zero objects give an empty pointer; an overflowing count is refused") {
  auto d = device();
  caching_pool pool(*d);
  PoolPtr<double> empty = make_pool_ptr<double>(pool, 0, 0);
  CHECK(!empty);
  CHECK_EQ(pool.stats().allocations, 0u);
  CHECK_THROWS_AS(make_pool_ptr<double>(pool, std::numeric_limits<std::size_t>::max() / 4, 0),
                  invalid_argument);
  CHECK_THROWS_AS(make_pool_ptr<char>(pool, 4 * GiB, 0), out_of_memory);
  CHECK_EQ(pool.stats().live_blocks, 0u);
  CHECK(testing::check_invariants(pool.underlying(), nullptr).empty());
}

}  // namespace

CHECK_MAIN
