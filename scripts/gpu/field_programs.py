"""The PyTorch programs of the field recordings (scripts/gpu/field-runs.sh): real training steps
of transformers models built from a config with random weights (no download), for
`vramscope record --pytorch` to record as a user's job would be, on the GPU machine.

    python3 scripts/gpu/field_programs.py PROGRAM [OUT_DIR]

    gpt       a small GPT-2 (6 layers, 512 wide), four AdamW steps
    late      the same model loaded and stepped once before the program itself starts
              recording (PyTorch's defaults); writes OUT_DIR/late.pickle and late.stats.json
              (memory_stats() of the same moment, in record --pytorch's format)
    big       a 1.35 B-parameter Llama (24 layers, 2048 wide), fp32 weights and AdamW, bf16
              autocast, batch FIELD_BATCH (default 8) x 2048 tokens: about 60 GB on the device
    oom       the GPT-2 steps under a memory fraction too small for them (FIELD_FRACTION)
    profile   the GPT-2 steps under torch.profiler (profile_memory=True, record_shapes,
              with_stack), its Chrome trace written to OUT_DIR/profile.json
    ddp       one rank of a torchrun job (gloo, every rank on device 0): rank r trains on a
              batch of 4 (r + 1), so the ranks' peaks differ
    sleep     the GPT-2 steps, then its pid in OUT_DIR/pid and a minute's sleep (a kill -9 test)
"""
import json
import os
import sys
import time


def gpt(torch):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=8000, n_positions=512)
    with torch.device("cuda"):
        model = GPT2LMHeadModel(config)
    return model


def train(torch, model, steps, batch, seq, vocab, autocast=False):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(steps):
        tokens = torch.randint(0, vocab, (batch, seq), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return optimizer


def main():
    program = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else "."
    import torch

    torch.manual_seed(0)
    if program == "gpt":
        train(torch, gpt(torch), 4, 8, 256, 8000)
    elif program == "oom":
        torch.cuda.set_per_process_memory_fraction(float(os.environ.get("FIELD_FRACTION", "0.004")))
        train(torch, gpt(torch), 4, 8, 256, 8000)
    elif program == "late":
        model = gpt(torch)
        train(torch, model, 1, 8, 256, 8000)
        torch.cuda.memory._record_memory_history()  # PyTorch's defaults, after the model is loaded
        optimizer = train(torch, model, 3, 8, 256, 8000)
        snapshot = torch.cuda.memory._snapshot()
        import pickle

        with open(os.path.join(out, "late.pickle"), "wb") as f:
            pickle.dump(snapshot, f, protocol=4)
        device = torch.cuda.current_device()
        stats = {
            "recorder": "scripts/gpu/field_programs.py late",
            "reason": "exit",
            "conf": os.environ.get("PYTORCH_ALLOC_CONF", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")),
            "device_name": torch.cuda.get_device_name(device),
            "device_total_bytes": torch.cuda.get_device_properties(device).total_memory,
            "limit_bytes": None,
            "oom": {"happened": False},
            "memory_stats": dict(torch.cuda.memory_stats(device)),
        }
        with open(os.path.join(out, "late.stats.json"), "w") as f:
            json.dump(stats, f, indent=1)
        del optimizer
    elif program == "big":
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(
            hidden_size=2048,
            intermediate_size=5504,
            num_hidden_layers=24,
            num_attention_heads=16,
            num_key_value_heads=16,
            vocab_size=32000,
            max_position_embeddings=2048,
        )
        with torch.device("cuda"):
            model = LlamaForCausalLM(config)
        t0 = time.time()
        train(torch, model, 2, int(os.environ.get("FIELD_BATCH", "8")), 2048, 32000, autocast=True)
        print("big: 2 steps in %.1f s, peak reserved %.2f GB" % (time.time() - t0, torch.cuda.max_memory_reserved() / 1e9))
    elif program == "profile":
        from torch.profiler import ProfilerActivity, profile

        model = gpt(torch)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True, record_shapes=True, with_stack=True) as prof:
            train(torch, model, 2, 8, 256, 8000)
        prof.export_chrome_trace(os.path.join(out, "profile.json"))
    elif program == "ddp":
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank = dist.get_rank()
        torch.cuda.set_device(0)
        model = torch.nn.parallel.DistributedDataParallel(gpt(torch), device_ids=[0])
        train(torch, model, 3, 4 * (rank + 1), 256, 8000)
        dist.barrier()
        dist.destroy_process_group()
    elif program == "sleep":
        model = gpt(torch)
        train(torch, model, 2, 8, 256, 8000)
        with open(os.path.join(out, "pid.tmp"), "w") as f:
            f.write(str(os.getpid()))
        os.replace(os.path.join(out, "pid.tmp"), os.path.join(out, "pid"))
        time.sleep(60)
    else:
        sys.exit("unknown program %r (%s)" % (program, __doc__))


if __name__ == "__main__":
    main()
