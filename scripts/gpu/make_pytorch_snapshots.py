"""Records real PyTorch memory snapshots on a GPU machine, for vramscope's fidelity fixtures.

Each workload runs in a fresh process (so PyTorch's caching allocator starts empty and its peak
counters cover exactly the recorded trace), records the allocator's history from the first CUDA
allocation, and writes beside each snapshot the torch.cuda.memory_stats() of the same run.
Machine paths are stripped from stack frames before the pickle is written.

Usage: python3 make_pytorch_snapshots.py OUT_DIR [workload ...]
Writes OUT_DIR/<workload>.pickle, <workload>.stats.json and <workload>.trace.csv
(action,address,size,stream,time_us: the alloc/free events in order, for tests without a pickle
reader).
"""
import json
import os
import pickle
import random
import subprocess
import sys


def strip_paths(snapshot):
    """Frames name files as the machine saw them: keep what follows site-packages/ or the
    script's own folder, drop the rest."""
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep

    def clean(name):
        if not isinstance(name, str):
            return name
        if "site-packages/" in name:
            return name.split("site-packages/", 1)[1]
        if name.startswith(here):
            return name[len(here):]
        if name.startswith("/"):
            return os.path.basename(name)
        return name

    def walk_frames(frames):
        for f in frames or []:
            if "filename" in f:
                f["filename"] = clean(f["filename"])

    for seg in snapshot.get("segments", []):
        for blk in seg.get("blocks", []):
            walk_frames(blk.get("frames"))
    for dev in snapshot.get("device_traces", []):
        for ev in dev:
            walk_frames(ev.get("frames"))
    return snapshot


def mlp_varbatch(torch, steps):
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rng = random.Random(1)
    for _ in range(steps):
        batch = rng.choice([16, 48, 100, 256, 333, 512, 1000])
        x = torch.randn(batch, 1024, device="cuda")
        y = torch.randint(0, 10, (batch,), device="cuda")
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def transformer_varseq(torch, steps):
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024,
                                             batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=3).cuda()
    head = torch.nn.Linear(256, 1000).cuda()
    opt = torch.optim.AdamW(list(model.parameters()) + list(head.parameters()), lr=1e-4)
    rng = random.Random(2)
    for _ in range(steps):
        seq = rng.choice([17, 64, 128, 200, 256, 384, 511])
        x = torch.randn(8, seq, 256, device="cuda")
        y = torch.randint(0, 1000, (8, seq), device="cuda")
        logits = head(model(x))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 1000), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def convnet_varimg(torch, steps):
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(64, 128, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(128, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = random.Random(3)
    for _ in range(steps):
        side = rng.choice([32, 64, 96, 128, 160, 224])
        x = torch.randn(16, 3, side, side, device="cuda")
        y = torch.randint(0, 10, (16,), device="cuda")
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def inference_mixed(torch, steps):
    """An inference server: random request sizes, no grad, tensors of many sizes kept a while."""
    model = torch.nn.Sequential(torch.nn.Linear(512, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 512)).cuda().eval()
    rng = random.Random(4)
    keep = []
    with torch.no_grad():
        for _ in range(steps):
            n = rng.randint(1, 700)
            out = model(torch.randn(n, 512, device="cuda"))
            keep.append(out)
            if len(keep) > 6:
                keep.pop(rng.randrange(len(keep)))
            if rng.random() < 0.2:
                keep.append(torch.empty(rng.randint(1, 40) * 1024 * 1024, dtype=torch.uint8,
                                        device="cuda"))


WORKLOADS = {
    "mlp_varbatch": (mlp_varbatch, 30),
    "transformer_varseq": (transformer_varseq, 20),
    "convnet_varimg": (convnet_varimg, 20),
    "inference_mixed": (inference_mixed, 200),
}


def run_one(name, out_dir):
    import torch
    fn, steps = WORKLOADS[name]
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    fn(torch, steps)
    torch.cuda.synchronize()
    snapshot = strip_paths(torch.cuda.memory._snapshot())
    stats = torch.cuda.memory_stats()
    torch.cuda.memory._record_memory_history(enabled=None)
    with open(os.path.join(out_dir, name + ".pickle"), "wb") as f:
        pickle.dump(snapshot, f)
    meta = {
        "workload": name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "memory_stats": {k: v for k, v in stats.items()},
    }
    with open(os.path.join(out_dir, name + ".stats.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    with open(os.path.join(out_dir, name + ".trace.csv"), "w") as f:
        f.write("action,address,size,stream,time_us\n")
        for ev in snapshot["device_traces"][0]:
            f.write("%s,%d,%d,%d,%d\n" % (ev["action"], ev["addr"], ev["size"], ev["stream"],
                                         ev.get("time_us", 0)))
    print("%-20s events %6d  reserved peak %12d  segments now %4d  allocated(cudaMalloc) %4d" % (
        name, len(snapshot["device_traces"][0]), stats["reserved_bytes.all.peak"],
        stats["segment.all.current"], stats["segment.all.allocated"]))


def main():
    out_dir = sys.argv[1]
    names = sys.argv[2:] or list(WORKLOADS)
    if len(names) == 1 and os.environ.get("VRAMSCOPE_CHILD") == "1":
        run_one(names[0], out_dir)
        return
    os.makedirs(out_dir, exist_ok=True)
    failed = 0
    for name in names:
        env = dict(os.environ, VRAMSCOPE_CHILD="1")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), out_dir, name], env=env)
        failed += r.returncode != 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
