// FP8 training's quantization work: the casts of GEMM operands to fp8 (and their transposed copies), priced as
// memory-bound passes, per layer and microbatch on one GPU.
//
// An fp8 GEMM reads fp8 operands with their scales, so every operand in 16 bits is cast first (NVIDIA Transformer
// Engine, "Using FP8 with Transformer Engine": cast and cast-transpose kernels; torchao float8 README: the float8
// conversion before each torch._scaled_mm). Per layer (h hidden, T tokens of the microbatch, widths per tp rank):
//   forward   the inputs of the four linears, T (h [x (top_k + shared) for a MoE MLP] + h + context + f) elements
//             ("X"), and the layer's weights W (cast each forward, as torchao does; Transformer Engine's weight cache
//             across microbatches is not modelled): (X + W) (A + 1 + a) bytes. Weights held and gathered in fp8
//             (TrainingSpec::fp8_param_gather) are cast by the optimizer step, once per step, where the update writes
//             the fp8 weight instead of the 16-bit one: W drops out of the forward term.
//   backward  the output gradients of the four linears ("G", the widths of their outputs) cast to fp8 and transposed
//             for the weight gradient (two 1-byte writes), the saved fp8 inputs and weights transposed (read 1, write 1):
//             G (A + 2 + a) + 2 X + 2 W bytes.
//   rowwise   (torchao's axiswise scales: one scale per row along each GEMM's reduction dimension) cannot transpose
//             an fp8 copy for the backward, whose GEMMs reduce over the other dimension: each backward operand is
//             quantized again from its 16-bit copy along that dimension, an amax pass and a cast (2A + 1 bytes), the
//             output gradient twice (for the input gradient along the output width, for the weight gradient along
//             the tokens): G 2(2A + 1) + X (2A + 1) + W (2A + 1) bytes. torchao float8_linear.py,
//             matmul_with_hp_or_float8_args.backward: grad_output cast with axiswise_dim -1 and 0, the saved 16-bit
//             input and weight cast with axiswise_dim 0 (cited from memory).
//   fp8 TP all-gathers (TrainingSpec::fp8_tp_gather, torchtitan's float8 tensorwise TP: torchao's
//             PrepareFloat8ModuleInput / Float8ColwiseParallel cast the column-parallel input, and
//             Float8RowwiseParallel's NoopFwToFloat8BwDynamic the row-parallel output gradient, on this rank's shard
//             before the all-gather; cited from memory): of X, the QKV and MLP-up inputs (S = T h (1 + routed copies)
//             elements) are cast on 1/tp of the tokens, and of G the attention-out and MLP-down output gradients (S
//             again) too, their gathered fp8 copy then transposed alone (read 1, write 1):
//             forward (X - S (1 - 1/tp) + W) (A + 1 + a); backward (G - S) (A + 2 + a) + S ((A + 1 + a) / tp + 2) + 2X + 2W.
// A = the activation dtype's bytes; a = A where the recipe scales from the tensor itself before casting (tensorwise,
// rowwise: an amax pass reads it once more), 0 where the scale comes from history (delayed) or out of the cast kernel
// (blockwise, mxfp8). The fp8 GEMMs themselves run at the fp8 peak times the profile's fp8_efficiency (gemm.hpp).
#pragma once

#include "planner/spec/spec.hpp"

namespace parplan {

struct Fp8CastBytes {
  double forward = 0, backward = 0;
  double inputs = 0, output_grads = 0, weights = 0;  // elements: X, G and W above
};

// 0 unless the plan trains in fp8. `layer_params`: the layer's parameters on this GPU.
Fp8CastBytes fp8_cast_bytes(const Plan& plan, double layer_params);

}  // namespace parplan
