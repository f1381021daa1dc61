// Each strategy's own policy, on the simulated backing: what the typed suite cannot see because it
// treats every strategy alike. slab's class choice and dedicated regions, buddy's splits and
// merges, arena's bump/pop/reset, vmm_growable's granule mapping, device_bump's offsets.
#include <algorithm>
#include <functional>
#include <cmath>
#include <malloc.h>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.hpp"
#include "invariants.hpp"
#include "vramscope/device_bump.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;
using namespace vramscope::testing;

namespace {

struct setup {
  std::unique_ptr<simulated_backing> device;
  std::unique_ptr<allocator> alloc;
  setup(const std::string& strategy, const params& p, std::size_t capacity = 1 * GiB) {
    simulated_options o;
    o.capacity = capacity;
    device = make_simulated_backing(o);
    alloc = make_allocator(strategy, *device, p);
  }
  address_t allocate(std::size_t n) { return reinterpret_cast<address_t>(alloc->allocate(n)); }
  void deallocate(address_t a) { alloc->deallocate(reinterpret_cast<void*>(a)); }
  std::uint64_t rounded_of(std::size_t n) {
    auto before = alloc->stats().rounded_live;
    address_t a = allocate(n);
    auto rounded = alloc->stats().rounded_live - before;
    deallocate(a);
    return rounded;
  }
  std::string invariants() const { return check_invariants(*alloc, nullptr); }
};

#define CHECK_CONSISTENT(s) CHECK_EQ((s).invariants(), std::string())

std::vector<block_info> blocks_of(const allocator& a, block_state state) {
  std::vector<block_info> out;
  for (auto& b : snapshot(a).blocks)
    if (b.state == state) out.push_back(b);
  return out;
}

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

// --- slab -----------------------------------------------------------------------------------------

TEST("slab: a request takes the smallest class that fits") {
  setup s("slab", {});
  CHECK_EQ(s.rounded_of(1), 256u);
  CHECK_EQ(s.rounded_of(256), 256u);
  CHECK_EQ(s.rounded_of(257), 1 * KiB);
  CHECK_EQ(s.rounded_of(1 * KiB), 1 * KiB);
  CHECK_EQ(s.rounded_of(1 * KiB + 1), 4 * KiB);
  CHECK_EQ(s.rounded_of(5000), 16 * KiB);
  CHECK_EQ(s.rounded_of(64 * KiB), 64 * KiB);
  CHECK_CONSISTENT(s);
}

TEST("slab: a 64 KiB + 1 request gets a dedicated region rounded to 512 B, released on free") {
  setup s("slab", {});
  address_t small = s.allocate(100);
  auto before = s.alloc->stats();
  address_t big = s.allocate(64 * KiB + 1);
  auto during = s.alloc->stats();
  CHECK_EQ(during.rounded_live - before.rounded_live, align_up(64 * KiB + 1, 512));
  CHECK_EQ(during.reserved_live - before.reserved_live, align_up(64 * KiB + 1, 512));
  CHECK_EQ(during.device_calls.region_alloc, before.device_calls.region_alloc + 1);
  // Its own region, of the kind after the classes (5 default classes: kind 5).
  auto layout = snapshot(*s.alloc);
  auto region = std::find_if(layout.regions.begin(), layout.regions.end(),
                             [&](const region_info& r) { return r.address == big; });
  REQUIRE(region != layout.regions.end());
  CHECK_EQ(region->kind, 5u);
  CHECK_EQ(region->size, align_up(64 * KiB + 1, 512));
  CHECK_CONSISTENT(s);
  s.deallocate(big);
  auto after = s.alloc->stats();
  CHECK_EQ(after.reserved_live, before.reserved_live);
  CHECK_EQ(after.device_calls.region_free, before.device_calls.region_free + 1);
  s.deallocate(small);
  CHECK_CONSISTENT(s);
}

TEST("slab: large=fail refuses requests above the largest class, naming it") {
  setup s("slab", {{"large", "fail"}, {"classes", "256,2KiB"}});
  std::string message = what_of([&] { s.allocate(2 * KiB + 1); });
  CHECK(message.find("out of memory") != std::string::npos);
  CHECK(message.find("2 KiB") != std::string::npos);
  CHECK_EQ(s.alloc->stats().reserved_live, 0u);
  CHECK_THROWS_AS(setup("slab", {{"large", "sometimes"}}), invalid_argument);
  CHECK_THROWS_AS(setup("slab", {{"classes", "100,1KiB"}}), invalid_argument);
}

TEST("slab: a class grows one slab at a time, up to max_slabs, and reuses the slot freed last") {
  setup s("slab", {{"classes", "1KiB"}, {"slab_size", "64KiB"}, {"max_slabs", "2"}});
  std::vector<address_t> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(s.allocate(1000));
  CHECK_EQ(s.alloc->stats().reserved_live, 64 * KiB);  // 64 slots of 1 KiB: one slab
  blocks.push_back(s.allocate(1000));
  CHECK_EQ(s.alloc->stats().reserved_live, 128 * KiB);  // the 65th opened a second slab
  for (int i = 0; i < 63; ++i) blocks.push_back(s.allocate(1000));
  std::string message = what_of([&] { s.allocate(1000); });
  CHECK(message.find("max_slabs") != std::string::npos);
  CHECK(message.find("1 KiB") != std::string::npos);
  // The first slab fills from its start, slot after slot.
  for (int i = 1; i < 64; ++i) CHECK_EQ(blocks[i] - blocks[i - 1], 1 * KiB);
  address_t freed = blocks[10];
  s.deallocate(freed);
  CHECK_EQ(s.allocate(1), freed);
  CHECK_CONSISTENT(s);
}

TEST("slab: empty slabs stay until trim(), or go at once with release_empty_slabs") {
  setup keep("slab", {{"slab_size", "1MiB"}});
  address_t a = keep.allocate(4000), b = keep.allocate(100);
  keep.deallocate(a);
  keep.deallocate(b);
  CHECK_EQ(keep.alloc->stats().reserved_live, 2 * MiB);
  CHECK_EQ(keep.allocate(4000), a);  // the empty slab serves again, same slot
  keep.alloc->trim();
  CHECK_EQ(keep.alloc->stats().reserved_live,
           1 * MiB);  // the 256 B slab went, the 4 KiB one is in use
  CHECK_CONSISTENT(keep);

  setup eager("slab", {{"slab_size", "1MiB"}, {"release_empty_slabs", "true"}});
  address_t c = eager.allocate(4000), d = eager.allocate(4000);
  eager.deallocate(c);
  CHECK_EQ(eager.alloc->stats().reserved_live, 1 * MiB);
  eager.deallocate(d);
  CHECK_EQ(eager.alloc->stats().reserved_live, 0u);
  CHECK_CONSISTENT(eager);
}

TEST("slab: the walk shows each slab as a region of its class, slots tiling it") {
  setup s("slab", {{"slab_size", "64KiB"}});
  s.allocate(300);   // class 1 (1 KiB)
  s.allocate(5000);  // class 3 (16 KiB)
  auto layout = snapshot(*s.alloc);
  REQUIRE(layout.regions.size() == 2u);
  CHECK_EQ(layout.regions[0].kind, 1u);
  CHECK_EQ(layout.regions[1].kind, 3u);
  std::size_t slots_in_first = 0;
  for (auto& b : layout.blocks)
    if (b.address >= layout.regions[0].address &&
        b.address < layout.regions[0].address + 64 * KiB) {
      CHECK_EQ(b.size, 1 * KiB);
      CHECK_EQ(b.aux, 1u);
      ++slots_in_first;
    }
  CHECK_EQ(slots_in_first, 64u);
  CHECK_CONSISTENT(s);
}

TEST("slab: a slab_size of more than 2^20 slots of the smallest class is refused, naming both") {
  // Each slot is state of its own and a block of every walk: the count is bounded, not the bytes.
  const std::string what = what_of([] { setup("slab", {{"slab_size", "1TiB"}}); });
  CHECK(what.find("'slab_size'") != std::string::npos);
  CHECK(what.find("1 TiB") != std::string::npos);
  CHECK(what.find("256 B") != std::string::npos);
  setup fine("slab", {{"slab_size", "256MiB"}});  // 2^20 slots of 256 B: accepted
  CHECK(fine.allocate(1) != 0);
}

TEST("block_pool: a pool_size of more than 2^20 blocks is refused, naming both sizes") {
  const std::string what = what_of([] {
    setup("block_pool", {{"block_size", "256"}, {"pool_size", "1TiB"}});
  });
  CHECK(what.find("pool_size") != std::string::npos);
  CHECK(what.find("1 TiB") != std::string::npos);
  CHECK(what.find("256 B") != std::string::npos);
  setup big_blocks("block_pool", {{"block_size", "1TiB"}, {"pool_size", "2TiB"}},
                   std::size_t{1} << 42);  // 2 blocks of 2^40 B: fine
  CHECK(big_blocks.allocate(std::size_t{1} << 40) != 0);
  CHECK_CONSISTENT(big_blocks);
}

// --- buddy ----------------------------------------------------------------------------------------

TEST("buddy: 1 MiB splits into 512 KiB buddies, and they merge back into one free block") {
  setup s("buddy", {{"pool_size", "1MiB"}});
  address_t a = s.allocate(512 * KiB);
  address_t b = s.allocate(512 * KiB);
  CHECK_EQ(b > a ? b - a : a - b, 512 * KiB);
  CHECK_THROWS_AS(s.allocate(256), out_of_memory);
  auto live = blocks_of(*s.alloc, block_state::live);
  REQUIRE(live.size() == 2u);
  CHECK_EQ(live[0].aux, 11u);  // 512 KiB = 256 B << 11
  CHECK_CONSISTENT(s);
  s.deallocate(a);
  s.deallocate(b);
  auto free_blocks = blocks_of(*s.alloc, block_state::free);
  REQUIRE(free_blocks.size() == 1u);
  CHECK_EQ(free_blocks[0].size, 1 * MiB);
  CHECK_EQ(free_blocks[0].aux, 12u);
  CHECK_CONSISTENT(s);
}

TEST(
    "buddy: one byte splits the pool down to 256 B, one free buddy per order; freeing merges all") {
  setup s("buddy", {{"pool_size", "1MiB"}});
  address_t a = s.allocate(1);
  auto free_blocks = blocks_of(*s.alloc, block_state::free);
  CHECK_EQ(free_blocks.size(), 12u);  // orders 0..11
  std::vector<std::uint32_t> orders;
  for (auto& b : free_blocks) {
    CHECK_EQ(b.size, std::uint64_t{256} << b.aux);
    orders.push_back(b.aux);
  }
  std::sort(orders.begin(), orders.end());
  for (std::uint32_t k = 0; k < orders.size(); ++k) CHECK_EQ(orders[k], k);
  s.deallocate(a);
  CHECK_EQ(blocks_of(*s.alloc, block_state::free).size(), 1u);
  CHECK_EQ(s.rounded_of(300), 512u);
  CHECK_EQ(s.rounded_of(4097), 8 * KiB);
}

TEST("buddy: a cascade of splits or merges is traced as one split or one merge") {
  setup s("buddy", {{"pool_size", "1MiB"}});
  vector_tracer events;
  s.alloc->set_tracer(&events);
  address_t a = s.allocate(1);
  std::vector<trace_op> ops;
  for (auto& e : events) ops.push_back(e.op);
  REQUIRE(
      (ops == std::vector<trace_op>{trace_op::region_reserve, trace_op::split, trace_op::alloc}));
  CHECK_EQ(events[1].address, a);  // the pool's root, split down to the 256 B kept
  CHECK_EQ(events[1].size, 256u);
  CHECK_EQ(events[1].aux, 12u);
  events.clear();
  s.deallocate(a);
  REQUIRE(events.size() == 2u);
  CHECK(events[0].op == trace_op::merge);
  CHECK_EQ(events[0].address, a);
  CHECK_EQ(events[0].size, 1 * MiB);
  CHECK_EQ(events[0].aux, 12u);
  CHECK(events[1].op == trace_op::free);
  s.alloc->set_tracer(nullptr);
}

TEST("buddy: neighbours that are not buddies do not merge") {
  setup s("buddy", {{"pool_size", "1MiB"}});
  address_t q[4];
  for (auto& a : q) a = s.allocate(256 * KiB);
  std::sort(q, q + 4);
  s.deallocate(q[1]);
  s.deallocate(q[2]);  // adjacent to q[1], but q[1]'s buddy is q[0]
  auto free_blocks = blocks_of(*s.alloc, block_state::free);
  CHECK_EQ(free_blocks.size(), 2u);
  CHECK_THROWS_AS(s.allocate(512 * KiB), out_of_memory);
  CHECK_EQ(s.alloc->stats().largest_free_block,
           512 * KiB);  // contiguous, though not one buddy block
  s.deallocate(q[0]);   // q[0] + q[1] merge into 512 KiB
  CHECK(s.allocate(512 * KiB) == q[0]);
  CHECK_CONSISTENT(s);
}

TEST("buddy: more pools are obtained on demand up to max_pools, and trim() returns free ones") {
  setup s("buddy", {{"pool_size", "1MiB"}, {"max_pools", "2"}});
  address_t a = s.allocate(1 * MiB);
  address_t b = s.allocate(600 * KiB);
  CHECK_EQ(s.alloc->stats().reserved_live, 2 * MiB);
  CHECK_THROWS_AS(s.allocate(1 * MiB), out_of_memory);
  CHECK_THROWS_AS(s.allocate(2 * MiB), out_of_memory);  // larger than pool_size
  s.deallocate(a);
  s.alloc->trim();
  CHECK_EQ(s.alloc->stats().reserved_live, 1 * MiB);
  CHECK_CONSISTENT(s);
  s.deallocate(b);
  s.alloc->trim();
  CHECK_EQ(s.alloc->stats().reserved_live, 0u);
  CHECK_CONSISTENT(s);
  CHECK_THROWS_AS(setup("buddy", {{"pool_size", "3MiB"}}), invalid_argument);
  CHECK_THROWS_AS(setup("buddy", {{"min_block", "384"}}), invalid_argument);
}

// Heap bytes this process holds now (glibc): what an allocator built and kept, measured around it.
std::size_t heap_in_use() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#else
  return 0;
#endif
}

// Random allocations (sizes log-uniform from 1 B to max_request) and frees over `operations`
// events; checks the invariants on the way and returns the most blocks (free and live) the layout
// ever held, or throws what broke.
std::size_t churn(setup& s, std::size_t max_request, int operations, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<address_t> held;
  std::size_t most_blocks = 0;
  for (int op = 0; op < operations; ++op) {
    if (held.empty() || rng() % 100 < 55) {
      const double log_max = std::log(static_cast<double>(max_request));
      auto n = static_cast<std::size_t>(
          std::exp(std::uniform_real_distribution<double>(0, log_max)(rng)));
      try {
        held.push_back(s.allocate(std::clamp<std::size_t>(n, 1, max_request)));
      } catch (const out_of_memory&) {
      }
    } else {
      const std::size_t i = rng() % held.size();
      s.deallocate(held[i]);
      held[i] = held.back();
      held.pop_back();
    }
    if (op % 500 == 0) {
      std::string broken = s.invariants();
      if (!broken.empty()) throw std::runtime_error(broken + " (op " + std::to_string(op) + ")");
      most_blocks = std::max(most_blocks, snapshot(*s.alloc).blocks.size());
    }
  }
  for (address_t a : held) s.deallocate(a);
  return most_blocks;
}

TEST("buddy: a 128 GiB pool of 256 B blocks over 4,000 events holds memory for its blocks only") {
  // 2^29 min_blocks: sizing anything by pool / min_block costs hundreds of MB and minutes.
  const std::size_t before = heap_in_use();
  setup s("buddy", {{"pool_size", "128GiB"}}, 256 * GiB);
  std::size_t held_during = 0;
  std::size_t most_blocks = 0;
  {
    std::mt19937_64 rng(29);
    std::vector<address_t> held;
    for (int op = 0; op < 4000; ++op) {
      if (held.empty() || rng() % 100 < 60) {
        held.push_back(s.allocate(1 + rng() % (64 * MiB)));
      } else {
        const std::size_t i = rng() % held.size();
        s.deallocate(held[i]);
        held[i] = held.back();
        held.pop_back();
      }
    }
    held_during = heap_in_use() - before;
    auto layout = snapshot(*s.alloc);
    most_blocks = layout.blocks.size();
    CHECK_CONSISTENT(s);
    for (address_t a : held) s.deallocate(a);
  }
  // Each live block leaves at most one free buddy per order (29) on its path: blocks, not bytes.
  CHECK(most_blocks <= 4000u * 30u);
  if (heap_in_use() != 0) CHECK(held_during < 16 * MiB);
  auto free_blocks = blocks_of(*s.alloc, block_state::free);
  REQUIRE(free_blocks.size() == 1u);
  CHECK_EQ(free_blocks[0].size, 128 * GiB);
}

TEST("buddy: a 4 PiB pool splits on demand for requests from 1 B to 1 PiB and merges back") {
  setup s("buddy", {{"pool_size", std::to_string(std::uint64_t{1} << 52)}}, std::size_t{1} << 53);
  const std::size_t most_blocks = churn(s, std::size_t{1} << 50, 3000, 53);
  // A live block leaves at most one free buddy per order (44) on its path.
  CHECK(most_blocks > 0u);
  CHECK(most_blocks <= 3000u * 45u);
  auto free_blocks = blocks_of(*s.alloc, block_state::free);
  REQUIRE(free_blocks.size() == 1u);
  CHECK_EQ(free_blocks[0].size, std::uint64_t{1} << 52);
  CHECK_CONSISTENT(s);
}

TEST("buddy: a request of 2^53 - 1 B fails as larger than the pool, and the pool stays intact") {
  setup s("buddy", {{"pool_size", "1GiB"}});
  address_t a = s.allocate(1000);
  CHECK_EQ(what_of([&] {
             s.allocate((std::size_t{1} << 53) - 1);
           }).find("request larger than pool_size 1 GiB") != std::string::npos,
           true);
  s.deallocate(a);
  CHECK_CONSISTENT(s);
}

TEST("buddy: a pool_size above 2^53 B is refused, naming the value") {
  const std::string what = what_of([] {
    setup("buddy", {{"pool_size", std::to_string(std::uint64_t{1} << 54)}});
  });
  CHECK(what.find("'pool_size'") != std::string::npos);
  CHECK(what.find("16 PiB") != std::string::npos);
}

// --- arena ----------------------------------------------------------------------------------------

TEST(
    "arena: blocks follow one another; reset brings the pointer back and reuses the same "
    "addresses") {
  setup s("arena", {{"reserve", "64MiB"}});
  std::vector<address_t> first_step;
  for (std::size_t n : {100, 300, 5000, 256}) first_step.push_back(s.allocate(n));
  CHECK_EQ(first_step[1] - first_step[0], 256u);
  CHECK_EQ(first_step[2] - first_step[1], 512u);
  CHECK_EQ(first_step[3] - first_step[2], align_up(5000, 256));
  s.alloc->reset();
  CHECK_EQ(s.alloc->stats().rounded_live, 0u);
  std::vector<address_t> second_step;
  for (std::size_t n : {100, 300, 5000, 256}) second_step.push_back(s.allocate(n));
  CHECK(second_step == first_step);
  CHECK_EQ(s.alloc->stats().reserved_live, 2 * MiB);  // kept mapped through the reset
  CHECK_CONSISTENT(s);
}

TEST("arena: release_on_reset unmaps down to keep_mapped; the default keeps everything mapped") {
  setup keep("arena", {{"reserve", "64MiB"}});
  keep.allocate(9 * MiB);
  CHECK_EQ(keep.alloc->stats().reserved_live, 10 * MiB);
  keep.alloc->reset();
  CHECK_EQ(keep.alloc->stats().reserved_live, 10 * MiB);

  setup release("arena",
                {{"reserve", "64MiB"}, {"release_on_reset", "true"}, {"keep_mapped", "3MiB"}});
  address_t a = release.allocate(9 * MiB);
  auto unmaps = release.alloc->stats().device_calls.unmap;
  release.alloc->reset();
  CHECK_EQ(release.alloc->stats().reserved_live, 4 * MiB);  // 3 MiB rounded up to whole chunks
  CHECK_EQ(release.device->mapped_bytes(), 4 * MiB);
  CHECK_EQ(release.alloc->stats().device_calls.unmap, unmaps + 1);
  CHECK_EQ(release.allocate(1), a);
  CHECK_CONSISTENT(release);
}

TEST(
    "arena: a freed block is unusable until reset; freeing the top pops the pointer over freed "
    "blocks") {
  setup s("arena", {{"reserve", "64MiB"}});
  address_t a = s.allocate(1000), b = s.allocate(1000), c = s.allocate(1000);
  s.deallocate(b);
  CHECK_EQ(s.alloc->stats().unusable_bytes, 1 * KiB);
  auto unusable = blocks_of(*s.alloc, block_state::unusable);
  REQUIRE(unusable.size() == 1u);
  CHECK_EQ(unusable[0].address, b);
  CHECK_CONSISTENT(s);
  CHECK_THROWS_AS(s.deallocate(b), double_free);
  s.deallocate(c);  // the top: the pointer goes back to b, past the unusable b
  CHECK_EQ(s.alloc->stats().unusable_bytes, 0u);
  CHECK_EQ(s.allocate(10), b);
  CHECK_THROWS_AS(s.deallocate(c), double_free);  // popped, and still above the pointer
  s.deallocate(a);
  CHECK_CONSISTENT(s);

  setup no_pop("arena", {{"reserve", "64MiB"}, {"lifo_reclaim", "false"}});
  address_t x = no_pop.allocate(1000);
  no_pop.deallocate(x);
  CHECK_EQ(no_pop.alloc->stats().unusable_bytes, 1 * KiB);
  CHECK(no_pop.allocate(1000) != x);
}

TEST("arena: commit_chunk, alignment and the reserve shape what is mapped and handed out") {
  setup chunky("arena", {{"reserve", "64MiB"}, {"commit_chunk", "8MiB"}, {"alignment", "4KiB"}});
  address_t a = chunky.allocate(1), b = chunky.allocate(5000);
  CHECK_EQ(chunky.alloc->stats().reserved_live, 8 * MiB);
  CHECK_EQ(a % (4 * KiB), 0u);
  CHECK_EQ(b - a, 4 * KiB);
  CHECK_EQ(chunky.alloc->stats().rounded_live, 12 * KiB);
  chunky.allocate(8 * MiB);
  CHECK_EQ(chunky.alloc->stats().reserved_live, 16 * MiB);
  chunky.alloc->reset();
  chunky.alloc->trim();  // nothing above the pointer is needed now
  CHECK_EQ(chunky.alloc->stats().reserved_live, 0u);
  CHECK_CONSISTENT(chunky);

  setup small("arena", {{"reserve", "4MiB"}});
  small.allocate(4 * MiB);
  std::string message = what_of([&] { small.allocate(1); });
  CHECK(message.find("reserve") != std::string::npos);
  CHECK_THROWS_AS(setup("arena", {{"commit_chunk", "3MiB"}}), invalid_argument);
  CHECK_THROWS_AS(setup("arena", {{"alignment", "384"}}), invalid_argument);
}

// --- vmm_growable -----------------------------------------------------------------------------------

TEST("vmm_growable: a granule is unmapped when the last block on it is freed") {
  setup s("vmm_growable", {{"reserve", "256MiB"}});
  address_t a = s.allocate(1 * MiB), b = s.allocate(1 * MiB);
  CHECK_EQ(s.alloc->stats().reserved_live, 2 * MiB);  // both on granule 0
  auto unmaps = s.alloc->stats().device_calls.unmap;
  s.deallocate(a);
  CHECK_EQ(s.alloc->stats().reserved_live, 2 * MiB);
  CHECK_EQ(s.alloc->stats().device_calls.unmap, unmaps);
  s.deallocate(b);
  CHECK_EQ(s.alloc->stats().reserved_live, 0u);
  CHECK_EQ(s.device->mapped_bytes(), 0u);
  CHECK_EQ(s.alloc->stats().device_calls.unmap, unmaps + 1);
  CHECK_CONSISTENT(s);
}

TEST("vmm_growable: the reservation never moves while the pool grows and shrinks; no copy") {
  setup s("vmm_growable", {{"reserve", "1GiB"}});
  address_t first = s.allocate(1 * MiB);
  const address_t base = first;  // best fit in an empty reservation: its start
  std::vector<address_t> blocks{first};
  for (int i = 0; i < 20; ++i) blocks.push_back(s.allocate(5 * MiB));
  for (address_t a : blocks) CHECK(a >= base && a < base + 1 * GiB);
  auto st = s.alloc->stats();
  CHECK_EQ(st.device_calls.va_reserve, 1u);
  CHECK_EQ(st.address_space, 1 * GiB);
  CHECK_EQ(st.reserved_live, align_up(1 * MiB + 20 * 5 * MiB, 2 * MiB));
  for (std::size_t i = 1; i < blocks.size(); ++i) s.deallocate(blocks[i]);
  CHECK_EQ(s.alloc->stats().reserved_live, 2 * MiB);  // the first block's granule only
  CHECK_EQ(s.allocate(5 * MiB), blocks[1]);           // the same place again
  CHECK_EQ(s.alloc->stats().device_calls.va_reserve, 1u);
  CHECK_CONSISTENT(s);
}

TEST("vmm_growable: a freed hole shows as an unmapped region and is filled before the tail") {
  setup s("vmm_growable", {{"reserve", "256MiB"}});
  address_t a = s.allocate(2 * MiB), b = s.allocate(2 * MiB), c = s.allocate(2 * MiB);
  s.deallocate(b);
  auto layout = snapshot(*s.alloc);
  REQUIRE(layout.regions.size() == 3u);
  CHECK(layout.regions[0].mapped && layout.regions[0].address == a);
  CHECK(!layout.regions[1].mapped && layout.regions[1].address == b &&
        layout.regions[1].size == 2 * MiB);
  CHECK(layout.regions[2].mapped && layout.regions[2].address == c);
  CHECK_CONSISTENT(s);
  CHECK_EQ(s.allocate(1 * MiB), b);  // best fit: the 2 MiB hole, not the tail
  CHECK_EQ(s.alloc->stats().reserved_live, 6 * MiB);
  CHECK_CONSISTENT(s);
}

TEST("vmm_growable: keep_mapped and unmap_free_granules=false hold granules until trim()") {
  setup hysteresis("vmm_growable", {{"reserve", "256MiB"}, {"keep_mapped", "2MiB"}});
  address_t a = hysteresis.allocate(6 * MiB);
  hysteresis.deallocate(a);
  CHECK_EQ(hysteresis.alloc->stats().reserved_live, 2 * MiB);
  CHECK_EQ(hysteresis.alloc->stats().free_bytes, 2 * MiB);
  CHECK_CONSISTENT(hysteresis);
  hysteresis.allocate(1 * MiB);  // lands on the kept granule: no new mapping
  CHECK_EQ(hysteresis.alloc->stats().reserved_live, 2 * MiB);
  hysteresis.alloc->trim();
  CHECK_EQ(hysteresis.alloc->stats().reserved_live, 2 * MiB);  // still in use

  setup lazy("vmm_growable", {{"reserve", "256MiB"}, {"unmap_free_granules", "false"}});
  address_t b = lazy.allocate(6 * MiB);
  lazy.deallocate(b);
  CHECK_EQ(lazy.alloc->stats().reserved_live, 6 * MiB);
  CHECK_CONSISTENT(lazy);
  lazy.alloc->trim();
  CHECK_EQ(lazy.alloc->stats().reserved_live, 0u);
  CHECK_CONSISTENT(lazy);
}

TEST(
    "vmm_growable: a device too small to map, or a full reservation, fails with the state intact") {
  setup s("vmm_growable", {{"reserve", "256MiB"}}, 8 * MiB);
  address_t a = s.allocate(3 * MiB);
  auto before = s.alloc->stats();
  CHECK_THROWS_AS(s.allocate(7 * MiB), out_of_memory);
  auto after = s.alloc->stats();
  CHECK_EQ(after.reserved_live, before.reserved_live);
  CHECK_EQ(after.device_calls.map, before.device_calls.map);
  s.deallocate(a);
  CHECK_CONSISTENT(s);

  setup full("vmm_growable", {{"reserve", "8MiB"}});
  full.allocate(8 * MiB);
  std::string message = what_of([&] { full.allocate(1); });
  CHECK(message.find("reserve") != std::string::npos);
  CHECK_CONSISTENT(full);
}

TEST("vmm_growable: a 64 TiB reservation and a 32 TiB block cost memory for runs, not granules") {
  // 2^25 granules of 2 MiB: per-granule state would be over 100 MB and a 2^24-step loop a request.
  const std::size_t before = heap_in_use();
  setup s("vmm_growable", {{"reserve", "64TiB"}}, std::size_t{1} << 47);
  address_t big = s.allocate(std::size_t{1} << 45);
  address_t small = s.allocate(3 * MiB);
  const std::size_t held = heap_in_use() - before;
  if (heap_in_use() != 0) CHECK(held < 4 * MiB);
  CHECK_EQ(s.device->mapped_bytes(), (std::size_t{1} << 45) + 4 * MiB);
  CHECK_EQ(s.alloc->stats().device_calls.map, 2u);  // one run each
  CHECK_CONSISTENT(s);
  s.deallocate(big);
  CHECK_EQ(s.device->mapped_bytes(), 4 * MiB);  // small's granules (the first shared with big)
  CHECK_EQ(s.alloc->stats().device_calls.unmap, 1u);
  CHECK_CONSISTENT(s);
  s.deallocate(small);
  CHECK_EQ(s.device->mapped_bytes(), 0u);
  CHECK_CONSISTENT(s);
}

TEST("vmm_growable: keep_mapped of 2^50 B keeps a 2^49 B block's granules mapped until trim()") {
  setup s("vmm_growable",
          {{"reserve", std::to_string(std::uint64_t{1} << 51)},
           {"keep_mapped", std::to_string(std::uint64_t{1} << 50)}},
          std::size_t{1} << 52);
  address_t a = s.allocate(std::size_t{1} << 49);
  address_t b = s.allocate(1);
  s.deallocate(a);
  CHECK_EQ(s.device->mapped_bytes(), (std::size_t{1} << 49) + 2 * MiB);
  CHECK_EQ(s.alloc->stats().free_bytes, (std::size_t{1} << 49) + 2 * MiB - 256);
  CHECK_CONSISTENT(s);
  s.alloc->trim();
  CHECK_EQ(s.device->mapped_bytes(), 2 * MiB);  // b's granule stays
  s.deallocate(b);
  s.alloc->trim();
  CHECK_EQ(s.device->mapped_bytes(), 0u);
  CHECK_CONSISTENT(s);
}

TEST("simulated backing: a 2^50 B reservation mapped in pieces keeps ranges, not granule bits") {
  const std::size_t before = heap_in_use();
  simulated_options o;
  o.capacity = std::size_t{1} << 52;
  auto device = make_simulated_backing(o);
  const std::size_t space = std::size_t{1} << 50;
  const address_t base = device->reserve_address_space(space, 2 * MiB);
  device->map(base, space / 2);
  device->map(base + space / 2, space / 4);  // joins the first
  if (heap_in_use() != 0) CHECK(heap_in_use() - before < 1 * MiB);
  CHECK_THROWS_AS(device->map(base + space / 4, 2 * MiB), invalid_argument);  // mapped twice
  CHECK_THROWS_AS(device->unmap(base + space - 4 * MiB, 2 * MiB), invalid_argument);
  device->unmap(base + 2 * MiB, space / 2);  // across both maps
  CHECK_EQ(device->mapped_bytes(), space / 4);
  CHECK_THROWS_AS(device->release_address_space(base, space), invalid_argument);  // still mapped
  device->unmap(base, 2 * MiB);
  device->unmap(base + space / 2 + 2 * MiB, space / 4 - 2 * MiB);
  CHECK_EQ(device->mapped_bytes(), 0u);
  device->release_address_space(base, space);
}

// --- device_bump ------------------------------------------------------------------------------------

TEST("device_bump: offsets are monotonic and aligned, and the registry returns the public class") {
  setup s("device_bump", {{"capacity", "64MiB"}, {"alignment", "512"}});
  auto* bump = dynamic_cast<device_bump*>(s.alloc.get());
  REQUIRE(bump != nullptr);
  CHECK_EQ(bump->base(), 0u);  // nothing obtained before the first allocation
  std::uint64_t last_offset = 0;
  address_t last = 0;
  for (std::size_t n : {1, 300, 4096, 1000, 513, 70000}) {
    address_t a = s.allocate(n);
    CHECK_EQ((a - bump->base()) % 512, 0u);
    CHECK(a > last || last == 0);
    CHECK_EQ(bump->offset(), last_offset + device_bump_round(n, 512));
    CHECK_EQ(a, bump->base() + last_offset);
    last_offset = bump->offset();
    last = a;
  }
  CHECK_EQ(s.alloc->stats().reserved_live, 64 * MiB);
  CHECK_CONSISTENT(s);
}

TEST("device_bump: frees make blocks unusable, reset() frees all and starts again at the base") {
  setup s("device_bump", {{"capacity", "4MiB"}});
  auto& bump = dynamic_cast<device_bump&>(*s.alloc);
  address_t a = s.allocate(1 * MiB);
  address_t b = s.allocate(1 * MiB);
  s.deallocate(b);  // even the top block: kernels may be bumping, the offset never goes back
  CHECK_EQ(bump.offset(), 2 * MiB);
  CHECK_EQ(s.alloc->stats().unusable_bytes, 1 * MiB);
  CHECK_THROWS_AS(s.deallocate(b), double_free);
  s.allocate(2 * MiB);
  std::string message = what_of([&] { s.allocate(1); });
  CHECK(message.find("reset()") != std::string::npos);
  s.alloc->reset();
  CHECK_EQ(bump.offset(), 0u);
  CHECK_EQ(s.allocate(10), a);
  CHECK_CONSISTENT(s);
}

TEST("device_bump: a kernel's offset is adopted and its bytes show as one unusable block") {
  setup s("device_bump", {{"capacity", "8MiB"}});
  auto& bump = dynamic_cast<device_bump&>(*s.alloc);
  device_bump_view view = bump.view();  // kernels need the region before any host allocation
  CHECK(view.base != 0);
  CHECK_EQ(view.capacity, 8 * MiB);
  CHECK_EQ(view.alignment, 256u);
  address_t host = s.allocate(1000);
  CHECK_EQ(host, view.base);
  bump.set_offset_from_device(1 * MiB);  // kernels took [1 KiB, 1 MiB)
  auto unusable = blocks_of(*s.alloc, block_state::unusable);
  REQUIRE(unusable.size() == 1u);
  CHECK_EQ(unusable[0].address, view.base + 1 * KiB);
  CHECK_EQ(unusable[0].size, 1 * MiB - 1 * KiB);
  CHECK_EQ(unusable[0].aux, 1u);
  CHECK_EQ(s.allocate(1), view.base + 1 * MiB);
  CHECK_CONSISTENT(s);
  CHECK_THROWS_AS(bump.set_offset_from_device(512 * KiB), invalid_argument);
  bump.set_offset_from_device(20 * MiB);  // failed kernel requests overshoot: taken as the capacity
  CHECK_EQ(bump.offset(), 8 * MiB);
  CHECK_THROWS_AS(s.allocate(1), out_of_memory);
  CHECK_CONSISTENT(s);
  s.alloc->reset();
  s.alloc->trim();  // nothing handed out: the region goes back
  CHECK_EQ(s.alloc->stats().reserved_live, 0u);
  CHECK_EQ(bump.base(), 0u);
}

// --- the less-travelled parameter settings under random load ----------------------------------------
// The typed suite stresses one configuration per strategy; these settings change which paths run
// (slab release at empty, buddy with several pools, arena without LIFO pops and unmapping resets,
// vmm_growable with hysteresis or deferred unmapping, device_bump adopting kernel offsets).

std::string stress(const std::string& strategy, const params& p, std::size_t max_request,
                   int operations, std::size_t capacity = 256 * MiB) {
  setup s(strategy, p, capacity);
  std::mt19937_64 rng(std::hash<std::string>{}(strategy + p.values().begin()->second));
  std::map<address_t, std::size_t> live;  // address -> requested
  std::vector<address_t> order;
  auto* bump = dynamic_cast<device_bump*>(s.alloc.get());
  auto forget = [&](std::size_t i) {
    live.erase(order[i]);
    order[i] = order.back();
    order.pop_back();
  };
  for (int op = 0; op < operations; ++op) {
    if (order.empty() || (order.size() < 2000 && rng() % 100 < 55)) {
      const double log_max = std::log(static_cast<double>(max_request));
      std::size_t n = static_cast<std::size_t>(
          std::exp(std::uniform_real_distribution<double>(0, log_max)(rng)));
      n = std::clamp<std::size_t>(n, 1, max_request);
      address_t a;
      try {
        a = s.allocate(n);
      } catch (const out_of_memory&) {
        if (s.alloc->supports_reset() && rng() % 2 == 0) {
          s.alloc->reset();
          live.clear();
          order.clear();
        } else {
          for (std::size_t k = order.size() / 2; k > 0; --k) {
            std::size_t i = rng() % order.size();
            s.deallocate(order[i]);
            forget(i);
          }
        }
        continue;
      }
      auto next = live.lower_bound(a);
      if ((next != live.end() && next->first < a + n) ||
          (next != live.begin() && std::prev(next)->first + std::prev(next)->second > a))
        return "overlap at op " + std::to_string(op);
      live[a] = n;
      order.push_back(a);
    } else {
      std::size_t i = rng() % order.size();
      s.deallocate(order[i]);
      forget(i);
    }
    if (bump != nullptr && bump->base() != 0 && rng() % 64 == 0)  // a kernel took some bytes
      bump->set_offset_from_device(bump->offset() + (rng() % 8) * 4096);
    if (op % 3 == 0 && rng() % 5000 == 0) s.alloc->trim();
    if (op % 5000 == 0 || op == operations - 1) {
      std::string broken = check_invariants(*s.alloc, &live);
      if (!broken.empty()) return broken + " (op " + std::to_string(op) + ")";
    }
  }
  for (address_t a : order) s.deallocate(a);
  s.alloc->trim();
  live.clear();
  std::string broken = check_invariants(*s.alloc, &live);
  if (!broken.empty()) return broken + " (after freeing all)";
  return {};
}

TEST("stress: slab releasing empty slabs at once, capped slabs, odd class sizes") {
  CHECK_EQ(
      stress("slab", {{"release_empty_slabs", "true"}, {"slab_size", "256KiB"}}, 128 * KiB, 200000),
      "");
  CHECK_EQ(
      stress("slab", {{"classes", "768,3KiB,40KiB"}, {"max_slabs", "3"}, {"slab_size", "200KiB"}},
             40 * KiB, 200000),
      "");
}

TEST("stress: buddy with several pools and a larger min_block") {
  CHECK_EQ(stress("buddy", {{"max_pools", "4"}, {"pool_size", "16MiB"}}, 4 * MiB, 200000), "");
  CHECK_EQ(stress("buddy", {{"min_block", "4KiB"}, {"pool_size", "64MiB"}}, 1 * MiB, 200000), "");
}

TEST("stress: arena without LIFO pops, and unmapping at reset") {
  CHECK_EQ(stress("arena", {{"lifo_reclaim", "false"}, {"reserve", "128MiB"}}, 1 * MiB, 200000),
           "");
  CHECK_EQ(stress("arena",
                  {{"release_on_reset", "true"},
                   {"keep_mapped", "5MiB"},
                   {"reserve", "128MiB"},
                   {"alignment", "1KiB"}},
                  2 * MiB, 200000),
           "");
}

TEST("stress: vmm_growable with keep_mapped hysteresis, and with unmapping left to trim()") {
  CHECK_EQ(
      stress("vmm_growable", {{"keep_mapped", "8MiB"}, {"reserve", "512MiB"}}, 6 * MiB, 100000),
      "");
  CHECK_EQ(stress("vmm_growable", {{"unmap_free_granules", "false"}, {"reserve", "512MiB"}},
                  6 * MiB, 100000),
           "");
}

TEST("stress: device_bump adopting kernel offsets between host allocations") {
  CHECK_EQ(stress("device_bump", {{"capacity", "64MiB"}, {"alignment", "1KiB"}}, 1 * MiB, 200000),
           "");
}

}  // namespace

CHECK_MAIN
