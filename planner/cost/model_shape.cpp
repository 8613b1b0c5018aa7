// Parameter counting and GPT-style shape inference (formulas documented in model_shape.hpp).
#include "planner/cost/model_shape.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>

#include "planner/spec/error.hpp"

namespace parplan {

ParamCounts count_params(const ModelSpec& m) {
  ParamCounts c;
  const int64_t h = m.hidden, f = m.ffn_hidden;
  const int64_t b = m.bias ? 1 : 0;
  if (m.is_mla()) {
    // Down-projections (queries: h -> q_lora, keys/values: h -> kv_lora + the shared rotary key) with the norms on
    // their latents, then the up-projections to every head (DeepSeek-V2 Sec. 2.1.2-2.1.3).
    const int64_t q_in = m.q_lora_rank > 0 ? m.q_lora_rank : h;
    c.qkv_replicated = (m.q_lora_rank > 0 ? h * m.q_lora_rank + m.q_lora_rank : 0) +
                       h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank;
    c.qkv = c.qkv_replicated + q_in * m.q_dim() + m.kv_lora_rank * m.heads * (m.head_dim() + m.v_head_dim());
  } else {
    const int64_t width = m.q_dim() + 2 * m.kv_dim();
    c.qkv = h * width + b * width;
  }
  c.attn_out = m.context_dim() * h + b * h;
  auto mlp = [&](int64_t width, int64_t& up, int64_t& down) {
    const int64_t up_width = m.ffn_type == FfnType::swiglu ? 2 * width : width;
    up = up_width * h + b * up_width;
    down = width * h + b * h;
  };
  mlp(f, c.mlp_up, c.mlp_down);
  c.attention = c.qkv + c.attn_out;
  c.mlp_per_expert = c.mlp_up + c.mlp_down;
  c.router = m.is_moe() ? h * m.experts : 0;
  c.shared_mlp = m.is_moe() ? m.shared_experts * c.mlp_per_expert : 0;
  if (m.has_dense_layers()) {
    int64_t up = 0, down = 0;
    mlp(m.dense_ffn_hidden, up, down);
    c.dense_mlp = up + down;
  }
  const int64_t norm_params = m.norm == NormType::layernorm ? 2 * h : h;
  c.norms = 2 * norm_params;
  c.final_norm = norm_params;
  c.embedding = m.vocab * h;
  c.positions = m.position == PositionEmbedding::learned ? m.seq_len * h : 0;
  c.lm_head = m.tied_embeddings ? 0 : m.vocab * h;
  if (m.mtp_layers > 0) c.mtp_projection = 2 * h * h + 2 * norm_params;
  return c;
}

namespace {
// Every layer's parameters with `experts` of each MoE layer's routed experts counted.
int64_t layer_params_total(const ModelSpec& m, const ParamCounts& c, int64_t experts) {
  if (!m.is_moe()) return m.layers * (c.attention + c.norms + c.mlp_per_expert);
  return m.layers * (c.attention + c.norms) + m.dense_layer_count() * c.dense_mlp +
         m.moe_layers() * (c.router + c.shared_mlp + c.per_layer_experts(experts));
}
}  // namespace

int64_t total_params(const ModelSpec& m) {
  const ParamCounts c = count_params(m);
  return layer_params_total(m, c, m.experts) + c.embedding + c.positions + c.lm_head + c.final_norm;
}

int64_t active_params(const ModelSpec& m) {
  const ParamCounts c = count_params(m);
  return layer_params_total(m, c, m.top_k) + c.embedding + c.positions + c.lm_head + c.final_norm;
}

bool last_layer_dense(const ModelSpec& m) {
  return m.is_moe() && m.dense_layers_before(m.layers) - m.dense_layers_before(m.layers - 1) == 1;
}

ModelSpec mtp_block_model(const ModelSpec& m) {
  const ModelSpec block = last_layer_dense(m) ? dense_layer_model(m) : m;
  // Of the last layer's attention kind too, with a window on some layers only.
  return m.mixes_attention() ? attention_layer_model(block, m.layer_full_attention(m.layers - 1)) : block;
}

int64_t mtp_params(const ModelSpec& m) {
  if (m.mtp_layers <= 0) return 0;
  const ParamCounts c = count_params(m);
  const int64_t block = c.attention + c.norms +
                        (m.is_moe() && !last_layer_dense(m) ? c.router + c.shared_mlp + c.per_layer_experts(m.experts)
                                                            : (m.is_moe() ? c.dense_mlp : c.mlp_per_expert));
  return m.mtp_layers * (block + c.mtp_projection);
}

ModelSpec infer_gpt_shape(double params) {
  if (!(params >= 1e7) || !(params <= 1e14) || !std::isfinite(params)) {
    throw InputError(fmt::format("--params: {} is outside the supported range 1e7 .. 1e14", params));
  }
  constexpr double kRatio = 128.0;  // hidden / layers, as in GPT-3 175B
  constexpr int64_t kHeadDim = 128, kVocab = 51200, kSeq = 2048;
  const int64_t l0 = std::max<int64_t>(2, std::llround(std::cbrt(params / (12.0 * kRatio * kRatio))));
  // 12 l h^2 + (13 l + V + s) h - N = 0
  const double a = 12.0 * l0, b = 13.0 * l0 + kVocab + kSeq;
  const double h_exact = (-b + std::sqrt(b * b + 4 * a * params)) / (2 * a);
  // Heads in multiples of 8 (hidden in multiples of 1024) from 16 heads up, as published models of that size have,
  // so that tensor parallelism up to a node of 8 can split them; smaller models in multiples of one head.
  const int64_t step = h_exact >= 16 * kHeadDim ? 8 * kHeadDim : kHeadDim;
  const int64_t hidden = std::max<int64_t>(kHeadDim, std::llround(h_exact / static_cast<double>(step)) * step);
  // The layer count that brings the total nearest to N for that hidden size.
  const double hd = static_cast<double>(hidden);
  const int64_t layers = std::max<int64_t>(
      2, std::llround((params - static_cast<double>(kVocab + kSeq) * hd) / (12.0 * hd * hd + 13.0 * hd)));
  ModelSpec m;
  m.name = fmt::format("gpt-{:.3g}B-inferred", params / 1e9);
  m.layers = layers;
  m.hidden = hidden;
  m.heads = hidden / kHeadDim;
  m.kv_heads = m.heads;
  m.ffn_hidden = 4 * hidden;
  m.ffn_type = FfnType::gelu;
  m.vocab = kVocab;
  m.seq_len = kSeq;
  m.tied_embeddings = true;
  m.bias = true;
  m.dropout = true;
  m.norm = NormType::layernorm;
  m.position = PositionEmbedding::learned;
  m.source = "inferred from the parameter count (GPT-3 family rule: head_dim 128, hidden/layers = 128)";
  return m;
}

}  // namespace parplan
