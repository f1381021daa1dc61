// rmm_arena: RMM's arena_memory_resource (rapidsai/rmm: mr/arena_memory_resource.hpp,
// detail/arena.hpp, detail/arena_memory_resource_impl). Facts from RMM's source, our own code:
//  - one allocation from the device at construction, the global arena (arena_size; default half
//    the device's free memory, aligned down to 256 B); it never grows;
//  - the global arena is cut into superblocks of at least 1 MiB; each stream has an arena of its
//    own that takes superblocks from the global arena as it needs them;
//  - a request (aligned up to 256 B) of at most 1 MiB is served from its stream's arena:
//    address-ordered first fit over the arena's superblocks, each superblock's free blocks
//    address-ordered first fit too; where none fits, the arena acquires the first superblock of
//    the global arena that holds it (an empty one split to 1 MiB, the rest staying global);
//  - a request of more than 1 MiB is served by the global arena directly: the first superblock
//    that holds it, an empty one split to the request's size where the rest is 1 MiB or more;
//  - a freed block coalesces with the free blocks beside it in its superblock; a superblock of the
//    global arena that becomes empty merges with the empty global superblocks beside it; an
//    arena's empty superblocks stay with it;
//  - where a request fails, every arena gives all its superblocks back to the global arena
//    (defragment), empty ones merging, and the request is tried once more.
// Per-thread arenas (the per-thread default stream) are per-stream arenas here: a replay knows the
// stream of each request, not the thread. A request that would fail after the defragmentation is
// refused without it, so that a refused request leaves the allocator as it was.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rmm_pool_core.hpp"
#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

constexpr std::uint64_t superblock_min = std::uint64_t{1} << 20;  // superblock::minimum_size
constexpr std::uint32_t global_owner = 0;

// The leftmost slot whose value is at least a size: a max tree over the arena's 1 MiB units, one
// per owner. A superblock is at least 1 MiB, so no two start in the same unit.
class first_fit_tree {
 public:
  explicit first_fit_tree(std::size_t slots) {
    n_ = 1;
    while (n_ < slots) n_ <<= 1;
    max_.assign(2 * n_, 0);
  }
  void set(std::size_t slot, std::uint64_t value) {
    std::size_t i = slot + n_;
    max_[i] = value;
    for (i >>= 1; i != 0; i >>= 1) max_[i] = std::max(max_[2 * i], max_[2 * i + 1]);
  }
  // The first slot with a value >= size, or npos.
  std::size_t first_at_least(std::uint64_t size) const {
    if (max_[1] < size) return npos;
    std::size_t i = 1;
    while (i < n_) i = max_[2 * i] >= size ? 2 * i : 2 * i + 1;
    return i - n_;
  }
  static constexpr std::size_t npos = ~std::size_t{0};

 private:
  std::size_t n_;
  std::vector<std::uint64_t> max_;
};

class rmm_arena final : public allocator {
 public:
  rmm_arena(backing& b, const params& p) : allocator("rmm_arena", b) {
    const std::uint64_t percent = p.get_uint("arena_percent", 50);
    if (p.has("arena_size") && p.has("arena_percent"))
      throw invalid_argument("rmm_arena: give arena_size or arena_percent, not both");
    if (percent == 0 || percent > 100)
      throw invalid_argument(
          "rmm_arena: parameter 'arena_percent' is a percentage of the device's free memory, 1 "
          "to 100, got " +
          std::to_string(percent));
    size_ = p.has("arena_size") ? rmm_model::align_down_256(p.get_size("arena_size", 0))
                                : rmm_model::percent_of(b.available(), percent);
    if (size_ < superblock_min)
      throw invalid_argument("rmm_arena: the arena (" + format_bytes(size_) +
                             ") is smaller than a superblock (1 MiB)");
    base_ = obtain_region(size_);
    units_ = static_cast<std::size_t>((size_ + superblock_min - 1) / superblock_min);
    indexed_ = units_ <= max_indexed_units;
    if (indexed_) start_of_slot_.assign(units_, 0);
    add_owner();
    add_superblock(base_, size_, global_owner);
  }

  ~rmm_arena() override { get_backing().free_region(base_, size_); }

 private:
  struct superblock {
    std::uint64_t size;
    std::uint32_t owner;                      // 0: the global arena; k: the k-th stream arena
    std::map<address_t, std::uint64_t> free;  // address-ordered free blocks
    std::uint64_t largest = 0;                // the largest of them
    bool empty() const { return free.size() == 1 && free.begin()->second == size; }
  };
  using sb_iterator = std::map<address_t, superblock>::iterator;

  allocation do_allocate(std::size_t bytes, stream_t stream, std::uint32_t&) override {
    if (bytes > rmm_model::largest_request) return refuse_request(bytes);
    const std::uint64_t size = rmm_model::align_up_256(bytes);
    const std::uint32_t owner = arena_of(stream);
    address_t a = allocate_in(owner, size);
    if (a == 0) {
      if (!fits_after_defragment(size)) return refuse_request(bytes);
      defragment();
      a = allocate_in(owner, size);
      VRAMSCOPE_ASSERT(a != 0);
      if (a == 0) return refuse_request(bytes);
    }
    live_.emplace(a, size);
    return {a, size};
  }

  allocation refuse_request(std::size_t bytes) const {
    return refuse(bytes, largest_free(),
                  [&] { return "no room in arena (arena of " + format_bytes(size_) + ")"; });
  }

  void do_deallocate(address_t a, std::uint64_t rounded, std::uint32_t, stream_t) override {
    live_.erase(a);
    sb_iterator it = superblocks_.upper_bound(a);
    VRAMSCOPE_ASSERT(it != superblocks_.begin());
    --it;
    const std::uint64_t merged = coalesce(it->second, a, rounded);
    if (merged > it->second.largest) {
      it->second.largest = merged;
      index(it, it->second.owner, merged);
    }
    if (it->second.owner == global_owner && it->second.empty()) merge_empty_global(it);
  }

  // The stream's arena, made on its first request.
  std::uint32_t arena_of(stream_t stream) {
    auto it = arenas_.find(stream);
    if (it != arenas_.end()) return it->second;
    const std::uint32_t owner = add_owner();
    arenas_.emplace(stream, owner);
    return owner;
  }

  address_t allocate_in(std::uint32_t owner, std::uint64_t size) {
    if (size > superblock_min) return allocate_large(size);
    // The arena's first superblock that holds it, else one acquired from the global arena.
    sb_iterator it = first_fit(owner, size);
    if (it == superblocks_.end()) {
      it = first_fit(global_owner, size);
      if (it == superblocks_.end()) return 0;
      it = split_if_empty(it, superblock_min);
      set_owner(it, owner);
    }
    return take(it, size);
  }

  address_t allocate_large(std::uint64_t size) {
    sb_iterator it = first_fit(global_owner, size);
    if (it == superblocks_.end()) return 0;
    it = split_if_empty(it, size);
    return take(it, size);
  }

  sb_iterator first_fit(std::uint32_t owner, std::uint64_t size) {
    if (!indexed_) {
      for (sb_iterator it = superblocks_.begin(); it != superblocks_.end(); ++it)
        if (it->second.owner == owner && it->second.largest >= size) return it;
      return superblocks_.end();
    }
    const std::size_t slot = trees_[owner].first_at_least(size);
    if (slot == first_fit_tree::npos) return superblocks_.end();
    return superblocks_.find(start_of_slot_[slot]);
  }

  // An empty global superblock at least min_size + 1 MiB is split: the head of min_size is
  // returned, the rest stays global (global_arena::first_fit).
  sb_iterator split_if_empty(sb_iterator it, std::uint64_t size) {
    superblock& s = it->second;
    const std::uint64_t head = std::max(superblock_min, size);
    if (!s.empty() || s.size < head + superblock_min) return it;
    const address_t a = it->first;
    const std::uint64_t rest = s.size - head;
    s.free.clear();
    s.free.emplace(a, head);
    s.size = head;
    set_largest(it);
    add_superblock(a + head, rest, global_owner);
    return superblocks_.find(a);
  }

  // Address-ordered first fit inside a superblock.
  address_t take(sb_iterator it, std::uint64_t size) {
    superblock& s = it->second;
    auto fit = std::find_if(
        s.free.begin(), s.free.end(),
        [&](const std::pair<const address_t, std::uint64_t>& f) { return f.second >= size; });
    VRAMSCOPE_ASSERT(fit != s.free.end());
    const address_t a = fit->first;
    const std::uint64_t n = fit->second;
    auto next = s.free.erase(fit);
    if (n > size) s.free.emplace_hint(next, a + size, n - size);
    if (n == s.largest) set_largest(it);
    return a;
  }

  // Returns the size of the free block the freed one became part of.
  std::uint64_t coalesce(superblock& s, address_t a, std::uint64_t size) {
    auto next = s.free.lower_bound(a);
    if (next != s.free.end() && a + size == next->first) {
      size += next->second;
      next = s.free.erase(next);
    }
    if (next != s.free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == a) {
        prev->second += size;
        return prev->second;
      }
    }
    s.free.emplace_hint(next, a, size);
    return size;
  }

  void merge_empty_global(sb_iterator it) {
    if (it != superblocks_.begin()) {
      sb_iterator prev = std::prev(it);
      if (prev->second.owner == global_owner && prev->second.empty()) {
        prev->second.size += it->second.size;
        prev->second.free.begin()->second = prev->second.size;
        remove_superblock(it);
        it = prev;
        set_largest(it);
      }
    }
    sb_iterator next = std::next(it);
    if (next != superblocks_.end() && next->second.owner == global_owner && next->second.empty()) {
      it->second.size += next->second.size;
      it->second.free.begin()->second = it->second.size;
      remove_superblock(next);
      set_largest(it);
    }
  }

  // Every arena's superblocks go back to the global arena, empty ones merging.
  void defragment() {
    for (sb_iterator it = superblocks_.begin(); it != superblocks_.end(); ++it)
      if (it->second.owner != global_owner) set_owner(it, global_owner);
    for (sb_iterator it = superblocks_.begin(); it != superblocks_.end();) {
      sb_iterator next = std::next(it);
      if (it->second.empty() && next != superblocks_.end() && next->second.empty()) {
        merge_empty_global(it);
        continue;  // it may merge with the one after too
      }
      it = next;
    }
    get_backing().synchronize();  // cudaDeviceSynchronize before the arenas are cleaned
  }

  // Whether the request would be served after defragment(): a free block of a non-empty
  // superblock, or a run of empty ones, that holds it.
  bool fits_after_defragment(std::uint64_t size) const {
    std::uint64_t run = 0;
    for (auto& [a, s] : superblocks_) {
      if (s.empty()) {
        run += s.size;
        if (run >= size) return true;
      } else {
        run = 0;
        if (s.largest >= size) return true;
      }
    }
    return false;
  }

  std::uint64_t largest_free() const {
    std::uint64_t best = 0;
    for (auto& [a, s] : superblocks_) best = std::max(best, s.largest);
    return best;
  }

  // A new owner (the global arena, then each stream's arena) and its first-fit tree.
  std::uint32_t add_owner() {
    if (indexed_) trees_.emplace_back(units_);
    return owners_++;
  }

  // The superblock's largest free block in its owner's tree.
  void index(sb_iterator it, std::uint32_t owner, std::uint64_t largest) {
    if (indexed_) trees_[owner].set(slot_of(it->first), largest);
  }

  std::size_t slot_of(address_t a) const {
    return static_cast<std::size_t>((a - base_) / superblock_min);
  }

  void add_superblock(address_t a, std::uint64_t size, std::uint32_t owner) {
    superblock s;
    s.size = size;
    s.owner = owner;
    s.free.emplace(a, size);
    auto it = superblocks_.emplace(a, std::move(s)).first;
    if (indexed_) start_of_slot_[slot_of(a)] = a;
    set_largest(it);
  }

  void remove_superblock(sb_iterator it) {
    index(it, it->second.owner, 0);
    superblocks_.erase(it);
  }

  void set_owner(sb_iterator it, std::uint32_t owner) {
    index(it, it->second.owner, 0);
    it->second.owner = owner;
    index(it, owner, it->second.largest);
  }

  void set_largest(sb_iterator it) {
    std::uint64_t best = 0;
    for (auto& [a, n] : it->second.free) best = std::max(best, n);
    it->second.largest = best;
    index(it, it->second.owner, best);
  }

  void do_walk(layout_visitor& v) const override {
    v.region({base_, size_, true, 0});
    auto live = live_.begin();
    for (auto& [sa, s] : superblocks_) {
      const address_t end = sa + s.size;
      auto f = s.free.begin();
      while (f != s.free.end() || (live != live_.end() && live->first < end)) {
        if (f != s.free.end() &&
            (live == live_.end() || live->first >= end || f->first < live->first)) {
          v.block({f->first, f->second, block_state::free, s.owner});
          ++f;
        } else {
          v.block({live->first, live->second, block_state::live, s.owner});
          ++live;
        }
      }
    }
  }

  bool do_was_freed(address_t a) const override {
    auto it = superblocks_.upper_bound(a);
    if (it == superblocks_.begin()) return false;
    --it;
    auto f = it->second.free.upper_bound(a);
    if (f == it->second.free.begin()) return false;
    --f;
    return a < f->first + f->second;
  }

  address_t base_ = 0;
  std::uint64_t size_ = 0;
  std::size_t units_ = 0;
  // Arenas of up to 2^20 superblock units (1 TiB) index their superblocks in a tree per owner
  // (16 B a unit at most); larger ones, which only a device of that size gives, search them in
  // address order.
  static constexpr std::size_t max_indexed_units = std::size_t{1} << 20;
  bool indexed_ = true;
  std::uint32_t owners_ = 0;
  std::map<address_t, superblock> superblocks_;  // they tile [base_, base_ + size_)
  std::vector<address_t> start_of_slot_;         // the superblock starting in each 1 MiB unit
  std::vector<first_fit_tree> trees_;            // per owner: largest free block by slot
  std::map<stream_t, std::uint32_t> arenas_;
  std::map<address_t, std::uint64_t> live_;
};

const strategy_registration registration{
    {"rmm_arena",
     "RMM's arena_memory_resource: per-stream arenas of 1 MiB superblocks over one global arena",
     {{"arena_size", "size", "0",
       "bytes of the global arena, taken at construction (aligned down to 256 B); instead of "
       "arena_percent"},
      {"arena_percent", "uint", "50",
       "the global arena as this percentage of the device's free memory (50: RMM's default; 100: "
       "the replay benchmark's simulated size)"}},
     strategy_traits().runs_on(backing_kind::cuda_malloc)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<rmm_arena>(b, p);
    }};

}  // namespace
}  // namespace vramscope
