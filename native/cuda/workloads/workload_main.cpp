// vramscope_workload: runs one built-in workload on one strategy from the command line, for the GPU
// scripts (compute-sanitizer runs it where Node is too heavy to run under the sanitizer). Prints
// one JSON line: what ran, counts, verified and corrupted bytes, how it ended. Exit 0 when no byte
// was corrupted and no CUDA error stopped it (an out-of-memory is an ending, not a failure).
//   vramscope_workload NAME [--strategy S] [--param KEY=VALUE]... [--strategy-param KEY=VALUE]...
//                      [--capacity BYTES] [--list]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "vramscope/errors.hpp"
#include "vramscope/workloads.hpp"

namespace {

class counting_sink final : public vramscope::workload_sink {
 public:
  void request(std::uint8_t kind, std::uint32_t, std::uint64_t, std::uint32_t, double) override { ++requests[kind & 3]; }
  void layout(const vramscope::trace_event&, std::uint32_t, double, std::uint32_t latency) override {
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

}  // namespace

int main(int argc, char** argv) {
  vramscope::workload_options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string k, v;
    if (a == "--list") {
      for (const auto& w : vramscope::workloads()) std::printf("%s%s\n", w.name.c_str(), w.multi_stream ? " (multi-stream)" : "");
      return 0;
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
  counting_sink sink;
  try {
    const vramscope::workload_result r = vramscope::run_workload(o, sink);
    const bool clean = r.corrupted_bytes == 0 && (r.stopped_by.empty() || r.out_of_memory);
    std::printf(
        "{\"workload\":\"%s\",\"strategy\":\"%s\",\"backing\":\"%s\",\"device\":\"%s\",\"allocations\":%llu,"
        "\"frees\":%llu,\"ooms\":%llu,\"steps\":%llu,\"layoutEvents\":%llu,\"meanLatencyNs\":%.0f,\"gpuMs\":%.3f,"
        "\"verifiedBytes\":%llu,\"corruptedBytes\":%llu,\"outOfMemory\":%s,\"stoppedBy\":\"%s\",\"reservedPeak\":%llu,"
        "\"clean\":%s}\n",
        o.workload.c_str(), r.strategy.c_str(), r.backing.c_str(), escaped(r.device).c_str(),
        static_cast<unsigned long long>(r.allocations), static_cast<unsigned long long>(r.frees), sink.requests[3],
        static_cast<unsigned long long>(r.steps), sink.layout_events,
        sink.layout_events ? sink.latency_sum / static_cast<double>(sink.layout_events) : 0.0, sink.gpu_ns_total / 1e6,
        static_cast<unsigned long long>(r.verified_bytes), static_cast<unsigned long long>(r.corrupted_bytes),
        r.out_of_memory ? "true" : "false", escaped(r.stopped_by).c_str(),
        static_cast<unsigned long long>(r.final_stats.reserved_peak), clean ? "true" : "false");
    return clean ? 0 : 1;
  } catch (const vramscope::error& e) {
    std::fprintf(stderr, "vramscope_workload: %s (%s)\n", e.what(), vramscope::error_code_name(e.code()));
    return e.code() == vramscope::error_code::no_cuda_device ? 2 : 1;
  }
}
