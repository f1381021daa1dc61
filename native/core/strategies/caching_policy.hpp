// The decisions that tell the caching strategy's two presets apart: how a request is rounded, which
// pool serves it, how large a new segment is, when a cached block may serve a request and when it
// is split. `pytorch` reproduces c10/cuda/CUDACachingAllocator.cpp (constants and functions named
// after PyTorch's in the comments); `pow2` is a pool of power-of-two size classes (called `seed`
// before, a name still accepted).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>

#include "vramscope/params.hpp"
#include "vramscope/types.hpp"

namespace vramscope::caching_detail {

enum class preset : std::uint8_t { pow2, pytorch };

// PyTorch's constants (CUDACachingAllocator.cpp).
constexpr std::uint64_t min_block_size = 512;        // kMinBlockSize: every size rounds to 512 B
constexpr std::uint64_t small_size = 1 * MiB;        // kSmallSize: largest small-pool request
constexpr std::uint64_t small_buffer = 2 * MiB;      // kSmallBuffer: small-pool segment
constexpr std::uint64_t large_buffer = 20 * MiB;     // kLargeBuffer: segment for 1-10 MiB requests
constexpr std::uint64_t min_large_alloc = 10 * MiB;  // kMinLargeAlloc
constexpr std::uint64_t round_large = 2 * MiB;       // kRoundLarge: larger segments round to this
// AllocatorConfig: roundup_power2_divisions holds one value per power-of-two interval from 1 MiB
// (sizes below fall in the first) to 64 GiB (sizes above fall in the last).
constexpr std::size_t roundup_intervals = 16;
constexpr unsigned roundup_first_log2 = 20;

// pow2 preset: power-of-two classes from 512 B to 2 GiB.
constexpr std::uint64_t pow2_min_class = 512;
constexpr std::uint64_t pow2_max_class = 2 * GiB;

// Above this no size is rounded (it would overflow); such a request simply fails.
constexpr std::uint64_t largest_request = std::uint64_t{1} << 60;

constexpr unsigned small_pool = 0;
constexpr unsigned large_pool = 1;
constexpr std::uint64_t unlimited = std::numeric_limits<std::uint64_t>::max();

struct policy {
  preset kind = preset::pow2;
  std::uint64_t segment_size = 2 * MiB;  // pow2: smallest segment
  // pytorch: blocks at least this large are never split, and serve only requests that large.
  std::uint64_t max_split_size = unlimited;
  // pytorch: how much larger than an oversize request an oversize cached block may be.
  std::uint64_t max_non_split_rounding_size = large_buffer;
  std::array<std::uint64_t, roundup_intervals> roundup_divisions{};
  bool rounds_to_divisions = false;
  // pytorch: fraction of max_reserved above which unused whole segments are collected, oldest
  // first, before a new one is obtained (0: off).
  double garbage_collection_threshold = 0;
  // pytorch: one segment per stream and pool that grows by mapping pages (expandable_segments).
  bool expandable_segments = false;

  // The block size a request is served with; 0 when no class holds it (the request fails).
  std::uint64_t round_size(std::uint64_t bytes) const noexcept {
    if (kind == preset::pow2) {
      if (VRAMSCOPE_UNLIKELY(bytes > pow2_max_class)) return 0;
      return bytes <= pow2_min_class ? pow2_min_class : next_power_of_two(bytes);
    }
    // PyTorch round_size: 512 B minimum, then either the next power-of-two division (when
    // roundup_power2_divisions is set for this size) or a multiple of 512 B.
    if (bytes < min_block_size) return min_block_size;
    if (VRAMSCOPE_UNLIKELY(bytes > largest_request)) return 0;
    if (VRAMSCOPE_UNLIKELY(rounds_to_divisions)) {
      std::uint64_t divisions = divisions_for(bytes);
      if (divisions > 1 && bytes > min_block_size * divisions)
        return roundup_power2_next_division(bytes, divisions);
    }
    return align_up(bytes, min_block_size);
  }

  // PyTorch get_pool: the small pool holds requests up to kSmallSize. pow2 has one pool.
  unsigned pool_of(std::uint64_t size) const noexcept {
    return kind == preset::pytorch && size > small_size ? large_pool : small_pool;
  }

  // The segment obtained from the device when no cached block serves `size`.
  std::uint64_t allocation_size(std::uint64_t size) const noexcept {
    if (kind == preset::pow2) return size > segment_size ? size : segment_size;
    // PyTorch get_allocation_size.
    if (size <= small_size) return small_buffer;
    if (size < min_large_alloc) return large_buffer;
    return align_up(size, round_large);
  }

  // PyTorch get_free_block's oversize rules, applied to the best fit it found: a request below
  // max_split_size never takes an oversize block, and an oversize request takes one only when it
  // is less than max_non_split_rounding_size larger.
  bool may_serve(std::uint64_t block_size, std::uint64_t size) const noexcept {
    if (size < max_split_size && block_size >= max_split_size) return false;
    if (size >= max_split_size && block_size >= size + max_non_split_rounding_size) return false;
    return true;
  }

  // PyTorch should_split: in the small pool, or anywhere with expandable segments, any remainder of
  // 512 B or more is split off; in the large pool only a remainder above kSmallSize, and never for
  // requests of max_split_size or more. pow2 splits whenever the remainder can hold its smallest
  // class.
  bool should_split(std::uint64_t block_size, std::uint64_t size, unsigned pool) const noexcept {
    const std::uint64_t remaining = block_size - size;
    if (kind == preset::pow2 || pool == small_pool || expandable_segments)
      return remaining >= min_block_size;
    return size < max_split_size && remaining > small_size;
  }

  std::uint64_t divisions_for(std::uint64_t size) const noexcept {
    int index = static_cast<int>(log2_floor(size)) - static_cast<int>(roundup_first_log2);
    if (index < 0) index = 0;
    if (index > static_cast<int>(roundup_intervals) - 1) index = roundup_intervals - 1;
    return roundup_divisions[static_cast<std::size_t>(index)];
  }

  // PyTorch roundup_power2_next_division: the interval between two powers of two is cut into
  // `divisions` equal steps and the size rounds up to the next step (1200 B in 4 -> 1280 B).
  static std::uint64_t roundup_power2_next_division(std::uint64_t size, std::uint64_t divisions) {
    if (is_power_of_two(size)) return size;
    const std::uint64_t floor = std::uint64_t{1} << log2_floor(size);
    const std::uint64_t step = floor >> log2_floor(divisions);
    if (step == 0) return floor << 1;
    const std::uint64_t rounded_down = size & ~(step - 1);
    return rounded_down == size ? size : rounded_down + step;
  }
};

// Reads the preset and its parameters; rejects a parameter of the other preset by name.
policy parse_policy(const params& p);

}  // namespace vramscope::caching_detail
