// Activation memory (formulas and sources in activations.hpp).
#include "planner/cost/activations.hpp"

#include <algorithm>

namespace parplan {

std::vector<LayerMatmul> layer_matmuls(const ModelSpec& m) {
  std::vector<LayerMatmul> mm = {{m.q_dim(), m.hidden, true},
                                 {m.k_width(), m.hidden, true},
                                 {m.v_width(), m.hidden, true},
                                 {m.hidden, m.context_dim(), false}};
  if (m.ffn_type == FfnType::swiglu) {
    mm.insert(mm.end(), {{m.ffn_hidden, m.hidden, true}, {m.ffn_hidden, m.hidden, true}, {m.hidden, m.ffn_hidden, false}});
  } else {
    mm.insert(mm.end(), {{m.ffn_hidden, m.hidden, true}, {m.hidden, m.ffn_hidden, false}});
  }
  return mm;
}

SelectiveOpMatmuls selective_op_matmuls(const ModelSpec& m) {
  // The 1st, 3rd, ... matmul outputs are kept and the 2nd, 4th, ... rerun, except the last matmul: its output only
  // feeds the residual add, whose backward does not read it, so it is neither kept (what torch.compile keeps; eager
  // keeps it too) nor rerun.
  const std::vector<LayerMatmul> mm = layer_matmuls(m);
  SelectiveOpMatmuls s;
  for (size_t i = 0; i + 1 < mm.size(); ++i) (i % 2 == 0 ? s.kept : s.rerun).push_back(mm[i]);
  return s;
}

double selective_op_saved_width(const ModelSpec& m) {
  double width = static_cast<double>(m.context_dim());  // the attention output
  for (const LayerMatmul& g : selective_op_matmuls(m).kept) width += static_cast<double>(g.n);
  return width;
}

namespace {

// Bytes per element of a GEMM input kept for the backward (G in activations.hpp): 1 for Transformer Engine's fp8
// copies, else the activation dtype's.
double saved_input_bytes(const ActivationShape& a) {
  return a.fp8_saved_inputs ? 1.0 : static_cast<double>(a.bytes_per_element);
}

// One MLP copy's stored bytes per token and FFN element: the up-projection outputs the activation reads (2 SwiGLU,
// 1 GeLU) in the activation dtype, the down-projection input at G. A MoE expert under DeepSeek-V3's fp8 activation
// cache (ActivationShape::fp8_activation_cache): the activation's input in fp8, 1 byte, and no down-projection input
// (the activation's output is recomputed in the backward).
double mlp_copy_bytes(const ModelSpec& m, const ActivationShape& a) {
  const double halves = m.ffn_type == FfnType::swiglu ? 2.0 : 1.0;
  if (a.fp8_activation_cache && m.is_moe()) return halves;
  return halves * static_cast<double>(a.bytes_per_element) + saved_input_bytes(a);
}

// recompute_module_bytes() given the layer's terms without recompute.
RecomputeModuleBytes module_bytes(const ModelSpec& m, const ActivationShape& a, const LayerActivationBytes& r) {
  const double A = static_cast<double>(a.bytes_per_element);
  const double G = saved_input_bytes(a);
  const double t = static_cast<double>(a.tp);
  const double h = static_cast<double>(m.hidden);
  const double sbh = static_cast<double>(a.seq) / static_cast<double>(a.cp) * static_cast<double>(a.micro_batch) * h;
  const double norm_out = sbh / (a.sequence_parallel ? t : 1.0);  // one norm's output, per byte of element
  const double per_f = sbh * static_cast<double>(m.ffn_hidden) / h / t;  // f per token, one MLP copy, per byte
  const double mlp_copy = mlp_copy_bytes(m, a) * per_f;  // one MLP copy's stored terms
  RecomputeModuleBytes b;
  b.core_attn = r.attention_core;
  if (m.is_mla()) {
    b.norm_qkv = norm_out * G;  // the down-projections' input
    b.mla_up_proj = sbh * A * static_cast<double>(m.q_dim() + m.k_width() + m.v_width()) / h / t;
  }
  if (!m.is_moe()) {
    b.mlp_input = norm_out * G;
    b.act_dense = per_f * G;
    b.mlp = b.mlp_input + mlp_copy;
    return b;
  }
  const double routed = static_cast<double>(m.top_k) * a.moe_load, shared = static_cast<double>(m.shared_experts);
  b.norm_mlp = norm_out * A;  // the router's input
  const double act_out = a.fp8_activation_cache ? 0.0 : G;  // the cache keeps no activation output to drop
  b.act_routed = per_f * act_out * routed;
  b.act_shared = per_f * act_out * shared;
  b.moe_routed = mlp_copy * routed;
  b.moe_shared = mlp_copy * shared;
  b.moe_routing = r.moe_routing;
  return b;
}

// Selective recompute: what the modules in `mods` other than core_attn stop storing together (moe covers moe_act's and shared_experts'
// terms, shared_experts moe_act's shared part) and the largest one module rebuilds at once.
struct SelectiveBytes {
  double dropped = 0, working_set = 0;  // dropped: beside the attention core
};
SelectiveBytes selective_bytes(const RecomputeModuleBytes& b, RecomputeModules mods) {
  using M = RecomputeModule;
  const bool moe = mods.has(M::moe), act = mods.has(M::moe_act), shared = moe || mods.has(M::shared_experts);
  SelectiveBytes s;
  s.dropped = (mods.has(M::layernorm) ? b.norm_qkv + b.norm_mlp : 0.0) +
              (mods.has(M::mla_up_proj) ? b.mla_up_proj : 0.0) + (mods.has(M::mlp) ? b.mlp : 0.0) +
              (moe ? b.moe_routed + b.moe_routing : (act ? b.act_routed : 0.0)) +
              (shared ? b.moe_shared : (act ? b.act_shared : 0.0));
  const double each[] = {mods.has(M::core_attn) ? b.core_attn : 0.0,
                         mods.has(M::layernorm) ? std::max(b.norm_qkv, b.norm_mlp) : 0.0,
                         act ? std::max(b.act_routed, b.act_shared) : 0.0,
                         mods.has(M::mla_up_proj) ? b.mla_up_proj : 0.0,
                         mods.has(M::mlp) ? b.mlp : 0.0,
                         moe ? b.moe_routed + b.moe_shared + b.moe_routing : 0.0,
                         shared ? b.moe_shared : 0.0};
  for (double x : each) s.working_set = std::max(s.working_set, x);
  return s;
}

// The uncompiled element-wise ops' extra saved bytes per layer and microbatch (activations.hpp), before recompute.
struct EagerSaved {
  double elementwise = 0;  // the norms, rotary, SwiGLU and GQA terms: rerun by per-op AC
  double unidentified = 0; // the hidden-width tensor every eager variant keeps (per-op AC: the last matmul's output)
};
EagerSaved eager_saved_bytes(const ModelSpec& m, const ActivationShape& a, double routed) {
  EagerSaved e;
  if (!a.eager_elementwise) return e;
  const double A = static_cast<double>(a.bytes_per_element), t = static_cast<double>(a.tp);
  const double tokens = static_cast<double>(a.seq) / static_cast<double>(a.cp) * static_cast<double>(a.micro_batch);
  const double replicated = tokens / (a.sequence_parallel ? t : 1.0), sharded = tokens / t;
  const double h = static_cast<double>(m.hidden), q = static_cast<double>(m.q_dim());
  const double k = static_cast<double>(m.k_width()), v = static_cast<double>(m.v_width());
  if (m.norm == NormType::rmsnorm) e.elementwise += replicated * 2.0 * 4.0 * h;
  if (m.position == PositionEmbedding::rotary) e.elementwise += sharded * 4.0 * (q + k);
  if (m.ffn_type == FfnType::swiglu) e.elementwise += sharded * A * static_cast<double>(m.ffn_hidden) * routed;
  if (!m.is_mla() && m.kv_heads < m.heads) e.elementwise += sharded * A * (2.0 * q - k - v);
  e.unidentified = replicated * A * h;
  return e;
}

}  // namespace

RecomputeModuleBytes recompute_module_bytes(const ModelSpec& m, const ActivationShape& a) {
  ActivationShape none = a;
  none.recompute = Recompute::none;
  return module_bytes(m, a, layer_activation_bytes(m, none));
}

LayerActivationBytes layer_activation_bytes(const ModelSpec& m, const ActivationShape& a) {
  const double A = static_cast<double>(a.bytes_per_element);
  const double mask = m.dropout ? 1.0 : 0.0;
  const double t = static_cast<double>(a.tp);
  const double s_local = static_cast<double>(a.seq) / static_cast<double>(a.cp);
  const double sbh = s_local * static_cast<double>(a.micro_batch) * static_cast<double>(m.hidden);
  const double h = static_cast<double>(m.hidden);
  // Q, K and V as attention reads them and the attention output (the out-projection's input), per hidden width.
  const double attn_ratio = static_cast<double>(m.q_dim() + m.k_width() + m.v_width() + m.context_dim()) / h;
  const double f_ratio = static_cast<double>(m.ffn_hidden) / h;
  const double routed = m.mlp_copies_per_token(a.moe_load);

  // G: the GEMM inputs kept for the weight gradients (A, or 1 byte for Transformer Engine's fp8).
  const double G = saved_input_bytes(a), fp8_extra = a.fp8_saved_inputs ? 1.0 : 0.0;
  LayerActivationBytes r;
  // norm inputs (2) in A bytes, the QKV input (1) and MLP input (1) at G (a MoE layer's is the router's input, A);
  // two hidden dropout masks.
  r.replicated = sbh * (2.0 * A + G + (m.is_moe() ? A : G) + 2.0 * mask);
  if (a.sequence_parallel) r.replicated /= t;
  if (m.is_mla()) {  // the latents, the up-projections' inputs, whole on every tp rank (and their norms' inputs)
    r.replicated += sbh * A * 2.0 * static_cast<double>(m.q_lora_rank + m.kv_lora_rank) / h;
  }
  // Per MLP copy mlp_copy_bytes per FFN element. fp8: the out-projection's own fp8 input beside the attention output,
  // but for the fp8 activation cache, which keeps one copy (E5M6 in 16 bits) for both.
  const double ctx_ratio = static_cast<double>(m.context_dim()) / h;
  const double proj_copy = a.fp8_activation_cache ? 0.0 : fp8_extra;
  r.tp_sharded = sbh * (A * attn_ratio + proj_copy * ctx_ratio + mlp_copy_bytes(m, a) * f_ratio * routed) / t;

  const double heads = static_cast<double>(m.heads);
  const double b = static_cast<double>(a.micro_batch);
  if (a.attention != AttentionKernel::unfused) {  // a fused kernel keeps its softmax statistics, not the scores
    r.attention_core = 4.0 * heads * s_local * b / t;
  } else {
    const double scores = heads * s_local * static_cast<double>(a.seq) * b;  // local queries x all keys
    r.attention_core = scores * (m.dropout ? (2.0 * A + mask) : A) / t;
  }

  if (m.is_moe()) {
    r.moe_routing = a.moe_expert_copies * h * G + a.moe_tokens * static_cast<double>(m.experts) * 4.0 +
                    a.moe_dispatched * 12.0;
  }
  const EagerSaved eager = eager_saved_bytes(m, a, routed);
  switch (a.recompute) {
    case Recompute::none:
      r.eager = eager.elementwise + eager.unidentified;
      r.total = r.replicated + r.tp_sharded + r.attention_core + r.moe_routing + r.eager;
      break;
    case Recompute::selective:
      r.eager = eager.elementwise + eager.unidentified;
      r.total = r.replicated + r.tp_sharded + (a.modules.has(RecomputeModule::core_attn) ? 0.0 : r.attention_core) +
                r.moe_routing - selective_bytes(module_bytes(m, a, r), a.modules).dropped + r.eager;
      break;
    case Recompute::selective_op:
      r.eager = eager.unidentified;
      r.total = sbh * A / (a.sequence_parallel ? t : 1.0) + sbh * A * selective_op_saved_width(m) / h / t +
                r.attention_core + r.eager;
      break;
    case Recompute::full:
      r.total = sbh * A / (a.sequence_parallel ? t : 1.0);  // the layer input only
      break;
  }
  return r;
}

double embedding_activation_bytes(const ModelSpec& m, const ActivationShape& a) {
  if (!m.dropout) return 0.0;
  const double sbh = static_cast<double>(a.seq) / static_cast<double>(a.cp) * static_cast<double>(a.micro_batch) *
                     static_cast<double>(m.hidden);
  return sbh / (a.sequence_parallel ? static_cast<double>(a.tp) : 1.0);
}

double output_layer_activation_bytes(const ModelSpec& m, const ActivationShape& a) {
  const double sb = static_cast<double>(a.seq) / static_cast<double>(a.cp) * static_cast<double>(a.micro_batch);
  const double t = static_cast<double>(a.tp);
  const double A = static_cast<double>(a.bytes_per_element);
  // final-norm input + output-layer input (2 x A sbh, /t with SP), fp32 logits 4 s b V / t.
  const double hidden_part = 2.0 * A * sb * static_cast<double>(m.hidden) / (a.sequence_parallel ? t : 1.0);
  return hidden_part + 4.0 * sb * static_cast<double>(m.vocab) / t;
}

double loss_backward_working_set_bytes(const ModelSpec& m, const ActivationShape& a) {
  if (a.fused_cross_entropy) return 0.0;
  const double sb = static_cast<double>(a.seq) / static_cast<double>(a.cp) * static_cast<double>(a.micro_batch);
  return 2.0 * 4.0 * sb * static_cast<double>(m.vocab) / static_cast<double>(a.tp);
}

double offloaded_module_bytes(const ModelSpec& m, const ActivationShape& a) {
  if (a.offload_modules.empty() || !m.is_moe() || a.recompute == Recompute::full) return 0.0;
  if (a.recompute == Recompute::selective && a.modules.has(RecomputeModule::moe)) return 0.0;  // checkpointed experts
  const double A = static_cast<double>(a.bytes_per_element);
  const double h = static_cast<double>(m.hidden), t = static_cast<double>(a.tp);
  const double sbh = static_cast<double>(a.seq) / static_cast<double>(a.cp) * static_cast<double>(a.micro_batch) * h;
  const double per_f = sbh * static_cast<double>(m.ffn_hidden) / h / t;  // f per token, one MLP copy, per byte
  double out = 0.0;
  if (a.offload_modules.has(OffloadModule::expert_fc1)) out += a.moe_expert_copies * h * saved_input_bytes(a);
  if (a.offload_modules.has(OffloadModule::moe_act)) {  // the activation's input: fp8 under the fp8 activation cache
    out += per_f * static_cast<double>(m.top_k) * a.moe_load * (m.ffn_type == FfnType::swiglu ? 2.0 : 1.0) *
           (a.fp8_activation_cache ? 1.0 : A);
  }
  return out;
}

double recompute_working_set_bytes(const ModelSpec& m, const ActivationShape& a) {
  if (a.recompute == Recompute::none) return 0.0;
  ActivationShape full = a;
  full.recompute = Recompute::none;
  LayerActivationBytes l = layer_activation_bytes(m, full);
  if (a.recompute == Recompute::selective_op) return l.total - layer_activation_bytes(m, a).total;  // rebuilt at once
  if (a.recompute == Recompute::selective) return selective_bytes(module_bytes(m, a, l), a.modules).working_set;
  return l.total;  // full
}

}  // namespace parplan
