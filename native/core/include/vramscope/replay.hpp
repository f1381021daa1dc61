// Replay: a request trace (what a program asked for, docs/architecture.md#request-trace) run
// through any list of strategies, each on its own simulated backing, giving per strategy the layout
// events, a metrics time series and a summary (docs/architecture.md#metrics). One thread, no
// shared state between targets; the same input gives the same bytes out (the wall-time fields of
// the summary excepted).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "vramscope/allocator.hpp"
#include "vramscope/backing.hpp"
#include "vramscope/errors.hpp"
#include "vramscope/params.hpp"
#include "vramscope/types.hpp"

namespace vramscope {

// Event kinds of the request trace (src-main/services/trace/model.ts, EventKind: same numbers).
enum class request_kind : std::uint8_t {
  alloc = 0,   // id, size bytes on stream
  free = 1,    // id, issued on stream (another stream than the alloc's: a stream-ordered free)
  marker = 2,  // a step boundary: strategies that support reset() are reset here (option)
  oom = 3,     // a failure the program saw when it was recorded; not replayed, only counted
  trim = 4,    // the program released cached memory (torch.cuda.empty_cache): trim() after
               // the pending stream-ordered frees complete
};

// The request trace's columns, borrowed for the duration of replay(): one row per event.
struct request_columns {
  const std::uint8_t* kind = nullptr;
  const std::uint32_t* id = nullptr;      // block id (dense from 0), or marker index
  const double* size = nullptr;           // bytes: whole numbers below 2^53 (a JS Float64Array)
  const std::uint32_t* stream = nullptr;  // index into the trace's stream table
  const double* time = nullptr;           // ns since the trace's start; nullptr: the clock stands
  std::size_t count = 0;
  // Optional, one per event: the memory pool an alloc is served from, 0 the default pools, k > 0
  // private pool k (a CUDA graph's mempool; allocator::use_pool). nullptr: every alloc from 0.
  const std::uint32_t* pool = nullptr;
};

// Request columns that own their rows, for whoever builds or copies a trace before replaying it
// (the binding, the benchmark, tests). The view is valid until a vector changes.
struct request_column_vectors {
  std::vector<std::uint8_t> kind;
  std::vector<std::uint32_t> id;
  std::vector<double> size;
  std::vector<std::uint32_t> stream;
  std::vector<double> time;
  std::vector<std::uint32_t> pool;  // empty, or one per event

  request_columns columns() const {
    return {kind.data(),
            id.data(),
            size.data(),
            stream.data(),
            time.data(),
            kind.size(),
            pool.empty() ? nullptr : pool.data()};
  }
};

// Stream index i of a trace is simulated stream i + 1: no replayed stream is 0, which names the
// legacy default stream, and every layout event with stream 0 (regions, maps) is known to have none.
// Layout columns carry the index back (replay_no_stream where the event has no stream).
constexpr stream_t replay_stream(std::uint32_t index) noexcept { return stream_t{index} + 1; }
constexpr std::uint32_t replay_no_stream = 0xFFFFFFFFu;
// replay_options::preview_at and replay_preview::event where there is none.
constexpr std::uint64_t replay_no_preview = ~std::uint64_t{0};

// The state a target starts from instead of an empty allocator (docs/architecture.md, "Replay from
// the recorded state"): a recording's segments and live blocks when its window opened. Each live
// block stands for the trace's alloc event `event` (the stand-in a late recording begins with):
// that event is not replayed again, and the block's free frees it. Empty: start empty.
struct replay_initial_segment {
  address_t address = 0;
  std::uint64_t size = 0;
  std::uint32_t stream = 0;  // index into the trace's stream table
  std::uint32_t pool = 0;    // memory pool (request_columns::pool)
  bool small_pool = false;
  bool expandable = false;  // a mapped run of an expandable segment
};
struct replay_initial_block {
  address_t address = 0;
  std::uint64_t size = 0;  // the block's bytes (its request's bytes are the alloc event's)
  std::uint32_t event = 0;
};
struct replay_initial_state {
  std::vector<replay_initial_segment> segments;
  std::vector<replay_initial_block> blocks;
  bool empty() const noexcept { return segments.empty(); }
};

struct replay_target {
  std::string label;  // unique name in the results: "caching (pytorch)"
  std::string strategy;
  params parameters;
  // The simulated device: capacity, granularity, completion delay, region_placement (where a
  // recording's driver put each region, so a replay of it places them identically).
  simulated_options simulated;
  replay_initial_state initial_state;
};

struct replay_options {
  // Device memory cap for every target (the simulated backing's capacity): requests that do not
  // fit fail, are counted, and the replay goes on. 0: each target's simulated.capacity.
  std::uint64_t capacity = 0;
  // At a marker, reset() the strategies that support it (arena): blocks live then are dropped and
  // their later frees ignored (both counted).
  bool reset_at_markers = true;
  // Metrics are kept per bucket of consecutive events (min, max and last value of each); at most
  // this many buckets, fewer when there are fewer events.
  std::size_t buckets = 2048;
  // Also keep requested / rounded / reserved / device calls after every event.
  bool full_metrics = false;
  // Collect the layout events (the tracer). Off: metrics and summary only.
  bool layout = true;
  // With layout: keep split and merge events too. Off: the layout leaves them out (they move no
  // block and no region edge: the app's maps draw none, and caching reports ~0.9 of them a request).
  bool structure_events = true;
  // External fragmentation needs a walk of the strategy's blocks, which costs as many visits as
  // it has blocks (free ones included). Walks at bucket ends may visit this many blocks per event
  // replayed so far; a bucket end with too little budget left gets NaN (not measured). 0: no limit.
  std::uint64_t walk_budget_per_event = 2;
  // Walks at each new reserved peak, with their own budget (a strategy whose peak keeps rising
  // would otherwise walk after every event). When the final peak was not walked, a second, bare
  // run up to it measures it: the fragmentation at the peak is always exact. 0: no limit.
  std::uint64_t peak_walk_budget_per_event = 4;
  // Measure external fragmentation at all. Off: no walks and no re-run to the peak; the
  // fragmentation columns of the buckets are NaN, and the summary's figures at the peak are NaN
  // (external_fragmentation_at_peak) and 0 (largest_free_block_at_peak, free_bytes_at_peak).
  bool fragmentation = true;
  // End each target's replay at its first failed allocation (a search over device caps only needs
  // to know whether a cap fits). The summary then has stopped_at_failure, failures 1 and the
  // event in first_failures; events counts the events replayed, the failed one included.
  bool stop_at_failure = false;
  std::size_t progress_interval = 65536;  // events between progress calls
  // Targets replayed at once, each on a thread of the process's pool (thread_pool.hpp; they
  // share nothing but the read-only events): 1 (the default), one after another; 0, as many as
  // the pool has threads (what the JavaScript binding asks for unless told otherwise); never more
  // than the pool has. Results come in target order whatever finishes first; the first target (in
  // order) that fails fails the replay, as it would one after another. The progress callback is
  // then called from several threads, each call about its own target.
  std::size_t threads = 1;
  // With more targets than the threads they get: each target replays a first slice of its events
  // (a fiftieth, at least 4,096), timed, then the rest of each, the one with the most time left
  // first, so that the longest does not start last and run alone. Every target then holds its
  // working set (its strategy's tables, its layout) from its slice to its end, all at once; false,
  // one target after another in order, each whole.
  bool longest_first = true;
  // With layout: also cut each target's layout to what its map shows after one request event
  // (replay_preview): `preview_at`, or with preview_at_peak each target's own reserved peak.
  std::uint64_t preview_at = replay_no_preview;
  bool preview_at_peak = false;
};

// What the strategy did, as columns (the tracer's trace_event, tracer.hpp), with the index of the
// request event being replayed when it happened.
struct replay_layout {
  std::vector<std::uint8_t> op;  // trace_op
  std::vector<std::uint64_t> address;
  std::vector<double> size;
  std::vector<double> requested;
  std::vector<std::uint32_t> stream;  // trace stream index, or replay_no_stream
  std::vector<std::uint32_t> aux;
  std::vector<std::uint32_t> event;  // request event index; markers' resets included
};

// Metrics per bucket of events [end[b-1], end[b]). Bytes are doubles (exact below 2^53).
struct replay_buckets {
  std::vector<std::uint32_t> end;  // exclusive end event index
  std::vector<double> time;        // time of the bucket's last event (ns)
  std::vector<double> requested_min, requested_max, requested_last;
  std::vector<double> rounded_min, rounded_max, rounded_last;
  std::vector<double> reserved_min, reserved_max, reserved_last;
  std::vector<double> device_calls;  // cumulative, after the bucket's last event
  // After the bucket's last event; NaN where the walk budget did not allow a walk.
  std::vector<double> external_fragmentation;  // 1 - largest free block / free bytes; 0: none free
  std::vector<double> largest_free_block;
  std::vector<double> free_bytes;
};

// One row per event (replay_options::full_metrics), after the event.
struct replay_full_metrics {
  std::vector<double> requested, rounded, reserved, device_calls;
};

struct replay_summary {
  std::uint64_t events = 0, allocs = 0, frees = 0, markers = 0, recorded_failures = 0, trims = 0;
  // Peaks of the values after each event, and the first event after which each was reached.
  std::uint64_t peak_requested = 0, peak_requested_event = 0;
  std::uint64_t peak_rounded = 0, peak_rounded_event = 0;
  std::uint64_t peak_reserved = 0, peak_reserved_event = 0;
  // The allocator's own high-water mark: also counts memory held for a moment inside one call.
  std::uint64_t reserved_high_water = 0;
  // At the reserved peak (after peak_reserved_event).
  double external_fragmentation_at_peak = 0;
  std::uint64_t largest_free_block_at_peak = 0;
  std::uint64_t free_bytes_at_peak = 0;
  std::uint64_t internal_waste_at_peak = 0;  // rounded - requested
  bool peak_measured_by_rerun = false;       // the budget skipped it; a bare second run measured it
  // Requests that did not fit (cap, pool size, block size), and the first few event indices.
  std::uint64_t failures = 0;
  std::vector<std::uint32_t> first_failures;  // at most 16
  std::uint64_t failed_bytes = 0;
  bool stopped_at_failure = false;  // replay_options::stop_at_failure ended the replay early
  std::uint64_t device_calls = 0;   // total at the end (device_call_counts::total)
  device_call_counts device_call_detail;
  std::uint64_t resets = 0;               // markers at which the strategy was reset
  std::uint64_t dropped_by_reset = 0;     // blocks live at a reset
  std::uint64_t frees_of_dropped = 0;     // later frees of those, ignored
  std::uint64_t frees_of_failed = 0;      // frees of an id whose allocation failed, ignored
  std::uint64_t seeded_segments = 0;      // segments of the initial state (replay_target)
  std::uint64_t seeded_blocks = 0;        // live blocks of the initial state
  std::uint64_t unknown_frees = 0;        // frees of an id never allocated or already freed
  std::uint64_t reused_live_ids = 0;      // allocs of an id still live (the older block stays live)
  std::uint64_t zero_size_allocs = 0;     // allocs of 0 bytes (no block, as cudaMalloc)
  std::uint64_t fragmentation_walks = 0;  // walks made (bucket ends and peaks)
  std::uint64_t walked_blocks = 0;
  // End state.
  std::uint64_t final_requested = 0, final_rounded = 0, final_reserved = 0, live_blocks = 0;
  // Not deterministic: how long this target took.
  double wall_ns = 0;
  double events_per_second = 0;
};

// A layout cut to what a map shows after request event `event` (the app draws it before the
// whole layout has crossed; docs/architecture.md, "The opening view"): the indices of the layout
// events kept, ascending (every region, failure, reset and trim event, and the events of the blocks
// present after `event`), and where the layout releases regions, only the regions present then
// keep their events: the ranges of the others, joined, ascending, stand in for them. The same cut
// as the JavaScript reference (src-shared/wire.ts, cutAt), made in the target's thread.
struct replay_preview {
  std::uint64_t event = replay_no_preview;  // replay_no_preview: none (no regions to draw from)
  std::vector<std::uint32_t> kept;
  std::vector<std::uint64_t> gone_start, gone_end;
};

// The cut of `layout` at request event `at`; event stays replay_no_preview where the layout has no
// regions (a map's address space is then made from every block).
replay_preview cut_layout(const replay_layout& layout, std::uint64_t at);

struct replay_result {
  std::string label;
  std::string strategy;
  params parameters;
  replay_layout layout;
  replay_preview preview;  // replay_options::preview_at or preview_at_peak
  replay_buckets buckets;
  replay_full_metrics full;  // empty unless full_metrics
  replay_summary summary;
};

struct replay_progress {
  std::size_t target = 0;  // index into the targets
  std::size_t targets = 0;
  std::size_t events_done = 0;  // of this target
  std::size_t events_total = 0;
};
using replay_progress_callback = std::function<void(const replay_progress&)>;

class replay_cancelled : public error {
 public:
  replay_cancelled() : error(error_code::cancelled, "replay cancelled") {}
};

// Replays `events` through every target (several at once: replay_options::threads) on the
// process's pool of replay threads (thread_pool.hpp), and waits for them; called on one of the
// pool's own threads, it replays there, target after target. Throws invalid_argument for malformed columns
// (unknown kind, ids not dense, sizes not whole) or strategy parameters (naming the target),
// replay_cancelled when *cancel becomes true (checked every 64 events; partial results are
// dropped), and any other library error with the target and event index in its message.
std::vector<replay_result> replay(const request_columns& events,
                                  const std::vector<replay_target>& targets,
                                  const replay_options& options = {},
                                  const replay_progress_callback& progress = {},
                                  const std::atomic<bool>* cancel = nullptr);

// What replay_async hands back, once: the results in target order, or (results empty) what
// replay() would have thrown. It runs on a thread of the pool and must not throw.
using replay_done = std::function<void(std::vector<replay_result>&&, std::exception_ptr)>;

// replay() without the wait: returns at once, the checks, the targets and the call of `done` all
// on the pool's threads, in the order calls came (a call queued behind others waits for a thread,
// its cancel flag read as soon as it has one). The caller keeps events, targets and *cancel alive
// until `done` is called (options and progress are copied). Throws, here, only where not one thread could be started.
void replay_async(const request_columns& events, const std::vector<replay_target>& targets,
                  const replay_options& options, const replay_progress_callback& progress,
                  const std::atomic<bool>* cancel, replay_done done);

}  // namespace vramscope
