// block_pool: fixed-size blocks carved from a region, handed out from a free stack (LIFO, so the
// block freed last, still warm, is reused first). Requests larger than a block fail. When the pool
// is exhausted it may grow by another region of the same size, up to max_regions.
#include <vector>

#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

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
    blocks_per_region_ = pool_size_ / block_size_;
  }

  ~block_pool() override {
    for (auto& r : regions_) get_backing().free_region(r.address, region_bytes());
  }

 private:
  // Invariant: free_.size() + live blocks == regions_.size() * blocks_per_region_, and
  // is_free_[i] is true exactly for the blocks on the free stack.
  allocation do_allocate(std::size_t bytes, stream_t) override {
    if (VRAMSCOPE_LIKELY(bytes <= block_size_ && !free_.empty())) {
      address_t a = free_.back();
      free_.pop_back();
      set_free(a, false);
      return {a, block_size_};
    }
    return allocate_slow(bytes);
  }

  void do_deallocate(address_t address, std::uint64_t, std::uint32_t, stream_t) override {
    free_.push_back(address);
    set_free(address, true);
  }

  VRAMSCOPE_NOINLINE allocation allocate_slow(std::size_t bytes) {
    if (bytes > block_size_)
      fail(bytes, 0, ("request larger than block_size " + format_bytes(block_size_)).c_str());
    if (regions_.size() >= max_regions_)
      fail(bytes, 0, "every block of the pool is in use");
    address_t base = obtain_region(region_bytes());
    regions_.push_back({base, std::vector<bool>(blocks_per_region_, true)});
    // Lowest address on top of the stack.
    for (std::size_t i = blocks_per_region_; i-- > 0;) free_.push_back(base + i * block_size_);
    return do_allocate(bytes, 0);
  }

  void do_walk(layout_visitor& v) const override {
    for (auto& r : regions_) {
      v.region({r.address, region_bytes(), true, 0});
      for (std::size_t i = 0; i < blocks_per_region_; ++i)
        v.block({r.address + i * block_size_, block_size_,
                 r.is_free[i] ? block_state::free : block_state::live, 0});
    }
  }

  bool do_was_freed(address_t a) const override {
    const region* r = find_region(a);
    return r != nullptr && (a - r->address) % block_size_ == 0 &&
           r->is_free[(a - r->address) / block_size_];
  }

  void do_trim() override {
    // A region whose blocks are all free goes back to the device.
    for (std::size_t i = regions_.size(); i-- > 0;) {
      region& r = regions_[i];
      bool all_free = true;
      for (bool f : r.is_free) all_free = all_free && f;
      if (!all_free) continue;
      address_t lo = r.address, hi = r.address + region_bytes();
      std::vector<address_t> kept;
      for (address_t a : free_)
        if (a < lo || a >= hi) kept.push_back(a);
      free_.swap(kept);
      return_region(r.address, region_bytes());
      regions_.erase(regions_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  struct region {
    address_t address;
    std::vector<bool> is_free;
  };

  std::size_t region_bytes() const { return blocks_per_region_ * block_size_; }
  const region* find_region(address_t a) const {
    for (auto& r : regions_)
      if (a >= r.address && a < r.address + region_bytes()) return &r;
    return nullptr;
  }
  void set_free(address_t a, bool f) {
    // One region in the common case: a short scan, no map.
    for (auto& r : regions_)
      if (a >= r.address && a < r.address + region_bytes()) {
        r.is_free[(a - r.address) / block_size_] = f;
        return;
      }
  }

  std::size_t block_size_;
  std::size_t pool_size_;
  std::size_t max_regions_;
  std::size_t blocks_per_region_;
  std::vector<region> regions_;
  std::vector<address_t> free_;
};

const strategy_registration registration{
    {"block_pool",
     "fixed-size blocks from one region, free stack",
     {{"block_size", "size", "1MiB", "size of every block; larger requests fail"},
      {"pool_size", "size", "256MiB", "bytes of each region"},
      {"max_regions", "uint", "1", "regions the pool may grow to when exhausted"}},
     false,
     false,
     false,
     backing_kind::cuda_malloc},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<block_pool>(b, p);
    }};

}  // namespace
}  // namespace vramscope
