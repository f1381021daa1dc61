// The free blocks of one pool and one stream of the caching strategy, ordered as PyTorch's
// BlockPool set orders them: by size, then by address. Blocks of one size sit in a bucket sorted by
// descending address, so PyTorch's pick among equal sizes is the last; an exact-size hit (the warm
// path) is a hash lookup and a pop, and the best fit for other sizes walks an ordered map of sizes.
// The block inserted last waits in a front slot outside the buckets until the next insert moves it
// into its bucket: a remainder split off a free block and merged back by the next free, and the
// block that merge rebuilds, taken again by the next allocation, come and go there without bucket,
// vector or map operations; while the buckets hold nothing, a best fit is the slot or nothing.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "vramscope/address_map.hpp"
#include "vramscope/types.hpp"

namespace vramscope::caching_detail {

constexpr std::uint32_t no_block = ~std::uint32_t{0};

class free_index {
 public:
  struct entry {
    std::uint64_t size;
    address_t address;
    std::uint32_t node;
  };

  // A bucket id names one size for as long as that size's bucket lives, so callers may keep the
  // id a block was last indexed under as a hint (`hint` arguments): a hint that has gone stale
  // only costs the hash lookup it would have saved. The index also remembers the bucket it used
  // last, which serves a run of requests of one size.
  static constexpr std::uint32_t no_bucket = ~std::uint32_t{0};

  // The lowest-address free block of exactly `size`, removed; no_block when there is none. This is
  // what the best fit picks whenever a block of exactly the requested size is cached.
  std::uint32_t take_exact(std::uint64_t size) noexcept {
    if (front_.size == size) {  // sizes are never 0: an empty slot never matches
      // Among equal sizes the lowest address is PyTorch's pick: a bucket may hold a lower one.
      if (count_ == 0 || !bucket_has_lower(size, front_.address)) {
        front_.size = 0;
        return front_.node;
      }
    }
    if (count_ == 0) return no_block;
    const std::uint32_t id = bucket_of(size, recent_);
    if (VRAMSCOPE_UNLIKELY(id == no_bucket)) return no_block;
    auto& blocks = buckets_[id].blocks;
    if (VRAMSCOPE_UNLIKELY(blocks.empty())) return no_block;
    std::uint32_t node = blocks.back().node;
    pop_lowest(blocks, size);
    return node;
  }

  // Adds a free block, into the front slot (the slot's previous block moves into its bucket);
  // returns the hint to keep for the block, which only a block's bucket can change.
  std::uint32_t insert(std::uint64_t size, address_t address, std::uint32_t node,
                       std::uint32_t hint = no_bucket) {
    if (front_.size != 0) insert_in_bucket(front_.size, front_.address, front_.node, front_.hint);
    front_ = {size, address, node, hint};
    return hint;
  }

  // Into the block's bucket; returns the bucket (a hint for later calls). The warm case, a size
  // that has a bucket, never touches the ordered map.
  std::uint32_t insert_in_bucket(std::uint64_t size, address_t address, std::uint32_t node,
                                 std::uint32_t hint) {
    const std::uint32_t id = bucket_of(size, hint);
    if (VRAMSCOPE_UNLIKELY(id == no_bucket)) return insert_new_size(size, address, node);
    auto& blocks = buckets_[id].blocks;
    if (blocks.empty()) --empty_buckets_;
    push(blocks, address, node);
    ++count_;
    bytes_ += size;
    return id;
  }

  VRAMSCOPE_NOINLINE std::uint32_t insert_new_size(std::uint64_t size, address_t address,
                                                   std::uint32_t node) {
    if (empty_buckets_ > 32 && empty_buckets_ * 2 > by_size_.size()) drop_empty_buckets();
    std::uint32_t id;
    if (!spare_buckets_.empty()) {
      id = spare_buckets_.back();
      spare_buckets_.pop_back();
    } else {
      id = static_cast<std::uint32_t>(buckets_.size());
      buckets_.emplace_back();
    }
    buckets_[id].size = size;
    by_size_.emplace(size, id);
    exact_.insert(size, id);
    absent_size_ = 0;
    push(buckets_[id].blocks, address, node);
    ++count_;
    bytes_ += size;
    recent_ = id;
    return id;
  }

  // Removes the block at `address` of `size`, which must be in the index.
  void erase(std::uint64_t size, address_t address, std::uint32_t hint = no_bucket) noexcept {
    if (front_.address == address && front_.size == size) {
      front_.size = 0;
      return;
    }
    const std::uint32_t id = bucket_of(size, hint);
    VRAMSCOPE_ASSERT(id != no_bucket);
    auto& blocks = buckets_[id].blocks;
    // Descending by address: find the first entry whose address is <= `address`.
    std::size_t lo = 0, hi = blocks.size();
    while (lo < hi) {
      std::size_t mid = (lo + hi) / 2;
      if (blocks[mid].address > address) lo = mid + 1;
      else hi = mid;
    }
    VRAMSCOPE_ASSERT(lo < blocks.size() && blocks[lo].address == address);
    if (lo + 1 == blocks.size()) {
      pop_lowest(blocks, size);
      return;
    }
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(lo));
    --count_;
    bytes_ -= size;
  }

  // The first block in (size, address) order whose size is at least `size`: what PyTorch's
  // pool.blocks.lower_bound(search_key) finds within one stream. Left in the index: take() it.
  struct found {
    entry block;
    std::uint32_t bucket;
  };
  bool lower_bound(std::uint64_t size, found& out) const {
    const bool in_buckets = count_ != 0 && bucket_lower_bound(size, out);
    if (front_.size < size) return in_buckets;  // an empty slot (size 0) too
    if (in_buckets && (out.block.size < front_.size ||
                       (out.block.size == front_.size && out.block.address < front_.address)))
      return true;
    out = {{front_.size, front_.address, front_.node}, front_bucket};
    return true;
  }
  void take(const found& f) noexcept {
    if (f.bucket == front_bucket) {
      front_.size = 0;
      return;
    }
    pop_lowest(buckets_[f.bucket].blocks, f.block.size);
  }

  // The block right after `e` (a block of the index) in (size, address) order: what advancing
  // PyTorch's set iterator gives. Left in the index: take_found() it.
  bool next_after(const entry& e, found& out) const {
    bool have = false;
    auto same = by_size_.find(e.size);
    if (same != by_size_.end()) {
      const auto& blocks = buckets_[same->second].blocks;  // descending addresses
      std::size_t lo = 0, hi = blocks.size();
      while (lo < hi) {
        std::size_t mid = (lo + hi) / 2;
        if (blocks[mid].address > e.address) lo = mid + 1;
        else hi = mid;
      }
      // blocks[lo - 1] is the lowest address above e's.
      if (lo > 0) {
        out = {{e.size, blocks[lo - 1].address, blocks[lo - 1].node}, same->second};
        have = true;
      }
    }
    if (!have)
      for (auto it = by_size_.upper_bound(e.size); it != by_size_.end(); ++it) {
        const bucket& b = buckets_[it->second];
        if (!b.blocks.empty()) {
          out = {{b.size, b.blocks.back().address, b.blocks.back().node}, it->second};
          have = true;
          break;
        }
      }
    const bool front_after =
        front_.size != 0 &&
        (front_.size > e.size || (front_.size == e.size && front_.address > e.address));
    if (front_after && (!have || front_.size < out.block.size ||
                        (front_.size == out.block.size && front_.address < out.block.address))) {
      out = {{front_.size, front_.address, front_.node}, front_bucket};
      have = true;
    }
    return have;
  }
  // Removes a block lower_bound() or next_after() found (take() only takes the first of a size).
  void take_found(const found& f) noexcept {
    erase(f.block.size, f.block.address, f.bucket == front_bucket ? no_bucket : f.bucket);
  }

  // Every free block in ascending (size, address) order; for the slow paths (release, collection).
  void ascending(std::vector<entry>& out) const {
    out.clear();
    out.reserve(count());
    for (auto& [size, id] : by_size_) {
      const auto& blocks = buckets_[id].blocks;
      for (std::size_t i = blocks.size(); i-- > 0;)
        out.push_back({size, blocks[i].address, blocks[i].node});
    }
    if (front_.size != 0) {
      auto at = out.begin();
      while (at != out.end() &&
             (at->size < front_.size || (at->size == front_.size && at->address < front_.address)))
        ++at;
      out.insert(at, {front_.size, front_.address, front_.node});
    }
  }

  std::uint64_t bytes() const noexcept { return bytes_ + front_.size; }
  std::uint64_t count() const noexcept { return count_ + (front_.size != 0 ? 1 : 0); }

 private:
  struct located {
    // Built in place by emplace: a braced temporary would be assembled on the stack and reloaded
    // with one wide load that stalls on store forwarding (on the warm free path).
    located(address_t a, std::uint32_t n) : address(a), node(n) {}
    address_t address;
    std::uint32_t node;
  };
  struct bucket {
    std::uint64_t size = 0;
    // Sorted by descending address, so that the lowest address, PyTorch's pick among equal sizes,
    // is popped from the back.
    std::vector<located> blocks;
  };

  static constexpr std::uint32_t front_bucket = no_bucket - 1;  // found::bucket of the slot

  bool bucket_lower_bound(std::uint64_t size, found& out) const {
    for (auto it = by_size_.lower_bound(size); it != by_size_.end(); ++it) {
      const bucket& b = buckets_[it->second];
      if (!b.blocks.empty()) {
        out = {{b.size, b.blocks.back().address, b.blocks.back().node}, it->second};
        return true;
      }
    }
    return false;
  }

  VRAMSCOPE_NOINLINE bool bucket_has_lower(std::uint64_t size, address_t address) noexcept {
    const std::uint32_t id = bucket_of(size, recent_);
    return id != no_bucket && !buckets_[id].blocks.empty() &&
           buckets_[id].blocks.back().address < address;
  }

  static void push(std::vector<located>& blocks, address_t address, std::uint32_t node) {
    // Usually the new block is the lowest (or the only) one: append.
    if (blocks.empty() || blocks.back().address > address) {
      blocks.emplace_back(address, node);
      return;
    }
    std::size_t lo = 0, hi = blocks.size();
    while (lo < hi) {
      std::size_t mid = (lo + hi) / 2;
      if (blocks[mid].address > address) lo = mid + 1;
      else hi = mid;
    }
    blocks.emplace(blocks.begin() + static_cast<std::ptrdiff_t>(lo), address, node);
  }

  std::uint32_t bucket_of(std::uint64_t size, std::uint32_t hint) noexcept {
    if (VRAMSCOPE_LIKELY(hint < buckets_.size() && buckets_[hint].size == size)) return hint;
    if (recent_ < buckets_.size() && buckets_[recent_].size == size) return recent_;
    if (size == absent_size_) return no_bucket;
    const std::uint32_t* id = exact_.find(size);
    if (id == nullptr) {
      absent_size_ = size;
      return no_bucket;
    }
    recent_ = *id;
    return *id;
  }

  void pop_lowest(std::vector<located>& blocks, std::uint64_t size) noexcept {
    blocks.pop_back();
    if (blocks.empty()) ++empty_buckets_;
    --count_;
    bytes_ -= size;
  }

  // Empty buckets stay, so that a size that comes and goes (a block split and merged again on every
  // allocation) costs no map node each time; once they are the majority they are dropped together.
  VRAMSCOPE_NOINLINE void drop_empty_buckets() {
    for (auto it = by_size_.begin(); it != by_size_.end();) {
      if (!buckets_[it->second].blocks.empty()) {
        ++it;
        continue;
      }
      exact_.erase(it->first);
      buckets_[it->second].size = 0;  // no size: hints naming it go stale
      spare_buckets_.push_back(it->second);
      it = by_size_.erase(it);
    }
    empty_buckets_ = 0;
  }

  // Invariant: by_size_ and exact_ hold the same sizes, each naming one bucket of buckets_ whose
  // size is that size (unused buckets have size 0, which no block has);
  // count_ and bytes_ sum the blocks of every bucket (the front slot's not included);
  // empty_buckets_ counts the empty ones. The front slot's block is in no bucket.
  struct front_entry {
    std::uint64_t size;  // 0: the slot is empty
    address_t address;
    std::uint32_t node;
    std::uint32_t hint;  // the bucket hint it came with, for its move into a bucket
  };
  front_entry front_{0, 0, no_block, no_bucket};
  std::map<std::uint64_t, std::uint32_t> by_size_;
  // Small at first: a caching allocator keeps an index per pool and stream, and a trace may have
  // many streams of a few sizes each.
  address_map<std::uint32_t> exact_{8};
  std::vector<bucket> buckets_;
  std::vector<std::uint32_t> spare_buckets_;
  std::uint64_t count_ = 0;
  std::uint64_t bytes_ = 0;
  std::size_t empty_buckets_ = 0;
  std::uint32_t recent_ = no_bucket;  // the bucket used last (a hint)
  // A size known to have no bucket (0: none): a request that always splits a larger block looks
  // for its exact size first on every allocation, and would miss in exact_ each time. Only
  // insert_new_size adds sizes, and it clears this.
  std::uint64_t absent_size_ = 0;
};

}  // namespace vramscope::caching_detail
