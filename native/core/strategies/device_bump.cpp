// device_bump, host side: one region, an offset advanced with an atomic fetch_add (the arithmetic a
// kernel's atomicAdd does), frees that only mark blocks unusable, and reset() to free everything.
#include "vramscope/device_bump.hpp"

#include <algorithm>
#include <string>

namespace vramscope {

namespace {
constexpr address_t freed_bit = 1;
constexpr address_t device_bit = 2;
constexpr address_t flag_bits = freed_bit | device_bit;
}  // namespace

device_bump::device_bump(backing& b, const device_bump_options& options)
    : allocator("device_bump", b), capacity_(options.capacity), alignment_(options.alignment) {
  if (!is_power_of_two(alignment_) || alignment_ < min_alignment)
    throw invalid_argument(
        "device_bump: parameter 'alignment' must be a power of two of at least 256 B, got " +
        format_bytes(alignment_));
  if (capacity_ < alignment_ || capacity_ % alignment_ != 0)
    throw invalid_argument(
        "device_bump: parameter 'capacity' must be a non-zero multiple of the alignment, got " +
        format_bytes(capacity_));
}

device_bump::~device_bump() {
  if (base_ != 0) get_backing().free_region(base_, capacity_);
}

// Fast path: round, fetch_add, check. A bump that overshoots is taken back, so a failed request
// leaves the offset as it was.
allocation device_bump::do_allocate(std::size_t bytes, stream_t, std::uint32_t& cookie) {
  const std::uint64_t n = device_bump_round(bytes, alignment_);
  if (VRAMSCOPE_LIKELY(base_ != 0 && n - 1 < capacity_)) {
    const std::uint64_t old = offset_.fetch_add(n, std::memory_order_acq_rel);
    if (VRAMSCOPE_LIKELY(old + n <= capacity_)) {
      blocks_.push_back(base_ + old);
      return {base_ + old, n};
    }
    offset_.fetch_sub(n, std::memory_order_acq_rel);
  }
  return allocate_slow(bytes, cookie);
}

void device_bump::do_deallocate(address_t address, std::uint64_t, std::uint32_t, stream_t) {
  mark_freed(address);
}

VRAMSCOPE_NOINLINE allocation device_bump::allocate_slow(std::size_t bytes, std::uint32_t& cookie) {
  if (bytes > capacity_ - (base_ != 0 ? offset() : 0) || device_bump_round(bytes, alignment_) == 0)
    fail(bytes, base_ != 0 ? capacity_ - offset() : capacity_,
         base_ == 0 ? ("request larger than capacity " + format_bytes(capacity_)).c_str()
                    : ("bump region exhausted (capacity " + format_bytes(capacity_) +
                       "); reset() frees it")
                          .c_str());
  if (base_ == 0) {
    try {
      ensure_region();
    } catch (const out_of_memory& e) {
      fail(bytes, 0, ("no device memory for the bump region: " + std::string(e.what())).c_str());
    }
    return do_allocate(bytes, 0, cookie);
  }
  // bytes fits, its rounding does not: the tail is smaller than one aligned block.
  fail(bytes, capacity_ - offset(), "bump region exhausted; reset() frees it");
}

void device_bump::mark_freed(address_t address) {
  // Usually the block allocated last; else a binary search (the blocks are in address order).
  if (VRAMSCOPE_LIKELY(blocks_.back() == address)) {
    blocks_.back() |= freed_bit;
    return;
  }
  auto it = std::lower_bound(blocks_.begin(), blocks_.end(), address,
                             [](address_t x, address_t key) { return (x & ~flag_bits) < key; });
  VRAMSCOPE_ASSERT(it != blocks_.end() && *it == address);
  *it |= freed_bit;
}

address_t device_bump::ensure_region() {
  if (base_ == 0) base_ = obtain_region(capacity_, 0);
  return base_;
}

void device_bump::set_offset_from_device(std::uint64_t device_offset) {
  const std::uint64_t host_offset = offset();
  const std::uint64_t adopted = std::min(device_offset, capacity_);
  if (adopted < host_offset)
    throw invalid_argument("device_bump: device offset " + std::to_string(device_offset) +
                           " is behind the host's " + std::to_string(host_offset) +
                           " (the counter only moves forward until reset())");
  if (adopted == host_offset) return;
  if (base_ == 0)
    throw invalid_argument(
        "device_bump: a device offset before the region exists (call view() first)");
  blocks_.push_back((base_ + host_offset) | device_bit);
  offset_.store(adopted, std::memory_order_release);
}

void device_bump::do_walk(layout_visitor& v) const {
  if (base_ == 0) return;
  v.region({base_, capacity_, true, 0});
  const address_t top = base_ + offset();
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    address_t start = blocks_[i] & ~flag_bits;
    address_t end = i + 1 < blocks_.size() ? blocks_[i + 1] & ~flag_bits : top;
    bool by_device = (blocks_[i] & device_bit) != 0;
    bool usable_live = (blocks_[i] & flag_bits) == 0;
    v.block({start, end - start, usable_live ? block_state::live : block_state::unusable,
             by_device ? 1u : 0u});
  }
  if (top < base_ + capacity_) v.block({top, base_ + capacity_ - top, block_state::free, 0});
}

bool device_bump::do_was_freed(address_t address) const {
  auto it = std::lower_bound(blocks_.begin(), blocks_.end(), address,
                             [](address_t x, address_t key) { return (x & ~flag_bits) < key; });
  return it != blocks_.end() && *it == (address | freed_bit);
}

void device_bump::do_trim() {
  // Nothing handed out: the region goes back until the next allocation.
  if (base_ != 0 && offset() == 0) {
    return_region(base_, capacity_, 0);
    base_ = 0;
  }
}

void device_bump::do_reset() {
  offset_.store(0, std::memory_order_release);
  blocks_.clear();
}

namespace {
const strategy_registration registration{
    {"device_bump",
     "atomicAdd bump allocation from inside kernels; host frees mark blocks unusable, reset() "
     "frees all",
     {{"capacity", "size", "1GiB", "bytes of the one region, obtained at the first allocation"},
      {"alignment", "size", "256", "every allocation is rounded to this (power of two)"}},
     strategy_traits().supports_reset().runs_on(backing_kind::cuda_malloc)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      device_bump_options o;
      o.capacity = p.get_size("capacity", o.capacity);
      o.alignment = p.get_size("alignment", o.alignment);
      return std::make_unique<device_bump>(b, o);
    }};
}  // namespace

}  // namespace vramscope
