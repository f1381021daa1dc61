// The models of RMM's allocators, each in what tells it apart (docs/strategies.md): rmm_pool's
// growth (RMM's size_to_grow and try_to_expand) and its coalescing free lists, which never merge
// across upstream allocations; rmm_arena's 1 MiB superblocks, per-stream arenas, the global arena's
// large requests and the defragmentation on failure; rmm_binning's bins against its upstream pool.
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "check.hpp"
#include "invariants.hpp"
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
  address_t allocate(std::size_t n, stream_t s = 0) {
    return reinterpret_cast<address_t>(alloc->allocate(n, s));
  }
  void deallocate(address_t a, stream_t s = 0) { alloc->deallocate(reinterpret_cast<void*>(a), s); }
  std::uint64_t reserved() const { return alloc->stats().reserved_live; }
  std::string invariants() const { return check_invariants(*alloc, nullptr); }
};

#define CHECK_CONSISTENT(s) CHECK_EQ((s).invariants(), std::string())

std::vector<block_info> blocks_of(const allocator& a, block_state state) {
  std::vector<block_info> out;
  for (auto& b : snapshot(a).blocks)
    if (b.state == state) out.push_back(b);
  std::sort(out.begin(), out.end(),
            [](const block_info& x, const block_info& y) { return x.address < y.address; });
  return out;
}

// Sizes in address order, as text ("1048576,31457280"), so that a failed check shows them.
std::string sizes_of(const std::vector<block_info>& blocks) {
  std::string out;
  for (auto& b : blocks) out += (out.empty() ? "" : ",") + std::to_string(b.size);
  return out;
}
std::string sizes(std::initializer_list<std::uint64_t> list) {
  std::string out;
  for (std::uint64_t n : list) out += (out.empty() ? "" : ",") + std::to_string(n);
  return out;
}

// --- rmm_pool ------------------------------------------------------------------------------------

TEST("rmm_pool without a maximum grows by the pool's size: it doubles") {
  setup s("rmm_pool", {});
  CHECK_EQ(s.reserved(), 0u);
  s.allocate(1 * MiB);
  CHECK_EQ(s.reserved(), 1 * MiB);  // max(size, pool size 0)
  s.allocate(1 * MiB);
  CHECK_EQ(s.reserved(), 2 * MiB);  // max(1 MiB, 1 MiB)
  s.allocate(1 * MiB);
  CHECK_EQ(s.reserved(), 4 * MiB);  // max(1 MiB, 2 MiB): 1 MiB of it left free
  s.allocate(1 * MiB);
  CHECK_EQ(s.reserved(), 4 * MiB);
  s.allocate(5 * MiB);
  CHECK_EQ(s.reserved(), 9 * MiB);  // max(5 MiB, 4 MiB)
  CHECK_EQ(s.alloc->stats().device_calls.region_alloc, 4u);
  CHECK_CONSISTENT(s);
}

TEST("rmm_pool with a maximum grows by half of what is left, and refuses beyond the maximum") {
  setup s("rmm_pool", {{"maximum_pool_size", "64MiB"}});
  s.allocate(1 * MiB);
  CHECK_EQ(s.reserved(), 32 * MiB);                      // max(1 MiB, 64 MiB / 2)
  CHECK_THROWS_AS(s.allocate(40 * MiB), out_of_memory);  // 40 MiB > the 32 MiB left to grow
  CHECK_EQ(s.reserved(), 32 * MiB);
  s.allocate(20 * MiB);  // from the 31 MiB free
  CHECK_EQ(s.reserved(), 32 * MiB);
  s.allocate(20 * MiB);  // 11 MiB free: grows by max(20 MiB, 32 MiB / 2)
  CHECK_EQ(s.reserved(), 52 * MiB);
  s.allocate(12 * MiB);  // 11 MiB free, 12 MiB left to grow: max(12 MiB, 12 MiB / 2)
  CHECK_EQ(s.reserved(), 64 * MiB);
  CHECK_THROWS_AS(s.allocate(12 * MiB), out_of_memory);  // at the maximum
  CHECK_CONSISTENT(s);
}

TEST("rmm_pool halves a growth the device refuses, down to the request") {
  setup s("rmm_pool", {{"initial_pool_size", "32MiB"}}, 48 * MiB);
  CHECK_EQ(s.reserved(), 32 * MiB);
  s.allocate(32 * MiB);
  s.allocate(1 * MiB);  // tries 32 MiB (the pool's size), then 16 MiB, which the device has
  CHECK_EQ(s.reserved(), 48 * MiB);
  // 15 MiB free in the pool; 16 MiB tries 48 MiB, 24 MiB, then 16 MiB: the device has none left.
  CHECK_THROWS_AS(s.allocate(16 * MiB), out_of_memory);
  CHECK_EQ(s.reserved(), 48 * MiB);
  CHECK_CONSISTENT(s);
}

TEST("rmm_pool's percentages are of the device's free memory, aligned down to 256 B") {
  setup s("rmm_pool", {{"initial_pool_percent", "50"}}, 1000 * MiB + 1000);
  CHECK_EQ(s.reserved(), (500 * MiB + 500) & ~std::uint64_t{255});
  setup t("rmm_pool", {{"initial_pool_percent", "100"}, {"maximum_pool_percent", "100"}}, 64 * MiB);
  CHECK_EQ(t.reserved(), 64 * MiB);
  t.allocate(60 * MiB);
  CHECK_THROWS_AS(t.allocate(8 * MiB), out_of_memory);  // the pool is at its maximum
  CHECK_THROWS_AS(make_allocator("rmm_pool", *t.device,
                                 {{"initial_pool_size", "1000"}}),  // not a multiple of 256
                  invalid_argument);
  CHECK_THROWS_AS(make_allocator("rmm_pool", *t.device,
                                 {{"initial_pool_size", "1MiB"}, {"initial_pool_percent", "10"}}),
                  invalid_argument);
}

TEST("rmm_pool coalesces a freed block with its free neighbours, best fit by size then address") {
  setup s("rmm_pool", {{"initial_pool_size", "16MiB"}});
  const address_t a = s.allocate(3 * MiB);
  const address_t b = s.allocate(1 * MiB);
  const address_t c = s.allocate(1 * MiB);
  const address_t d = s.allocate(1 * MiB);
  CHECK_EQ(b, a + 3 * MiB);  // cut from the front of the free block
  s.deallocate(a);
  s.deallocate(c);
  // Free: a's 3 MiB, c's 1 MiB, the 10 MiB tail. Best fit for 1 MiB is c, not the lower a.
  CHECK_EQ(s.allocate(1 * MiB), c);
  s.deallocate(c);
  s.deallocate(b);  // a, b and c merge into one 5 MiB block
  CHECK_EQ(sizes_of(blocks_of(*s.alloc, block_state::free)), sizes({5 * MiB, 10 * MiB}));
  s.deallocate(d);  // and with the tail: the whole pool
  CHECK_EQ(sizes_of(blocks_of(*s.alloc, block_state::free)), sizes({16 * MiB}));
  CHECK_CONSISTENT(s);
}

TEST("rmm_pool never merges blocks of two upstream allocations, even side by side") {
  setup s("rmm_pool", {});
  const address_t a = s.allocate(2 * MiB);
  const address_t b = s.allocate(2 * MiB);  // the pool grows by 2 MiB: a second region
  CHECK_EQ(s.alloc->stats().device_calls.region_alloc, 2u);
  s.deallocate(a);
  s.deallocate(b);
  auto free = blocks_of(*s.alloc, block_state::free);
  CHECK_EQ(free.size(), 2u);
  // Where the device placed them side by side the walk shows one run, but a 4 MiB request still
  // needs the pool to grow.
  s.allocate(4 * MiB);
  CHECK_EQ(s.reserved(), 8 * MiB);
  CHECK_CONSISTENT(s);
}

TEST(
    "rmm_pool keeps free lists per stream: a stream takes another's block only when its own fail") {
  setup s("rmm_pool", {{"initial_pool_size", "8MiB"}});
  // The initial pool is the default stream's; stream 1 takes from it (its rest stays stream 0's).
  const address_t x = s.allocate(1 * MiB, 1);
  const address_t y = s.allocate(1 * MiB, 0);
  CHECK_EQ(y, x + 1 * MiB);
  s.deallocate(x, 1);  // x is stream 1's now: it does not merge with stream 0's free tail
  CHECK_EQ(blocks_of(*s.alloc, block_state::free).size(), 2u);
  CHECK_EQ(s.allocate(512 * KiB, 1), x);  // stream 1's own list first
  s.deallocate(x, 1);
  s.deallocate(y, 0);
  // A 7 MiB request on stream 0: no list holds it alone (stream 0 has 7 MiB from y's start,
  // stream 1 1 MiB); merging stream 1's list into stream 0's gives the whole 8 MiB back.
  CHECK_EQ(s.allocate(8 * MiB, 0), x);
  CHECK_EQ(s.reserved(), 8 * MiB);
  CHECK_CONSISTENT(s);
}

// RMM's pool algorithm written as RMM writes it (stream_ordered_memory_resource::get_block over
// address-ordered lists, coalescing_free_list's linear best fit and insertion), on a backing of
// its own with the same options: the model, with its indexed lists, must hand out the same
// addresses and grow the same way.
class reference_pool {
 public:
  reference_pool(backing& device, std::uint64_t maximum) : device_(device), maximum_(maximum) {}

  address_t allocate(std::uint64_t bytes, stream_t stream) {
    const std::uint64_t size = (bytes + 255) & ~std::uint64_t{255};
    auto own = lists_.find(stream);
    if (own != lists_.end()) {
      block b = take(own->second, size);
      if (b.size != 0) return cut(b, size, own->second);
    }
    std::vector<block>& mine = lists_[stream];
    for (auto& [s, list] : lists_) {
      if (s == stream) continue;
      block b = take(list, size);
      if (b.size != 0) return cut(b, size, list);
    }
    std::vector<stream_t> others;
    for (auto& [s, list] : lists_)
      if (s != stream) others.push_back(s);
    for (stream_t s : others) {
      for (const block& b : lists_[s]) insert(lists_[stream], b);
      lists_.erase(s);
      block b = take(lists_[stream], size);
      if (b.size != 0) return cut(b, size, lists_[stream]);
    }
    (void)mine;
    std::uint64_t attempt = size_to_grow(size);
    address_t a = 0;
    while (attempt >= size && attempt != 0) {
      if (attempt <= device_.available()) {
        a = device_.allocate_region(attempt);
        break;
      }
      if (attempt == size) break;
      attempt = std::max(size, attempt / 2);
    }
    if (a == 0) return 0;
    pool_ += attempt;
    return cut({a, attempt, true}, size, lists_[stream]);
  }

  void deallocate(address_t a, std::uint64_t bytes, stream_t stream) {
    const std::uint64_t size = (bytes + 255) & ~std::uint64_t{255};
    insert(lists_[stream], {a, size, heads_.count(a) != 0});
  }

  std::uint64_t pool_size() const { return pool_; }

 private:
  struct block {
    address_t address;
    std::uint64_t size;
    bool head;
  };

  address_t cut(block b, std::uint64_t size, std::vector<block>& list) {
    if (b.head) heads_.insert(b.address);
    if (b.size > size) insert(list, {b.address + size, b.size - size, false});
    return b.address;
  }

  // coalescing_free_list::get_block: min_element by is_better_fit.
  static block take(std::vector<block>& list, std::uint64_t size) {
    auto better = [&](const block& x, const block& y) {
      return x.size >= size && (x.size < y.size || y.size < size);
    };
    auto it = std::min_element(list.begin(), list.end(), better);
    if (it == list.end() || it->size < size) return {0, 0, false};
    block b = *it;
    list.erase(it);
    return b;
  }

  // coalescing_free_list::insert.
  static void insert(std::vector<block>& list, block b) {
    auto next = std::find_if(list.begin(), list.end(),
                             [&](const block& x) { return b.address < x.address; });
    const bool merge_prev = next != list.begin() && !b.head &&
                            std::prev(next)->address + std::prev(next)->size == b.address;
    const bool merge_next =
        next != list.end() && !next->head && b.address + b.size == next->address;
    if (merge_prev && merge_next) {
      std::prev(next)->size += b.size + next->size;
      list.erase(next);
    } else if (merge_prev) {
      std::prev(next)->size += b.size;
    } else if (merge_next) {
      next->address = b.address;
      next->size += b.size;
      next->head = b.head;
    } else {
      list.insert(next, b);
    }
  }

  std::uint64_t size_to_grow(std::uint64_t size) const {
    if (maximum_ != 0) {
      const std::uint64_t remaining = ((maximum_ - pool_) + 255) & ~std::uint64_t{255};
      return size <= remaining ? std::max(size, remaining / 2) : 0;
    }
    return std::max(size, pool_);
  }

  backing& device_;
  std::uint64_t maximum_;
  std::uint64_t pool_ = 0;
  std::map<stream_t, std::vector<block>> lists_;
  std::set<address_t> heads_;
};

TEST("rmm_pool hands out the addresses RMM's own algorithm does, on three streams") {
  for (std::uint64_t maximum : {std::uint64_t{0}, std::uint64_t{6} * GiB}) {
    simulated_options o;
    o.capacity = 8 * GiB;
    auto device = make_simulated_backing(o);
    auto reference_device = make_simulated_backing(o);
    auto pool =
        make_allocator("rmm_pool", *device, {{"maximum_pool_size", std::to_string(maximum)}});
    reference_pool reference(*reference_device, maximum);
    std::mt19937_64 rng(31 + maximum);
    struct held {
      address_t address;
      std::uint64_t bytes;
      stream_t stream;
    };
    std::vector<held> live;
    int compared = 0;
    for (int op = 0; op < 20000; ++op) {
      if (live.empty() || (live.size() < 400 && rng() % 100 < 55)) {
        const std::uint64_t bytes = std::max<std::uint64_t>(
            1, static_cast<std::uint64_t>(
                   std::exp(std::uniform_real_distribution<double>(0, 14)(rng))) *
                   64);
        const stream_t s = static_cast<stream_t>(rng() % 3);
        const address_t expected = reference.allocate(bytes, s);
        REQUIRE(expected != 0);
        const address_t got = reinterpret_cast<address_t>(pool->allocate(bytes, s));
        CHECK_EQ(got, expected);
        if (got != expected) return;
        ++compared;
        live.push_back({got, bytes, s});
      } else {
        const std::size_t i = rng() % live.size();
        pool->deallocate(reinterpret_cast<void*>(live[i].address), live[i].stream);
        reference.deallocate(live[i].address, live[i].bytes, live[i].stream);
        live[i] = live.back();
        live.pop_back();
      }
    }
    CHECK_EQ(pool->stats().reserved_live, reference.pool_size());
    CHECK(compared > 5000);
    CHECK_EQ(check_invariants(*pool, nullptr), std::string());
  }
}

// --- rmm_arena -----------------------------------------------------------------------------------

TEST("rmm_arena serves small requests from 1 MiB superblocks, one arena per stream") {
  setup s("rmm_arena", {{"arena_size", "32MiB"}});
  CHECK_EQ(s.reserved(), 32 * MiB);  // all of it at construction
  const address_t a = s.allocate(4 * KiB, 1);
  const address_t b = s.allocate(4 * KiB, 1);
  CHECK_EQ(b, a + 4 * KiB);
  // Stream 2's arena takes a superblock of its own: the next 1 MiB, not the rest of stream 1's.
  const address_t c = s.allocate(4 * KiB, 2);
  CHECK_EQ(c, a + 1 * MiB);
  CHECK_EQ(sizes_of(blocks_of(*s.alloc, block_state::free)),
           sizes({1 * MiB - 8 * KiB, 1 * MiB - 4 * KiB, 30 * MiB}));
  // A 1 MiB request still fits a superblock: stream 1's has 1016 KiB, so it takes a third one.
  const address_t d = s.allocate(1 * MiB, 1);
  CHECK_EQ(d, a + 2 * MiB);
  CHECK_CONSISTENT(s);
}

TEST("rmm_arena serves requests over 1 MiB from the global arena, split to their size") {
  setup s("rmm_arena", {{"arena_size", "32MiB"}});
  const address_t small = s.allocate(1000, 1);
  const address_t big = s.allocate(3 * MiB + 1000, 1);
  CHECK_EQ(big, small + 1 * MiB);
  const address_t next = s.allocate(2 * MiB, 2);
  CHECK_EQ(next, big + 3 * MiB + 1024);  // the large one's superblock is exactly its size
  s.deallocate(big, 1);
  s.deallocate(next, 2);
  // Both superblocks empty and global again: they merge with the global rest.
  CHECK_EQ(sizes_of(blocks_of(*s.alloc, block_state::free)), sizes({1 * MiB - 1024, 31 * MiB}));
  CHECK_CONSISTENT(s);
}

TEST("rmm_arena: an arena keeps its empty superblocks") {
  setup s("rmm_arena", {{"arena_size", "32MiB"}});
  const address_t a = s.allocate(256 * KiB, 1);
  s.deallocate(a, 1);
  // Stream 1's superblock is empty but stays its own, beside the global arena's 31 MiB.
  CHECK_EQ(sizes_of(blocks_of(*s.alloc, block_state::free)), sizes({1 * MiB, 31 * MiB}));
  // Stream 2 takes a superblock of the global arena rather than stream 1's empty one.
  CHECK_EQ(s.allocate(256 * KiB, 2), a + 1 * MiB);
  // Stream 1 gets its own one back.
  CHECK_EQ(s.allocate(256 * KiB, 1), a);
  CHECK_CONSISTENT(s);
}

TEST("rmm_arena defragments on a failure: empty superblocks merge and the request is tried again") {
  setup s("rmm_arena", {{"arena_size", "32MiB"}});
  const address_t a = s.allocate(256 * KiB, 1);
  s.deallocate(a, 1);
  const auto syncs = s.alloc->stats().device_calls.synchronize;
  // 32 MiB fits only once stream 1's empty superblock is back in the global arena.
  CHECK_EQ(s.allocate(32 * MiB, 2), a);
  CHECK(s.alloc->stats().device_calls.synchronize > syncs);
  s.deallocate(a, 2);
  CHECK_EQ(sizes_of(blocks_of(*s.alloc, block_state::free)), sizes({32 * MiB}));
  // A request that no defragmentation serves is refused with nothing changed.
  const address_t b = s.allocate(1 * MiB, 1);
  auto before = snapshot(*s.alloc);
  CHECK_THROWS_AS(s.allocate(32 * MiB, 2), out_of_memory);
  CHECK(same_layout(before, snapshot(*s.alloc)));
  s.deallocate(b, 1);
  CHECK_CONSISTENT(s);
}

// RMM's arena written as RMM writes it (global_arena, arena and superblock of detail/arena.hpp:
// address-ordered sets searched from the start, the deallocation's search of the arenas), over the
// same addresses: the model, with its first-fit tree, must hand out the same blocks. Where a
// request fails even after the defragmentation, the reference is put back as it was, as the model
// refuses without defragmenting.
class reference_arena {
 public:
  reference_arena(address_t base, std::uint64_t size) {
    global_.emplace(base, superblock(base, size));
  }

  address_t allocate(std::uint64_t bytes, stream_t stream) {
    const std::uint64_t size = (bytes + 255) & ~std::uint64_t{255};
    address_t a = allocate_in(stream, size);
    if (a != 0) return a;
    reference_arena before = *this;
    for (auto& [s, sbs] : arenas_) {
      while (!sbs.empty()) {
        superblock sb = sbs.begin()->second;
        sbs.erase(sbs.begin());
        coalesce_global(sb);
      }
    }
    a = allocate_in(stream, size);
    if (a == 0) *this = before;
    return a;
  }

  void deallocate(address_t a, std::uint64_t bytes, stream_t stream) {
    const std::uint64_t size = (bytes + 255) & ~std::uint64_t{255};
    if (size > mib && free_in_global(a, size)) return;
    if (free_in(arenas_[stream], a, size)) return;
    for (auto& [s, sbs] : arenas_)
      if (free_in(sbs, a, size)) return;
    REQUIRE(free_in_global(a, size));
  }

 private:
  static constexpr std::uint64_t mib = 1 << 20;
  struct superblock {
    superblock(address_t a, std::uint64_t n) : address(a), size(n) { free.emplace(a, n); }
    address_t address;
    std::uint64_t size;
    std::map<address_t, std::uint64_t> free;
    bool empty() const { return free.size() == 1 && free.begin()->second == size; }
    bool fits(std::uint64_t n) const {
      for (auto& [a, m] : free)
        if (m >= n) return true;
      return false;
    }
    address_t first_fit(std::uint64_t n) {
      for (auto it = free.begin(); it != free.end(); ++it)
        if (it->second >= n) {
          const address_t a = it->first;
          const std::uint64_t m = it->second;
          free.erase(it);
          if (m > n) free.emplace(a + n, m - n);
          return a;
        }
      return 0;
    }
    bool contains(address_t a, std::uint64_t n) const {
      return address <= a && a + n <= address + size;
    }
    void coalesce(address_t a, std::uint64_t n) {
      auto next = free.lower_bound(a);
      if (next != free.end() && a + n == next->first) {
        n += next->second;
        next = free.erase(next);
      }
      if (next != free.begin() && std::prev(next)->first + std::prev(next)->second == a) {
        std::prev(next)->second += n;
        return;
      }
      free.emplace(a, n);
    }
  };
  using set = std::map<address_t, superblock>;

  address_t allocate_in(stream_t stream, std::uint64_t size) {
    if (size > mib) {
      auto sb = global_first_fit(size);
      if (!sb.second) return 0;
      const address_t a = sb.first.first_fit(size);
      global_.emplace(sb.first.address, sb.first);
      return a;
    }
    set& own = arenas_[stream];
    for (auto& [sa, sb] : own)
      if (sb.fits(size)) return sb.first_fit(size);
    auto sb = global_first_fit(size);
    if (!sb.second) return 0;
    const address_t a = sb.first.first_fit(size);
    own.emplace(sb.first.address, sb.first);
    return a;
  }

  std::pair<superblock, bool> global_first_fit(std::uint64_t size) {
    for (auto it = global_.begin(); it != global_.end(); ++it) {
      if (!it->second.fits(size)) continue;
      superblock sb = it->second;
      global_.erase(it);
      const std::uint64_t min_size = std::max(mib, size);
      if (sb.empty() && sb.size >= min_size + mib) {
        global_.emplace(sb.address + min_size,
                        superblock(sb.address + min_size, sb.size - min_size));
        return {superblock(sb.address, min_size), true};
      }
      return {sb, true};
    }
    return {superblock(0, 0), false};
  }

  static bool free_in(set& sbs, address_t a, std::uint64_t n) {
    for (auto& [sa, sb] : sbs)
      if (sb.contains(a, n)) {
        sb.coalesce(a, n);
        return true;
      }
    return false;
  }

  bool free_in_global(address_t a, std::uint64_t n) {
    for (auto it = global_.begin(); it != global_.end(); ++it)
      if (it->second.contains(a, n)) {
        superblock sb = it->second;
        global_.erase(it);
        sb.coalesce(a, n);
        if (sb.empty()) coalesce_global(sb);
        else global_.emplace(sb.address, sb);
        return true;
      }
    return false;
  }

  void coalesce_global(superblock sb) {
    auto next = global_.lower_bound(sb.address);
    if (next != global_.begin()) {
      auto prev = std::prev(next);
      if (prev->second.empty() && sb.empty() && prev->first + prev->second.size == sb.address) {
        sb = superblock(prev->first, prev->second.size + sb.size);
        global_.erase(prev);
      }
    }
    if (next != global_.end() && next->second.empty() && sb.empty() &&
        sb.address + sb.size == next->first) {
      sb = superblock(sb.address, sb.size + next->second.size);
      global_.erase(next);
    }
    global_.emplace(sb.address, sb);
  }

  set global_;
  std::map<stream_t, set> arenas_;
};

void compare_arena_with_reference(std::uint64_t arena_size, int operations, std::uint64_t seed) {
  simulated_options o;
  o.capacity = arena_size + 1 * GiB;
  auto device = make_simulated_backing(o);
  auto arena = make_allocator("rmm_arena", *device, {{"arena_size", std::to_string(arena_size)}});
  const address_t base = snapshot(*arena).regions.at(0).address;
  reference_arena reference(base, arena_size);
  std::mt19937_64 rng(seed);
  struct held {
    address_t address;
    std::uint64_t bytes;
    stream_t stream;
  };
  std::vector<held> live;
  int compared = 0, failures = 0;
  for (int op = 0; op < operations; ++op) {
    if (live.empty() || rng() % 100 < 55) {
      // Mostly small, a tenth over 1 MiB (the global arena's).
      const std::uint64_t bytes =
          rng() % 10 == 0 ? (1 * MiB + 1 + rng() % (3 * MiB))
                          : std::max<std::uint64_t>(
                                1, static_cast<std::uint64_t>(std::exp(
                                       std::uniform_real_distribution<double>(0, 13.8)(rng))));
      const stream_t s = static_cast<stream_t>(rng() % 3);
      const address_t expected = reference.allocate(bytes, s);
      address_t got = 0;
      try {
        got = reinterpret_cast<address_t>(arena->allocate(bytes, s));
      } catch (const out_of_memory&) {
        ++failures;
      }
      CHECK_EQ(got, expected);
      if (got != expected) return;
      if (got == 0) {
        // Free half of what is live, as a program would after an out-of-memory.
        for (std::size_t k = live.size() / 2; k > 0; --k) {
          const std::size_t i = rng() % live.size();
          arena->deallocate(reinterpret_cast<void*>(live[i].address), live[i].stream);
          reference.deallocate(live[i].address, live[i].bytes, live[i].stream);
          live[i] = live.back();
          live.pop_back();
        }
        continue;
      }
      ++compared;
      live.push_back({got, bytes, s});
    } else {
      const std::size_t i = rng() % live.size();
      arena->deallocate(reinterpret_cast<void*>(live[i].address), live[i].stream);
      reference.deallocate(live[i].address, live[i].bytes, live[i].stream);
      live[i] = live.back();
      live.pop_back();
    }
  }
  CHECK(compared > operations / 4);
  if (arena_size < 1 * GiB) {
    CHECK(failures > 10);
    CHECK(arena->stats().device_calls.synchronize > 0);  // some fitted after defragmenting
  }
  CHECK_EQ(check_invariants(*arena, nullptr), std::string());
}

TEST("rmm_arena hands out the blocks RMM's own arena does, on three streams, failures included") {
  compare_arena_with_reference(96 * MiB, 20000, 916);
}

TEST("rmm_arena over 1 TiB, searched in order rather than indexed, hands out the same blocks") {
  compare_arena_with_reference(std::uint64_t{2} << 40, 3000, 917);
}

// --- rmm_binning ---------------------------------------------------------------------------------

TEST(
    "rmm_binning: RMM's replay bins (256 KiB to 4 MiB) take 128 blocks each from the pool at "
    "once") {
  setup s("rmm_binning", {}, 4 * GiB);
  // Chunks of 32, 64, 128, 256 and 512 MiB, the pool growing by max(chunk, pool size) each time.
  CHECK_EQ(s.reserved(), 992 * MiB);
  CHECK_EQ(s.alloc->stats().device_calls.region_alloc, 5u);
  const address_t a = s.allocate(1 * KiB);  // the smallest bin that holds it: 256 KiB
  CHECK_EQ(s.alloc->stats().rounded_live, 256 * KiB);
  const address_t b = s.allocate(300 * KiB);  // 512 KiB
  CHECK_EQ(s.alloc->stats().rounded_live, 768 * KiB);
  CHECK_EQ(s.reserved(), 992 * MiB);
  // Larger than every bin: the pool itself, rounded to 256 B only; the pool doubles for it.
  const address_t c = s.allocate(5 * MiB + 1);
  CHECK_EQ(s.alloc->stats().rounded_live, 768 * KiB + 5 * MiB + 256);
  CHECK_EQ(s.reserved(), 1984 * MiB);
  s.deallocate(a);
  s.deallocate(b);
  s.deallocate(c);
  CHECK_EQ(s.reserved(), 1984 * MiB);  // nothing goes back
  CHECK_CONSISTENT(s);
}

TEST("rmm_binning: a bin reuses first in first out, and takes another chunk when it runs out") {
  setup s("rmm_binning", {{"bins", "1MiB"}, {"blocks_to_preallocate", "2"}});
  CHECK_EQ(s.reserved(), 2 * MiB);
  const address_t a = s.allocate(100 * KiB);
  s.deallocate(a);
  const address_t b = s.allocate(100 * KiB);
  CHECK_EQ(b, a + 1 * MiB);  // a went to the back of the list
  const address_t c = s.allocate(100 * KiB);
  CHECK_EQ(c, a);
  s.allocate(100 * KiB);  // the third block: a new chunk of two, the pool growing by 2 MiB
  CHECK_EQ(s.reserved(), 4 * MiB);
  CHECK_EQ(blocks_of(*s.alloc, block_state::free).size(), 1u);
  CHECK_CONSISTENT(s);
}

TEST(
    "rmm_binning: where the pool cannot hold a bin's first chunk, the bin waits for its first "
    "request") {
  setup s("rmm_binning",
          {{"bins", "1MiB"}, {"initial_pool_percent", "100"}, {"maximum_pool_percent", "100"}},
          64 * MiB);
  CHECK_EQ(s.reserved(),
           64 * MiB);  // the pool holds the whole device; the 128 MiB chunk did not fit
  CHECK_THROWS_AS(s.allocate(1000), out_of_memory);
  CHECK(s.allocate(2 * MiB) != 0);  // the pool still serves what no bin takes
  CHECK_CONSISTENT(s);
}

// RMM's binning resource as RMM's replay benchmark builds it, written as RMM writes it: bins of
// fixed_size_memory_resource (stream_ordered_memory_resource::get_block over fixed_size_free_list:
// the front block of a list, a freed one to its back, a chunk of blocks from upstream when every
// list is empty) over the reference pool above.
class reference_binning {
 public:
  reference_binning(backing& device, std::vector<std::uint64_t> bins, std::uint64_t per_chunk)
      : pool_(device, 0), per_chunk_(per_chunk) {
    for (std::uint64_t size : bins) {
      bins_.push_back({size, {}});
      chunk(bins_.back(), 0);
    }
  }

  address_t allocate(std::uint64_t bytes, stream_t stream) {
    for (bin& b : bins_) {
      if (bytes > b.size) continue;
      auto own = b.lists.find(stream);
      if (own != b.lists.end() && !own->second.empty()) return pop(own->second);
      for (auto& [s, list] : b.lists)
        if (s != stream && !list.empty()) return pop(list);
      std::deque<address_t>& mine = b.lists[stream];
      if (!chunk(b, stream)) return 0;
      return pop(mine);
    }
    return pool_.allocate(bytes, stream);
  }

  void deallocate(address_t a, std::uint64_t bytes, stream_t stream) {
    for (bin& b : bins_)
      if (bytes <= b.size) {
        b.lists[stream].push_back(a);
        return;
      }
    pool_.deallocate(a, bytes, stream);
  }

 private:
  struct bin {
    std::uint64_t size;
    std::map<stream_t, std::deque<address_t>> lists;
  };
  static address_t pop(std::deque<address_t>& list) {
    const address_t a = list.front();
    list.pop_front();
    return a;
  }
  bool chunk(bin& b, stream_t stream) {
    const address_t a = pool_.allocate(b.size * per_chunk_, stream);
    if (a == 0) return false;
    for (std::uint64_t i = 0; i < per_chunk_; ++i) b.lists[stream].push_back(a + i * b.size);
    return true;
  }

  reference_pool pool_;
  std::uint64_t per_chunk_;
  std::vector<bin> bins_;
};

TEST("rmm_binning hands out the blocks RMM's own binning resource does, on two streams") {
  simulated_options o;
  o.capacity = 8 * GiB;
  auto device = make_simulated_backing(o);
  auto reference_device = make_simulated_backing(o);
  auto binning = make_allocator("rmm_binning", *device,
                                {{"bins", "4KiB,64KiB,1MiB"}, {"blocks_to_preallocate", "16"}});
  reference_binning reference(*reference_device, {4 * KiB, 64 * KiB, 1 * MiB}, 16);
  std::mt19937_64 rng(18);
  struct held {
    address_t address;
    std::uint64_t bytes;
    stream_t stream;
  };
  std::vector<held> live;
  int compared = 0;
  for (int op = 0; op < 20000; ++op) {
    if (live.empty() || (live.size() < 300 && rng() % 100 < 55)) {
      const std::uint64_t bytes = std::max<std::uint64_t>(
          1,
          static_cast<std::uint64_t>(std::exp(std::uniform_real_distribution<double>(0, 16)(rng))));
      const stream_t s = static_cast<stream_t>(rng() % 2);
      const address_t expected = reference.allocate(bytes, s);
      REQUIRE(expected != 0);
      const address_t got = reinterpret_cast<address_t>(binning->allocate(bytes, s));
      CHECK_EQ(got, expected);
      if (got != expected) return;
      ++compared;
      live.push_back({got, bytes, s});
    } else {
      const std::size_t i = rng() % live.size();
      binning->deallocate(reinterpret_cast<void*>(live[i].address), live[i].stream);
      reference.deallocate(live[i].address, live[i].bytes, live[i].stream);
      live[i] = live.back();
      live.pop_back();
    }
  }
  CHECK(compared > 5000);
  CHECK_EQ(check_invariants(*binning, nullptr), std::string());
}

// --- the layout trace ----------------------------------------------------------------------------

struct recording_tracer final : tracer {
  std::vector<trace_event> events;
  void record(const trace_event& e) override { events.push_back(e); }
};

TEST("a layout trace holds the regions each model obtained at construction, before the tracer") {
  for (const char* name : {"rmm_pool", "rmm_arena", "rmm_binning"}) {
    setup s(name,
            {{std::string(name) == "rmm_arena" ? "arena_size" : "initial_pool_size", "8MiB"}});
    recording_tracer t;
    s.alloc->set_tracer(&t);
    const std::uint64_t reserved = s.reserved();
    s.allocate(4096);
    s.alloc->set_tracer(nullptr);
    REQUIRE(!t.events.empty());
    std::uint64_t traced = 0;
    for (const trace_event& e : t.events)
      if (e.op == trace_op::region_reserve) traced += e.size;
    CHECK_EQ(t.events.front().op, trace_op::region_reserve);
    CHECK_EQ(traced, s.reserved());
    CHECK(reserved >= 8 * MiB);
  }
}

}  // namespace

CHECK_MAIN
