#!/usr/bin/env python3
"""Compute beside communication-like traffic on one GPU (docs/gpu-validation.md, "Compute beside traffic").

Multi-GPU training overlaps NCCL collectives with compute: FSDP's all-gathers and reduce-scatters, DDP's bucketed
reductions, TP/CP/EP transfers. NCCL moves the data with its own kernels, one CTA per channel, each on an SM of its
own, reading and writing HBM while the compute kernels run. parplan prices a hidden collective as free. This script
measures, on one GPU, what such traffic takes from the compute beside it:
  - compute kernels alone: a bf16 8192^3 GEMM, a Llama 3 8B MLP up-projection (8192 tokens x 4096 -> 14336) and its
    weight gradient, and causal SDPA forward + backward (8192 tokens, 32 heads of 128);
  - traffic alone: a device-to-device copy (every SM it gets) and a persistent Triton copy kernel on N CTAs (N = 8,
    16, 32: NCCL's channel counts), its HBM rate;
  - both at once on two streams, the traffic issued to outlast the compute: the compute's time over its time alone
    (the slowdown) and the traffic's rate beside it; the SM clock and power sampled by nvidia-smi.
A local copy is a stand-in: it holds SMs and HBM as NCCL's kernels do (a ring's send reads the local buffer, the peer's
writes land in it) but draws no NVLink power. CUDA events, median of ITERS after WARMUP.
Usage: python3 bench/gpu/overlap.py OUT.json (STEP_SMOKE=1: tiny shapes on the CPU, one stream, measures nothing).
"""
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from gpu_common import bench_ms as common_bench_ms
from gpu_common import guarded as common_guarded
from gpu_common import smoke_sdpa

SMOKE = os.environ.get("STEP_SMOKE") == "1"
DEV = "cpu" if SMOKE else "cuda"
WARMUP, ITERS = (1, 2) if SMOKE else (3, 10)
CTAS = (2,) if SMOKE else (8, 16, 32)
TRAFFIC_BYTES = (1 << 20) if SMOKE else (1 << 30)  # one copy's source: 1 GiB
if SMOKE:
    smoke_sdpa()
results = {"torch": torch.__version__, "device": None if SMOKE else torch.cuda.get_device_name(),
           "compute": [], "traffic": [], "overlap": [], "errors": []}

try:
    import triton
    import triton.language as tl

    @triton.jit
    def _persistent_copy(src, dst, n, BLOCK: tl.constexpr, NPROG: tl.constexpr):
        """NPROG programs (one CTA each) stride over the buffer, as NCCL's channels each move their slice."""
        pid = tl.program_id(0)
        for start in range(pid * BLOCK, n, NPROG * BLOCK):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)
except Exception:  # no Triton (the CPU smoke check): the N-CTA traffic is skipped and recorded as an error
    triton = None


def bench_ms(fn):
    return common_bench_ms(fn, WARMUP, ITERS, DEV == "cuda")


def guarded(what, fn):
    common_guarded(results, what, fn)


def compute_kernels():
    """name -> (callable, FLOPs per call)."""
    bf = torch.bfloat16
    r = lambda *s: torch.randn(*s, device=DEV, dtype=bf)
    n = 256 if SMOKE else 8192
    a, b = r(n, n), r(n, n)
    T, h, f = (128, 64, 224) if SMOKE else (8192, 4096, 14336)
    x, w, dy = r(T, h), r(f, h), r(T, f)
    H, S, D = (2, 128, 16) if SMOKE else (32, 8192, 128)
    q, k, v = (r(1, H, S, D).requires_grad_() for _ in range(3))
    go = r(1, H, S, D)

    def sdpa():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        o.backward(go)
    # causal SDPA: forward 2 x 2 S^2 D H / 2, backward 2.5x the forward (FlashAttention recomputes the scores)
    attn_flops = 3.5 * 2.0 * S * S * D * H
    return {"gemm_8192": (lambda: a @ b, 2.0 * n ** 3),
            "mlp_up_fwd": (lambda: x @ w.t(), 2.0 * T * h * f),
            "mlp_up_wgrad": (lambda: dy.t() @ x, 2.0 * T * h * f),
            "sdpa_causal_fwd_bwd": (sdpa, attn_flops)}


def traffic_kernels():
    """name -> (callable, bytes moved through HBM per call: read + write)."""
    n = TRAFFIC_BYTES // 2
    src = torch.randn(n, device=DEV, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    out = {"copy_all_sms": (lambda: dst.copy_(src), 2.0 * TRAFFIC_BYTES)}
    if triton is not None and not SMOKE:
        for ctas in CTAS:
            out[f"copy_{ctas}_ctas"] = (
                lambda c=ctas: _persistent_copy[(c,)](src, dst, n, BLOCK=8192, NPROG=c, num_warps=16),
                2.0 * TRAFFIC_BYTES)
    else:
        results["errors"].append({"what": "triton", "error": "no Triton: the N-CTA copies are not measured"})
    return out


def sample_smi():
    """nvidia-smi sampling SM clock and power every 100 ms in the background, given half a second to start; the
    process (None on the CPU)."""
    if SMOKE:
        return None
    proc = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader",
                             "-lms", "100"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    return proc


def smi_summary(proc):
    if proc is None:
        return None
    proc.terminate()
    rows = [line.split(", ") for line in proc.communicate()[0].strip().splitlines()]
    clocks = [float(r[1].split()[0]) for r in rows if len(r) == 3 and r[1].split()[0].replace(".", "").isdigit()]
    power = [float(r[2].split()[0]) for r in rows if len(r) == 3 and r[2].split()[0].replace(".", "").isdigit()]
    if not clocks:
        return None
    return {"samples": len(clocks), "sm_clock_mhz_median": sorted(clocks)[len(clocks) // 2],
            "power_w_median": sorted(power)[len(power) // 2] if power else None}


def overlapped(compute, traffic, compute_ms, traffic_ms):
    """Both at once: `reps` compute calls on one stream, enough traffic calls on another to outlast them. Returns the
    compute's ms per call beside the traffic, the traffic's ms per call, the counts, and whether the traffic ended
    after the compute (else part of the compute ran alone and the slowdown is understated)."""
    reps = max(4, int(200.0 / max(compute_ms, 1e-3)))  # about 200 ms of compute
    copies = max(2, int(1.3 * reps * compute_ms / max(traffic_ms, 1e-3)) + 1)
    if SMOKE:
        t = time.perf_counter()
        for _ in range(reps):
            compute()
        c = (time.perf_counter() - t) * 1e3 / reps
        t = time.perf_counter()
        for _ in range(copies):
            traffic()
        return c, (time.perf_counter() - t) * 1e3 / copies, reps, copies, True
    s_c, s_t = torch.cuda.Stream(), torch.cuda.Stream()
    ev = lambda: torch.cuda.Event(enable_timing=True)
    c0, c1, t0, t1 = ev(), ev(), ev(), ev()
    torch.cuda.synchronize()
    with torch.cuda.stream(s_t):
        t0.record()
        for _ in range(copies):
            traffic()
        t1.record()
    with torch.cuda.stream(s_c):
        c0.record()
        for _ in range(reps):
            compute()
        c1.record()
    torch.cuda.synchronize()
    return c0.elapsed_time(c1) / reps, t0.elapsed_time(t1) / copies, reps, copies, c1.elapsed_time(t1) > 0


def time_alone(kind, calls, rate_key, rate_div):
    """Each call of `calls` (name -> (callable, work)) timed alone into results[kind]; name -> ms."""
    alone = {}
    for name, (fn, work) in calls.items():
        def one(name=name, fn=fn, work=work):
            ms = bench_ms(fn)
            alone[name] = ms
            results[kind].append({"name": name, "ms": ms, rate_key: work / ms / rate_div})
        guarded(f"{kind} {name}", one)
    return alone


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "overlap.json"
    started = time.time()
    kernels, traffics = {}, {}
    guarded("compute kernels", lambda: kernels.update(compute_kernels()))
    guarded("traffic kernels", lambda: traffics.update(traffic_kernels()))
    alone_c = time_alone("compute", kernels, "tflops", 1e9)  # FLOPs / ms / 1e9 = TFLOP/s
    alone_t = time_alone("traffic", traffics, "hbm_GBps", 1e6)  # bytes / ms / 1e6 = GB/s
    for cname in alone_c:
        for tname in alone_t:
            def one(cname=cname, tname=tname):
                smi = sample_smi()
                c_ms, t_ms, reps, copies, covered = overlapped(kernels[cname][0], traffics[tname][0], alone_c[cname],
                                                               alone_t[tname])
                results["overlap"].append({
                    "compute": cname, "traffic": tname, "reps": reps, "copies": copies, "traffic_outlasted": covered,
                    "compute_ms": c_ms, "compute_alone_ms": alone_c[cname], "slowdown": c_ms / alone_c[cname],
                    "traffic_ms": t_ms, "traffic_alone_ms": alone_t[tname],
                    "traffic_hbm_GBps": traffics[tname][1] / t_ms / 1e6, "smi": smi_summary(smi)})
            guarded(f"overlap {cname} + {tname}", one)
    results["seconds"] = time.time() - started
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    for r in results["overlap"]:
        print(f"{r['compute']:>20} + {r['traffic']:<14} slowdown {r['slowdown']:.3f}  traffic "
              f"{r['traffic_hbm_GBps']:.0f} GB/s  smi {r['smi']}")
    for e in results["errors"]:
        print("error:", e["what"], e["error"])


if __name__ == "__main__":
    main()
