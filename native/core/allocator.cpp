// The bookkeeping every strategy shares: live-block table, counters, deferred frees, regions.
#include "vramscope/allocator.hpp"

#include <algorithm>
#include <map>

namespace vramscope {

allocator::allocator(std::string name, backing& b, bool thread_safe)
    : name_(std::move(name)), backing_(b), thread_safe_(thread_safe) {}

allocator::~allocator() {
  // Events held by pending frees belong to the backing; give them back.
  for (auto& p : pending_)
    for (event_t e : p.events) backing_.release_event(e);
}

// --- memory from the backing, counted and traced -------------------------------------------------

address_t allocator::obtain_region(std::size_t bytes, std::uint32_t kind) {
  address_t a = backing_.allocate_region(bytes);
  ++own_calls_.region_alloc;
  note_reserved(static_cast<std::int64_t>(bytes));
  // Before the first allocation only (an initial pool): later regions come and go with requests,
  // and a replay without a layout never attaches a tracer.
  if (tracing()) trace(trace_op::region_reserve, a, bytes, 0, 0, kind);
  else if (allocations_ == 0)
    untraced_reservations_.push_back({trace_op::region_reserve, a, bytes, kind});
  return a;
}

void allocator::return_region(address_t address, std::size_t bytes, std::uint32_t kind) {
  backing_.free_region(address, bytes);
  ++own_calls_.region_free;
  note_reserved(-static_cast<std::int64_t>(bytes));
  if (!forget_untraced(trace_op::region_reserve, address))
    trace(trace_op::region_release, address, bytes, 0, 0, kind);
}

address_t allocator::reserve_address_space(std::size_t bytes, std::size_t alignment) {
  address_t a = backing_.reserve_address_space(bytes, alignment);
  ++own_calls_.va_reserve;
  address_space_ += bytes;
  if (tracing()) trace(trace_op::va_reserve, a, bytes);
  else untraced_reservations_.push_back({trace_op::va_reserve, a, bytes, 0});
  return a;
}

void allocator::release_address_space(address_t address, std::size_t bytes) {
  backing_.release_address_space(address, bytes);
  ++own_calls_.va_release;
  address_space_ -= bytes;
  if (!forget_untraced(trace_op::va_reserve, address)) trace(trace_op::va_release, address, bytes);
}

bool allocator::forget_untraced(trace_op op, address_t address) {
  if (untraced_reservations_.empty()) return false;
  auto untraced = std::find_if(
      untraced_reservations_.begin(), untraced_reservations_.end(),
      [&](const untraced_reservation& r) { return r.op == op && r.address == address; });
  if (untraced == untraced_reservations_.end()) return false;
  untraced_reservations_.erase(untraced);
  return true;
}

void allocator::set_tracer(tracer* t) {
  tracer_ = t;
  if (t == nullptr) return;
  for (const untraced_reservation& r : untraced_reservations_)
    trace(r.op, r.address, r.bytes, 0, 0, r.kind);
  untraced_reservations_.clear();
}

void allocator::map_range(address_t address, std::size_t bytes) {
  backing_.map(address, bytes);
  ++own_calls_.map;
  note_reserved(static_cast<std::int64_t>(bytes));
  trace(trace_op::map, address, bytes);
}

void allocator::unmap_range(address_t address, std::size_t bytes) {
  // cudaFree waits for the device; cuMemUnmap does not. Kernels queued on a block freed just before
  // (a verify, then the free) would then read unmapped memory and fault, so wait first. The whole
  // device: blocks of several streams may have shared the range.
  backing_.synchronize();
  ++own_calls_.synchronize;
  backing_.unmap(address, bytes);
  ++own_calls_.unmap;
  note_reserved(-static_cast<std::int64_t>(bytes));
  trace(trace_op::unmap, address, bytes);
}

void allocator::remap_range(address_t from, address_t to, std::size_t bytes) {
  // As unmap_range: work queued on the old addresses must be done before they are unmapped.
  backing_.synchronize();
  ++own_calls_.synchronize;
  backing_.remap(from, to, bytes);
  ++own_calls_.unmap;
  ++own_calls_.map;
  trace(trace_op::unmap, from, bytes);
  trace(trace_op::map, to, bytes);
}

void allocator::note_reserved(std::int64_t delta_bytes) noexcept {
  reserved_live_ =
      static_cast<std::uint64_t>(static_cast<std::int64_t>(reserved_live_) + delta_bytes);
  if (reserved_live_ > reserved_peak_) reserved_peak_ = reserved_live_;
}

void allocator::fail(std::size_t requested, std::size_t available, const char* why) const {
  throw out_of_memory(requested, available, name_ + ": " + why);
}

// --- slow paths of allocate / deallocate ----------------------------------------------------------

bool allocator::complete_pending_frees(stream_t stream) {
  // Blocks waiting on other streams' events may be what stands between a request and success: wait
  // for them (as PyTorch does before reporting out-of-memory), so that the caller can try once more.
  if (pending_.empty()) return false;
  for (auto& p : pending_)
    for (event_t e : p.events) backing_.wait_event(e);
  ++own_calls_.synchronize;
  process_deferred_unlocked();
  if (stream != reuse_stream_) switch_reuse_stream(stream);  // blocks just completed
  return true;
}

allocation allocator::allocate_after_failure(std::size_t bytes, stream_t stream,
                                             const out_of_memory& first, std::uint32_t& cookie) {
  if (complete_pending_frees(stream)) {
    try {
      return do_allocate(bytes, stream, cookie);
    } catch (const out_of_memory& again) {
      ++failures_;
      trace(trace_op::failure, 0, bytes, bytes, stream);
      throw again;
    }
  }
  ++failures_;
  trace(trace_op::failure, 0, bytes, bytes, stream);
  throw first;
}

allocation allocator::try_after_refusal(std::size_t bytes, stream_t stream, std::uint32_t& cookie) {
  if (complete_pending_frees(stream)) {
    cookie = 0;
    const allocation a = try_do_allocate(bytes, stream, cookie);
    if (a.address != refused) return a;
  }
  ++failures_;
  trace(trace_op::failure, 0, bytes, bytes, stream);
  return {refused, 0};
}

void allocator::reject_free(address_t address) const {
  if (pending_index_.find(address) != nullptr || do_was_freed(address)) throw double_free(address);
  throw invalid_free(address);
}

void allocator::undo_free(address_t address, std::uint64_t requested, std::uint64_t rounded,
                          std::uint32_t cookie, stream_t stream) {
  // Only a block freed on its own stream with no other streams gets here (deallocate_unlocked).
  live_.insert_new(address, live_block{requested, rounded, stream, 0, cookie});
  requested_live_ += requested;
  rounded_live_ += rounded;
}

void allocator::defer_free(address_t address, const live_block& live, stream_t stream) {
  const live_block block = live;  // `live` is in the table, which the erase below changes
  pending_free p{address, block, {}};
  // Work queued so far on the freeing stream, and on every stream the block was recorded on, must
  // finish before the block may be reused on its own stream.
  if (stream != block.stream) p.events.push_back(backing_.record_event(stream));
  if (block.other_streams != 0) {
    auto& extra = extra_streams_[block.other_streams - 1];
    for (stream_t s : extra)
      if (s != block.stream) p.events.push_back(backing_.record_event(s));
    extra.clear();
    free_extra_slots_.push_back(block.other_streams - 1);
    p.block.other_streams = 0;
  }
  own_calls_.event_record += p.events.size();
  live_.erase(address);
  // The program is done with the block: it leaves the live counters now, and waits as pending.
  requested_live_ -= block.requested;
  rounded_live_ -= block.rounded;
  pending_bytes_ += block.rounded;
  pending_.push_back(std::move(p));
  pending_index_.insert(address, static_cast<std::uint32_t>(pending_.size()));
  trace(trace_op::free_pending, address, block.rounded, block.requested, stream);
  if (pending_.back().events.empty()) process_deferred_unlocked();
}

// --- reuse across streams of blocks freed on their own stream --------------------------------------
//
// A block freed on its own stream goes back to the strategy at once, and most strategies know
// nothing of streams: the next allocation, on any stream, may get it while kernels on it are still
// queued on the freeing stream. Reuse on that stream is ordered by the stream itself; reuse on
// another is not (a fill on B overwrote a verify still queued on A). So an allocation on a stream
// other than reuse_stream_ first waits for every other stream freed on since its last wait: the
// cost falls on stream switches, and the warm same-stream pair pays one compare each way. Frees
// on reuse_stream_ itself are not noted one by one: a change of the deallocation count since the
// switch says there were some.

void allocator::switch_reuse_stream(stream_t stream) {
  if (fence_stream_switches_) {
    const std::uint64_t freed = allocations_ - live_.size() - dropped_by_reset_;
    if (freed != frees_at_switch_) {
      note_unfenced(last_reuse_stream_);
      frees_at_switch_ = freed;
    }
    // The new stream's own frees stay noted: they need a wait once another stream allocates.
    for (std::size_t i = 0; i < unfenced_streams_.size();) {
      if (unfenced_streams_[i] == stream) {
        ++i;
        continue;
      }
      fence(unfenced_streams_[i]);
      unfenced_streams_[i] = unfenced_streams_.back();
      unfenced_streams_.pop_back();
    }
  }
  reuse_stream_ = last_reuse_stream_ = stream;
}

void allocator::note_free_off_reuse_stream(stream_t stream) {
  if (!fence_stream_switches_) return;
  note_unfenced(stream);
  reuse_stream_ = no_stream;  // the next allocation, on any stream, goes through the switch
}

void allocator::note_unfenced(stream_t stream) {
  if (std::find(unfenced_streams_.begin(), unfenced_streams_.end(), stream) ==
      unfenced_streams_.end())
    unfenced_streams_.push_back(stream);
}

void allocator::fence(stream_t stream) {
  const event_t e = backing_.record_event(stream);
  ++own_calls_.event_record;
  try {
    backing_.wait_event(e);
  } catch (...) {
    backing_.release_event(e);
    throw;
  }
  backing_.release_event(e);
  ++own_calls_.synchronize;
}

void allocator::record_stream(void* ptr, stream_t stream) {
  maybe_lock guard(mutex_, thread_safe_);
  address_t address = reinterpret_cast<address_t>(ptr);
  live_block* block = live_.find(address);
  if (block == nullptr) reject_free(address);
  if (stream == block->stream) return;
  if (block->other_streams == 0) {
    std::uint32_t slot;
    if (!free_extra_slots_.empty()) {
      slot = free_extra_slots_.back();
      free_extra_slots_.pop_back();
    } else {
      slot = static_cast<std::uint32_t>(extra_streams_.size());
      extra_streams_.emplace_back();
    }
    block->other_streams = slot + 1;
  }
  auto& extra = extra_streams_[block->other_streams - 1];
  if (std::find(extra.begin(), extra.end(), stream) == extra.end()) extra.push_back(stream);
}

std::size_t allocator::process_deferred() {
  maybe_lock guard(mutex_, thread_safe_);
  return process_deferred_unlocked();
}

void allocator::synchronize_deferred() {
  maybe_lock guard(mutex_, thread_safe_);
  for (auto& p : pending_)
    for (event_t e : p.events) backing_.wait_event(e);
  if (!pending_.empty()) ++own_calls_.synchronize;
  process_deferred_unlocked();
}

std::size_t allocator::process_deferred_unlocked() {
  std::size_t completed = 0;
  // In order of freeing, so that replay is deterministic.
  std::size_t i = 0;
  while (i < pending_.size()) {
    auto& p = pending_[i];
    bool done = true;
    for (event_t e : p.events)
      if (!backing_.event_complete(e)) {
        done = false;
        break;
      }
    if (!done) {
      ++i;
      continue;
    }
    complete_pending(i);
    ++completed;
  }
  return completed;
}

void allocator::complete_pending(std::size_t index) {
  pending_free p = std::move(pending_[index]);
  pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(index));
  pending_index_.erase(p.address);
  for (std::size_t j = index; j < pending_.size(); ++j)
    pending_index_.insert(pending_[j].address, static_cast<std::uint32_t>(j + 1));
  for (event_t e : p.events) backing_.release_event(e);
  pending_bytes_ -= p.block.rounded;
  // The other streams' events are complete, not necessarily the block's own stream's work: it is
  // a free on that stream now.
  if (fence_stream_switches_) {
    note_unfenced(p.block.stream);
    if (p.block.stream != reuse_stream_) reuse_stream_ = no_stream;
  }
  do_deallocate(p.address, p.block.rounded, p.block.cookie, p.block.stream);
  trace(trace_op::free_completed, p.address, p.block.rounded, p.block.requested, p.block.stream);
}

// --- stats and structure ---------------------------------------------------------------------------

std::size_t allocator::requested_size(const void* ptr) const {
  maybe_lock guard(mutex_, thread_safe_);
  const live_block* b = live_.find(reinterpret_cast<address_t>(ptr));
  return b ? b->requested : 0;
}

allocator::free_summary allocator::do_free_summary() const {
  // Collect free runs, merge neighbours, and measure: free bytes and the largest free block of
  // docs/architecture.md#external-fragmentation.
  struct collector final : layout_visitor {
    std::vector<std::pair<address_t, std::uint64_t>> free_runs;
    std::uint64_t unusable = 0;
    void region(const region_info&) override {}
    void block(const block_info& b) override {
      if (b.state == block_state::free) free_runs.emplace_back(b.address, b.size);
      if (b.state == block_state::unusable) unusable += b.size;
    }
  } c;
  do_walk(c);
  std::sort(c.free_runs.begin(), c.free_runs.end());
  free_summary s;
  s.unusable_bytes = c.unusable;
  address_t run_start = 0;
  std::uint64_t run_size = 0;
  for (auto& [a, n] : c.free_runs) {
    s.free_bytes += n;
    if (run_size != 0 && run_start + run_size == a) {
      run_size += n;
    } else {
      run_start = a;
      run_size = n;
    }
    s.largest_free_block = std::max(s.largest_free_block, run_size);
  }
  return s;
}

allocator_stats allocator::stats() const {
  maybe_lock guard(mutex_, thread_safe_);
  allocator_stats s;
  s.requested_live = requested_live_;
  s.requested_peak = requested_peak_;
  s.rounded_live = rounded_live_;
  s.rounded_peak = rounded_peak_;
  s.reserved_live = reserved_live_;
  s.reserved_peak = reserved_peak_;
  s.address_space = address_space_;
  s.pending_bytes = pending_bytes_;
  free_summary f = do_free_summary();
  s.free_bytes = f.free_bytes;
  s.largest_free_block = f.largest_free_block;
  s.unusable_bytes = f.unusable_bytes;
  s.external_fragmentation = f.free_bytes == 0 ? 0.0
                                               : 1.0 - static_cast<double>(f.largest_free_block) /
                                                           static_cast<double>(f.free_bytes);
  s.live_blocks = live_.size();
  s.pending_blocks = pending_.size();
  s.allocations = allocations_;
  s.deallocations = allocations_ - live_.size() - dropped_by_reset_;
  s.failures = failures_;
  s.device_calls = own_calls_;
  return s;
}

void allocator::walk(layout_visitor& visitor) const {
  maybe_lock guard(mutex_, thread_safe_);
  struct relabel final : layout_visitor {
    const allocator& self;
    layout_visitor& out;
    relabel(const allocator& a, layout_visitor& v) : self(a), out(v) {}
    void region(const region_info& r) override { out.region(r); }
    void block(const block_info& b) override {
      if (b.state == block_state::live && self.pending_index_.find(b.address) != nullptr) {
        block_info p = b;
        p.state = block_state::pending;
        out.block(p);
      } else {
        out.block(b);
      }
    }
  } r(*this, visitor);
  do_walk(r);
}

bool allocator::do_was_freed(address_t) const { return false; }

void allocator::do_seed(const seed_state&, std::vector<seeded_block>&) {
  throw unsupported(name_ + " cannot start from a recorded state");
}

std::vector<address_t> allocator::seed(const seed_state& state) {
  maybe_lock guard(mutex_, thread_safe_);
  if (allocations_ != 0)
    throw invalid_argument(name_ + ": a recorded state seeds a fresh allocator only");
  std::vector<seeded_block> seeded;
  seeded.reserve(state.blocks.size());
  do_seed(state, seeded);
  std::vector<address_t> addresses;
  addresses.reserve(seeded.size());
  for (std::size_t i = 0; i < seeded.size(); ++i) {
    const seed_block& b = state.blocks[i];
    const seeded_block& s = seeded[i];
    live_.insert_new(s.address, live_block{b.requested, s.rounded, b.stream, 0, s.cookie});
    requested_live_ += b.requested;
    rounded_live_ += s.rounded;
    ++allocations_;
    trace(trace_op::alloc, s.address, s.rounded, b.requested, b.stream);
    addresses.push_back(s.address);
  }
  if (requested_live_ > requested_peak_) requested_peak_ = requested_live_;
  if (rounded_live_ > rounded_peak_) rounded_peak_ = rounded_live_;
  return addresses;
}

void allocator::trim() {
  maybe_lock guard(mutex_, thread_safe_);
  do_trim();
}

void allocator::do_plan(const std::vector<block_lifetime>&) {
  throw unsupported(name_ + " does not plan ahead");
}

void allocator::plan(const std::vector<block_lifetime>& blocks) {
  maybe_lock guard(mutex_, thread_safe_);
  if (allocations_ != 0)
    throw invalid_argument(name_ + ": a plan is given before the first allocation only");
  do_plan(blocks);
}

void allocator::do_reset() { throw unsupported(name_ + " does not support reset()"); }

void allocator::reset() {
  maybe_lock guard(mutex_, thread_safe_);
  if (!do_supports_reset()) throw unsupported(name_ + " does not support reset()");
  for (auto& p : pending_)
    for (event_t e : p.events) backing_.release_event(e);
  pending_.clear();
  pending_index_.clear();
  do_reset();
  dropped_by_reset_ += live_.size();
  live_.clear();
  extra_streams_.clear();
  free_extra_slots_.clear();
  requested_live_ = rounded_live_ = pending_bytes_ = 0;
  trace(trace_op::reset, 0, 0);
}

}  // namespace vramscope
