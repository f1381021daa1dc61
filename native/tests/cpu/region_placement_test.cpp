// Region placement on the simulated backing: a recording's region addresses are honoured wherever
// the driver put them, below base_address too, so a replay of an H100 recording whose cudaMalloc
// regions went down past 0x7f0000000000 reuses the same segment as the recording did.
#include <vector>

#include "check.hpp"
#include "vramscope/allocator.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;

namespace {

const address_t default_base = simulated_options{}.base_address;

// Where the H100 run of `fragmentation` on caching (pytorch) put its last three large segments:
// going down, the last two below the simulated backing's default base.
const std::vector<address_t> descending_across_base = {default_base, default_base - 32 * MiB,
                                                       default_base - 64 * MiB};

}  // namespace

TEST(
    "simulated backing: placements below base_address are honoured; unplaced regions still start "
    "at base_address") {
  simulated_options o;
  o.region_placement = descending_across_base;
  auto backing = make_simulated_backing(o);
  for (address_t want : descending_across_base) CHECK_EQ(backing->allocate_region(20 * MiB), want);
  // Past the placement, first fit: from base_address up, never into the space below it.
  const address_t unplaced = backing->allocate_region(20 * MiB);
  CHECK(unplaced >= default_base + 20 * MiB);
  simulated_options again;
  again.region_placement = {default_base - 64 * MiB, default_base - 64 * MiB + 10 * MiB};
  auto overlapping = make_simulated_backing(again);
  CHECK_EQ(overlapping->allocate_region(20 * MiB), default_base - 64 * MiB);
  // The second placement overlaps the first region: it cannot be honoured, so first fit.
  CHECK(overlapping->allocate_region(20 * MiB) >= default_base);
}

TEST(
    "caching (pytorch) over a placement that crosses base_address reuses the lowest segment, as "
    "the H100 run did") {
  simulated_options o;
  o.region_placement = descending_across_base;
  auto backing = make_simulated_backing(o);
  auto pool = make_allocator("caching", *backing, {{"preset", "pytorch"}});
  // 12 MiB requests get a segment each (over 10 MiB: rounded to 2 MiB, not packed into 20 MiB).
  std::vector<void*> blocks;
  for (address_t want : descending_across_base) {
    blocks.push_back(pool->allocate(12 * MiB));
    CHECK_EQ(reinterpret_cast<address_t>(blocks.back()), want);
  }
  for (void* b : blocks) pool->deallocate(b);
  // Three equal free segments: best fit by (size, address) takes the lowest, the last one placed.
  void* reused = pool->allocate(12 * MiB);
  CHECK_EQ(reinterpret_cast<address_t>(reused), descending_across_base.back());
  CHECK_EQ(pool->stats().device_calls.region_alloc, std::uint64_t{3});
  pool->deallocate(reused);
}

CHECK_MAIN
