// The simulated backing: a fake, deterministic device. Addresses come from a first-fit address
// space that reuses freed ranges the way a driver does; nothing is ever dereferenced. Physical
// memory (regions, mapped granules, async pool chunks) is counted against a cap.
#pragma once

#include <array>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "vramscope/backing.hpp"

namespace vramscope {

// Free ranges (address -> bytes) whose addresses are also grouped by the power of two at or below
// their size (group b: sizes in [2^b, 2^(b+1))). First fit, the lowest range that can take a
// request, then looks among the groups large enough, each in address order, instead of walking
// every smaller range below it.
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
    by_size_[group(bytes)].insert(address);
  }
  void erase(iterator it) {
    by_size_[group(it->second)].erase(it->first);
    ranges_.erase(it);
  }

  // Takes [start, start + bytes) out of the free range `it` holds it in, keeping what is left on
  // either side.
  void carve(iterator it, address_t start, std::size_t bytes) {
    const address_t range_start = it->first, range_end = it->first + it->second;
    erase(it);
    if (start > range_start) add(range_start, start - range_start);
    if (start + bytes < range_end) add(start + bytes, range_end - (start + bytes));
  }

  // Frees [address, address + bytes), joined with a free neighbour that touches it and lies
  // within [low, high) (an async pool joins free space inside one chunk only).
  void give(address_t address, std::size_t bytes, address_t low = 0,
            address_t high = ~address_t{0}) {
    auto next = ranges_.lower_bound(address);
    if (next != ranges_.begin()) {
      auto prev = std::prev(next);
      if (prev->first >= low && prev->first + prev->second == address) {
        address = prev->first;
        bytes += prev->second;
        erase(prev);
      }
    }
    if (next != ranges_.end() && next->first < high && address + bytes == next->first) {
      bytes += next->second;
      erase(next);
    }
    add(address, bytes);
  }

  // The lowest range starting at or above `from`, among those of at least `bytes`, for which
  // fits(address, size) holds; end() when none does. In each group it stops at the first range
  // that fits or lies above the best found so far: in the groups above bytes' own every range is
  // large enough, so usually the first one.
  template <class Fits>
  iterator lowest_fitting(address_t from, std::size_t bytes, const Fits& fits) {
    iterator found = ranges_.end();
    address_t best = ~address_t{0};
    const unsigned smallest = group(bytes == 0 ? 1 : bytes);
    for (unsigned b = 63; b + 1 > smallest; --b) {
      const auto& addresses = by_size_[b];
      for (auto a = addresses.lower_bound(from); a != addresses.end() && *a < best; ++a) {
        auto range = ranges_.find(*a);
        if (fits(range->first, range->second)) {
          best = *a;
          found = range;
          break;
        }
      }
    }
    return found;
  }

 private:
  static unsigned group(std::size_t bytes) { return log2_floor(bytes); }
  std::map<address_t, std::size_t> ranges_;
  std::array<std::set<address_t>, 64> by_size_;
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
  // Free address ranges (address -> size), kept coalesced: from 64 KiB (placements only) to
  // 1 PiB past first_fit_start_.
  free_ranges free_space_;
  // Reserved VMM ranges and which granules of each are mapped (address -> granule -> mapped).
  struct va_range {
    std::size_t bytes;
    std::vector<bool> mapped;
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
