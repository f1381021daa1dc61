// caching_pool: PoolConfig turned into the caching strategy's parameters, and the release
// threshold applied when deferred frees are processed.
#include "vramscope/pool.hpp"

namespace vramscope {

namespace {

constexpr std::size_t never_release = std::numeric_limits<std::size_t>::max();

params to_params(const PoolConfig& c) {
  params p{{"preset", c.preset},
           {"thread_safe", c.thread_safe ? "true" : "false"},
           {"max_reserved", std::to_string(c.max_pool_size)},
           {"release_threshold",
            std::to_string(c.release_threshold == never_release ? 0 : c.release_threshold)}};
  // Passed on for pow2 (or its former name), and for another preset only when set, so that it is
  // refused by name.
  if (c.preset == "pow2" || c.preset == "seed" || c.segment_size != PoolConfig{}.segment_size)
    p.set("segment_size", std::to_string(c.segment_size));
  return p;
}

}  // namespace

caching_pool::caching_pool(backing& device, const PoolConfig& config)
    : config_(config), alloc_(make_allocator("caching", device, to_params(config))) {
  if (config_.max_pool_size != 0 && config_.initial_pool_size > config_.max_pool_size)
    throw invalid_argument("PoolConfig: initial_pool_size (" +
                           format_bytes(config_.initial_pool_size) + ") exceeds max_pool_size (" +
                           format_bytes(config_.max_pool_size) + ")");
  if (config_.initial_pool_size != 0) {
    // One block of the initial size, freed at once, leaves its segment cached.
    alloc_->deallocate(alloc_->allocate(config_.initial_pool_size, 0), 0);
  }
}

void caching_pool::deallocate_async(void* ptr, stream_t stream) {
  alloc_->deallocate(ptr, stream);
  if (!config_.enable_deferred_frees) alloc_->synchronize_deferred();
}

std::size_t caching_pool::process_deferred() {
  std::size_t completed = alloc_->process_deferred();
  if (config_.release_threshold != never_release) alloc_->trim();
  return completed;
}

}  // namespace vramscope
