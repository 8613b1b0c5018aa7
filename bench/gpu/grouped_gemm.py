#!/usr/bin/env python3
"""MoE expert GEMMs as the training stacks issue them, over a sweep of shapes, on the GPU at hand.

For each expert shape (K -> N per expert), each number of local experts G and each number of tokens per expert M, in
bf16 on random data, three ways of computing the G products:
  grouped  torch._grouped_mm (one grouped kernel; torchtitan's MoE, PyTorch's CUTLASS grouped GEMM);
  streams  one cuBLAS GEMM per expert, round-robin over 4 CUDA streams (Transformer Engine's GroupedLinear on Hopper:
           multi-stream cuBLAS, NVTE_NUM_COMPUTE_STREAMS = 4, which Megatron-Core's --moe-grouped-gemm runs);
  dense    one GEMM of the same total size (G*M x K -> N), the bound a grouped kernel can reach.
Passes: fwd (x[GM,K] . W_e[K,N]), dgrad (the same form with K and N swapped: dy . W_e^T) and wgrad
(dW_e[K,N] = x_e^T dy_e, a reduction over each expert's tokens).

Each way is captured in a CUDA graph of REPS calls and replayed (median of ITERS replays after WARMUP, CUDA events),
so the time is the GPU's, without Python launch overhead (the recipes that state it run CUDA graphs). Writes one JSON
document (argv[1], default grouped_gemm.json); a measurement that fails records its error and the others go on.
Read in docs/gpu-validation.md ("Grouped expert GEMMs").
"""
import json
import statistics
import sys
import time

import torch

WARMUP, ITERS, REPS, STREAMS = 2, 5, 8, 4
DEV = "cuda"
BUDGET_S = float(sys.argv[2]) if len(sys.argv) > 2 else 300.0

# Expert shapes (hidden, moe_ffn) of the MoE models parplan ships; up = hidden -> 2 ffn (SwiGLU), down = ffn -> hidden.
MODELS = [("qwen3-30b-a3b", 2048, 768), ("qwen3-235b-a22b", 4096, 1536), ("deepseek-v3", 7168, 2048),
          ("mixtral-8x22b", 6144, 16384), ("qwen3-235b etp2", 4096, 768)]
EXPERTS = [1, 2, 4, 8, 16, 32]
TOKENS = [128, 256, 512, 1024, 2048, 4096]
MAX_TOKENS, MAX_FLOPS = 32768, 2.5e12

results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "warmup": WARMUP, "iters": ITERS, "reps_per_graph": REPS, "streams": STREAMS, "points": [], "errors": []}


def graph_ms(fn):
    """Median time of one fn() call: REPS calls captured in a CUDA graph, replayed ITERS times."""
    fn()  # warm cuBLAS / CUTLASS heuristics outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(REPS):
            fn()
    for _ in range(WARMUP):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(ITERS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / REPS)
    del g
    return statistics.median(times)


def with_streams(fn_list_builder):
    """Run the per-expert calls round-robin over STREAMS side streams joined back to the current one."""
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]

    def run():
        main = torch.cuda.current_stream()
        for s in streams:
            s.wait_stream(main)
        calls = fn_list_builder()
        for i, call in enumerate(calls):
            with torch.cuda.stream(streams[i % STREAMS]):
                call()
        for s in streams:
            main.wait_stream(s)
    return run


def forward_like(G, M, K, N):
    """x[G*M, K] times each expert's W[K, N] (fwd; dgrad is the same with K and N swapped)."""
    x = torch.randn(G * M, K, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(G, N, K, device=DEV, dtype=torch.bfloat16)  # nn.Linear layout per expert
    wt = w.transpose(-2, -1)  # [G, K, N], column-major as _grouped_mm wants
    offs = torch.arange(1, G + 1, device=DEV, dtype=torch.int32) * M
    dense_w = torch.randn(N, K, device=DEV, dtype=torch.bfloat16)
    chunks = x.split(M)
    calls = lambda: [(lambda c=c, i=i: torch.mm(c, w[i].t())) for i, c in enumerate(chunks)]
    return {"grouped": lambda: torch._grouped_mm(x, wt, offs=offs), "streams": with_streams(calls),
            "dense": lambda: torch.mm(x, dense_w.t())}


def wgrad(G, M, K, N):
    """dW_e[K, N] = x_e^T dy_e over each expert's M tokens."""
    x = torch.randn(G * M, K, device=DEV, dtype=torch.bfloat16)
    dy = torch.randn(G * M, N, device=DEV, dtype=torch.bfloat16)
    xt = x.t().contiguous()  # [K, G*M] row-major
    offs = torch.arange(1, G + 1, device=DEV, dtype=torch.int32) * M
    xs, dys = x.split(M), dy.split(M)
    calls = lambda: [(lambda a=a, b=b: torch.mm(a.t(), b)) for a, b in zip(xs, dys)]
    grouped = None
    for a, b in ((xt, dy), (x.t(), dy), (xt, dy.t().contiguous().t())):  # the layouts _grouped_mm may require
        try:
            torch._grouped_mm(a, b, offs=offs)
            grouped = (lambda a=a, b=b: torch._grouped_mm(a, b, offs=offs))
            break
        except Exception as e:
            err = e
    if grouped is None:
        raise_later = err
        grouped = lambda: (_ for _ in ()).throw(raise_later)
    return {"grouped": grouped, "streams": with_streams(calls),
            "dense": lambda: torch.mm(x.t(), dy)}  # one K x N product over all G*M tokens: same FLOPs


def measure(model, pass_name, G, M, K, N):
    make = wgrad if pass_name == "wgrad" else forward_like
    fns = make(G, M, K, N)
    point = {"model": model, "pass": pass_name, "experts": G, "tokens_per_expert": M, "k": K, "n": N}
    flops = 2.0 * G * M * K * N
    for way in ("grouped", "streams", "dense"):
        try:
            ms = graph_ms(fns[way])
            point[way + "_ms"] = ms
            point[way + "_tflops"] = flops / ms / 1e9
        except Exception as e:  # record and go on
            point[way + "_error"] = f"{type(e).__name__}: {e}"[:300]
    results["points"].append(point)
    torch.cuda.empty_cache()


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "grouped_gemm.json"
    t0 = time.time()
    torch.manual_seed(0)
    work = []
    for (model, h, f) in MODELS:
        for (pass_name, K, N) in [("fwd", h, 2 * f), ("fwd", f, h), ("dgrad", 2 * f, h), ("dgrad", h, f),
                                  ("wgrad", h, 2 * f), ("wgrad", f, h)]:
            for G in EXPERTS:
                for M in TOKENS:
                    if G * M <= MAX_TOKENS and 2.0 * G * M * K * N <= MAX_FLOPS:
                        work.append((model, pass_name, G, M, K, N))
    import random
    random.Random(0).shuffle(work)  # a budget stop leaves a uniform sample, not the last models out
    results["planned"] = len(work)
    for i, args in enumerate(work):
        if time.time() - t0 > BUDGET_S:
            results["errors"].append({"what": "budget", "error": f"stopped after {i} of {len(work)} points"})
            break
        try:
            measure(*args)
        except Exception as e:
            results["errors"].append({"what": str(args), "error": f"{type(e).__name__}: {e}"[:300]})
        if i % 50 == 0:
            print(f"{i}/{len(work)} {time.time() - t0:.0f}s", flush=True)
    results["seconds"] = time.time() - t0
    with open(out_path, "w") as fh:
        json.dump(results, fh, indent=1)
    print(f"{len(results['points'])} points, {len(results['errors'])} errors, {results['seconds']:.0f} s")
    print(json.dumps(results["errors"][:10], indent=1))


if __name__ == "__main__":
    main()
