// The replay engine: one loop over the request events per target, reading the allocator's running
// counters after every event (O(1)), keeping them per bucket (min/max/last), and walking the
// strategy's blocks for external fragmentation only at bucket ends and reserved peaks, within a
// budget of visited blocks so that a strategy with many small blocks cannot make replay quadratic.
#include "vramscope/replay.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "vramscope/simulated_backing.hpp"
#include "vramscope/thread_pool.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace vramscope {
namespace {

constexpr std::size_t max_first_failures = 16;
constexpr double max_exact_double = 9007199254740992.0;  // 2^53

std::string at_event(std::size_t i) { return "event " + std::to_string(i); }

// The output columns and the id table are tens of megabytes written once, front to back: with 4 KiB
// pages, taking a page fault every hundred events cost as much as the strategy itself. Asking for
// transparent huge pages where the kernel leaves it to the program (Linux "madvise" mode) makes
// that a fault every 2 MiB. Only a hint: nothing depends on it being honoured.
template <class T>
void reserve_huge(std::vector<T>& v, std::size_t n) {
  v.reserve(n);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t huge = std::uintptr_t{2} << 20;
  const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(v.data());
  const std::uintptr_t first = (begin + huge - 1) & ~(huge - 1);
  const std::uintptr_t last = (begin + v.capacity() * sizeof(T)) & ~(huge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
}

// reserve_huge for a column that already holds values: a new reserve asked for in huge pages
// before the values are copied in (std::vector's own growth would touch its new pages first).
template <class T>
void grow_huge(std::vector<T>& v, std::size_t n) {
  if (n <= v.capacity()) return;
  std::vector<T> grown;
  reserve_huge(grown, n);
  grown.insert(grown.end(), v.begin(), v.end());
  v.swap(grown);
}

// Calls f on each of the layout's columns.
template <class F>
void each_column(replay_layout& l, F&& f) {
  f(l.op);
  f(l.address);
  f(l.size);
  f(l.requested);
  f(l.stream);
  f(l.aux);
  f(l.event);
}

// Rethrows the exception being handled with `context` (the target, the event) in its message,
// keeping its code, and for out-of-memory its sizes.
[[noreturn]] void rethrow_in_context(const std::string& context) {
  try {
    throw;
  } catch (const replay_cancelled&) {
    throw;
  } catch (const out_of_memory& e) {
    // "out of memory: WHERE: requested ..., ... available" -> keep WHERE only, the rest is rebuilt.
    std::string where = e.what();
    const std::string prefix = "out of memory: ";
    if (where.compare(0, prefix.size(), prefix) == 0) where.erase(0, prefix.size());
    const auto sizes = where.rfind(": requested ");
    if (sizes != std::string::npos) where.erase(sizes);
    throw out_of_memory(e.requested(), e.available(), context + ": " + where);
  } catch (const error& e) {
    const std::string message = context + ": " + e.what();
    if (e.code() == error_code::invalid_argument) throw invalid_argument(message);
    if (e.code() == error_code::unsupported) throw unsupported(message);
    throw error(e.code(), message);
  }
}

// Checks what the loop trusts and returns the size of the id table (largest alloc id + 1).
std::size_t check_columns(const request_columns& e) {
  if (e.count == 0) return 0;
  if (!e.kind || !e.id || !e.size || !e.stream)
    throw invalid_argument("replay: the kind, id, size and stream columns are required");
  if (e.count >= std::numeric_limits<std::uint32_t>::max())
    throw invalid_argument("replay: at most 2^32 - 2 events, got " + std::to_string(e.count));
  std::uint32_t max_alloc_id = 0;
  bool any_alloc = false;
  for (std::size_t i = 0; i < e.count; ++i) {
    const std::uint8_t kind = e.kind[i];
    if (kind > static_cast<std::uint8_t>(request_kind::trim))
      throw invalid_argument("replay: " + at_event(i) + " has kind " + std::to_string(kind) +
                             " (0 alloc, 1 free, 2 marker, 3 oom, 4 trim)");
    if (kind == static_cast<std::uint8_t>(request_kind::alloc)) {
      const double size = e.size[i];
      if (!(size >= 0 && size < max_exact_double) ||
          static_cast<double>(static_cast<std::uint64_t>(size)) != size)
        throw invalid_argument("replay: " + at_event(i) + " asks for " + std::to_string(size) +
                               " bytes (a whole number below 2^53 is needed)");
      // Ids are dense from 0, so no alloc id reaches the number of events.
      if (e.id[i] >= e.count)
        throw invalid_argument("replay: " + at_event(i) + " allocates id " +
                               std::to_string(e.id[i]) +
                               ", but ids must be dense from 0 (below the event count " +
                               std::to_string(e.count) + ")");
      max_alloc_id = std::max(max_alloc_id, e.id[i]);
      any_alloc = true;
    }
    if (e.time && !(e.time[i] >= 0 && e.time[i] < 1.8e19))
      throw invalid_argument("replay: " + at_event(i) + " has time " + std::to_string(e.time[i]) +
                             " ns (a non-negative number is needed)");
  }
  return any_alloc ? std::size_t{max_alloc_id} + 1 : 0;
}

// Collects every event the strategy reports into the layout columns, tagged with the request event
// being replayed. The allocator writes into a small inline buffer (no virtual call); the replay
// moves it into the columns after each request event, when it knows which event that was.
class layout_tracer final : public tracer {
 public:
  layout_tracer(replay_layout& out, bool structure_events)
      : out_(out), buffer_(256), structure_events_(structure_events) {
    rewind();
  }
  std::uint32_t event = 0;  // the request event being replayed

  // After each request event: what it caused goes to the columns.
  void drain() {
    const trace_event* end = buffer_cursor();
    if (end == buffer_.data()) return;
    // Past the reserve (a strategy that reports more than the expected events per request: caching
    // splits and merges, ~2.3 a request): twice as much again, also asked for in huge pages, rather
    // than each column's own growth into plain pages.
    const std::size_t need = out_.op.size() + static_cast<std::size_t>(end - buffer_.data());
    if (need > out_.op.capacity()) {
      const std::size_t grown = std::max(need, out_.op.capacity() * 2);
      each_column(out_, [grown](auto& column) { grow_huge(column, grown); });
    }
    for (const trace_event* e = buffer_.data(); e != end; ++e) {
      if (!structure_events_ && (e->op == trace_op::split || e->op == trace_op::merge)) continue;
      out_.op.push_back(static_cast<std::uint8_t>(e->op));
      out_.address.push_back(e->address);
      out_.size.push_back(static_cast<double>(e->size));
      out_.requested.push_back(static_cast<double>(e->requested));
      out_.stream.push_back(e->stream == 0 ? replay_no_stream
                                           : static_cast<std::uint32_t>(e->stream - 1));
      out_.aux.push_back(e->aux);
      out_.event.push_back(event);
    }
    rewind();
  }

  // One request event filled the buffer (a reset, a trim of many regions): drain and go on.
  void record(const trace_event& e) override {
    drain();
    append(e);
  }

 private:
  void rewind() noexcept { set_buffer(buffer_.data(), buffer_.data() + buffer_.size()); }

  replay_layout& out_;
  std::vector<trace_event> buffer_;
  const bool structure_events_;
};

// Free bytes inside reserved memory and the largest contiguous run of them, by the definition of
// docs/architecture.md#external-fragmentation that allocator::stats() follows (adjacent free
// blocks form one run, across regions too). Blocks usually come in address order: then runs are
// merged as they come; otherwise they are sorted first.
class free_space_meter final : public layout_visitor {
 public:
  struct result {
    std::uint64_t free_bytes = 0;
    std::uint64_t largest_free_block = 0;
    std::uint64_t visited = 0;
    double external_fragmentation() const {
      return free_bytes == 0
                 ? 0.0
                 : 1.0 - static_cast<double>(largest_free_block) / static_cast<double>(free_bytes);
    }
  };

  result measure(const allocator& a) {
    free_.clear();
    visited_ = 0;
    ordered_ = true;
    a.walk(*this);
    if (!ordered_) std::sort(free_.begin(), free_.end());
    result r;
    r.visited = visited_;
    address_t run_start = 0;
    std::uint64_t run_size = 0;
    for (auto& [address, bytes] : free_) {
      r.free_bytes += bytes;
      if (run_size != 0 && run_start + run_size == address) {
        run_size += bytes;
      } else {
        run_start = address;
        run_size = bytes;
      }
      r.largest_free_block = std::max(r.largest_free_block, run_size);
    }
    return r;
  }

 private:
  void region(const region_info&) override {}
  void block(const block_info& b) override {
    ++visited_;
    if (b.state != block_state::free) return;
    if (!free_.empty()) {
      auto& last = free_.back();
      // Neighbouring free slots of one slab or pool come one after another: one run, so that a
      // walk out of address order sorts runs rather than every free block.
      if (last.first + last.second == b.address) {
        last.second += b.size;
        return;
      }
      if (b.address < last.first) ordered_ = false;
    }
    free_.emplace_back(b.address, b.size);
  }

  std::vector<std::pair<address_t, std::uint64_t>> free_;
  std::uint64_t visited_ = 0;
  bool ordered_ = true;
};

enum class id_state : std::uint8_t { never, live, failed, freed, zero_size };

struct id_slot {
  address_t address = 0;
  std::uint32_t epoch = 0;  // the reset epoch it was allocated in; older: dropped by a reset
  id_state state = id_state::never;
};

// One strategy being replayed: its backing, the allocator, and which id holds which block. Both
// the recorded run and the bare re-run to the peak go through apply(), so they cannot disagree.
class player {
 public:
  player(const replay_target& target, const replay_options& options, std::size_t ids)
      : reset_at_markers_(options.reset_at_markers), initial_(target.initial_state) {
    reserve_huge(ids_, ids);
    ids_.resize(ids);
    simulated_options o = target.simulated;
    if (options.capacity != 0) o.capacity = options.capacity;
    backing_ = make_simulated_backing(o);
    try {
      allocator_ = make_allocator(target.strategy, *backing_, target.parameters);
      needs_plan_ = find_strategy(target.strategy).needs_plan;
    } catch (const error&) {
      rethrow_in_context("target '" + target.label + "'");
    }
  }

  allocator& alloc() noexcept { return *allocator_; }

  // A strategy that plans ahead (strategy_traits::needs_plan) is told, before event 0, every block
  // apply() will ask it for, in that order, each with the events it is live over: the planning
  // pass, one look at every event.
  void plan(const request_columns& e) {
    if (!needs_plan_) return;
    constexpr std::uint32_t none = 0xFFFFFFFFu;
    std::vector<std::uint32_t> block_of(ids_.size(), none);
    std::vector<block_lifetime> blocks;
    const auto end = static_cast<std::uint32_t>(e.count);
    for (std::size_t i = 0; i < e.count; ++i) {
      const auto kind = static_cast<request_kind>(e.kind[i]);
      if (kind == request_kind::alloc) {
        const auto bytes = static_cast<std::uint64_t>(e.size[i]);
        // An alloc of an id still live leaves the older block live to the end, as apply() does.
        block_of[e.id[i]] = bytes == 0 ? none : static_cast<std::uint32_t>(blocks.size());
        if (bytes != 0) blocks.push_back({bytes, static_cast<std::uint32_t>(i), end});
      } else if (kind == request_kind::free && e.id[i] < block_of.size() &&
                 block_of[e.id[i]] != none) {
        blocks[block_of[e.id[i]]].end = static_cast<std::uint32_t>(i);
        block_of[e.id[i]] = none;
      }
    }
    allocator_->plan(blocks);
  }

  // Starts the allocator from the target's initial state, before event 0: its blocks live under
  // the ids of their stand-in alloc events, which apply() then passes over.
  void seed(const request_columns& e, replay_summary& s) {
    if (initial_.empty()) return;
    seed_state state;
    state.segments.reserve(initial_.segments.size());
    for (const replay_initial_segment& g : initial_.segments)
      state.segments.push_back(
          {g.address, g.size, replay_stream(g.stream), g.pool, g.small_pool, g.expandable});
    state.blocks.reserve(initial_.blocks.size());
    seeded_events_.reserve(initial_.blocks.size());
    // Segments by address, for the pool each private-pool block's segment has.
    std::vector<std::size_t> by_address(initial_.segments.size());
    for (std::size_t k = 0; k < by_address.size(); ++k) by_address[k] = k;
    std::sort(by_address.begin(), by_address.end(), [&](std::size_t a, std::size_t b) {
      return initial_.segments[a].address < initial_.segments[b].address;
    });
    for (std::size_t k = 0; k < initial_.blocks.size(); ++k) {
      const replay_initial_block& b = initial_.blocks[k];
      if (b.event >= e.count || e.kind[b.event] != static_cast<std::uint8_t>(request_kind::alloc) ||
          e.size[b.event] == 0)
        throw invalid_argument("replay: initial block " + std::to_string(k) + " names " +
                               at_event(b.event) + ", which is not an alloc of some bytes");
      const auto requested = static_cast<std::uint64_t>(e.size[b.event]);
      if (e.pool != nullptr && e.pool[b.event] != 0) {
        // Its segment's pool decides; the request's must agree.
        auto after = std::upper_bound(
            by_address.begin(), by_address.end(), b.address,
            [&](address_t a, std::size_t k) { return a < initial_.segments[k].address; });
        const replay_initial_segment* g =
            after == by_address.begin() ? nullptr : &initial_.segments[*std::prev(after)];
        const bool agrees =
            g != nullptr && b.address - g->address < g->size && g->pool == e.pool[b.event];
        if (!agrees)
          throw invalid_argument("replay: initial block " + std::to_string(k) + " lies in no " +
                                 "segment of its alloc's pool " + std::to_string(e.pool[b.event]));
      }
      state.blocks.push_back({b.address, b.size, requested, replay_stream(e.stream[b.event])});
      seeded_events_.push_back(b.event);
    }
    std::sort(seeded_events_.begin(), seeded_events_.end());
    for (std::size_t k = 1; k < seeded_events_.size(); ++k)
      if (seeded_events_[k] == seeded_events_[k - 1])
        throw invalid_argument("replay: two initial blocks name " + at_event(seeded_events_[k]));
    const std::vector<address_t> addresses = allocator_->seed(state);
    for (std::size_t k = 0; k < addresses.size(); ++k) {
      const std::uint32_t event = initial_.blocks[k].event;
      ids_[e.id[event]] = {addresses[k], epoch_, id_state::live};
    }
    live_ += addresses.size();
    s.seeded_segments = initial_.segments.size();
    s.seeded_blocks = addresses.size();
  }

  // Replays event i; summary counts what happened to it.
  void apply(const request_columns& e, std::size_t i, replay_summary& s) {
    if (e.time) backing_->set_time(static_cast<std::uint64_t>(e.time[i]));
    switch (static_cast<request_kind>(e.kind[i])) {
      case request_kind::alloc: {
        ++s.allocs;
        if (VRAMSCOPE_UNLIKELY(e.pool != nullptr && e.pool[i] != pool_)) {
          pool_ = e.pool[i];
          allocator_->use_pool(pool_);
        }
        if (VRAMSCOPE_UNLIKELY(next_seeded_ < seeded_events_.size() &&
                               seeded_events_[next_seeded_] == i)) {
          ++next_seeded_;  // its block is the initial state's, live since before event 0
          return;
        }
        id_slot& slot = ids_[e.id[i]];
        if (VRAMSCOPE_UNLIKELY(slot.state == id_state::live && slot.epoch == epoch_))
          ++s.reused_live_ids;
        const std::size_t bytes = static_cast<std::size_t>(e.size[i]);
        if (VRAMSCOPE_UNLIKELY(bytes == 0)) {
          ++s.zero_size_allocs;
          slot = {0, epoch_, id_state::zero_size};
          return;
        }
        // A request that does not fit is an answer here, not an error: no exception per failure
        // (under a limit most requests of a large trace may fail, each grid cell many times).
        const address_t address = reinterpret_cast<address_t>(
            allocator_->try_allocate(bytes, replay_stream(e.stream[i])));
        if (VRAMSCOPE_UNLIKELY(address == 0)) {
          note_failure(i, bytes, slot, s);
          return;
        }
        slot.address = address;
        slot.epoch = epoch_;
        slot.state = id_state::live;
        ++live_;
        return;
      }
      case request_kind::free: {
        ++s.frees;
        const std::uint32_t id = e.id[i];
        if (VRAMSCOPE_LIKELY(id < ids_.size())) {
          id_slot& slot = ids_[id];
          if (VRAMSCOPE_LIKELY(slot.state == id_state::live && slot.epoch == epoch_)) {
            allocator_->deallocate(reinterpret_cast<void*>(slot.address),
                                   replay_stream(e.stream[i]));
            slot.state = id_state::freed;
            --live_;
            return;
          }
          note_odd_free(slot, s);
          return;
        }
        ++s.unknown_frees;
        return;
      }
      case request_kind::marker:
        ++s.markers;
        if (reset_at_markers_ && allocator_->supports_reset()) reset(s);
        return;
      case request_kind::oom:
        ++s.recorded_failures;
        return;
      case request_kind::trim:
        ++s.trims;
        allocator_->synchronize_deferred();
        allocator_->trim();
        return;
    }
  }

 private:
  VRAMSCOPE_NOINLINE void note_failure(std::size_t i, std::size_t bytes, id_slot& slot,
                                       replay_summary& s) {
    ++s.failures;
    s.failed_bytes += bytes;
    if (s.first_failures.size() < max_first_failures)
      s.first_failures.push_back(static_cast<std::uint32_t>(i));
    slot = {0, epoch_, id_state::failed};
  }

  VRAMSCOPE_NOINLINE void note_odd_free(id_slot& slot, replay_summary& s) {
    switch (slot.state) {
      case id_state::live:
        ++s.frees_of_dropped;
        break;  // allocated before a reset
      case id_state::failed:
        ++s.frees_of_failed;
        break;
      case id_state::zero_size:
        break;  // cudaFree(nullptr): nothing to do
      case id_state::never:
      case id_state::freed:
        ++s.unknown_frees;
        return;
    }
    slot.state = id_state::freed;
  }

  VRAMSCOPE_NOINLINE void reset(replay_summary& s) {
    allocator_->reset();
    ++s.resets;
    s.dropped_by_reset += live_;
    live_ = 0;
    ++epoch_;  // every slot of an older epoch is now a dropped block
  }

  bool reset_at_markers_;
  bool needs_plan_ = false;
  const replay_initial_state& initial_;
  std::vector<std::uint32_t> seeded_events_;  // ascending: the stand-in allocs apply() passes over
  std::size_t next_seeded_ = 0;
  std::unique_ptr<simulated_backing> backing_;
  std::unique_ptr<allocator> allocator_;
  std::vector<id_slot> ids_;
  std::uint32_t epoch_ = 0;
  std::uint64_t live_ = 0;
  std::uint32_t pool_ = 0;  // the memory pool allocations go to (request_columns::pool)
};

// Events between two looks at the cancel flags: two relaxed loads every 64 events cost nothing
// beside the events, and a cancel stops a replay within milliseconds at any event rate.
constexpr std::size_t cancel_check_events = 64;
// The least of a target's first slice when its call interleaves targets (replay_call): enough
// events that the slice's time per event means something.
constexpr std::size_t first_slice_min_events = 4096;

double ns_since(std::chrono::steady_clock::time_point started) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - started)
      .count();
}

// The caller's cancel flag, and the replay's own: set when a target has failed, so that the
// targets running beside it stop rather than finish work the replay will not return.
class cancel_check {
 public:
  cancel_check(const std::atomic<bool>* flag, const std::atomic<bool>* failed = nullptr)
      : flag_(flag), failed_(failed) {}
  void operator()() const {
    if ((flag_ && flag_->load(std::memory_order_relaxed)) ||
        (failed_ && failed_->load(std::memory_order_relaxed)))
      throw replay_cancelled();
  }

 private:
  const std::atomic<bool>* flag_;
  const std::atomic<bool>* failed_;
};

// Bucket b holds events [b * n / B, (b + 1) * n / B): every bucket at least one event when B <= n.
std::size_t bucket_end(std::size_t b, std::size_t n, std::size_t buckets) {
  return static_cast<std::size_t>((static_cast<unsigned long long>(b) + 1) * n / buckets);
}

// Walks may visit `per_event` blocks per event replayed so far: a walk is allowed when what has
// been spent plus what it is expected to cost stays within that. Counted in blocks, not time, so
// the same input walks at the same events on every machine.
struct walk_budget {
  std::uint64_t per_event;  // 0: no limit
  std::uint64_t spent = 0;
  bool allows(std::uint64_t expected_cost, std::size_t events_done) const {
    return per_event == 0 ||
           spent + expected_cost <= per_event * static_cast<std::uint64_t>(events_done);
  }
};

struct running_bucket {
  std::uint64_t requested_min, requested_max, rounded_min, rounded_max, reserved_min, reserved_max;
  void start() {
    requested_min = rounded_min = reserved_min = std::numeric_limits<std::uint64_t>::max();
    requested_max = rounded_max = reserved_max = 0;
  }
  void add(const allocator::counters& c) {
    requested_min = std::min(requested_min, c.requested_live);
    requested_max = std::max(requested_max, c.requested_live);
    rounded_min = std::min(rounded_min, c.rounded_live);
    rounded_max = std::max(rounded_max, c.rounded_live);
    reserved_min = std::min(reserved_min, c.reserved_live);
    reserved_max = std::max(reserved_max, c.reserved_live);
  }
};

void reserve_buckets(replay_buckets& m, std::size_t n) {
  for (auto* v :
       {&m.time, &m.requested_min, &m.requested_max, &m.requested_last, &m.rounded_min,
        &m.rounded_max, &m.rounded_last, &m.reserved_min, &m.reserved_max, &m.reserved_last,
        &m.device_calls, &m.external_fragmentation, &m.largest_free_block, &m.free_bytes})
    v->reserve(n);
  m.end.reserve(n);
}

// Replays events [0, last] again on a fresh player, with no tracer and no metrics, and measures
// the free space after `last`: the fragmentation at a peak the budget did not let the first run walk.
free_space_meter::result measure_after(const request_columns& e, const replay_target& target,
                                       const replay_options& options, std::size_t ids,
                                       std::size_t last, const cancel_check& check_cancel) {
  player p(target, options, ids);
  replay_summary scratch;
  p.plan(e);
  p.seed(e, scratch);
  for (std::size_t i = 0; i <= last; ++i) {
    if (VRAMSCOPE_UNLIKELY(i % cancel_check_events == 0)) check_cancel();
    p.apply(e, i, scratch);
  }
  free_space_meter meter;
  return meter.measure(p.alloc());
}

// One target's replay with everything it records: the loop, the peaks, the buckets and the walks.
class target_replay {
 public:
  target_replay(const request_columns& e, const replay_target& target,
                const replay_options& options, std::size_t ids, const cancel_check& check_cancel)
      : e_(e),
        target_(target),
        options_(options),
        ids_(ids),
        check_cancel_(check_cancel),
        player_(target, options, ids),
        alloc_(player_.alloc()),
        tracer_(r_.layout, options.structure_events),
        bucket_budget_{options.walk_budget_per_event},
        peak_budget_{options.peak_walk_budget_per_event} {
    r_.label = target.label;
    r_.strategy = target.strategy;
    r_.parameters = target.parameters;
  }

  // The whole replay at once.
  replay_result run(const replay_progress_callback& progress, std::size_t target_index,
                    std::size_t target_count) {
    begin();
    advance(e_.count, progress, target_index, target_count);
    return end(progress, target_index, target_count);
  }

  // The outputs sized, the strategy's plan made, the initial state seeded.
  void begin() {
    const auto started = std::chrono::steady_clock::now();
    prepare_outputs(e_.count);
    next_progress_ = std::max<std::size_t>(options_.progress_interval, 1);
    try {
      player_.plan(e_);
      seed_before_event0(r_.summary);
    } catch (const error&) {
      rethrow_in_context("target '" + target_.label + "', " + at_event(0));
    }
    busy_ns_ += ns_since(started);
  }

  // Replays up to `count` more events (it may be resumed on another thread); true once none is
  // left (every event replayed, or the replay stopped at a failure).
  bool advance(std::size_t count, const replay_progress_callback& progress,
               std::size_t target_index, std::size_t target_count) {
    const auto started = std::chrono::steady_clock::now();
    const std::size_t n = e_.count;
    const std::size_t until = count >= n - i_ ? n : i_ + count;
    const std::size_t interval = std::max<std::size_t>(options_.progress_interval, 1);
    replay_summary& s = r_.summary;
    std::size_t i = i_;
    try {
      for (; i < until; ++i) {
        tracer_.event = static_cast<std::uint32_t>(i);
        player_.apply(e_, i, s);
        tracer_.drain();
        after_event(i, alloc_.live_counters());
        if (VRAMSCOPE_UNLIKELY(s.failures != 0 && options_.stop_at_failure)) {
          stop_after(i);
          over_ = true;
          break;
        }
        if (VRAMSCOPE_UNLIKELY(i % cancel_check_events == 0)) check_cancel_();
        if (VRAMSCOPE_UNLIKELY(i + 1 == next_progress_)) {
          next_progress_ += interval;
          if (progress) progress({target_index, target_count, i + 1, n});
        }
      }
    } catch (const error&) {
      rethrow_in_context("target '" + target_.label + "', " + at_event(i));
    }
    i_ = i;
    if (i_ >= n) over_ = true;
    busy_ns_ += ns_since(started);
    return over_;
  }

  // Events replayed so far, and the time spent on them (on whichever threads).
  std::size_t replayed() const { return i_; }
  double busy_ns() const { return busy_ns_; }

  // Once advance() returned true: the end's figures, the preview, the result.
  replay_result end(const replay_progress_callback& progress, std::size_t target_index,
                    std::size_t target_count) {
    const auto started = std::chrono::steady_clock::now();
    const std::size_t n = e_.count;
    replay_summary& s = r_.summary;
    alloc_.set_tracer(nullptr);
    finish(s.stopped_at_failure ? i_ + 1 : n);
    if (options_.layout && (options_.preview_at_peak || options_.preview_at < n)) {
      check_cancel_();
      r_.preview = cut_layout(
          r_.layout, options_.preview_at_peak ? s.peak_reserved_event : options_.preview_at);
    }
    if (progress) progress({target_index, target_count, n, n});
    s.wall_ns = busy_ns_ + ns_since(started);
    s.events_per_second = s.wall_ns > 0 ? static_cast<double>(n) * 1e9 / s.wall_ns : 0;
    return std::move(r_);
  }

 private:
  void prepare_outputs(std::size_t n) {
    if (options_.layout) {
      // Most strategies report one or two layout events per request; regions, splits and merges
      // add some. Reserving up front keeps the loop from copying the columns while they grow.
      const std::size_t expected = n + n / 4 + 64;
      each_column(r_.layout, [expected](auto& column) { reserve_huge(column, expected); });
      alloc_.set_tracer(&tracer_);
    }
    if (options_.full_metrics)
      for (auto* v :
           {&r_.full.requested, &r_.full.rounded, &r_.full.reserved, &r_.full.device_calls}) {
        reserve_huge(*v, n);
        v->resize(n);
      }
    buckets_ = std::min(options_.buckets, n);
    reserve_buckets(r_.buckets, buckets_);
    next_bucket_end_ = buckets_ ? bucket_end(0, n, buckets_) : 0;
    current_.start();
  }

  // The initial state, traced at event 0 (its regions and blocks are there when the map opens)
  // and counted into the first bucket and the peaks.
  void seed_before_event0(replay_summary& s) {
    if (target_.initial_state.empty() || e_.count == 0) return;
    tracer_.event = 0;
    player_.seed(e_, s);
    tracer_.drain();
    const allocator::counters c = alloc_.live_counters();
    if (c.requested_live > s.peak_requested) s.peak_requested = c.requested_live;
    if (c.rounded_live > s.peak_rounded) s.peak_rounded = c.rounded_live;
    current_.add(c);
  }

  // stop_at_failure: the replay ends after event i, the failed allocation. The bucket it falls in
  // closes there, and the full metrics keep only the rows replayed.
  VRAMSCOPE_NOINLINE void stop_after(std::size_t i) {
    r_.summary.stopped_at_failure = true;
    const bool closed = !r_.buckets.end.empty() && r_.buckets.end.back() == i + 1;
    if (next_bucket_end_ != 0 && !closed) close_bucket(i, alloc_.live_counters());
    next_bucket_end_ = 0;
    if (options_.full_metrics)
      for (auto* v :
           {&r_.full.requested, &r_.full.rounded, &r_.full.reserved, &r_.full.device_calls})
        v->resize(i + 1);
  }

  // After event i: peaks, the full row, the running bucket.
  void after_event(std::size_t i, const allocator::counters& c) {
    replay_summary& s = r_.summary;
    if (VRAMSCOPE_UNLIKELY(c.requested_live > s.peak_requested)) {
      s.peak_requested = c.requested_live;
      s.peak_requested_event = i;
    }
    if (VRAMSCOPE_UNLIKELY(c.rounded_live > s.peak_rounded)) {
      s.peak_rounded = c.rounded_live;
      s.peak_rounded_event = i;
    }
    if (VRAMSCOPE_UNLIKELY(c.reserved_live > s.peak_reserved)) new_reserved_peak(i, c);
    if (options_.full_metrics) {
      r_.full.requested[i] = static_cast<double>(c.requested_live);
      r_.full.rounded[i] = static_cast<double>(c.rounded_live);
      r_.full.reserved[i] = static_cast<double>(c.reserved_live);
      r_.full.device_calls[i] = static_cast<double>(c.device_calls.total());
    }
    current_.add(c);
    if (VRAMSCOPE_UNLIKELY(i + 1 == next_bucket_end_)) close_bucket(i, c);
  }

  VRAMSCOPE_NOINLINE void new_reserved_peak(std::size_t i, const allocator::counters& c) {
    replay_summary& s = r_.summary;
    s.peak_reserved = c.reserved_live;
    s.peak_reserved_event = i;
    s.internal_waste_at_peak = c.rounded_live - c.requested_live;  // docs/architecture.md#metrics
    if (!options_.fragmentation) return;  // nothing measured, nothing to re-run
    peak_measured_ = peak_budget_.allows(expected_walk_cost_, i + 1);
    if (peak_measured_) note_peak_free_space(walk(i, peak_budget_));
  }

  void note_peak_free_space(const free_space_meter::result& m) {
    replay_summary& s = r_.summary;
    s.free_bytes_at_peak = m.free_bytes;
    s.largest_free_block_at_peak = m.largest_free_block;
    s.external_fragmentation_at_peak = m.external_fragmentation();
  }

  VRAMSCOPE_NOINLINE void close_bucket(std::size_t i, const allocator::counters& c) {
    replay_buckets& m = r_.buckets;
    m.end.push_back(static_cast<std::uint32_t>(i + 1));
    m.time.push_back(e_.time ? e_.time[i] : 0.0);
    m.requested_min.push_back(static_cast<double>(current_.requested_min));
    m.requested_max.push_back(static_cast<double>(current_.requested_max));
    m.requested_last.push_back(static_cast<double>(c.requested_live));
    m.rounded_min.push_back(static_cast<double>(current_.rounded_min));
    m.rounded_max.push_back(static_cast<double>(current_.rounded_max));
    m.rounded_last.push_back(static_cast<double>(c.rounded_live));
    m.reserved_min.push_back(static_cast<double>(current_.reserved_min));
    m.reserved_max.push_back(static_cast<double>(current_.reserved_max));
    m.reserved_last.push_back(static_cast<double>(c.reserved_live));
    m.device_calls.push_back(static_cast<double>(c.device_calls.total()));
    if (options_.fragmentation && bucket_budget_.allows(expected_walk_cost_, i + 1)) {
      const free_space_meter::result w = walk(i, bucket_budget_);
      m.external_fragmentation.push_back(w.external_fragmentation());
      m.largest_free_block.push_back(static_cast<double>(w.largest_free_block));
      m.free_bytes.push_back(static_cast<double>(w.free_bytes));
    } else {
      const double not_measured = std::numeric_limits<double>::quiet_NaN();
      m.external_fragmentation.push_back(not_measured);
      m.largest_free_block.push_back(not_measured);
      m.free_bytes.push_back(not_measured);
    }
    current_.start();
    ++bucket_;
    next_bucket_end_ = bucket_ < buckets_ ? bucket_end(bucket_, e_.count, buckets_) : 0;
  }

  // The free space after event i; a second walk after the same event (a peak at a bucket's end)
  // reuses the first.
  free_space_meter::result walk(std::size_t i, walk_budget& budget) {
    if (last_walk_event_ == i) return last_walk_;
    last_walk_ = meter_.measure(alloc_);
    last_walk_event_ = i;
    budget.spent += last_walk_.visited;
    expected_walk_cost_ = last_walk_.visited;
    ++r_.summary.fragmentation_walks;
    r_.summary.walked_blocks += last_walk_.visited;
    return last_walk_;
  }

  void finish(std::size_t n) {
    replay_summary& s = r_.summary;
    // Not stats(): its free-space summary walks the blocks once more, which for a strategy with
    // hundreds of thousands of slots costs more than a bucket's worth of replay.
    const allocator::counters end = alloc_.live_counters();
    s.events = n;
    s.reserved_high_water = end.reserved_peak;
    s.device_calls = end.device_calls.total();
    s.device_call_detail = end.device_calls;
    s.final_requested = end.requested_live;
    s.final_rounded = end.rounded_live;
    s.final_reserved = end.reserved_live;
    s.live_blocks = end.live_blocks;
    if (!options_.fragmentation) {
      s.external_fragmentation_at_peak = std::numeric_limits<double>::quiet_NaN();
    } else if (!peak_measured_) {
      note_peak_free_space(
          measure_after(e_, target_, options_, ids_, s.peak_reserved_event, check_cancel_));
      s.peak_measured_by_rerun = true;
    }
  }

  const request_columns& e_;
  const replay_target& target_;
  const replay_options& options_;
  const std::size_t ids_;
  const cancel_check& check_cancel_;
  replay_result r_;
  player player_;
  allocator& alloc_;
  layout_tracer tracer_;

  std::size_t buckets_ = 0;
  std::size_t bucket_ = 0;
  std::size_t next_bucket_end_ = 0;
  running_bucket current_{};

  free_space_meter meter_;
  walk_budget bucket_budget_;
  walk_budget peak_budget_;
  std::uint64_t expected_walk_cost_ = 0;  // what the last walk visited
  std::size_t last_walk_event_ = ~std::size_t{0};
  free_space_meter::result last_walk_;
  bool peak_measured_ = true;  // nothing reserved yet: no free space, fragmentation 0

  std::size_t i_ = 0;  // the next event to replay
  std::size_t next_progress_ = 0;
  bool over_ = false;
  double busy_ns_ = 0;
};

}  // namespace

namespace {

// One replay() call on the pool: its runners (as many as it may use threads) each take the next
// target not yet taken (with more targets than runners, first a slice of each, then the longest
// left first: run_longest_first); the last runner to finish hands the outcome to `done`. A target that fails
// sets `failed`, which stops the others at their next check; the error of the first failed target
// in target order is the replay's (a target stopped that way reports only "cancelled").
struct replay_call {
  replay_call(const request_columns& e, const std::vector<replay_target>& t,
              const replay_options& o, const replay_progress_callback& p,
              const std::atomic<bool>* c, replay_done d)
      : events(e),
        targets(t),
        options(o),
        progress(p),
        cancel(c),
        done(std::move(d)),
        check_cancel(c, &failed),
        results(t.size()),
        errors(t.size()),
        paused(t.size()) {}

  const request_columns& events;
  const std::vector<replay_target>& targets;
  const replay_options options;  // copies: small, and the async caller's may be temporaries
  const replay_progress_callback progress;
  const std::atomic<bool>* const cancel;
  const replay_done done;
  std::size_t ids = 0;
  std::atomic<bool> failed{false};
  const cancel_check check_cancel;
  std::vector<std::optional<replay_result>> results;
  std::vector<std::exception_ptr> errors;
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> running{0};
  bool interleaved = false;  // run_longest_first rather than run_in_order
  struct paused_target {
    std::unique_ptr<target_replay> run;  // null once taken (or never paused)
    double left_ns = 0;                  // the time it is expected to need still
  };
  std::mutex paused_mutex;
  std::vector<paused_target> paused;

  // The checks replay() makes before any target runs.
  void check() {
    ids = check_columns(events);
    if (options.buckets == 0) throw invalid_argument("replay: buckets must be at least 1");
    for (std::size_t t = 0; t < targets.size(); ++t)
      for (std::size_t u = 0; u < t; ++u)
        if (targets[t].label == targets[u].label)
          throw invalid_argument("replay: two targets are labelled '" + targets[t].label + "'");
    cancel_check{cancel}();
  }

  // Replays targets until none is left; the last runner out finishes the call.
  void run_targets() {
    if (interleaved) run_longest_first();
    else run_in_order();
    if (running.fetch_sub(1, std::memory_order_acq_rel) == 1) finish();
  }

  // Each runner takes the next target not yet taken and replays it whole.
  void run_in_order() {
    const std::size_t count = targets.size();
    for (std::size_t t; (t = next.fetch_add(1)) < count;) {
      try {
        check_cancel();
        target_replay run(events, targets[t], options, ids, check_cancel);
        results[t].emplace(run.run(progress, t, count));
      } catch (...) {
        fail(t);
      }
    }
  }

  // More targets than runners (replay_options::longest_first): the runners take each target in
  // order for a first slice of its events, timed; then, of the targets paused after their slice,
  // each runner takes the one with the most time left (its slice's time per event times the
  // events left) and replays it to its end. One after another in order, the longest target could
  // start last and run alone while the other runners sit idle.
  void run_longest_first() {
    const std::size_t count = targets.size();
    const std::size_t slice = std::max<std::size_t>(first_slice_min_events, events.count / 50);
    for (std::size_t t; (t = next.fetch_add(1)) < count;) {
      try {
        check_cancel();
        auto run = std::make_unique<target_replay>(events, targets[t], options, ids, check_cancel);
        run->begin();
        if (run->advance(slice, progress, t, count)) {
          results[t].emplace(run->end(progress, t, count));
          continue;
        }
        const double per_event = run->busy_ns() / static_cast<double>(run->replayed());
        const double left = per_event * static_cast<double>(events.count - run->replayed());
        std::lock_guard<std::mutex> lock(paused_mutex);
        paused[t] = {std::move(run), left};
      } catch (...) {
        fail(t);
      }
    }
    for (;;) {
      std::size_t t;
      std::unique_ptr<target_replay> run;
      {
        std::lock_guard<std::mutex> lock(paused_mutex);
        t = count;
        for (std::size_t u = 0; u < count; ++u)
          if (paused[u].run && (t == count || paused[u].left_ns > paused[t].left_ns)) t = u;
        if (t < count) run = std::move(paused[t].run);
      }
      if (!run) return;  // none paused now: those still in their first slice are their runners'
      try {
        run->advance(events.count, progress, t, count);
        results[t].emplace(run->end(progress, t, count));
      } catch (...) {
        fail(t);
      }
    }
  }

  void fail(std::size_t t) {
    errors[t] = std::current_exception();
    failed.store(true, std::memory_order_relaxed);
  }

  // The caller's cancel wins over the failures it caused; then the first real failure in order.
  void finish() {
    std::vector<replay_result> out;
    std::exception_ptr error;
    try {
      cancel_check{cancel}();
      std::exception_ptr cancelled;
      for (std::size_t t = 0; t < results.size() && !error; ++t) {
        if (!errors[t]) continue;
        try {
          std::rethrow_exception(errors[t]);
        } catch (const replay_cancelled&) {
          if (!cancelled) cancelled = errors[t];
        } catch (...) {
          error = errors[t];
        }
      }
      if (!error && cancelled) error = std::move(cancelled);
      if (!error) {
        out.reserve(results.size());
        for (auto& r : results) out.push_back(std::move(*r));
      }
    } catch (...) {
      error = std::current_exception();
    }
    // Nothing of the call's own holds an error past here: its last owner is whoever `done` hands it to.
    results.clear();
    errors.clear();
    done(std::move(out), std::move(error));
  }
};

// Starts `call` on the pool (its checks in its first task) or, on a pool thread, runs it here.
void start(const std::shared_ptr<replay_call>& call, bool inline_here) {
  auto lead = [call, inline_here] {
    std::exception_ptr bad;
    try {
      call->check();
    } catch (...) {
      bad = std::current_exception();
    }
    // Out of the handler first: the caller that rethrows it then holds the error's last reference.
    if (bad) {
      call->done({}, std::move(bad));
      return;
    }
    const std::size_t count = call->targets.size();
    if (count == 0) {
      call->running.store(1);
      call->run_targets();
      return;
    }
    std::size_t wanted = call->options.threads != 0 ? call->options.threads : count;
    if (!inline_here) wanted = std::min(wanted, thread_pool::shared().size());
    const std::size_t runners = inline_here ? 1 : std::max<std::size_t>(1, std::min(wanted, count));
    call->running.store(runners);
    call->interleaved = call->options.longest_first && runners > 1 && count > runners;
    // The other runners queue behind whatever the pool runs now; this one starts at once.
    for (std::size_t i = 1; i < runners; ++i) {
      try {
        thread_pool::shared().submit([call] { call->run_targets(); });
      } catch (...) {
        // The pool has threads (this is one): a queue that cannot grow leaves this runner fewer helpers.
        call->running.fetch_sub(runners - i);
        break;
      }
    }
    call->run_targets();
  };
  if (inline_here) lead();
  else thread_pool::shared().submit(std::move(lead));
}

}  // namespace

void replay_async(const request_columns& events, const std::vector<replay_target>& targets,
                  const replay_options& options, const replay_progress_callback& progress,
                  const std::atomic<bool>* cancel, replay_done done) {
  start(std::make_shared<replay_call>(events, targets, options, progress, cancel, std::move(done)),
        false);
}

std::vector<replay_result> replay(const request_columns& events,
                                  const std::vector<replay_target>& targets,
                                  const replay_options& options,
                                  const replay_progress_callback& progress,
                                  const std::atomic<bool>* cancel) {
  std::mutex mutex;
  std::condition_variable finished;
  bool over = false;
  std::vector<replay_result> results;
  std::exception_ptr error;
  auto done = [&](std::vector<replay_result>&& r, std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mutex);
    results = std::move(r);
    error = std::move(e);  // the pool's thread keeps no hold on the error the caller rethrows
    over = true;
    finished.notify_one();
  };
  // On one of the pool's threads (a task that replays), waiting for the pool could wait forever:
  // the replay runs here, target after target.
  start(std::make_shared<replay_call>(events, targets, options, progress, cancel, done),
        thread_pool::on_pool_thread());
  std::unique_lock<std::mutex> lock(mutex);
  finished.wait(lock, [&] { return over; });
  if (error) std::rethrow_exception(error);
  return results;
}

}  // namespace vramscope
