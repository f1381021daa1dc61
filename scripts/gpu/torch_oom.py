"""A PyTorch program that runs the GPU out of memory for real, for the interposer on the GPU machine
(oom-check.ts runs it under `vramscope record`). It holds 4 GiB tensors until PyTorch raises
torch.cuda.OutOfMemoryError, catches it, frees everything, empties the cache, then allocates and
frees one tensor more to show the process recovered. Writes torch.cuda.memory_stats() of the run as
JSON to argv[1] (num_ooms, segment counts) for the recording to be compared with."""
import json
import sys

import torch

out = sys.argv[1]
dev = torch.device("cuda")
held = []
caught = 0
try:
    while True:
        held.append(torch.empty(4 << 30, dtype=torch.uint8, device=dev))
        held[-1][::1 << 20].fill_(len(held))  # touch it, so the memory is really in use
except torch.cuda.OutOfMemoryError:
    caught += 1
count = len(held)
del held
torch.cuda.synchronize()
torch.cuda.empty_cache()
after = torch.ones(1 << 28, dtype=torch.uint8, device=dev)
assert int(after.sum().item()) == 1 << 28
del after
torch.cuda.synchronize()
stats = torch.cuda.memory_stats()
stats["held_before_oom"] = count
stats["caught"] = caught
with open(out, "w") as f:
    json.dump(stats, f)
print(f"held {count} x 4 GiB before the out-of-memory; num_ooms {stats.get('num_ooms')}, segments {stats.get('segment.all.allocated')}")
