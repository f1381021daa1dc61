// The invariant checks the fuzz targets call, compiled apart from them without coverage
// instrumentation (native/fuzz/CMakeLists.txt): the checker's sorting and comparisons would
// otherwise dominate the run time and feed the fuzzer coverage that says nothing about the
// allocator.
#pragma once

#include <map>
#include <string>

#include "vramscope/allocator.hpp"

namespace vramscope::fuzz {

// What broke (empty when nothing did): testing::check_invariants.
std::string invariants(const allocator& a, const std::map<address_t, std::size_t>& live);

// An opaque copy of everything a rejected call must leave as it was (stats and layout).
struct frozen_state;
struct frozen_state_deleter {
  void operator()(frozen_state* s) const;
};
std::unique_ptr<frozen_state, frozen_state_deleter> freeze(const allocator& a);
// What differs from the frozen state, failures apart (empty when nothing does).
std::string changes_since(const frozen_state& before, const allocator& a);

}  // namespace vramscope::fuzz
