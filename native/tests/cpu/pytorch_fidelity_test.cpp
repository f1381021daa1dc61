// Fidelity of the `caching` strategy's `pytorch` preset against the real PyTorch allocator:
// replays alloc/free traces recorded on an H100 by scripts/gpu/make_pytorch_snapshots.py and
// compares with torch.cuda.memory_stats() of the same run: peak reserved bytes within 1 % and the
// number of segments (cudaMalloc calls) exactly.
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "check.hpp"
#include "vramscope/allocator.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;

namespace {

const std::string fixtures = VRAMSCOPE_FIXTURES_DIR "/pytorch/";

std::uint64_t stat_of(const std::string& json, const std::string& key) {
  auto at = json.find("\"" + key + "\":");
  if (at == std::string::npos) throw std::runtime_error("no " + key + " in stats");
  return std::stoull(json.substr(at + key.size() + 3));
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct replay_result {
  std::uint64_t reserved_peak = 0;
  std::uint64_t segments_allocated = 0;
  std::uint64_t segments_now = 0;
  std::size_t events = 0;
  std::size_t allocations = 0;
  std::size_t same_address = 0;  // blocks placed at the very address PyTorch gave them
};

struct trace_row {
  std::string action;
  std::uint64_t address, size, stream;
};

std::vector<trace_row> read_trace(const std::string& workload) {
  std::ifstream in(fixtures + workload + ".trace.csv");
  if (!in) throw std::runtime_error("cannot open trace of " + workload);
  std::string line;
  std::getline(in, line);  // header
  std::vector<trace_row> rows;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string action, addr, size, stream;
    std::getline(ss, action, ',');
    std::getline(ss, addr, ',');
    std::getline(ss, size, ',');
    std::getline(ss, stream, ',');
    rows.push_back({action, std::stoull(addr), std::stoull(size), std::stoull(stream)});
  }
  return rows;
}

// `placement`: give the simulated device the segment addresses the driver chose in the recorded
// run. PyTorch breaks best-fit ties by address, so where the driver put segments decides which
// of two equal free blocks is reused; without the recorded placement the simulated device's own
// (rising) placement is used.
replay_result replay(const std::string& workload, bool placement) {
  std::vector<trace_row> rows = read_trace(workload);
  simulated_options o;
  o.capacity = 80 * GiB;  // the H100 the trace was recorded on
  if (placement)
    for (auto& r : rows)
      if (r.action == "segment_alloc") o.region_placement.push_back(r.address);
  auto backing = make_simulated_backing(o);
  auto pool = make_allocator("caching", *backing, {{"preset", "pytorch"}});
  std::map<std::uint64_t, void*> by_recorded_address;
  replay_result r;
  std::size_t same_address = 0;
  for (auto& row : rows) {
    if (row.action == "alloc") {
      void* p = pool->allocate(row.size, row.stream);
      by_recorded_address[row.address] = p;
      same_address += reinterpret_cast<std::uint64_t>(p) == row.address;
      ++r.allocations;
      ++r.events;
    } else if (row.action == "free_completed") {
      auto it = by_recorded_address.find(row.address);
      if (it == by_recorded_address.end())
        throw std::runtime_error("free of unknown block in " + workload);
      pool->deallocate(it->second, row.stream);
      by_recorded_address.erase(it);
      ++r.events;
    }
  }
  r.same_address = same_address;
  auto s = pool->stats();
  r.reserved_peak = s.reserved_peak;
  r.segments_allocated = s.device_calls.region_alloc;
  r.segments_now = s.device_calls.region_alloc - s.device_calls.region_free;
  return r;
}

void check_workload(const std::string& workload) {
  std::string stats = slurp(fixtures + workload + ".stats.json");
  replay_result r = replay(workload, true);
  replay_result unplaced = replay(workload, false);
  std::uint64_t torch_peak = stat_of(stats, "reserved_bytes.all.peak");
  std::uint64_t torch_segments = stat_of(stats, "segment.all.allocated");
  std::uint64_t torch_segments_now = stat_of(stats, "segment.all.current");
  double error = std::fabs(static_cast<double>(r.reserved_peak) - static_cast<double>(torch_peak)) /
                 static_cast<double>(torch_peak);
  std::fprintf(stderr,
               "  %-20s %zu events: peak reserved %llu (PyTorch %llu, %.3f %%), segments %llu "
               "(PyTorch %llu)\n",
               workload.c_str(), r.events, (unsigned long long)r.reserved_peak,
               (unsigned long long)torch_peak, error * 100,
               (unsigned long long)r.segments_allocated, (unsigned long long)torch_segments);
  std::fprintf(stderr,
               "  %-20s %zu of %zu allocations at PyTorch's own address; without the recorded "
               "placement: peak %llu, segments %llu\n",
               "", r.same_address, r.allocations, (unsigned long long)unplaced.reserved_peak,
               (unsigned long long)unplaced.segments_allocated);
  CHECK(error <= 0.01);
  CHECK_EQ(r.same_address,
           r.allocations);  // with the driver's placement, every block lands where PyTorch put it
  CHECK_EQ(r.segments_allocated, torch_segments);
  CHECK_EQ(r.segments_now, torch_segments_now);
}

TEST("pytorch preset reproduces PyTorch's peak reserved and segments: MLP with changing batch") {
  check_workload("mlp_varbatch");
}
TEST(
    "pytorch preset reproduces PyTorch's peak reserved and segments: transformer, changing "
    "sequence") {
  check_workload("transformer_varseq");
}
TEST(
    "pytorch preset reproduces PyTorch's peak reserved and segments: convnet, changing image "
    "size") {
  check_workload("convnet_varimg");
}
TEST(
    "pytorch preset reproduces PyTorch's peak reserved and segments: inference server, mixed "
    "sizes") {
  check_workload("inference_mixed");
}

}  // namespace

CHECK_MAIN
