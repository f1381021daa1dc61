// The static plan's two placement heuristics (planned_placement.hpp) and the floor they are held to.
#include "planned_placement.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <utility>

namespace vramscope::planning {
namespace {

// Blocks alive at a moment, found in O(log n + found): each placed block is kept at the O(log n)
// nodes of a segment tree over block starts that cover its lifetime exactly; the blocks alive at
// start s are those kept on the path from the leaf of s to the root.
class stabbing_tree {
 public:
  explicit stabbing_tree(std::size_t leaves) : leaves_(leaves), nodes_(2 * leaves) {}
  void insert(std::size_t begin, std::size_t end, std::uint32_t block) {
    for (std::size_t l = begin + leaves_, r = end + leaves_; l < r; l >>= 1, r >>= 1) {
      if (l & 1) nodes_[l++].push_back(block);
      if (r & 1) nodes_[--r].push_back(block);
    }
  }
  template <class F>
  void alive_at(std::size_t point, F&& f) const {
    for (std::size_t i = point + leaves_; i >= 1; i >>= 1)
      for (std::uint32_t block : nodes_[i]) f(block);
  }

 private:
  std::size_t leaves_;
  std::vector<std::vector<std::uint32_t>> nodes_;
};

}  // namespace

namespace {

const char* name_of(order_by order, fit how) {
  switch (order) {
    case order_by::size:
      return how == fit::first ? "greedy by size, first fit" : "greedy by size, best fit";
    case order_by::size_longer_first:
      return how == fit::first ? "greedy by size (longer lifetimes first), first fit"
                               : "greedy by size (longer lifetimes first), best fit";
    case order_by::peak_first:
      return how == fit::first ? "greedy, the peak's blocks first, first fit"
                               : "greedy, the peak's blocks first, best fit";
    case order_by::lifetime:
      return how == fit::first ? "greedy by lifetime, first fit" : "greedy by lifetime, best fit";
  }
  return "greedy";
}

// The start (as a block index) after which the most bytes are alive: the moment of the floor.
std::size_t peak_start(const std::vector<block_lifetime>& blocks) {
  std::vector<std::pair<std::uint32_t, std::uint64_t>> ends;
  ends.reserve(blocks.size());
  for (const block_lifetime& b : blocks) ends.emplace_back(b.end, b.bytes);
  std::sort(ends.begin(), ends.end());
  std::uint64_t load = 0, peak = 0;
  std::size_t gone = 0, at = 0;
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    for (; gone < ends.size() && ends[gone].first <= blocks[k].start; ++gone)
      load -= ends[gone].second;
    load += blocks[k].bytes;
    if (load > peak) {
      peak = load;
      at = k;
    }
  }
  return at;
}

}  // namespace

placement greedy(const std::vector<block_lifetime>& blocks, order_by order_kind, fit how) {
  placement p;
  p.heuristic = name_of(order_kind, how);
  const std::size_t n = blocks.size();
  if (n == 0) return p;
  // Time as block starts: block k starts at k, and ends at the number of blocks starting before
  // its end event, which keeps "alive at once" as it was (a.start < b.end and b.start < a.end).
  std::vector<std::uint32_t> starts(n);
  for (std::size_t k = 0; k < n; ++k) starts[k] = blocks[k].start;
  std::vector<std::uint32_t> end(n);
  for (std::size_t k = 0; k < n; ++k)
    end[k] = static_cast<std::uint32_t>(
        std::lower_bound(starts.begin(), starts.end(), blocks[k].end) - starts.begin());
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  const std::size_t peak = order_kind == order_by::peak_first ? peak_start(blocks) : 0;
  const auto at_peak = [&](std::uint32_t k) { return k <= peak && peak < end[k]; };
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const std::uint32_t la = end[a] - a, lb = end[b] - b;
    const std::uint64_t sa = blocks[a].bytes, sb = blocks[b].bytes;
    switch (order_kind) {
      case order_by::size:
        if (sa != sb) return sa > sb;
        break;
      case order_by::size_longer_first:
        if (sa != sb) return sa > sb;
        if (la != lb) return la > lb;
        break;
      case order_by::peak_first:
        if (at_peak(a) != at_peak(b)) return at_peak(a);
        if (sa != sb) return sa > sb;
        break;
      case order_by::lifetime:
        if (la != lb) return la > lb;
        if (sa != sb) return sa > sb;
        break;
    }
    return a < b;
  });

  stabbing_tree alive(n);
  std::vector<std::uint64_t> placed_bits((n + 63) / 64, 0);  // by start
  p.offset.assign(n, 0);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> taken;  // [offset, end) of the overlapping
  for (const std::uint32_t b : order) {
    const std::uint64_t size = blocks[b].bytes;
    taken.clear();
    alive.alive_at(b, [&](std::uint32_t o) {
      taken.emplace_back(p.offset[o], p.offset[o] + blocks[o].bytes);
    });
    // Placed blocks that start inside b's lifetime: the set bits of (b, end[b]).
    for (std::size_t k = b + 1; k < end[b];) {
      const std::uint64_t word = placed_bits[k >> 6] >> (k & 63);
      if (word == 0) {
        k = (k | 63) + 1;
        continue;
      }
      k += static_cast<std::size_t>(__builtin_ctzll(word));
      if (k >= end[b]) break;
      taken.emplace_back(p.offset[k], p.offset[k] + blocks[k].bytes);
      ++k;
    }
    std::sort(taken.begin(), taken.end());
    // The first (or smallest) gap between them that holds b; else above them all.
    std::uint64_t top = 0, best = 0, best_gap = ~std::uint64_t{0};
    for (const auto& [start, stop] : taken) {
      if (start > top && start - top >= size && start - top < best_gap) {
        best = top;
        best_gap = start - top;
        if (how == fit::first) break;
      }
      top = std::max(top, stop);
    }
    const std::uint64_t offset = best_gap != ~std::uint64_t{0} ? best : top;
    p.offset[b] = offset;
    p.extent = std::max(p.extent, offset + size);
    alive.insert(b, end[b], b);
    placed_bits[b >> 6] |= std::uint64_t{1} << (b & 63);
  }
  return p;
}

placement time_order_best_fit(const std::vector<block_lifetime>& blocks) {
  placement p;
  p.heuristic = "time-ordered best fit";
  const std::size_t n = blocks.size();
  p.offset.assign(n, 0);
  std::map<std::uint64_t, std::uint64_t> gaps;                // offset -> bytes, below top
  std::set<std::pair<std::uint64_t, std::uint64_t>> by_size;  // (bytes, offset)
  std::uint64_t top = 0;
  using ending = std::pair<std::uint32_t, std::uint32_t>;  // (end event, block)
  std::priority_queue<ending, std::vector<ending>, std::greater<ending>> live;
  auto remove_gap = [&](std::map<std::uint64_t, std::uint64_t>::iterator it) {
    by_size.erase({it->second, it->first});
    return gaps.erase(it);
  };
  auto release = [&](std::uint64_t offset, std::uint64_t bytes) {
    auto next = gaps.lower_bound(offset);
    if (next != gaps.end() && offset + bytes == next->first) {
      bytes += next->second;
      next = remove_gap(next);
    }
    if (next != gaps.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        bytes += prev->second;
        remove_gap(prev);
      }
    }
    if (offset + bytes == top) {
      top = offset;  // the line's top comes down: no gap is kept at it
      return;
    }
    gaps.emplace(offset, bytes);
    by_size.emplace(bytes, offset);
  };
  for (std::size_t k = 0; k < n; ++k) {
    const block_lifetime& b = blocks[k];
    while (!live.empty() && live.top().first <= b.start) {
      const std::uint32_t done = live.top().second;
      live.pop();
      release(p.offset[done], blocks[done].bytes);
    }
    auto fit = by_size.lower_bound({b.bytes, 0});
    std::uint64_t offset;
    if (fit != by_size.end()) {
      offset = fit->second;
      const std::uint64_t gap = fit->first;
      remove_gap(gaps.find(offset));
      if (gap > b.bytes) {
        gaps.emplace(offset + b.bytes, gap - b.bytes);
        by_size.emplace(gap - b.bytes, offset + b.bytes);
      }
    } else {
      offset = top;
      top += b.bytes;
    }
    p.offset[k] = offset;
    p.extent = std::max(p.extent, offset + b.bytes);
    live.emplace(b.end, static_cast<std::uint32_t>(k));
  }
  return p;
}

std::uint64_t overlapping_pairs(const std::vector<block_lifetime>& blocks) {
  // Each block meets the blocks alive when it starts, which started before it.
  std::vector<std::uint32_t> ends;
  ends.reserve(blocks.size());
  for (const block_lifetime& b : blocks) ends.push_back(b.end);
  std::sort(ends.begin(), ends.end());
  std::uint64_t pairs = 0;
  std::size_t gone = 0;
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    while (gone < ends.size() && ends[gone] <= blocks[k].start) ++gone;
    pairs += k - std::min(k, gone);
  }
  return pairs;
}

bool greedy_fits(const std::vector<block_lifetime>& blocks) {
  return blocks.size() <= (std::size_t{1} << 20) &&
         overlapping_pairs(blocks) <= (std::uint64_t{1} << 23);
}

placement place_blocks(const std::vector<block_lifetime>& blocks) {
  // No plan is under the floor: one within 0.5 % of it ends the search (the rest could win no more).
  const std::uint64_t floor = peak_load(blocks);
  const std::uint64_t good_enough = floor + floor / 200;
  placement best = time_order_best_fit(blocks);
  if (best.extent <= good_enough || !greedy_fits(blocks)) return best;
  for (order_by order : {order_by::size, order_by::peak_first, order_by::lifetime})
    for (fit how : {fit::first, fit::best}) {
      placement p = greedy(blocks, order, how);
      if (p.extent < best.extent) best = std::move(p);
      if (best.extent <= good_enough) return best;
    }
  return best;
}

std::uint64_t peak_load(const std::vector<block_lifetime>& blocks) {
  std::vector<std::pair<std::uint32_t, std::uint64_t>> ends;
  ends.reserve(blocks.size());
  for (const block_lifetime& b : blocks) ends.emplace_back(b.end, b.bytes);
  std::sort(ends.begin(), ends.end());
  std::uint64_t load = 0, peak = 0;
  std::size_t gone = 0;
  for (const block_lifetime& b : blocks) {
    for (; gone < ends.size() && ends[gone].first <= b.start; ++gone) load -= ends[gone].second;
    load += b.bytes;
    peak = std::max(peak, load);
  }
  return peak;
}

}  // namespace vramscope::planning
