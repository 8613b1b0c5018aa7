// FLOP counts (formulas and sources in flops.hpp).
#include "planner/cost/flops.hpp"

#include "planner/cost/activations.hpp"
#include "planner/cost/model_shape.hpp"

namespace parplan {

double causal_attention_pairs(int64_t s, int64_t w) {
  const double S = static_cast<double>(s), W = static_cast<double>(w);
  if (w <= 0 || s <= w) return S * (S + 1.0) / 2.0;
  return W * (W + 1.0) / 2.0 + (S - W) * W;
}

double window_pair_fraction(int64_t s, int64_t w) {
  if (w <= 0 || s <= w) return 1.0;
  return causal_attention_pairs(s, w) / causal_attention_pairs(s, 0);
}

double attention_pair_fraction(const ModelSpec& m, int64_t s) {
  return m.every_layer_windowed() ? window_pair_fraction(s, m.sliding_window) : 1.0;
}

LayerFlops layer_forward_flops(const ModelSpec& m, int64_t b, int64_t s, bool causal) {
  const double bs = static_cast<double>(b) * static_cast<double>(s);
  const double h = static_cast<double>(m.hidden);
  const double f = static_cast<double>(m.ffn_hidden), heads = static_cast<double>(m.heads);
  // Causal: the lower triangle, s^2 / 2 (non-causal basis: s^2); a window keeps its share of the causal pairs.
  const double attn_fraction = (causal ? 0.5 : 1.0) * attention_pair_fraction(m, s);
  LayerFlops lf;
  if (m.is_mla()) {  // the down- and up-projections' weights (DeepSeek-V2 Sec. 2.1)
    const double q_lora = static_cast<double>(m.q_lora_rank), kv_lora = static_cast<double>(m.kv_lora_rank);
    const double q_in = m.q_lora_rank > 0 ? q_lora : h;
    lf.qkv = 2.0 * bs *
             ((m.q_lora_rank > 0 ? h * q_lora : 0.0) + q_in * static_cast<double>(m.q_dim()) +
              h * (kv_lora + static_cast<double>(m.qk_rope_head_dim)) +
              kv_lora * heads * static_cast<double>(m.head_dim() + m.v_head_dim()));
    lf.mla_up = 2.0 * bs * (q_in * static_cast<double>(m.q_dim()) +
                            kv_lora * heads * static_cast<double>(m.head_dim() + m.v_head_dim()));
  } else {
    lf.qkv = 2.0 * bs * h * static_cast<double>(m.q_dim() + 2 * m.kv_dim());
  }
  lf.scores = 2.0 * bs * static_cast<double>(s) * heads * static_cast<double>(m.qk_head_dim()) * attn_fraction;
  lf.context = 2.0 * bs * static_cast<double>(s) * heads * static_cast<double>(m.v_head_dim()) * attn_fraction;
  lf.attn_out = 2.0 * bs * static_cast<double>(m.context_dim()) * h;
  const double mats = m.ffn_type == FfnType::swiglu ? 3.0 : 2.0;
  lf.mlp = 2.0 * mats * bs * h * f * m.mlp_copies_per_token();
  lf.router = m.is_moe() ? 2.0 * bs * h * static_cast<double>(m.experts) : 0.0;
  return lf;
}

namespace {
// What a windowed layer's attention core lacks of a full-attention one's; 0 unless the model mixes the two. A model
// read as a whole prices its layers with full attention (layer_forward_flops), and the two kinds differ in the
// attention core only, which is the same in a MoE model's dense and MoE layers: the whole model's count less this for
// each windowed layer is the count layer by layer.
double window_core_saving(const ModelSpec& m, int64_t b, int64_t s, bool causal) {
  if (!m.mixes_attention()) return 0.0;
  return layer_forward_flops(attention_layer_model(m, true), b, s, causal).attention_core() -
         layer_forward_flops(attention_layer_model(m, false), b, s, causal).attention_core();
}
int64_t windowed_layers(const ModelSpec& m) { return m.layers - m.full_attention_layers_before(m.layers); }

// Forward FLOPs of every layer: a MoE model's leading dense layers have their own MLP; windowed layers their window.
double all_layers_forward_flops(const ModelSpec& m, int64_t b, int64_t s, bool causal) {
  const double saving = static_cast<double>(windowed_layers(m)) * window_core_saving(m, b, s, causal);
  const double main = layer_forward_flops(m, b, s, causal).total();
  if (!m.has_dense_layers()) return static_cast<double>(m.layers) * main - saving;
  return static_cast<double>(m.moe_layers()) * main +
         static_cast<double>(m.dense_layer_count()) * layer_forward_flops(dense_layer_model(m), b, s, causal).total() -
         saving;
}
}  // namespace

double logits_forward_flops(const ModelSpec& m, int64_t b, int64_t s) {
  return 2.0 * static_cast<double>(b) * static_cast<double>(s) * static_cast<double>(m.hidden) *
         static_cast<double>(m.vocab);
}

double mtp_forward_flops(const ModelSpec& m, int64_t b, int64_t s, bool causal) {
  if (m.mtp_layers <= 0) return 0.0;
  const ModelSpec block = mtp_block_model(m);
  const double h = static_cast<double>(m.hidden);
  const double projection = 2.0 * static_cast<double>(b) * static_cast<double>(s) * 2.0 * h * h;
  return static_cast<double>(m.mtp_layers) *
         (layer_forward_flops(block, b, s, causal).total() + projection + logits_forward_flops(m, b, s));
}

double model_flops_per_step(const ModelSpec& m, int64_t global_batch, int64_t s) {
  return 3.0 * (all_layers_forward_flops(m, global_batch, s, false) + logits_forward_flops(m, global_batch, s) +
                mtp_forward_flops(m, global_batch, s, false));
}

namespace {
// The matmul FLOPs Megatron-Core's selective recompute modules rerun in one step (flops.hpp).
double selective_rerun_flops(const ModelSpec& m, int64_t global_batch, int64_t s, RecomputeModules mods) {
  using M = RecomputeModule;
  const LayerFlops lf = layer_forward_flops(m, global_batch, s, false);
  const double L = static_cast<double>(m.layers);
  const double windowed = static_cast<double>(windowed_layers(m));
  double extra = mods.has(M::core_attn)
                     ? L * lf.attention_core() - windowed * window_core_saving(m, global_batch, s, false)
                     : 0.0;
  if (mods.has(M::mla_up_proj)) extra += L * lf.mla_up;
  if (!m.is_moe()) return extra + (mods.has(M::mlp) ? L * lf.mlp : 0.0);
  if (mods.has(M::mlp) && m.has_dense_layers()) {
    extra += static_cast<double>(m.dense_layer_count()) * layer_forward_flops(dense_layer_model(m), global_batch, s, false).mlp;
  }
  const double shared = lf.mlp * static_cast<double>(m.shared_experts) / m.mlp_copies_per_token();
  const double moe = mods.has(M::moe) ? lf.mlp + lf.router : (mods.has(M::shared_experts) ? shared : 0.0);
  return extra + static_cast<double>(m.moe_layers()) * moe;
}
}  // namespace

double partial_recompute_flops(const ModelSpec& m, int64_t global_batch, int64_t s, int64_t layers, int64_t dense,
                               FullAttentionLayers full) {
  const double main = layer_forward_flops(m, global_batch, s, false).total();
  const double dense_layer = dense > 0 ? layer_forward_flops(dense_layer_model(m), global_batch, s, false).total() : 0.0;
  const double windowed = static_cast<double>(layers - full.layers);
  return static_cast<double>(layers - dense) * main + static_cast<double>(dense) * dense_layer -
         windowed * window_core_saving(m, global_batch, s, false) + mtp_forward_flops(m, global_batch, s, false);
}

double hardware_flops_per_step(const ModelSpec& m, int64_t global_batch, int64_t s, Recompute r,
                               RecomputeModules modules) {
  double extra = 0.0;
  switch (r) {
    case Recompute::none:
      break;
    case Recompute::selective:
      extra = selective_rerun_flops(m, global_batch, s, modules);
      break;
    case Recompute::selective_op: {  // the matmuls the policy reruns (activations.hpp selective_op_matmuls)
      for (const LayerMatmul& g : selective_op_matmuls(m).rerun) {
        extra += 2.0 * static_cast<double>(global_batch) * static_cast<double>(s) * static_cast<double>(g.n) *
                 static_cast<double>(g.k);
      }
      extra *= static_cast<double>(m.layers);
      break;
    }
    case Recompute::full:
      extra = all_layers_forward_flops(m, global_batch, s, false) + mtp_forward_flops(m, global_batch, s, false);
      break;
  }
  return model_flops_per_step(m, global_batch, s) + extra;
}

}  // namespace parplan
