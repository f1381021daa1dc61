// `vramscope_bench replay`: events per second of the replay engine (core/replay/replay.cpp) for
// each strategy over one synthetic trace, beside two peers measured in the same run: the bare loop
// over the same events with an id -> address hash map and no allocator (the floor: reading the
// trace and keeping ids), and the strategy driven directly, without the replay's layout, metrics
// and bookkeeping (what the replay adds on top of the allocator).
//
// The trace: sizes log-uniform from 256 B to 64 MiB, about half the events frees (most of a recent
// block, some of any live one), four streams with one free in twenty on another stream than the
// block's, the clock advancing 1 µs an event, and a marker every 10 000 events.
#include "bench_replay.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "bench.hpp"
#include "vramscope/allocator.hpp"
#include "vramscope/replay.hpp"
#include "vramscope/simulated_backing.hpp"

namespace vramscope::bench {
namespace {

struct replay_bench_options {
  std::size_t events = 1'000'000;
  int reps = 5;
  bool cpu_clock = false;
  bool quick = false;
  std::string json_path;
  std::vector<std::string> only;  // labels; empty: every row
  std::uint64_t walk_budget = replay_options{}.walk_budget_per_event;
  std::uint64_t peak_walk_budget = replay_options{}.peak_walk_budget_per_event;
  bool cold_memory = true;
};

struct synthetic_trace : request_column_vectors {
  std::size_t allocs = 0, frees = 0, markers = 0;
};

// splitmix64: a fixed seed gives the same trace on every machine.
struct random_source {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

synthetic_trace make_trace(std::size_t n, std::uint64_t seed) {
  constexpr std::size_t streams = 4;
  constexpr std::size_t marker_every = 10'000;
  constexpr std::size_t max_live =
      1000;  // keeps fixed pools (64 GiB of 64 MiB blocks) able to serve
  synthetic_trace t;
  t.kind.resize(n);
  t.id.resize(n);
  t.size.resize(n);
  t.stream.resize(n);
  t.time.resize(n);
  random_source rng{seed};
  struct live_block {
    std::uint32_t id;
    std::uint32_t stream;
  };
  std::vector<live_block> live;
  std::uint32_t next_id = 0;
  for (std::size_t i = 0; i < n; ++i) {
    t.time[i] = static_cast<double>(i) * 1000.0;
    if (i % marker_every == marker_every - 1) {
      t.kind[i] = static_cast<std::uint8_t>(request_kind::marker);
      t.id[i] = static_cast<std::uint32_t>(t.markers++);
      continue;
    }
    const bool free = !live.empty() && (live.size() >= max_live || rng.unit() < 0.5);
    if (free) {
      // Programs mostly free what they allocated recently; sometimes anything.
      const std::size_t recent = std::min<std::size_t>(live.size(), 8);
      const std::size_t which =
          rng.unit() < 0.5 ? live.size() - 1 - rng.below(recent) : rng.below(live.size());
      const live_block b = live[which];
      live[which] = live.back();
      live.pop_back();
      t.kind[i] = static_cast<std::uint8_t>(request_kind::free);
      t.id[i] = b.id;
      t.stream[i] =
          rng.below(20) == 0 ? static_cast<std::uint32_t>((b.stream + 1) % streams) : b.stream;
      ++t.frees;
    } else {
      const double log2_size = 8.0 + rng.unit() * 18.0;  // 256 B .. 64 MiB
      const std::uint32_t stream = static_cast<std::uint32_t>(rng.below(streams));
      t.kind[i] = static_cast<std::uint8_t>(request_kind::alloc);
      t.id[i] = next_id;
      t.size[i] = std::floor(std::exp2(log2_size));
      t.stream[i] = stream;
      live.push_back({next_id++, stream});
      ++t.allocs;
    }
  }
  return t;
}

struct bench_row {
  std::string label;
  std::string strategy;
  params parameters;
  double target_events_per_second;  // docs/benchmarks.md#targets; 0: none stated
};

// Parameters that let each strategy serve the trace's requests (up to 64 MiB, up to 1000 live):
// where a default cannot (a 1 MiB block pool, a 1 GiB buddy pool), it is raised, and said here.
std::vector<bench_row> bench_rows() {
  return {
      {"block_pool", "block_pool", {{"block_size", "64MiB"}, {"pool_size", "64GiB"}}, 10e6},
      // Size classes up to the trace's largest request, so that the slab serves every request.
      {"slab",
       "slab",
       {{"classes", "256,1KiB,4KiB,16KiB,64KiB,256KiB,1MiB,4MiB,16MiB,64MiB"},
        {"slab_size", "128MiB"}},
       10e6},
      // Defaults: requests above 64 KiB (56 % of them) get a dedicated region from the backing.
      {"slab.defaults", "slab", {}, 0},
      {"arena", "arena", {}, 10e6},
      {"buddy", "buddy", {{"pool_size", "64GiB"}}, 3e6},
      {"caching.pow2", "caching", {{"preset", "pow2"}}, 3e6},
      {"caching.pytorch", "caching", {{"preset", "pytorch"}}, 3e6},
      {"cuda_malloc", "cuda_malloc", {}, 0},
      {"async_pool", "async_pool", {}, 0},
      {"vmm_growable", "vmm_growable", {}, 0},
      {"stitching", "stitching", {}, 0},
      {"device_bump", "device_bump", {{"capacity", "64GiB"}}, 0},
  };
}

std::string describe(const params& p) {
  std::string text;
  for (auto& [k, v] : p.values()) text += (text.empty() ? "" : " ") + k + "=" + v;
  return text.empty() ? "defaults" : text;
}

double now(bool cpu_clock) { return cpu_clock ? thread_cpu_ns() : wall_ns(); }

// Median of `reps` timings of `run` (which returns nothing; the clock brackets it).
template <class Run>
summary time_runs(Run&& run, int reps, bool cpu_clock, std::size_t events) {
  std::vector<double> per_event;
  for (int r = 0; r < reps; ++r) {
    const double start = now(cpu_clock);
    run();
    per_event.push_back((now(cpu_clock) - start) / static_cast<double>(events));
  }
  return summarize(per_event, events);
}

// The floor: the events read, ids kept in a hash map, no allocator.
std::uint64_t bare_loop(const synthetic_trace& t) {
  std::unordered_map<std::uint32_t, std::uint64_t> live;
  live.reserve(2048);
  std::uint64_t next_address = 0x7f0000000000ull, checksum = 0;
  for (std::size_t i = 0; i < t.kind.size(); ++i) {
    switch (static_cast<request_kind>(t.kind[i])) {
      case request_kind::alloc:
        live[t.id[i]] = next_address;
        next_address += static_cast<std::uint64_t>(t.size[i]);
        break;
      case request_kind::free: {
        auto it = live.find(t.id[i]);
        if (it != live.end()) {
          checksum += it->second;
          live.erase(it);
        }
        break;
      }
      default:
        break;
    }
  }
  return checksum;
}

// The strategy alone: the same calls the replay makes, with an id table, no tracer, no metrics.
std::uint64_t direct_loop(const synthetic_trace& t, const bench_row& row) {
  auto backing = make_simulated_backing();
  auto a = make_allocator(row.strategy, *backing, row.parameters);
  std::vector<void*> by_id(t.allocs, nullptr);
  std::uint64_t failures = 0;
  const bool resets = a->supports_reset();
  for (std::size_t i = 0; i < t.kind.size(); ++i) {
    backing->set_time(static_cast<std::uint64_t>(t.time[i]));
    switch (static_cast<request_kind>(t.kind[i])) {
      case request_kind::alloc:
        try {
          by_id[t.id[i]] =
              a->allocate(static_cast<std::size_t>(t.size[i]), replay_stream(t.stream[i]));
        } catch (const out_of_memory&) {
          ++failures;
        }
        break;
      case request_kind::free:
        if (void* p = by_id[t.id[i]]) {
          a->deallocate(p, replay_stream(t.stream[i]));
          by_id[t.id[i]] = nullptr;
        }
        break;
      case request_kind::marker:
        if (resets) {
          a->reset();
          std::fill(by_id.begin(), by_id.end(), nullptr);
        }
        break;
      default:
        break;
    }
  }
  return failures;
}

struct measured_row {
  bench_row row;
  summary replay_on;   // layout + metrics (the default options)
  summary replay_off;  // metrics only (no layout)
  summary direct;
  replay_summary result;
  std::size_t layout_events = 0;
};

std::string rate(double ns_per_event) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f M/s", 1e3 / ns_per_event);
  return buf;
}

void usage(const char* why) {
  if (why) std::fprintf(stderr, "vramscope_bench replay: %s\n\n", why);
  std::fprintf(
      stderr,
      "usage: vramscope_bench replay [options]\n"
      "  --events N        events in the synthetic trace (default 1000000)\n"
      "  --reps N          repetitions per figure, the median is reported (default 5)\n"
      "  --only a,b        only these rows (block_pool, slab, caching.pow2, ...)\n"
      "  --clock wall|cpu  wall time (default) or this thread's CPU time (busy machine)\n"
      "  --quick           smoke run: 100000 events, 1 repetition\n"
      "  --walk-budget N   blocks the walks at bucket ends may visit per event (replay_options)\n"
      "  --peak-walk-budget N  the same for the walks at new reserved peaks\n"
      "  --warm-memory     let repetitions reuse memory an earlier one touched (default:\n"
      "                    every buffer fresh from the kernel, page faults included)\n"
      "  --json FILE       write the figures as JSON\n");
  std::exit(why ? 2 : 0);
}

replay_bench_options parse(int argc, char** argv) {
  replay_bench_options o;
  bool events_given = false, reps_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("option " + arg + " needs a value").c_str());
      return argv[++i];
    };
    if (arg == "--events") o.events = std::stoul(value()), events_given = true;
    else if (arg == "--reps") o.reps = std::stoi(value()), reps_given = true;
    else if (arg == "--only") {
      std::string list = value();
      std::size_t start = 0;
      while (start <= list.size()) {
        const std::size_t comma = std::min(list.find(',', start), list.size());
        if (comma > start) o.only.push_back(list.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (arg == "--clock") {
      const std::string c = value();
      if (c != "wall" && c != "cpu") usage("--clock takes wall or cpu");
      o.cpu_clock = c == "cpu";
    } else if (arg == "--quick") o.quick = true;
    else if (arg == "--json") o.json_path = value();
    else if (arg == "--walk-budget") o.walk_budget = std::stoull(value());
    else if (arg == "--peak-walk-budget") o.peak_walk_budget = std::stoull(value());
    else if (arg == "--warm-memory") o.cold_memory = false;
    else if (arg == "--help" || arg == "-h") usage(nullptr);
    else usage(("unknown option " + arg).c_str());
  }
  if (o.quick) {
    if (!events_given) o.events = 100'000;
    if (!reps_given) o.reps = 1;
  }
  if (o.reps < 1 || o.events == 0) usage("--reps and --events must be at least 1");
  return o;
}

}  // namespace

int replay_main(int argc, char** argv) {
  const replay_bench_options o = parse(argc, argv);
#if defined(__GLIBC__)
  // A fixed mmap threshold: every large buffer of every repetition comes fresh from the kernel,
  // as in a process that replays once. Left dynamic, glibc would serve later repetitions from
  // memory the first one already touched, and the figure would leave out the page faults.
  if (o.cold_memory) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
  const synthetic_trace trace = make_trace(o.events, 42);
  const request_columns columns = trace.columns();
  std::printf(
      "vramscope_bench replay — %zu events (%zu allocs, %zu frees, %zu markers), median of %d, "
      "%s%s\n",
      trace.kind.size(), trace.allocs, trace.frees, trace.markers, o.reps,
      o.cpu_clock ? "thread CPU time" : "wall time",
#ifdef NDEBUG
      ""
#else
      " — DEBUG BUILD, figures not representative"
#endif
  );

  volatile std::uint64_t sink = 0;
  const summary floor =
      time_runs([&] { sink = sink + bare_loop(trace); }, o.reps, o.cpu_clock, trace.kind.size());
  std::printf("peer: bare loop (hash map id -> address, no allocator): %.1f ns/event, %s\n\n",
              floor.median_ns, rate(floor.median_ns).c_str());

  std::vector<measured_row> rows;
  for (const bench_row& row : bench_rows()) {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), row.label) == o.only.end())
      continue;
    measured_row m{row, {}, {}, {}, {}, 0};
    replay_target target{row.label, row.strategy, row.parameters, {}};
    replay_options with_layout;
    with_layout.walk_budget_per_event = o.walk_budget;
    with_layout.peak_walk_budget_per_event = o.peak_walk_budget;
    replay_options without_layout = with_layout;
    without_layout.layout = false;
    m.replay_on = time_runs(
        [&] {
          auto results = replay(columns, {target}, with_layout);
          m.result = results[0].summary;
          m.layout_events = results[0].layout.op.size();
        },
        o.reps, o.cpu_clock, trace.kind.size());
    m.replay_off = time_runs([&] { replay(columns, {target}, without_layout); }, o.reps,
                             o.cpu_clock, trace.kind.size());
    m.direct = time_runs([&] { sink = sink + direct_loop(trace, row); }, o.reps, o.cpu_clock,
                         trace.kind.size());
    std::printf(
        "%-16s replay %7.1f ns/event (%s), without layout %7.1f ns, strategy alone %7.1f ns; "
        "%zu layout events, %llu failures, %llu walks (%llu blocks)%s  [%s]\n",
        row.label.c_str(), m.replay_on.median_ns, rate(m.replay_on.median_ns).c_str(),
        m.replay_off.median_ns, m.direct.median_ns, m.layout_events,
        static_cast<unsigned long long>(m.result.failures),
        static_cast<unsigned long long>(m.result.fragmentation_walks),
        static_cast<unsigned long long>(m.result.walked_blocks),
        m.result.peak_measured_by_rerun ? ", peak re-run" : "", describe(row.parameters).c_str());
    std::fflush(stdout);
    rows.push_back(std::move(m));
  }

  // Every row's strategy in one replay, with layout (what the app's second job does): one after
  // another, beside side by side on every hardware thread (replay_options::threads). Wall time
  // for both, whatever --clock says: a thread's CPU time does not see the others.
  std::vector<replay_target> all_targets;
  for (const measured_row& m : rows)
    all_targets.push_back({m.row.label, m.row.strategy, m.row.parameters, {}});
  summary all_sequential{}, all_parallel{};
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  if (all_targets.size() > 1) {
    replay_options sequential;
    sequential.walk_budget_per_event = o.walk_budget;
    sequential.peak_walk_budget_per_event = o.peak_walk_budget;
    replay_options parallel = sequential;
    sequential.threads = 1;
    parallel.threads = 0;
    all_sequential = time_runs([&] { replay(columns, all_targets, sequential); }, o.reps, false,
                               trace.kind.size());
    all_parallel = time_runs([&] { replay(columns, all_targets, parallel); }, o.reps, false,
                             trace.kind.size());
    std::printf(
        "\n%zu strategies in one replay, with layout: side by side on %u hardware threads %.0f ms, "
        "one after another (peer) %.0f ms: %.2fx\n",
        all_targets.size(), hardware, all_parallel.median_ns * trace.kind.size() / 1e6,
        all_sequential.median_ns * trace.kind.size() / 1e6,
        all_sequential.median_ns / all_parallel.median_ns);
  }

  std::printf("\n### Replay, %zu synthetic events, one core\n\n", trace.kind.size());
  std::printf(
      "| strategy | parameters | replay | events/s | target | met | without layout | strategy "
      "alone | bare loop (peer) |\n");
  std::printf("|---|---|---:|---:|---:|---|---:|---:|---:|\n");
  bool all_met = true;
  for (const measured_row& m : rows) {
    const double eps = 1e9 / m.replay_on.median_ns;
    const bool has_target = m.row.target_events_per_second > 0;
    const bool met = !has_target || eps >= m.row.target_events_per_second;
    all_met = all_met && met;
    char target[32] = "—";
    if (has_target)
      std::snprintf(target, sizeof target, "≥ %.0f M/s", m.row.target_events_per_second / 1e6);
    std::printf("| %s | %s | %.1f ns | %s | %s | %s | %.1f ns | %.1f ns | %.1f ns |\n",
                m.row.label.c_str(), describe(m.row.parameters).c_str(), m.replay_on.median_ns,
                rate(m.replay_on.median_ns).c_str(), target,
                has_target ? (met ? "yes" : "no") : "—", m.replay_off.median_ns, m.direct.median_ns,
                floor.median_ns);
  }

  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    out << "{\n  \"tool\": \"vramscope_bench replay\",\n  \"events\": " << trace.kind.size()
        << ",\n  \"reps\": " << o.reps << ",\n  \"clock\": \""
        << (o.cpu_clock ? "thread_cpu" : "wall")
        << "\",\n  \"bare_loop_ns_per_event\": " << floor.median_ns
        << ",\n  \"hardware_threads\": " << hardware << ",\n  \"all_targets_side_by_side_ms\": "
        << all_parallel.median_ns * trace.kind.size() / 1e6
        << ",\n  \"all_targets_one_after_another_ms\": "
        << all_sequential.median_ns * trace.kind.size() / 1e6 << ",\n  \"rows\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const measured_row& m = rows[i];
      out << (i ? "," : "") << "\n    {\"label\": \"" << m.row.label << "\", \"parameters\": \""
          << describe(m.row.parameters) << "\", \"replay_ns_per_event\": " << m.replay_on.median_ns
          << ", \"replay_p10_ns\": " << m.replay_on.p10_ns
          << ", \"replay_p90_ns\": " << m.replay_on.p90_ns
          << ", \"without_layout_ns_per_event\": " << m.replay_off.median_ns
          << ", \"strategy_alone_ns_per_event\": " << m.direct.median_ns
          << ", \"target_events_per_second\": " << m.row.target_events_per_second
          << ", \"failures\": " << m.result.failures << ", \"layout_events\": " << m.layout_events
          << "}";
    }
    out << "\n  ]\n}\n";
    if (!out) throw std::runtime_error("cannot write " + o.json_path);
  }
  (void)all_met;  // a benchmark reports; it does not fail a build on a busy machine
  return 0;
}

}  // namespace vramscope::bench
