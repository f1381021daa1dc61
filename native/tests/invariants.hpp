// The invariant checker every strategy must satisfy, on any backing: walking its structure, no two
// blocks overlap, every block lies inside a mapped region, each live block is one the allocator
// handed out, and the stats equal a recount of the walk.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "vramscope/allocator.hpp"

namespace vramscope::testing {

struct layout_snapshot final : layout_visitor {
  std::vector<region_info> regions;
  std::vector<block_info> blocks;
  void region(const region_info& r) override { regions.push_back(r); }
  void block(const block_info& b) override { blocks.push_back(b); }
};

inline layout_snapshot snapshot(const allocator& a) {
  layout_snapshot s;
  a.walk(s);
  return s;
}

inline bool same_layout(const layout_snapshot& x, const layout_snapshot& y) {
  if (x.regions.size() != y.regions.size() || x.blocks.size() != y.blocks.size()) return false;
  for (std::size_t i = 0; i < x.regions.size(); ++i)
    if (x.regions[i].address != y.regions[i].address || x.regions[i].size != y.regions[i].size ||
        x.regions[i].mapped != y.regions[i].mapped)
      return false;
  for (std::size_t i = 0; i < x.blocks.size(); ++i)
    if (x.blocks[i].address != y.blocks[i].address || x.blocks[i].size != y.blocks[i].size ||
        x.blocks[i].state != y.blocks[i].state)
      return false;
  return true;
}

// Returns an empty string when every invariant holds, else what broke.
// `live` maps each address the test holds to its requested size (nullptr: skip that check).
inline std::string check_invariants(const allocator& a,
                                    const std::map<address_t, std::size_t>* live) {
  layout_snapshot s = snapshot(a);
  allocator_stats st = a.stats();
  auto fail = [&](const std::string& what) { return a.name() + ": " + what; };

  // Blocks: sorted, disjoint, aligned, each inside one mapped region.
  std::vector<block_info> blocks = s.blocks;
  std::sort(blocks.begin(), blocks.end(),
            [](const block_info& x, const block_info& y) { return x.address < y.address; });
  std::vector<region_info> regions = s.regions;
  std::sort(regions.begin(), regions.end(),
            [](const region_info& x, const region_info& y) { return x.address < y.address; });
  for (std::size_t i = 1; i < regions.size(); ++i)
    if (regions[i - 1].address + regions[i - 1].size > regions[i].address)
      return fail("regions overlap at " + format_address(regions[i].address));
  std::uint64_t live_bytes = 0, pending_bytes = 0, free_bytes = 0, unusable_bytes = 0, mapped = 0;
  std::uint64_t live_count = 0, pending_count = 0;
  for (auto& r : regions)
    if (r.mapped) mapped += r.size;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const block_info& b = blocks[i];
    if (b.size == 0) return fail("empty block at " + format_address(b.address));
    if (i > 0 && blocks[i - 1].address + blocks[i - 1].size > b.address)
      return fail("blocks overlap: " + format_address(blocks[i - 1].address) + "+" +
                  std::to_string(blocks[i - 1].size) + " and " + format_address(b.address));
    if (b.state == block_state::live || b.state == block_state::pending) {
      if (b.address % min_alignment != 0)
        return fail("block " + format_address(b.address) + " is not 256 B aligned");
    }
    // Inside a mapped region.
    auto it = std::upper_bound(regions.begin(), regions.end(), b.address,
                               [](address_t x, const region_info& r) { return x < r.address; });
    if (it == regions.begin())
      return fail("block " + format_address(b.address) + " outside every region");
    --it;
    if (!it->mapped || b.address + b.size > it->address + it->size)
      return fail("block " + format_address(b.address) + "+" + std::to_string(b.size) +
                  " not inside a mapped region");
    switch (b.state) {
      case block_state::live:
        live_bytes += b.size;
        ++live_count;
        break;
      case block_state::pending:
        pending_bytes += b.size;
        ++pending_count;
        break;
      case block_state::free:
        free_bytes += b.size;
        break;
      case block_state::unusable:
        unusable_bytes += b.size;
        break;
    }
    if (live && b.state == block_state::live && !live->count(b.address))
      return fail("walk shows a live block the test never got: " + format_address(b.address));
  }
  if (live && live_count != live->size())
    return fail("walk shows " + std::to_string(live_count) + " live blocks, the test holds " +
                std::to_string(live->size()));
  if (live) {
    std::uint64_t requested = 0;
    for (auto& [addr, n] : *live) requested += n;
    if (requested != st.requested_live)
      return fail("requested_live " + std::to_string(st.requested_live) + " != recount " +
                  std::to_string(requested));
  }
  if (st.rounded_live != live_bytes)
    return fail("rounded_live " + std::to_string(st.rounded_live) + " != recount " +
                std::to_string(live_bytes));
  if (st.pending_bytes != pending_bytes)
    return fail("pending_bytes " + std::to_string(st.pending_bytes) + " != recount " +
                std::to_string(pending_bytes));
  if (st.live_blocks != live_count)
    return fail("live_blocks " + std::to_string(st.live_blocks) + " != recount " +
                std::to_string(live_count));
  if (st.free_bytes != free_bytes)
    return fail("free_bytes " + std::to_string(st.free_bytes) + " != recount " +
                std::to_string(free_bytes));
  if (st.unusable_bytes != unusable_bytes)
    return fail("unusable_bytes " + std::to_string(st.unusable_bytes) + " != recount " +
                std::to_string(unusable_bytes));
  if (st.reserved_live != mapped)
    return fail("reserved_live " + std::to_string(st.reserved_live) + " != mapped regions " +
                std::to_string(mapped));
  if (live_bytes + pending_bytes + free_bytes + unusable_bytes != mapped)
    return fail("live + pending + free + unusable = " +
                std::to_string(live_bytes + pending_bytes + free_bytes + unusable_bytes) +
                " != reserved " + std::to_string(mapped));
  if (st.largest_free_block > st.free_bytes)
    return fail("largest free block larger than free bytes");
  if (st.rounded_live < st.requested_live) return fail("rounded < requested");
  if (st.reserved_peak < st.reserved_live || st.rounded_peak < st.rounded_live ||
      st.requested_peak < st.requested_live)
    return fail("a peak is below its live value");
  return {};
}

}  // namespace vramscope::testing
