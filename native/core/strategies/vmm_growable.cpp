// vmm_growable: one reservation of address space, blocks placed inside it, physical memory mapped
// granule by granule as blocks first touch them and unmapped as soon as no live block touches a
// granule. Growth never copies: a block's address is fixed for its life, and the pool's footprint
// follows its live blocks up and down. Granules are kept as runs (mapped ranges) and whether one is
// touched is read from the blocks around it, so no cost grows with the reservation's size.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

class vmm_growable final : public allocator {
 public:
  vmm_growable(backing& b, const params& p) : allocator("vmm_growable", b) {
    granule_ = b.granularity();
    reserve_ = align_up(p.get_size("reserve", 64 * GiB), granule_);
    unmap_free_granules_ = p.get_bool("unmap_free_granules", true);
    keep_mapped_ = p.get_size("keep_mapped", 0);
    if (reserve_ == 0)
      throw invalid_argument("vmm_growable: parameter 'reserve' must be more than 0");
    base_ = reserve_address_space(reserve_, granule_);
    blocks_.emplace(base_, block{reserve_, true});
    free_by_size_.emplace(reserve_, base_);
  }

  ~vmm_growable() override {
    for (auto& [first, end] : mapped_)
      get_backing().unmap(granule_address(first), (end - first) * granule_);
    get_backing().release_address_space(base_, reserve_);
  }

 private:
  // Invariants: blocks_ tiles [base_, base_ + reserve_) with no two free blocks adjacent;
  // free_by_size_ holds exactly the free blocks; mapped_ holds the maximal runs of mapped granules
  // (first -> end, never adjacent), and every granule a live block overlaps (a touched granule) is
  // in one; empty_mapped_bytes_ == granule_ * the number of mapped granules no live block touches.
  struct block {
    std::uint64_t size;
    bool free;
  };

  // Best fit (smallest free block that fits, lowest address among equals), not first fit: it is
  // O(log n) with an ordered set where address-ordered first fit needs a scan or an augmented tree,
  // and it fills holes left between live blocks before it cuts into the large free tail of the
  // reservation, which keeps live blocks packed on few granules just as first fit would.
  allocation do_allocate(std::size_t bytes, stream_t, std::uint32_t&) override {
    const std::uint64_t n = align_up(bytes, min_alignment);
    auto fit = free_by_size_.lower_bound({n, 0});
    if (VRAMSCOPE_UNLIKELY(fit == free_by_size_.end() || n < bytes)) fail_no_room(bytes);
    const address_t a = fit->second;
    const std::uint64_t size = fit->first;
    // Only the end granules of a free block can be touched (by the live neighbours).
    const std::size_t first = granule_of(a), last = granule_of(a + n - 1);
    const std::size_t already_touched =
        (is_touched(first, a, size) ? 1 : 0) + (last != first && is_touched(last, a, size) ? 1 : 0);
    map_unmapped_granules(first, last, bytes);  // may fail: nothing has changed yet
    free_by_size_.erase(fit);
    auto it = blocks_.find(a);
    it->second = block{n, false};
    if (size > n) {
      blocks_.emplace_hint(std::next(it), a + n, block{size - n, true});
      free_by_size_.emplace(size - n, a + n);
    }
    empty_mapped_bytes_ -= (last - first + 1 - already_touched) * granule_;
    high_water_ = std::max(high_water_, a + n);
    return {a, n};
  }

  void do_deallocate(address_t a, std::uint64_t rounded, std::uint32_t, stream_t) override {
    auto it = blocks_.find(a);
    VRAMSCOPE_ASSERT(it != blocks_.end() && !it->second.free && it->second.size == rounded);
    address_t start = a;
    std::uint64_t size = rounded;
    if (it != blocks_.begin()) {
      auto prev = std::prev(it);
      if (prev->second.free) {
        free_by_size_.erase({prev->second.size, prev->first});
        start = prev->first;
        size += prev->second.size;
        blocks_.erase(it);
        it = prev;
      }
    }
    auto next = std::next(it);
    if (next != blocks_.end() && next->second.free) {
      free_by_size_.erase({next->second.size, next->first});
      size += next->second.size;
      blocks_.erase(next);
    }
    it->second = block{size, true};
    free_by_size_.emplace(size, start);
    untouch(a, rounded, start, size);
  }

  // Whether a live block overlaps granule g, which lies partly in the free block [start, start +
  // size). Free blocks are never adjacent, so the blocks either side of it are live: the granule is
  // untouched only where the free block covers it whole.
  bool is_touched(std::size_t g, address_t start, std::uint64_t size) const {
    const address_t granule_start = granule_address(g);
    return granule_start < start || start + size < granule_start + granule_;
  }

  // --- granules -------------------------------------------------------------------------------

  std::size_t granule_of(address_t a) const {
    return static_cast<std::size_t>((a - base_) / granule_);
  }
  address_t granule_address(std::size_t g) const { return base_ + g * granule_; }

  // Granules [first, last] that are not mapped, as runs: f(first, end) for each, in order.
  template <class F>
  void for_each_unmapped(std::size_t first, std::size_t last, F&& f) const {
    std::size_t at = first;
    auto run = mapped_.upper_bound(first);
    if (run != mapped_.begin() && std::prev(run)->second > first) at = std::prev(run)->second;
    for (; at <= last; ++run) {
      const std::size_t next = run == mapped_.end() ? last + 1 : std::min(run->first, last + 1);
      if (at < next) f(at, next);
      if (run == mapped_.end()) break;
      at = std::max(at, run->second);
    }
  }

  // Adds the run [first, end) of newly mapped granules to mapped_, joining its neighbours.
  void add_mapped(std::size_t first, std::size_t end) {
    auto next = mapped_.lower_bound(first);
    if (next != mapped_.end() && next->first == end) {
      end = next->second;
      next = mapped_.erase(next);
    }
    if (next != mapped_.begin() && std::prev(next)->second == first) std::prev(next)->second = end;
    else mapped_.emplace_hint(next, first, end);
  }

  // Takes the run [first, end), all of it mapped and in one run of mapped_, out of mapped_.
  void remove_mapped(std::size_t first, std::size_t end) {
    auto run = std::prev(mapped_.upper_bound(first));
    VRAMSCOPE_ASSERT(run->first <= first && end <= run->second);
    const std::size_t run_first = run->first, run_end = run->second;
    if (run_first < first) run->second = first;
    else mapped_.erase(run);
    if (end < run_end) mapped_.emplace(end, run_end);
  }

  // Maps every unmapped granule of [first, last], in runs; all or nothing. Newly mapped granules
  // count as empty until the allocation claims them.
  void map_unmapped_granules(std::size_t first, std::size_t last, std::size_t requested) {
    std::uint64_t needed = 0;
    for_each_unmapped(first, last,
                      [&](std::size_t g, std::size_t end) { needed += (end - g) * granule_; });
    if (needed == 0) return;
    if (needed > backing_available())
      fail(requested, backing_available(),
           ("no device memory to map " + format_bytes(needed) + " of granules").c_str());
    std::vector<std::pair<std::size_t, std::size_t>> done;
    try {
      for_each_unmapped(first, last, [&](std::size_t g, std::size_t end) {
        map_range(granule_address(g), (end - g) * granule_);
        done.emplace_back(g, end);
      });
    } catch (const out_of_memory& e) {
      for (auto& [g, end] : done) unmap_range(granule_address(g), (end - g) * granule_);
      fail(requested, backing_available(),
           ("no device memory to map granules: " + std::string(e.what())).c_str());
    }
    for (auto& [g, end] : done) add_mapped(g, end);
    empty_mapped_bytes_ += needed;
  }

  // The block [a, a + n) was freed, into the free block [free_start, free_start + free_size): the
  // granules no live block touches any more are unmapped at once, beyond keep_mapped bytes kept (the lowest ones are kept). Only
  // the end granules can still be touched, by the neighbours.
  void untouch(address_t a, std::uint64_t n, address_t free_start, std::uint64_t free_size) {
    std::size_t first = granule_of(a), last = granule_of(a + n - 1);
    if (is_touched(first, free_start, free_size)) ++first;
    if (last >= first && is_touched(last, free_start, free_size)) {
      if (last == first) return;
      --last;
    }
    if (last < first) return;
    std::size_t count = last - first + 1;
    std::size_t keep = count;
    if (unmap_free_granules_) {
      const std::uint64_t room =
          keep_mapped_ > empty_mapped_bytes_ ? keep_mapped_ - empty_mapped_bytes_ : 0;
      keep = static_cast<std::size_t>(std::min<std::uint64_t>(count, room / granule_));
    }
    empty_mapped_bytes_ += keep * granule_;
    if (keep == count) return;
    unmap_range(granule_address(first + keep), (count - keep) * granule_);
    remove_mapped(first + keep, last + 1);
  }

  void do_trim() override {
    // Every mapped granule no live block touches, kept for hysteresis or not, goes back: those a
    // free block covers whole. One pass over the free blocks and the runs.
    std::vector<std::pair<std::size_t, std::size_t>> empty;
    for (auto& [address, b] : blocks_) {
      if (!b.free) continue;
      const std::size_t first = (address - base_ + granule_ - 1) / granule_;
      const std::size_t end = (address + b.size - base_) / granule_;
      if (first >= end) continue;
      auto run = mapped_.upper_bound(first);
      if (run != mapped_.begin()) --run;
      for (; run != mapped_.end() && run->first < end; ++run) {
        const std::size_t from = std::max(first, run->first), to = std::min(end, run->second);
        if (from < to) empty.emplace_back(from, to);
      }
    }
    for (auto& [from, to] : empty) {
      unmap_range(granule_address(from), (to - from) * granule_);
      remove_mapped(from, to);
    }
    empty_mapped_bytes_ = 0;
  }

  [[noreturn]] VRAMSCOPE_NOINLINE void fail_no_room(std::size_t bytes) const {
    fail(bytes, largest_free_in_reserve(),
         ("no room left in the reserved address space (reserve " + format_bytes(reserve_) + ")")
             .c_str());
  }

  std::uint64_t largest_free_in_reserve() const {
    return free_by_size_.empty() ? 0 : std::prev(free_by_size_.end())->first;
  }

  // --- the map ----------------------------------------------------------------------------------

  // Mapped granule runs are mapped regions tiled by the blocks (free ones clipped to the run);
  // unmapped runs below the end of the used address space are mapped=false regions.
  void do_walk(layout_visitor& v) const override {
    auto tail = std::prev(blocks_.end());
    const address_t used_end = tail->second.free ? tail->first : base_ + reserve_;
    const std::size_t used_granules = (used_end - base_ + granule_ - 1) / granule_;
    const std::size_t scan_end =
        mapped_.empty() ? used_granules : std::max(used_granules, std::prev(mapped_.end())->second);
    const address_t used_granules_end = granule_address(used_granules);
    auto unmapped = [&](std::size_t first, std::size_t end) {
      const address_t start = granule_address(first);
      if (first < end && start < used_end)
        v.region({start, std::min(granule_address(end), used_granules_end) - start, false, 0});
    };
    std::size_t at = 0;
    for (auto& [first, run_end] : mapped_) {
      unmapped(at, first);
      at = run_end;
      const address_t start = granule_address(first), end = granule_address(run_end);
      v.region({start, end - start, true, 0});
      auto it = std::prev(blocks_.upper_bound(start));
      for (; it != blocks_.end() && it->first < end; ++it) {
        address_t b = std::max(it->first, start), e = std::min(it->first + it->second.size, end);
        VRAMSCOPE_ASSERT(it->second.free || (b == it->first && e == it->first + it->second.size));
        v.block({b, e - b, it->second.free ? block_state::free : block_state::live, 0});
      }
    }
    unmapped(at, scan_end);
  }

  bool do_was_freed(address_t a) const override {
    // Coalescing forgets where freed blocks started: any 256 B aligned address of ours inside a free
    // block, below the highest block end ever handed out, counts as freed.
    if (a < base_ || a >= high_water_ || a % min_alignment != 0) return false;
    auto it = std::prev(blocks_.upper_bound(a));
    return it->second.free;
  }

  std::size_t granule_;
  std::uint64_t reserve_;
  bool unmap_free_granules_;
  std::uint64_t keep_mapped_;
  address_t base_;
  address_t high_water_ = 0;
  std::map<address_t, block> blocks_;                           // address -> block, tiling
  std::set<std::pair<std::uint64_t, address_t>> free_by_size_;  // (size, address) of free blocks
  std::map<std::size_t, std::size_t> mapped_;  // runs of mapped granules: first -> end
  std::uint64_t empty_mapped_bytes_ = 0;       // mapped, touched by no live block
};

const strategy_registration registration{
    {"vmm_growable",
     "reserve VA once, map/unmap granules on demand, no copy on growth",
     {{"reserve", "size", "64GiB", "address space reserved once (rounded to the granularity)"},
      {"unmap_free_granules", "bool", "true",
       "unmap a granule as soon as no live block touches it (false: only trim() unmaps)"},
      {"keep_mapped", "size", "0",
       "hysteresis: bytes of empty granules that stay mapped until trim()"}},
     strategy_traits().needs_vmm().runs_on(backing_kind::cuda_vmm)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<vmm_growable>(b, p);
    }};

}  // namespace
}  // namespace vramscope
