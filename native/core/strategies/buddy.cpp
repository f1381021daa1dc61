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
      throw invalid_argument(
          "buddy: parameter 'min_block' must be a power of two of at least 256 B, got " +
          format_bytes(min_block_));
    if (!is_power_of_two(pool_size_) || pool_size_ < min_block_)
      throw invalid_argument(
          "buddy: parameter 'pool_size' must be a power of two of at least min_block, got " +
          format_bytes(pool_size_));
    if (pool_size_ / min_block_ > (std::uint64_t{1} << 30))
      throw invalid_argument("buddy: parameter 'pool_size' is more than 2^30 min_blocks (" +
                             format_bytes(pool_size_) + " / " + format_bytes(min_block_) + ")");
    if (max_pools_ == 0) throw invalid_argument("buddy: parameter 'max_pools' must be at least 1");
    min_shift_ = log2_floor(min_block_);
    max_order_ = log2_floor(pool_size_) - min_shift_;
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
  // One order of one pool.
  struct level {
    std::uint64_t* free_bits;  // bit i: node (this order, i) is a free block; into pool::words
    std::uint64_t* live_bits;  // bit i: it is a live block
    // Indices that were free when pushed: a LIFO stack checked against the free bitmap on pop, so
    // that a merge clears one bit instead of searching the stack. Emptied whenever free_count drops
    // to 0, compacted when stale entries outnumber the free ones. An order's first free block
    // goes to `solo` instead (the common case in split and merge cascades: one free block an
    // order), and joins the stack when a second one comes: while the stack is empty and the count
    // is 1, the free block is solo.
    std::vector<std::uint32_t> candidates;
    std::uint32_t free_count = 0;
    std::uint32_t solo = 0;
  };
  // Invariants, per pool: levels[k].free_count counts the free bits of order k, each of them is
  // among levels[k].candidates (or is its solo), and bit k of non_empty is set iff that count is not 0; a node that
  // is neither free nor live (nor inside one) is split in two. No free block's buddy is free at the
  // same order. non_empty_orders_ is the OR of every pool's non_empty.
  struct pool {
    address_t base;
    std::vector<std::uint64_t> words;  // the free and live bitmaps of every order; never resized
    std::vector<level> levels;
    std::uint64_t non_empty = 0;
  };

  // Fast path: the smallest order at or above the request's with a free block, the one freed last
  // (LIFO, still warm), split down to the request's order. The cookie is the block's order.
  allocation do_allocate(std::size_t bytes, stream_t, std::uint32_t& cookie) override {
    if (VRAMSCOPE_LIKELY(bytes <= pool_size_)) {
      const unsigned order = order_for(bytes);
      const std::uint64_t available = non_empty_orders_ >> order;
      if (VRAMSCOPE_LIKELY(available != 0)) {
        const unsigned j = order + log2_floor(available & (~available + 1));  // lowest set bit
        pool& p = pool_with_free(j);
        std::size_t index = pop_free(p, j);
        if (VRAMSCOPE_UNLIKELY(j > order)) index = split_down(p, index, j, order);
        flip(p.levels[order].live_bits, index);
        cookie = order;
        return {address_of(p, order, index), block_size(order)};
      }
    }
    return allocate_slow(bytes, cookie);
  }

  // Merge with the buddy while it is free at the same order: a bit test per level. The orders left
  // without a free block are collected and marked once.
  void do_deallocate(address_t a, std::uint64_t, std::uint32_t order, stream_t) override {
    pool& p = pool_of(a);
    std::size_t index = static_cast<std::size_t>((a - p.base) >> (min_shift_ + order));
    flip(p.levels[order].live_bits, index);
    const unsigned freed_order = order;
    // Locals, so that the stores into the levels do not make the compiler reload them.
    const unsigned max_order = max_order_;
    level* const levels = p.levels.data();
    std::uint64_t order_bit = std::uint64_t{1} << order;
    std::uint64_t emptied = 0;
    while (order < max_order) {
      level& l = levels[order];
      const std::size_t buddy = index ^ 1;
      std::uint64_t& word = l.free_bits[buddy >> 6];
      const std::uint64_t bit = std::uint64_t{1} << (buddy & 63);
      if ((word & bit) == 0) break;
      word ^= bit;  // the buddy is taken into the merge
      if (--l.free_count == 0) {
        l.candidates.clear();  // whatever is left is stale
        emptied |= order_bit;
      }
      index >>= 1;
      ++order;
      order_bit <<= 1;
    }
    if (emptied != 0) mark_empty(p, emptied);
    give(p, order, index);
    // One event for the whole cascade: the block it ended in.
    if (order != freed_order)
      trace(trace_op::merge, address_of(p, order, index), block_size(order), 0, 0, order);
  }

  unsigned order_for(std::size_t bytes) const {
    if (bytes <= min_block_) return 0;
    return log2_floor(bytes - 1) + 1 - min_shift_;
  }
  std::uint64_t block_size(unsigned order) const { return min_block_ << order; }
  address_t address_of(const pool& p, unsigned order, std::size_t index) const {
    return p.base + (static_cast<address_t>(index) << (min_shift_ + order));
  }

  static bool test(const std::uint64_t* bits, std::size_t index) {
    return (bits[index >> 6] >> (index & 63)) & 1;
  }
  static void flip(std::uint64_t* bits, std::size_t index) {
    bits[index >> 6] ^= std::uint64_t{1} << (index & 63);
  }

  void give(pool& p, unsigned order, std::size_t index) {
    level& l = p.levels[order];
    VRAMSCOPE_ASSERT(!test(l.free_bits, index));
    flip(l.free_bits, index);
    if (l.free_count == 0) {
      VRAMSCOPE_ASSERT(l.candidates.empty());
      l.solo = static_cast<std::uint32_t>(index);
      l.free_count = 1;
      mark_non_empty(p, std::uint64_t{1} << order);
      return;
    }
    if (l.candidates.empty()) {
      l.candidates.push_back(l.solo);  // a second free block: the first joins the stack
    } else if (VRAMSCOPE_UNLIKELY(l.candidates.size() >= 2 * std::size_t{l.free_count} + 32)) {
      compact(l);
    }
    l.candidates.push_back(static_cast<std::uint32_t>(index));
    ++l.free_count;
  }
  void take(pool& p, unsigned order, std::size_t index) {
    level& l = p.levels[order];
    VRAMSCOPE_ASSERT(test(l.free_bits, index));
    flip(l.free_bits, index);
    if (--l.free_count == 0) {
      l.candidates.clear();  // whatever is left is stale
      mark_empty(p, std::uint64_t{1} << order);
    }
  }
  void mark_non_empty(pool& p, std::uint64_t orders) {
    p.non_empty |= orders;
    non_empty_orders_ |= orders;
  }
  void mark_empty(pool& p, std::uint64_t orders) {
    p.non_empty &= ~orders;
    if (VRAMSCOPE_LIKELY(pools_.size() == 1)) non_empty_orders_ &= ~orders;
    else recount_orders(orders);
  }
  VRAMSCOPE_NOINLINE void recount_orders(std::uint64_t orders) {
    std::uint64_t any = 0;
    for (auto& q : pools_) any |= q->non_empty & orders;
    non_empty_orders_ = (non_empty_orders_ & ~orders) | any;
  }
  std::size_t pop_free(pool& p, unsigned order) {
    auto& stack = p.levels[order].candidates;
    if (stack.empty()) {
      VRAMSCOPE_ASSERT(p.levels[order].free_count == 1);
      const std::size_t index = p.levels[order].solo;
      take(p, order, index);
      return index;
    }
    const std::uint64_t* bits = p.levels[order].free_bits;
    while (true) {
      VRAMSCOPE_ASSERT(!stack.empty());
      const std::size_t index = stack.back();
      stack.pop_back();
      if (test(bits, index)) {
        take(p, order, index);
        return index;
      }
    }
  }
  // Drops the stale entries. There are no duplicates: a block merged away (leaving a stale entry)
  // is free at its order again only after a split re-creates it, and a split only reaches orders
  // that have no free block, whose stacks were emptied when their count dropped to 0.
  VRAMSCOPE_NOINLINE static void compact(level& l) {
    const std::uint64_t* bits = l.free_bits;
    l.candidates.erase(std::remove_if(l.candidates.begin(), l.candidates.end(),
                                      [&](std::uint32_t i) { return !test(bits, i); }),
                       l.candidates.end());
    VRAMSCOPE_ASSERT(l.candidates.size() == l.free_count);
  }

  // Splits the free block (from, index) down to order `to`, freeing the upper halves; returns the
  // index of the lowest part at order `to`. Traced as one split of the block (aux = its order) with
  // the part kept; the upper halves it freed are the rest of it. Every order in [to, from) has no
  // free block in any pool (from is the lowest that has one), so each upper half is its order's
  // only free block, its solo: one mask update for all of them.
  std::size_t split_down(pool& p, std::size_t index, unsigned from, unsigned to) {
    trace(trace_op::split, address_of(p, from, index), block_size(to), 0, 0, from);
    level* const levels = p.levels.data();
    for (unsigned j = from; j > to; --j) {
      index <<= 1;
      level& l = levels[j - 1];
      VRAMSCOPE_ASSERT(l.free_count == 0 && l.candidates.empty() && !test(l.free_bits, index | 1));
      flip(l.free_bits, index | 1);
      l.solo = static_cast<std::uint32_t>(index | 1);
      l.free_count = 1;
    }
    mark_non_empty(p, ((std::uint64_t{1} << from) - 1) & ~((std::uint64_t{1} << to) - 1));
    return index;
  }

  pool& pool_with_free(unsigned order) {
    if (VRAMSCOPE_LIKELY(pools_.size() == 1)) return *pools_[0];
    for (auto& p : pools_)  // lowest address first
      if ((p->non_empty >> order) & 1) return *p;
    VRAMSCOPE_ASSERT(false);
    return *pools_[0];
  }
  pool& pool_of(address_t a) {
    if (VRAMSCOPE_LIKELY(pools_.size() == 1)) return *pools_[0];
    return *pools_[pool_index_of(a)];
  }
  std::size_t pool_index_of(address_t a) const {
    auto it =
        std::upper_bound(pools_.begin(), pools_.end(), a,
                         [](address_t x, const std::unique_ptr<pool>& p) { return x < p->base; });
    return static_cast<std::size_t>(it - pools_.begin()) - 1;
  }
  const pool* find_pool(address_t a) const {
    if (pools_.empty() || a < pools_.front()->base) return nullptr;
    const pool& p = *pools_[pool_index_of(a)];
    return a < p.base + pool_size_ ? &p : nullptr;
  }

  VRAMSCOPE_NOINLINE allocation allocate_slow(std::size_t bytes, std::uint32_t& cookie) {
    if (bytes > pool_size_)
      fail(bytes, largest_free(),
           ("request larger than pool_size " + format_bytes(pool_size_)).c_str());
    if (pools_.size() >= max_pools_)
      fail(bytes, largest_free(),
           ("no free block of " + format_bytes(block_size(order_for(bytes))) + " in " +
            std::to_string(pools_.size()) + " pool(s) of " + format_bytes(pool_size_) +
            " (max_pools " + std::to_string(max_pools_) + ")")
               .c_str());
    auto p = std::make_unique<pool>();
    p->words.assign(pool_words_, 0);
    p->levels.resize(max_order_ + 1);
    for (unsigned k = 0; k <= max_order_; ++k) {
      p->levels[k].free_bits = p->words.data() + free_offset_[k];
      p->levels[k].live_bits = p->words.data() + live_offset_[k];
    }
    try {
      p->base = obtain_region(pool_size_, static_cast<std::uint32_t>(pools_.size()));
    } catch (const out_of_memory& e) {
      fail(bytes, largest_free(),
           ("no device memory for another pool: " + std::string(e.what())).c_str());
    }
    pool& added = *p;
    auto at =
        std::upper_bound(pools_.begin(), pools_.end(), p->base,
                         [](address_t x, const std::unique_ptr<pool>& q) { return x < q->base; });
    pools_.insert(at, std::move(p));
    give(added, max_order_, 0);
    return do_allocate(bytes, 0, cookie);
  }

  std::uint64_t largest_free() const {
    return non_empty_orders_ == 0 ? 0 : block_size(log2_floor(non_empty_orders_));
  }

  void do_trim() override {
    // A pool whose root is free holds nothing: it goes back to the device.
    for (std::size_t i = pools_.size(); i-- > 0;) {
      pool& p = *pools_[i];
      if (!test(p.levels[max_order_].free_bits, 0)) continue;
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
    if (test(p.levels[order].free_bits, index)) {
      v.block({address_of(p, order, index), block_size(order), block_state::free, order});
    } else if (test(p.levels[order].live_bits, index)) {
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
      if (test(p->levels[order].free_bits,
               static_cast<std::size_t>((a - p->base) >> (min_shift_ + order))))
        return true;
    return false;
  }

  std::uint64_t min_block_;
  std::uint64_t pool_size_;
  std::uint64_t max_pools_;
  unsigned min_shift_;
  unsigned max_order_;
  std::vector<std::unique_ptr<pool>> pools_;  // sorted by base address
  std::uint64_t non_empty_orders_ = 0;        // bit k: some pool has a free block of order k
  std::vector<std::size_t>
      free_offset_;  // per order: where its free bitmap starts in a pool's words
  std::vector<std::size_t> live_offset_;  // per order: where its live bitmap starts
  std::size_t pool_words_ = 0;
};

const strategy_registration registration{
    {"buddy",
     "power-of-two split and coalesce",
     {{"min_block", "size", "256", "smallest block, a power of two of at least 256 B"},
      {"pool_size", "size", "1GiB", "bytes of each pool, one buddy tree (a power of two)"},
      {"max_pools", "uint", "1",
       "pools obtained on demand; trim() returns pools that are entirely free"}},
     strategy_traits().runs_on(backing_kind::cuda_malloc)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<buddy_allocator>(b, p);
    }};

}  // namespace
}  // namespace vramscope
