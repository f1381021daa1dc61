// What the typed strategy suites share, on the simulated backing (tests/cpu/strategy_suite.cpp) and
// on real memory (tests/gpu/gpu_strategy_suite.cu): running a body over every configuration, the
// invariant check as a CHECK, and the stats comparison behind "the state is intact".
#pragma once

#include <algorithm>
#include <exception>
#include <string>

#include "check.hpp"
#include "suite_configs.hpp"
#include "vramscope/allocator.hpp"

namespace vramscope::testing {

// `f.invariants()` returns what broke, or an empty string.
#define CHECK_INVARIANTS(f)                                                         \
  do {                                                                              \
    std::string check_broken_ = (f).invariants();                                   \
    if (!check_broken_.empty()) ::check::report(__FILE__, __LINE__, check_broken_); \
  } while (0)

// Everything a failed call must leave as it was (the failure count may grow).
inline bool same_stats_except_failures(const allocator_stats& a, const allocator_stats& b) {
  return a.requested_live == b.requested_live && a.rounded_live == b.rounded_live &&
         a.reserved_live == b.reserved_live && a.free_bytes == b.free_bytes &&
         a.live_blocks == b.live_blocks && a.pending_bytes == b.pending_bytes &&
         a.largest_free_block == b.largest_free_block && a.allocations == b.allocations &&
         a.deallocations == b.deallocations;
}

// Runs `body` for each configuration whose strategy this build registers, each on its own: one
// that throws does not hide the others. `announce` says which one is starting (and on what).
template <class Announce>
void for_each_config(void (*body)(const suite_config&), Announce announce) {
  for (const auto& c : suite_configs()) {
    bool registered = std::any_of(strategies().begin(), strategies().end(),
                                  [&](const strategy_info& i) { return i.name == c.strategy; });
    if (!announce(c, registered)) continue;
    try {
      body(c);
    } catch (const ::check::fatal&) {
    } catch (const std::exception& e) {
      ::check::report(__FILE__, __LINE__, c.label + ": unexpected exception: " + e.what());
    }
  }
}

}  // namespace vramscope::testing
