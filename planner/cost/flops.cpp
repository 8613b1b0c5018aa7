// FLOP counts (formulas and sources in flops.hpp).
#include "planner/cost/flops.hpp"

namespace parplan {

LayerFlops layer_forward_flops(const ModelSpec& m, int64_t b, int64_t s, bool causal) {
  const double bs = static_cast<double>(b) * static_cast<double>(s);
  const double h = static_cast<double>(m.hidden), kv = static_cast<double>(m.kv_dim());
  const double f = static_cast<double>(m.ffn_hidden);
  const double attn_fraction = causal ? 0.5 : 1.0;
  LayerFlops lf;
  lf.qkv = 2.0 * bs * h * (h + 2.0 * kv);
  lf.scores = 2.0 * bs * static_cast<double>(s) * h * attn_fraction;
  lf.context = lf.scores;
  lf.attn_out = 2.0 * bs * h * h;
  const double mats = m.ffn_type == FfnType::swiglu ? 3.0 : 2.0;
  lf.mlp = 2.0 * mats * bs * h * f * static_cast<double>(m.is_moe() ? m.top_k : 1);
  lf.router = m.is_moe() ? 2.0 * bs * h * static_cast<double>(m.experts) : 0.0;
  return lf;
}

double logits_forward_flops(const ModelSpec& m, int64_t b, int64_t s) {
  return 2.0 * static_cast<double>(b) * static_cast<double>(s) * static_cast<double>(m.hidden) *
         static_cast<double>(m.vocab);
}

double model_flops_per_step(const ModelSpec& m, int64_t global_batch, int64_t s) {
  const double layer = layer_forward_flops(m, global_batch, s, false).total();
  return 3.0 * (static_cast<double>(m.layers) * layer + logits_forward_flops(m, global_batch, s));
}

double hardware_flops_per_step(const ModelSpec& m, int64_t global_batch, int64_t s, Recompute r) {
  const LayerFlops lf = layer_forward_flops(m, global_batch, s, false);
  double extra = 0.0;
  switch (r) {
    case Recompute::none:
      break;
    case Recompute::selective:
      extra = lf.attention_core();
      break;
    case Recompute::full:
      extra = lf.total();
      break;
  }
  return model_flops_per_step(m, global_batch, s) + static_cast<double>(m.layers) * extra;
}

}  // namespace parplan
