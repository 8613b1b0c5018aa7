// Compute-time model for one GPU: GEMMs (peak x named efficiency with tile/wave quantization, HBM roofline,
// launch overhead) and memory-bound kernels (bytes / achieved HBM bandwidth).
// Wave quantization: NVIDIA "Matrix Multiplication Background User's Guide" (tile and wave quantization);
// roofline: Williams et al. 2009. Calibration lives in the GPU profile's "gemm" fields. An fp8 GEMM reaches
// fp8_efficiency x peak_fraction of the fp8 peak: on an H200, torch._scaled_mm with tensorwise scales ran at a median
// 0.907 of the bf16 GEMM's fraction of peak over 11 Llama 3 training shapes (bench/gpu/results/h200-2026-11-26,
// kernels.json; rowwise scales 0.882, not modelled separately: their ratio to tensorwise spans 0.92-1.07).
#pragma once
#include <cstdint>

#include "planner/spec/spec.hpp"

namespace parplan {

// Fraction of peak lost to tile and wave quantization for an m x n output (per batch entry) on this GPU.
double wave_efficiency(const GemmEfficiency& e, int64_t m, int64_t n, int64_t batch);

// Time of a (batched) GEMM C[m,n] = A[m,k] B[k,n] in dtype d.
double gemm_time_s(const GpuSpec& gpu, DType d, int64_t m, int64_t n, int64_t k, int64_t batch = 1);

// Time of a grouped GEMM: `groups` products C_g[m,n] = A_g[m,k] B_g[k,n] in one kernel (a MoE layer's local experts).
// The batched model above plus grouped_tile_overhead_s per wave of tiles: a grouped kernel's tiles each pay their
// pipeline prologue and output epilogue, which dominate when a tile's k loop is short (fine-grained experts, and the
// weight gradients, whose depth is the tokens per expert). The field is fitted to bench/gpu/grouped_gemm.py's 933
// shapes (torch._grouped_mm, bf16, on an H200: bench/gpu/results/h200-2026-11-26b, docs/cost-model.md).
double grouped_gemm_time_s(const GpuSpec& gpu, DType d, int64_t m, int64_t n, int64_t k, int64_t groups);

// Time of a memory-bound kernel moving `bytes` (reads + writes).
double memory_bound_time_s(const GpuSpec& gpu, double bytes);

// One fused-attention kernel call: `units` (batch x local heads) independent attentions of q_tokens queries over
// kv_tokens keys, causal (a square block masked above its diagonal) or not.
struct AttentionCall {
  int64_t units = 1, q_tokens = 0, kv_tokens = 0;
  bool causal = true;
};

// The shape of a fused attention call (FlashAttention's tiling: Dao 2023, arXiv:2307.08691, Sec. 3.2, one thread
// block per 128-query tile and head, looping over 128-key tiles). Its time is its FLOPs at the profile's fraction of
// peak times this factor, 1 at the reference shape where the fractions are measured (kAttentionRef*: one sequence of
// 8192 tokens, 32 heads, causal). With n_q query tiles and n_k key tiles per unit, a block visits n_k tiles (causal:
// its row's i + 1, the diagonal tile half masked) and pays a fixed cost of c tiles (GemmEfficiency::
// attention_tile_overhead: loading its queries, writing its output and softmax statistics); the blocks spread over
// the GPU's SMs, and the longest block (n_k + c tiles) ends last:
//   S = (W / sm_count + n_k + c) sm_count / (units x useful tiles),  W = units (tiles visited + n_q c),
// useful tiles = q k / 128^2 (causal: half). Factor = S(call) / S(reference). c = 0 (a profile without the field):
// 1 for every call, the flat fractions. Fitted on Hopper to bench/gpu/kernels.py's 16 timings (the cuDNN and
// FlashAttention-2 backends, forward and backward, four shapes: docs/cost-model.md, "Measured kernel fractions").
double attention_shape_factor(const GemmEfficiency& e, const AttentionCall& call);
constexpr int64_t kAttentionTile = 128, kAttentionRefHeads = 32, kAttentionRefTokens = 8192;

}  // namespace parplan
