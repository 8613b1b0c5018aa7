// The element-wise ops of a transformer layer as uncompiled (eager) PyTorch runs them: every tensor op of the model
// code is its own kernel that reads its inputs from HBM and writes its output there, and autograd runs the backward
// of each op as kernels of its own (TrainingSpec::compiled_elementwise false). The fused count of
// layer_memory_bound_bytes (cost_model.cpp: one pass per op, as Megatron-Core / Transformer Engine and torch.compile
// run them) is replaced, op by op, by the counts below, in bytes per element (A = the activation dtype's bytes,
// fp32 = 4, complex64 = 8) and kernel launches per op instance.
//
// Source: torchtitan's Llama model (torchtitan/models/llama/model.py and models/norms.py at the 2024 commits its
// benchmarks name: 1ea476e9f Apr 2024, 9dec370 Dec 2024), cited from memory; the backward kernels are autograd's
// formulas (PyTorch tools/autograd/derivatives.yaml, FunctionsManual.cpp), also from memory. c = 1 where the fp32
// upcasts are kernels (A < 4), 0 where the activations are fp32 already (.float() and .type_as() return the input).
//
// RMSNorm: `self._norm(x.float()).type_as(x) * self.weight`, `_norm(x) = x * torch.rsqrt(x.pow(2).mean(-1,
//   keepdim=True) + self.eps)` (torch.nn.RMSNorm's eager composite, at::rms_norm, runs the same ops). Per element:
//   forward  x.float() c(A+4); pow(2) 4+4; mean 4 (the [T,1] result, + eps and rsqrt on it: negligible bytes, one
//            launch each); x * r 4+4; .type_as(x) c(4+A); * weight A+A
//            = 5*4 + 2A + 2c(A+4) bytes, 6 + 2c kernels (bf16: 36 bytes, 8 kernels).
//   backward * weight: dy*w (A+A), dy*y (3A), sum over tokens for dweight (A); type_as: cast dy up c(A+4);
//            x * r: g*r (4+4), g*x (3*4), sum over the row for dr (4); rsqrt's backward (-0.5 * grad * r.pow(3)) and
//            + eps on [T,1]: 3 launches, negligible bytes; mean's backward (grad.expand / n): writes 4;
//            pow's backward grad * (2 * x.pow(1)): x.pow(1) copies (4+4), 2 * (4+4), grad * (3*4); the two gradients
//            of x.float() summed (3*4); x.float()'s backward casts down c(4+A)
//            = 6A + 17*4 + 2c(A+4) bytes, 14 + 2c kernels (bf16: 92 bytes, 16 kernels).
// Rotary (apply_rotary_emb): `torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))`, `* freqs_cis`,
//   `torch.view_as_real(...).flatten(3)`, `.type_as(xq)`, for q and for k (the views copy nothing; freqs_cis,
//   [seq, head_dim / 2] broadcast over batch and heads, is negligible). Per real element of q or k:
//   forward  .float() c(A+4); complex multiply reads 8 bytes per complex = 4 per real element and writes as much
//            (4+4); .type_as c(4+A) = 8 + 2c(A+4) bytes, 1 + 2c kernels (bf16: 20 bytes, 3 kernels).
//   backward the cast up c(A+4), grad * freqs_cis.conj() (4+4), the cast down c(4+A): the same.
//   Megatron's fused kernel also passes the values (layer_memory_bound_bytes); the eager code rotates q and k only.
// SwiGLU (FeedForward: `self.w2(F.silu(self.w1(x)) * self.w3(x))`), per element of one gate [T, ffn]:
//   forward  silu (A+A), mul (3A) = 5A bytes, 2 kernels.
//   backward mul: g*up and g*silu (3A + 3A); silu_backward(g, gate) (3A) = 9A bytes, 3 kernels.
// Residual adds (`h = x + self.attention(...)`, `out = h + self.feed_forward(...)`): an add is one kernel either
//   way (3A forward; backward the residual-stream gradient sum, 3A), so the fused count stands. With dropout, eager
//   runs `x + dropout(y)` as two kernels: native_dropout (A read, A + 1-byte mask written) then the add (3A) = 5A + 1;
//   backward native_dropout_backward (A + 1 read, A written) and the gradient sum (3A) = 5A + 1 bytes, 2 kernels.
// LayerNorm (F.layer_norm) and GeLU (F.gelu) are single ATen kernels each way in eager PyTorch (native_layer_norm
//   and its backward, gelu and gelu_backward), so their fused count stands (MosaicML llm-foundry's LPLayerNorm too).
//
// Launches: the fused count prices each op as one kernel forward and two backward (memory_bound_ops: the backward
// launches twice the forward's), the rotary embedding as one op for q and k; the eager ops' launches replace those
// (eager_extra_launches).
#pragma once

namespace parplan {

// Bytes per element and kernel launches of one op instance, forward and backward.
struct EagerOp {
  double forward_bytes = 0, backward_bytes = 0;
  int forward_kernels = 0, backward_kernels = 0;
};

// `A`: the activation dtype's bytes (2 for bf16 / fp16, 4 for fp32).
EagerOp eager_rmsnorm(double A);      // per element of the normalized [tokens, hidden] tensor
EagerOp eager_rotary(double A);       // per real element of one rotated tensor (q or k)
EagerOp eager_swiglu(double A);       // per element of one gate [tokens, ffn]
EagerOp eager_dropout_add(double A);  // dropout then the residual add, per element of [tokens, hidden]

// Launches that `eager` instances of an op add over the `fused` fused ops they replace (one kernel forward, two
// backward each).
struct EagerLaunches {
  double forward = 0, backward = 0;
};
EagerLaunches eager_extra_launches(const EagerOp& op, int eager, int fused);

}  // namespace parplan
