"""What the bench/gpu scripts share: the median time of a call, the CPU smoke check's attention stand-in and the
record-and-go-on wrapper around each measurement."""
import statistics
import time
import traceback

import torch
import torch.nn.functional as F


def bench_ms(fn, warmup, iters, cuda=True):
    """Median milliseconds of one fn() call over `iters` after `warmup`: CUDA events around each call on the GPU, the
    wall clock on the CPU (cuda=False, the smoke check)."""
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def smoke_sdpa():
    """torch < 2.0 (the development machine's, STEP_SMOKE=1) has no scaled_dot_product_attention: a causal stand-in."""
    if hasattr(F, "scaled_dot_product_attention"):
        return

    def _sdpa(q, k, v, is_causal=True):
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1)
        return scores.float().masked_fill(mask, float("-inf")).softmax(-1).type_as(q) @ v
    F.scaled_dot_product_attention = _sdpa


def guarded(results, what, fn):
    """Run one measurement; on failure record its error in results["errors"] and go on with the others."""
    try:
        fn()
    except Exception as e:  # one unsupported kernel must not hide the other measurements
        results["errors"].append({"what": what, "error": f"{type(e).__name__}: {e}"[:600],
                                  "trace": traceback.format_exc()[-1500:]})
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
