#!/usr/bin/env python3
"""A fine-grained MoE layer on one GPU, piece by piece (docs/gpu-validation.md).

Qwen3-30B-A3B's layer (hidden 2048, 128 experts of SwiGLU width 768, top-8; attention 32 query and 4 key/value heads
of width 128 with per-head RMSNorm on q and k), every expert local (ep 1), as PyTorch MoE stacks run it
(torchtitan's MoE: router linear, softmax, top-k with renormalised weights; tokens permuted into per-expert groups
padded to 16 rows; torch._grouped_mm for the fused gate/up and the down projection; weighted scatter back). The MoE
block alone and the whole layer, forward and forward + backward, with the router's own choice on random data and with
forced balance (expert of copy j of token t = (8 t + j) mod 128, every expert 8T/128 tokens); and the forward's
pieces (router, permute, up, activation, down, unpermute) timed one at a time. Qwen3-235B-A22B's experts at ep 8
(16 local experts, hidden 4096, width 1536) as the MoE block after the all-to-all. CUDA events, median of ITERS after
WARMUP. With --graph (after OUT.json) it only times the MoE forward issued op by op against the same forward replayed
from a CUDA graph (how much of a fine-grained block is host time).
Usage: python3 bench/gpu/moe_layer.py OUT.json [--graph] (STEP_SMOKE=1: tiny shapes on the CPU, measures nothing).
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

from gpu_common import bench_ms as common_bench_ms
from gpu_common import guarded as common_guarded
from gpu_common import smoke_sdpa

SMOKE = os.environ.get("STEP_SMOKE") == "1"
DEV = "cpu" if SMOKE else "cuda"
WARMUP, ITERS = (1, 2) if SMOKE else (3, 20)
ALIGN = 16
if SMOKE:
    smoke_sdpa()
results = {"torch": torch.__version__, "moe": [], "layer": [], "pieces": [], "graph": [], "errors": []}


def bench_ms(fn):
    return common_bench_ms(fn, WARMUP, ITERS, DEV == "cuda")


def grouped_mm(x, w_t, offs):
    """x [M, k] grouped by offs, w_t [E, k, n]: torch._grouped_mm, or a loop where torch has none (SMOKE)."""
    if hasattr(torch, "_grouped_mm") and not SMOKE:
        return torch._grouped_mm(x, w_t, offs=offs)
    outs, start = [], 0
    for e, end in enumerate(offs.tolist()):
        outs.append(x[start:end] @ w_t[e])
        start = end
    return torch.cat(outs)


class Moe:
    def __init__(self, h, f, experts, top_k, local=None):
        p = lambda *s: (torch.randn(*s, device=DEV, dtype=torch.bfloat16) * 0.02).requires_grad_()
        self.h, self.f, self.E, self.k = h, f, experts, top_k
        self.local = local or experts
        self.router = p(experts, h)
        self.w13 = p(self.local, 2 * f, h)  # per expert, nn.Linear layout [out, in]
        self.w2 = p(self.local, h, f)
        self.params = [self.router, self.w13, self.w2]

    def route(self, x, balanced):
        T = x.shape[0]
        scores = F.linear(x, self.router).float().softmax(-1)
        if balanced:
            idx = (torch.arange(T * self.k, device=DEV) % self.E).view(T, self.k)
            w = torch.gather(scores, 1, idx)
        else:
            w, idx = scores.topk(self.k, dim=-1)
        return (w / w.sum(-1, keepdim=True)).to(x.dtype), idx

    def permute(self, x, idx):
        flat = idx.flatten() % self.local
        counts = torch.bincount(flat, minlength=self.local)
        padded = (counts + ALIGN - 1) // ALIGN * ALIGN
        offs = torch.cumsum(padded, 0).to(torch.int32)
        order = torch.argsort(flat, stable=True)
        sorted_e = flat[order]
        first = torch.cumsum(counts, 0) - counts
        dest = (offs - padded)[sorted_e] + torch.arange(flat.numel(), device=DEV) - first[sorted_e]
        rows = int(offs[-1].item())
        xp = x.new_zeros(rows, self.h).index_copy(0, dest, x[order // self.k])
        return xp, offs, order, dest, counts

    def experts(self, xp, offs):
        g, u = grouped_mm(xp, self.w13.transpose(-2, -1), offs).chunk(2, dim=-1)
        return grouped_mm(F.silu(g) * u, self.w2.transpose(-2, -1), offs)

    def forward(self, x, balanced):
        w, idx = self.route(x, balanced)
        xp, offs, order, dest, _ = self.permute(x, idx)
        y = self.experts(xp, offs)
        return x.new_zeros(x.shape).index_add(0, order // self.k, y[dest] * w.flatten()[order, None])


def rms(x, weight, eps=1e-6):
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


class Attention:
    """Qwen3's attention: q/k/v/o linears, per-head RMSNorm on q and k, rotary, GQA via SDPA's enable_gqa."""

    def __init__(self, h, heads, kv_heads, d, s):
        p = lambda *sh: (torch.randn(*sh, device=DEV, dtype=torch.bfloat16) * 0.02).requires_grad_()
        self.heads, self.kv, self.d = heads, kv_heads, d
        self.wq, self.wk, self.wv, self.wo = p(heads * d, h), p(kv_heads * d, h), p(kv_heads * d, h), p(h, heads * d)
        one = lambda n: torch.ones(n, device=DEV, dtype=torch.bfloat16, requires_grad=True)
        self.qn, self.kn, self.n1, self.n2 = one(d), one(d), one(h), one(h)
        self.params = [self.wq, self.wk, self.wv, self.wo, self.qn, self.kn, self.n1, self.n2]
        freqs = 1.0 / (1e6 ** (torch.arange(0, d, 2, device=DEV).float() / d))
        ang = torch.outer(torch.arange(s, device=DEV).float(), freqs)
        self.cos, self.sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)

    def rope(self, t):
        a, b = t[..., : self.d // 2], t[..., self.d // 2:]
        c, s = self.cos[None, :, None, :], self.sin[None, :, None, :]
        return torch.cat([a * c - b * s, a * s + b * c], dim=-1)

    def forward(self, x):
        T = x.shape[0]
        hn = rms(x, self.n1)
        q = rms(F.linear(hn, self.wq).view(1, T, self.heads, self.d), self.qn)
        k = rms(F.linear(hn, self.wk).view(1, T, self.kv, self.d), self.kn)
        v = F.linear(hn, self.wv).view(1, T, self.kv, self.d)
        q, k = self.rope(q), self.rope(k)
        rep = self.heads // self.kv
        k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return x + F.linear(o.transpose(1, 2).reshape(T, -1), self.wo)


def static_forward(m, x, balanced):
    """The MoE forward without a host sync (CUDA-graph capturable): counts by scatter_add, the permuted buffer at
    its largest padded size (every expert padded to 16 rows) instead of the size the routing needs."""
    T = x.shape[0]
    w, idx = m.route(x, balanced)
    flat = idx.flatten() % m.local
    counts = torch.zeros(m.local, dtype=torch.int64, device=x.device).scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + ALIGN - 1) // ALIGN * ALIGN
    offs = torch.cumsum(padded, 0).to(torch.int32)
    order = torch.argsort(flat, stable=True)
    sorted_e = flat[order]
    first = torch.cumsum(counts, 0) - counts
    dest = (offs - padded)[sorted_e] + torch.arange(flat.numel(), device=x.device) - first[sorted_e]
    rows = T * m.k + m.local * (ALIGN - 1)
    xp = x.new_zeros(rows, m.h).index_copy(0, dest, x[order // m.k])
    y = m.experts(xp, offs)
    return x.new_zeros(x.shape).index_add(0, order // m.k, y[dest] * w.flatten()[order, None])


def graph_vs_eager(name, T, h, f, E, k, local, balanced):
    """The MoE block's forward per call, issued op by op (the host's launch path exposed) and replayed from a CUDA
    graph (launches removed): how much of a fine-grained block is host time."""
    torch.manual_seed(0)
    m = Moe(h, f, E, k, local)
    x = torch.randn(T, h, device=DEV, dtype=torch.bfloat16)
    with torch.no_grad():
        eager = bench_ms(lambda: static_forward(m, x, balanced))
        row = {"name": name, "T": T, "local": local, "balanced": balanced, "eager_fwd_ms": eager}
        if DEV == "cuda":
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    static_forward(m, x, balanced)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_forward(m, x, balanced)
            row["graph_fwd_ms"] = bench_ms(g.replay)
    results["graph"].append(row)


def fwd_bwd(fn, inputs, params):
    def run():
        for t in params + inputs:
            t.grad = None
        fn().backward(grad)
    grad = None
    with torch.no_grad():
        out = fn()
    grad = torch.randn_like(out)
    t_fwd = bench_ms(lambda: torch.no_grad()(fn)())
    t_all = bench_ms(run)
    return t_fwd, t_all


def moe_block(name, T, h, f, E, k, local, balanced):
    torch.manual_seed(0)
    m = Moe(h, f, E, k, local)
    x = torch.randn(T, h, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    t_fwd, t_all = fwd_bwd(lambda: m.forward(x, balanced), [x], m.params)
    with torch.no_grad():
        _, idx = m.route(x, balanced)
        counts = torch.bincount(idx.flatten() % local, minlength=local).float()
    routed = T * k  # every copy goes to a local expert (idx mod local): with ep 8, T / 8 tokens x 8 copies
    flops = 2.0 * routed * h * 3 * f
    results["moe"].append({"name": name, "T": T, "h": h, "f": f, "experts": E, "top_k": k, "local": local,
                           "balanced": balanced, "fwd_ms": t_fwd, "fwd_bwd_ms": t_all, "bwd_ms": t_all - t_fwd,
                           "expert_gemm_flops_fwd": flops, "max_over_mean_tokens": float(counts.max() / counts.mean()),
                           "fwd_tflops": flops / t_fwd / 1e9})


def pieces(name, T, h, f, E, k, balanced, local=None):
    """The MoE forward's pieces alone, each with its real inputs."""
    torch.manual_seed(0)
    m = Moe(h, f, E, k, local)
    x = torch.randn(T, h, device=DEV, dtype=torch.bfloat16)
    with torch.no_grad():
        w, idx = m.route(x, balanced)
        xp, offs, order, dest, _ = m.permute(x, idx)
        gu = grouped_mm(xp, m.w13.transpose(-2, -1), offs)
        g, u = gu.chunk(2, dim=-1)
        a = F.silu(g) * u
        y = grouped_mm(a, m.w2.transpose(-2, -1), offs)
        row = {"name": name, "T": T, "local": m.local, "balanced": balanced, "rows_padded": xp.shape[0]}
        row["router_ms"] = bench_ms(lambda: m.route(x, balanced))
        row["permute_ms"] = bench_ms(lambda: m.permute(x, idx))
        row["up_ms"] = bench_ms(lambda: grouped_mm(xp, m.w13.transpose(-2, -1), offs))
        row["act_ms"] = bench_ms(lambda: F.silu(g) * u)
        row["down_ms"] = bench_ms(lambda: grouped_mm(a, m.w2.transpose(-2, -1), offs))
        row["unpermute_ms"] = bench_ms(
            lambda: x.new_zeros(x.shape).index_add(0, order // k, y[dest] * w.flatten()[order, None]))
    results["pieces"].append(row)


def layer(name, T, balanced):
    torch.manual_seed(0)
    h, heads, kv, d, f, E, k = (64, 4, 2, 16, 32, 8, 2) if SMOKE else (2048, 32, 4, 128, 768, 128, 8)
    att, m = Attention(h, heads, kv, d, T), Moe(h, f, E, k)
    x = torch.randn(T, h, device=DEV, dtype=torch.bfloat16, requires_grad=True)

    def fwd():
        y = att.forward(x)
        return y + m.forward(rms(y, att.n2), balanced)
    t_fwd, t_all = fwd_bwd(fwd, [x], att.params + m.params)
    results["layer"].append({"name": name, "T": T, "balanced": balanced, "fwd_ms": t_fwd, "fwd_bwd_ms": t_all,
                             "bwd_ms": t_all - t_fwd})


def guarded(what, fn):
    common_guarded(results, what, fn)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "moe_layer.json"
    t0 = time.time()
    if DEV == "cuda":
        results["device"] = torch.cuda.get_device_name(0)
    q30 = (64, 32, 8, 2) if SMOKE else (2048, 768, 128, 8)
    q235 = (64, 32, 8, 2) if SMOKE else (4096, 1536, 128, 8)
    dsv3 = (64, 32, 8, 2) if SMOKE else (7168, 2048, 256, 8)
    Ts = (64,) if SMOKE else (4096, 8192)

    def save():
        results["seconds"] = time.time() - t0
        with open(out, "w") as fh:
            json.dump(results, fh, indent=1)
    if "--graph" in sys.argv[2:]:  # only the MoE forwards issued op by op against replayed from a CUDA graph
        for bal in (False, True):
            guarded(f"qwen3-30b graph bal{bal}", lambda: graph_vs_eager("qwen3-30b-a3b", Ts[0], *q30, q30[2], bal))
            for nm, shape, ep in (("qwen3-30b-a3b ep8", q30, 8), ("qwen3-235b-a22b ep8", q235, 8),
                                  ("deepseek-v3 ep32", dsv3, 32)):
                local = max(1, shape[2] // ep)
                guarded(f"{nm} graph bal{bal}", lambda: graph_vs_eager(nm, Ts[0] // shape[3], *shape, local, bal))
        save()
        print(json.dumps(results["graph"], indent=1), results["errors"])
        return
    for T in Ts:
        for bal in (False, True):
            guarded(f"qwen3-30b moe T{T} bal{bal}", lambda: moe_block("qwen3-30b-a3b", T, *q30, q30[2], bal))
            save()
    for bal in (False, True):
        # ep 8: a rank's 16 experts receive T routed copies, as T / 8 tokens whose 8 copies all stay local
        guarded(f"qwen3-235b ep8 moe bal{bal}",
                lambda: moe_block("qwen3-235b-a22b ep8", Ts[0] // q235[3], *q235, q235[2] // 8, bal))
        guarded(f"pieces bal{bal}", lambda: pieces("qwen3-30b-a3b", Ts[0], *q30, bal))
        # the local experts the recipes run: Qwen3-30B at ep 8 (16), Qwen3-235B at ep 8 (16), DeepSeek-V3 at ep 32 (8)
        for nm, shape, ep in (("qwen3-30b-a3b ep8", q30, 8), ("qwen3-235b-a22b ep8", q235, 8), ("deepseek-v3 ep32", dsv3, 32)):
            local = max(1, shape[2] // ep)
            guarded(f"{nm} pieces bal{bal}", lambda: pieces(nm, Ts[0] // shape[3], *shape, bal, local))
            guarded(f"{nm} moe bal{bal}", lambda: moe_block(nm, Ts[0] // shape[3], *shape, local, bal))
        guarded(f"layer bal{bal}", lambda: layer("qwen3-30b-a3b", Ts[0], bal))
        save()
    print(json.dumps(results, indent=1)[:9000])


if __name__ == "__main__":
    main()
