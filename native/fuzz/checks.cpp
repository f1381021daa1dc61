// Compiled without -fsanitize=fuzzer (see checks.hpp): the invariant checker and state comparisons.
#include "checks.hpp"

#include "invariants.hpp"
#include "suite_support.hpp"

namespace vramscope::fuzz {

std::string invariants(const allocator& a, const std::map<address_t, std::size_t>& live) {
  return testing::check_invariants(a, &live);
}

struct frozen_state {
  allocator_stats stats;
  testing::layout_snapshot layout;
};

void frozen_state_deleter::operator()(frozen_state* s) const { delete s; }

std::unique_ptr<frozen_state, frozen_state_deleter> freeze(const allocator& a) {
  return std::unique_ptr<frozen_state, frozen_state_deleter>(
      new frozen_state{a.stats(), testing::snapshot(a)});
}

std::string changes_since(const frozen_state& before, const allocator& a) {
  allocator_stats now = a.stats();
  std::string out;
  auto field = [&](const char* name, std::uint64_t x, std::uint64_t y) {
    if (x != y)
      out += std::string(" ") + name + " " + std::to_string(x) + " -> " + std::to_string(y);
  };
  const allocator_stats& was = before.stats;
  field("requested_live", was.requested_live, now.requested_live);
  field("rounded_live", was.rounded_live, now.rounded_live);
  field("reserved_live", was.reserved_live, now.reserved_live);
  field("free_bytes", was.free_bytes, now.free_bytes);
  field("largest_free_block", was.largest_free_block, now.largest_free_block);
  field("pending_bytes", was.pending_bytes, now.pending_bytes);
  field("live_blocks", was.live_blocks, now.live_blocks);
  field("allocations", was.allocations, now.allocations);
  field("deallocations", was.deallocations, now.deallocations);
  if (out.empty() && !testing::same_stats_except_failures(was, now)) out = " stats";
  if (!testing::same_layout(before.layout, testing::snapshot(a))) out += " layout";
  return out;
}

}  // namespace vramscope::fuzz
