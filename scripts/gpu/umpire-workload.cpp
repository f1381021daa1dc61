// A program that allocates GPU memory through Umpire, run with UMPIRE_REPLAY=On to record a real
// Umpire replay log (scripts/gpu/record-umpire.sh). A QuickPool and a DynamicPoolList on DEVICE
// serve a training-like loop of buffers of varying sizes, a few blocks come straight from DEVICE,
// and some from HOST (which an importer of GPU memory leaves out). It prints, as one JSON line, what
// it asked for and the pools' own figures, so what a reader of the log finds can be checked
// exactly.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "umpire/ResourceManager.hpp"
#include "umpire/strategy/DynamicPoolList.hpp"
#include "umpire/strategy/QuickPool.hpp"

int main(int argc, char** argv)
{
  const int steps = argc > 1 ? std::atoi(argv[1]) : 40;
  // The resource the "device" memory comes from: DEVICE, or HOST to try the program where there is no GPU.
  const char* resource = argc > 2 ? argv[2] : "DEVICE";
  auto& rm = umpire::ResourceManager::getInstance();
  auto device = rm.getAllocator(resource);
  auto host = rm.getAllocator("HOST");
  auto quick = rm.makeAllocator<umpire::strategy::QuickPool>("activations_pool", device);
  auto list = rm.makeAllocator<umpire::strategy::DynamicPoolList>("workspace_pool", device);

  std::size_t allocs = 0, device_allocs = 0, live = 0, peak = 0, host_allocs = 0;
  auto take = [&](umpire::Allocator& a, std::size_t bytes, bool on_device) {
    void* p = a.allocate(bytes);
    ++allocs;
    if (on_device) {
      ++device_allocs;
      live += bytes;
      if (live > peak) peak = live;
    } else {
      ++host_allocs;
    }
    return p;
  };
  auto give = [&](umpire::Allocator& a, void* p, std::size_t bytes, bool on_device) {
    a.deallocate(p);
    if (on_device) live -= bytes;
  };

  // Weights: straight from DEVICE, live to the end.
  std::vector<std::pair<void*, std::size_t>> weights;
  for (int i = 0; i < 8; ++i) {
    std::size_t bytes = (std::size_t{1} << 20) * (16 + 8 * i);
    weights.emplace_back(take(device, bytes, true), bytes);
  }
  std::vector<std::pair<void*, std::size_t>> activations;
  for (int step = 0; step < steps; ++step) {
    // Forward: activations grow with a sequence length that varies by step.
    std::size_t seq = 256 + (step * 37) % 768;
    for (int layer = 0; layer < 12; ++layer) {
      std::size_t bytes = seq * 4096 * (layer % 3 == 0 ? 4 : 2);
      activations.emplace_back(take(quick, bytes, true), bytes);
    }
    void* ws = take(list, (std::size_t{1} << 20) * (1 + step % 5), true);
    void* staging = take(host, 1 << 16, false);
    // Backward: activations freed in reverse.
    while (!activations.empty()) {
      give(quick, activations.back().first, activations.back().second, true);
      activations.pop_back();
    }
    give(list, ws, (std::size_t{1} << 20) * (1 + step % 5), true);
    give(host, staging, 1 << 16, false);
  }
  std::printf(
      "{\"steps\": %d, \"allocs\": %zu, \"device_allocs\": %zu, \"host_allocs\": %zu, \"peak_live_bytes\": %zu, "
      "\"live_before_teardown_bytes\": %zu, \"activations_pool_high_watermark\": %zu, \"activations_pool_actual_size\": %zu, "
      "\"workspace_pool_high_watermark\": %zu, \"workspace_pool_actual_size\": %zu, \"device_high_watermark\": %zu, "
      "\"resource\": \"%s\"}\n",
      steps, allocs, device_allocs, host_allocs, peak, live, quick.getHighWatermark(), quick.getActualSize(),
      list.getHighWatermark(), list.getActualSize(), device.getHighWatermark(), resource);
  for (auto& w : weights) device.deallocate(w.first);
  return 0;
}
