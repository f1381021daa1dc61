// The configurations the typed suites run every strategy in: small pools, so that exhaustion,
// growth and trimming happen within a few operations. One entry per strategy (and per preset).
#pragma once

#include <string>
#include <vector>

#include "vramscope/allocator.hpp"

namespace vramscope::testing {

struct suite_config {
  std::string label;     // test names use it: "caching.pytorch"
  std::string strategy;  // registry name
  params parameters;
  std::size_t max_request;  // the largest request the strategy serves in this configuration
  std::size_t capacity;     // the simulated device's physical memory
};

inline std::vector<suite_config> suite_configs() {
  return {
      {"cuda_malloc", "cuda_malloc", {}, 8 * MiB, 64 * MiB},
      {"async_pool", "async_pool", {}, 8 * MiB, 64 * MiB},
      {"block_pool",
       "block_pool",
       {{"block_size", "64KiB"}, {"pool_size", "4MiB"}, {"max_regions", "4"}},
       64 * KiB,
       64 * MiB},
      {"slab", "slab", {{"slab_size", "1MiB"}}, 64 * KiB, 64 * MiB},
      {"buddy", "buddy", {{"pool_size", "32MiB"}, {"min_block", "256"}}, 16 * MiB, 64 * MiB},
      {"arena", "arena", {{"reserve", "256MiB"}}, 4 * MiB, 64 * MiB},
      {"vmm_growable", "vmm_growable", {{"reserve", "256MiB"}}, 8 * MiB, 64 * MiB},
      {"caching.pow2", "caching", {{"preset", "pow2"}}, 8 * MiB, 64 * MiB},
      {"caching.pytorch", "caching", {{"preset", "pytorch"}}, 12 * MiB, 64 * MiB},
      {"stitching", "stitching", {}, 12 * MiB, 64 * MiB},
      {"device_bump", "device_bump", {{"capacity", "32MiB"}}, 2 * MiB, 64 * MiB},
      {"rmm_pool", "rmm_pool", {}, 8 * MiB, 64 * MiB},
      {"rmm_arena", "rmm_arena", {{"arena_size", "16MiB"}}, 4 * MiB, 64 * MiB},
      {"rmm_binning",
       "rmm_binning",
       {{"bins", "4KiB,16KiB,64KiB"}, {"blocks_to_preallocate", "8"}},
       8 * MiB,
       64 * MiB},
  };
}

}  // namespace vramscope::testing
