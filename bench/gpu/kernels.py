#!/usr/bin/env python3
"""Kernel speeds as PyTorch training stacks run them, on the GPU at hand (docs/gpu-validation.md).

Measures, with CUDA events on random data (median of ITERS after WARMUP):
  attention  scaled_dot_product_attention, causal, bf16, per backend (flash, cuDNN, efficient), forward and
             forward+backward, at the head counts and sequence lengths of the Llama 3 / DeepSeek-V3 plans;
  gemm       bf16 torch.mm against fp8 torch._scaled_mm with tensorwise and rowwise scales (torchao's float8
             recipes), at the forward GEMM shapes of Llama 3 8B / 70B layers;
  grouped    MoE expert GEMMs three ways: torch._grouped_mm, a loop of torch.mm per expert, and one dense GEMM of
             the same total size (the bound a grouped kernel can reach);
  layer      one Llama 3 decoder layer in eager PyTorch (torchtitan's structure: RMSNorm, q/k/v/o linears,
             complex rotary embedding, repeat_kv, SDPA, SwiGLU), forward and forward+backward, and the bytes the
             forward keeps for the backward.
Writes one JSON document (to argv[1], default kernels.json). Each measurement that fails records its error
instead of stopping the others. With --layer-variants (after the output path) it times only the decoder layers, eager
and under torch.compile, without recompute, with torchtitan's per-op selective activation checkpointing and with full
activation checkpointing.
"""
import json
import math
import sys
import time
import traceback

import torch
import torch.nn.functional as F

from gpu_common import bench_ms as common_bench_ms

WARMUP, ITERS = 3, 10
DEV = "cuda"
results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cuda": torch.version.cuda, "attention": [], "gemm": [], "grouped": [], "layer": [], "errors": []}


def bench_ms(fn):
    return common_bench_ms(fn, WARMUP, ITERS)


def guarded(kind, what, fn):
    try:
        fn()
    except Exception as e:  # record and go on: one unsupported kernel must not hide the other measurements
        results["errors"].append({"kind": kind, "what": what, "error": f"{type(e).__name__}: {e}"[:400]})
    torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------- attention
def attention(b, heads, s, d_qk, d_v, backend_name):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend_name]
    q = torch.randn(b, heads, s, d_qk, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(b, heads, s, d_qk, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(b, heads, s, d_v, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    do = torch.randn(b, heads, s, d_v, device=DEV, dtype=torch.bfloat16)
    with sdpa_kernel([backend]):
        def fwd():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def fwd_bwd():
            q.grad = k.grad = v.grad = None
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(do)
        t_fwd, t_all = bench_ms(fwd), bench_ms(fwd_bwd)
    flops_fwd = 2.0 * b * heads * s * s * (d_qk + d_v) * 0.5  # causal: half the score matrix
    results["attention"].append({"backend": backend_name, "b": b, "heads": heads, "s": s, "d_qk": d_qk, "d_v": d_v,
                                 "fwd_ms": t_fwd, "fwd_bwd_ms": t_all, "bwd_ms": t_all - t_fwd,
                                 "fwd_tflops": flops_fwd / t_fwd / 1e9,
                                 "bwd_tflops": 2.5 * flops_fwd / (t_all - t_fwd) / 1e9})


# ------------------------------------------------------------------------------------------------- gemms
def gemm(name, m, n, k):
    a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=DEV, dtype=torch.bfloat16)  # nn.Linear layout: out = a @ w.T
    row = {"name": name, "m": m, "n": n, "k": k}
    row["bf16_ms"] = bench_ms(lambda: torch.mm(a, w.t()))
    a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device=DEV)
    try:
        row["fp8_tensorwise_ms"] = bench_ms(
            lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
    except Exception as e:
        row["fp8_tensorwise_error"] = str(e)[:200]
    sa = torch.ones(m, 1, device=DEV, dtype=torch.float32)
    sb = torch.ones(1, n, device=DEV, dtype=torch.float32)
    try:
        row["fp8_rowwise_ms"] = bench_ms(
            lambda: torch._scaled_mm(a8, w8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16))
    except Exception as e:
        row["fp8_rowwise_error"] = str(e)[:200]
    flops = 2.0 * m * n * k
    for key in ("bf16", "fp8_tensorwise", "fp8_rowwise"):
        if key + "_ms" in row:
            row[key + "_tflops"] = flops / row[key + "_ms"] / 1e9
    results["gemm"].append(row)


# ----------------------------------------------------------------------------------------- grouped gemms
def grouped(name, experts, tokens_per_expert, k, n):
    total = experts * tokens_per_expert
    a = torch.randn(total, k, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(experts, n, k, device=DEV, dtype=torch.bfloat16)  # per expert, nn.Linear layout
    offs = torch.arange(1, experts + 1, device=DEV, dtype=torch.int32) * tokens_per_expert
    row = {"name": name, "experts": experts, "tokens_per_expert": tokens_per_expert, "k": k, "n": n}
    try:
        row["grouped_ms"] = bench_ms(lambda: torch._grouped_mm(a, w.transpose(-2, -1), offs=offs))
    except Exception as e:
        row["grouped_error"] = str(e)[:200]
    chunks = a.split(tokens_per_expert)
    row["loop_ms"] = bench_ms(lambda: [torch.mm(c, w[i].t()) for i, c in enumerate(chunks)])
    w_dense = torch.randn(n, k, device=DEV, dtype=torch.bfloat16)
    row["dense_ms"] = bench_ms(lambda: torch.mm(a, w_dense.t()))
    flops = 2.0 * total * n * k
    for key in ("grouped", "loop", "dense"):
        if key + "_ms" in row:
            row[key + "_tflops"] = flops / row[key + "_ms"] / 1e9
    results["grouped"].append(row)


# ----------------------------------------------------------------------------------------- decoder layer
def rms_norm(x, weight, eps=1e-5):
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


def op_sac_context():
    """torchtitan's per-op selective activation checkpointing policy: save the outputs of the matmuls (all but every
    second one), of the attention kernels and of max; recompute everything else."""
    from collections import defaultdict
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    save = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_efficient_attention.default,
            torch.ops.aten._scaled_dot_product_flash_attention.default,
            torch.ops.aten._scaled_dot_product_cudnn_attention.default, torch.ops.aten.max.default}
    meta = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        key = ("recompute" if ctx.is_recompute else "forward") + "_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[key] += 1
        keep = func in save and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE
    return create_selective_checkpoint_contexts(policy)


def layer(name, b, s, h, heads, kv_heads, ffn, compiled=False, ac="none"):
    """One decoder layer forward and forward+backward; `ac`: none, op (torchtitan's per-op SAC) or full (the whole
    layer recomputed); `compiled`: torch.compile over the (checkpointed) layer, as torchtitan compiles each block."""
    from torch.utils.checkpoint import checkpoint
    d = h // heads
    p = lambda *shape: (torch.randn(*shape, device=DEV, dtype=torch.bfloat16) * 0.02).requires_grad_()
    wq, wk, wv, wo = p(h, h), p(kv_heads * d, h), p(kv_heads * d, h), p(h, h)
    w1, w2, w3 = p(ffn, h), p(h, ffn), p(ffn, h)
    n1 = torch.ones(h, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    n2 = torch.ones(h, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    params = [wq, wk, wv, wo, w1, w2, w3, n1, n2]
    freqs = 1.0 / (500000.0 ** (torch.arange(0, d, 2, device=DEV).float() / d))
    freqs_cis = torch.polar(torch.ones(s, d // 2, device=DEV), torch.outer(torch.arange(s, device=DEV).float(), freqs))
    x = torch.randn(b, s, h, device=DEV, dtype=torch.bfloat16, requires_grad=True)

    def rope(t):
        tc = torch.view_as_complex(t.float().reshape(*t.shape[:-1], -1, 2))
        return torch.view_as_real(tc * freqs_cis.view(1, s, 1, d // 2)).flatten(3).type_as(t)

    def body(xin):
        hn = rms_norm(xin, n1)
        q = F.linear(hn, wq).view(b, s, heads, d)
        k = F.linear(hn, wk).view(b, s, kv_heads, d)
        v = F.linear(hn, wv).view(b, s, kv_heads, d)
        q, k = rope(q), rope(k)
        rep = heads // kv_heads
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        y = xin + F.linear(o.transpose(1, 2).reshape(b, s, h), wo)
        yn = rms_norm(y, n2)
        return y + F.linear(F.silu(F.linear(yn, w1)) * F.linear(yn, w3), w2)

    if ac == "op":
        wrapped = lambda xin: checkpoint(body, xin, use_reentrant=False, context_fn=op_sac_context)
    elif ac == "full":
        wrapped = lambda xin: checkpoint(body, xin, use_reentrant=False)
    else:
        wrapped = body
    forward_fn = torch.compile(wrapped) if compiled else wrapped
    grad = torch.randn(b, s, h, device=DEV, dtype=torch.bfloat16)

    def fwd():
        with torch.no_grad():
            forward_fn(x)

    def fwd_bwd():
        for t in params + [x]:
            t.grad = None
        forward_fn(x).backward(grad)

    t_fwd, t_all = bench_ms(fwd), bench_ms(fwd_bwd)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    out = forward_fn(x)
    torch.cuda.synchronize()
    kept = torch.cuda.memory_allocated() - before - out.numel() * out.element_size()
    del out
    linear_flops = 2.0 * b * s * (2 * h * h + 2 * h * kv_heads * d + 3 * h * ffn)
    attn_flops = 2.0 * b * heads * s * s * 2 * d * 0.5
    results["layer"].append({"name": name, "b": b, "s": s, "h": h, "heads": heads, "kv_heads": kv_heads, "ffn": ffn,
                             "compiled": compiled, "ac": ac,
                             "fwd_ms": t_fwd, "fwd_bwd_ms": t_all, "bwd_ms": t_all - t_fwd,
                             "linear_flops_fwd": linear_flops, "attention_flops_fwd": attn_flops,
                             "fwd_bwd_tflops": 3.0 * (linear_flops + attn_flops) / t_all / 1e9,
                             "saved_activation_bytes": kept})


def save(out_path, t0):
    results["seconds"] = time.time() - t0
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)


def layer_variants(out_path, t0):
    """The decoder layer eager and compiled, without recompute, with torchtitan's per-op SAC and with full AC."""
    for (name, b, s, h, heads, kvh, ffn) in [("llama3-8b", 1, 8192, 4096, 32, 8, 14336),
                                             ("llama3-70b", 1, 8192, 8192, 64, 8, 28672)]:
        for compiled in (False, True):
            for ac in ("none", "op", "full"):
                guarded("layer", f"{name} compiled={compiled} ac={ac}",
                        lambda: layer(name, b, s, h, heads, kvh, ffn, compiled, ac))
                save(out_path, t0)


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "kernels.json"
    t0 = time.time()
    torch.manual_seed(0)
    if "--layer-variants" in sys.argv[2:]:
        layer_variants(out_path, t0)
        print(json.dumps(results, indent=1)[:6000])
        return
    for backend in ("flash", "cudnn", "efficient"):
        for (b, heads, s, dqk, dv) in [(1, 32, 8192, 128, 128), (1, 8, 8192, 128, 128), (4, 32, 2048, 128, 128),
                                      (1, 64, 4096, 128, 128), (1, 16, 4096, 192, 128)]:
            guarded("attention", f"{backend} b{b} h{heads} s{s} d{dqk}/{dv}",
                    lambda: attention(b, heads, s, dqk, dv, backend))
    # Forward GEMMs of a layer: m = tokens, (n, k) = the weight (out, in).
    shapes = [("square8192", 8192, 8192, 8192),
              ("llama3-8b qkv", 8192, 6144, 4096), ("llama3-8b o", 8192, 4096, 4096),
              ("llama3-8b w1w3", 8192, 28672, 4096), ("llama3-8b w2", 8192, 4096, 14336),
              ("llama3-70b tp8 qkv", 8192, 1280, 8192), ("llama3-70b tp8 w1w3", 8192, 7168, 8192),
              ("llama3-70b tp8 w2", 8192, 8192, 3584), ("llama3-70b qkv", 8192, 10240, 8192),
              ("llama3-70b w1w3", 8192, 57344, 8192), ("llama3-70b w2", 8192, 8192, 28672)]
    for (name, m, n, k) in shapes:
        guarded("gemm", name, lambda: gemm(name, m, n, k))
    for (name, e, t, k, n) in [("deepseek-v3 ep32 up", 8, 512, 7168, 4096), ("deepseek-v3 ep32 down", 8, 512, 2048, 7168),
                               ("deepseek-v3 ep32 up", 8, 2048, 7168, 4096), ("deepseek-v3 ep64 up", 4, 128, 7168, 4096),
                               ("qwen3-30b ep8 up", 16, 256, 2048, 1536), ("qwen3-30b ep8 down", 16, 256, 768, 2048),
                               ("qwen3-30b ep8 up", 16, 1024, 2048, 1536), ("qwen3-235b ep32 up", 4, 1024, 4096, 3072),
                               ("mixtral-8x7b ep8 up", 1, 4096, 4096, 28672), ("mixtral-8x7b ep2 up", 4, 2048, 4096, 28672)]:
        guarded("grouped", f"{name} T{t}", lambda: grouped(name, e, t, k, n))
    for (name, b, s, h, heads, kvh, ffn) in [("llama3-8b", 1, 8192, 4096, 32, 8, 14336),
                                             ("llama3-8b", 2, 4096, 4096, 32, 8, 14336),
                                             ("llama3-70b", 1, 8192, 8192, 64, 8, 28672)]:
        guarded("layer", f"{name} b{b} s{s}", lambda: layer(name, b, s, h, heads, kvh, ffn))
    save(out_path, t0)
    print(json.dumps(results, indent=1)[:6000])


if __name__ == "__main__":
    main()
