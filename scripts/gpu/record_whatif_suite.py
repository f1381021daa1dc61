"""Records a matrix of real PyTorch memory snapshots, (program x PYTORCH_ALLOC_CONF setting), on a
GPU machine, as vramscope's "what-if" data set: for each program, what PyTorch's own caching
allocator really did under each allocator setting, to check replays of one recorded trace under
other settings against (docs/fidelity.md, "Recorded data set").

Usage (from the repository root, on the GPU machine):
    python3 scripts/gpu/record_whatif_suite.py OUT_DIR [--only NAME,...] [--jobs N] [--budget-s S]
                                               [--pack-dir DIR] [--run-timeout-s S] [--list]

Every run is a fresh process (so the caching allocator starts empty, and its settings are read
from PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF, both set to the setting's string in the child's
environment before torch is imported). Up to --jobs runs share the GPU at a time; no new run starts
after --budget-s seconds, and a run still going at --budget-s + --grace-s is killed (status
"timeout"). Each child records the allocator's history from before the program's first
allocation (torch.cuda.memory._record_memory_history with PyTorch's defaults: every event, Python
and C++ stacks), runs the program, takes torch.cuda.memory._snapshot() and memory_stats() while
the program's objects are still alive, strips machine paths from the stack frames, and writes

    OUT_DIR/<program>__<setting>.pickle       the snapshot (pickle protocol 4)
    OUT_DIR/<program>__<setting>.stats.json   {"memory_stats": torch.cuda.memory_stats(), "conf",
                                              "memory_fraction", "device_total_bytes",
                                              "oom": {"happened", "message"}, ...}
    OUT_DIR/logs/<program>__<setting>.log     the child's stdout and stderr

and at the end OUT_DIR/manifest.json (every run: status ok/oom/failed/timeout/skipped, seconds,
snapshot bytes, peak reserved, segment count, error tail, ...) and suite.tar.gz (manifest, stats,
logs and snapshots; suite-2.tar.gz ... if one part would pass --part-mb) in --pack-dir (default
OUT_DIR), with a copy of manifest.json beside it.

`--only` takes program names, setting names (runs of those programs and/or settings) and
PROGRAM__SETTING run names, comma separated. `--list` prints the runs and exits.

The parent uses the standard library only; torch (and transformers, for three programs) are
imported in the children.
"""
import argparse
import gzip
import json
import os
import pickle
import platform
import random
import signal
import subprocess
import sys
import tarfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
KB = 1 << 10
MB = 1 << 20
GB = 1 << 30

# name -> PYTORCH_ALLOC_CONF, in the order the runs of each program are made.
SETTINGS = [
    ("default", ""),
    ("msplit128", "max_split_size_mb:128"),
    ("msplit64_rp4", "max_split_size_mb:64,roundup_power2_divisions:4"),
    ("rp8", "roundup_power2_divisions:8"),
    ("rplist", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"),
    ("nonsplit", "max_split_size_mb:64,max_non_split_rounding_mb:256"),
    ("gc06", "garbage_collection_threshold:0.6,max_split_size_mb:256"),
    ("expandable", "expandable_segments:True"),
    ("expandable_msplit", "expandable_segments:True,max_split_size_mb:128"),
]
SETTING_CONF = dict(SETTINGS)
GC_SETTING = "gc06"
# Under gc06 the process is limited (set_per_process_memory_fraction) so that the program's peak
# reserved under `default` is this share of the limit, and the 0.6 threshold is crossed.
GC_PEAK_SHARE = 0.85

SNAPSHOT_LIMIT_BYTES = 1536 * KB  # snapshots above this are still written, and flagged
MAX_ENTRIES = 1_000_000  # a ceiling only: the programs make a few thousand events
OOM_LIMIT_BYTES = 2 * GB  # oom_fraction's own limit, under every setting


# ---------------------------------------------------------------------------------------------
# The programs. Each runs in its child process as fn(torch, ctx) and returns what must stay alive
# until the snapshot is taken. Random state: torch.manual_seed(0) before each, plus their own
# random.Random(seed). Peaks stay well under 10 GB so that several runs share one GPU.
# ---------------------------------------------------------------------------------------------

class Ctx:
    """What a program tells the harness: an out-of-memory it caught, notes for the manifest."""

    def __init__(self):
        self.oom_message = None
        self.notes = []

    def caught_oom(self, exc):
        if self.oom_message is None:
            self.oom_message = str(exc)


def prog_gpt2_varshape(torch, ctx):
    """GPT-2 (transformers, random weights: 4 layers, 512 wide, 8 heads, vocab 8192) training
    steps with changing batch and sequence length, fused AdamW."""
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=8192, n_positions=512, n_embd=512, n_layer=4, n_head=8)
    model = GPT2LMHeadModel(cfg).to("cuda").train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    for batch, seq in [(8, 128), (4, 384), (16, 64), (6, 256)]:
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
        out = model(input_ids=ids, labels=ids)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        opt.step()
        del out, ids
    return model, opt


def prog_bert_train(torch, ctx):
    """BERT masked-LM (transformers, random weights: 2 layers, 384 wide, 6 heads, vocab 8192)
    training with changing sequence length, one padded row per batch, AdamW (foreach)."""
    from transformers import BertConfig, BertForMaskedLM
    cfg = BertConfig(vocab_size=8192, hidden_size=384, num_hidden_layers=2, num_attention_heads=6,
                     intermediate_size=1536, max_position_embeddings=512)
    model = BertForMaskedLM(cfg).to("cuda").train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    mask_id = 4
    for batch, seq in [(16, 64), (8, 256), (16, 128), (12, 200)]:
        ids = torch.randint(5, cfg.vocab_size, (batch, seq), device="cuda")
        attn = torch.ones(batch, seq, dtype=torch.long, device="cuda")
        attn[0, seq - seq // 4:] = 0
        pick = torch.rand(batch, seq, device="cuda") < 0.15
        labels = torch.where(pick, ids, torch.full_like(ids, -100))
        inputs = torch.where(pick, torch.full_like(ids, mask_id), ids)
        out = model(input_ids=inputs, attention_mask=attn, labels=labels)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        opt.step()
        del out, ids, attn, pick, labels, inputs
    return model, opt


def _left_padded(torch, lengths, pad):
    """Token ids and attention mask for prompts of these lengths, left padded, moved at once."""
    width = max(lengths)
    ids = torch.full((len(lengths), width), pad, dtype=torch.long)
    mask = torch.zeros((len(lengths), width), dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, width - n:] = torch.randint(0, pad, (n,))
        mask[i, width - n:] = 1
    return ids.to("cuda"), mask.to("cuda")


def _greedy_by_hand(torch, model, ids, mask, new_tokens):
    """Greedy decoding with the model's own cache, for when generate() is not usable."""
    past, cur, pieces = None, ids, [ids]
    for _ in range(new_tokens):
        out = model(input_ids=cur, attention_mask=mask, past_key_values=past, use_cache=True)
        past = out.past_key_values
        cur = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        pieces.append(cur)
        mask = torch.cat([mask, torch.ones_like(cur)], dim=1)
        del out
    return torch.cat(pieces, dim=1)


def prog_gen_kvcache(torch, ctx):
    """Greedy generation with a growing KV cache: a GPT-2 (transformers, random weights: 2 layers,
    512 wide, vocab 8192) runs model.generate() on a batch of 6 left-padded prompts of 16..200
    tokens (32 new tokens), then on 3 prompts of 8..100 tokens (16 new tokens)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    vocab = 8192
    pad = vocab - 1
    cfg = GPT2Config(vocab_size=vocab, n_positions=1024, n_embd=512, n_layer=2, n_head=8,
                     activation_function="gelu_pytorch_tanh", bos_token_id=pad,
                     eos_token_id=pad, pad_token_id=pad)
    model = GPT2LMHeadModel(cfg).to("cuda").eval()
    OOM = torch.cuda.OutOfMemoryError
    outputs = []
    with torch.no_grad():
        for lengths, new_tokens in [([16, 60, 130, 200, 90, 35], 32), ([8, 24, 100], 16)]:
            ids, mask = _left_padded(torch, lengths, pad)
            try:
                out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens,
                                     do_sample=False, pad_token_id=pad, eos_token_id=pad)
            except OOM:
                raise
            except Exception as exc:  # an API change in transformers: decode by hand instead
                ctx.notes.append("generate() failed, greedy loop by hand instead: %r" % (exc,))
                out = _greedy_by_hand(torch, model, ids, mask, new_tokens)
            outputs.append(out)
            del ids, mask
    return model, outputs


def prog_cuda_graph(torch, ctx):
    """An MLP trained eagerly at changing batch sizes, then a training step (forward, backward,
    SGD update) captured with torch.cuda.graph (a private pool) and replayed, eager scratch tensors
    between replays, an inference graph with its own pool, and a third graph sharing the
    training graph's pool."""
    nn = torch.nn
    F = torch.nn.functional
    rng = random.Random(6)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for batch in (64, 300, 128):
        x = torch.randn(batch, 1024, device="cuda")
        y = torch.randn(batch, 1024, device="cuda")
        opt.zero_grad(set_to_none=True)
        F.mse_loss(model(x), y).backward()
        opt.step()
        del x, y
    static_x = torch.randn(256, 1024, device="cuda")
    static_y = torch.randn(256, 1024, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as the CUDA graphs docs do
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            F.mse_loss(model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    train_graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    params = list(model.parameters())
    with torch.cuda.graph(train_graph):
        static_loss = F.mse_loss(model(static_x), static_y)
        static_loss.backward()
        with torch.no_grad():  # the SGD update, written out so that no optimizer check applies
            torch._foreach_add_(params, [p.grad for p in params], alpha=-0.01)
    scratch = []
    for _ in range(6):
        static_x.copy_(torch.randn(256, 1024, device="cuda"))
        train_graph.replay()
        scratch.append(torch.empty(rng.randint(1, 48) * 65536, device="cuda"))
        if len(scratch) > 3:
            scratch.pop(0)

    infer_x = torch.randn(64, 1024, device="cuda")
    with torch.no_grad():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            model(infer_x)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        infer_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(infer_graph):
            infer_y = model(infer_x) * 2.0
    kept = []
    for _ in range(4):
        infer_x.copy_(torch.randn(64, 1024, device="cuda"))
        infer_graph.replay()
        kept.append(infer_y.clone())

    with torch.no_grad():
        shared_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(shared_graph, pool=train_graph.pool()):
            shared_y = torch.tanh(model(static_x))
    shared_graph.replay()
    torch.cuda.synchronize()
    return (model, opt, train_graph, infer_graph, shared_graph, static_x, static_y, static_loss,
            infer_x, infer_y, shared_y, scratch, kept)


def prog_multistream(torch, ctx):
    """Producer/consumer work on two side streams and the default stream: tensors made on one
    stream are used on another (record_stream), so their blocks are freed while another stream
    may still use them and the allocator completes those frees later."""
    rng = random.Random(5)
    main = torch.cuda.current_stream()
    s1 = torch.cuda.Stream()
    s2 = torch.cuda.Stream()
    w = torch.randn(1024, 1024, device="cuda")
    kept = []
    for step in range(30):
        n = rng.choice([256, 512, 1000, 2048, 3000])
        s1.wait_stream(main)
        with torch.cuda.stream(s1):
            a = torch.randn(n, 1024, device="cuda")
            b = a @ w
        s2.wait_stream(s1)
        with torch.cuda.stream(s2):
            b.record_stream(s2)
            c = torch.relu(b) * 0.5
            d = torch.empty(rng.randint(1, 64) * 65536, device="cuda")
            d.fill_(1.0)
        del a, b  # b's block waits for s2
        main.wait_stream(s2)
        c.record_stream(main)
        d.record_stream(main)
        kept.append(c.sum(dim=0))
        if len(kept) > 5:
            kept.pop(rng.randrange(len(kept)))
        if step % 3 == 0:  # a large tensor made on the default stream, used on s1
            big = torch.randn(rng.randint(2, 24) * MB // 4, device="cuda")
            s1.wait_stream(main)
            with torch.cuda.stream(s1):
                big.record_stream(s1)
                big.mul_(2.0)
            del big
        del c, d
        if step % 10 == 9:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return w, kept, s1, s2


def prog_convnet_varimg(torch, ctx):
    """A small CNN (conv, batch norm, pooling) trained with SGD+momentum on changing image sizes
    and batch sizes."""
    nn = torch.nn
    F = torch.nn.functional
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = random.Random(3)
    for _ in range(14):
        side = rng.choice([32, 64, 96, 128, 160, 224])
        batch = rng.choice([8, 16, 32])
        x = torch.randn(batch, 3, side, side, device="cuda")
        y = torch.randint(0, 10, (batch,), device="cuda")
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del x, y, loss
    return model, opt


def prog_oom_fraction(torch, ctx):
    """Under set_per_process_memory_fraction (2 GiB), holds growing tensors (a small one beside
    each, every third step the middle one freed) until torch.cuda.OutOfMemoryError, catches it,
    frees half of what it holds and allocates once more."""
    rng = random.Random(7)
    held, small = [], []
    size = 64 * MB
    try:
        for i in range(200):
            held.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
            small.append(torch.empty(rng.randint(1, 512) * KB, dtype=torch.uint8, device="cuda"))
            if i % 3 == 2:
                del held[len(held) // 2]
            size = int(size * 1.2) + rng.randint(0, MB)
            if sum(t.numel() for t in held) > 3 * OOM_LIMIT_BYTES:
                ctx.notes.append("no out-of-memory below 3x the limit: the fraction did not apply")
                break
    except torch.cuda.OutOfMemoryError as exc:
        ctx.caught_oom(exc)
    del held[::2]
    after = torch.empty(48 * MB, dtype=torch.uint8, device="cuda")
    return held, small, after


def prog_mlp_fragment(torch, ctx):
    """Fragmentation: 24 large (20..180 MB) and small (4 KB..3 MB) tensors interleaved, every
    other large one freed (holes between live blocks), five wider ones (150..260 MB) that fit no
    hole, then MLP training steps at changing batch sizes through that cache while held tensors
    are swapped for others of new sizes."""
    nn = torch.nn
    rng = random.Random(8)
    u8 = torch.uint8
    pairs = []
    for _ in range(24):
        big = torch.empty(rng.randint(20 * MB, 180 * MB), dtype=u8, device="cuda")
        small = torch.empty(rng.randint(4 * KB, 3 * MB), dtype=u8, device="cuda")
        pairs.append([big, small])
        del big, small
    for i in range(0, len(pairs), 2):
        pairs[i][0] = None
    wide = [torch.empty(rng.randint(150 * MB, 260 * MB), dtype=u8, device="cuda")
            for _ in range(5)]
    model = nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                          nn.Linear(4096, 2048)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for step in range(8):
        batch = rng.choice([100, 333, 700, 1500, 3000])
        x = torch.randn(batch, 2048, device="cuda")
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del x, loss
        if step % 2 == 1:
            j = rng.randrange(len(pairs))
            pairs[j][1] = None
            pairs[j][0] = torch.empty(rng.randint(30 * MB, 90 * MB), dtype=u8, device="cuda")
            wide.append(torch.empty(rng.randint(5 * MB, 40 * MB), dtype=u8, device="cuda"))
    return pairs, wide, model, opt


# name -> function, own memory limit (None: unlimited except under gc06), gc06 limit used if the
# program's default run left no peak to derive it from.
PROGRAMS = {
    "gpt2_varshape": (prog_gpt2_varshape, None, 2 * GB),
    "bert_train": (prog_bert_train, None, 1 * GB),
    "gen_kvcache": (prog_gen_kvcache, None, 1 * GB),
    "cuda_graph": (prog_cuda_graph, None, 1 * GB),
    "multistream": (prog_multistream, None, 1 * GB),
    "convnet_varimg": (prog_convnet_varimg, None, 3 * GB),
    "oom_fraction": (prog_oom_fraction, OOM_LIMIT_BYTES, OOM_LIMIT_BYTES),
    "mlp_fragment": (prog_mlp_fragment, None, 6 * GB),
}


def run_name(program, setting):
    return "%s__%s" % (program, setting)


def all_runs():
    """Every program's default run first, then each further setting for every program, so that
    if the budget runs out the runs left undone are the last settings'."""
    runs = []
    for setting, _ in SETTINGS:
        for program in PROGRAMS:
            runs.append({"program": program, "setting": setting,
                         "name": run_name(program, setting), "conf": SETTING_CONF[setting]})
    return runs


# ---------------------------------------------------------------------------------------------
# The child: one program under one setting.
# ---------------------------------------------------------------------------------------------

def clean_frames(snapshot):
    """Machine paths out of every stack frame of the snapshot (make_pytorch_snapshots.strip_paths,
    applied to every list of frames wherever it is, after cutting Debian's dist-packages/ the way
    strip_paths cuts site-packages/)."""
    sys.path.insert(0, HERE)
    from make_pytorch_snapshots import strip_paths
    seen = set()
    frame_lists = []
    stack = [snapshot]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, dict):
            for key, value in obj.items():
                if isinstance(key, str) and key.endswith("frames") and isinstance(value, list):
                    frame_lists.append(value)
                elif isinstance(value, (dict, list)):
                    stack.append(value)
        elif isinstance(obj, list):
            stack.extend(v for v in obj if isinstance(v, (dict, list)))
    for frames in frame_lists:
        for frame in frames:
            name = frame.get("filename") if isinstance(frame, dict) else None
            if isinstance(name, str) and "dist-packages/" in name and "site-packages/" not in name:
                frame["filename"] = name.split("dist-packages/", 1)[1]
    strip_paths({"device_traces": [[{"frames": frames} for frames in frame_lists]]})
    return snapshot


def summarize_snapshot(snapshot):
    traces = snapshot.get("device_traces") or []
    actions = {}
    events = 0
    for trace in traces:
        for ev in trace:
            events += 1
            action = str(ev.get("action"))
            actions[action] = actions.get(action, 0) + 1
    segments = snapshot.get("segments") or []
    private = 0
    for seg in segments:
        pool = seg.get("segment_pool_id")
        try:
            private += pool is not None and tuple(pool) != (0, 0)
        except TypeError:
            private += bool(pool)
    return {
        "events": events,
        "actions": actions,
        "segments": len(segments),
        "private_pool_segments": private,
        "segment_bytes": sum(int(seg.get("total_size", 0)) for seg in segments),
        "history_truncated": events >= MAX_ENTRIES,
    }


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def child_main(program, setting, out_dir, limit_bytes, limit_source):
    t_start = time.time()
    name = run_name(program, setting)
    conf = SETTING_CONF[setting]
    fn = PROGRAMS[program][0]
    import torch
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES)
    total = int(torch.cuda.get_device_properties(0).total_memory)
    fraction = None
    if limit_bytes > 0:
        fraction = min(1.0, float(limit_bytes) / float(total))
        torch.cuda.set_per_process_memory_fraction(fraction)
    random.seed(0)
    torch.manual_seed(0)
    ctx = Ctx()
    keep = None
    error = None
    try:
        keep = fn(torch, ctx)
    except torch.cuda.OutOfMemoryError as exc:
        ctx.caught_oom(exc)
        ctx.notes.append("the out-of-memory ended the program")
    except Exception:
        error = traceback.format_exc()
        sys.stderr.write(error)
        sys.stderr.flush()
    try:
        torch.cuda.synchronize()
    except Exception:
        error = (error or "") + "synchronize: " + traceback.format_exc()
    snapshot = torch.cuda.memory._snapshot()
    stats = dict(torch.cuda.memory_stats())
    # `keep` (the program's objects) stays alive to the end: the process ends with os._exit.
    clean_frames(snapshot)
    data = pickle.dumps(snapshot, protocol=4)
    write_atomic(os.path.join(out_dir, name + ".pickle"), data)
    summary = summarize_snapshot(snapshot)
    summary["bytes"] = len(data)
    summary["over_limit"] = len(data) > SNAPSHOT_LIMIT_BYTES
    versions = {"torch": torch.__version__, "cuda": torch.version.cuda,
                "gpu": torch.cuda.get_device_name(0), "python": platform.python_version()}
    if "transformers" in sys.modules:
        versions["transformers"] = getattr(sys.modules["transformers"], "__version__", None)
    doc = {
        "memory_stats": stats,
        "conf": conf,
        "memory_fraction": fraction,
        "device_total_bytes": total,
        "oom": {"happened": ctx.oom_message is not None, "message": ctx.oom_message or ""},
        "program": program,
        "setting": setting,
        "limit_bytes": limit_bytes if limit_bytes > 0 else None,
        "limit_source": limit_source if limit_bytes > 0 else None,
        "snapshot": summary,
        "snapshot_allocator_settings": snapshot.get("allocator_settings"),
        "env": {k: os.environ.get(k) for k in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF",
                                                "TORCH_SYMBOLIZE_MODE", "OMP_NUM_THREADS")},
        "versions": versions,
        "notes": ctx.notes,
        "error": error,
        "seconds_in_child": round(time.time() - t_start, 3),
    }
    write_atomic(os.path.join(out_dir, name + ".stats.json"),
                 json.dumps(doc, indent=1, sort_keys=True, default=str).encode())
    print("%s: events %d, snapshot %d bytes, segments %d, reserved peak %d, oom %s, error %s" % (
        name, summary["events"], len(data), summary["segments"],
        stats.get("reserved_bytes.all.peak", -1), doc["oom"]["happened"], error is not None))
    return 3 if error else 0


# ---------------------------------------------------------------------------------------------
# The parent: schedule the runs, collect, write the manifest, pack.
# ---------------------------------------------------------------------------------------------

def child_env(conf, jobs):
    env = dict(os.environ)
    for key in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING"):
        env.pop(key, None)
    if conf:
        env["PYTORCH_ALLOC_CONF"] = conf
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    env["PYTHONUNBUFFERED"] = "1"
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    # Symbolize C++ frames with dladdr (PyTorch's default when addr2line is off): addr2line on
    # every frame could take minutes per snapshot.
    env.setdefault("TORCH_SYMBOLIZE_MODE", "dladdr")
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 4) // max(1, jobs))))
    return env


def read_json(path):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode())
    except Exception:
        return None


def tail_of(path, n=2000):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except Exception:
        return ""


def limit_for(run, results):
    """(limit bytes, where it came from) for this run's set_per_process_memory_fraction."""
    _, own, fallback = PROGRAMS[run["program"]]
    if own:
        return own, "program"
    if run["setting"] != GC_SETTING:
        return 0, ""
    base = results.get(run_name(run["program"], "default"))
    peak = (base or {}).get("peak_reserved")
    if base and base.get("status") == "ok" and peak:
        limit = int(peak / GC_PEAK_SHARE)
        limit = (limit + 2 * MB - 1) // (2 * MB) * (2 * MB)
        return limit, "default_peak_reserved/%.2f" % GC_PEAK_SHARE
    return fallback, "constant_fallback"


def start_run(run, args, out_dir, elapsed, results):
    name = run["name"]
    for suffix in (".pickle", ".stats.json", ".pickle.tmp", ".stats.json.tmp"):
        try:
            os.remove(os.path.join(out_dir, name + suffix))
        except OSError:
            pass
    limit, source = limit_for(run, results)
    run["limit_bytes"] = limit or None
    run["limit_source"] = source or None
    run["timeout_s"] = round(min(args.run_timeout_s,
                                 max(20.0, args.budget_s + args.grace_s - elapsed)), 1)
    run["log"] = os.path.join("logs", name + ".log")
    run["log_file"] = open(os.path.join(out_dir, run["log"]), "wb")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", run["program"], run["setting"],
           out_dir, str(limit or 0), source or "-"]
    run["t_start"] = time.monotonic()
    try:
        run["proc"] = subprocess.Popen(cmd, stdout=run["log_file"], stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL,
                                       env=child_env(run["conf"], args.jobs),
                                       start_new_session=True)
    except Exception as exc:
        run["proc"] = None
        run["start_error"] = repr(exc)


def kill_run(run):
    proc = run.get("proc")
    if proc is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the child leads its own session: only its group
    except Exception:
        try:
            proc.kill()
        except Exception:
            pass
    try:
        proc.wait(timeout=15)
    except Exception:
        pass


def finish_run(run, out_dir, timed_out):
    run["seconds"] = round(time.monotonic() - run["t_start"], 2)
    proc = run.pop("proc", None)
    run["rc"] = proc.returncode if proc is not None else None
    try:
        run.pop("log_file").close()
    except Exception:
        pass
    run.pop("t_start", None)
    name = run["name"]
    stats = read_json(os.path.join(out_dir, name + ".stats.json"))
    pickle_path = os.path.join(out_dir, name + ".pickle")
    run["snapshot_file"] = name + ".pickle" if os.path.exists(pickle_path) else None
    run["snapshot_bytes"] = os.path.getsize(pickle_path) if run["snapshot_file"] else None
    run["snapshot_over_limit"] = bool(run["snapshot_bytes"] and
                                      run["snapshot_bytes"] > SNAPSHOT_LIMIT_BYTES)
    run["stats_file"] = name + ".stats.json" if stats is not None else None
    if timed_out:
        status = "timeout"
    elif stats is None:
        status = "failed"
    elif stats.get("error"):
        status = "failed"
    elif (stats.get("oom") or {}).get("happened"):
        status = "oom"
    else:
        status = "ok"
    run["status"] = status
    if stats is not None:
        ms = stats.get("memory_stats") or {}
        snap = stats.get("snapshot") or {}
        run["peak_reserved"] = ms.get("reserved_bytes.all.peak")
        run["peak_allocated"] = ms.get("allocated_bytes.all.peak")
        run["segments_allocated"] = ms.get("segment.all.allocated")
        run["num_alloc_retries"] = ms.get("num_alloc_retries")
        run["num_ooms"] = ms.get("num_ooms")
        run["segments"] = snap.get("segments")
        run["private_pool_segments"] = snap.get("private_pool_segments")
        run["events"] = snap.get("events")
        run["oom_events"] = (snap.get("actions") or {}).get("oom", 0)
        run["history_truncated"] = snap.get("history_truncated")
        run["memory_fraction"] = stats.get("memory_fraction")
        run["oom_message"] = (stats.get("oom") or {}).get("message") or None
        seen = stats.get("snapshot_allocator_settings")
        if isinstance(seen, dict):
            run["conf_seen"] = seen.get("PYTORCH_CUDA_ALLOC_CONF", seen.get("PYTORCH_ALLOC_CONF"))
        run["notes"] = stats.get("notes") or []
        run["versions"] = stats.get("versions")
    error = None
    if status in ("failed", "timeout"):
        error = ((stats or {}).get("error") or run.get("start_error") or "")[-2000:]
        if not error or timed_out:  # the traceback of a crash or where a run hung is in its log
            error = (error + "\n--- log tail ---\n" if error else "") + \
                tail_of(os.path.join(out_dir, run["log"]))
    run["error_tail"] = error


def print_line(run, n_done, n_all, elapsed):
    snap = run.get("snapshot_bytes")
    peak = run.get("peak_reserved")
    events = run.get("events")
    segments = run.get("segments")
    flag = " OVER %d KB" % (SNAPSHOT_LIMIT_BYTES // KB) if run.get("snapshot_over_limit") else ""
    print("[%2d/%d %6.1fs] %-34s %-7s %6.1fs  snap %7s  events %6s  peak reserved %8s  segs %4s%s"
          % (n_done, n_all, elapsed, run["name"], run["status"], run.get("seconds") or 0.0,
             "%.0fK" % (snap / KB) if snap else "-", "-" if events is None else events,
             "%.1fM" % (peak / MB) if peak else "-", "-" if segments is None else segments, flag),
          flush=True)
    if run["status"] in ("failed", "timeout") and run.get("error_tail"):
        lines = [line for line in run["error_tail"].split("\n--- log tail ---\n")[0].splitlines()
                 if line.strip()]
        last = lines[-1:]
        if last:
            print("      %s" % last[0][:200], flush=True)


def select_runs(only):
    runs = all_runs()
    if not only:
        return runs
    tokens = [t.strip() for t in only.split(",") if t.strip()]
    names = {r["name"] for r in runs}
    programs = [t for t in tokens if t in PROGRAMS]
    settings = [t for t in tokens if t in SETTING_CONF]
    pairs = [t for t in tokens if t in names]
    unknown = [t for t in tokens if t not in PROGRAMS and t not in SETTING_CONF and t not in names]
    if unknown:
        sys.exit("unknown in --only: %s\nprograms: %s\nsettings: %s" % (
            ", ".join(unknown), ", ".join(PROGRAMS), ", ".join(SETTING_CONF)))
    chosen = []
    for r in runs:
        by_group = (programs or settings) and (not programs or r["program"] in programs) and \
            (not settings or r["setting"] in settings)
        if by_group or r["name"] in pairs:
            chosen.append(r)
    return chosen


def plan_parts(out_dir, files, part_limit, max_parts, reserve_first):
    """Assign files (in priority order) to tar parts by their gzip-compressed size, first fit;
    returns ({file: part index}, [estimated bytes per part]). Files that fit no part are left
    out of the mapping."""
    sizes = [reserve_first]
    where = {}
    for rel in files:
        try:
            with open(os.path.join(out_dir, rel), "rb") as f:
                est = len(gzip.compress(f.read(), 6)) + 1024
        except OSError:
            continue
        for i in range(len(sizes)):
            if sizes[i] + est <= part_limit:
                sizes[i] += est
                where[rel] = i
                break
        else:
            if len(sizes) < max_parts and est <= part_limit:
                sizes.append(est)
                where[rel] = len(sizes) - 1
    return where, sizes


def part_name(i):
    return "suite.tar.gz" if i == 0 else "suite-%d.tar.gz" % (i + 1)


def pack(out_dir, pack_dir, runs, manifest, args):
    small, big = [], []
    for run in runs:
        if run.get("stats_file"):
            small.append(run["stats_file"])
        if run.get("log") and os.path.exists(os.path.join(out_dir, run["log"])):
            small.append(run["log"])
    for run in runs:
        if run.get("snapshot_file"):
            big.append(run["snapshot_file"])
    where, sizes = plan_parts(out_dir, small + big, int(args.part_mb * MB), args.max_parts,
                              reserve_first=512 * KB)
    for run in runs:
        f = run.get("snapshot_file")
        run["packed_in"] = part_name(where[f]) if f and f in where else None
    left_out = [f for f in small + big if f not in where]
    manifest["packing"] = {"parts": [part_name(i) for i in range(len(sizes))],
                           "estimated_bytes": sizes, "left_out": left_out}
    manifest_bytes = json.dumps(manifest, indent=1, default=str).encode()
    write_atomic(os.path.join(out_dir, "manifest.json"), manifest_bytes)
    if os.path.abspath(pack_dir) != os.path.abspath(out_dir):
        write_atomic(os.path.join(pack_dir, "manifest.json"), manifest_bytes)
    members = [["manifest.json"] for _ in sizes]
    for rel in small + big:
        if rel in where:
            members[where[rel]].append(rel)
    written = []
    for i, files in enumerate(members):
        path = os.path.join(pack_dir, part_name(i))
        with tarfile.open(path + ".tmp", "w:gz", compresslevel=6) as tf:
            for rel in files:
                tf.add(os.path.join(out_dir, rel), arcname="whatif/" + rel)
        os.replace(path + ".tmp", path)
        written.append((path, os.path.getsize(path)))
    return written, left_out


def schedule(args, out_dir, runs, pending, running, results, jobs, t0):
    """Start, watch and finish the runs. `pending` and `running` are changed in place, so that
    the caller can end the children if this is interrupted. Returns (runs finished, jobs at the
    end)."""
    n_done = 0
    while pending or running:
        elapsed = time.monotonic() - t0
        while pending and len(running) < jobs and elapsed < args.budget_s:
            run = pending.pop(0)
            start_run(run, args, out_dir, elapsed, results)
            if run.get("proc") is None:
                finish_run(run, out_dir, timed_out=False)
                results[run["name"]] = run
                n_done += 1
                print_line(run, n_done, len(runs), elapsed)
            else:
                running.append(run)
        if pending and elapsed >= args.budget_s:
            for run in pending:
                run["status"] = "skipped"
                run["error_tail"] = "not started: the budget of %.0fs was spent" % args.budget_s
                results[run["name"]] = run
            print("budget spent: %d runs not started (%s ...)" % (
                len(pending), ", ".join(r["name"] for r in pending[:4])), flush=True)
            del pending[:]
        still = []
        for run in running:
            rc = run["proc"].poll()
            if rc is None and time.monotonic() - run["t_start"] > run["timeout_s"]:
                kill_run(run)
                finish_run(run, out_dir, timed_out=True)
            elif rc is not None:
                finish_run(run, out_dir, timed_out=False)
            else:
                still.append(run)
                continue
            busy = "busy or unavailable" in (run.get("error_tail") or "")
            if run["status"] == "failed" and busy and not run.get("retried"):
                # The GPU takes one process at a time (exclusive compute mode): go on one by one.
                print("%s: the GPU is busy (exclusive compute mode?): again, one run at a time" %
                      run["name"], flush=True)
                jobs = 1
                base = {k: run[k] for k in ("program", "setting", "name", "conf")}
                run.clear()
                run.update(base, retried=True)
                pending.insert(0, run)
                continue
            results[run["name"]] = run
            n_done += 1
            print_line(run, n_done, len(runs), time.monotonic() - t0)
        running[:] = still
        if pending or running:
            time.sleep(0.2)
    return n_done, jobs


def parent_main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--only", default="",
                    help="programs, settings or PROGRAM__SETTING, comma separated")
    ap.add_argument("--jobs", type=int, default=4, help="runs at a time on the GPU (default 4)")
    ap.add_argument("--budget-s", type=float, default=420.0,
                    help="no run starts after this many seconds (default 420)")
    ap.add_argument("--grace-s", type=float, default=60.0,
                    help="runs still going at budget + grace are killed (default 60)")
    ap.add_argument("--run-timeout-s", type=float, default=150.0,
                    help="one run's limit (default 150)")
    ap.add_argument("--pack-dir", default=None,
                    help="where suite.tar.gz and a copy of manifest.json go (default OUT_DIR)")
    ap.add_argument("--part-mb", type=float, default=15.0,
                    help="largest tar part, MiB compressed (default 15)")
    ap.add_argument("--max-parts", type=int, default=4, help="most tar parts (default 4)")
    ap.add_argument("--list", action="store_true", help="print the runs and exit")
    args = ap.parse_args(argv)

    runs = select_runs(args.only)
    if args.list:
        for run in runs:
            print("%-34s %s" % (run["name"], run["conf"] or "(unset)"))
        return 0
    out_dir = os.path.abspath(args.out_dir)
    pack_dir = os.path.abspath(args.pack_dir or out_dir)
    os.makedirs(os.path.join(out_dir, "logs"), exist_ok=True)
    os.makedirs(pack_dir, exist_ok=True)
    jobs = max(1, args.jobs)
    print("record_whatif_suite: %d runs, %d at a time, budget %.0fs (+%.0fs grace), into %s, "
          "packed into %s" % (len(runs), jobs, args.budget_s, args.grace_s, out_dir, pack_dir),
          flush=True)

    t0 = time.monotonic()
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    pending = list(runs)
    running = []
    results = {}
    n_done = 0

    def on_term(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        n_done, jobs = schedule(args, out_dir, runs, pending, running, results, jobs, t0)
    except Exception:  # a fault of this script: end the runs, keep what is done
        traceback.print_exc()
        sys.stdout.flush()
        for run in running:
            kill_run(run)
    except BaseException:  # SIGTERM, Ctrl-C: the children lead their own sessions, end them
        for run in running:
            kill_run(run)
        raise
    for run in runs:
        if "status" not in run:
            run["status"] = "not_run"
            run["error_tail"] = "the scheduler stopped before this run ended"
    counts = {}
    for run in runs:
        counts[run["status"]] = counts.get(run["status"], 0) + 1
    versions = next((r.get("versions") for r in runs if r.get("versions")), None)
    manifest = {
        "data_set": "vramscope what-if suite: PyTorch caching-allocator snapshots, program x "
                    "PYTORCH_ALLOC_CONF setting",
        "script": "scripts/gpu/record_whatif_suite.py",
        "created_utc": created,
        "seconds": round(time.monotonic() - t0, 1),
        "args": {"only": args.only, "jobs": args.jobs, "jobs_at_end": jobs,
                 "budget_s": args.budget_s, "grace_s": args.grace_s,
                 "run_timeout_s": args.run_timeout_s},
        "host": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "versions": versions,
        "settings": dict(SETTINGS),
        "programs": {name: (PROGRAMS[name][0].__doc__ or "").strip().replace("\n", " ")
                     for name in PROGRAMS},
        "snapshot_limit_bytes": SNAPSHOT_LIMIT_BYTES,
        "gc_peak_share": GC_PEAK_SHARE,
        "counts": counts,
        "runs": [{k: v for k, v in run.items() if k not in ("proc", "log_file", "t_start")}
                 for run in runs],
    }
    written, left_out = pack(out_dir, pack_dir, manifest["runs"], manifest, args)
    print("done in %.0fs: %s" % (time.monotonic() - t0, ", ".join(
        "%s %d" % kv for kv in sorted(counts.items()))), flush=True)
    over = [r["name"] for r in runs if r.get("snapshot_over_limit")]
    if over:
        print("snapshots over %d KB: %s" % (SNAPSHOT_LIMIT_BYTES // KB, ", ".join(over)),
              flush=True)
    for path, size in written:
        warn = "  WARNING: over 16 MB" if size > 16 * MB else ""
        print("wrote %s (%.1f MB)%s" % (path, size / MB, warn), flush=True)
    if left_out:
        print("left out of the tarballs (over %d parts of %.0f MB): %s" % (
            args.max_parts, args.part_mb, ", ".join(left_out)), flush=True)
    print("manifest: %s" % os.path.join(pack_dir, "manifest.json"), flush=True)
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        program, setting, out_dir, limit, source = sys.argv[2:7]
        code = 1
        try:
            code = child_main(program, setting, out_dir, int(limit), source)
        except BaseException:
            traceback.print_exc()
            code = 2
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # skip interpreter teardown (CUDA graphs, streams): the files are written
    sys.exit(parent_main(sys.argv[1:]))


if __name__ == "__main__":
    main()
