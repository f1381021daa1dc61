// buddy: a binary buddy allocator. Each pool (one region of pool_size, a power of two up to 2^53 B)
// is a tree of power-of-two blocks from pool_size down to min_block; a request takes the smallest
// order that fits, splitting larger free blocks in halves, and a freed block merges with its buddy
// while the buddy is free, so the pool returns to one free block when everything is freed. Nodes
// exist only where a split made them: one hash table holds the free and live blocks by (address,
// order), except each order's oldest free block, kept beside its stack, so memory and time follow
// the blocks and events, never pool_size / min_block.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "vramscope/address_map.hpp"
#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

// The largest pool: sizes are exact in a double up to 2^53, as everywhere in the traces.
constexpr std::uint64_t max_pool_size = std::uint64_t{1} << 53;

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
    if (pool_size_ > max_pool_size)
      throw invalid_argument("buddy: parameter 'pool_size' must be at most 8 PiB (2^53 B), got " +
                             format_bytes(pool_size_));
    if (max_pools_ == 0) throw invalid_argument("buddy: parameter 'max_pools' must be at least 1");
    min_shift_ = log2_floor(min_block_);
    max_order_ = log2_floor(pool_size_) - min_shift_;
  }

  ~buddy_allocator() override {
    for (auto& p : pools_) get_backing().free_region(p->base, pool_size_);
  }

 private:
  // A node's state in nodes_. A node that is in neither state (absent), and not its order's solo,
  // is split in two, or lies inside a larger free or live block.
  static constexpr std::uint8_t node_free = 1;
  static constexpr std::uint8_t node_live = 2;

  // One order of one pool.
  struct level {
    // Addresses that were free when pushed: a LIFO stack checked against nodes_ on pop, so that a
    // merge erases one entry instead of searching the stack. Emptied whenever free_count drops to
    // 0, compacted when stale entries outnumber the free ones. A free block that comes to an
    // order with none goes to `solo` instead, outside nodes_ (the common case in split and merge
    // cascades: one free block an order, so a cascade touches no table); it is the order's oldest
    // free block, popped after every block on the stack.
    std::vector<address_t> candidates;
    std::uint64_t free_count = 0;
    address_t solo = 0;
    bool has_solo = false;  // solo is a free block
  };
  // Invariants, per pool: levels[k].free_count counts the free blocks of order k: those free in
  // nodes_, each among levels[k].candidates, and the solo where has_solo; bit k of non_empty is set
  // iff that count is not 0. The free and live nodes tile the pool; no free block's buddy is free at the
  // same order. non_empty_orders_ is the OR of every pool's non_empty.
  struct pool {
    address_t base;
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
        const address_t a = pop_free(p, j);
        if (VRAMSCOPE_UNLIKELY(j > order)) split_down(p, a, j, order);
        nodes_.insert_new(key(a, order), node_live);
        cookie = order;
        return {a, block_size(order)};
      }
    }
    return allocate_slow(bytes, cookie);
  }

  // Merge with the buddy while it is free at the same order: a lookup per level. The orders left
  // without a free block are collected and marked once.
  void do_deallocate(address_t a, std::uint64_t, std::uint32_t order, stream_t) override {
    pool& p = pool_of(a);
    const bool was_live = nodes_.erase(key(a, order));
    VRAMSCOPE_ASSERT(was_live);
    (void)was_live;
    const unsigned freed_order = order;
    const unsigned max_order = max_order_;
    level* const levels = p.levels.data();
    std::uint64_t order_bit = std::uint64_t{1} << order;
    std::uint64_t emptied = 0;
    while (order < max_order) {
      level& l = levels[order];
      const address_t buddy = p.base + ((a - p.base) ^ block_size(order));
      if (l.has_solo && l.solo == buddy) {
        l.has_solo = false;  // the buddy is taken into the merge
      } else {
        if (l.free_count == 0) break;
        const std::size_t at = nodes_.locate(key(buddy, order));
        if (at == decltype(nodes_)::npos || nodes_.value_at(at) != node_free) break;
        nodes_.erase_at(at);  // the buddy is taken into the merge
      }
      if (--l.free_count == 0) {
        l.candidates.clear();  // whatever is left is stale
        emptied |= order_bit;
      }
      a = std::min(a, buddy);
      ++order;
      order_bit <<= 1;
    }
    if (emptied != 0) mark_empty(p, emptied);
    give(p, order, a);
    // One event for the whole cascade: the block it ended in.
    if (order != freed_order) trace(trace_op::merge, a, block_size(order), 0, 0, order);
  }

  unsigned order_for(std::size_t bytes) const {
    if (bytes <= min_block_) return 0;
    return log2_floor(bytes - 1) + 1 - min_shift_;
  }
  std::uint64_t block_size(unsigned order) const { return min_block_ << order; }
  // Addresses are multiples of min_block (at least 256), so the order fits in the low bits: a
  // node's key is unique, and the table's hash (made for multiples of 256) still spreads them.
  static std::uint64_t key(address_t a, unsigned order) { return a | order; }
  bool is_free_in_table(address_t a, unsigned order) const {
    const std::uint8_t* state = nodes_.find(key(a, order));
    return state != nullptr && *state == node_free;
  }
  bool is_free(const pool& p, address_t a, unsigned order) const {
    const level& l = p.levels[order];
    return (l.has_solo && l.solo == a) || is_free_in_table(a, order);
  }

  void give(pool& p, unsigned order, address_t a) {
    level& l = p.levels[order];
    VRAMSCOPE_ASSERT(nodes_.find(key(a, order)) == nullptr);
    if (l.free_count == 0) {
      VRAMSCOPE_ASSERT(l.candidates.empty() && !l.has_solo);
      l.solo = a;
      l.has_solo = true;
      l.free_count = 1;
      mark_non_empty(p, std::uint64_t{1} << order);
      return;
    }
    nodes_.insert_new(key(a, order), node_free);
    if (VRAMSCOPE_UNLIKELY(l.candidates.size() >= 2 * l.free_count + 32)) compact(l, order);
    l.candidates.push_back(a);
    ++l.free_count;
  }
  // Counts a free block of the order, already taken from nodes_ or its solo, out of its level.
  void taken(pool& p, unsigned order) {
    level& l = p.levels[order];
    if (--l.free_count == 0) {
      VRAMSCOPE_ASSERT(!l.has_solo);
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
  // Takes the order's most recently freed block out of nodes_ and its level.
  address_t pop_free(pool& p, unsigned order) {
    level& l = p.levels[order];
    while (!l.candidates.empty()) {
      const address_t a = l.candidates.back();
      l.candidates.pop_back();
      const std::size_t at = nodes_.locate(key(a, order));
      if (at != decltype(nodes_)::npos && nodes_.value_at(at) == node_free) {
        nodes_.erase_at(at);
        taken(p, order);
        return a;
      }
    }
    VRAMSCOPE_ASSERT(l.has_solo);
    l.has_solo = false;
    taken(p, order);
    return l.solo;
  }
  // Drops the stale entries. There are no duplicates: a block merged away (leaving a stale entry)
  // is free at its order again only after a split re-creates it, and a split only reaches orders
  // that have no free block, whose stacks were emptied when their count dropped to 0.
  VRAMSCOPE_NOINLINE void compact(level& l, unsigned order) {
    l.candidates.erase(std::remove_if(l.candidates.begin(), l.candidates.end(),
                                      [&](address_t a) { return !is_free_in_table(a, order); }),
                       l.candidates.end());
    VRAMSCOPE_ASSERT(l.candidates.size() + (l.has_solo ? 1 : 0) == l.free_count);
  }

  // Splits the free block (from, a), already taken, down to order `to`, freeing the upper halves;
  // the lowest part at order `to` keeps address a. Traced as one split of the block (aux = its
  // order) with the part kept; the upper halves it freed are the rest of it. Every order in
  // [to, from) has no free block in any pool (from is the lowest that has one), so each upper half
  // is its order's only free block, its solo (no table entry): one mask update for all of them.
  void split_down(pool& p, address_t a, unsigned from, unsigned to) {
    trace(trace_op::split, a, block_size(to), 0, 0, from);
    level* const levels = p.levels.data();
    for (unsigned j = from; j > to; --j) {
      level& l = levels[j - 1];
      const address_t upper = a + block_size(j - 1);
      VRAMSCOPE_ASSERT(l.free_count == 0 && l.candidates.empty() && !l.has_solo);
      l.solo = upper;
      l.has_solo = true;
      l.free_count = 1;
    }
    mark_non_empty(p, ((std::uint64_t{1} << from) - 1) & ~((std::uint64_t{1} << to) - 1));
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
    p->levels.resize(max_order_ + 1);
    try {
      p->base = obtain_region(pool_size_, static_cast<std::uint32_t>(pools_.size()));
    } catch (const out_of_memory& e) {
      fail(bytes, largest_free(),
           ("no device memory for another pool: " + std::string(e.what())).c_str());
    }
    // A key carries the order in the address's low bits: the base must leave them clear.
    VRAMSCOPE_ASSERT(p->base % min_alignment == 0);
    pool& added = *p;
    auto at =
        std::upper_bound(pools_.begin(), pools_.end(), p->base,
                         [](address_t x, const std::unique_ptr<pool>& q) { return x < q->base; });
    pools_.insert(at, std::move(p));
    give(added, max_order_, added.base);
    return do_allocate(bytes, 0, cookie);
  }

  std::uint64_t largest_free() const {
    return non_empty_orders_ == 0 ? 0 : block_size(log2_floor(non_empty_orders_));
  }

  void do_trim() override {
    // A pool whose root is free holds nothing: it goes back to the device.
    for (std::size_t i = pools_.size(); i-- > 0;) {
      pool& p = *pools_[i];
      if (!is_free(p, p.base, max_order_)) continue;
      level& root = p.levels[max_order_];
      if (root.has_solo && root.solo == p.base) root.has_solo = false;
      else nodes_.erase(key(p.base, max_order_));
      taken(p, max_order_);
      const address_t base = p.base;
      pools_.erase(pools_.begin() + static_cast<std::ptrdiff_t>(i));
      return_region(base, pool_size_, static_cast<std::uint32_t>(i));
    }
  }

  void do_walk(layout_visitor& v) const override {
    for (std::size_t i = 0; i < pools_.size(); ++i) {
      v.region({pools_[i]->base, pool_size_, true, static_cast<std::uint32_t>(i)});
      walk_node(v, *pools_[i], max_order_, pools_[i]->base);
    }
  }

  // A node is free, live, or else split in two (recurse): the walk visits the split tree only.
  void walk_node(layout_visitor& v, const pool& p, unsigned order, address_t a) const {
    const std::uint8_t* state = nodes_.find(key(a, order));
    const level& l = p.levels[order];
    if (state != nullptr) {
      v.block({a, block_size(order), *state == node_free ? block_state::free : block_state::live,
               order});
    } else if (l.has_solo && l.solo == a) {
      v.block({a, block_size(order), block_state::free, order});
    } else {
      VRAMSCOPE_ASSERT(order > 0);
      walk_node(v, p, order - 1, a);
      walk_node(v, p, order - 1, a + block_size(order - 1));
    }
  }

  bool do_was_freed(address_t a) const override {
    // An address of ours inside a free block: the block it started was freed (and maybe merged).
    const pool* p = find_pool(a);
    if (p == nullptr || (a - p->base) % min_block_ != 0) return false;
    for (unsigned order = 0; order <= max_order_; ++order)
      if (is_free(*p, p->base + ((a - p->base) & ~(block_size(order) - 1)), order)) return true;
    return false;
  }

  std::uint64_t min_block_;
  std::uint64_t pool_size_;
  std::uint64_t max_pools_;
  unsigned min_shift_;
  unsigned max_order_;
  std::vector<std::unique_ptr<pool>> pools_;  // sorted by base address
  std::uint64_t non_empty_orders_ = 0;        // bit k: some pool has a free block of order k
  address_map<std::uint8_t> nodes_;  // key(address, order) -> node_free or node_live; no solo
};

const strategy_registration registration{
    {"buddy",
     "power-of-two split and coalesce",
     {{"min_block", "size", "256", "smallest block, a power of two of at least 256 B"},
      {"pool_size", "size", "1GiB",
       "bytes of each pool, one buddy tree (a power of two, at most 2^53 B)"},
      {"max_pools", "uint", "1",
       "pools obtained on demand; trim() returns pools that are entirely free"}},
     strategy_traits().runs_on(backing_kind::cuda_malloc)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<buddy_allocator>(b, p);
    }};

}  // namespace
}  // namespace vramscope
