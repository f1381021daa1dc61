// vramscope_bench: nanoseconds per warm alloc+free pair for every registered strategy, each beside
// its peers measured in the same run (cudaMalloc, cudaMallocAsync on a GPU), with tracing off and
// on, and the targets checked at the end in a markdown table for docs/benchmarks.md.
// Without a GPU every strategy runs on the simulated backing and the output says why. This file
// measures (options, machine, the pair loop, the peers' order); bench_report.cpp formats what it
// measured (the per-figure lines, the markdown tables, the targets, the JSON).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#if defined(__linux__)
#include <sched.h>  // sched_getcpu, sched_setaffinity (g++ defines _GNU_SOURCE)
#endif

#include "bench.hpp"
#include "bench_replay.hpp"
#include "bench_report.hpp"
#include "vramscope/allocator.hpp"
#include "vramscope/backing.hpp"
#include "vramscope/errors.hpp"
#include "vramscope/params.hpp"

namespace vramscope::bench {
namespace {

constexpr std::size_t default_live_blocks = 1000;

struct options {
  timing_options timing;
  std::vector<std::size_t> sizes = {512, 1 * MiB, 64 * MiB};
  std::set<std::string> strategies;  // empty: all registered
  std::size_t live_blocks = default_live_blocks;
  bool tracing = true;
  std::size_t trace_ring_events = 1 << 16;                     // the tracing-on recorder's ring
  std::vector<std::pair<std::string, std::string>> overrides;  // "strategy.param" -> value
  bool simulated_beside_real = false;  // on a GPU, also run every strategy on the simulated backing
  bool device_kernels = true;
  bool pin = true;  // keep the measuring thread on one CPU
  std::string json_path;
  std::string markdown_path;
  std::string command_line;
};

[[noreturn]] void usage(const char* why) {
  if (why) std::fprintf(stderr, "vramscope_bench: %s\n\n", why);
  std::fprintf(
      stderr,
      "usage: vramscope_bench [options]\n"
      "  --json FILE          write every figure (medians, p10/p90, machine) as JSON\n"
      "  --markdown FILE      write the final markdown tables to FILE as well\n"
      "  --quick              smoke run: 3 short repetitions, small kernels (CI)\n"
      "  --strategies a,b     only these strategies (registry names)\n"
      "  --sizes 512,1MiB     request sizes (default 512,1MiB,64MiB)\n"
      "  --live N             blocks held live in the second scenario (default 1000; 0: skip)\n"
      "  --reps N             repetitions per figure (default 11)\n"
      "  --min-rep-ms MS      shortest repetition (default 20)\n"
      "  --no-tracing         skip the tracing-on figures\n"
      "  --trace-ring N       events in the tracing-on recorder's ring (default 65536,\n"
      "                       2.5 MiB of 40-byte events)\n"
      "  --param S.NAME=V     set strategy S's parameter NAME (repeatable; a row label\n"
      "                       such as caching.pytorch also matches), e.g. buddy.pool_size=64MiB\n"
      "  --clock wall|cpu     time the strategies' pairs in wall time (default) or this\n"
      "                       thread's CPU time (for a busy machine; the driver peers and\n"
      "                       kernels always use wall time)\n"
      "  --simulated          on a GPU, also run the strategies on the simulated backing\n"
      "  --no-kernels         skip the in-kernel (device_bump) benchmark\n"
      "  --no-pin             leave the measuring thread free to move between CPUs\n");
  std::exit(why ? 2 : 0);
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ','))
    if (!part.empty()) parts.push_back(part);
  return parts;
}

const param_info* find_param(const strategy_info& info, const std::string& name) {
  for (auto& p : info.params)
    if (p.name == name) return &p;
  return nullptr;
}

options parse_options(int argc, char** argv) {
  options o;
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + std::string(argv[i]);
  bool reps_given = false, min_rep_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("option " + arg + " needs a value").c_str());
      return argv[++i];
    };
    if (arg == "--json") o.json_path = value();
    else if (arg == "--markdown") o.markdown_path = value();
    else if (arg == "--quick") o.timing.quick = true;
    else if (arg == "--strategies") {
      for (auto& name : split_commas(value())) {
        find_strategy(name);  // an unknown name fails here, listing the known ones
        o.strategies.insert(name);
      }
    } else if (arg == "--sizes") {
      o.sizes.clear();
      for (auto& s : split_commas(value())) o.sizes.push_back(parse_size(s, "--sizes"));
      if (o.sizes.empty()) usage("--sizes needs at least one size");
    } else if (arg == "--live") o.live_blocks = std::stoul(value());
    else if (arg == "--reps") o.timing.reps = std::stoi(value()), reps_given = true;
    else if (arg == "--min-rep-ms") o.timing.min_rep_ms = std::stod(value()), min_rep_given = true;
    else if (arg == "--no-tracing") o.tracing = false;
    else if (arg == "--trace-ring") {
      o.trace_ring_events = std::stoul(value());
      if (o.trace_ring_events == 0) usage("--trace-ring must be at least 1");
    } else if (arg == "--param") {
      const std::string text = value();
      const auto eq = text.find('=');
      const auto dot = text.rfind('.', eq);  // parameter names have no dots; row labels may
      if (eq == std::string::npos || dot == std::string::npos || dot == 0 || eq < dot + 2)
        usage(("--param takes STRATEGY.NAME=VALUE, got " + text).c_str());
      const std::string strategy = text.substr(0, std::min(text.find('.'), dot));
      find_strategy(strategy);  // an unknown name fails here, listing the known ones
      if (!find_param(find_strategy(strategy), text.substr(dot + 1, eq - dot - 1)))
        usage(("--param " + text + ": " + strategy + " has no parameter '" +
               text.substr(dot + 1, eq - dot - 1) + "'")
                  .c_str());
      o.overrides.emplace_back(text.substr(0, eq), text.substr(eq + 1));
    } else if (arg == "--clock") {
      const std::string clock = value();
      if (clock != "wall" && clock != "cpu") usage("--clock takes wall or cpu");
      o.timing.cpu_clock = clock == "cpu";
    } else if (arg == "--simulated") o.simulated_beside_real = true;
    else if (arg == "--no-kernels") o.device_kernels = false;
    else if (arg == "--no-pin") o.pin = false;
    else if (arg == "--help" || arg == "-h") usage(nullptr);
    else usage(("unknown option " + arg).c_str());
  }
  if (o.timing.quick) {
    if (!reps_given) o.timing.reps = 3;
    if (!min_rep_given) o.timing.min_rep_ms = 1;
  }
  if (o.timing.reps < 1) usage("--reps must be at least 1");
  return o;
}

// --- machine --------------------------------------------------------------------------------------

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? "unknown" : line.substr(start);
      }
    }
  }
  return "unknown";
}

// The 1-minute load average: other work on the machine inflates every figure.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string first;
  if (!(in >> first)) return "unknown";
  return first;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Keeps the calling thread on the CPU it runs on now: a move to another core mid-repetition starts
// it over with cold caches, and the scheduler's choices differ between runs. Threads started
// earlier (the CUDA runtime's, by cuda_device_available) keep every CPU. Returns the CPU, or -1 with
// `why` set.
int pin_to_current_cpu(std::string& why) {
#if defined(__linux__)
  const int cpu = sched_getcpu();
  if (cpu < 0) {
    why = std::string("sched_getcpu failed: ") + std::strerror(errno);
    return -1;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    why = std::string("sched_setaffinity failed: ") + std::strerror(errno);
    return -1;
  }
  return cpu;
#else
  why = "not supported on this system";
  return -1;
#endif
}

// The machine as the report describes it; load_at_end is taken just before the report.
machine probe_machine() {
  machine m;
  m.cpu = cpu_model();
  m.cores = std::thread::hardware_concurrency();
  m.compiler =
#if defined(__clang__)
      "clang " __clang_version__;
#elif defined(__GNUC__)
      "gcc " __VERSION__;
#else
      "unknown";
#endif
  m.optimized =
#ifdef NDEBUG
      true;
#else
      false;
#endif
  m.load_at_start = load_average();
  return m;
}

// --- strategies and the parameters that let each serve the request --------------------------------

struct row {
  std::string label;     // "caching.pytorch"
  std::string strategy;  // registry name
  params base;           // preset etc.
};

std::vector<row> strategy_rows(const options& o) {
  std::vector<row> rows;
  for (const strategy_info& info : strategies()) {
    if (!o.strategies.empty() && !o.strategies.count(info.name)) continue;
    if (info.needs_plan) continue;  // replay only: no online requests to time
    bool has_preset = false;
    for (auto& p : info.params) has_preset = has_preset || p.name == "preset";
    // The caching strategy's two presets are two different allocators: measure both.
    if (info.name == "caching" && has_preset) {
      rows.push_back({"caching.pow2", info.name, {{"preset", "pow2"}}});
      rows.push_back({"caching.pytorch", info.name, {{"preset", "pytorch"}}});
    } else {
      rows.push_back({info.name, info.name, {}});
    }
  }
  return rows;
}

std::uint64_t default_size_of(const param_info& p) {
  try {
    return parse_size(p.default_value, p.name);
  } catch (const error&) {
    return 0;
  }
}

struct sized_params {
  params values;
  std::uint64_t device_bytes = 0;  // physical memory the parameters commit up front (estimate)
};

// Defaults, except where a default cannot serve the request (or the held blocks): a pool, reserve or
// capacity twice what the scenario holds, a fixed block size equal to the request, a size class
// list that reaches the request. Only parameters the strategy declares are set, so a strategy
// written after this file is measured with its defaults.
sized_params sizing_params(const strategy_info& info, const params& base, std::size_t size,
                           std::size_t live_blocks, std::size_t live_block_size) {
  sized_params out{base, 0};
  const std::uint64_t request = align_up(size, min_alignment);
  if (find_param(info, "block_size")) {
    // Fixed-size blocks: every block, held ones included, is one request's size.
    out.values.set("block_size", std::to_string(request));
    if (find_param(info, "pool_size")) {
      const std::uint64_t pool = request * (live_blocks + 2);
      out.values.set("pool_size", std::to_string(pool));
      out.device_bytes = pool;
    }
    return out;
  }
  const std::uint64_t held = live_blocks * align_up(live_block_size, min_alignment);
  const std::uint64_t need = next_power_of_two(2 * (request + held));
  for (const char* name : {"pool_size", "capacity", "reserve"}) {
    const param_info* p = find_param(info, name);
    if (!p || p->kind != "size") continue;
    const std::uint64_t fallback = default_size_of(*p);
    // 0 (or no size at all) means unbounded or automatic: the strategy sizes itself.
    if (fallback == 0 || fallback >= need) continue;
    out.values.set(name, std::to_string(need));
    if (std::string(name) != "reserve") out.device_bytes = std::max(out.device_bytes, need);
  }
  if (const param_info* p = find_param(info, "slab_size"); p && default_size_of(*p) < request)
    out.values.set("slab_size", std::to_string(next_power_of_two(request)));
  for (auto& p : info.params) {
    if (p.kind != "size_list") continue;
    params probe{{p.name, p.default_value}};
    std::vector<std::uint64_t> list = probe.get_size_list(p.name, {});
    if (list.empty()) continue;
    const std::uint64_t largest = *std::max_element(list.begin(), list.end());
    bool grown = false;
    for (std::uint64_t s : {align_up(live_block_size, min_alignment), request})
      if (s > largest && std::find(list.begin(), list.end(), s) == list.end()) {
        list.push_back(s);
        grown = true;
      }
    if (!grown) continue;
    std::sort(list.begin(), list.end());
    std::string text;
    for (auto s : list) text += (text.empty() ? "" : ",") + std::to_string(s);
    out.values.set(p.name, text);
  }
  return out;
}

std::string describe_params(const params& p) {
  std::string text;
  for (auto& [k, v] : p.values()) text += (text.empty() ? "" : " ") + k + "=" + v;
  return text;
}

struct environment {
  std::uint64_t real_budget = 0;  // device bytes a strategy may commit up front on a real backing
};

// What reading a clock costs (the median of back-to-back readings): taken off every timed chunk,
// which matters where a bulk-free strategy is reset every few pairs and the chunks are short.
double clock_overhead_ns(double (*clock)()) {
  std::vector<double> deltas(1001);
  for (double& d : deltas) {
    const double a = clock();
    d = clock() - a;
  }
  return percentile(deltas, 0.5);
}

// One allocator, on its own backing, ready for the pair loop: the held blocks taken, tracing on or
// off. run(n) times n warm pairs.
class pair_loop {
 public:
  pair_loop(const row& r, backing_kind kind, const params& values, std::size_t size,
            std::size_t live_blocks, std::size_t live_block_size, bool tracing, bool cpu_clock,
            std::size_t ring_events)
      : size_(size),
        live_blocks_(live_blocks),
        live_block_size_(live_block_size),
        clock_(cpu_clock ? thread_cpu_ns : wall_ns),
        recorder_(tracing ? ring_events : 1) {
    static const double wall_overhead = clock_overhead_ns(wall_ns);
    static const double cpu_overhead = clock_overhead_ns(thread_cpu_ns);
    clock_overhead_ = cpu_clock ? cpu_overhead : wall_overhead;
    simulated_options sim;
    sim.capacity = 80 * GiB;  // an H100's memory, so the simulated device runs out where it would
    backing_ = make_backing(kind, sim);
    allocator_ = make_allocator(r.strategy, *backing_, values);
    if (tracing) allocator_->set_tracer(&recorder_);
    hold();
  }
  ~pair_loop() {
    try {
      for (void* p : held_) allocator_->deallocate(p);
    } catch (const std::exception&) {
      // A device error while tearing down: the allocator's destructor gives its memory back anyway.
    }
  }
  pair_loop(const pair_loop&) = delete;
  pair_loop& operator=(const pair_loop&) = delete;

  // A strategy that frees only in bulk (device_bump; arena without LIFO reclaim) runs out after
  // some pairs. The first time it does, the pairs that fitted since the last reset are counted;
  // from then on it is reset, and the held blocks taken again, every `pairs_per_reset` pairs,
  // outside the timed span. The chunk that ran out is measured again.
  double run(std::uint64_t n) {
    allocator& a = *allocator_;
    double timed = 0;
    std::uint64_t done = 0;
    while (done < n) {
      std::uint64_t chunk = std::min<std::uint64_t>(n - done, 4096);
      if (pairs_per_reset_) {
        if (since_reset_ == pairs_per_reset_) reset();
        chunk = std::min(chunk, pairs_per_reset_ - since_reset_);
      }
      std::uint64_t i = 0;
      const double start = clock_();
      try {
        for (; i < chunk; ++i) a.deallocate(a.allocate(size_));
      } catch (const out_of_memory&) {
        if (!a.supports_reset() || since_reset_ + i == 0) throw;
        pairs_per_reset_ = since_reset_ + i;
        reset();
        continue;
      }
      timed += std::max(0.0, clock_() - start - clock_overhead_);
      done += chunk;
      since_reset_ += chunk;
    }
    return timed;
  }

  std::uint64_t pairs_per_reset() const noexcept { return pairs_per_reset_; }

 private:
  void hold() {
    held_.clear();
    for (std::size_t i = 0; i < live_blocks_; ++i)
      held_.push_back(allocator_->allocate(live_block_size_));
  }
  void reset() {
    allocator_->reset();
    hold();
    since_reset_ = 0;
  }

  std::size_t size_, live_blocks_, live_block_size_;
  double (*clock_)();
  double clock_overhead_;
  // Declared before the allocator, so that they outlive it.
  std::unique_ptr<backing> backing_;
  ring_tracer recorder_;
  std::unique_ptr<allocator> allocator_;
  std::vector<void*> held_;
  std::uint64_t pairs_per_reset_ = 0;
  std::uint64_t since_reset_ = 0;
};

// One cell: tracing off and, unless disabled, tracing on, measured in alternating repetitions.
std::vector<figure> measure_strategy(const row& r, backing_kind kind, std::size_t size,
                                     std::size_t live_blocks, std::size_t live_block_size,
                                     const options& o, const environment& env) {
  const bool with_tracing = o.tracing;
  const timing_options& timing = o.timing;
  figure off;
  off.subject = r.label;
  off.kind = "strategy";
  off.backing = backing_kind_name(kind);
  off.unit = "alloc+free pair";
  off.size = size;
  off.live_blocks = live_blocks;
  off.live_block_size = live_blocks ? live_block_size : 0;
  figure on = off;
  on.tracing = true;
  auto both = [&](const std::string& note) {
    off.note = on.note = note;
    return with_tracing ? std::vector<figure>{off, on} : std::vector<figure>{off};
  };
  try {
    const strategy_info& info = find_strategy(r.strategy);
    sized_params sized = sizing_params(info, r.base, size, live_blocks, live_block_size);
    // --param comes last: what the user sets wins over the sizing above.
    for (const auto& [key, value] : o.overrides) {
      const std::string subject = key.substr(0, key.rfind('.'));
      if (subject == r.strategy || subject == r.label)
        sized.values.set(key.substr(key.rfind('.') + 1), value);
    }
    const std::uint64_t committed = sized.device_bytes * (with_tracing ? 2 : 1);
    if (kind != backing_kind::simulated && committed > env.real_budget)
      return both(
          "not measured: its parameters commit " + format_bytes(committed) +
          " of device memory up front (tracing off and on), more than this run's budget of " +
          format_bytes(env.real_budget));
    std::string note = describe_params(sized.values);
    pair_loop untraced(r, kind, sized.values, size, live_blocks, live_block_size, false,
                       timing.cpu_clock, 1);
    std::uint64_t pairs_per_reset = 0;
    if (with_tracing) {
      pair_loop traced(r, kind, sized.values, size, live_blocks, live_block_size, true,
                       timing.cpu_clock, o.trace_ring_events);
      std::tie(off.result, on.result) =
          measure_interleaved([&](std::uint64_t n) { return untraced.run(n); },
                              [&](std::uint64_t n) { return traced.run(n); }, timing);
      on.measured = true;
      pairs_per_reset = traced.pairs_per_reset();
    } else {
      off.result = measure([&](std::uint64_t n) { return untraced.run(n); }, timing);
    }
    off.measured = true;
    pairs_per_reset = std::max(pairs_per_reset, untraced.pairs_per_reset());
    if (pairs_per_reset)
      note += std::string(note.empty() ? "" : "; ") +
              "reset() and re-holding the live blocks every " + std::to_string(pairs_per_reset) +
              " pairs, not timed";
    std::vector<figure> out = both(note);
    return out;
  } catch (const std::exception& e) {
    off.measured = on.measured = false;
    return both(std::string("not measured: ") + e.what());
  }
}

int run_benchmark(const options& o) {
  machine m = probe_machine();
  m.gpu = cuda_device_available(&m.gpu_reason);
  environment env;
  const std::string date = utc_now();

  std::printf("vramscope_bench — %s\n", date.c_str());
  std::printf("CPU: %s (%u cores, load average %s), %s%s\n", m.cpu.c_str(), m.cores,
              m.load_at_start.c_str(), m.compiler.c_str(),
              m.optimized ? "" : " — DEBUG BUILD, figures not representative");
#ifdef VRAMSCOPE_WITH_CUDA
  if (m.gpu) {
    m.gpu_info = describe_gpu();
    // Fixed pools (block_pool, buddy) are created whole; keep them well inside the device.
    env.real_budget = std::min<std::uint64_t>(16 * GiB, m.gpu_info.free_memory / 2);
    std::printf("GPU: %s, sm_%s, %s (%s free), driver %s, runtime %s\n", m.gpu_info.name.c_str(),
                m.gpu_info.compute_capability.c_str(),
                format_bytes(m.gpu_info.total_memory).c_str(),
                format_bytes(m.gpu_info.free_memory).c_str(), m.gpu_info.driver_version.c_str(),
                m.gpu_info.runtime_version.c_str());
  }
#endif
  if (!m.gpu)
    std::printf(
        "GPU: none — the CUDA peers (cudaMalloc+cudaFree, cudaMallocAsync+cudaFreeAsync) and "
        "the real backings are not measured: %s. Every strategy runs on the simulated "
        "backing.\n",
        m.gpu_reason.c_str());
  if (o.pin) {
    std::string why;
    m.pinned_cpu = pin_to_current_cpu(why);
    if (m.pinned_cpu >= 0)
      std::printf(
          "Pinned: the measuring thread stays on CPU %d (sched_setaffinity; --no-pin to "
          "leave it free)\n",
          m.pinned_cpu);
    else std::printf("Not pinned: %s\n", why.c_str());
  } else {
    std::printf("Not pinned (--no-pin)\n");
  }
  std::printf("Timing: median of %d reps, each >= %g ms, strategies in %s%s\n\n", o.timing.reps,
              o.timing.min_rep_ms, o.timing.cpu_clock ? "thread CPU time" : "wall time",
              o.timing.quick ? " (--quick: a smoke run, figures are rough)" : "");

  std::vector<figure> figures;
  figures.reserve(1024);
  auto add = [&](figure f) {
    print_figure(f);
    figures.push_back(std::move(f));
  };

  std::vector<std::size_t> lives = {0};
  if (o.live_blocks) lives.push_back(o.live_blocks);

#ifdef VRAMSCOPE_WITH_CUDA
  if (m.gpu) {
    std::printf("Peers (the driver's allocators, same run):\n");
    for (std::size_t live : lives)
      for (std::size_t size : o.sizes) {
        const std::size_t held = std::min(size, max_live_block_size);
        add(measure_cuda_malloc_pair(size, live, held, o.timing));
        add(measure_cuda_malloc_async_pair(size, live, held, o.timing));
      }
  }
#endif

  const std::vector<row> rows = strategy_rows(o);
  std::printf("\nStrategies (%zu rows):\n", rows.size());
  for (const row& r : rows) {
    const strategy_info& info = find_strategy(r.strategy);
    std::vector<backing_kind> kinds;
    if (m.gpu) kinds.push_back(info.cuda_backing);
    if (!m.gpu || o.simulated_beside_real) kinds.push_back(backing_kind::simulated);
    for (backing_kind kind : kinds)
      for (std::size_t live : lives)
        for (std::size_t size : o.sizes) {
          const std::size_t held = std::min(size, max_live_block_size);
          for (figure& f : measure_strategy(r, kind, size, live, held, o, env)) add(std::move(f));
        }
  }

#ifdef VRAMSCOPE_WITH_CUDA
  if (m.gpu && o.device_kernels) {
    std::printf("\nIn-kernel allocation:\n");
    for (figure& f : measure_device_allocation(o.timing)) add(std::move(f));
  }
#endif

  const std::vector<target_check> checks = check_targets(figures, m.gpu);
  m.load_at_end = load_average();
  const run_description run{date, o.command_line, o.timing, o.sizes, o.live_blocks};
  const std::string md = markdown_tables(figures, run, m, checks);
  std::printf("\n%s", md.c_str());
  if (!o.markdown_path.empty()) {
    std::ofstream out(o.markdown_path);
    out << md;
    if (!out) throw std::runtime_error("cannot write " + o.markdown_path);
  }
  if (!o.json_path.empty()) {
    write_json(o.json_path, figures, run, m, checks);
    std::printf("\nJSON written to %s\n", o.json_path.c_str());
  }
  // Some cells may legitimately go unmeasured (a fixed pool over the device budget); a strategy
  // with no figure at all means the strategy or its benchmark configuration is broken.
  const std::string broken = rows_without_figures(figures);
  if (!broken.empty()) {
    std::fprintf(stderr, "vramscope_bench: no figure could be measured for %s\n", broken.c_str());
    return 3;
  }
  return 0;
}

}  // namespace
}  // namespace vramscope::bench

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::strcmp(argv[1], "replay") == 0)
      return vramscope::bench::replay_main(argc - 1, argv + 1);
    return vramscope::bench::run_benchmark(vramscope::bench::parse_options(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vramscope_bench: %s\n", e.what());
    return 1;
  }
}
