// arena: a bump pointer over one reservation of address space. Memory is mapped in commit_chunk steps
// as the pointer advances; reset() (a step boundary) frees every block at once. A freed block stays
// unusable until the reset, except the topmost: freeing it pops the pointer back (stack order is how
// arena users usually free), together with any freed blocks just below it.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

constexpr address_t freed_bit = 1;  // block starts are 256 B aligned: the low bit is spare

class arena_allocator final : public allocator {
 public:
  arena_allocator(backing& b, const params& p) : allocator("arena", b) {
    const std::size_t granule = b.granularity();
    reserve_ = align_up(p.get_size("reserve", 64 * GiB), granule);
    commit_chunk_ = p.get_size("commit_chunk", granule);
    std::uint64_t alignment = p.get_size("alignment", 256);
    release_on_reset_ = p.get_bool("release_on_reset", false);
    keep_mapped_ = p.get_size("keep_mapped", 0);
    lifo_reclaim_ = p.get_bool("lifo_reclaim", true);
    if (reserve_ == 0) throw invalid_argument("arena: parameter 'reserve' must be more than 0");
    if (commit_chunk_ == 0 || commit_chunk_ % granule != 0)
      throw invalid_argument(
          "arena: parameter 'commit_chunk' must be a multiple of the backing's granularity " +
          format_bytes(granule) + ", got " + format_bytes(commit_chunk_));
    if (!is_power_of_two(alignment) || alignment < min_alignment)
      throw invalid_argument(
          "arena: parameter 'alignment' must be a power of two of at least 256 B, got " +
          format_bytes(alignment));
    alignment_mask_ = alignment - 1;
    base_ = reserve_address_space(reserve_, granule);
    top_ = mapped_end_ = base_;
  }

  ~arena_allocator() override {
    if (mapped_end_ > base_) get_backing().unmap(base_, mapped_end_ - base_);
    get_backing().release_address_space(base_, reserve_);
  }

 private:
  // Invariant: base_ <= top_ <= mapped_end_ <= base_ + reserve_. blocks_[0, count_) are the blocks
  // of [base_, top_) in address order, each ending where the next starts (the last at top_), with
  // freed_bit set on the unusable ones. Entries past count_ are ghosts: earlier block starts, used
  // only to type a double free of a popped block.

  // Fast path: a bump and a compare (n - 1 < room also rejects an n that wrapped to 0), and the
  // block's start recorded where blocks_ has room (growing it is the slow path's, so that this one
  // needs no stack frame).
  allocation do_allocate(std::size_t bytes, stream_t, std::uint32_t& cookie) override {
    const std::uint64_t n = (bytes + alignment_mask_) & ~alignment_mask_;
    const address_t a = top_;
    if (VRAMSCOPE_LIKELY(n - 1 < mapped_end_ - a && count_ < blocks_.size())) {
      top_ = a + n;
      blocks_[count_++] = a;
      return {a, n};
    }
    return allocate_slow(bytes, cookie);
  }

  void do_deallocate(address_t a, std::uint64_t rounded, std::uint32_t, stream_t) override {
    if (VRAMSCOPE_LIKELY(a + rounded == top_ && lifo_reclaim_)) {
      top_ = a;
      --count_;
      if (VRAMSCOPE_UNLIKELY(count_ != 0 && (blocks_[count_ - 1] & freed_bit))) pop_freed_tail();
      return;
    }
    mark_freed(a);
  }

  VRAMSCOPE_NOINLINE void pop_freed_tail() {
    while (count_ != 0 && (blocks_[count_ - 1] & freed_bit)) top_ = blocks_[--count_] & ~freed_bit;
  }

  VRAMSCOPE_NOINLINE void mark_freed(address_t a) {
    auto end = blocks_.begin() + static_cast<std::ptrdiff_t>(count_);
    auto it = std::lower_bound(blocks_.begin(), end, a,
                               [](address_t x, address_t key) { return (x & ~freed_bit) < key; });
    VRAMSCOPE_ASSERT(it != end && *it == a);
    *it |= freed_bit;
  }

  VRAMSCOPE_NOINLINE allocation allocate_slow(std::size_t bytes, std::uint32_t& cookie) {
    if (((bytes + alignment_mask_) & ~alignment_mask_) - 1 >= mapped_end_ - top_) map_for(bytes);
    // New entries are 0, which no block starts at: harmless ghosts.
    if (count_ == blocks_.size()) blocks_.resize(std::max<std::size_t>(64, blocks_.size() * 2));
    return do_allocate(bytes, 0, cookie);
  }

  // Maps enough of the reservation for `bytes` more above the pointer, or fails.
  void map_for(std::size_t bytes) {
    const address_t reserve_end = base_ + reserve_;
    if (bytes > reserve_end - top_)
      fail(bytes, reserve_end - top_,
           ("reserved address space exhausted (reserve " + format_bytes(reserve_) + ")").c_str());
    const std::uint64_t n = align_up(bytes, alignment_mask_ + 1);
    if (n > reserve_end - top_)
      fail(bytes, reserve_end - top_,
           ("reserved address space exhausted (reserve " + format_bytes(reserve_) + ")").c_str());
    address_t new_end =
        std::min<address_t>(base_ + align_up(top_ + n - base_, commit_chunk_), reserve_end);
    try {
      map_range(mapped_end_, new_end - mapped_end_);
    } catch (const out_of_memory& e) {
      fail(bytes, mapped_end_ - top_,
           ("no device memory to map more of the arena: " + std::string(e.what())).c_str());
    }
    mapped_end_ = new_end;
  }

  bool do_supports_reset() const noexcept override { return true; }

  void do_reset() override {
    top_ = base_;
    count_ = 0;  // the entries stay as ghosts
    if (release_on_reset_)
      unmap_above(base_ + std::min<std::uint64_t>(align_up(keep_mapped_, commit_chunk_), reserve_));
  }

  // Memory above the pointer that no block uses goes back (whole commit chunks).
  void do_trim() override { unmap_above(base_ + align_up(top_ - base_, commit_chunk_)); }

  void unmap_above(address_t keep_end) {
    if (keep_end >= mapped_end_) return;
    unmap_range(keep_end, mapped_end_ - keep_end);
    mapped_end_ = keep_end;
  }

  void do_walk(layout_visitor& v) const override {
    if (mapped_end_ == base_) return;
    v.region({base_, mapped_end_ - base_, true, 0});
    for (std::size_t i = 0; i < count_; ++i) {
      address_t start = blocks_[i] & ~freed_bit;
      address_t end = i + 1 < count_ ? blocks_[i + 1] & ~freed_bit : top_;
      v.block({start, end - start,
               (blocks_[i] & freed_bit) ? block_state::unusable : block_state::live, 0});
    }
    if (top_ < mapped_end_) v.block({top_, mapped_end_ - top_, block_state::free, 0});
  }

  bool do_was_freed(address_t a) const override {
    auto end = blocks_.begin() + static_cast<std::ptrdiff_t>(count_);
    auto it = std::lower_bound(blocks_.begin(), end, a,
                               [](address_t x, address_t key) { return (x & ~freed_bit) < key; });
    if (it != end && (*it & ~freed_bit) == a) return (*it & freed_bit) != 0;
    // A block start above the pointer was popped (or reset) and not handed out again.
    if (a < top_) return false;
    for (std::size_t i = count_; i < blocks_.size(); ++i)
      if ((blocks_[i] & ~freed_bit) == a) return true;
    return false;
  }

  std::uint64_t reserve_;
  std::uint64_t commit_chunk_;
  std::uint64_t alignment_mask_;
  std::uint64_t keep_mapped_;
  bool release_on_reset_;
  bool lifo_reclaim_;
  address_t base_;
  address_t top_;
  address_t mapped_end_;
  std::size_t count_ = 0;
  std::vector<address_t> blocks_;
};

const strategy_registration registration{
    {"arena",
     "bump pointer over reserved address space, maps granules as it grows, bulk reset at markers",
     {{"reserve", "size", "64GiB", "address space reserved once (rounded to the granularity)"},
      {"commit_chunk", "size", "2MiB",
       "mapping step, a multiple of the backing's granularity (default: the granularity, 2 MiB on "
       "current GPUs)"},
      {"alignment", "size", "256",
       "every block's size and start are multiples of this (power of two)"},
      {"release_on_reset", "bool", "false", "true: reset() unmaps down to keep_mapped bytes"},
      {"keep_mapped", "size", "0",
       "bytes that stay mapped through a reset when release_on_reset is true"},
      {"lifo_reclaim", "bool", "true", "freeing the topmost block pops the pointer back"}},
     strategy_traits().needs_vmm().supports_reset().runs_on(backing_kind::cuda_vmm)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<arena_allocator>(b, p);
    }};

}  // namespace
}  // namespace vramscope
