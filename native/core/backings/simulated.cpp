// The simulated backing. Deterministic: the same calls give the same addresses, every run.
#include <algorithm>

#include "vramscope/errors.hpp"
#include "vramscope/simulated_backing.hpp"

namespace vramscope {

namespace {
// Fake address space: at least 1 PiB above the first-fit start, and up to 2^53, the last address
// a double (and so a trace's columns) still holds exactly, so that regions up to 2^52 B fit.
constexpr std::size_t address_space_size = std::size_t{1} << 50;
constexpr address_t address_space_end = address_t{1} << 53;
constexpr std::size_t region_alignment = 512;
// Linux's default vm.mmap_min_addr: no driver places memory below it, so neither may a placement.
constexpr address_t lowest_placeable_address = 64 * KiB;
}  // namespace

simulated_backing::simulated_backing(const simulated_options& options)
    : options_(options),
      first_fit_start_(align_up(options.base_address, 1 * GiB)),
      release_threshold_(options.async_release_threshold) {
  if (!is_power_of_two(options_.granularity) || options_.granularity < min_alignment)
    throw invalid_argument("simulated backing: granularity must be a power of two >= 256 B");
  // The space below the first-fit start is free too: a recording's driver may have put regions
  // there (on the H100, cudaMalloc's regions went down from 0x7f005a800000 past 0x7f0000000000),
  // and such a placement must be honoured, or the region moves up and a policy breaking ties by
  // address (PyTorch's best fit) picks another segment than the recording did.
  const address_t space_start = std::min(first_fit_start_, lowest_placeable_address);
  free_space_.add(space_start,
                  std::max(address_space_end, first_fit_start_ + address_space_size) - space_start);
}

// --- fit_tree: a treap by address, each node holding its subtree's largest range ----------------------

void fit_tree::pull(std::int32_t t) noexcept {
  node& n = at(t);
  n.largest = n.bytes;
  if (n.left >= 0) n.largest = std::max(n.largest, at(n.left).largest);
  if (n.right >= 0) n.largest = std::max(n.largest, at(n.right).largest);
}

// Splits subtree t into the ranges below `address` and those at or above it.
void fit_tree::split(std::int32_t t, address_t address, std::int32_t& below, std::int32_t& rest) {
  if (t < 0) {
    below = rest = -1;
    return;
  }
  if (at(t).address < address) {
    split(at(t).right, address, at(t).right, rest);
    below = t;
  } else {
    split(at(t).left, address, below, at(t).left);
    rest = t;
  }
  pull(t);
}

// Joins two subtrees, every range of `low` below every range of `high`.
std::int32_t fit_tree::merge(std::int32_t low, std::int32_t high) {
  if (low < 0) return high;
  if (high < 0) return low;
  if (at(low).priority > at(high).priority) {
    at(low).right = merge(at(low).right, high);
    pull(low);
    return low;
  }
  at(high).left = merge(low, at(high).left);
  pull(high);
  return high;
}

std::int32_t fit_tree::descend(address_t address) {
  path_.clear();
  std::int32_t t = root_;
  while (t >= 0 && at(t).address != address) {
    path_.push_back(t);
    t = address < at(t).address ? at(t).left : at(t).right;
  }
  return t;
}

void fit_tree::pull_path() noexcept {
  for (auto p = path_.rbegin(); p != path_.rend(); ++p) pull(*p);
}

std::int32_t& fit_tree::link(std::int32_t parent, address_t address) noexcept {
  if (parent < 0) return root_;
  return address < at(parent).address ? at(parent).left : at(parent).right;
}

void fit_tree::insert(address_t address, std::size_t bytes) {
  seed_ ^= seed_ << 13;
  seed_ ^= seed_ >> 17;
  seed_ ^= seed_ << 5;
  std::int32_t t;
  if (!unused_.empty()) {
    t = unused_.back();
    unused_.pop_back();
  } else {
    t = static_cast<std::int32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  at(t) = {address, bytes, bytes, seed_, -1, -1};
  // Down to where the new node's priority puts it; the subtree found there is split around it.
  path_.clear();
  std::int32_t parent = -1, below = root_;
  while (below >= 0 && at(below).priority > seed_) {
    path_.push_back(below);
    parent = below;
    below = address < at(below).address ? at(below).left : at(below).right;
  }
  split(below, address, at(t).left, at(t).right);
  pull(t);
  link(parent, address) = t;
  pull_path();
}

void fit_tree::erase(address_t address) {
  const std::int32_t t = descend(address);
  if (t < 0) return;
  const std::int32_t joined = merge(at(t).left, at(t).right);
  const std::int32_t parent = path_.empty() ? -1 : path_.back();
  link(parent, address) = joined;
  unused_.push_back(t);
  pull_path();
}

void fit_tree::change(address_t address, address_t to, std::size_t bytes) {
  const std::int32_t t = descend(address);
  if (t < 0) return;
  at(t).address = to;
  at(t).bytes = bytes;
  pull(t);
  pull_path();
}

// --- address space: first fit from first_fit_start_, coalescing -------------------------------------

address_t simulated_backing::take_address_space(std::size_t bytes, std::size_t alignment) {
  // First fit: the lowest free range, from first_fit_start_ up, where `bytes` fit aligned. Only
  // placements go below first_fit_start_, so default addresses do not depend on them.
  const auto fits = [&](address_t range, std::size_t size) {
    const address_t start = align_up(std::max(range, first_fit_start_), alignment);
    return start + bytes <= range + size;
  };
  // From the range that reaches first_fit_start_ from below, if one does (ranges never overlap).
  address_t from = first_fit_start_;
  auto above = free_space_.upper_bound(first_fit_start_);
  if (above != free_space_.begin() &&
      std::prev(above)->first + std::prev(above)->second > first_fit_start_)
    from = std::prev(above)->first;
  auto found = free_space_.lowest_fitting(from, bytes, fits);
  if (found == free_space_.end())
    throw out_of_memory(bytes, 0, "simulated backing: address space exhausted");
  const address_t start = align_up(std::max(found->first, first_fit_start_), alignment);
  free_space_.carve(found, start, bytes);
  return start;
}

// Carves exactly [address, address + bytes) out of the free space; false when any of it is taken.
bool simulated_backing::take_address_space_at(address_t address, std::size_t bytes) {
  auto it = free_space_.upper_bound(address);
  if (it == free_space_.begin()) return false;
  --it;
  if (address < it->first || address + bytes > it->first + it->second) return false;
  free_space_.carve(it, address, bytes);
  return true;
}

void simulated_backing::give_address_space(address_t address, std::size_t bytes) {
  free_space_.give(address, bytes);
}

void simulated_backing::charge(std::size_t bytes, const char* what) {
  if (bytes > available())
    throw out_of_memory(bytes, available(), std::string("simulated device (") + what + ")");
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
      a = take_address_space(
          span, bytes >= options_.granularity ? options_.granularity : region_alignment);
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
  if (it == regions_.end() || it->second != bytes) throw invalid_free(address);
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
  reserved_.emplace(a, va_range{bytes, {}});
  ++calls_.va_reserve;
  return a;
}

void simulated_backing::release_address_space(address_t address, std::size_t bytes) {
  auto it = reserved_.find(address);
  if (it == reserved_.end() || it->second.bytes != bytes) throw invalid_free(address);
  if (!it->second.mapped.empty())
    throw invalid_argument("simulated backing: releasing address space that is still mapped");
  reserved_.erase(it);
  give_address_space(address, bytes);
  ++calls_.va_release;
}

namespace {
// The reservation [address, address + bytes) lies in, or end().
template <class Map>
typename Map::iterator reservation_of(Map& reserved, address_t address, std::size_t bytes) {
  auto it = reserved.upper_bound(address);
  if (it == reserved.begin()) return reserved.end();
  --it;
  if (address + bytes < address || address + bytes > it->first + it->second.bytes)
    return reserved.end();
  return it;
}
}  // namespace

void simulated_backing::map(address_t address, std::size_t bytes) {
  const std::size_t g = options_.granularity;
  if (bytes == 0 || bytes % g != 0 || address % g != 0)
    throw invalid_argument("simulated backing: map of " + format_bytes(bytes) + " at " +
                           format_address(address) + " is not granule-aligned");
  auto it = reservation_of(reserved_, address, bytes);
  if (it == reserved_.end())
    throw invalid_argument("simulated backing: map outside reserved address space");
  auto& mapped = it->second.mapped;
  // Mapped ranges are coalesced: only the one below and the one above can touch or overlap.
  auto next = mapped.lower_bound(address);
  const bool has_prev = next != mapped.begin();
  auto prev = has_prev ? std::prev(next) : mapped.end();
  if ((next != mapped.end() && next->first < address + bytes) ||
      (has_prev && prev->first + prev->second > address))
    throw invalid_argument("simulated backing: granule mapped twice");
  charge(bytes, "cuMemCreate");
  address_t start = address;
  std::size_t size = bytes;
  if (next != mapped.end() && next->first == address + bytes) {
    size += next->second;
    next = mapped.erase(next);
  }
  if (has_prev && prev->first + prev->second == address) prev->second += size;
  else mapped.emplace_hint(next, start, size);
  mapped_bytes_ += bytes;
  ++calls_.map;
}

void simulated_backing::unmap(address_t address, std::size_t bytes) {
  const std::size_t g = options_.granularity;
  auto it = bytes % g != 0 || address % g != 0 ? reserved_.end()
                                               : reservation_of(reserved_, address, bytes);
  if (it == reserved_.end())
    throw invalid_argument("simulated backing: unmap outside reserved address space");
  auto& mapped = it->second.mapped;
  // The one mapped range that holds the start must hold all of it (ranges are coalesced).
  auto holder = mapped.upper_bound(address);
  if (holder == mapped.begin() ||
      std::prev(holder)->first + std::prev(holder)->second < address + bytes)
    throw invalid_argument("simulated backing: unmap of an unmapped granule");
  --holder;
  const address_t start = holder->first, end = holder->first + holder->second;
  if (start < address) holder->second = address - start;
  else mapped.erase(holder);
  if (address + bytes < end) mapped.emplace(address + bytes, end - (address + bytes));
  mapped_bytes_ -= bytes;
  physical_used_ -= bytes;
  ++calls_.unmap;
}

// --- stream-ordered pool: a model of cudaMemPool ---------------------------------------------------
// Calibrated on an H100 (driver 580, CUDA 13; scripts/gpu/probe-mempool.cu): the pool obtains
// memory in chunks of 32 MiB, or the request rounded up to a multiple of 32 MiB; it places blocks,
// rounded to 512 B, at the lowest free address (a freed 8 MiB block serves a later 4 MiB request at
// the same address); at each synchronization it gives fully free chunks back to the device until
// it holds no more than its release threshold; trim releases them at once. The model counts used
// bytes at 512 B granularity (the driver's used counter reports requested bytes).

namespace {
constexpr std::size_t async_block_rounding = 512;
}

address_t simulated_backing::allocate_async(std::size_t bytes, stream_t) {
  // Past the device's memory nothing fits (and rounding near 2^64 would wrap).
  if (bytes > options_.capacity)
    throw out_of_memory(bytes, available(), "simulated device (cudaMallocAsync)");
  const std::size_t need = align_up(bytes == 0 ? 1 : bytes, async_block_rounding);
  address_t a = 0;
  // First fit: the lowest free range inside the chunks that holds the block.
  auto it = async_free_.lowest_fitting(0, need,
                                       [&](address_t, std::size_t size) { return size >= need; });
  const bool found = it != async_free_.end();
  if (found) {
    a = it->first;
    async_free_.carve(it, a, need);
  }
  if (!found) {
    std::size_t chunk = align_up(need, options_.async_chunk_size);
    if (chunk > available()) async_release_free_chunks(0);  // the driver trims on out-of-memory
    // Short of a whole chunk, take just the granules the block needs (a nearly full device).
    if (chunk > available()) chunk = align_up(need, options_.granularity);
    charge(chunk, "cudaMallocAsync");
    try {
      a = take_address_space(chunk, options_.granularity);
    } catch (...) {
      physical_used_ -= chunk;
      throw;
    }
    async_chunks_.emplace(a, chunk);
    if (chunk > need) async_free_.add(a + need, chunk - need);
    async_stats_.reserved_current += chunk;
    async_stats_.reserved_high =
        std::max(async_stats_.reserved_high, async_stats_.reserved_current);
  }
  async_live_.emplace(a, need);
  async_stats_.used_current += need;
  async_stats_.used_high = std::max(async_stats_.used_high, async_stats_.used_current);
  ++calls_.async_alloc;
  return a;
}

void simulated_backing::free_async(address_t address, std::size_t, stream_t) {
  auto it = async_live_.find(address);
  if (it == async_live_.end()) throw invalid_free(address);
  std::size_t bytes = it->second;
  async_stats_.used_current -= bytes;
  async_live_.erase(it);
  // Coalesce with free neighbours inside the same chunk.
  auto chunk = std::prev(async_chunks_.upper_bound(address));
  async_free_.give(address, bytes, chunk->first, chunk->first + chunk->second);
  ++calls_.async_free;
}

void simulated_backing::set_release_threshold(std::uint64_t bytes) { release_threshold_ = bytes; }

// Gives fully free chunks back, largest first, until at most `keep` bytes stay reserved.
void simulated_backing::async_release_free_chunks(std::size_t keep) {
  std::vector<std::pair<std::size_t, address_t>> empty;
  for (auto& [address, bytes] : async_chunks_) {
    auto f = async_free_.find(address);
    if (f != async_free_.end() && f->second == bytes) empty.emplace_back(bytes, address);
  }
  std::sort(empty.rbegin(), empty.rend());
  for (auto& [bytes, address] : empty) {
    if (async_stats_.reserved_current <= keep) break;
    async_free_.erase(async_free_.find(address));
    async_chunks_.erase(address);
    give_address_space(address, bytes);
    physical_used_ -= bytes;
    async_stats_.reserved_current -= bytes;
  }
}

void simulated_backing::trim_async_pool(std::size_t min_bytes_to_keep) {
  async_release_free_chunks(min_bytes_to_keep);
}

void simulated_backing::async_sync_release() {
  if (async_stats_.reserved_current > release_threshold_)
    async_release_free_chunks(release_threshold_);
}

async_pool_stats simulated_backing::async_stats() const { return async_stats_; }

std::vector<simulated_backing::async_chunk> simulated_backing::async_regions() const {
  std::vector<async_chunk> regions;
  regions.reserve(async_chunks_.size());
  for (auto& [address, bytes] : async_chunks_) regions.push_back({address, bytes, true});
  return regions;
}

std::vector<simulated_backing::async_chunk> simulated_backing::async_blocks() const {
  std::vector<async_chunk> blocks;
  blocks.reserve(async_live_.size() + async_free_.size());
  for (auto& [address, bytes] : async_live_) blocks.push_back({address, bytes, true});
  for (auto& [address, bytes] : async_free_.by_address()) blocks.push_back({address, bytes, false});
  std::sort(blocks.begin(), blocks.end(),
            [](const async_chunk& x, const async_chunk& y) { return x.address < y.address; });
  return blocks;
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
