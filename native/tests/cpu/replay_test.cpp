// The replay engine (core/replay/replay.cpp): its counters and fragmentation equal a direct run of
// the same calls on the same strategy, for every strategy; caps make requests fail without
// stopping the replay; markers reset the arena and what was live then is dropped; odd frees are
// counted; stream-ordered frees complete in the trace's time; the same input gives the same bytes;
// buckets bound every per-event value; progress is reported and cancel stops the run.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "suite_configs.hpp"
#include "vramscope/replay.hpp"
#include "vramscope/simulated_backing.hpp"
#include "vramscope/thread_pool.hpp"

using namespace vramscope;
using namespace vramscope::testing;

namespace {

constexpr std::uint8_t k_alloc = static_cast<std::uint8_t>(request_kind::alloc);
constexpr std::uint8_t k_free = static_cast<std::uint8_t>(request_kind::free);
constexpr std::uint8_t k_marker = static_cast<std::uint8_t>(request_kind::marker);
constexpr std::uint8_t k_oom = static_cast<std::uint8_t>(request_kind::oom);

struct trace : request_column_vectors {
  std::uint32_t next_id = 0;

  std::uint32_t alloc(double bytes, std::uint32_t s = 0) {
    push(k_alloc, next_id, bytes, s);
    return next_id++;
  }
  void free(std::uint32_t block, std::uint32_t s = 0) { push(k_free, block, 0, s); }
  void marker() { push(k_marker, 0, 0, 0); }
  void push(std::uint8_t k, std::uint32_t i, double bytes, std::uint32_t s) {
    kind.push_back(k);
    id.push_back(i);
    size.push_back(bytes);
    stream.push_back(s);
    time.push_back(time.empty() ? 0.0 : time.back() + 1000.0);
  }
  std::size_t count() const { return kind.size(); }
};

// A deterministic mix over two streams: sizes up to max_request, about 45 % frees (one in ten on
// the other stream), a marker every `marker_every` events (0: none).
trace random_trace(std::size_t n, std::size_t max_request, std::uint32_t seed,
                   std::size_t marker_every = 0, std::size_t max_live = 200) {
  std::mt19937 rng(seed);
  trace t;
  struct held {
    std::uint32_t id, stream;
  };
  std::vector<held> live;
  for (std::size_t i = 0; i < n; ++i) {
    if (marker_every && i % marker_every == marker_every - 1) {
      t.marker();
      continue;
    }
    if (!live.empty() && (live.size() >= max_live || rng() % 100 < 45)) {
      const std::size_t which = rng() % live.size();
      const held h = live[which];
      live[which] = live.back();
      live.pop_back();
      t.free(h.id, rng() % 10 == 0 ? 1 - h.stream : h.stream);
    } else {
      // Log-uniform from 1 B to max_request: many small requests, a few large.
      const double top = std::log2(static_cast<double>(max_request));
      const double bytes =
          std::floor(std::exp2(std::uniform_real_distribution<double>(0, top)(rng)));
      const std::uint32_t s = rng() % 2;
      live.push_back({t.alloc(bytes, s), s});
    }
  }
  return t;
}

replay_target target_of(const suite_config& c) {
  replay_target t{c.label, c.strategy, c.parameters, {}};
  t.simulated.capacity = c.capacity;
  return t;
}

replay_result replay_one(const trace& t, const replay_target& target, replay_options o = {}) {
  std::vector<replay_result> r = replay(t.columns(), {target}, o);
  REQUIRE(r.size() == 1);
  return std::move(r[0]);
}

// What a program calling the allocator directly sees after each event, for comparison.
std::vector<allocator_stats> direct_run(const trace& t, const replay_target& target,
                                        bool reset_at_markers) {
  auto backing = make_simulated_backing(target.simulated);
  auto a = make_allocator(target.strategy, *backing, target.parameters);
  std::map<std::uint32_t, void*> live;
  std::vector<allocator_stats> rows;
  for (std::size_t i = 0; i < t.count(); ++i) {
    backing->set_time(static_cast<std::uint64_t>(t.time[i]));
    if (t.kind[i] == k_alloc) {
      try {
        void* p = a->allocate(static_cast<std::size_t>(t.size[i]), replay_stream(t.stream[i]));
        if (p) live[t.id[i]] = p;
      } catch (const out_of_memory&) {
      }
    } else if (t.kind[i] == k_free) {
      auto it = live.find(t.id[i]);
      if (it != live.end()) {
        a->deallocate(it->second, replay_stream(t.stream[i]));
        live.erase(it);
      }
    } else if (t.kind[i] == k_marker && reset_at_markers && a->supports_reset()) {
      a->reset();
      live.clear();
    }
    rows.push_back(a->stats());
  }
  return rows;
}

// FNV-1a over every output byte that must not change from run to run.
struct hasher {
  std::uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, std::size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  }
  template <class T>
  void column(const std::vector<T>& v) {
    const std::uint64_t n = v.size();
    bytes(&n, sizeof n);
    if (!v.empty()) bytes(v.data(), v.size() * sizeof(T));
  }
  void value(std::uint64_t v) { bytes(&v, sizeof v); }
  void real(double v) { bytes(&v, sizeof v); }
};

std::uint64_t hash_result(const replay_result& r) {
  hasher h;
  const replay_layout& l = r.layout;
  h.column(l.op), h.column(l.address), h.column(l.size), h.column(l.requested), h.column(l.stream),
      h.column(l.aux), h.column(l.event);
  const replay_buckets& b = r.buckets;
  h.column(b.end), h.column(b.time), h.column(b.requested_min), h.column(b.requested_max),
      h.column(b.requested_last), h.column(b.rounded_min), h.column(b.rounded_max),
      h.column(b.rounded_last), h.column(b.reserved_min), h.column(b.reserved_max),
      h.column(b.reserved_last), h.column(b.device_calls), h.column(b.external_fragmentation),
      h.column(b.largest_free_block), h.column(b.free_bytes);
  h.column(r.full.requested), h.column(r.full.rounded), h.column(r.full.reserved),
      h.column(r.full.device_calls);
  const replay_summary& s = r.summary;
  for (std::uint64_t v : {s.events,
                          s.allocs,
                          s.frees,
                          s.markers,
                          s.recorded_failures,
                          s.peak_requested,
                          s.peak_requested_event,
                          s.peak_rounded,
                          s.peak_rounded_event,
                          s.peak_reserved,
                          s.peak_reserved_event,
                          s.reserved_high_water,
                          s.largest_free_block_at_peak,
                          s.free_bytes_at_peak,
                          s.internal_waste_at_peak,
                          s.failures,
                          s.failed_bytes,
                          s.device_calls,
                          s.resets,
                          s.dropped_by_reset,
                          s.frees_of_dropped,
                          s.frees_of_failed,
                          s.unknown_frees,
                          s.fragmentation_walks,
                          s.walked_blocks,
                          s.final_reserved})
    h.value(v);
  h.real(s.external_fragmentation_at_peak);
  h.column(s.first_failures);
  return h.h;
}

bool same_or_both_nan(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// --- counters and fragmentation against a direct run, every strategy ------------------------------

TEST("replay: per-event counters, peaks and fragmentation equal a direct run of every strategy") {
  for (const suite_config& c : suite_configs()) {
    const trace t = random_trace(4000, c.max_request, 7, 500);
    const replay_target target = target_of(c);
    replay_options o;
    o.full_metrics = true;
    o.buckets = 64;
    o.walk_budget_per_event = 0;  // walk at every bucket end, so each can be compared
    o.peak_walk_budget_per_event = 0;
    const replay_result r = replay_one(t, target, o);
    const std::vector<allocator_stats> direct = direct_run(t, target, true);
    REQUIRE(r.full.requested.size() == t.count());
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < t.count(); ++i) {
      const allocator_stats& d = direct[i];
      mismatches += r.full.requested[i] != static_cast<double>(d.requested_live) ||
                    r.full.rounded[i] != static_cast<double>(d.rounded_live) ||
                    r.full.reserved[i] != static_cast<double>(d.reserved_live) ||
                    r.full.device_calls[i] != static_cast<double>(d.device_calls.total());
    }
    if (mismatches) std::fprintf(stderr, "  %s: %zu events differ\n", c.label.c_str(), mismatches);
    CHECK_EQ(mismatches, std::size_t{0});
    const replay_summary& s = r.summary;
    CHECK_EQ(s.peak_reserved,
             static_cast<std::uint64_t>(direct[s.peak_reserved_event].reserved_live));
    CHECK_EQ(s.reserved_high_water, direct.back().reserved_peak);
    CHECK_EQ(s.final_requested, direct.back().requested_live);
    CHECK_EQ(s.live_blocks, direct.back().live_blocks);
    CHECK_EQ(s.device_calls, direct.back().device_calls.total());
    // Fragmentation after the peak event and at each bucket end is what stats() reports there.
    const allocator_stats& at_peak = direct[s.peak_reserved_event];
    CHECK_EQ(s.largest_free_block_at_peak, at_peak.largest_free_block);
    CHECK_EQ(s.free_bytes_at_peak, at_peak.free_bytes);
    CHECK(std::fabs(s.external_fragmentation_at_peak - at_peak.external_fragmentation) < 1e-12);
    CHECK_EQ(s.internal_waste_at_peak, at_peak.internal_waste());
    for (std::size_t b = 0; b < r.buckets.end.size(); ++b) {
      const allocator_stats& d = direct[r.buckets.end[b] - 1];
      CHECK_EQ(r.buckets.largest_free_block[b], static_cast<double>(d.largest_free_block));
      CHECK_EQ(r.buckets.free_bytes[b], static_cast<double>(d.free_bytes));
      CHECK(std::fabs(r.buckets.external_fragmentation[b] - d.external_fragmentation) < 1e-12);
    }
    // Every allocation the strategy placed is in the layout, tagged with its event.
    std::size_t layout_allocs = 0;
    for (std::size_t k = 0; k < r.layout.op.size(); ++k)
      if (r.layout.op[k] == static_cast<std::uint8_t>(trace_op::alloc)) {
        ++layout_allocs;
        CHECK_EQ(t.kind[r.layout.event[k]], k_alloc);
        CHECK_EQ(r.layout.requested[k], t.size[r.layout.event[k]]);
        CHECK_EQ(r.layout.stream[k], t.stream[r.layout.event[k]]);
      }
    CHECK_EQ(layout_allocs + s.failures + s.zero_size_allocs, s.allocs);
  }
}

TEST("replay: a peak the walk budget skipped is measured exactly by the re-run") {
  const suite_config c = suite_configs()[7];  // caching.pow2
  const trace t = random_trace(6000, c.max_request, 11);
  replay_options unlimited;
  unlimited.walk_budget_per_event = 0;
  unlimited.peak_walk_budget_per_event = 0;
  replay_options starved;
  starved.walk_budget_per_event = 1;
  starved.peak_walk_budget_per_event = 1;
  const replay_result a = replay_one(t, target_of(c), unlimited);
  // A slab of 4096 slots: the walk at the first peak (event 0) visits 4096 blocks, so a budget of
  // one visit an event cannot pay for the walk at the second slab's peak (event 4096).
  trace two_slabs;
  for (int i = 0; i < 5000; ++i) two_slabs.alloc(256);
  const replay_target slab{"slab", "slab", {{"classes", "256"}, {"slab_size", "1MiB"}}, {}};
  const replay_result b = replay_one(two_slabs, slab, starved);
  const replay_result b_exact = replay_one(two_slabs, slab, unlimited);
  CHECK_EQ(b.summary.peak_reserved_event, std::uint64_t{4096});
  CHECK(b.summary.peak_measured_by_rerun);
  CHECK(!b_exact.summary.peak_measured_by_rerun);
  CHECK_EQ(b.summary.free_bytes_at_peak, b_exact.summary.free_bytes_at_peak);
  CHECK_EQ(b.summary.largest_free_block_at_peak, b_exact.summary.largest_free_block_at_peak);
  CHECK_EQ(b.summary.external_fragmentation_at_peak,
           b_exact.summary.external_fragmentation_at_peak);
  const replay_result a_starved = replay_one(t, target_of(c), starved);
  CHECK_EQ(a_starved.summary.external_fragmentation_at_peak,
           a.summary.external_fragmentation_at_peak);
  CHECK_EQ(a_starved.summary.largest_free_block_at_peak, a.summary.largest_free_block_at_peak);
  // The starved run skipped bucket walks: those buckets say so with NaN.
  std::size_t not_measured = 0;
  for (double f : a_starved.buckets.external_fragmentation) not_measured += std::isnan(f);
  CHECK(a_starved.summary.walked_blocks <=
        t.count() * 2 + a.summary.walked_blocks / a.summary.fragmentation_walks);
  CHECK(not_measured > 0);
}

// --- caps, markers, odd frees -----------------------------------------------------------------------

TEST("replay: under a cap, requests that do not fit fail, are counted, and the replay goes on") {
  trace t;
  std::vector<std::uint32_t> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(t.alloc(3 * MiB));  // 30 MiB asked of a 16 MiB device
  for (std::uint32_t id : ids) t.free(id);
  const std::uint32_t after = t.alloc(1 * MiB);
  t.free(after);
  replay_options o;
  o.capacity = 16 * MiB;
  o.full_metrics = true;
  const replay_result r = replay_one(t, {"cuda_malloc", "cuda_malloc", {}, {}}, o);
  const replay_summary& s = r.summary;
  CHECK_EQ(s.failures, std::uint64_t{5});  // 3 MiB + 512 B rounding: five fit in 16 MiB
  CHECK_EQ(s.failed_bytes, 5 * 3 * MiB);
  REQUIRE(s.first_failures.size() == 5);
  for (std::uint32_t i : s.first_failures) CHECK_EQ(t.kind[i], k_alloc);
  CHECK_EQ(s.first_failures[0], std::uint32_t{5});
  CHECK_EQ(s.frees_of_failed, std::uint64_t{5});
  CHECK_EQ(s.unknown_frees, std::uint64_t{0});
  CHECK(s.peak_reserved <= 16 * MiB);
  std::size_t failure_events = 0;
  for (std::uint8_t op : r.layout.op)
    failure_events += op == static_cast<std::uint8_t>(trace_op::failure);
  CHECK_EQ(failure_events, std::size_t{5});
  // The request after the failures was served.
  CHECK_EQ(r.full.requested[t.count() - 2], static_cast<double>(1 * MiB));
  // Without the cap everything fits.
  const replay_result uncapped = replay_one(t, {"cuda_malloc", "cuda_malloc", {}, {}});
  CHECK_EQ(uncapped.summary.failures, std::uint64_t{0});
  // The cap also replaces a target's own capacity.
  replay_target own{"cuda_malloc", "cuda_malloc", {}, {}};
  own.simulated.capacity = 8 * MiB;
  CHECK_EQ(replay_one(t, own).summary.failures, std::uint64_t{8});
  CHECK_EQ(replay_one(t, own, o).summary.failures, std::uint64_t{5});
}

TEST("replay: stop_at_failure ends a target at its first failed allocation") {
  trace t;
  std::vector<std::uint32_t> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(t.alloc(3 * MiB));  // the sixth does not fit 16 MiB
  for (std::uint32_t id : ids) t.free(id);
  replay_options o;
  o.capacity = 16 * MiB;
  o.stop_at_failure = true;
  o.full_metrics = true;
  o.buckets = 4;
  const replay_result r = replay_one(t, {"cuda_malloc", "cuda_malloc", {}, {}}, o);
  const replay_summary& s = r.summary;
  CHECK(s.stopped_at_failure);
  CHECK_EQ(s.failures, std::uint64_t{1});
  REQUIRE(s.first_failures.size() == 1);
  CHECK_EQ(s.first_failures[0], std::uint32_t{5});
  CHECK_EQ(s.events, std::uint64_t{6});  // the failed one included
  CHECK_EQ(s.allocs, std::uint64_t{6});
  CHECK_EQ(s.frees, std::uint64_t{0});
  CHECK_EQ(s.live_blocks, std::uint64_t{5});
  CHECK_EQ(r.full.requested.size(), std::size_t{6});
  // Buckets end at 5 (of 20 events), then at the failure.
  REQUIRE(r.buckets.end.size() == 2);
  CHECK_EQ(r.buckets.end[0], std::uint32_t{5});
  CHECK_EQ(r.buckets.end[1], std::uint32_t{6});
  // A failure exactly at a bucket's end closes no second bucket there.
  o.buckets = 10;  // ends at 2, 4, 6, ...
  const replay_result at_end = replay_one(t, {"cuda_malloc", "cuda_malloc", {}, {}}, o);
  REQUIRE(at_end.buckets.end.size() == 3);
  CHECK_EQ(at_end.buckets.end[2], std::uint32_t{6});
  // Without a failure the option changes nothing.
  o.capacity = 0;
  const replay_result whole = replay_one(t, {"cuda_malloc", "cuda_malloc", {}, {}}, o);
  CHECK(!whole.summary.stopped_at_failure);
  CHECK_EQ(whole.summary.events, std::uint64_t{t.count()});
  CHECK_EQ(whole.summary.failures, std::uint64_t{0});
}

TEST("replay: fragmentation=false makes no walks and no re-run, with the same counters") {
  const trace t = random_trace(3000, 4 * MiB, 7);
  for (const char* strategy : {"caching", "cuda_malloc"}) {
    replay_options on;
    on.walk_budget_per_event = 0;
    replay_options off = on;
    off.fragmentation = false;
    const replay_result a = replay_one(t, {strategy, strategy, {}, {}}, on);
    const replay_result b = replay_one(t, {strategy, strategy, {}, {}}, off);
    CHECK_EQ(b.summary.fragmentation_walks, std::uint64_t{0});
    CHECK_EQ(b.summary.walked_blocks, std::uint64_t{0});
    CHECK(!b.summary.peak_measured_by_rerun);
    CHECK(std::isnan(b.summary.external_fragmentation_at_peak));
    CHECK_EQ(b.summary.largest_free_block_at_peak, std::uint64_t{0});
    CHECK_EQ(b.summary.free_bytes_at_peak, std::uint64_t{0});
    for (double f : b.buckets.external_fragmentation) CHECK(std::isnan(f));
    for (double f : b.buckets.free_bytes) CHECK(std::isnan(f));
    CHECK(a.summary.fragmentation_walks > 0);
    CHECK_EQ(b.summary.peak_reserved, a.summary.peak_reserved);
    CHECK_EQ(b.summary.peak_reserved_event, a.summary.peak_reserved_event);
    CHECK_EQ(b.summary.internal_waste_at_peak, a.summary.internal_waste_at_peak);
    CHECK(b.buckets.reserved_max == a.buckets.reserved_max);
    CHECK(b.layout.op == a.layout.op);
  }
}

TEST("replay: structure_events=false leaves splits and merges out of the layout, and only them") {
  const trace t = random_trace(3000, 4 * MiB, 11);
  bool some = false;
  for (const char* strategy : {"caching", "buddy", "slab"}) {
    replay_options on;
    replay_options off = on;
    off.structure_events = false;
    const replay_result a = replay_one(t, {strategy, strategy, {}, {}}, on);
    const replay_result b = replay_one(t, {strategy, strategy, {}, {}}, off);
    const auto structure = [](std::uint8_t op) {
      return op == static_cast<std::uint8_t>(trace_op::split) ||
             op == static_cast<std::uint8_t>(trace_op::merge);
    };
    std::size_t j = 0;
    for (std::size_t k = 0; k < a.layout.op.size(); ++k) {
      if (structure(a.layout.op[k])) {
        some = true;
        continue;
      }
      REQUIRE(j < b.layout.op.size());
      CHECK_EQ(b.layout.op[j], a.layout.op[k]);
      CHECK_EQ(b.layout.address[j], a.layout.address[k]);
      CHECK_EQ(b.layout.size[j], a.layout.size[k]);
      CHECK_EQ(b.layout.requested[j], a.layout.requested[k]);
      CHECK_EQ(b.layout.stream[j], a.layout.stream[k]);
      CHECK_EQ(b.layout.aux[j], a.layout.aux[k]);
      CHECK_EQ(b.layout.event[j], a.layout.event[k]);
      ++j;
    }
    CHECK_EQ(j, b.layout.op.size());
    CHECK_EQ(b.summary.peak_reserved, a.summary.peak_reserved);
    CHECK(b.buckets.reserved_max == a.buckets.reserved_max);
  }
  CHECK(some);
}

TEST("replay: markers reset the arena; blocks live then are dropped and their frees ignored") {
  trace t;
  const std::uint32_t a = t.alloc(1000), b = t.alloc(5000);
  t.free(a);
  t.marker();  // b is live here
  const std::uint32_t c = t.alloc(2000);
  t.free(b);  // dropped by the reset: ignored
  t.free(c);
  const std::uint32_t d = t.alloc(3000);
  t.marker();  // d is live here
  t.free(d);
  replay_options o;
  o.full_metrics = true;
  const replay_result r = replay_one(t, {"arena", "arena", {{"reserve", "1GiB"}}, {}}, o);
  const replay_summary& s = r.summary;
  CHECK_EQ(s.markers, std::uint64_t{2});
  CHECK_EQ(s.resets, std::uint64_t{2});
  CHECK_EQ(s.dropped_by_reset, std::uint64_t{2});
  CHECK_EQ(s.frees_of_dropped, std::uint64_t{2});
  CHECK_EQ(s.unknown_frees, std::uint64_t{0});
  CHECK_EQ(r.full.requested[3], 0.0);  // after the first marker
  CHECK_EQ(r.full.requested[4], 2000.0);
  CHECK_EQ(s.final_requested, std::uint64_t{0});
  std::size_t resets_in_layout = 0;
  for (std::size_t k = 0; k < r.layout.op.size(); ++k)
    if (r.layout.op[k] == static_cast<std::uint8_t>(trace_op::reset)) {
      ++resets_in_layout;
      CHECK_EQ(t.kind[r.layout.event[k]], k_marker);
    }
  CHECK_EQ(resets_in_layout, std::size_t{2});

  // Turned off, the arena keeps its blocks and frees them.
  replay_options keep = o;
  keep.reset_at_markers = false;
  const replay_result kept = replay_one(t, {"arena", "arena", {{"reserve", "1GiB"}}, {}}, keep);
  CHECK_EQ(kept.summary.resets, std::uint64_t{0});
  CHECK_EQ(kept.summary.dropped_by_reset, std::uint64_t{0});
  CHECK_EQ(kept.full.requested[3], 5000.0);
  // A strategy without reset is untouched by markers.
  const replay_result caching = replay_one(t, {"caching", "caching", {}, {}}, o);
  CHECK_EQ(caching.summary.resets, std::uint64_t{0});
  CHECK_EQ(caching.summary.markers, std::uint64_t{2});
  CHECK_EQ(caching.full.requested[3], 5000.0);
}

TEST("replay: a trim event releases the cached segments, as the program's empty_cache did") {
  trace t;
  const std::uint32_t a = t.alloc(30 * MiB), b = t.alloc(300 * 1024);
  t.free(a);
  t.free(b);
  t.push(4, 0, 0, 0);  // trim: torch.cuda.empty_cache()
  const std::uint32_t c = t.alloc(30 * MiB);
  t.free(c);
  replay_options o;
  o.full_metrics = true;
  const replay_result r = replay_one(t, {"caching", "caching", {{"preset", "pytorch"}}, {}}, o);
  CHECK_EQ(r.summary.trims, std::uint64_t{1});
  CHECK_EQ(r.full.reserved[3],
           32.0 * MiB);               // a 30 MiB segment (rounded to 2 MiB) and a 2 MiB one, cached
  CHECK_EQ(r.full.reserved[4], 0.0);  // both released
  CHECK_EQ(r.summary.device_call_detail.region_alloc,
           std::uint64_t{3});  // the third after the trim
  CHECK_EQ(r.summary.peak_reserved, std::uint64_t{32 * MiB});
}

TEST("replay: frees of ids never allocated or already freed are counted, not fatal") {
  trace t;
  const std::uint32_t a = t.alloc(4096);
  t.free(a);
  t.free(a);                      // already freed
  t.push(k_free, 3, 0, 0);        // an id no alloc used (below the table size)
  t.push(k_free, 1000000, 0, 0);  // far beyond every alloc id
  const std::uint32_t zero = t.alloc(0);
  t.free(zero);  // cudaFree(nullptr): nothing, not odd
  t.push(k_oom, 0, 1 << 30, 0);
  t.alloc(1);
  t.alloc(1);
  t.alloc(1);
  const replay_result r = replay_one(t, {"caching", "caching", {}, {}});
  CHECK_EQ(r.summary.unknown_frees, std::uint64_t{3});
  CHECK_EQ(r.summary.zero_size_allocs, std::uint64_t{1});
  CHECK_EQ(r.summary.recorded_failures, std::uint64_t{1});
  CHECK_EQ(r.summary.failures, std::uint64_t{0});
  CHECK_EQ(r.summary.live_blocks, std::uint64_t{3});
  CHECK_EQ(r.summary.frees, std::uint64_t{5});
}

TEST("replay: an alloc of an id still live counts, and the older block stays live") {
  trace t;
  t.push(k_alloc, 0, 1000, 0);
  t.push(k_alloc, 0, 2000, 0);
  t.push(k_free, 0, 0, 0);
  const replay_result r = replay_one(t, {"caching", "caching", {}, {}});
  CHECK_EQ(r.summary.reused_live_ids, std::uint64_t{1});
  CHECK_EQ(r.summary.final_requested, std::uint64_t{1000});
}

// --- time and streams -----------------------------------------------------------------------------------

TEST("replay: a free on another stream completes when the trace's clock passes the event") {
  trace t;
  const std::uint32_t a = t.alloc(4096, 0);
  t.free(a, 1);      // stream-ordered: pending
  t.alloc(4096, 0);  // 1 µs later: the 10 µs event has not completed
  t.alloc(4096, 0);
  t.time[3] = 50000;  // 50 µs: completed
  const replay_result r = replay_one(t, {"caching", "caching", {}, {}});
  std::map<std::uint8_t, std::uint32_t> event_of;
  for (std::size_t k = 0; k < r.layout.op.size(); ++k)
    event_of.emplace(r.layout.op[k], r.layout.event[k]);
  REQUIRE(event_of.count(static_cast<std::uint8_t>(trace_op::free_pending)));
  REQUIRE(event_of.count(static_cast<std::uint8_t>(trace_op::free_completed)));
  CHECK_EQ(event_of[static_cast<std::uint8_t>(trace_op::free_pending)], std::uint32_t{1});
  CHECK_EQ(event_of[static_cast<std::uint8_t>(trace_op::free_completed)], std::uint32_t{3});
  // Layout streams are the trace's stream indices; region events have none.
  for (std::size_t k = 0; k < r.layout.op.size(); ++k) {
    const auto op = static_cast<trace_op>(r.layout.op[k]);
    if (op == trace_op::region_reserve) CHECK_EQ(r.layout.stream[k], replay_no_stream);
    if (op == trace_op::free_pending) CHECK_EQ(r.layout.stream[k], std::uint32_t{1});
  }
}

TEST("replay: a target's region placement puts its regions where a recording had them") {
  trace t;
  t.alloc(4 * MiB);
  t.alloc(4 * MiB);
  replay_target placed{"placed", "cuda_malloc", {}, {}};
  const address_t first = 0x7f4000000000, second = 0x7f8000000000;
  placed.simulated.region_placement = {first, second};
  const replay_result r = replay_one(t, placed);
  std::vector<std::uint64_t> regions;
  for (std::size_t k = 0; k < r.layout.op.size(); ++k)
    if (r.layout.op[k] == static_cast<std::uint8_t>(trace_op::region_reserve))
      regions.push_back(r.layout.address[k]);
  REQUIRE(regions.size() == 2);
  CHECK_EQ(regions[0], std::uint64_t{first});
  CHECK_EQ(regions[1], std::uint64_t{second});
}

// --- determinism, buckets, progress, cancel ---------------------------------------------------------

TEST("replay: the same input gives the same bytes out, for every strategy") {
  for (const suite_config& c : suite_configs()) {
    const trace t = random_trace(20000, c.max_request, 3, 2500);
    replay_options o;
    o.full_metrics = true;
    o.buckets = 100;
    const std::uint64_t first = hash_result(replay_one(t, target_of(c), o));
    const std::uint64_t second = hash_result(replay_one(t, target_of(c), o));
    if (first != second) std::fprintf(stderr, "  %s differs between runs\n", c.label.c_str());
    CHECK_EQ(first, second);
  }
  // Several targets at once give each the bytes it gives alone.
  const std::vector<suite_config> configs = suite_configs();
  const trace t = random_trace(5000, 64 * KiB, 5);
  std::vector<replay_target> all;
  for (const suite_config& c : configs) all.push_back(target_of(c));
  const std::vector<replay_result> together = replay(t.columns(), all, {});
  REQUIRE(together.size() == all.size());
  for (std::size_t k = 0; k < all.size(); ++k)
    CHECK_EQ(hash_result(together[k]), hash_result(replay_one(t, all[k])));
}

TEST("replay: each bucket's min, max and last are those of the per-event values it covers") {
  const suite_config c = suite_configs()[8];                    // caching.pytorch
  const trace t = random_trace(10007, c.max_request, 9, 1000);  // not a multiple of the buckets
  replay_options o;
  o.full_metrics = true;
  o.buckets = 97;
  const replay_result r = replay_one(t, target_of(c), o);
  const replay_buckets& b = r.buckets;
  REQUIRE(b.end.size() == 97);
  CHECK_EQ(b.end.back(), static_cast<std::uint32_t>(t.count()));
  std::size_t start = 0;
  std::size_t outside = 0;
  for (std::size_t k = 0; k < b.end.size(); ++k) {
    REQUIRE(b.end[k] > start);
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    const std::vector<double>* full[3] = {&r.full.requested, &r.full.rounded, &r.full.reserved};
    for (std::size_t i = start; i < b.end[k]; ++i)
      for (int m = 0; m < 3; ++m) {
        const double v = (*full[m])[i];
        lo[m] = std::min(lo[m], v);
        hi[m] = std::max(hi[m], v);
      }
    const double bucket_min[3] = {b.requested_min[k], b.rounded_min[k], b.reserved_min[k]};
    const double bucket_max[3] = {b.requested_max[k], b.rounded_max[k], b.reserved_max[k]};
    for (int m = 0; m < 3; ++m) outside += bucket_min[m] != lo[m] || bucket_max[m] != hi[m];
    const std::size_t last = b.end[k] - 1;
    CHECK_EQ(b.requested_last[k], r.full.requested[last]);
    CHECK_EQ(b.reserved_last[k], r.full.reserved[last]);
    CHECK_EQ(b.device_calls[k], r.full.device_calls[last]);
    CHECK_EQ(b.time[k], t.time[last]);
    start = b.end[k];
  }
  CHECK_EQ(outside, std::size_t{0});
  // Downsampled only: the same buckets, no per-event rows.
  replay_options buckets_only = o;
  buckets_only.full_metrics = false;
  const replay_result d = replay_one(t, target_of(c), buckets_only);
  CHECK(d.full.requested.empty());
  CHECK(d.buckets.reserved_max == b.reserved_max);
  // Fewer events than buckets: one bucket an event.
  trace small;
  small.alloc(100);
  small.alloc(200);
  const replay_result s = replay_one(small, target_of(c));
  CHECK_EQ(s.buckets.end.size(), std::size_t{2});
}

TEST("replay: progress is reported per interval and target; cancel stops with a typed error") {
  const trace t = random_trace(10000, 64 * KiB, 1);
  replay_options o;
  o.progress_interval = 1000;
  std::vector<replay_progress> calls;
  replay(t.columns(), {{"a", "caching", {}, {}}, {"b", "buddy", {{"pool_size", "64MiB"}}, {}}}, o,
         [&](const replay_progress& p) { calls.push_back(p); });
  REQUIRE(calls.size() == 22);  // 10 per target and one at each target's end
  CHECK_EQ(calls[0].events_done, std::size_t{1000});
  CHECK_EQ(calls[0].target, std::size_t{0});
  CHECK_EQ(calls[0].targets, std::size_t{2});
  CHECK_EQ(calls[10].events_done, std::size_t{10000});
  CHECK_EQ(calls[21].target, std::size_t{1});
  CHECK_EQ(calls[21].events_total, std::size_t{10000});

  std::atomic<bool> cancel{false};
  std::size_t seen = 0;
  bool cancelled = false;
  try {
    replay(
        t.columns(), {{"a", "caching", {}, {}}}, o,
        [&](const replay_progress& p) {
          seen = p.events_done;
          if (p.events_done >= 3000) cancel = true;
        },
        &cancel);
  } catch (const replay_cancelled& e) {
    cancelled = true;
    CHECK_EQ(e.code(), error_code::cancelled);
  }
  CHECK(cancelled);
  CHECK_EQ(seen, std::size_t{3000});  // stopped at the next check
  cancel = true;
  CHECK_THROWS_AS(replay(t.columns(), {{"a", "caching", {}, {}}}, o, {}, &cancel),
                  replay_cancelled);
}

TEST("replay: a cancel raised from another thread stops it with no progress report to look at") {
  // Progress reports past the end: the replay looks at the flag itself, every 64 events.
  const trace t = random_trace(2000000, 64 * KiB, 3);
  replay_options o;
  o.progress_interval = std::size_t{1} << 40;
  std::atomic<bool> cancel{false};
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    cancel = true;
  });
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(replay(t.columns(), {{"a", "caching", {}, {}}}, o, {}, &cancel),
                  replay_cancelled);
  raiser.join();
  // Well before two million events: it stopped soon after the flag went up.
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
}

TEST("replay: targets on several threads give the results of one after another, in order") {
  const trace t = random_trace(20000, 256 * KiB, 7);
  const std::vector<replay_target> targets = {{"a", "caching", {}, {}},
                                              {"b", "buddy", {{"pool_size", "64MiB"}}, {}},
                                              {"c", "slab", {}, {}},
                                              {"d", "block_pool", {}, {}},
                                              {"e", "caching", {{"preset", "pytorch"}}, {}}};
  replay_options one;
  one.threads = 1;
  replay_options several = one;
  several.threads = 3;
  const auto a = replay(t.columns(), targets, one);
  std::mutex m;
  std::vector<std::size_t> reported(targets.size(), 0);
  const auto b = replay(t.columns(), targets, several, [&](const replay_progress& p) {
    std::lock_guard<std::mutex> lock(m);
    reported[p.target] = std::max(reported[p.target], p.events_done);
  });
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK_EQ(a[i].label, b[i].label);
    CHECK_EQ(a[i].summary.peak_reserved, b[i].summary.peak_reserved);
    CHECK_EQ(a[i].summary.failures, b[i].summary.failures);
    CHECK_EQ(a[i].summary.device_calls, b[i].summary.device_calls);
    CHECK(a[i].layout.op == b[i].layout.op);
    CHECK(a[i].layout.address == b[i].layout.address);
    CHECK(a[i].layout.event == b[i].layout.event);
    CHECK(a[i].buckets.reserved_max == b[i].buckets.reserved_max);
    CHECK_EQ(reported[i], std::size_t{20000});  // every target reported its end
  }
}

TEST(
    "replay: on several threads, the first failing target's error is the replay's, and cancel "
    "stops them all") {
  const trace t = random_trace(20000, 256 * KiB, 3);
  replay_options o;
  o.threads = 4;
  // The second target's parameters are bad: its error, naming it, whatever the others do.
  CHECK_THROWS_AS(replay(t.columns(),
                         {{"a", "caching", {}, {}},
                          {"b", "buddy", {{"pool_size", "not a size"}}, {}},
                          {"c", "slab", {}, {}}},
                         o),
                  invalid_argument);
  try {
    replay(t.columns(),
           {{"a", "caching", {}, {}}, {"b", "buddy", {{"pool_size", "not a size"}}, {}}}, o);
  } catch (const invalid_argument& e) {
    CHECK(std::string(e.what()).find("'b'") != std::string::npos);
  }
  std::atomic<bool> cancel{false};
  o.progress_interval = 1000;
  CHECK_THROWS_AS(
      replay(
          t.columns(),
          {{"a", "caching", {}, {}}, {"b", "slab", {}, {}}, {"c", "block_pool", {}, {}}}, o,
          [&](const replay_progress& p) {
            if (p.events_done >= 3000) cancel = true;
          },
          &cancel),
      replay_cancelled);
}

// --- the process's pool of replay threads -----------------------------------------------------------

TEST("thread pool: tasks run in the order submitted; its end waits for those queued") {
  std::vector<int> order;
  {
    thread_pool one(1);
    CHECK_EQ(one.size(), std::size_t{1});
    for (int i = 0; i < 50; ++i)
      one.submit([&order, i] {
        CHECK(thread_pool::on_pool_thread());
        order.push_back(i);
      });
  }
  REQUIRE(order.size() == 50);
  for (int i = 0; i < 50; ++i) CHECK_EQ(order[i], i);
  CHECK(!thread_pool::on_pool_thread());
  CHECK(thread_pool::shared().size() >= 1);
}

TEST(
    "replay: calls from many threads at once share the pool, never running more targets than it "
    "has threads") {
  const trace t = random_trace(30000, 256 * KiB, 5);
  const std::vector<replay_target> targets = {{"a", "caching", {}, {}},
                                              {"b", "buddy", {{"pool_size", "64MiB"}}, {}},
                                              {"c", "slab", {}, {}}};
  replay_options o;
  o.threads = 0;  // as many as the pool has
  o.progress_interval = 500;
  o.longest_first = false;  // each target whole once started: in progress means on a thread
  const auto alone = replay(t.columns(), targets, o);
  const std::size_t pool = thread_pool::shared().size();
  std::mutex m;
  std::size_t running = 0, most = 0;
  std::vector<bool> seen_end;
  std::vector<std::thread::id> workers;
  const std::size_t callers = 2 * pool + 1;
  std::vector<std::vector<replay_result>> results(callers);
  std::vector<std::thread> threads;
  // Each caller's target is running from its first report to its last (at its end).
  std::vector<std::vector<int>> state(callers, std::vector<int>(targets.size(), 0));
  for (std::size_t c = 0; c < callers; ++c)
    threads.emplace_back([&, c] {
      results[c] = replay(t.columns(), targets, o, [&, c](const replay_progress& p) {
        std::lock_guard<std::mutex> lock(m);
        if (std::find(workers.begin(), workers.end(), std::this_thread::get_id()) == workers.end())
          workers.push_back(std::this_thread::get_id());
        CHECK(thread_pool::on_pool_thread());
        int& s = state[c][p.target];
        if (s == 0) {
          s = 1;
          most = std::max(most, ++running);
        }
        if (p.events_done == p.events_total && s == 1) {
          s = 2;
          --running;
        }
      });
    });
  for (auto& th : threads) th.join();
  CHECK(most >= 1);
  CHECK(most <= pool);
  CHECK(workers.size() <= pool);
  for (const auto& r : results) {
    REQUIRE(r.size() == alone.size());
    for (std::size_t i = 0; i < r.size(); ++i) {
      CHECK_EQ(r[i].label, alone[i].label);
      CHECK_EQ(r[i].summary.peak_reserved, alone[i].summary.peak_reserved);
      CHECK(r[i].layout.address == alone[i].layout.address);
    }
  }
}

TEST(
    "replay: longest_first gives the results of one after another; every target starts its slice "
    "before any ends, and without it the third starts only after one has ended") {
  const trace t = random_trace(60000, 256 * KiB, 13);
  const std::vector<replay_target> targets = {{"a", "caching", {}, {}},
                                              {"b", "buddy", {{"pool_size", "64MiB"}}, {}},
                                              {"c", "slab", {}, {}},
                                              {"d", "vmm_growable", {}, {}}};
  replay_options one;
  one.threads = 1;
  const auto alone = replay(t.columns(), targets, one);
  if (thread_pool::shared().size() < 2) {
    std::printf("  (skipped the order checks: the pool has one thread, so nothing interleaves)\n");
    return;
  }
  for (const bool longest_first : {true, false}) {
    replay_options o;
    o.threads = 2;
    o.progress_interval = 500;
    o.longest_first = longest_first;
    std::mutex m;
    std::vector<int> first_report(targets.size(), -1), end_report(targets.size(), -1);
    int reports = 0;
    const auto r = replay(t.columns(), targets, o, [&](const replay_progress& p) {
      std::lock_guard<std::mutex> lock(m);
      if (first_report[p.target] < 0) first_report[p.target] = reports;
      if (p.events_done == p.events_total) end_report[p.target] = reports;
      ++reports;
    });
    REQUIRE(r.size() == alone.size());
    for (std::size_t i = 0; i < r.size(); ++i) {
      CHECK_EQ(r[i].label, alone[i].label);
      CHECK_EQ(r[i].summary.peak_reserved, alone[i].summary.peak_reserved);
      CHECK_EQ(r[i].summary.external_fragmentation_at_peak,
               alone[i].summary.external_fragmentation_at_peak);
      CHECK(r[i].layout.address == alone[i].layout.address);
      CHECK(r[i].layout.event == alone[i].layout.event);
      CHECK(r[i].buckets.reserved_max == alone[i].buckets.reserved_max);
      CHECK(r[i].summary.wall_ns > 0);
    }
    const int last_start = *std::max_element(first_report.begin(), first_report.end());
    const int first_end = *std::min_element(end_report.begin(), end_report.end());
    if (longest_first) CHECK(last_start < first_end);
    else CHECK(first_report[2] > first_end);
  }
}

TEST(
    "replay_async: returns at once, then hands the results or the error to done, once, on the "
    "pool") {
  const trace t = random_trace(400000, 256 * KiB, 9);
  const std::vector<replay_target> targets = {{"a", "caching", {}, {}}, {"b", "slab", {}, {}}};
  replay_options o;
  o.threads = 0;
  std::mutex m;
  std::condition_variable cv;
  int calls = 0;
  bool on_pool = false;
  std::vector<replay_result> got;
  std::exception_ptr error;
  auto done = [&](std::vector<replay_result>&& r, std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(m);
    ++calls;
    on_pool = thread_pool::on_pool_thread();
    got = std::move(r);
    error = std::move(e);
    cv.notify_all();
  };
  const request_columns columns = t.columns();  // kept alive until done, as the contract asks
  replay_async(columns, targets, o, {}, nullptr, done);
  {
    std::unique_lock<std::mutex> lock(m);
    CHECK_EQ(calls, 0);  // 400,000 events through two strategies take far longer than returning
    cv.wait(lock, [&] { return calls > 0; });
  }
  CHECK_EQ(calls, 1);
  CHECK(on_pool);
  CHECK(!error);
  REQUIRE(got.size() == 2);
  CHECK_EQ(got[1].label, std::string("b"));
  const std::vector<replay_result> first_alone = replay(t.columns(), {targets[0]}, o);
  CHECK_EQ(got[0].summary.peak_reserved, first_alone[0].summary.peak_reserved);

  // Bad columns: the error comes through done, not thrown by the call.
  trace bad;
  bad.push(99, 0, 0, 0);
  calls = 0;
  const request_columns bad_columns = bad.columns();
  replay_async(bad_columns, targets, o, {}, nullptr, done);
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return calls > 0; });
  REQUIRE(error);
  CHECK_THROWS_AS(std::rethrow_exception(error), invalid_argument);
  CHECK(got.empty());
}

TEST("replay: called from the pool's own threads, every one of them, it runs there and ends") {
  const trace t = random_trace(5000, 256 * KiB, 11);
  const std::vector<replay_target> targets = {{"a", "caching", {}, {}}, {"b", "slab", {}, {}}};
  replay_options o;
  o.threads = 0;
  const auto alone = replay(t.columns(), targets, o);
  const std::size_t tasks = thread_pool::shared().size() + 2;
  std::mutex m;
  std::condition_variable cv;
  std::size_t finished = 0, equal = 0;
  for (std::size_t i = 0; i < tasks; ++i)
    thread_pool::shared().submit([&] {
      const auto r = replay(t.columns(), targets, o);
      std::lock_guard<std::mutex> lock(m);
      ++finished;
      if (r.size() == 2 && r[1].summary.peak_reserved == alone[1].summary.peak_reserved) ++equal;
      cv.notify_all();
    });
  std::unique_lock<std::mutex> lock(m);
  CHECK(cv.wait_for(lock, std::chrono::seconds(60), [&] { return finished == tasks; }));
  CHECK_EQ(equal, tasks);
}

// --- bad input ------------------------------------------------------------------------------------------

TEST("replay: malformed columns and parameters are invalid_argument naming the event or target") {
  trace t;
  t.alloc(100);
  auto message_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const invalid_argument& e) {
      return e.what();
    }
    return "(no invalid_argument)";
  };
  trace bad_kind = t;
  bad_kind.kind[0] = 9;
  CHECK(message_of([&] {
          replay(bad_kind.columns(), {{"x", "caching", {}, {}}});
        }).find("event 0") != std::string::npos);
  trace bad_id = t;
  bad_id.id[0] = 5;
  CHECK(message_of([&] {
          replay(bad_id.columns(), {{"x", "caching", {}, {}}});
        }).find("dense") != std::string::npos);
  trace bad_size = t;
  bad_size.size[0] = 1.5;
  CHECK(message_of([&] {
          replay(bad_size.columns(), {{"x", "caching", {}, {}}});
        }).find("whole") != std::string::npos);
  trace bad_time = t;
  bad_time.time[0] = -1;
  CHECK(message_of([&] {
          replay(bad_time.columns(), {{"x", "caching", {}, {}}});
        }).find("time") != std::string::npos);
  const std::string param = message_of([&] {
    replay(t.columns(), {{"mine", "caching", {{"nope", "1"}}, {}}});
  });
  CHECK(param.find("target 'mine'") != std::string::npos);
  CHECK(param.find("nope") != std::string::npos);
  CHECK(message_of([&] {
          replay(t.columns(), {{"same", "caching", {}, {}}, {"same", "slab", {}, {}}});
        }).find("same") != std::string::npos);
  // A pool larger than the cap is not an error of the replay: its requests fail and are counted.
  replay_options cap;
  cap.capacity = 64 * MiB;
  const std::vector<replay_result> big =
      replay(t.columns(), {{"big pool", "buddy", {{"pool_size", "1GiB"}}, {}}}, cap);
  CHECK_EQ(big[0].summary.failures, std::uint64_t{1});
  // No events: empty results, no buckets.
  trace none;
  const std::vector<replay_result> empty = replay(none.columns(), {{"x", "caching", {}, {}}});
  REQUIRE(empty.size() == 1);
  CHECK(empty[0].buckets.end.empty());
  CHECK_EQ(empty[0].summary.events, std::uint64_t{0});
}

}  // namespace

CHECK_MAIN
