// block_pool: fixed-size blocks carved from a region, handed out from a free stack (LIFO, so the
// block freed last, still warm, is reused first). Requests larger than a block fail. When the pool
// is exhausted it may grow by another region of the same size, up to max_regions.
#include <algorithm>
#include <vector>

#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

constexpr std::uint64_t max_blocks_per_region = std::uint64_t{1} << 20;

class block_pool final : public allocator {
 public:
  block_pool(backing& b, const params& p)
      : allocator("block_pool", b),
        block_size_(p.get_size("block_size", 1 * MiB)),
        pool_size_(p.get_size("pool_size", 256 * MiB)),
        max_regions_(p.get_uint("max_regions", 1)) {
    if (block_size_ < min_alignment || block_size_ % min_alignment != 0)
      throw invalid_argument("block_pool: block_size must be a multiple of 256 B, got " +
                             format_bytes(block_size_));
    if (pool_size_ < block_size_)
      throw invalid_argument("block_pool: pool_size (" + format_bytes(pool_size_) +
                             ") is smaller than block_size (" + format_bytes(block_size_) + ")");
    if (max_regions_ == 0) throw invalid_argument("block_pool: max_regions must be at least 1");
    // Every block is state of its own and a block of every walk of the map: a region holds at
    // most 2^20 of them, whatever their bytes.
    if (pool_size_ / block_size_ > max_blocks_per_region)
      throw invalid_argument("block_pool: pool_size holds more than 2^20 blocks (" +
                             format_bytes(pool_size_) + " / block_size " +
                             format_bytes(block_size_) + ")");
    blocks_per_region_ = pool_size_ / block_size_;
  }

  ~block_pool() override {
    for (std::uint32_t r : region_order_)
      get_backing().free_region(regions_[r].address, region_bytes());
  }

 private:
  // Invariant: free_top_ + live blocks == region_order_.size() * blocks_per_region_, and
  // is_free_[i] is 1 exactly for the blocks on the free stack, free_*_[0, free_top_). Block i
  // belongs to region slot i / blocks_per_region_; a slot keeps its place while its region lives,
  // so a block's index (its cookie) never changes, and neither a free nor an allocation searches
  // or divides. The stack is two arrays of scalars, as large as the blocks: no capacity checks,
  // and no struct copied through the stack (its wide reload would stall on store forwarding).
  allocation do_allocate(std::size_t bytes, stream_t, std::uint32_t& cookie) override {
    if (VRAMSCOPE_LIKELY(bytes <= block_size_ && free_top_ != 0)) {
      const std::size_t top = --free_top_;
      const std::uint32_t index = free_index_[top];
      is_free_[index] = 0;
      cookie = index;
      return {free_address_[top], block_size_};
    }
    return allocate_slow(bytes, cookie);
  }

  void do_deallocate(address_t address, std::uint64_t, std::uint32_t index, stream_t) override {
    const std::size_t top = free_top_++;
    free_address_[top] = address;
    free_index_[top] = index;
    is_free_[index] = 1;
  }

  VRAMSCOPE_NOINLINE allocation allocate_slow(std::size_t bytes, std::uint32_t& cookie) {
    if (bytes > block_size_)
      fail(bytes, 0, ("request larger than block_size " + format_bytes(block_size_)).c_str());
    if (region_order_.size() >= max_regions_) fail(bytes, 0, "every block of the pool is in use");
    // The first unused slot, else a new one (block indices are 32-bit cookies).
    std::uint32_t slot = 0;
    while (slot < regions_.size() && regions_[slot].address != 0) ++slot;
    if (slot == regions_.size() &&
        (std::uint64_t{slot} + 1) * blocks_per_region_ > std::uint64_t{no_index})
      fail(bytes, 0, "more blocks than a 32-bit index can number");
    if (slot == regions_.size()) {
      is_free_.resize(is_free_.size() + blocks_per_region_, 0);
      free_address_.resize(is_free_.size());
      free_index_.resize(is_free_.size());
      regions_.push_back({0});
    }
    address_t base;
    try {
      base = obtain_region(region_bytes());
    } catch (...) {
      if (slot + 1 == regions_.size()) {  // leave no trace of the attempt
        regions_.pop_back();
        is_free_.resize(is_free_.size() - blocks_per_region_);
        free_address_.resize(is_free_.size());
        free_index_.resize(is_free_.size());
      }
      throw;
    }
    regions_[slot].address = base;
    region_order_.push_back(slot);
    const std::uint32_t first = first_index(slot);
    std::fill(is_free_.begin() + first, is_free_.begin() + first + blocks_per_region_, 1);
    // Lowest address on top of the stack.
    for (std::size_t i = blocks_per_region_; i-- > 0; ++free_top_) {
      free_address_[free_top_] = base + i * block_size_;
      free_index_[free_top_] = first + static_cast<std::uint32_t>(i);
    }
    return do_allocate(bytes, 0, cookie);
  }

  void do_walk(layout_visitor& v) const override {
    for (std::uint32_t r : region_order_) {
      const address_t base = regions_[r].address;
      v.region({base, region_bytes(), true, 0});
      const std::uint32_t first = first_index(r);
      for (std::size_t i = 0; i < blocks_per_region_; ++i)
        v.block({base + i * block_size_, block_size_,
                 is_free_[first + i] ? block_state::free : block_state::live, 0});
    }
  }

  bool do_was_freed(address_t a) const override {
    for (std::uint32_t r : region_order_) {
      const address_t base = regions_[r].address;
      if (a >= base && a < base + region_bytes())
        return (a - base) % block_size_ == 0 && is_free_[first_index(r) + (a - base) / block_size_];
    }
    return false;
  }

  void do_trim() override {
    // A region whose blocks are all free goes back to the device.
    for (std::size_t k = region_order_.size(); k-- > 0;) {
      const std::uint32_t r = region_order_[k];
      const std::uint32_t first = first_index(r);
      if (!std::all_of(is_free_.begin() + first, is_free_.begin() + first + blocks_per_region_,
                       [](std::uint8_t f) { return f != 0; }))
        continue;
      const std::uint32_t end = first + static_cast<std::uint32_t>(blocks_per_region_);
      std::size_t kept = 0;
      for (std::size_t i = 0; i < free_top_; ++i) {
        if (free_index_[i] >= first && free_index_[i] < end) continue;
        free_address_[kept] = free_address_[i];
        free_index_[kept] = free_index_[i];
        ++kept;
      }
      free_top_ = kept;
      std::fill(is_free_.begin() + first, is_free_.begin() + end, 0);
      return_region(regions_[r].address, region_bytes());
      regions_[r].address = 0;
      region_order_.erase(region_order_.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }

  static constexpr std::uint32_t no_index = ~std::uint32_t{0};
  struct region {
    address_t address;  // 0: the slot is unused
  };

  std::size_t region_bytes() const { return blocks_per_region_ * block_size_; }
  std::uint32_t first_index(std::uint32_t slot) const {
    return static_cast<std::uint32_t>(slot * blocks_per_region_);
  }

  std::size_t block_size_;
  std::size_t pool_size_;
  std::size_t max_regions_;
  std::size_t blocks_per_region_;
  std::vector<region> regions_;              // slots; a trimmed region leaves its slot unused
  std::vector<std::uint32_t> region_order_;  // slots in use, in the order they were obtained
  std::vector<std::uint8_t> is_free_;        // per block index
  std::vector<address_t> free_address_;      // the free stack, warmest on top
  std::vector<std::uint32_t> free_index_;
  std::size_t free_top_ = 0;
};

const strategy_registration registration{
    {"block_pool",
     "fixed-size blocks from one region, free stack",
     {{"block_size", "size", "1MiB", "size of every block; larger requests fail"},
      {"pool_size", "size", "256MiB", "bytes of each region, at most 2^20 blocks"},
      {"max_regions", "uint", "1", "regions the pool may grow to when exhausted"}},
     strategy_traits().runs_on(backing_kind::cuda_malloc)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<block_pool>(b, p);
    }};

}  // namespace
}  // namespace vramscope
