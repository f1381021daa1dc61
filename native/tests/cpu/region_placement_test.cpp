// Region placement on the simulated backing: a recording's region addresses are honoured wherever
// the driver put them, below base_address too, so a replay of an H100 recording whose cudaMalloc
// regions went down past 0x7f0000000000 reuses the same segment as the recording did.
#include <algorithm>
#include <iterator>
#include <map>
#include <random>
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

namespace {

// The simulated backing's first fit as it was written first: a walk over every free range from
// base_address up, the lowest where the request fits aligned. The backing now looks ranges up by
// size; its addresses must stay these, so replays of the same trace place the same blocks.
struct reference_first_fit {
  std::map<address_t, std::size_t> free;
  address_t from;
  reference_first_fit(address_t space_start, address_t first_fit_start, std::size_t size)
      : from(first_fit_start) {
    free.emplace(space_start, size);
  }
  address_t take(std::size_t bytes, std::size_t alignment) {
    auto it = free.upper_bound(from);
    if (it != free.begin() && std::prev(it)->first + std::prev(it)->second > from) --it;
    for (; it != free.end(); ++it) {
      const address_t start = align_up(std::max(it->first, from), alignment);
      const address_t end = it->first + it->second;
      if (start + bytes > end) continue;
      const address_t range_start = it->first;
      free.erase(it);
      if (start > range_start) free.emplace(range_start, start - range_start);
      if (start + bytes < end) free.emplace(start + bytes, end - (start + bytes));
      return start;
    }
    return 0;
  }
  void give(address_t address, std::size_t bytes) {
    auto next = free.lower_bound(address);
    if (next != free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == address) {
        address = prev->first;
        bytes += prev->second;
        free.erase(prev);
      }
    }
    if (next != free.end() && address + bytes == next->first) {
      bytes += next->second;
      free.erase(next);
    }
    free.emplace(address, bytes);
  }
};

}  // namespace

TEST(
    "simulated backing: regions go where a walk over every free range would put them (first fit), "
    "through 20,000 random allocations and frees of sizes from 512 B to 64 MiB") {
  simulated_options o;
  o.capacity = std::size_t{1} << 46;
  auto backing = make_simulated_backing(o);
  const address_t base = align_up(o.base_address, 1 * GiB);
  reference_first_fit reference(64 * KiB, base, base + (std::size_t{1} << 50) - 64 * KiB);
  std::mt19937_64 random(20261126);
  std::vector<std::pair<address_t, std::size_t>> live;
  for (int i = 0; i < 20000; ++i) {
    if (!live.empty() && random() % 5 < 2) {
      const std::size_t k = random() % live.size();
      const auto [address, bytes] = live[k];
      live[k] = live.back();
      live.pop_back();
      backing->free_region(address, bytes);
      reference.give(address, align_up(bytes, 512));
      continue;
    }
    // Sizes spread over powers of two, odd ones too: small regions pack at 512 B, large ones
    // start on a granule.
    const std::size_t bytes =
        (std::size_t{1} << (9 + random() % 18)) + (random() % 4) * 4096 + random() % 700;
    const address_t got = backing->allocate_region(bytes);
    const address_t want =
        reference.take(align_up(bytes, 512), bytes >= o.granularity ? o.granularity : 512);
    CHECK_EQ(got, want);
    if (got != want) break;
    live.emplace_back(got, bytes);
  }
  for (const auto& [address, bytes] : live) backing->free_region(address, bytes);
}

TEST(
    "free ranges: the lowest range that fits, found in the fit tree, is the one a walk by "
    "address "
    "finds (sizes holding the request, and sizes holding it aligned), through 20,000 changes") {
  free_ranges ranges;
  std::mt19937_64 random(7);
  address_t next = 1 * MiB;
  for (int i = 0; i < 20000; ++i) {
    if (ranges.size() > 0 && random() % 3 == 0) {
      auto it = ranges.lower_bound(1 * MiB + random() % (next - 1 * MiB));
      if (it == ranges.end()) it = ranges.begin();
      ranges.erase(it);
    } else {
      const std::size_t bytes = (std::size_t{1} << (random() % 30)) + random() % 5000;
      ranges.add(next, bytes);
      next += bytes + 512 + random() % 4096;
    }
    const std::size_t want = (std::size_t{1} << (random() % 30)) + random() % 3000;
    const std::size_t alignment = std::size_t{512} << (random() % 6);
    const address_t from = 1 * MiB + random() % (next - 1 * MiB + 1);
    const auto holds = [&](address_t, std::size_t size) { return size >= want; };
    const auto holds_aligned = [&](address_t a, std::size_t size) {
      return align_up(a, alignment) + want <= a + size;
    };
    address_t walked = 0, walked_aligned = 0;
    for (auto it = ranges.lower_bound(from); it != ranges.end(); ++it) {
      if (walked == 0 && holds(it->first, it->second)) walked = it->first;
      if (walked_aligned == 0 && holds_aligned(it->first, it->second)) walked_aligned = it->first;
    }
    auto got = ranges.lowest_fitting(from, want, holds);
    auto got_aligned = ranges.lowest_fitting(from, want, holds_aligned);
    CHECK_EQ(got == ranges.end() ? address_t{0} : got->first, walked);
    CHECK_EQ(got_aligned == ranges.end() ? address_t{0} : got_aligned->first, walked_aligned);
    if ((got == ranges.end() ? address_t{0} : got->first) != walked) break;
  }
}

TEST(
    "free ranges: carving and giving back (ranges changed in place in the fit tree) keep the "
    "ranges those of a plain map, and the lowest fit the one a walk finds, through 20,000 "
    "changes") {
  free_ranges ranges;
  std::map<address_t, std::size_t> model;  // the same free space, coalesced, kept by hand
  std::vector<std::pair<address_t, std::size_t>> taken;
  const address_t low = 1 * MiB, high = low + (std::size_t{1} << 34);
  ranges.add(low, high - low);
  model.emplace(low, high - low);
  std::mt19937_64 random(11);
  int carved = 0, given = 0;
  std::size_t most = 0;
  for (int i = 0; i < 20000; ++i) {
    if (!taken.empty() && random() % 3 == 0) {
      // Give back a taken piece: joined with the free neighbours it touches.
      const std::size_t k = random() % taken.size();
      auto [address, bytes] = taken[k];
      taken[k] = taken.back();
      taken.pop_back();
      ranges.give(address, bytes);
      ++given;
      auto next = model.lower_bound(address);
      if (next != model.begin() && std::prev(next)->first + std::prev(next)->second == address) {
        auto prev = std::prev(next);
        address = prev->first;
        bytes += prev->second;
        model.erase(prev);
      }
      if (next != model.end() && address + bytes == next->first) {
        bytes += next->second;
        model.erase(next);
      }
      model.emplace(address, bytes);
    } else {
      // Take a piece at the start, the end, the middle or the whole of a random fitting range.
      const std::size_t want = (std::size_t{512} << (random() % 16)) + 512 * (random() % 64);
      // First fit from the start, as the backing asks, or from somewhere inside.
      const address_t from = random() % 4 == 0 ? low + (random() % (high - low)) / 2 : low;
      auto it = ranges.lowest_fitting(from, want,
                                      [&](address_t, std::size_t size) { return size >= want; });
      address_t walked = 0;
      for (auto m = model.lower_bound(from); m != model.end(); ++m)
        if (m->second >= want) {
          walked = m->first;
          break;
        }
      CHECK_EQ(it == ranges.end() ? address_t{0} : it->first, walked);
      if (it == ranges.end()) continue;
      const std::size_t room = it->second - want;
      const std::size_t where = random() % 4;
      const std::size_t bytes = where == 3 ? it->second : want;
      const address_t start = it->first + (where == 0   ? 0
                                           : where == 1 ? room
                                           : where == 2 ? (room / 2) & ~std::size_t{511}
                                                        : 0);
      const address_t range_start = it->first, range_end = it->first + it->second;
      ranges.carve(it, start, bytes);
      model.erase(range_start);
      if (start > range_start) model.emplace(range_start, start - range_start);
      if (start + bytes < range_end) model.emplace(start + bytes, range_end - (start + bytes));
      taken.emplace_back(start, bytes);
      ++carved;
    }
    CHECK(ranges.by_address() == model);
    if (ranges.by_address() != model) break;
    most = std::max(most, model.size());
  }
  // Both kinds of change happened many times, on a space cut into many ranges.
  CHECK(carved > 5000);
  CHECK(given > 5000);
  CHECK(most > 100);
}

CHECK_MAIN
