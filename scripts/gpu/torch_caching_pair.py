"""Peer for the warm alloc+free pair benchmark: PyTorch's own C++ caching allocator
(c10::cuda::CUDACachingAllocator::raw_alloc / raw_delete), timed in C++ through a small extension
compiled on the spot, at the cells vramscope_bench uses (512 B, 1 MiB, 64 MiB; alone and with
1000 blocks held live: blocks of the request's size up to 1 MiB, of 1 MiB beyond). Each figure is
the median of 11 repetitions of N pairs, N grown until a repetition lasts >= 20 ms, as
vramscope_bench does. Run on the GPU machine:
    python3 scripts/gpu/torch_caching_pair.py OUT.json
Prints one markdown row and writes JSON.
"""
import json
import statistics
import sys

import torch
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <chrono>
#include <vector>

// ns per warm raw_alloc + raw_delete pair, `pairs` times, with `live` blocks of `live_size` held.
double pair_ns(int64_t size, int64_t live, int64_t live_size, int64_t pairs) {
  namespace cca = c10::cuda::CUDACachingAllocator;
  std::vector<void*> held;
  held.reserve(live);
  for (int64_t i = 0; i < live; ++i) held.push_back(cca::raw_alloc(live_size));
  for (int i = 0; i < 1000; ++i) cca::raw_delete(cca::raw_alloc(size));
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < pairs; ++i) {
    void* p = cca::raw_alloc(size);
    cca::raw_delete(p);
  }
  auto t1 = std::chrono::steady_clock::now();
  for (void* p : held) cca::raw_delete(p);
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / double(pairs);
}
"""

def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "torch_caching_pair.json"
    torch.cuda.init()
    ext = load_inline(name="vramscope_torch_pair", cpp_sources=SOURCE, functions=["pair_ns"],
                      with_cuda=True, extra_cflags=["-O2"], verbose=False)
    MiB = 1 << 20
    cells = []
    for live in (0, 1000):
        for size in (512, MiB, 64 * MiB):
            live_size = size if size <= MiB else MiB
            pairs = 1000
            while True:  # grow N until one repetition lasts >= 20 ms
                ns = ext.pair_ns(size, live, live_size, pairs)
                if ns * pairs >= 20e6 or pairs >= 1 << 26:
                    break
                pairs *= 4
            reps = [ext.pair_ns(size, live, live_size, pairs) for _ in range(11)]
            cells.append({"size": size, "live": live, "pairs": pairs, "median_ns": statistics.median(reps),
                          "p10_ns": sorted(reps)[1], "p90_ns": sorted(reps)[-2]})
            torch.cuda.empty_cache()
    result = {"peer": "PyTorch CUDACachingAllocator raw_alloc+raw_delete (C++)", "torch": torch.__version__,
              "device": torch.cuda.get_device_name(0), "cells": cells}
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    names = {(512, 0): "512 B", (MiB, 0): "1 MiB", (64 * MiB, 0): "64 MiB",
             (512, 1000): "512 B · 1000 live", (MiB, 1000): "1 MiB · 1000 live", (64 * MiB, 1000): "64 MiB · 1000 live"}
    print("| PyTorch CUDACachingAllocator (C++ raw_alloc+raw_delete) | " +
          " | ".join(f"{names[(c['size'], c['live'])]}: {c['median_ns']:.1f} ns" for c in cells) + " |")

if __name__ == "__main__":
    main()
