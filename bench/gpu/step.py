#!/usr/bin/env python3
"""A whole training step as torchtitan runs it, on one GPU, phase by phase (docs/gpu-validation.md).

What it measures, with CUDA events and wall clocks (median of STEPS after WARMUP):
  sustained  back-to-back bf16 8192^3 GEMMs for SUSTAIN_S seconds: TFLOP/s per window of 20 products, to see whether
             a GPU kept busy (as in a training run) holds the throughput of a short burst;
  step       Llama 3 8B's shapes with fewer layers and the whole vocabulary (embedding, L decoder layers, final norm,
             output projection, F.cross_entropy on fp32 logits), wrapped per block and at the root in PyTorch FSDP2
             (fully_shard, bf16 compute, fp32 parameters and gradient reduction) over a one-rank process group,
             fused AdamW, clip_grad_norm_(1.0): per phase (forward with the loss, backward, clip, optimizer,
             zero_grad) on the GPU, the CPU's time to issue each phase, and the peak memory; eager and with each
             block under torch.compile, as torchtitan's `compile` option does.
The GPU's clocks, power and temperature are sampled by nvidia-smi into smi.csv beside the JSON.
With --profile (after OUT.json) it also runs one eager FSDP2 step and one without FSDP under torch.profiler and
records each's GPU kernels summed by name (kernel time and count): what FSDP2's copies and casts are.
Usage: python3 bench/gpu/step.py OUT.json [--profile]. Each variant that fails records its error and the others go on.
"""
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from gpu_common import bench_ms as common_bench_ms
from gpu_common import guarded as common_guarded
from gpu_common import smoke_sdpa

SMOKE = os.environ.get("STEP_SMOKE") == "1"  # tiny shapes on the CPU: checks the script, measures nothing
DEV = "cpu" if SMOKE else "cuda"
WARMUP, STEPS = (1, 2) if SMOKE else (3, 10)
SUSTAIN_S = float(os.environ.get("SUSTAIN_S", "25"))
if SMOKE:
    smoke_sdpa()
results = {"torch": torch.__version__, "sustained": {}, "steps": [], "errors": []}


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


class Timer:
    """CUDA events on the GPU, wall clock on the CPU (SMOKE)."""

    def __init__(self):
        if DEV == "cuda":
            self.ev = torch.cuda.Event(enable_timing=True)
            self.ev.record()
        else:
            self.t = time.perf_counter()

    def ms_to(self, other):
        if DEV == "cuda":
            return self.ev.elapsed_time(other.ev)
        return (other.t - self.t) * 1e3


# ------------------------------------------------------------------------------------------ sustained GEMM
def sustained():
    n = 1024 if SMOKE else 8192
    a = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=DEV, dtype=torch.bfloat16)
    per_window, windows = 20, []
    t_end = time.time() + (1.0 if SMOKE else SUSTAIN_S)
    t0 = time.time()
    while time.time() < t_end:
        start = Timer()
        for _ in range(per_window):
            torch.mm(a, b, out=c)
        end = Timer()
        sync()
        windows.append((time.time() - t0, per_window * 2.0 * n ** 3 / (start.ms_to(end) / 1e3) / 1e12))
    tflops = [w[1] for w in windows]
    first_s = [w[1] for w in windows if w[0] <= 1.0] or tflops[:1]
    last_5s = [w[1] for w in windows if w[0] >= windows[-1][0] - 5.0]
    results["sustained"] = {"n": n, "windows": len(windows), "seconds": windows[-1][0],
                            "first_1s_tflops": statistics.mean(first_s), "median_tflops": statistics.median(tflops),
                            "last_5s_tflops": statistics.mean(last_5s), "min_tflops": min(tflops),
                            "max_tflops": max(tflops),
                            "series": [(round(t, 2), round(f, 1)) for t, f in windows[:: max(1, len(windows) // 60)]]}


# ------------------------------------------------------------------------------------------------- model
def rms_norm(x, weight, eps=1e-5):
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


class Block(nn.Module):
    """torchtitan's Llama 3 TransformerBlock: RMSNorm, q/k/v/o, complex rotary, repeat_kv, SDPA, SwiGLU."""

    def __init__(self, h, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, h // heads
        self.wq = nn.Linear(h, h, bias=False)
        self.wk = nn.Linear(h, kv_heads * self.d, bias=False)
        self.wv = nn.Linear(h, kv_heads * self.d, bias=False)
        self.wo = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, ffn, bias=False)
        self.w2 = nn.Linear(ffn, h, bias=False)
        self.w3 = nn.Linear(h, ffn, bias=False)
        self.attention_norm = nn.Parameter(torch.ones(h))
        self.ffn_norm = nn.Parameter(torch.ones(h))

    def forward(self, x, freqs_cis):
        b, s, h = x.shape
        hn = rms_norm(x, self.attention_norm)
        q = self.wq(hn).view(b, s, self.heads, self.d)
        k = self.wk(hn).view(b, s, self.kv_heads, self.d)
        v = self.wv(hn).view(b, s, self.kv_heads, self.d)

        def rope(t):
            tc = torch.view_as_complex(t.float().reshape(*t.shape[:-1], -1, 2))
            return torch.view_as_real(tc * freqs_cis.view(1, s, 1, self.d // 2)).flatten(3).type_as(t)
        q, k = rope(q), rope(k)
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        y = x + self.wo(o.transpose(1, 2).reshape(b, s, h))
        yn = rms_norm(y, self.ffn_norm)
        return y + self.w2(F.silu(self.w1(yn)) * self.w3(yn))


class Model(nn.Module):
    def __init__(self, layers, h, heads, kv_heads, ffn, vocab, seq):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, h)
        self.layers = nn.ModuleList([Block(h, heads, kv_heads, ffn) for _ in range(layers)])
        self.norm = nn.Parameter(torch.ones(h))
        self.output = nn.Linear(h, vocab, bias=False)
        d = h // heads
        freqs = 1.0 / (500000.0 ** (torch.arange(0, d, 2).float() / d))
        self.register_buffer("freqs_cis", torch.polar(torch.ones(seq, d // 2),
                                                      torch.outer(torch.arange(seq).float(), freqs)), persistent=False)

    def forward(self, tokens):
        x = self.tok_embeddings(tokens)
        for block in self.layers:
            x = block(x, self.freqs_cis)
        return self.output(rms_norm(x, self.norm))


def fsdp_wrap(model, compiled, fsdp=True):
    """torchtitan's order: compile each block, then fully_shard each block and the root (bf16 params, fp32 reduce).
    fsdp=False keeps bf16 parameters and no wrapping: what FSDP2's casts, copies and hooks add, by difference."""
    if compiled and hasattr(torch, "compile"):
        for i, block in enumerate(model.layers):
            model.layers.register_module(str(i), torch.compile(block))
    if SMOKE or not fsdp:  # (SMOKE: torch without FSDP2 on the development machine)
        for p in model.parameters():
            p.data = p.data.to(torch.bfloat16)
        return model, "none, bf16 parameters"
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.layers:
        fully_shard(block, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mp_policy=mp, reshard_after_forward=True)
    return model, "fsdp2"


def clip(model, max_norm):
    """torchtitan's clip_grad_norm_: the total norm over the (sharded) gradients made whole, then the foreach scale."""
    params = [p for p in model.parameters() if p.grad is not None]
    if not hasattr(torch.nn.utils, "get_total_norm"):
        return torch.nn.utils.clip_grad_norm_(params, max_norm)  # torch < 2.6 (SMOKE)
    total = torch.nn.utils.get_total_norm([p.grad for p in params], 2.0, foreach=True)
    if hasattr(total, "full_tensor"):
        total = total.full_tensor()
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, total, foreach=True)
    return total


# -------------------------------------------------------------------------------------------------- step
def kernel_table(prof, top=45):
    rows, every = [], []
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", None)
        if t is None:
            t = getattr(e, "self_cuda_time_total", 0.0)
        if t > 0:
            r = {"kernel": e.key[:160], "ms": t / 1e3, "count": e.count}
            every.append(r)
            if "CUDA" in str(getattr(e, "device_type", "")):
                rows.append(r)
    rows = rows or every
    rows.sort(key=lambda r: -r["ms"])
    return {"total_ms": sum(r["ms"] for r in rows), "top": rows[:top]}


def step_variant(name, layers, b, s, compiled, fsdp=True, profile=False):
    h, heads, kvh, ffn, vocab = (64, 4, 2, 128, 1000) if SMOKE else (4096, 32, 8, 14336, 128256)
    torch.manual_seed(0)
    with (torch.device(DEV) if hasattr(torch.device, "__enter__") else contextlib.nullcontext()):
        model = Model(layers, h, heads, kvh, ffn, vocab, s)
    n_params = sum(p.numel() for p in model.parameters())
    model, wrapping = fsdp_wrap(model, compiled, fsdp)
    try:
        opt, opt_impl = torch.optim.AdamW(model.parameters(), lr=8e-4, weight_decay=0.1, fused=True), "fused"
    except Exception:
        opt, opt_impl = torch.optim.AdamW(model.parameters(), lr=8e-4, weight_decay=0.1, foreach=True), "foreach"
    tokens = torch.randint(0, vocab, (b, s), device=DEV)
    labels = torch.randint(0, vocab, (b, s), device=DEV)
    phases = ("forward_loss", "backward", "clip", "optimizer", "zero_grad")
    gpu = {p: [] for p in phases}
    cpu = {p: [] for p in phases}
    wall, compile_s = [], None
    for it in range(WARMUP + STEPS):
        if it == WARMUP:
            sync()
            if DEV == "cuda":
                torch.cuda.reset_peak_memory_stats()
        t_wall = time.perf_counter()
        marks, cpu_marks = [Timer()], [time.perf_counter()]
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))
        marks.append(Timer()); cpu_marks.append(time.perf_counter())
        loss.backward()
        marks.append(Timer()); cpu_marks.append(time.perf_counter())
        clip(model, 1.0)
        marks.append(Timer()); cpu_marks.append(time.perf_counter())
        opt.step()
        marks.append(Timer()); cpu_marks.append(time.perf_counter())
        opt.zero_grad(set_to_none=True)
        marks.append(Timer()); cpu_marks.append(time.perf_counter())
        del logits, loss
        sync()
        if it == 0:
            compile_s = time.perf_counter() - t_wall
        if it >= WARMUP:
            wall.append((time.perf_counter() - t_wall) * 1e3)
            for i, p in enumerate(phases):
                gpu[p].append(marks[i].ms_to(marks[i + 1]))
                cpu[p].append((cpu_marks[i + 1] - cpu_marks[i]) * 1e3)
    row = {"name": name, "layers": layers, "b": b, "s": s, "h": h, "vocab": vocab, "compiled": compiled,
           "wrapping": wrapping, "optimizer": opt_impl, "params": n_params, "first_step_s": compile_s,
           "wall_ms": statistics.median(wall), "gpu_ms": {p: statistics.median(v) for p, v in gpu.items()},
           "cpu_issue_ms": {p: statistics.median(v) for p, v in cpu.items()}}
    row["gpu_total_ms"] = sum(row["gpu_ms"].values())
    if DEV == "cuda":
        row["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        row["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    if profile and DEV == "cuda":
        try:
            profile_one_step(row, model, opt, tokens, labels)
        except Exception as e:  # keep the timings
            row["kernels_error"] = f"{type(e).__name__}: {e}"[:400]
    results["steps"].append(row)
    del model, opt
    if DEV == "cuda":
        torch.cuda.empty_cache()


def profile_one_step(row, model, opt, tokens, labels):
    """One more step under torch.profiler: its GPU kernels summed by name."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))
        loss.backward()
        clip(model, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del logits, loss
        sync()
    row["kernels"] = kernel_table(prof)


def head_only(b, s):
    """The final norm, output projection and fp32 cross-entropy alone, forward and backward (what the step adds to
    the layers at the end), and the embedding's forward and backward."""
    h, vocab = (64, 1000) if SMOKE else (4096, 128256)
    x = torch.randn(b, s, h, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    w = (torch.randn(vocab, h, device=DEV, dtype=torch.bfloat16) * 0.02).requires_grad_()
    nw = torch.ones(h, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    emb = (torch.randn(vocab, h, device=DEV, dtype=torch.bfloat16) * 0.02).requires_grad_()
    labels = torch.randint(0, vocab, (b, s), device=DEV)
    g = torch.randn(b, s, h, device=DEV, dtype=torch.bfloat16)

    def head():
        F.cross_entropy(F.linear(rms_norm(x, nw), w).flatten(0, 1).float(), labels.flatten(0, 1)).backward()

    def embed():
        F.embedding(labels, emb).backward(g)
    out = {}
    for key, fn in (("head_fwd_bwd_ms", head), ("embedding_fwd_bwd_ms", embed)):
        out[key] = common_bench_ms(fn, WARMUP, STEPS, DEV == "cuda")
    results["head"] = {"b": b, "s": s, **out}


def guarded(what, fn):
    common_guarded(results, what, fn)


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "step.json"
    t0 = time.time()
    smi = None
    if DEV == "cuda":
        results["device"] = torch.cuda.get_device_name(0)
        smi_path = os.path.join(os.path.dirname(os.path.abspath(out_path)), "smi.csv")
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu",
                                "--format=csv,noheader", "-lms", "250"], stdout=open(smi_path, "w"),
                               stderr=subprocess.DEVNULL)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        import torch.distributed as dist
        dist.init_process_group("nccl", rank=0, world_size=1)

    def save():
        results["seconds"] = time.time() - t0
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1)
    s = 64 if SMOKE else 8192
    guarded("sustained", sustained); save()
    guarded("head b1", lambda: head_only(1, s)); save()
    guarded("step eager L4 b1", lambda: step_variant("llama3-8b-shapes", 4, 1, s, False)); save()
    guarded("step eager L2 b2", lambda: step_variant("llama3-8b-shapes", 2, 2, s, False)); save()
    prof = "--profile" in sys.argv[2:]
    guarded("step eager L4 b1 no FSDP", lambda: step_variant("llama3-8b-shapes", 4, 1, s, False, False, prof)); save()
    if prof:
        guarded("step eager L4 b1 profiled", lambda: step_variant("llama3-8b-shapes", 4, 1, s, False, True, True))
        save()
    guarded("step compiled L4 b1", lambda: step_variant("llama3-8b-shapes", 4, 1, s, True)); save()
    if smi is not None:
        smi.terminate()
    brief = [{k: v for k, v in r.items() if k != "kernels"} for r in results["steps"]]
    print(json.dumps({**{k: v for k, v in results.items() if k not in ("sustained", "steps")}, "steps": brief})[:7000])
    for r in results["steps"]:
        for k in r.get("kernels", {}).get("top", [])[:25]:
            print(f"{r['wrapping'][:6]} {k['ms']:9.3f} ms {k['count']:5d}  {k['kernel'][:90]}")
    print(json.dumps({k: v for k, v in results["sustained"].items() if k != "series"}))


if __name__ == "__main__":
    main()
