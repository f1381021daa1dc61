"""A small PyTorch training loop with changing batch and sequence sizes, for the interposer on the
GPU machine (gpu-record.sh runs it under `vramscope record`, with and without
PYTORCH_NO_CUDA_MEMORY_CACHING=1). Writes torch.cuda.memory_stats() of the run as JSON to argv[1],
so the recorded cudaMalloc count can be compared with PyTorch's own segment and allocation counts.
With argv[2] == "loop" it trains until killed (the kill -9 test)."""
import json
import os
import random
import sys

import torch

out = sys.argv[1]
forever = len(sys.argv) > 2 and sys.argv[2] == "loop"
torch.manual_seed(0)
random.seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(
    torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)
).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
step = 0
while forever or step < 40:
    batch = random.choice([8, 16, 32, 64])
    seq = random.choice([32, 64, 128, 256])
    x = torch.randn(batch, seq, 512, device=dev)
    loss = model(x).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    step += 1
    if forever and step == 1:
        print("started", flush=True)
torch.cuda.synchronize()
stats = torch.cuda.memory_stats()
stats["caching_disabled"] = os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1"
stats["torch_version"] = torch.__version__
with open(out, "w") as f:
    json.dump(stats, f)
print(f"steps {step}, segments {stats.get('segment.all.allocated', 0)}, allocations {stats.get('allocation.all.allocated', 0)}")
