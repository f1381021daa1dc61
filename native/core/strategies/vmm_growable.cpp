// vmm_growable: one reservation of address space, blocks placed inside it, physical memory mapped
// granule by granule as blocks first touch them and unmapped as soon as no live block touches a
// granule. Growth never copies: a block's address is fixed for its life, and the pool's footprint
// follows its live blocks up and down.
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
    touching_.assign(reserve_ / granule_, 0);
    mapped_.assign(reserve_ / granule_, 0);
    blocks_.emplace(base_, block{reserve_, true});
    free_by_size_.emplace(reserve_, base_);
  }

  ~vmm_growable() override {
    for_each_run(0, mapped_.size(), [&](std::size_t first, std::size_t count, bool mapped) {
      if (mapped) get_backing().unmap(granule_address(first), count * granule_);
    });
    get_backing().release_address_space(base_, reserve_);
  }

 private:
  // Invariants: blocks_ tiles [base_, base_ + reserve_) with no two free blocks adjacent;
  // free_by_size_ holds exactly the free blocks; touching_[g] == number of live blocks that overlap
  // granule g, and touching_[g] > 0 implies mapped_[g]; empty_mapped_bytes_ == granule_ * #{g :
  // mapped_[g] && touching_[g] == 0}.
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
    map_untouched_granules(a, n, bytes);  // may fail: nothing has changed yet
    free_by_size_.erase(fit);
    auto it = blocks_.find(a);
    it->second = block{n, false};
    if (size > n) {
      blocks_.emplace_hint(std::next(it), a + n, block{size - n, true});
      free_by_size_.emplace(size - n, a + n);
    }
    touch(a, n);
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
    untouch(a, rounded);
  }

  // --- granules -------------------------------------------------------------------------------

  std::size_t granule_of(address_t a) const {
    return static_cast<std::size_t>((a - base_) / granule_);
  }
  address_t granule_address(std::size_t g) const { return base_ + g * granule_; }

  // Calls f(first, count, mapped) for each maximal run of equal mapped_ state in [begin, end).
  template <class F>
  void for_each_run(std::size_t begin, std::size_t end, F&& f) const {
    std::size_t i = begin;
    while (i < end) {
      std::size_t j = i + 1;
      while (j < end && mapped_[j] == mapped_[i]) ++j;
      f(i, j - i, mapped_[i] != 0);
      i = j;
    }
  }

  // Maps every unmapped granule [a, a + n) touches, in runs; all or nothing. Newly mapped granules
  // count as empty until touch() claims them.
  void map_untouched_granules(address_t a, std::uint64_t n, std::size_t requested) {
    const std::size_t first = granule_of(a), last = granule_of(a + n - 1);
    std::uint64_t needed = 0;
    for (std::size_t g = first; g <= last; ++g) needed += mapped_[g] ? 0 : granule_;
    if (needed == 0) return;
    if (needed > backing_available())
      fail(requested, backing_available(),
           ("no device memory to map " + format_bytes(needed) + " of granules").c_str());
    std::vector<std::pair<std::size_t, std::size_t>> done;
    try {
      for_each_run(first, last + 1, [&](std::size_t g, std::size_t count, bool mapped) {
        if (mapped) return;
        map_range(granule_address(g), count * granule_);
        done.emplace_back(g, count);
      });
    } catch (const out_of_memory& e) {
      for (auto& [g, count] : done) unmap_range(granule_address(g), count * granule_);
      fail(requested, backing_available(),
           ("no device memory to map granules: " + std::string(e.what())).c_str());
    }
    for (auto& [g, count] : done)
      for (std::size_t k = g; k < g + count; ++k) mapped_[k] = 1;
    empty_mapped_bytes_ += needed;
  }

  void touch(address_t a, std::uint64_t n) {
    for (std::size_t g = granule_of(a), last = granule_of(a + n - 1); g <= last; ++g) {
      VRAMSCOPE_ASSERT(mapped_[g]);
      if (touching_[g]++ == 0) empty_mapped_bytes_ -= granule_;
    }
  }

  // Granules no live block touches any more are unmapped at once (beyond keep_mapped bytes kept).
  void untouch(address_t a, std::uint64_t n) {
    const std::size_t first = granule_of(a), last = granule_of(a + n - 1);
    std::size_t run_start = 0, run_count = 0;
    auto flush = [&] {
      if (run_count == 0) return;
      unmap_range(granule_address(run_start), run_count * granule_);
      for (std::size_t k = run_start; k < run_start + run_count; ++k) mapped_[k] = 0;
      run_count = 0;
    };
    for (std::size_t g = first; g <= last; ++g) {
      if (--touching_[g] != 0) continue;
      if (!unmap_free_granules_ || empty_mapped_bytes_ + granule_ <= keep_mapped_) {
        empty_mapped_bytes_ += granule_;
        continue;
      }
      if (run_count != 0 && run_start + run_count != g) flush();
      if (run_count == 0) run_start = g;
      ++run_count;
    }
    flush();
  }

  void do_trim() override {
    // Every mapped granule no live block touches, kept for hysteresis or not, goes back.
    for (std::size_t g = 0; g < mapped_.size();) {
      if (!mapped_[g] || touching_[g] != 0) {
        ++g;
        continue;
      }
      std::size_t end = g;
      while (end < mapped_.size() && mapped_[end] && touching_[end] == 0) ++end;
      unmap_range(granule_address(g), (end - g) * granule_);
      for (std::size_t k = g; k < end; ++k) mapped_[k] = 0;
      g = end;
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
    std::size_t scan_end = (used_end - base_ + granule_ - 1) / granule_;
    for (std::size_t g = mapped_.size(); g > scan_end; --g)
      if (mapped_[g - 1]) {
        scan_end = g;
        break;
      }
    for_each_run(0, scan_end, [&](std::size_t first, std::size_t count, bool mapped) {
      const address_t start = granule_address(first), end = start + count * granule_;
      if (!mapped) {
        const address_t used_granules_end =
            granule_address((used_end - base_ + granule_ - 1) / granule_);
        if (start < used_end) v.region({start, std::min(end, used_granules_end) - start, false, 0});
        return;
      }
      v.region({start, end - start, true, 0});
      auto it = std::prev(blocks_.upper_bound(start));
      for (; it != blocks_.end() && it->first < end; ++it) {
        address_t b = std::max(it->first, start), e = std::min(it->first + it->second.size, end);
        VRAMSCOPE_ASSERT(it->second.free || (b == it->first && e == it->first + it->second.size));
        v.block({b, e - b, it->second.free ? block_state::free : block_state::live, 0});
      }
    });
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
  std::vector<std::uint32_t> touching_;                         // per granule: live blocks on it
  std::vector<std::uint8_t> mapped_;                            // per granule: mapped now
  std::uint64_t empty_mapped_bytes_ = 0;                        // mapped, touched by no live block
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
