// Model-state memory (weights, gradients, optimizer) under mixed precision and ZeRO sharding.
// Source: Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", Sec. 5 /
// Fig. 1: mixed-precision Adam holds 2 Psi (16-bit weights) + 2 Psi (16-bit grads) + K Psi (fp32 master weights,
// momentum, variance; K = 12). Over N data-parallel ranks: baseline (2+2+K) Psi; P_os 4 Psi + K Psi/N;
// P_os+g 2 Psi + (2+K) Psi/N; P_os+g+p (2+2+K) Psi/N. (7.5B on 64 GPUs: 120 / 31.4 / 16.6 / 1.9 GB.)
// The Megatron distributed optimizer shards the optimizer state like ZeRO-1 (Megatron-Core docs, "Distributed
// Optimizer": bytes per parameter, bf16 parameters with fp32 gradients 18 without it, 6 + 12/d with it). Gradients
// are 4 bytes when accumulated and reduced in fp32 (Megatron's main_grad, the default for bf16), 2 when reduced in
// 16 bits (Megatron-LM --grad-reduce-in-bf16, NeMo grad_reduce_in_fp32: false): 4 + 12/d. fp8 training keeps fp8
// copies of the transformer layers' GEMM weights beside their 16-bit weights (extra_weight_bytes): Transformer
// Engine (Megatron-Core, NeMo; TrainingSpec::fp8_saved_inputs) two, the fp8 weight the forward GEMM reads and the
// transposed (columnwise) copy the input-gradient GEMM reads, both quantized in the first microbatch and cached for
// the rest of the step (TE module/linear.py: the weight quantizer's usage is rowwise and, when gradients are
// enabled, columnwise; get_weight_workspace with cache_name "weight" whenever Megatron passes is_first_microbatch,
// i.e. unless --disable-parameter-transpose-cache; cited from memory), 2 bytes; torchao's Float8Linear one, cast in
// each forward and kept for the backward, 1 byte. stage_memory applies them to the layers only: the embedding, the
// output layer and the final norm are not fp8 GEMM operands (DeepSeek-V3 report, arXiv:2412.19437 Sec. 3.3.1, "the
// embedding module, the output head, MoE gating modules, normalization operators, and attention operators" in
// BF16/FP32; torchtitan converts every nn.Linear but the output layer to Float8Linear; the layers' norms and router,
// under 0.1% of their weights, are counted with them). The weights may instead be held and gathered in fp8
// (TrainingSpec::fp8_param_gather: Megatron-Core --fp8-param-gather, where Transformer Engine's fp8 parameters, 1 byte,
// and the transposed copy the backward's fp8 GEMM reads, 1 byte, replace the 16-bit weights; torchao's FSDP float8
// all-gather, where the shards stay 16-bit and only the gathered weights are fp8): 2 bytes either way, and every
// parameter gather (the distributed optimizer's after the step, ZeRO-3's per layer) moves and buffers 1 byte per
// parameter instead of 2 (gathered_param_bytes). Adam's moments may be kept in 16 or 8 bits (Megatron-Core's
// precision-aware optimizer, --exp-avg-dtype / --exp-avg-sq-dtype bf16, as its DeepSeek-V3 and Qwen3 recipes and the
// DeepSeek-V3 report, arXiv:2412.19437 Sec. 3.3.2, "BF16 for the first and second moments", run it): K = 4 + 2 x the
// moments' bytes, 8 with bf16 moments.
// Offload moves states to host memory (ModelStateBytes::host; times in offload.hpp). Optimizer offload (ZeRO-Offload,
// Ren et al. 2021, arXiv:2101.06840, Sec. 4.1, Fig. 2: the GPU holds the 16-bit parameters, 2 Psi; the host the
// 16-bit gradients, 2 Psi, and the fp32 parameters, momentum and variance, 12 Psi): the K Psi / N optimizer shard and
// the rank's gradient shard are on the host; with ZeRO-2/3 the GPU keeps no gradient shard (it goes down as it is
// reduced), below that the GPU accumulates the whole gradient and copies its shard down once. Parameter offload
// (ZeRO-3 only; ZeRO-Infinity, Rajbhandari et al. 2021, arXiv:2104.07857, Sec. 5.1): the 16-bit shard 2 Psi / N is
// on the host too, and the GPU holds only the gathered working parameters (zero3_buffer_bytes, zero3.hpp).
#pragma once
#include <cstdint>

#include "planner/spec/spec.hpp"

namespace parplan {

struct ModelStateBytes {
  double weights = 0, grads = 0, optimizer = 0;  // on the GPU
  double host = 0;                               // offloaded to host memory
  double total() const { return weights + grads + optimizer; }
};

struct ModelStateOptions {
  int zero_stage = 0;
  bool distributed_optimizer = false;
  int64_t weight_bytes = 2;       // 16-bit weights
  int64_t grad_bytes = 2;         // 2, or 4 with fp32 gradient accumulation
  int64_t optimizer_bytes = 12;   // K: fp32 master + Adam moments
  int64_t extra_weight_bytes = 0; // e.g. fp8 weight cache
  OffloadSet offload;             // states kept in host memory
  bool clip_scales_always = false;  // gradient clipping multiplies every gradient (optimizer_step_bytes)
};

// Bytes on one GPU for `params` parameters held by it (after tp/pp/ep splits), sharded over `shard` ranks.
ModelStateBytes model_state_bytes(double params, int64_t shard, const ModelStateOptions& o);

ModelStateOptions model_state_options(const Plan& plan);

// Bytes per parameter that a parameter all-gather moves and its gathered buffer holds: 2 (16-bit weights), 1 when
// the weights are gathered in fp8 (above).
double gathered_param_bytes(const Plan& plan);

// Memory traffic of one mixed-precision Adam step over the `params` parameters a GPU holds, of which it updates the
// 1/shard it owns when the optimizer is sharded (ZeRO >= 1, distributed optimizer). The fused Adam kernels (apex
// multi_tensor_adam, used by Megatron-LM and DeepSpeed FusedAdam) read and write the K = 12 bytes of fp32 master
// weight, momentum and variance (2K = 24 B, ZeRO's K above); the gradient is read twice, by the global-norm pass of
// gradient clipping and by Adam; and the updated 16-bit model weight is written. Megatron-LM and DeepSpeed scale the
// gradients only when the norm exceeds the limit (Megatron-LM clip_grads.py: `if clip_coeff < 1.0`), which a
// converging run rarely does; PyTorch's clip_grad_norm_ (clip_grads_with_norm_, as torchtitan calls it with FSDP2)
// multiplies every gradient by the clamped coefficient, to avoid a host sync, so with clip_scales_always the
// gradient is read and written once more (4 reads and a write of grad_bytes in all). Measured: bench/gpu/step.py's
// clip_grad_norm_ of 1.92e9 fp32 gradients, 8.9 ms on an H100 and 6.8 ms on an H200
// (tests/planner/cost/step_measurements_test.cpp).
struct OptimizerStepBytes {
  double states = 0, grads = 0, weights = 0;
  double total() const { return states + grads + weights; }
};
OptimizerStepBytes optimizer_step_bytes(double params, int64_t shard, const ModelStateOptions& o);

}  // namespace parplan
