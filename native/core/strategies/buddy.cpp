// buddy: a binary buddy allocator. Each pool (one region of pool_size, a power of two) is a tree of
// power-of-two blocks from pool_size down to min_block; a request takes the smallest order that fits,
// splitting larger free blocks in halves, and a freed block merges with its buddy while the buddy is
// free, so the pool returns to one free block when everything is freed. Free blocks are bits in a
// per-order bitmap, so the buddy test and the removal of a merged buddy are one bit each.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

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
    if (pool_size_ / min_block_ > (std::uint64_t{1} << 30))
      throw invalid_argument("buddy: parameter 'pool_size' is more than 2^30 min_blocks (" +
                             format_bytes(pool_size_) + " / " + format_bytes(min_block_) + ")");
    if (max_pools_ == 0) throw invalid_argument("buddy: parameter 'max_pools' must be at least 1");
    min_shift_ = log2_floor(min_block_);
    max_order_ = log2_floor(pool_size_) - min_shift_;
    pools_with_free_.assign(max_order_ + 1, 0);
    // Each order's bitmaps: blocks of order k are indexed 0 .. 2^(max_order - k) - 1.
    std::size_t words = 0;
    for (unsigned k = 0; k <= max_order_; ++k) {
      free_offset_.push_back(words);
      words += ((std::size_t{1} << (max_order_ - k)) + 63) / 64;
    }
    for (unsigned k = 0; k <= max_order_; ++k) {
      live_offset_.push_back(words);
      words += ((std::size_t{1} << (max_order_ - k)) + 63) / 64;
    }
    pool_words_ = words;
  }

  ~buddy_allocator() override {
    for (auto& p : pools_) get_backing().free_region(p->base, pool_size_);
  }

 private:
  struct order_state {
    // Indices that were free when pushed: a LIFO stack checked against the free bitmap on pop, so
    // that a merge clears one bit instead of searching the stack. Emptied whenever free_count drops
    // to 0, compacted when stale entries outnumber the free ones.
    std::vector<std::uint32_t> candidates;
    std::uint32_t free_count = 0;
  };
  // Invariants, per pool: free bit (k, i) is set iff node (order k, index i) is a free block and
  // live bit (k, i) iff it is a live block; orders[k].free_count counts the free bits of order k and
  // each of them is among orders[k].candidates; a node that is neither free nor live (nor inside
  // one) is split in two. No free block's buddy is free at the same order.
  struct pool {
    address_t base;
    std::vector<std::uint64_t> words;  // free bitmaps at free_offset_[k], live ones at live_offset_[k]
    std::vector<order_state> orders;
  };

  // Fast path: the smallest order at or above the request's with a free block, the one freed last
  // (LIFO, still warm), split down to the request's order.
  allocation do_allocate(std::size_t bytes, stream_t) override {
    if (VRAMSCOPE_LIKELY(bytes <= pool_size_)) {
      const unsigned order = order_for(bytes);
      const std::uint64_t available = non_empty_orders_ >> order;
      if (VRAMSCOPE_LIKELY(available != 0)) {
        const unsigned j = order + log2_floor(available & (~available + 1));  // lowest set bit
        pool& p = pool_with_free(j);
        std::size_t index = pop_free(p, j);
        if (VRAMSCOPE_UNLIKELY(j > order)) index = split_down(p, index, j, order);
        flip(p, live_offset_[order], index);
        return {address_of(p, order, index), block_size(order)};
      }
    }
    return allocate_slow(bytes);
  }

  // Merge with the buddy while it is free at the same order: a bit test per level.
  void do_deallocate(address_t a, std::uint64_t rounded, std::uint32_t, stream_t) override {
    pool& p = pool_of(a);
    unsigned order = log2_floor(rounded) - min_shift_;
    std::size_t index = static_cast<std::size_t>((a - p.base) >> (min_shift_ + order));
    flip(p, live_offset_[order], index);
    const unsigned freed_order = order;
    while (order < max_order_ && test(p, free_offset_[order], index ^ 1)) {
      take(p, order, index ^ 1);
      index >>= 1;
      ++order;
    }
    give(p, order, index);
    // One event for the whole cascade: the block it ended in.
    if (order != freed_order) trace(trace_op::merge, address_of(p, order, index), block_size(order), 0, 0, order);
  }

  unsigned order_for(std::size_t bytes) const {
    if (bytes <= min_block_) return 0;
    return log2_floor(bytes - 1) + 1 - min_shift_;
  }
  std::uint64_t block_size(unsigned order) const { return min_block_ << order; }
  address_t address_of(const pool& p, unsigned order, std::size_t index) const {
    return p.base + (static_cast<address_t>(index) << (min_shift_ + order));
  }

  static bool test(const pool& p, std::size_t offset, std::size_t index) {
    return (p.words[offset + (index >> 6)] >> (index & 63)) & 1;
  }
  static void flip(pool& p, std::size_t offset, std::size_t index) {
    p.words[offset + (index >> 6)] ^= std::uint64_t{1} << (index & 63);
  }

  void give(pool& p, unsigned order, std::size_t index) {
    VRAMSCOPE_ASSERT(!test(p, free_offset_[order], index));
    flip(p, free_offset_[order], index);
    order_state& o = p.orders[order];
    if (VRAMSCOPE_UNLIKELY(o.candidates.size() >= 2 * std::size_t{o.free_count} + 32)) compact(p, order);
    o.candidates.push_back(static_cast<std::uint32_t>(index));
    if (o.free_count++ == 0 && pools_with_free_[order]++ == 0) non_empty_orders_ |= std::uint64_t{1} << order;
  }
  void take(pool& p, unsigned order, std::size_t index) {
    VRAMSCOPE_ASSERT(test(p, free_offset_[order], index));
    flip(p, free_offset_[order], index);
    order_state& o = p.orders[order];
    if (--o.free_count == 0) {
      o.candidates.clear();  // whatever is left is stale
      if (--pools_with_free_[order] == 0) non_empty_orders_ &= ~(std::uint64_t{1} << order);
    }
  }
  std::size_t pop_free(pool& p, unsigned order) {
    auto& stack = p.orders[order].candidates;
    while (true) {
      VRAMSCOPE_ASSERT(!stack.empty());
      const std::size_t index = stack.back();
      stack.pop_back();
      if (test(p, free_offset_[order], index)) {
        take(p, order, index);
        return index;
      }
    }
  }
  // Drops the stale entries. There are no duplicates: a block merged away (leaving a stale entry)
  // is free at its order again only after a split re-creates it, and a split only reaches orders
  // that have no free block, whose stacks were emptied when their count dropped to 0.
  VRAMSCOPE_NOINLINE void compact(pool& p, unsigned order) {
    auto& stack = p.orders[order].candidates;
    const std::size_t offset = free_offset_[order];
    stack.erase(std::remove_if(stack.begin(), stack.end(), [&](std::uint32_t i) { return !test(p, offset, i); }),
                stack.end());
    VRAMSCOPE_ASSERT(stack.size() == p.orders[order].free_count);
  }

  // Splits the free block (from, index) down to order `to`, freeing the upper halves; returns the
  // index of the lowest part at order `to`. Traced as one split of the block (aux = its order) with
  // the part kept; the upper halves it freed are the rest of it.
  std::size_t split_down(pool& p, std::size_t index, unsigned from, unsigned to) {
    trace(trace_op::split, address_of(p, from, index), block_size(to), 0, 0, from);
    for (unsigned j = from; j > to; --j) {
      index <<= 1;
      give(p, j - 1, index | 1);
    }
    return index;
  }

  pool& pool_with_free(unsigned order) {
    if (VRAMSCOPE_LIKELY(pools_.size() == 1)) return *pools_[0];
    for (auto& p : pools_)  // lowest address first
      if (p->orders[order].free_count != 0) return *p;
    VRAMSCOPE_ASSERT(false);
    return *pools_[0];
  }
  pool& pool_of(address_t a) {
    if (VRAMSCOPE_LIKELY(pools_.size() == 1)) return *pools_[0];
    return *pools_[pool_index_of(a)];
  }
  std::size_t pool_index_of(address_t a) const {
    auto it = std::upper_bound(pools_.begin(), pools_.end(), a,
                               [](address_t x, const std::unique_ptr<pool>& p) { return x < p->base; });
    return static_cast<std::size_t>(it - pools_.begin()) - 1;
  }
  const pool* find_pool(address_t a) const {
    if (pools_.empty() || a < pools_.front()->base) return nullptr;
    const pool& p = *pools_[pool_index_of(a)];
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
    auto p = std::make_unique<pool>();
    p->words.assign(pool_words_, 0);
    p->orders.resize(max_order_ + 1);
    try {
      p->base = obtain_region(pool_size_, static_cast<std::uint32_t>(pools_.size()));
    } catch (const out_of_memory& e) {
      fail(bytes, largest_free(), ("no device memory for another pool: " + std::string(e.what())).c_str());
    }
    pool& added = *p;
    auto at = std::upper_bound(pools_.begin(), pools_.end(), p->base,
                               [](address_t x, const std::unique_ptr<pool>& q) { return x < q->base; });
    pools_.insert(at, std::move(p));
    give(added, max_order_, 0);
    return do_allocate(bytes, 0);
  }

  std::uint64_t largest_free() const {
    return non_empty_orders_ == 0 ? 0 : block_size(log2_floor(non_empty_orders_));
  }

  void do_trim() override {
    // A pool whose root is free holds nothing: it goes back to the device.
    for (std::size_t i = pools_.size(); i-- > 0;) {
      pool& p = *pools_[i];
      if (!test(p, free_offset_[max_order_], 0)) continue;
      take(p, max_order_, 0);
      const address_t base = p.base;
      pools_.erase(pools_.begin() + static_cast<std::ptrdiff_t>(i));
      return_region(base, pool_size_, static_cast<std::uint32_t>(i));
    }
  }

  void do_walk(layout_visitor& v) const override {
    for (std::size_t i = 0; i < pools_.size(); ++i) {
      v.region({pools_[i]->base, pool_size_, true, static_cast<std::uint32_t>(i)});
      walk_node(v, *pools_[i], max_order_, 0);
    }
  }

  // A node is free, live, or else split in two (recurse).
  void walk_node(layout_visitor& v, const pool& p, unsigned order, std::size_t index) const {
    if (test(p, free_offset_[order], index)) {
      v.block({address_of(p, order, index), block_size(order), block_state::free, order});
    } else if (test(p, live_offset_[order], index)) {
      v.block({address_of(p, order, index), block_size(order), block_state::live, order});
    } else {
      VRAMSCOPE_ASSERT(order > 0);
      walk_node(v, p, order - 1, index << 1);
      walk_node(v, p, order - 1, (index << 1) | 1);
    }
  }

  bool do_was_freed(address_t a) const override {
    // An address of ours inside a free block: the block it started was freed (and maybe merged).
    const pool* p = find_pool(a);
    if (p == nullptr || (a - p->base) % min_block_ != 0) return false;
    for (unsigned order = 0; order <= max_order_; ++order)
      if (test(*p, free_offset_[order], static_cast<std::size_t>((a - p->base) >> (min_shift_ + order))))
        return true;
    return false;
  }

  std::uint64_t min_block_;
  std::uint64_t pool_size_;
  std::uint64_t max_pools_;
  unsigned min_shift_;
  unsigned max_order_;
  std::vector<std::unique_ptr<pool>> pools_;    // sorted by base address
  std::uint64_t non_empty_orders_ = 0;          // bit k: some pool has a free block of order k
  std::vector<std::uint32_t> pools_with_free_;  // per order: pools with a free block of that order
  std::vector<std::size_t> free_offset_;        // per order: where its free bitmap starts in a pool's words
  std::vector<std::size_t> live_offset_;        // per order: where its live bitmap starts
  std::size_t pool_words_ = 0;
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
