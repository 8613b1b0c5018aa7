// FLOPs of a transformer layer and of a training step.
// Source: Narayanan et al. 2021 (SC21) Eq. 3: F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per iteration with full
// recompute (4 forward-equivalents); Korthikanti et al. 2022 Eq. 7 model FLOPs: 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
// Per layer forward (b sequences of s tokens): QKV 2bsh(q+2kv) (q = heads x head_dim, h unless the head width is
// set), scores 2bs^2 q, context 2bs^2 q, output 2bsqh, MLP 4bshf (GeLU) or 6bshf (SwiGLU) per expert a token runs
// (top_k routed + the shared ones), router 2bshE; logits 2bshV. Backward = 2 x forward. MLA (DeepSeek-V2 Sec. 2.1):
// QKV is 2bs x the down- and up-projection weights, scores use the query/key head width (nope + rope), context and
// output the value head width. A MoE model's leading dense layers count with their own MLP width.
#pragma once
#include <cstdint>

#include "planner/spec/config.hpp"
#include "planner/spec/spec.hpp"

namespace parplan {

// Query-key pairs one causal attention over s tokens scores, with a window of w keys (ModelSpec::sliding_window; 0 =
// none): sum over queries q = 0 .. s-1 of min(q + 1, w) = s(s+1)/2 when s <= w, else w(w+1)/2 + (s - w) w
// (Jiang et al. 2023, Mistral 7B, Sec. 2: each token attends at most W tokens). Exact, in double.
double causal_attention_pairs(int64_t s, int64_t w);
// The share of a causal attention's pairs a window of w keys keeps: causal_attention_pairs(s, w) / (s (s+1) / 2); 1
// without a window or when s <= w. The attention core's FLOPs (layer_forward_flops, and the fused kernels' time in
// cost_model.cpp attention_core) scale by it for a layer whose every query sees the window
// (ModelSpec::every_layer_windowed): a fused kernel skips the key tiles outside the band (FlashAttention-2's window,
// Dao 2023) as it skips those above the diagonal.
double window_pair_fraction(int64_t s, int64_t w);
// window_pair_fraction for one layer kind: the window's when every layer of m is windowed, else 1.
double attention_pair_fraction(const ModelSpec& m, int64_t s);

struct LayerFlops {
  double qkv = 0, scores = 0, context = 0, attn_out = 0, mlp = 0, router = 0;
  double mla_up = 0;  // MLA: the up-projections to Q (from the q latent, or h) and to K, V: part of qkv
  double attention_core() const { return scores + context; }
  double total() const { return qkv + scores + context + attn_out + mlp + router; }
};

// Forward FLOPs of one layer for b sequences of s tokens (whole layer, before any parallel split).
// causal: count only the lower triangle of the attention scores/context (what a causal fused kernel executes).
LayerFlops layer_forward_flops(const ModelSpec& m, int64_t b, int64_t s, bool causal);

// Forward FLOPs of the output layer (logits) for b sequences of s tokens.
double logits_forward_flops(const ModelSpec& m, int64_t b, int64_t s);

// Model FLOPs of one step (Korthikanti 2022 Eq. 7 basis: forward + backward = 3 x forward, attention counted in full,
// no recompute) for `global_batch` sequences of s tokens.
// Forward FLOPs of the multi-token prediction modules (DeepSeek-V3 Sec. 2.2; Megatron-LM's
// num_floating_point_operations counts them too): per module one block of the model's last layer kind, the
// projection 2 b s (2h) h and a second logits GEMM. 0 without MTP.
double mtp_forward_flops(const ModelSpec& m, int64_t b, int64_t s, bool causal);
double model_flops_per_step(const ModelSpec& m, int64_t global_batch, int64_t s);

// Hardware FLOPs of one step: model FLOPs plus the recompute pass (full: every layer's forward again;
// selective: the attention core's forward again, 4 B s^2 h per layer), attention counted in full (Narayanan 2021 Eq. 3
// basis for full recompute). Korthikanti et al. 2022 Table 5's HFU counts the recomputed core 3x (forward + backward);
// this counts what the GPU executes (flops_test pins the published ratios to it).
// Selective recompute counts the GEMMs its modules rerun (recompute_module_bytes, activations.hpp): core_attn the
// attention core, mla_up_proj the up-projections, mlp a dense layer's MLP, moe a MoE layer's experts and router,
// shared_experts the shared experts; layernorm and moe_act rerun no matmul.
double hardware_flops_per_step(const ModelSpec& m, int64_t global_batch, int64_t s, Recompute r,
                               RecomputeModules modules = {});
// Full recompute of only some layers (ParallelConfig::recompute_layers): the recompute pass's FLOPs of one step, the
// forward of the `layers` recomputed transformer layers (`dense` of them a MoE model's dense layers, counted with
// their own MLP), summed over the pipeline stages, and of the MTP modules (priced as under full recompute). With
// every layer recomputed it is full recompute's term above.
// `full`: of the recomputed layers, the full-attention ones of a model that mixes them with windowed ones.
double partial_recompute_flops(const ModelSpec& m, int64_t global_batch, int64_t s, int64_t layers, int64_t dense,
                               FullAttentionLayers full = {});

}  // namespace parplan
