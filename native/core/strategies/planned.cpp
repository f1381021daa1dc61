// planned: the static plan. Told every block's lifetime before the first allocation (a replay
// knows the whole trace), it places each block on one address line so that no two alive at once
// overlap (planned_placement.hpp), in one region the size of the plan's highest end (or of the
// device, where that is less), obtained at the first allocation. The k-th allocation gets the k-th
// planned offset, and fails where the plan puts it past the region. A bound to hold the real
// allocators to, not an allocator a program could use: it serves no caller that does not plan.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "planned_placement.hpp"
#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

// PyTorch's rounding (kMinBlockSize): the plan holds the blocks PyTorch would hand out.
constexpr std::uint64_t block_unit = 512;
std::uint64_t planned_size(std::uint64_t bytes) {
  return std::max(block_unit, (bytes + block_unit - 1) / block_unit * block_unit);
}

class planned final : public allocator {
 public:
  explicit planned(backing& b) : allocator("planned", b) {
    // Reuse follows the trace's order of events, which the plan was made from.
    reuse_is_stream_ordered();
    frees_complete_at_once();
  }
  ~planned() override {
    if (base_ != 0) get_backing().free_region(base_, arena_);
  }

 private:
  // Fast path: the next planned block, in the arena once it is there.
  allocation do_allocate(std::size_t bytes, stream_t, std::uint32_t& cookie) override {
    if (VRAMSCOPE_LIKELY(base_ != 0 && next_ < size_.size() &&
                         planned_size(bytes) == size_[next_] &&
                         offset_[next_] + size_[next_] <= arena_)) {
      const std::size_t k = next_++;
      cookie = static_cast<std::uint32_t>(k);
      note_live(k);
      return {base_ + offset_[k], size_[k]};
    }
    return allocate_slow(bytes, cookie);
  }

  VRAMSCOPE_NOINLINE allocation allocate_slow(std::size_t bytes, std::uint32_t& cookie) {
    if (!planned_)
      throw unsupported(
          "planned: it places blocks by a plan of the whole trace, so it serves a replay only "
          "(no plan was given before this allocation)");
    if (next_ >= size_.size())
      throw invalid_argument("planned: allocation " + std::to_string(next_) +
                             " is past the plan's " + std::to_string(size_.size()) + " blocks");
    if (planned_size(bytes) != size_[next_])
      throw invalid_argument("planned: allocation " + std::to_string(next_) + " asks for " +
                             std::to_string(bytes) + " B, the plan's block is " +
                             std::to_string(size_[next_]) + " B");
    // The arena: the plan's highest end, or what the device has where that is less; the blocks
    // the plan puts past it fail (and the k-th allocation stays the k-th block).
    if (base_ == 0 && std::min<std::uint64_t>(extent_, backing_available()) > 0) {
      arena_ = std::min<std::uint64_t>(extent_, backing_available());
      try {
        base_ = obtain_region(arena_, 0);
      } catch (const out_of_memory&) {
        arena_ = 0;  // no room for the region (its address space): this block fails, as all will
        ++next_;
        throw;
      }
      return do_allocate(bytes, 0, cookie);
    }
    const std::size_t k = next_++;
    return refuse(bytes, arena_ > offset_[k] ? arena_ - offset_[k] : 0, [&] {
      return "the plan puts this block at " + format_bytes(offset_[k]) + " to " +
             format_bytes(offset_[k] + size_[k]) + " of its " + format_bytes(extent_) +
             ", past the device's " + format_bytes(arena_ != 0 ? arena_ : backing_available());
    });
  }

  void do_deallocate(address_t, std::uint64_t, std::uint32_t cookie, stream_t) override {
    // Swap-remove from the live list.
    const std::uint32_t at = position_[cookie];
    const std::uint32_t last = live_.back();
    live_[at] = last;
    position_[last] = at;
    live_.pop_back();
  }

  void note_live(std::size_t k) {
    position_[k] = static_cast<std::uint32_t>(live_.size());
    live_.push_back(static_cast<std::uint32_t>(k));
  }

  void do_plan(const std::vector<block_lifetime>& blocks) override {
    if (blocks.size() >= 0xFFFFFFFFu)
      throw invalid_argument("planned: at most 2^32 - 1 blocks, got " +
                             std::to_string(blocks.size()));
    std::vector<block_lifetime> sized(blocks);
    for (block_lifetime& b : sized) b.bytes = planned_size(b.bytes);
    planning::placement p = planning::place_blocks(sized);
    offset_ = std::move(p.offset);
    size_.resize(sized.size());
    for (std::size_t k = 0; k < sized.size(); ++k) size_[k] = sized[k].bytes;
    extent_ = p.extent;
    position_.assign(sized.size(), 0);
    live_.clear();
    planned_ = true;
  }

  void do_walk(layout_visitor& v) const override {
    if (base_ == 0) return;
    v.region({base_, arena_, true, 0});
    std::vector<std::uint32_t> by_offset(live_);
    std::sort(by_offset.begin(), by_offset.end(),
              [&](std::uint32_t a, std::uint32_t b) { return offset_[a] < offset_[b]; });
    std::uint64_t at = 0;
    for (std::uint32_t k : by_offset) {
      if (offset_[k] > at) v.block({base_ + at, offset_[k] - at, block_state::free, 0});
      v.block({base_ + offset_[k], size_[k], block_state::live, 0});
      at = offset_[k] + size_[k];
    }
    if (at < arena_) v.block({base_ + at, arena_ - at, block_state::free, 0});
  }

  // Invariant: no two blocks of live_ overlap (the plan's promise), so the region is their bytes
  // plus the gaps do_walk reports free: reserved == rounded + free.
  bool planned_ = false;
  std::vector<std::uint64_t> offset_, size_;  // per planned block
  std::uint64_t extent_ = 0;                  // the plan's highest end
  std::uint64_t arena_ = 0;  // the region obtained: extent_, or the device where that is less
  std::size_t next_ = 0;     // the next allocation's block
  address_t base_ = 0;       // the arena, once obtained
  std::vector<std::uint32_t> live_;      // blocks live now
  std::vector<std::uint32_t> position_;  // block -> its index in live_ while live
};

const strategy_registration registration{
    {"planned",
     "a static plan: every block's lifetime known ahead, blocks placed on one address line so that "
     "no two alive at once overlap (greedy by size, or time-ordered best fit where that is lower); "
     "a bound, not an allocator: replay only",
     {},
     strategy_traits().needs_plan()},
    [](backing& b, const params&) -> std::unique_ptr<allocator> {
      return std::make_unique<planned>(b);
    }};

}  // namespace
}  // namespace vramscope
