// buddy: a binary buddy allocator. Each pool (one region of pool_size, a power of two) is a tree of
// power-of-two blocks from pool_size down to min_block; a request takes the smallest order that fits,
// splitting larger free blocks in halves, and a freed block merges with its buddy while the buddy is
// free, so the pool returns to one free block when everything is freed.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "vramscope/address_map.hpp"
#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

class buddy_allocator final : public allocator {
 public:
  buddy_allocator(backing& b, const params& p) : allocator("buddy", b) {
    min_block_ = p.get_size("min_block", 256);
    pool_size_ = p.get_size("pool_size", 1 * GiB);
    max_pools_ = p.get_uint("max_pools", 1);
    if (!is_power_of_two(min_block_) || min_block_ < min_alignment)
      throw invalid_argument("buddy: parameter 'min_block' must be a power of two of at least 256 B, got " +
                             format_bytes(min_block_));
    if (!is_power_of_two(pool_size_) || pool_size_ < min_block_)
      throw invalid_argument("buddy: parameter 'pool_size' must be a power of two of at least min_block, got " +
                             format_bytes(pool_size_));
    if (pool_size_ / min_block_ > (std::uint64_t{1} << 32))
      throw invalid_argument("buddy: parameter 'pool_size' is more than 2^32 min_blocks (" +
                             format_bytes(pool_size_) + " / " + format_bytes(min_block_) + ")");
    if (max_pools_ == 0) throw invalid_argument("buddy: parameter 'max_pools' must be at least 1");
    min_shift_ = log2_floor(min_block_);
    max_order_ = log2_floor(pool_size_) - min_shift_;
    free_lists_.resize(max_order_ + 1);
  }

  ~buddy_allocator() override {
    for (auto& p : pools_) get_backing().free_region(p.base, pool_size_);
  }

 private:
  // Fast path: the smallest non-empty order at or above the request's, split down to it.
  allocation do_allocate(std::size_t bytes, stream_t) override {
    if (VRAMSCOPE_LIKELY(bytes <= pool_size_)) {
      const unsigned order = order_for(bytes);
      const std::uint64_t available = non_empty_orders_ >> order;
      if (VRAMSCOPE_LIKELY(available != 0)) {
        unsigned j = order + log2_floor(available & (~available + 1));  // lowest set bit
        address_t a = pop_free(j);
        if (VRAMSCOPE_UNLIKELY(j > order)) split_down(a, j, order);
        return {a, block_size(order)};
      }
    }
    return allocate_slow(bytes);
  }

  // Merge with the buddy while it is free at the same order.
  void do_deallocate(address_t a, std::uint64_t rounded, stream_t) override {
    pool& p = pool_of(a);
    unsigned order = log2_floor(rounded) - min_shift_;
    while (order < max_order_) {
      address_t buddy = p.base + ((a - p.base) ^ block_size(order));
      const std::uint64_t* entry = free_index_.find(buddy);
      if (entry == nullptr || order_of_entry(*entry) != order) break;
      remove_free(buddy, order, position_of_entry(*entry));
      a = std::min(a, buddy);
      ++order;
      set_split(p, a, order, false);
      trace(trace_op::merge, a, block_size(order), 0, 0, order);
    }
    push_free(a, order);
  }

  unsigned order_for(std::size_t bytes) const {
    if (bytes <= min_block_) return 0;
    return log2_floor(bytes - 1) + 1 - min_shift_;
  }
  std::uint64_t block_size(unsigned order) const { return min_block_ << order; }

  // The free index: for each free block its order (low 6 bits) and position in its order's list,
  // so that a buddy is found in O(1) and removed from the middle of its list in O(1).
  static unsigned order_of_entry(std::uint64_t e) { return static_cast<unsigned>(e & 63); }
  static std::size_t position_of_entry(std::uint64_t e) { return static_cast<std::size_t>(e >> 6); }

  void push_free(address_t a, unsigned order) {
    auto& list = free_lists_[order];
    free_index_.insert(a, (static_cast<std::uint64_t>(list.size()) << 6) | order);
    list.push_back(a);
    non_empty_orders_ |= std::uint64_t{1} << order;
  }
  address_t pop_free(unsigned order) {
    auto& list = free_lists_[order];
    address_t a = list.back();
    list.pop_back();
    free_index_.erase(a);
    if (list.empty()) non_empty_orders_ &= ~(std::uint64_t{1} << order);
    return a;
  }
  void remove_free(address_t a, unsigned order, std::size_t position) {
    auto& list = free_lists_[order];
    address_t last = list.back();
    list[position] = last;
    list.pop_back();
    if (last != a) free_index_.insert(last, (static_cast<std::uint64_t>(position) << 6) | order);
    free_index_.erase(a);
    if (list.empty()) non_empty_orders_ &= ~(std::uint64_t{1} << order);
  }

  // Splits the free block at `a` of order `from` down to `to`, freeing the upper halves.
  void split_down(address_t a, unsigned from, unsigned to) {
    pool& p = pool_of(a);
    for (unsigned j = from; j > to; --j) {
      set_split(p, a, j, true);
      push_free(a + block_size(j - 1), j - 1);
      trace(trace_op::split, a, block_size(j - 1), 0, 0, j - 1);
    }
  }

  struct pool {
    address_t base;
    // One bit per inner node (order >= 1), heap-ordered: set while the node is split in halves.
    // The walk needs it to tell a live block from a split one; free blocks are in free_index_.
    std::vector<std::uint64_t> split_bits;
  };

  std::size_t node_index(const pool& p, address_t a, unsigned order) const {
    unsigned depth = max_order_ - order;
    return ((std::size_t{1} << depth) - 1) + ((a - p.base) >> (min_shift_ + order));
  }
  void set_split(pool& p, address_t a, unsigned order, bool split) {
    std::size_t i = node_index(p, a, order);
    if (split) p.split_bits[i >> 6] |= std::uint64_t{1} << (i & 63);
    else p.split_bits[i >> 6] &= ~(std::uint64_t{1} << (i & 63));
  }
  bool is_split(const pool& p, address_t a, unsigned order) const {
    std::size_t i = node_index(p, a, order);
    return (p.split_bits[i >> 6] >> (i & 63)) & 1;
  }

  pool& pool_of(address_t a) {
    if (VRAMSCOPE_LIKELY(pools_.size() == 1)) return pools_[0];
    return pools_[pool_index_of(a)];
  }
  std::size_t pool_index_of(address_t a) const {
    auto it = std::upper_bound(pools_.begin(), pools_.end(), a,
                               [](address_t x, const pool& p) { return x < p.base; });
    return static_cast<std::size_t>(it - pools_.begin()) - 1;
  }
  const pool* find_pool(address_t a) const {
    if (pools_.empty() || a < pools_.front().base) return nullptr;
    const pool& p = pools_[pool_index_of(a)];
    return a < p.base + pool_size_ ? &p : nullptr;
  }

  VRAMSCOPE_NOINLINE allocation allocate_slow(std::size_t bytes) {
    if (bytes > pool_size_)
      fail(bytes, largest_free(), ("request larger than pool_size " + format_bytes(pool_size_)).c_str());
    if (pools_.size() >= max_pools_)
      fail(bytes, largest_free(),
           ("no free block of " + format_bytes(block_size(order_for(bytes))) + " in " +
            std::to_string(pools_.size()) + " pool(s) of " + format_bytes(pool_size_) + " (max_pools " +
            std::to_string(max_pools_) + ")")
               .c_str());
    address_t base;
    try {
      base = obtain_region(pool_size_, static_cast<std::uint32_t>(pools_.size()));
    } catch (const out_of_memory& e) {
      fail(bytes, largest_free(), ("no device memory for another pool: " + std::string(e.what())).c_str());
    }
    pool p{base, std::vector<std::uint64_t>(((std::size_t{1} << max_order_) + 63) / 64, 0)};
    auto at = std::upper_bound(pools_.begin(), pools_.end(), base,
                               [](address_t x, const pool& q) { return x < q.base; });
    pools_.insert(at, std::move(p));
    push_free(base, max_order_);
    return do_allocate(bytes, 0);
  }

  std::uint64_t largest_free() const {
    return non_empty_orders_ == 0 ? 0 : block_size(log2_floor(non_empty_orders_));
  }

  void do_trim() override {
    // A pool whose root is free holds nothing: it goes back to the device.
    for (std::size_t i = pools_.size(); i-- > 0;) {
      address_t base = pools_[i].base;
      const std::uint64_t* entry = free_index_.find(base);
      if (entry == nullptr || order_of_entry(*entry) != max_order_) continue;
      remove_free(base, max_order_, position_of_entry(*entry));
      pools_.erase(pools_.begin() + static_cast<std::ptrdiff_t>(i));
      return_region(base, pool_size_, static_cast<std::uint32_t>(i));
    }
  }

  void do_walk(layout_visitor& v) const override {
    for (std::size_t i = 0; i < pools_.size(); ++i) {
      v.region({pools_[i].base, pool_size_, true, static_cast<std::uint32_t>(i)});
      walk_node(v, pools_[i], pools_[i].base, max_order_);
    }
  }

  // A node is free (in the free index at its order), split (recurse), or else live.
  void walk_node(layout_visitor& v, const pool& p, address_t a, unsigned order) const {
    const std::uint64_t* entry = free_index_.find(a);
    if (entry != nullptr && order_of_entry(*entry) == order) {
      v.block({a, block_size(order), block_state::free, order});
    } else if (order > 0 && is_split(p, a, order)) {
      walk_node(v, p, a, order - 1);
      walk_node(v, p, a + block_size(order - 1), order - 1);
    } else {
      v.block({a, block_size(order), block_state::live, order});
    }
  }

  bool do_was_freed(address_t a) const override {
    // An address of ours inside a free block: the block it started was freed (and maybe merged).
    const pool* p = find_pool(a);
    if (p == nullptr || (a - p->base) % min_block_ != 0) return false;
    for (unsigned order = 0; order <= max_order_; ++order) {
      address_t start = p->base + align_down(a - p->base, block_size(order));
      const std::uint64_t* entry = free_index_.find(start);
      if (entry != nullptr && order_of_entry(*entry) == order) return true;
    }
    return false;
  }

  std::uint64_t min_block_;
  std::uint64_t pool_size_;
  std::uint64_t max_pools_;
  unsigned min_shift_;
  unsigned max_order_;
  std::vector<pool> pools_;                         // sorted by base address
  std::vector<std::vector<address_t>> free_lists_;  // per order, LIFO
  std::uint64_t non_empty_orders_ = 0;              // bit k set: free_lists_[k] is not empty
  address_map<std::uint64_t> free_index_;           // free block address -> position << 6 | order
};

const strategy_registration registration{
    {"buddy",
     "power-of-two split and coalesce",
     {{"min_block", "size", "256", "smallest block, a power of two of at least 256 B"},
      {"pool_size", "size", "1GiB", "bytes of each pool, one buddy tree (a power of two)"},
      {"max_pools", "uint", "1", "pools obtained on demand; trim() returns pools that are entirely free"}},
     false,
     false,
     false,
     backing_kind::cuda_malloc},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<buddy_allocator>(b, p);
    }};

}  // namespace
}  // namespace vramscope
