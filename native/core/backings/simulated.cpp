// The simulated backing. Deterministic: the same calls give the same addresses, every run.
#include <algorithm>

#include "vramscope/errors.hpp"
#include "vramscope/simulated_backing.hpp"

namespace vramscope {

namespace {
constexpr std::size_t address_space_size = std::size_t{1} << 50;  // 1 PiB of fake address space
constexpr std::size_t region_alignment = 512;
}  // namespace

simulated_backing::simulated_backing(const simulated_options& options)
    : options_(options), release_threshold_(options.async_release_threshold) {
  if (!is_power_of_two(options_.granularity) || options_.granularity < min_alignment)
    throw invalid_argument("simulated backing: granularity must be a power of two >= 256 B");
  free_space_.emplace(align_up(options_.base_address, 1 * GiB), address_space_size);
}

// --- address space: first fit, coalescing --------------------------------------------------------

address_t simulated_backing::take_address_space(std::size_t bytes, std::size_t alignment) {
  for (auto it = free_space_.begin(); it != free_space_.end(); ++it) {
    address_t start = align_up(it->first, alignment);
    address_t end = it->first + it->second;
    if (start + bytes > end) continue;
    address_t range_start = it->first;
    free_space_.erase(it);
    if (start > range_start) free_space_.emplace(range_start, start - range_start);
    if (start + bytes < end) free_space_.emplace(start + bytes, end - (start + bytes));
    return start;
  }
  throw out_of_memory(bytes, 0, "simulated backing: address space exhausted");
}

// Carves exactly [address, address + bytes) out of the free space; false when any of it is taken.
bool simulated_backing::take_address_space_at(address_t address, std::size_t bytes) {
  auto it = free_space_.upper_bound(address);
  if (it == free_space_.begin()) return false;
  --it;
  address_t range_start = it->first, range_end = it->first + it->second;
  if (address < range_start || address + bytes > range_end) return false;
  free_space_.erase(it);
  if (address > range_start) free_space_.emplace(range_start, address - range_start);
  if (address + bytes < range_end) free_space_.emplace(address + bytes, range_end - (address + bytes));
  return true;
}

void simulated_backing::give_address_space(address_t address, std::size_t bytes) {
  auto next = free_space_.lower_bound(address);
  if (next != free_space_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == address) {
      address = prev->first;
      bytes += prev->second;
      free_space_.erase(prev);
    }
  }
  if (next != free_space_.end() && address + bytes == next->first) {
    bytes += next->second;
    free_space_.erase(next);
  }
  free_space_.emplace(address, bytes);
}

void simulated_backing::charge(std::size_t bytes, const char* what) {
  if (bytes > available()) throw out_of_memory(bytes, available(), std::string("simulated device (") + what + ")");
  physical_used_ += bytes;
}

// --- regions ---------------------------------------------------------------------------------------

address_t simulated_backing::allocate_region(std::size_t bytes) {
  if (bytes == 0) throw invalid_argument("simulated backing: region of 0 bytes");
  charge(bytes, "cudaMalloc");
  address_t a;
  try {
    // Large regions start on a granule, as the driver places them; small ones pack.
    const std::size_t span = align_up(bytes, region_alignment);
    if (next_placement_ < options_.region_placement.size() &&
        take_address_space_at(options_.region_placement[next_placement_], span)) {
      a = options_.region_placement[next_placement_++];
    } else {
      if (next_placement_ < options_.region_placement.size()) ++next_placement_;
      a = take_address_space(span, bytes >= options_.granularity ? options_.granularity : region_alignment);
    }
  } catch (...) {
    physical_used_ -= bytes;
    throw;
  }
  regions_.emplace(a, bytes);
  ++calls_.region_alloc;
  return a;
}

void simulated_backing::free_region(address_t address, std::size_t bytes) {
  auto it = regions_.find(address);
  if (it == regions_.end() || it->second != bytes)
    throw invalid_free(address);
  regions_.erase(it);
  give_address_space(address, align_up(bytes, region_alignment));
  physical_used_ -= bytes;
  ++calls_.region_free;
}

// --- virtual memory ----------------------------------------------------------------------------------

address_t simulated_backing::reserve_address_space(std::size_t bytes, std::size_t alignment) {
  const std::size_t g = options_.granularity;
  if (bytes == 0 || bytes % g != 0)
    throw invalid_argument("simulated backing: address space size " + format_bytes(bytes) +
                           " is not a multiple of the granularity " + format_bytes(g));
  address_t a = take_address_space(bytes, std::max(alignment, g));
  reserved_.emplace(a, va_range{bytes, std::vector<bool>(bytes / g, false)});
  ++calls_.va_reserve;
  return a;
}

void simulated_backing::release_address_space(address_t address, std::size_t bytes) {
  auto it = reserved_.find(address);
  if (it == reserved_.end() || it->second.bytes != bytes) throw invalid_free(address);
  for (bool m : it->second.mapped)
    if (m) throw invalid_argument("simulated backing: releasing address space that is still mapped");
  reserved_.erase(it);
  give_address_space(address, bytes);
  ++calls_.va_release;
}

void simulated_backing::map(address_t address, std::size_t bytes) {
  const std::size_t g = options_.granularity;
  if (bytes == 0 || bytes % g != 0 || address % g != 0)
    throw invalid_argument("simulated backing: map of " + format_bytes(bytes) + " at " +
                           format_address(address) + " is not granule-aligned");
  auto it = reserved_.upper_bound(address);
  if (it == reserved_.begin()) throw invalid_argument("simulated backing: map outside reserved address space");
  --it;
  if (address + bytes > it->first + it->second.bytes)
    throw invalid_argument("simulated backing: map outside reserved address space");
  std::size_t first = (address - it->first) / g, count = bytes / g;
  for (std::size_t i = first; i < first + count; ++i)
    if (it->second.mapped[i]) throw invalid_argument("simulated backing: granule mapped twice");
  charge(bytes, "cuMemCreate");
  for (std::size_t i = first; i < first + count; ++i) it->second.mapped[i] = true;
  mapped_bytes_ += bytes;
  ++calls_.map;
}

void simulated_backing::unmap(address_t address, std::size_t bytes) {
  const std::size_t g = options_.granularity;
  auto it = reserved_.upper_bound(address);
  if (it == reserved_.begin() || bytes % g != 0 || address % g != 0)
    throw invalid_argument("simulated backing: unmap outside reserved address space");
  --it;
  if (address + bytes > it->first + it->second.bytes)
    throw invalid_argument("simulated backing: unmap outside reserved address space");
  std::size_t first = (address - it->first) / g, count = bytes / g;
  for (std::size_t i = first; i < first + count; ++i)
    if (!it->second.mapped[i]) throw invalid_argument("simulated backing: unmap of an unmapped granule");
  for (std::size_t i = first; i < first + count; ++i) it->second.mapped[i] = false;
  mapped_bytes_ -= bytes;
  physical_used_ -= bytes;
  ++calls_.unmap;
}

// --- stream-ordered pool: a model of cudaMemPool ---------------------------------------------------
// The pool obtains memory in granule multiples and keeps freed blocks for reuse (smallest cached
// block that fits). At each synchronization it releases cached memory above its release threshold,
// as the driver does. A documented approximation: on a GPU the real pool is used.

address_t simulated_backing::allocate_async(std::size_t bytes, stream_t) {
  const std::size_t need = align_up(bytes, options_.granularity);
  auto it = async_cached_.lower_bound(need);
  address_t a;
  std::size_t size;
  if (it != async_cached_.end() && it->first <= 2 * need) {
    size = it->first;
    a = it->second;
    async_cached_.erase(it);
  } else {
    if (need > available() && !async_cached_.empty()) async_sync_release();  // the driver trims on OOM
    charge(need, "cudaMallocAsync");
    try {
      a = take_address_space(need, options_.granularity);
    } catch (...) {
      physical_used_ -= need;
      throw;
    }
    size = need;
    async_stats_.reserved_current += size;
    async_stats_.reserved_high = std::max(async_stats_.reserved_high, async_stats_.reserved_current);
  }
  async_live_.emplace(a, size);
  async_stats_.used_current += size;
  async_stats_.used_high = std::max(async_stats_.used_high, async_stats_.used_current);
  ++calls_.async_alloc;
  return a;
}

void simulated_backing::free_async(address_t address, std::size_t, stream_t) {
  auto it = async_live_.find(address);
  if (it == async_live_.end()) throw invalid_free(address);
  async_cached_.emplace(it->second, address);
  async_stats_.used_current -= it->second;
  async_live_.erase(it);
  ++calls_.async_free;
}

void simulated_backing::set_release_threshold(std::uint64_t bytes) { release_threshold_ = bytes; }

void simulated_backing::trim_async_pool(std::size_t min_bytes_to_keep) {
  // Release the largest cached blocks first until at most min_bytes_to_keep stay reserved.
  while (!async_cached_.empty() && async_stats_.reserved_current > min_bytes_to_keep) {
    auto it = std::prev(async_cached_.end());
    give_address_space(it->second, it->first);
    physical_used_ -= it->first;
    async_stats_.reserved_current -= it->first;
    async_cached_.erase(it);
  }
}

void simulated_backing::async_sync_release() {
  if (async_stats_.reserved_current > release_threshold_) trim_async_pool(release_threshold_);
}

async_pool_stats simulated_backing::async_stats() const { return async_stats_; }

std::vector<simulated_backing::async_chunk> simulated_backing::async_chunks() const {
  std::vector<async_chunk> chunks;
  chunks.reserve(async_live_.size() + async_cached_.size());
  for (auto& [address, bytes] : async_live_) chunks.push_back({address, bytes, true});
  for (auto& [bytes, address] : async_cached_) chunks.push_back({address, bytes, false});
  std::sort(chunks.begin(), chunks.end(),
            [](const async_chunk& x, const async_chunk& y) { return x.address < y.address; });
  return chunks;
}

// --- events in logical time --------------------------------------------------------------------------

event_t simulated_backing::record_event(stream_t) {
  event_t e = next_event_++;
  events_.emplace(e, now_ns_ + options_.completion_delay_ns);
  ++calls_.event_record;
  return e;
}

bool simulated_backing::event_complete(event_t event) {
  auto it = events_.find(event);
  return it == events_.end() || it->second <= now_ns_;
}

void simulated_backing::wait_event(event_t event) {
  auto it = events_.find(event);
  if (it != events_.end() && it->second > now_ns_) now_ns_ = it->second;
  ++calls_.synchronize;
  async_sync_release();
}

void simulated_backing::release_event(event_t event) { events_.erase(event); }

void simulated_backing::synchronize() {
  for (auto& [e, t] : events_) now_ns_ = std::max(now_ns_, t);
  ++calls_.synchronize;
  async_sync_release();
}

}  // namespace vramscope
