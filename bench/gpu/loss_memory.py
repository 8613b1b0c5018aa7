#!/usr/bin/env python3
"""Memory of the output layer and loss as torchtitan computes them, on the GPU at hand.

torchtitan's Llama 3 (torchtitan/models/llama3/model.py, train.py): logits = output(norm(h)) in bf16, then
cross_entropy(pred.flatten(0, 1).float(), labels). For T tokens and vocabulary V this measures, with
torch.cuda.max_memory_allocated, the peak bytes above what is live before the output GEMM (the hidden state, the
weight and the labels), in the forward (to the loss) and in the backward (the loss's backward down to the hidden
state's gradient), eager and under torch.compile. Writes one JSON document (argv[1], default loss_memory.json).
Read in docs/gpu-validation.md.
"""
import json
import sys
import time

import torch
import torch.nn.functional as F

DEV = "cuda"
results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "points": [], "errors": []}


def loss_fn(h, w, labels):
    logits = h @ w.t()
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))


def measure(tokens, hidden, vocab, compiled):
    fn = torch.compile(loss_fn) if compiled else loss_fn
    h = torch.randn(1, tokens, hidden, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(vocab, hidden, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (1, tokens), device=DEV)
    for _ in range(2):  # warm up (and compile) outside the measurement
        fn(h, w, labels).backward()
        h.grad = w.grad = None
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    loss = fn(h, w, labels)
    torch.cuda.synchronize()
    fwd_peak = torch.cuda.max_memory_allocated() - base
    kept = torch.cuda.memory_allocated() - base  # what the forward keeps for the backward (and the loss)
    torch.cuda.reset_peak_memory_stats()
    loss.backward()
    torch.cuda.synchronize()
    bwd_peak = torch.cuda.max_memory_allocated() - base
    grads = (h.grad.numel() * h.grad.element_size() + w.grad.numel() * w.grad.element_size())
    results["points"].append({"tokens": tokens, "hidden": hidden, "vocab": vocab, "compiled": compiled,
                              "forward_peak_bytes": fwd_peak, "kept_bytes": kept, "backward_peak_bytes": bwd_peak,
                              "grad_bytes": grads, "logits_bf16_bytes": tokens * vocab * 2,
                              "logits_fp32_bytes": tokens * vocab * 4})
    del loss, h, w, labels
    torch.cuda.empty_cache()


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "loss_memory.json"
    t0 = time.time()
    for compiled in (False, True):
        for (tokens, hidden, vocab) in [(8192, 4096, 128256), (16384, 4096, 128256), (8192, 8192, 128256),
                                        (4096, 4096, 128256)]:
            try:
                measure(tokens, hidden, vocab, compiled)
            except Exception as e:  # record and go on
                results["errors"].append({"what": f"T{tokens} h{hidden} V{vocab} compiled={compiled}",
                                          "error": f"{type(e).__name__}: {e}"[:300]})
    results["seconds"] = time.time() - t0
    with open(out_path, "w") as fh:
        json.dump(results, fh, indent=1)
    for p in results["points"]:
        print({k: (round(v / 2**30, 3) if k.endswith("bytes") else v) for k, v in p.items()})
    print(results["errors"])


if __name__ == "__main__":
    main()
