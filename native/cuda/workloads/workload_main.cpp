// vramscope_workload: runs one built-in workload on one strategy (or all) from the command line,
// for the GPU scripts (compute-sanitizer runs it where Node is too heavy to run under the
// sanitizer). Prints one JSON line per run: what ran, counts, verified and corrupted bytes, how it
// ended. Exit 0 when no byte was corrupted and no CUDA error stopped a run (an out-of-memory is an
// ending, not a failure; a strategy that cannot run on its backing here is reported and skipped).
//   vramscope_workload NAME [--strategy S|all] [--param KEY=VALUE]... [--strategy-param KEY=VALUE]...
//                      [--capacity BYTES] [--small] [--list]
// --strategy all: every strategy in turn, in this one process (one sanitizer start-up for all);
// after a CUDA error, which leaves the context unusable, the remaining ones run each in a fresh
// process (this program again, with --strategy S), so one strategy's fault hides no other's result;
// --small: the workload's sizes and counts cut down for compute-sanitizer (explicit --param wins).
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "vramscope/errors.hpp"
#include "vramscope/workloads.hpp"

namespace {

class counting_sink final : public vramscope::workload_sink {
 public:
  void request(std::uint8_t kind, std::uint32_t, std::uint64_t, std::uint32_t, double) override {
    ++requests[kind & 3];
  }
  void layout(const vramscope::trace_event&, std::uint32_t, double,
              std::uint32_t latency) override {
    ++layout_events;
    latency_sum += latency;
  }
  void marker(const std::string&, double) override { ++markers; }
  void step(std::uint32_t, double gpu_ns, double) override {
    ++steps;
    gpu_ns_total += gpu_ns;
  }
  unsigned long long requests[4] = {0, 0, 0, 0};
  unsigned long long layout_events = 0, markers = 0, steps = 0;
  double latency_sum = 0, gpu_ns_total = 0;
};

bool split(const std::string& kv, std::string& k, std::string& v) {
  const auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  k = kv.substr(0, eq);
  v = kv.substr(eq + 1);
  return true;
}

std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n' ? ' ' : c);
  }
  return out;
}

// Counts and sizes small enough for compute-sanitizer, which serializes and instruments every launch.
const std::map<std::string, std::string> small_values = {
    {"steps", "4"},        {"ops", "300"},        {"live", "40"},     {"requests", "24"},
    {"concurrent", "4"},   {"launches", "2"},     {"threads", "256"}, {"rounds", "2"},
    {"pairs", "16"},       {"to", "8MiB"},        {"allocs", "8"},    {"layers", "2"},
    {"hidden", "256"},     {"max_batch", "4"},    {"max_seq", "64"},  {"min_seq", "16"},
    {"max_tokens", "256"}, {"max_size", "64KiB"}, {"buffers", "2"}};

// Set when a run ended on a CUDA error: the context may be poisoned (an illegal address is sticky).
bool context_unusable = false;

int run_one(const vramscope::workload_options& o) {
  counting_sink sink;
  try {
    const vramscope::workload_result r = vramscope::run_workload(o, sink);
    const bool clean = r.corrupted_bytes == 0 && (r.stopped_by.empty() || r.out_of_memory);
    std::printf(
        "{\"workload\":\"%s\",\"strategy\":\"%s\",\"backing\":\"%s\",\"device\":\"%s\","
        "\"allocations\":%llu,"
        "\"frees\":%llu,\"ooms\":%llu,\"steps\":%llu,\"layoutEvents\":%llu,\"meanLatencyNs\":%.0f,"
        "\"gpuMs\":%.3f,"
        "\"verifiedBytes\":%llu,\"corruptedBytes\":%llu,\"outOfMemory\":%s,\"stoppedBy\":\"%s\","
        "\"reservedPeak\":%llu,"
        "\"clean\":%s}\n",
        o.workload.c_str(), r.strategy.c_str(), r.backing.c_str(), escaped(r.device).c_str(),
        static_cast<unsigned long long>(r.allocations), static_cast<unsigned long long>(r.frees),
        sink.requests[3], static_cast<unsigned long long>(r.steps), sink.layout_events,
        sink.layout_events ? sink.latency_sum / static_cast<double>(sink.layout_events) : 0.0,
        sink.gpu_ns_total / 1e6, static_cast<unsigned long long>(r.verified_bytes),
        static_cast<unsigned long long>(r.corrupted_bytes), r.out_of_memory ? "true" : "false",
        escaped(r.stopped_by).c_str(), static_cast<unsigned long long>(r.final_stats.reserved_peak),
        clean ? "true" : "false");
    std::fflush(stdout);
    if (!r.stopped_by.empty() && !r.out_of_memory) context_unusable = true;
    return clean ? 0 : 1;
  } catch (const vramscope::error& e) {
    std::printf("{\"workload\":\"%s\",\"strategy\":\"%s\",\"error\":\"%s\",\"code\":\"%s\"}\n",
                o.workload.c_str(), o.strategy.c_str(), escaped(e.what()).c_str(),
                vramscope::error_code_name(e.code()));
    std::fflush(stdout);
    if (e.code() == vramscope::error_code::no_cuda_device) return 2;
    if (e.code() == vramscope::error_code::device_error) context_unusable = true;
    return e.code() == vramscope::error_code::unsupported ? 0 : 1;
  }
}

// This program again with the same arguments but --strategy `strategy`; its exit status.
int run_in_child(int argc, char** argv, const std::string& workload, const std::string& strategy) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    args.emplace_back(argv[i]);
    if (std::string(argv[i]) == "--strategy" && i + 1 < argc) args.emplace_back(strategy), ++i;
  }
  std::vector<char*> raw;
  for (auto& a : args) raw.push_back(a.data());
  raw.push_back(nullptr);
  std::fflush(stdout);
  pid_t pid = 0;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, raw.data(), environ) != 0) {
    std::printf(
        "{\"workload\":\"%s\",\"strategy\":\"%s\",\"error\":\"could not start a fresh "
        "process\",\"code\":\"internal\"}\n",
        workload.c_str(), strategy.c_str());
    return 1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  vramscope::workload_options o;
  bool small = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string k, v;
    if (a == "--list") {
      for (const auto& w : vramscope::workloads())
        std::printf("%s%s\n", w.name.c_str(), w.multi_stream ? " (multi-stream)" : "");
      return 0;
    } else if (a == "--small") {
      small = true;
    } else if (a == "--strategy" && i + 1 < argc) {
      o.strategy = argv[++i];
    } else if (a == "--param" && i + 1 < argc && split(argv[i + 1], k, v)) {
      o.workload_params.set(k, v), ++i;
    } else if (a == "--strategy-param" && i + 1 < argc && split(argv[i + 1], k, v)) {
      o.strategy_params.set(k, v), ++i;
    } else if (a == "--capacity" && i + 1 < argc) {
      o.capacity = vramscope::parse_size(argv[++i], "--capacity");
    } else if (!a.empty() && a[0] != '-' && o.workload.empty()) {
      o.workload = a;
    } else {
      std::fprintf(stderr, "vramscope_workload: bad argument '%s'\n", a.c_str());
      return 2;
    }
  }
  const vramscope::workload_info* info = vramscope::find_workload(o.workload);
  if (info == nullptr) {
    std::fprintf(stderr, "vramscope_workload: unknown workload '%s' (--list names them)\n",
                 o.workload.c_str());
    return 2;
  }
  if (small)
    for (const auto& p : info->params) {
      auto it = small_values.find(p.name);
      if (it != small_values.end() && !o.workload_params.has(p.name))
        o.workload_params.set(p.name, it->second);
    }
  if (o.strategy != "all") return run_one(o);
  int status = 0;
  for (const auto& s : vramscope::strategies()) {
    if (!info->fixed_strategy.empty() && s.name != info->fixed_strategy) continue;
    if (info->fixed_strategy.empty() && s.name == "device_bump") continue;
    o.strategy = s.name;
    const int one = context_unusable ? run_in_child(argc, argv, o.workload, s.name) : run_one(o);
    if (one > status) status = one;
  }
  return status;
}
