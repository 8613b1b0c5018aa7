// Parameter counts of a transformer and the GPT-style shape inferred from a parameter count.
#pragma once
#include <cstdint>
#include <string>

#include "planner/spec/spec.hpp"

namespace parplan {

// Parameter counts (elements). Sources: Narayanan et al. 2021 (SC21) Sec. 5.1, P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12lh))
// for GPT with biases, LayerNorms and learned positions; generalised to GQA, SwiGLU, RMSNorm and MoE term by term.
struct ParamCounts {
  // Per layer, the four linears (+ biases): QKV, attention output, MLP up (SwiGLU: gate and up), MLP down; the MLP's
  // per expert. ZeRO-3's per-linear gathers take their shares from these (zero3.cpp).
  // MLA: qkv holds the down-projections, their latent norms and the up-projections; qkv_replicated the first two,
  // which tensor parallelism does not split (Megatron-Core's MLA keeps them whole on every tp rank).
  int64_t qkv = 0, attn_out = 0, mlp_up = 0, mlp_down = 0;
  int64_t qkv_replicated = 0;
  int64_t attention = 0;       // per layer: QKV + output projection (+ biases)
  int64_t mlp_per_expert = 0;  // per layer, per expert: MLP weights (+ biases)
  int64_t router = 0;          // per MoE layer: router
  int64_t shared_mlp = 0;      // per MoE layer: the shared experts' MLPs (split over tp like a dense MLP)
  int64_t dense_mlp = 0;       // per leading dense layer of a MoE model: its MLP
  int64_t norms = 0;           // per layer: the two norms
  int64_t embedding = 0;       // word embedding (vocab-parallel: split over tp)
  int64_t positions = 0;       // learned position embedding (Megatron: a plain nn.Embedding, whole on every tp rank)
  int64_t lm_head = 0;         // 0 when tied to the embedding
  int64_t final_norm = 0;
  // Per multi-token prediction module (DeepSeek-V3 Sec. 2.2): the projection M_k (2 hidden -> hidden) and the norms of
  // its two inputs; its transformer block is counted as a layer (mtp_params).
  int64_t mtp_projection = 0;

  // Input-embedding parameters held by one tensor-parallel rank of the first stage.
  double embedding_per_tp_rank(int64_t tp) const {
    return static_cast<double>(embedding) / static_cast<double>(tp) + static_cast<double>(positions);
  }
  int64_t per_layer_experts(int64_t experts) const { return mlp_per_expert * experts; }
};

ParamCounts count_params(const ModelSpec& m);
int64_t total_params(const ModelSpec& m);
// Parameters touched per token (MoE: top_k experts), the N of 6N-style estimates.
int64_t active_params(const ModelSpec& m);
// The multi-token prediction modules' own parameters (DeepSeek-V3 Sec. 2.2): each a projection with its two norms and
// one transformer block of the kind of the model's last layer (MoE for DeepSeek-V3); the embedding and output head
// are the main model's. Not part of total_params (published totals such as DeepSeek-V3's 671B leave them out).
int64_t mtp_params(const ModelSpec& m);
// Whether a MoE model's last layer (the kind an MTP module's block copies) is a dense one; false for a dense model,
// whose one layer kind is the model's own.
bool last_layer_dense(const ModelSpec& m);
// The model an MTP module's block is a layer of: dense_layer_model() where the last layer is dense, else the model.
ModelSpec mtp_block_model(const ModelSpec& m);

// GPT-style shape for a parameter count (the documented rule, docs/cost-model.md):
// head_dim 128, h/l about 128 (GPT-3 175B: l=96, h=12288): l0 = round(cbrt(N / (12 * 128^2))), h0 the root of
// 12 l0 h^2 + 13 l0 h + (V + s) h = N, h = h0 rounded to a multiple of 1024 (heads in 8s) from h0 >= 2048, else of 128,
// then l re-solved for h; V = 51200, s = 2048, GeLU 4h.
ModelSpec infer_gpt_shape(double params);

}  // namespace parplan
