// The model of RMM's pool_memory_resource (rapidsai/rmm: mr/pool_memory_resource.hpp,
// detail/pool_memory_resource_impl, detail/stream_ordered_memory_resource.hpp,
// detail/coalescing_free_list.hpp), shared by rmm_pool and rmm_binning (whose upstream it is in
// RMM's replay benchmark). Facts taken from RMM's source, our own code:
//  - sizes are aligned up to 256 B; every block is cut from the front of a free block, the rest
//    staying free in the same list;
//  - free blocks are kept per stream, each list coalescing contiguous blocks on insertion, except
//    across the start of an upstream allocation (a "head": blocks of two upstream allocations never
//    merge, even where the driver placed them side by side);
//  - a request takes the best fit (the smallest block that holds it, the lowest address among
//    equal sizes) from its stream's list; else the best fit of another stream's list, its rest
//    staying there; else other streams' lists are merged into its own one at a time until one
//    holds it; else the pool grows;
//  - growth (size_to_grow): with a maximum, max(size, remaining / 2) where size fits in what is
//    left (remaining aligned up to 256 B), else none; without one, max(size, pool size), so the pool
//    doubles. A size the device refuses is halved, down to the request itself (try_to_expand);
//  - nothing goes back to the device before the pool is destroyed.
// Where RMM would merge every stream's list and then fail, this model refuses without merging, so
// that a refused request leaves the allocator as it was (docs/strategies.md, rmm_pool).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "vramscope/allocator.hpp"

namespace vramscope::rmm_model {

constexpr std::uint64_t alignment = 256;  // rmm::CUDA_ALLOCATION_ALIGNMENT
// Requests beyond this are refused at once (no aligned size or growth computed from them).
constexpr std::uint64_t largest_request = std::uint64_t{1} << 62;

inline std::uint64_t align_up_256(std::uint64_t n) {
  return (n + alignment - 1) & ~(alignment - 1);
}
inline std::uint64_t align_down_256(std::uint64_t n) { return n & ~(alignment - 1); }

// rmm::percent_of_free_device_memory: that percentage of the free memory, aligned down to 256 B.
inline std::uint64_t percent_of(std::uint64_t free, std::uint64_t percent) {
  return align_down_256(static_cast<std::uint64_t>(static_cast<long double>(free) *
                                                   static_cast<long double>(percent) / 100.0L));
}

// Owner provides (pool_owner below is the owner rmm_pool and rmm_binning share):
//   address_t pool_obtain(std::uint64_t bytes): a region from the device, 0 where it has no room;
//   std::uint64_t pool_available() const: what the device may still hand out;
//   void pool_trace(trace_op op, address_t address, std::uint64_t size, stream_t stream).
template <class Owner>
class pool_core {
 public:
  pool_core(Owner& owner, std::uint64_t maximum) : owner_(owner), maximum_(maximum) {}

  // Takes the initial pool (on the default stream, as RMM does); false where the device has no room.
  bool start(std::uint64_t initial) {
    if (initial == 0) return true;
    if (initial > owner_.pool_available()) return false;
    const address_t a = owner_.pool_obtain(initial);
    if (a == 0) return false;
    add_upstream(a, initial, 0);
    insert_free(a, 0);
    return true;
  }

  // A block of `size` bytes (a multiple of 256) for `stream`; 0 where the pool cannot grow to it,
  // the state then unchanged.
  address_t allocate(std::uint64_t size, stream_t stream) {
    auto own = lists_.find(stream);
    if (own != lists_.end()) {
      const address_t a = take_best_fit(own, size, stream);
      if (a != 0) return a;
    }
    if (lists_.size() > (own != lists_.end() ? 1u : 0u)) {
      // Another stream's best fit, its rest left in that stream's list.
      for (auto it = lists_.begin(); it != lists_.end(); ++it) {
        if (it->first == stream) continue;
        const address_t a = take_best_fit(it, size, stream);
        if (a != 0) return a;
      }
      // Merging: only where merging every list, or growing, then serves the request.
      const bool merged_fits = largest_run_if_merged() >= size;
      if (!merged_fits && !can_grow(size)) return 0;
      std::vector<stream_t> others;
      for (auto& [s, list] : lists_)
        if (s != stream) others.push_back(s);
      for (stream_t s : others) {
        merge_list(s, stream);
        own = lists_.find(stream);
        if (own == lists_.end()) continue;
        const address_t a = take_best_fit(own, size, stream);
        if (a != 0) return a;
      }
    }
    return grow(size, stream);
  }

  void deallocate(address_t a, stream_t stream) {
    auto it = blocks_.find(a);
    VRAMSCOPE_ASSERT(it != blocks_.end() && !it->second.free);
    it->second.free = true;
    it->second.stream = stream;
    insert_free(a, stream);
  }

  // Where an address lies in a free block of the pool.
  bool in_free_block(address_t a) const {
    auto it = blocks_.upper_bound(a);
    if (it == blocks_.begin()) return false;
    --it;
    return it->second.free && a < it->first + it->second.size;
  }

  std::uint64_t pool_size() const { return pool_size_; }

  // Upstream allocations in the order obtained (address, size).
  const std::vector<std::pair<address_t, std::uint64_t>>& upstream() const { return upstream_; }

  // Every block in address order: f(address, size, free).
  template <class F>
  void for_each_block(F&& f) const {
    for (auto& [a, n] : blocks_) f(a, n.size, n.free);
  }

  // The regions go back to the device (the pool's destruction).
  template <class Free>
  void release(Free&& free_region) {
    for (auto& [a, n] : upstream_) free_region(a, n);
    upstream_.clear();
    blocks_.clear();
    lists_.clear();
    pool_size_ = 0;
  }

 private:
  struct node {
    std::uint64_t size;
    stream_t stream;  // the list a free block is in
    bool free;
    bool head;  // starts an upstream allocation: never merged with the block before it
  };
  using size_set = std::set<std::pair<std::uint64_t, address_t>>;
  using list_iterator = typename std::map<stream_t, size_set>::iterator;

  address_t take_best_fit(list_iterator list, std::uint64_t size, stream_t stream) {
    size_set& set = list->second;
    auto fit = set.lower_bound({size, 0});
    if (fit == set.end()) return 0;
    const address_t a = fit->second;
    set.erase(fit);
    node& n = blocks_.at(a);
    n.free = false;
    if (n.size > size) {
      const address_t rest = a + size;
      blocks_.emplace_hint(std::next(blocks_.find(a)), rest,
                           node{n.size - size, list->first, true, false});
      set.insert({n.size - size, rest});
      owner_.pool_trace(trace_op::split, a, size, stream);
      n.size = size;
    }
    if (set.empty()) lists_.erase(list);
    return a;
  }

  // A free block (in blocks_, free, its stream set) joins its stream's list, merged with the free
  // neighbours of that list.
  void insert_free(address_t a, stream_t stream) {
    auto it = blocks_.find(a);
    size_set& set = lists_[stream];
    auto next = std::next(it);
    if (next != blocks_.end() && next->second.free && next->second.stream == stream &&
        !next->second.head && a + it->second.size == next->first) {
      set.erase({next->second.size, next->first});
      it->second.size += next->second.size;
      blocks_.erase(next);
      owner_.pool_trace(trace_op::merge, a, it->second.size, stream);
    }
    if (it != blocks_.begin() && !it->second.head) {
      auto prev = std::prev(it);
      if (prev->second.free && prev->second.stream == stream &&
          prev->first + prev->second.size == a) {
        set.erase({prev->second.size, prev->first});
        prev->second.size += it->second.size;
        blocks_.erase(it);
        it = prev;
        owner_.pool_trace(trace_op::merge, it->first, it->second.size, stream);
      }
    }
    set.insert({it->second.size, it->first});
  }

  // Stream `from`'s list merged into `to`'s (RMM's merge_lists), block by block in address order.
  void merge_list(stream_t from, stream_t to) {
    auto it = lists_.find(from);
    if (it == lists_.end()) return;
    std::vector<address_t> moved;
    moved.reserve(it->second.size());
    for (auto& [size, a] : it->second) moved.push_back(a);
    lists_.erase(it);
    std::sort(moved.begin(), moved.end());
    for (address_t a : moved) {
      auto b = blocks_.find(a);
      if (b == blocks_.end()) continue;  // merged into the block before it already
      b->second.stream = to;
      insert_free(a, to);
    }
  }

  // The largest block there would be with every list merged into one.
  std::uint64_t largest_run_if_merged() const {
    std::uint64_t best = 0, run = 0;
    address_t end = 0;
    for (auto& [a, n] : blocks_) {
      if (!n.free) {
        run = 0;
        continue;
      }
      run = (run != 0 && a == end && !n.head) ? run + n.size : n.size;
      end = a + n.size;
      best = std::max(best, run);
    }
    return best;
  }

  // RMM's size_to_grow.
  std::uint64_t size_to_grow(std::uint64_t size) const {
    if (maximum_ != 0) {
      const std::uint64_t remaining = align_up_256(maximum_ - pool_size_);
      return size <= remaining ? std::max(size, remaining / 2) : 0;
    }
    return std::max(size, pool_size_);
  }

  bool can_grow(std::uint64_t size) const {
    return size_to_grow(size) != 0 && size <= owner_.pool_available();
  }

  // RMM's try_to_expand: the growth size, halved while the device refuses it, down to the request.
  address_t grow(std::uint64_t size, stream_t stream) {
    std::uint64_t attempt = size_to_grow(size);
    if (attempt == 0) return 0;
    address_t a = 0;
    while (attempt >= size) {
      if (attempt <= owner_.pool_available()) a = owner_.pool_obtain(attempt);
      if (a != 0 || attempt == size) break;
      attempt = std::max(size, attempt / 2);
    }
    if (a == 0) return 0;
    add_upstream(a, attempt, stream);
    auto it = blocks_.find(a);
    it->second.free = false;
    if (attempt > size) {
      blocks_.emplace_hint(std::next(it), a + size, node{attempt - size, stream, true, false});
      it->second.size = size;
      owner_.pool_trace(trace_op::split, a, size, stream);
      insert_free(a + size, stream);
    }
    return a;
  }

  void add_upstream(address_t a, std::uint64_t size, stream_t stream) {
    blocks_.emplace(a, node{size, stream, true, true});
    upstream_.emplace_back(a, size);
    pool_size_ += size;
  }

  Owner& owner_;
  std::uint64_t maximum_;  // 0: none
  std::uint64_t pool_size_ = 0;
  std::map<address_t, node> blocks_;    // every block, live and free, by address
  std::map<stream_t, size_set> lists_;  // per stream: its free blocks by (size, address)
  std::vector<std::pair<address_t, std::uint64_t>> upstream_;
};

// The pool's sizes from a strategy's parameters: initial_pool_size or initial_pool_percent (of the
// device's free memory), maximum_pool_size or maximum_pool_percent (0: no maximum).
struct pool_sizes {
  std::uint64_t initial = 0;
  std::uint64_t maximum = 0;
};

inline pool_sizes read_pool_sizes(const std::string& who, const params& p, std::uint64_t free) {
  auto one = [&](const char* bytes_key, const char* percent_key) -> std::uint64_t {
    if (p.has(bytes_key) && p.has(percent_key) && p.get_uint(percent_key, 0) != 0)
      throw invalid_argument(who + ": give " + bytes_key + " or " + percent_key + ", not both");
    const std::uint64_t percent = p.get_uint(percent_key, 0);
    if (percent > 100)
      throw invalid_argument(who + ": parameter '" + percent_key +
                             "' is a percentage of the device's free memory, 0 to 100, got " +
                             std::to_string(percent));
    if (percent != 0) return percent_of(free, percent);
    const std::uint64_t bytes = p.get_size(bytes_key, 0);
    if (bytes % alignment != 0)
      throw invalid_argument(who + ": parameter '" + bytes_key +
                             "' must be a multiple of 256 B (as RMM requires), got " +
                             format_bytes(bytes));
    return bytes;
  };
  pool_sizes s;
  s.initial = one("initial_pool_size", "initial_pool_percent");
  s.maximum = one("maximum_pool_size", "maximum_pool_percent");
  if (s.maximum != 0 && s.initial > s.maximum)
    throw invalid_argument(who + ": the initial pool (" + format_bytes(s.initial) +
                           ") exceeds the maximum pool size (" + format_bytes(s.maximum) + ")");
  return s;
}

// An allocator over one pool_core: the pool's sizes from its parameters, what the core asks of its
// owner, and the pool's regions given back to the device when the allocator is destroyed.
class pool_owner : public allocator {
 public:
  address_t pool_obtain(std::uint64_t bytes) {
    try {
      return obtain_region(bytes);
    } catch (const out_of_memory&) {
      return 0;
    }
  }
  std::uint64_t pool_available() const { return backing_available(); }
  void pool_trace(trace_op op, address_t a, std::uint64_t size, stream_t stream) const {
    trace(op, a, size, 0, stream);
  }

 protected:
  pool_owner(const std::string& name, backing& b, const params& p)
      : allocator(name, b),
        sizes_(read_pool_sizes(name, p, b.available())),
        pool_(*this, sizes_.maximum) {}

  ~pool_owner() override {
    pool_.release([&](address_t a, std::uint64_t n) { get_backing().free_region(a, n); });
  }

  // Takes the initial pool; fails (out_of_memory) where the device has no room for it.
  void start_pool() {
    if (!pool_.start(sizes_.initial))
      fail(sizes_.initial, backing_available(), "the device has no room for the initial pool");
  }

  pool_sizes sizes_;
  pool_core<pool_owner> pool_;
};

inline std::vector<param_info> pool_params() {
  return {{"initial_pool_size", "size", "0",
           "bytes the pool takes at construction (RMM requires it since 24.02; 0: none, the pool "
           "grows from empty, as RMM's replay benchmark without a simulated size)"},
          {"initial_pool_percent", "uint", "0",
           "instead: this percentage of the device's free memory (50: RMM's old default and "
           "Python's PoolMemoryResource default; 100: the replay benchmark's simulated size)"},
          {"maximum_pool_size", "size", "0",
           "the most the pool may grow to; 0: no maximum (all the device has)"},
          {"maximum_pool_percent", "uint", "0",
           "instead: this percentage of the device's free memory"}};
}

}  // namespace vramscope::rmm_model
