// The simulated backing: a fake, deterministic device. Addresses come from a first-fit address
// space that reuses freed ranges the way a driver does; nothing is ever dereferenced. Physical
// memory (regions, mapped granules, async pool chunks) is counted against a cap.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>
#include <unordered_map>
#include <vector>

#include "vramscope/backing.hpp"

namespace vramscope {

// Ranges by address in a treap whose every node also holds the largest range of its subtree, so
// that the lowest range a request fits in is found in O(log n): subtrees whose largest range is
// too small are skipped whole. Nodes live in one vector and point to each other by index.
class fit_tree {
 public:
  void insert(address_t address, std::size_t bytes);
  void erase(address_t address);  // the range must be there
  // The range at `address` (it must be there) becomes [to, to + bytes): in place, so no range
  // may lie between `address` and `to` (a range shrunk from either end, or grown into free space).
  void change(address_t address, address_t to, std::size_t bytes);

  // The lowest range starting at or above `from`, of at least `bytes`, for which fits(address,
  // size) holds: its address in `found`, false when there is none.
  template <class Fits>
  bool lowest(address_t from, std::size_t bytes, const Fits& fits, address_t& found) const {
    const std::int32_t t = lowest_in(root_, from, bytes, fits);
    if (t < 0) return false;
    found = nodes_[static_cast<std::size_t>(t)].address;
    return true;
  }

 private:
  struct node {
    address_t address;
    std::size_t bytes;
    std::size_t largest;  // the largest range in this subtree, this one included
    std::uint32_t priority;
    std::int32_t left, right;
  };
  node& at(std::int32_t t) noexcept { return nodes_[static_cast<std::size_t>(t)]; }
  const node& at(std::int32_t t) const noexcept { return nodes_[static_cast<std::size_t>(t)]; }
  void pull(std::int32_t t) noexcept;
  // Walks from the root to the node at `address`, noting each node passed in path_; returns the
  // node, or -1 when there is none.
  std::int32_t descend(address_t address);
  void pull_path() noexcept;  // pull every node on path_, bottom up
  // The link to a node at `address` below `parent` (-1: the root).
  std::int32_t& link(std::int32_t parent, address_t address) noexcept;
  void split(std::int32_t t, address_t address, std::int32_t& below, std::int32_t& rest);
  std::int32_t merge(std::int32_t low, std::int32_t high);

  template <class Fits>
  std::int32_t lowest_in(std::int32_t t, address_t from, std::size_t bytes,
                         const Fits& fits) const {
    while (t >= 0 && at(t).largest >= bytes) {
      const node& n = at(t);
      if (n.address < from) {  // this one and its left subtree lie below `from`
        t = n.right;
        continue;
      }
      const std::int32_t left = lowest_in(n.left, from, bytes, fits);
      if (left >= 0) return left;
      if (n.bytes >= bytes && fits(n.address, n.bytes)) return t;
      t = n.right;
    }
    return -1;
  }

  std::vector<node> nodes_;
  std::vector<std::int32_t> unused_;  // indices of erased nodes, taken again first
  std::int32_t root_ = -1;
  std::uint32_t seed_ = 2463534242u;  // xorshift: the same shape on every run
  std::vector<std::int32_t> path_;
};

// Free ranges (address -> bytes), also kept in a fit_tree: first fit, the lowest range that can
// take a request, is one descent of the tree instead of a walk over the ranges too small for it.
class free_ranges {
 public:
  using iterator = std::map<address_t, std::size_t>::iterator;
  // By address: read them here, change them through add() and erase().
  const std::map<address_t, std::size_t>& by_address() const noexcept { return ranges_; }
  iterator begin() noexcept { return ranges_.begin(); }
  iterator end() noexcept { return ranges_.end(); }
  iterator find(address_t address) { return ranges_.find(address); }
  iterator lower_bound(address_t address) { return ranges_.lower_bound(address); }
  iterator upper_bound(address_t address) { return ranges_.upper_bound(address); }
  std::size_t size() const noexcept { return ranges_.size(); }

  void add(address_t address, std::size_t bytes) {
    ranges_.emplace(address, bytes);
    by_fit_.insert(address, bytes);
  }
  void erase(iterator it) {
    by_fit_.erase(it->first);
    ranges_.erase(it);
  }

  // Takes [start, start + bytes) out of the free range `it` holds it in, keeping what is left on
  // either side. What is left keeps its place among the ranges: changed in place, not re-added.
  void carve(iterator it, address_t start, std::size_t bytes) {
    const address_t range_start = it->first, range_end = it->first + it->second;
    const address_t end = start + bytes;
    if (start > range_start) {
      it->second = start - range_start;
      by_fit_.change(range_start, range_start, it->second);
      if (end < range_end) add(end, range_end - end);
    } else if (end < range_end) {
      move(it, end, range_end - end);
    } else {
      erase(it);
    }
  }

  // Frees [address, address + bytes), joined with a free neighbour that touches it and lies
  // within [low, high) (an async pool joins free space inside one chunk only).
  void give(address_t address, std::size_t bytes, address_t low = 0,
            address_t high = ~address_t{0}) {
    auto next = ranges_.lower_bound(address);
    const bool joins_next =
        next != ranges_.end() && next->first < high && address + bytes == next->first;
    if (next != ranges_.begin()) {
      auto prev = std::prev(next);
      if (prev->first >= low && prev->first + prev->second == address) {
        prev->second += bytes;
        if (joins_next) {
          prev->second += next->second;
          erase(next);
        }
        by_fit_.change(prev->first, prev->first, prev->second);
        return;
      }
    }
    if (joins_next) move(next, address, bytes + next->second);
    else add(address, bytes);
  }

  // The lowest range starting at or above `from`, among those of at least `bytes`, for which
  // fits(address, size) holds; end() when none does.
  template <class Fits>
  iterator lowest_fitting(address_t from, std::size_t bytes, const Fits& fits) {
    address_t found = 0;
    return by_fit_.lowest(from, bytes, fits, found) ? ranges_.find(found) : ranges_.end();
  }

 private:
  // The range `it` becomes [to, to + bytes), keeping its place (no range lies between).
  void move(iterator it, address_t to, std::size_t bytes) {
    const address_t from = it->first;
    auto hint = std::next(it);
    auto node = ranges_.extract(it);
    node.key() = to;
    node.mapped() = bytes;
    ranges_.insert(hint, std::move(node));
    by_fit_.change(from, to, bytes);
  }

  std::map<address_t, std::size_t> ranges_;
  fit_tree by_fit_;
};

class simulated_backing final : public backing {
 public:
  explicit simulated_backing(const simulated_options& options);

  backing_kind kind() const noexcept override { return backing_kind::simulated; }
  bool is_device_memory() const noexcept override { return false; }
  bool has_vmm() const noexcept override { return true; }
  bool has_async() const noexcept override { return true; }

  address_t allocate_region(std::size_t bytes) override;
  void free_region(address_t address, std::size_t bytes) override;

  std::size_t granularity() const noexcept override { return options_.granularity; }
  address_t reserve_address_space(std::size_t bytes, std::size_t alignment) override;
  void release_address_space(address_t address, std::size_t bytes) override;
  void map(address_t address, std::size_t bytes) override;
  void unmap(address_t address, std::size_t bytes) override;

  address_t allocate_async(std::size_t bytes, stream_t stream) override;
  void free_async(address_t address, std::size_t bytes, stream_t stream) override;
  void set_release_threshold(std::uint64_t bytes) override;
  void trim_async_pool(std::size_t min_bytes_to_keep) override;
  async_pool_stats async_stats() const override;

  event_t record_event(stream_t stream) override;
  bool event_complete(event_t event) override;
  void wait_event(event_t event) override;
  void release_event(event_t event) override;
  void synchronize() override;

  std::size_t capacity() const noexcept override { return options_.capacity; }
  std::size_t available() const noexcept override { return options_.capacity - physical_used_; }

  // Logical clock in nanoseconds; replay sets it from the trace's timestamps.
  void set_time(std::uint64_t ns) noexcept { now_ns_ = ns > now_ns_ ? ns : now_ns_; }
  std::uint64_t time() const noexcept { return now_ns_; }
  std::size_t physical_used() const noexcept { return physical_used_; }
  std::size_t mapped_bytes() const noexcept { return mapped_bytes_; }

  // The model of the stream-ordered pool can be walked where a real cudaMemPool cannot: its chunks
  // (in_use true) and the blocks that tile them, live (in_use) or free, in address order.
  struct async_chunk {
    address_t address;
    std::size_t bytes;
    bool in_use;
  };
  std::vector<async_chunk> async_regions() const;
  std::vector<async_chunk> async_blocks() const;

 private:
  address_t take_address_space(std::size_t bytes, std::size_t alignment);
  bool take_address_space_at(address_t address, std::size_t bytes);
  void give_address_space(address_t address, std::size_t bytes);
  void charge(std::size_t bytes, const char* what);
  void async_sync_release();
  void async_release_free_chunks(std::size_t keep);

  simulated_options options_;
  address_t first_fit_start_;  // base_address on a 1 GiB boundary: where unplaced memory goes
  std::uint64_t now_ns_ = 0;
  std::size_t next_placement_ = 0;  // index into options_.region_placement
  std::size_t physical_used_ = 0;
  std::size_t mapped_bytes_ = 0;
  // Free address ranges (address -> size), kept coalesced: from 64 KiB (placements only) to 2^53
  // (at least 1 PiB past first_fit_start_).
  free_ranges free_space_;
  // Reserved VMM ranges and what of each is mapped: maximal mapped ranges (address -> bytes,
  // coalesced), so that a check or a map costs O(log ranges) whatever the sizes.
  struct va_range {
    std::size_t bytes;
    std::map<address_t, std::size_t> mapped;
  };
  std::map<address_t, va_range> reserved_;
  std::unordered_map<address_t, std::size_t> regions_;  // live regions: address -> bytes
  // Events: id -> completion time.
  std::unordered_map<event_t, std::uint64_t> events_;
  event_t next_event_ = 1;
  // Async pool model: chunks obtained (address -> bytes), blocks handed out (address -> bytes,
  // 512 B rounded) and free ranges inside chunks (address -> bytes, coalesced within a chunk).
  std::map<address_t, std::size_t> async_chunks_;
  std::unordered_map<address_t, std::size_t> async_live_;
  free_ranges async_free_;
  async_pool_stats async_stats_;
  std::uint64_t release_threshold_;
};

}  // namespace vramscope
