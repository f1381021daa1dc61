// The free blocks of one pool and one stream of the caching strategy, ordered as PyTorch's
// BlockPool set orders them: by size, then by address. An exact-size hit (the warm path) is a hash
// lookup and a pop; the best fit for other sizes walks an ordered map of sizes.
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

  // The lowest-address free block of exactly `size`, removed; no_block when there is none. This is
  // what the best fit picks whenever a block of exactly the requested size is cached.
  std::uint32_t take_exact(std::uint64_t size) noexcept {
    std::uint32_t* id = exact_.find(size);
    if (VRAMSCOPE_UNLIKELY(id == nullptr)) return no_block;
    auto& blocks = buckets_[*id].blocks;
    if (VRAMSCOPE_UNLIKELY(blocks.empty())) return no_block;
    std::uint32_t node = blocks.back().node;
    blocks.pop_back();
    --count_;
    bytes_ -= size;
    return node;
  }

  // Adds a free block. Returns false when its size has no bucket yet (the caller then takes the
  // slow insert), so the warm path never touches the ordered map.
  bool insert_existing_size(std::uint64_t size, address_t address, std::uint32_t node) {
    std::uint32_t* id = exact_.find(size);
    if (VRAMSCOPE_UNLIKELY(id == nullptr)) return false;
    push(buckets_[*id].blocks, address, node);
    ++count_;
    bytes_ += size;
    return true;
  }

  VRAMSCOPE_NOINLINE void insert(std::uint64_t size, address_t address, std::uint32_t node) {
    if (insert_existing_size(size, address, node)) return;
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
    push(buckets_[id].blocks, address, node);
    ++count_;
    bytes_ += size;
  }

  // Removes the block at `address` of `size`, which must be in the index.
  void erase(std::uint64_t size, address_t address) noexcept {
    std::uint32_t* id = exact_.find(size);
    VRAMSCOPE_ASSERT(id != nullptr);
    auto& blocks = buckets_[*id].blocks;
    // Descending by address: find the first entry whose address is <= `address`.
    std::size_t lo = 0, hi = blocks.size();
    while (lo < hi) {
      std::size_t mid = (lo + hi) / 2;
      if (blocks[mid].address > address) lo = mid + 1;
      else hi = mid;
    }
    VRAMSCOPE_ASSERT(lo < blocks.size() && blocks[lo].address == address);
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(lo));
    --count_;
    bytes_ -= size;
  }

  // The first block in (size, address) order whose size is at least `size`: what PyTorch's
  // pool.blocks.lower_bound(search_key) finds within one stream. Empty buckets met on the way are
  // dropped, so the walk costs are paid once per bucket.
  bool lower_bound(std::uint64_t size, entry& out) {
    auto it = by_size_.lower_bound(size);
    while (it != by_size_.end()) {
      bucket& b = buckets_[it->second];
      if (!b.blocks.empty()) {
        out = {b.size, b.blocks.back().address, b.blocks.back().node};
        return true;
      }
      it = drop_bucket(it);
    }
    return false;
  }

  // Every free block in ascending (size, address) order; for the slow paths (release, collection).
  void ascending(std::vector<entry>& out) const {
    out.clear();
    out.reserve(count_);
    for (auto& [size, id] : by_size_) {
      const auto& blocks = buckets_[id].blocks;
      for (std::size_t i = blocks.size(); i-- > 0;) out.push_back({size, blocks[i].address, blocks[i].node});
    }
  }

  std::uint64_t bytes() const noexcept { return bytes_; }
  std::uint64_t count() const noexcept { return count_; }

 private:
  struct located {
    address_t address;
    std::uint32_t node;
  };
  struct bucket {
    std::uint64_t size = 0;
    // Sorted by descending address, so that the lowest address, PyTorch's pick among equal sizes,
    // is popped from the back.
    std::vector<located> blocks;
  };

  static void push(std::vector<located>& blocks, address_t address, std::uint32_t node) {
    // Usually the new block is the lowest (or the only) one: append.
    if (blocks.empty() || blocks.back().address > address) {
      blocks.push_back({address, node});
      return;
    }
    std::size_t lo = 0, hi = blocks.size();
    while (lo < hi) {
      std::size_t mid = (lo + hi) / 2;
      if (blocks[mid].address > address) lo = mid + 1;
      else hi = mid;
    }
    blocks.insert(blocks.begin() + static_cast<std::ptrdiff_t>(lo), {address, node});
  }

  std::map<std::uint64_t, std::uint32_t>::iterator drop_bucket(
      std::map<std::uint64_t, std::uint32_t>::iterator it) {
    std::uint32_t id = it->second;
    exact_.erase(it->first);
    spare_buckets_.push_back(id);
    return by_size_.erase(it);
  }

  // Invariant: by_size_ and exact_ hold the same sizes, each naming one bucket of buckets_;
  // count_ and bytes_ sum the blocks of every bucket. A bucket may be empty until a walk drops it.
  std::map<std::uint64_t, std::uint32_t> by_size_;
  address_map<std::uint32_t> exact_;
  std::vector<bucket> buckets_;
  std::vector<std::uint32_t> spare_buckets_;
  std::uint64_t count_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace vramscope::caching_detail
