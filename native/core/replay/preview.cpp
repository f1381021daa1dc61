// A layout cut to what its map shows after one request event (replay_preview, replay.hpp): the
// JavaScript reference is src-shared/wire.ts (cutAt), which reads the layout as the renderer's
// model builder does; this is the same rule, run in a replay target's own thread, and the tests
// hold the two equal on every strategy (test/unit/renderer/viz/preview.test.ts).
#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>

#include "vramscope/replay.hpp"

namespace vramscope {

replay_preview cut_layout(const replay_layout& l, std::uint64_t at) {
  replay_preview out;
  const std::size_t n = l.op.size();
  constexpr std::uint64_t never = std::numeric_limits<std::uint64_t>::max();
  std::vector<std::uint8_t> keep(n, 0);
  // Open blocks by address: the index of their alloc, and of their first pending free plus one.
  std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::uint32_t>> open;
  std::unordered_map<std::uint64_t, std::uint32_t> open_regions;
  // Regions not present at `at`, by start: the index of the largest reserved there.
  std::unordered_map<std::uint64_t, std::uint32_t> gone;
  bool regions = false;
  bool releases = false;
  for (std::size_t i = 0; i < n && !releases; ++i)
    releases = l.op[i] == static_cast<std::uint8_t>(trace_op::region_release);

  const auto ended = [&](std::pair<std::uint32_t, std::uint32_t> block, std::size_t end,
                         std::uint64_t end_event) {
    if (l.event[block.first] <= at && at < end_event) {
      keep[block.first] = 1;
      if (end != n) keep[end] = 1;
      if (block.second != 0) keep[block.second - 1] = 1;
    }
  };
  const auto region_ended = [&](std::uint32_t reserve, std::size_t release,
                                std::uint64_t release_event) {
    if (l.event[reserve] <= at && at < release_event) {
      keep[reserve] = 1;
      if (release != n) keep[release] = 1;
      return;
    }
    auto [it, fresh] = gone.try_emplace(l.address[reserve], reserve);
    if (!fresh && l.size[it->second] < l.size[reserve]) it->second = reserve;
  };

  for (std::size_t i = 0; i < n; ++i) {
    const auto op = static_cast<trace_op>(l.op[i]);
    const std::uint64_t address = l.address[i];
    switch (op) {
      case trace_op::alloc: {
        // A second alloc at an open address leaves the first open for good (the builder's rule).
        auto [it, fresh] = open.try_emplace(address, static_cast<std::uint32_t>(i), 0u);
        if (!fresh) {
          ended(it->second, n, never);
          it->second = {static_cast<std::uint32_t>(i), 0u};
        }
        break;
      }
      case trace_op::free:
      case trace_op::free_completed: {
        const auto it = open.find(address);
        if (it == open.end()) break;
        ended(it->second, i, l.event[i]);
        open.erase(it);
        break;
      }
      case trace_op::free_pending: {
        const auto it = open.find(address);
        if (it != open.end() && it->second.second == 0)
          it->second.second = static_cast<std::uint32_t>(i + 1);
        break;
      }
      case trace_op::reset:
        for (const auto& [a, block] : open) ended(block, n, l.event[i]);
        open.clear();
        keep[i] = 1;
        break;
      case trace_op::split:
      case trace_op::merge:
        break;
      case trace_op::region_reserve:
        regions = true;
        if (releases) {
          auto [it, fresh] = open_regions.try_emplace(address, static_cast<std::uint32_t>(i));
          if (!fresh) {
            region_ended(it->second, n, never);
            it->second = static_cast<std::uint32_t>(i);
          }
        } else {
          keep[i] = 1;
        }
        break;
      case trace_op::region_release: {
        const auto it = open_regions.find(address);
        if (it == open_regions.end()) break;
        region_ended(it->second, i, l.event[i]);
        open_regions.erase(it);
        break;
      }
      case trace_op::va_reserve:
      case trace_op::map:
        regions = true;
        keep[i] = 1;
        break;
      default:
        keep[i] = 1;
    }
  }
  if (!regions) return out;
  for (const auto& [a, block] : open) ended(block, n, never);
  for (const auto& [a, reserve] : open_regions) region_ended(reserve, n, never);

  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  ranges.reserve(gone.size());
  for (const auto& [start, reserve] : gone)
    ranges.emplace_back(start, start + static_cast<std::uint64_t>(l.size[reserve]));
  std::sort(ranges.begin(), ranges.end());
  for (const auto& [start, end] : ranges) {
    if (!out.gone_start.empty() && start <= out.gone_end.back()) {
      out.gone_end.back() = std::max(out.gone_end.back(), end);
    } else {
      out.gone_start.push_back(start);
      out.gone_end.push_back(end);
    }
  }
  std::size_t kept = 0;
  for (const std::uint8_t k : keep) kept += k;
  out.kept.reserve(kept);
  for (std::size_t i = 0; i < n; ++i)
    if (keep[i] != 0) out.kept.push_back(static_cast<std::uint32_t>(i));
  out.event = at;
  return out;
}

}  // namespace vramscope
