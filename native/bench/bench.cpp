// vramscope_bench: nanoseconds per warm alloc+free pair for every registered strategy, each beside
// its peers measured in the same run (cudaMalloc, cudaMallocAsync on a GPU), with tracing off and
// on, and the DESIGN.md targets checked at the end in a markdown table for docs/benchmarks.md.
// Without a GPU every strategy runs on the simulated backing and the output says why.
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
#include "vramscope/allocator.hpp"
#include "vramscope/backing.hpp"
#include "vramscope/errors.hpp"
#include "vramscope/params.hpp"

namespace vramscope::bench {
namespace {

constexpr std::size_t default_live_blocks = 1000;
// Held blocks are as large as the request up to this; beyond it 1000 held blocks of the request's
// size (64 GiB at 64 MiB) would measure the device's capacity rather than the allocator.
constexpr std::size_t max_live_block_size = 1 * MiB;

struct options {
  timing_options timing;
  std::vector<std::size_t> sizes = {512, 1 * MiB, 64 * MiB};
  std::set<std::string> strategies;  // empty: all registered
  std::size_t live_blocks = default_live_blocks;
  bool tracing = true;
  std::size_t trace_ring_events = 1 << 16;  // the tracing-on recorder's ring
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
  std::fprintf(stderr,
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
               text.substr(dot + 1, eq - dot - 1) + "'").c_str());
      o.overrides.emplace_back(text.substr(0, eq), text.substr(eq + 1));
    }
    else if (arg == "--clock") {
      const std::string clock = value();
      if (clock != "wall" && clock != "cpu") usage("--clock takes wall or cpu");
      o.timing.cpu_clock = clock == "cpu";
    }
    else if (arg == "--simulated") o.simulated_beside_real = true;
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

struct machine {
  std::string cpu = cpu_model();
  unsigned cores = std::thread::hardware_concurrency();
  std::string compiler =
#if defined(__clang__)
      "clang " __clang_version__;
#elif defined(__GNUC__)
      "gcc " __VERSION__;
#else
      "unknown";
#endif
  bool optimized =
#ifdef NDEBUG
      true;
#else
      false;
#endif
  std::string load_at_start = load_average();
  std::string load_at_end;
  int pinned_cpu = -1;  // the CPU the measuring thread was kept on; -1: not pinned
  bool gpu = false;
  std::string gpu_reason;  // why there is none
#ifdef VRAMSCOPE_WITH_CUDA
  gpu_description gpu_info;
#endif
};

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
    bool has_preset = false;
    for (auto& p : info.params) has_preset = has_preset || p.name == "preset";
    // The caching strategy's two presets are two different allocators (DESIGN.md): measure both.
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
      : size_(size), live_blocks_(live_blocks), live_block_size_(live_block_size),
        clock_(cpu_clock ? thread_cpu_ns : wall_ns), recorder_(tracing ? ring_events : 1) {
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
    for (std::size_t i = 0; i < live_blocks_; ++i) held_.push_back(allocator_->allocate(live_block_size_));
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
      if (subject == r.strategy || subject == r.label) sized.values.set(key.substr(key.rfind('.') + 1), value);
    }
    const std::uint64_t committed = sized.device_bytes * (with_tracing ? 2 : 1);
    if (kind != backing_kind::simulated && committed > env.real_budget)
      return both("not measured: its parameters commit " + format_bytes(committed) +
                  " of device memory up front (tracing off and on), more than this run's budget of " +
                  format_bytes(env.real_budget));
    std::string note = describe_params(sized.values);
    pair_loop untraced(r, kind, sized.values, size, live_blocks, live_block_size, false,
                       timing.cpu_clock, 1);
    std::uint64_t pairs_per_reset = 0;
    if (with_tracing) {
      pair_loop traced(r, kind, sized.values, size, live_blocks, live_block_size, true,
                       timing.cpu_clock, o.trace_ring_events);
      std::tie(off.result, on.result) = measure_interleaved(
          [&](std::uint64_t n) { return untraced.run(n); },
          [&](std::uint64_t n) { return traced.run(n); }, timing);
      on.measured = true;
      pairs_per_reset = traced.pairs_per_reset();
    } else {
      off.result = measure([&](std::uint64_t n) { return untraced.run(n); }, timing);
    }
    off.measured = true;
    pairs_per_reset = std::max(pairs_per_reset, untraced.pairs_per_reset());
    if (pairs_per_reset)
      note += std::string(note.empty() ? "" : "; ") + "reset() and re-holding the live blocks every " +
              std::to_string(pairs_per_reset) + " pairs, not timed";
    std::vector<figure> out = both(note);
    return out;
  } catch (const std::exception& e) {
    off.measured = on.measured = false;
    return both(std::string("not measured: ") + e.what());
  }
}

// --- output ---------------------------------------------------------------------------------------

std::string format_ns(double ns) {
  char buf[48];
  if (ns < 100) std::snprintf(buf, sizeof buf, "%.1f ns", ns);
  else if (ns < 1e4) std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  else if (ns < 1e7) std::snprintf(buf, sizeof buf, "%.1f µs", ns / 1e3);
  else std::snprintf(buf, sizeof buf, "%.1f ms", ns / 1e6);
  return buf;
}

std::string format_ratio(double r) {
  char buf[32];
  if (r < 10) std::snprintf(buf, sizeof buf, "%.2f×", r);
  else std::snprintf(buf, sizeof buf, "%.0f×", r);
  return buf;
}

std::string scenario_name(const figure& f) {
  std::string s = format_bytes(f.size);
  if (f.live_blocks) s += " + " + std::to_string(f.live_blocks) + " live";
  return s;
}

void print_figure(const figure& f) {
  if (f.kind == "device") {
    if (f.measured)
      std::printf("  %-38s %10s per allocation  p10 %s  p90 %s  (%s)\n", f.subject.c_str(),
                  format_ns(f.result.median_ns).c_str(), format_ns(f.result.p10_ns).c_str(),
                  format_ns(f.result.p90_ns).c_str(), f.note.c_str());
    else
      std::printf("  %-38s %s\n", f.subject.c_str(), f.note.c_str());
    std::fflush(stdout);
    return;
  }
  if (f.measured) {
    std::printf("  %-16s %-12s %-22s tracing %-3s %10s   p10 %s  p90 %s  %d reps x %llu\n",
                f.subject.c_str(), f.backing.c_str(), scenario_name(f).c_str(),
                f.tracing ? "on" : "off", format_ns(f.result.median_ns).c_str(),
                format_ns(f.result.p10_ns).c_str(), format_ns(f.result.p90_ns).c_str(),
                f.result.reps, static_cast<unsigned long long>(f.result.ops_per_rep));
  } else {
    std::printf("  %-16s %-12s %-22s tracing %-3s %s\n", f.subject.c_str(), f.backing.c_str(),
                scenario_name(f).c_str(), f.tracing ? "on" : "off", f.note.c_str());
  }
  std::fflush(stdout);
}

struct cell_key {
  std::size_t size;
  std::size_t live;
  bool operator<(const cell_key& o) const { return size != o.size ? size < o.size : live < o.live; }
};

struct table_row {
  std::string subject, backing, kind;
  std::map<cell_key, const figure*> off, on;
};

std::vector<table_row> tabulate(const std::vector<figure>& figures) {
  std::vector<table_row> rows;
  for (const figure& f : figures) {
    if (f.kind == "device") continue;
    auto it = std::find_if(rows.begin(), rows.end(), [&](const table_row& r) {
      return r.subject == f.subject && r.backing == f.backing;
    });
    if (it == rows.end()) {
      rows.push_back({f.subject, f.backing, f.kind, {}, {}});
      it = rows.end() - 1;
    }
    (f.tracing ? it->on : it->off)[{f.size, f.live_blocks}] = &f;
  }
  // Peers first: the rows every strategy is read against.
  std::stable_partition(rows.begin(), rows.end(), [](const table_row& r) { return r.kind == "peer"; });
  return rows;
}

const figure* lookup(const std::map<cell_key, const figure*>& m, const cell_key& k) {
  auto it = m.find(k);
  return it == m.end() || !it->second->measured ? nullptr : it->second;
}

struct target_check {
  std::string target;
  std::string measured;
  std::string met;  // "yes", "no" or "—"
};

// The targets of DESIGN.md, each checked against every measured cell of the rows it names (the
// worst cell decides), on the real backing where there is a GPU.
std::vector<target_check> check_targets(const std::vector<table_row>& rows,
                                        const std::string& backing_of_record, bool gpu) {
  std::vector<target_check> checks;
  auto is_record = [&](const table_row& r) { return r.kind == "strategy" && r.backing == backing_of_record; };
  auto starts_with = [](const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; };

  struct latency_target {
    std::string prefix;
    double max_ns;
  };
  for (const latency_target& t : {latency_target{"caching", 60}, latency_target{"slab", 25},
                                  latency_target{"block_pool", 25}, latency_target{"arena", 15},
                                  latency_target{"buddy", 120}}) {
    for (const table_row& r : rows) {
      if (!is_record(r) || !(r.subject == t.prefix || starts_with(r.subject, t.prefix + "."))) continue;
      const figure* worst = nullptr;
      for (auto& [k, f] : r.off)
        if (f->measured && (!worst || f->result.median_ns > worst->result.median_ns)) worst = f;
      char target[96];
      std::snprintf(target, sizeof target, "%s warm pair ≤ %.0f ns", r.subject.c_str(), t.max_ns);
      if (!worst) {
        checks.push_back({target, "not measured", "—"});
        continue;
      }
      checks.push_back({target,
                        "worst " + format_ns(worst->result.median_ns) + " (" + scenario_name(*worst) + ")",
                        worst->result.median_ns <= t.max_ns ? "yes" : "no"});
    }
  }

  struct speedup_target {
    std::string peer;
    double min_ratio;
  };
  for (const speedup_target& t : {speedup_target{"cudaMallocAsync+cudaFreeAsync", 10},
                                  speedup_target{"cudaMalloc+cudaFree", 1000}}) {
    const table_row* peer = nullptr;
    for (const table_row& r : rows)
      if (r.subject == t.peer) peer = &r;
    for (const table_row& r : rows) {
      if (!is_record(r) || !starts_with(r.subject, "caching")) continue;
      char target[128];
      std::snprintf(target, sizeof target, "%s ≥ %.0f× faster than %s", r.subject.c_str(),
                    t.min_ratio, t.peer.c_str());
      if (!gpu || !peer) {
        checks.push_back({target, std::string("not measured: ") + (gpu ? "peer missing" : "no GPU"), "—"});
        continue;
      }
      double worst = 0;
      const figure* at = nullptr;
      for (auto& [k, f] : r.off) {
        const figure* p = lookup(peer->off, k);
        if (!f->measured || !p) continue;
        const double ratio = p->result.median_ns / f->result.median_ns;
        if (!at || ratio < worst) worst = ratio, at = f;
      }
      if (!at) {
        checks.push_back({target, "no cell measured for both", "—"});
        continue;
      }
      checks.push_back({target, "lowest " + format_ratio(worst) + " (" + scenario_name(*at) + ")",
                        worst >= t.min_ratio ? "yes" : "no"});
    }
  }

  double worst_ratio = 0;
  std::string where;
  for (const table_row& r : rows) {
    if (!is_record(r)) continue;
    for (auto& [k, on] : r.on) {
      const figure* off = lookup(r.off, k);
      if (!on->measured || !off) continue;
      const double ratio = on->result.median_ns / off->result.median_ns;
      if (ratio > worst_ratio) worst_ratio = ratio, where = r.subject + ", " + scenario_name(*on);
    }
  }
  if (where.empty()) checks.push_back({"tracing on ≤ 1.3× tracing off", "not measured", "—"});
  else
    checks.push_back({"tracing on ≤ 1.3× tracing off (every strategy and cell)",
                      "worst " + format_ratio(worst_ratio) + " (" + where + ")",
                      worst_ratio <= 1.3 ? "yes" : "no"});
  return checks;
}

std::string markdown_tables(const std::vector<figure>& figures, const options& o, const machine& m,
                            const std::vector<target_check>& checks, const std::string& date) {
  std::ostringstream md;
  const std::vector<table_row> rows = tabulate(figures);
  std::vector<cell_key> cells;
  for (std::size_t s : o.sizes) cells.push_back({s, 0});
  if (o.live_blocks)
    for (std::size_t s : o.sizes) cells.push_back({s, o.live_blocks});

  md << "Machine: " << m.cpu << ", " << m.cores << " cores (load average " << m.load_at_start
     << " at the start, " << m.load_at_end << " at the end)";
#ifdef VRAMSCOPE_WITH_CUDA
  if (m.gpu)
    md << "; GPU " << m.gpu_info.name << " (sm_" << m.gpu_info.compute_capability << ", "
       << format_bytes(m.gpu_info.total_memory) << "), driver " << m.gpu_info.driver_version
       << ", runtime " << m.gpu_info.runtime_version;
#endif
  if (!m.gpu) md << "; no GPU (" << m.gpu_reason << ")";
  md << "  \nDate: " << date << "  \nCommand: `" << o.command_line << "`  \n"
     << "Each figure: median of " << o.timing.reps << " repetitions of N warm pairs, N chosen so a "
     << "repetition lasts ≥ " << o.timing.min_rep_ms << " ms (p10/p90 in the JSON), timed in "
     << (o.timing.cpu_clock ? "this thread's CPU time (--clock cpu: the machine was shared; the "
                              "driver peers and kernels, if any, in wall time)"
                            : "wall time")
     << ". Held blocks: "
     << "the request's size up to " << format_bytes(max_live_block_size) << ", "
     << format_bytes(max_live_block_size) << " beyond. Parameters: defaults, except where a "
     << "default cannot serve the cell: pool_size / capacity raised to a power of two ≥ twice what "
     << "the cell holds, block_pool's block_size = the request with (live + 2) blocks, slab's "
     << "classes extended to the request (each cell's values are in the JSON note).\n\n";
  if (!m.optimized) md << "**Warning: built without NDEBUG (assertions on); not representative.**\n\n";

  md << "### Warm alloc+free pair, tracing off\n\n| allocator | backing |";
  for (auto& c : cells)
    md << " " << format_bytes(c.size) << (c.live ? " · " + std::to_string(c.live) + " live" : "") << " |";
  md << " tracing on ÷ off (worst) |\n|---|---|";
  for (std::size_t i = 0; i < cells.size(); ++i) md << "---:|";
  md << "---:|\n";
  for (const table_row& r : rows) {
    md << "| " << r.subject << " | " << r.backing << " |";
    for (auto& c : cells) {
      const figure* f = lookup(r.off, c);
      md << " " << (f ? format_ns(f->result.median_ns) : std::string("—")) << " |";
    }
    double worst = 0;
    for (auto& [k, on] : r.on) {
      const figure* off = lookup(r.off, k);
      if (on->measured && off) worst = std::max(worst, on->result.median_ns / off->result.median_ns);
    }
    md << " " << (worst > 0 ? format_ratio(worst) : std::string("—")) << " |\n";
  }
  std::vector<std::string> notes;
  for (const figure& f : figures)
    if (f.kind != "device" && !f.measured && !f.tracing)
      notes.push_back(f.subject + " @ " + f.backing + ", " + scenario_name(f) + ": " + f.note);
  if (!notes.empty()) {
    md << "\n—: ";
    for (std::size_t i = 0; i < notes.size(); ++i) md << (i ? "; " : "") << notes[i];
    md << "\n";
  }
  for (const table_row& r : rows)
    if (r.kind == "peer")
      for (auto& [k, f] : r.off) {
        md << "\n" << r.subject << ": " << f->note << "\n";
        break;
      }

  bool any_device = false;
  for (const figure& f : figures) any_device = any_device || f.kind == "device";
  if (any_device) {
    md << "\n### In-kernel allocation\n\n| allocator | workload | per allocation | allocations/s |\n"
       << "|---|---|---:|---:|\n";
    for (const figure& f : figures) {
      if (f.kind != "device") continue;
      if (!f.measured) {
        md << "| " << f.subject << " | " << f.note << " | — | — |\n";
        continue;
      }
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.3g", 1e9 / f.result.median_ns);
      md << "| " << f.subject << " | " << f.note << " | " << format_ns(f.result.median_ns) << " | "
         << rate << " |\n";
    }
  }

  md << "\n### Targets (DESIGN.md)\n\n";
  if (!m.gpu)
    md << "Checked on the simulated backing of a machine without a GPU: the targets are for an "
          "H100; these rows show the code paths, not the GPU figures.\n\n";
  md << "| target | measured | met |\n|---|---|---|\n";
  for (auto& c : checks) md << "| " << c.target << " | " << c.measured << " | " << c.met << " |\n";
  return md.str();
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string q(const std::string& s) { return "\"" + json_escape(s) + "\""; }

void write_json(const std::string& path, const std::vector<figure>& figures, const options& o,
                const machine& m, const std::vector<target_check>& checks, const std::string& date) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out.precision(6);
  out << "{\n  \"tool\": \"vramscope_bench\",\n  \"date\": " << q(date) << ",\n  \"command\": "
      << q(o.command_line) << ",\n  \"reps\": " << o.timing.reps << ",\n  \"min_rep_ms\": "
      << o.timing.min_rep_ms << ",\n  \"clock\": " << q(o.timing.cpu_clock ? "thread_cpu" : "wall")
      << ",\n  \"quick\": " << (o.timing.quick ? "true" : "false")
      << ",\n  \"machine\": {\n    \"cpu\": " << q(m.cpu) << ",\n    \"cores\": " << m.cores
      << ",\n    \"load_average_start\": " << q(m.load_at_start) << ",\n    \"load_average_end\": "
      << q(m.load_at_end) << ",\n    \"compiler\": " << q(m.compiler) << ",\n    \"optimized\": "
      << (m.optimized ? "true" : "false") << ",\n    \"pinned_cpu\": "
      << (m.pinned_cpu >= 0 ? std::to_string(m.pinned_cpu) : std::string("null"))
      << ",\n    \"gpu\": ";
#ifdef VRAMSCOPE_WITH_CUDA
  if (m.gpu) {
    out << "{\"name\": " << q(m.gpu_info.name) << ", \"compute_capability\": "
        << q(m.gpu_info.compute_capability) << ", \"driver_version\": " << q(m.gpu_info.driver_version)
        << ", \"runtime_version\": " << q(m.gpu_info.runtime_version)
        << ", \"total_memory\": " << m.gpu_info.total_memory << "}";
  }
#endif
  if (!m.gpu) out << "null,\n    \"no_gpu_reason\": " << q(m.gpu_reason);
  out << "\n  },\n  \"figures\": [";
  for (std::size_t i = 0; i < figures.size(); ++i) {
    const figure& f = figures[i];
    out << (i ? "," : "") << "\n    {\"subject\": " << q(f.subject) << ", \"kind\": " << q(f.kind)
        << ", \"backing\": " << q(f.backing) << ", \"unit\": " << q(f.unit) << ", \"size\": " << f.size
        << ", \"live_blocks\": " << f.live_blocks << ", \"live_block_size\": " << f.live_block_size
        << ", \"tracing\": " << (f.tracing ? "true" : "false")
        << ", \"measured\": " << (f.measured ? "true" : "false");
    if (f.measured)
      out << ", \"median_ns\": " << f.result.median_ns << ", \"p10_ns\": " << f.result.p10_ns
          << ", \"p90_ns\": " << f.result.p90_ns << ", \"reps\": " << f.result.reps
          << ", \"ops_per_rep\": " << f.result.ops_per_rep;
    out << ", \"note\": " << q(f.note) << "}";
  }
  out << "\n  ],\n  \"targets\": [";
  for (std::size_t i = 0; i < checks.size(); ++i)
    out << (i ? "," : "") << "\n    {\"target\": " << q(checks[i].target) << ", \"measured\": "
        << q(checks[i].measured) << ", \"met\": " << q(checks[i].met) << "}";
  out << "\n  ]\n}\n";
}

int run_benchmark(const options& o) {
  machine m;
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
                m.gpu_info.compute_capability.c_str(), format_bytes(m.gpu_info.total_memory).c_str(),
                format_bytes(m.gpu_info.free_memory).c_str(), m.gpu_info.driver_version.c_str(),
                m.gpu_info.runtime_version.c_str());
  }
#endif
  if (!m.gpu)
    std::printf("GPU: none — the CUDA peers (cudaMalloc+cudaFree, cudaMallocAsync+cudaFreeAsync) and "
                "the real backings are not measured: %s. Every strategy runs on the simulated "
                "backing.\n",
                m.gpu_reason.c_str());
  if (o.pin) {
    std::string why;
    m.pinned_cpu = pin_to_current_cpu(why);
    if (m.pinned_cpu >= 0)
      std::printf("Pinned: the measuring thread stays on CPU %d (sched_setaffinity; --no-pin to "
                  "leave it free)\n",
                  m.pinned_cpu);
    else
      std::printf("Not pinned: %s\n", why.c_str());
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
          for (figure& f : measure_strategy(r, kind, size, live, held, o, env))
            add(std::move(f));
        }
  }

#ifdef VRAMSCOPE_WITH_CUDA
  if (m.gpu && o.device_kernels) {
    std::printf("\nIn-kernel allocation:\n");
    for (figure& f : measure_device_allocation(o.timing)) add(std::move(f));
  }
#endif

  std::vector<table_row> rows_for_targets = tabulate(figures);
  // On a GPU each strategy's real backing is the one of record (the row whose backing is not
  // simulated).
  std::vector<target_check> checks;
  if (m.gpu) {
    std::vector<table_row> real;
    for (auto& r : rows_for_targets)
      if (r.backing != "simulated") {
        real.push_back(r);
        if (r.kind == "strategy") real.back().backing = "real";
      }
    checks = check_targets(real, "real", true);
  } else {
    checks = check_targets(rows_for_targets, "simulated", false);
  }
  m.load_at_end = load_average();
  const std::string md = markdown_tables(figures, o, m, checks, date);
  std::printf("\n%s", md.c_str());
  if (!o.markdown_path.empty()) {
    std::ofstream out(o.markdown_path);
    out << md;
    if (!out) throw std::runtime_error("cannot write " + o.markdown_path);
  }
  if (!o.json_path.empty()) {
    write_json(o.json_path, figures, o, m, checks, date);
    std::printf("\nJSON written to %s\n", o.json_path.c_str());
  }
  // Some cells may legitimately go unmeasured (a fixed pool over the device budget); a strategy
  // with no figure at all means the strategy or its benchmark configuration is broken.
  std::string broken;
  for (const table_row& r : rows_for_targets) {
    bool any = false;
    for (auto& [k, f] : r.off) any = any || f->measured;
    if (r.kind == "strategy" && !any) broken += (broken.empty() ? "" : ", ") + r.subject + " @ " + r.backing;
  }
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
