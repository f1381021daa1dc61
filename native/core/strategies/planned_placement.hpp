// The static plan's placement: every block's lifetime is known ahead (the dynamic storage
// allocation problem), and each block gets an offset on one address line so that no two blocks
// alive at once overlap, the highest end kept low. docs/strategies.md#planned names the heuristics
// and their sources; the peak of live bytes (peak_load) is the bound no placement goes under.
#pragma once

#include <cstdint>
#include <vector>

#include "vramscope/allocator.hpp"

namespace vramscope::planning {

struct placement {
  std::vector<std::uint64_t> offset;  // per block, in the order given
  std::uint64_t extent = 0;           // the highest end: the arena the plan needs
  const char* heuristic = "";         // which heuristic gave it
};

// Blocks are given in the order of their start event (ascending start, as a replay's allocations
// come); `bytes` is the size a block takes on the line. Each heuristic costs no more than its
// comment says, in blocks and the overlaps it visits, never in bytes.

// Greedy: the blocks one at a time in an order, each in the first (or the smallest) gap that holds
// it among the blocks already placed that are alive at some moment of its lifetime, else above the
// highest of them. O(n log n + overlapping pairs). The orders:
//   size: largest first, blocks of one size by start (greedy by size);
//   size_longer_first: largest first, blocks of one size by longer lifetime first;
//   peak_first: the blocks alive at the moment of the floor first, largest first, then the others
//     by size (at that moment any gap between them is above the floor);
//   lifetime: longer lifetime first, then larger.
enum class fit { first, best };
enum class order_by { size, size_longer_first, peak_first, lifetime };
placement greedy(const std::vector<block_lifetime>& blocks, order_by order, fit how);

// Time-ordered best fit: the blocks in order of their start, each in the smallest free gap of the
// line at that moment, else at the top; a free joins its neighbours. O(n log n).
placement time_order_best_fit(const std::vector<block_lifetime>& blocks);

// The lowest of time-ordered best fit and six variants of greedy (by size, the peak's blocks first
// and by lifetime, each with first and with best fit), in that order, ending at the first within
// 0.5 % of the floor (the others could win no more than that); greedy only where its cost stays bounded (greedy_fits), so a plan
// costs O(n log n + min(overlapping pairs, a constant)). Never under peak_load.
placement place_blocks(const std::vector<block_lifetime>& blocks);

// The most bytes alive at once: the floor of every placement. O(n log n).
std::uint64_t peak_load(const std::vector<block_lifetime>& blocks);

// Pairs of blocks alive at once: what greedy by size visits. O(n log n).
std::uint64_t overlapping_pairs(const std::vector<block_lifetime>& blocks);

// Whether place_blocks runs greedy: at most 2^23 overlapping pairs (a few seconds for all six
// variants, the worst case) and 2^20 blocks (its segment tree's memory).
bool greedy_fits(const std::vector<block_lifetime>& blocks);

}  // namespace vramscope::planning
