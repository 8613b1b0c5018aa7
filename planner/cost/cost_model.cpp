// The cost model: composes the cited formula modules into per-stage memory and step time (see cost_model.hpp).
#include "planner/cost/cost_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "planner/cost/activations.hpp"
#include "planner/cost/collectives.hpp"
#include "planner/cost/eager_elementwise.hpp"
#include "planner/cost/expert_comm.hpp"
#include "planner/cost/fp8.hpp"
#include "planner/spec/config.hpp"
#include "planner/cost/flops.hpp"
#include "planner/cost/gemm.hpp"
#include "planner/cost/layout.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/cost/model_states.hpp"
#include "planner/cost/pipeline.hpp"
#include "planner/cost/zero3.hpp"

namespace parplan {
namespace {
// Two stages with the same per-microbatch times; between two middle stages (neither holds the embedding or the
// output layer) that means the same layers, so the same parameters and DP tail too.
bool same_times(const StageMicrobatchTime& a, const StageMicrobatchTime& b) {
  return a.forward_s == b.forward_s && a.backward_input_s == b.backward_input_s &&
         a.backward_weight_s == b.backward_weight_s && a.p2p_forward_s == b.p2p_forward_s &&
         a.p2p_backward_s == b.p2p_backward_s;
}

double d(int64_t x) { return static_cast<double>(x); }
}  // namespace

ActivationShape activation_shape(const Plan& plan) {
  ActivationShape a;
  a.micro_batch = plan.parallel.micro_batch;
  a.seq = plan.seq_len();
  a.tp = plan.parallel.tp;
  a.cp = plan.parallel.cp;
  a.sequence_parallel = plan.parallel.sequence_parallel;
  a.recompute = plan.parallel.recompute;
  a.modules = plan.parallel.recompute_modules;
  a.offload_modules = plan.parallel.offload_modules;
  a.attention = plan.training.attention;
  a.bytes_per_element = dtype_bytes(plan.activation_dtype());
  a.fp8_saved_inputs = plan.training.precision == Precision::fp8 && plan.training.fp8_saved_inputs;
  a.fp8_activation_cache = plan.training.precision == Precision::fp8 && plan.training.fp8_activation_cache;
  a.fused_cross_entropy = plan.training.fused_cross_entropy;
  a.eager_elementwise = !plan.training.compiled_elementwise;
  if (plan.model.is_moe()) {
    const MoeTokenCopies c = moe_token_copies(plan);
    a.moe_load = moe_rank_load(plan.model, plan.parallel.ep);
    a.moe_tokens = c.tokens;
    a.moe_dispatched = c.dispatched;
    a.moe_expert_copies = c.expert;
  }
  return a;
}

namespace {

// Kernel launches per layer pass that are not GEMMs (norms, residuals, activation, dropout, rotary...).
constexpr double kMemoryBoundKernelsPerLayer = 10.0;
constexpr double kMoeRoutingKernelsPerLayer = 5.0;
// FlashAttention backward executes 2.5x the forward FLOPs (recomputes the scores; Dao 2023, FlashAttention-2 Sec. 3).
constexpr double kFlashBackwardFactor = 2.5;

// MLP parameters of one layer's local experts held by one GPU (split by the expert tp; a dense model's MLP is its
// one expert, split by tp).
double layer_expert_params(const Plan& plan, const ParamCounts& c) {
  const int64_t split = plan.model.is_moe() ? plan.parallel.expert_tp() : plan.parallel.tp;
  return d(c.mlp_per_expert) * d(plan.model.experts / plan.parallel.ep) / d(split);
}

// Parameters of one transformer layer held by one GPU: attention split by tp but for MLA's down-projections, the
// shared experts split by tp as a dense MLP, the local routed experts by the expert tp. A MoE model's leading dense
// layers are priced with dense_layer_plan().
double layer_params(const Plan& plan) {
  const ParamCounts c = count_params(plan.model);
  const double tp = d(plan.parallel.tp);
  return d(c.attention - c.qkv_replicated) / tp + d(c.qkv_replicated) + d(c.norms) + d(c.router) +
         d(c.shared_mlp) / tp + layer_expert_params(plan, c);
}

}  // namespace

int64_t chunk_buckets(int64_t buckets, int64_t chunks, int64_t c) { return buckets / chunks + (c < buckets % chunks ? 1 : 0); }

namespace {
// The DP link after a chunk's n buckets have left during its last backward [start, start + duration] (relative to the
// end of the stage's backward), queued behind the chunks before it (`link`: when the link is free; unchanged for a
// chunk without a bucket).
double queue_chunk_buckets(double link, double bucket_s, int64_t n, double start, double duration) {
  if (n == 0) return link;
  return std::max(std::max(link, start) + d(n) * bucket_s, start + duration + bucket_s);
}
constexpr double kLinkIdle = -1e300;
}  // namespace

double dp_reduction_tail_s(double bucket_s, int64_t buckets, double backward_s, int64_t chunks, int64_t pp) {
  const double b = backward_s / d(chunks);
  // Chunk c's last backward starts (c p + 1) b before the stage's backward ends (Megatron's interleaved order runs
  // the last p microbatches through chunk v-1, then v-2, ..., then 0); its buckets leave during it and queue on the one
  // DP link behind the previous chunk's. Chunk 0 always holds one, so the last bucket is never hidden.
  double link = kLinkIdle;
  for (int64_t c = chunks - 1; c >= 0; --c) {
    link = queue_chunk_buckets(link, bucket_s, chunk_buckets(buckets, chunks, c), -(d(c) * d(chunks > 1 ? pp : 1) + 1.0) * b, b);
  }
  return std::max(link, 0.0);
}

double dp_reduction_tail_s(double bucket_s, int64_t buckets, std::span<const ChunkWindow> windows) {
  // The chunks in the order their windows start (on a tie the lower chunk first).
  const auto chunks = static_cast<int64_t>(windows.size());
  std::vector<int64_t> order(static_cast<size_t>(chunks));
  for (int64_t c = 0; c < chunks; ++c) order[static_cast<size_t>(c)] = c;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return windows[static_cast<size_t>(a)].start_before_end > windows[static_cast<size_t>(b)].start_before_end;
  });
  double link = kLinkIdle;
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t c = order[static_cast<size_t>(k)];
    const ChunkWindow& w = windows[static_cast<size_t>(c)];
    link = queue_chunk_buckets(link, bucket_s, chunk_buckets(buckets, chunks, c), -w.start_before_end, w.duration);
  }
  return std::max(link, 0.0);
}

// Bytes of memory-bound traffic in one layer on one GPU (norms, residual adds, dropout, activation function, rotary,
// unfused softmax), forward and backward, counted pass by pass: a forward op reads its inputs and writes its output;
// its backward reads what the forward saved plus the incoming gradient and writes the input gradient. So LayerNorm,
// GeLU and softmax move 1.5x their forward bytes in backward (read x or y, read dy, write dx), SwiGLU 5/3x, while
// dropout (read dy and mask, write dx), rotary and the residual adds (the gradient accumulation add) move the same.
// Uncompiled (TrainingSpec::compiled_elementwise false): RMSNorm, rotary, SwiGLU and dropout + residual add as eager
// PyTorch runs them, kernel by kernel (eager_elementwise.hpp), with the launches they add.
LayerMemoryBytes layer_memory_bound_bytes(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& pc = plan.parallel;
  const double A = d(dtype_bytes(plan.activation_dtype()));
  const double T = d(pc.micro_batch) * d(plan.seq_len()) / d(pc.cp);
  const double Tn = pc.sequence_parallel ? T / d(pc.tp) : T;
  const double h = d(m.hidden), f = d(m.ffn_hidden) / d(pc.tp);
  // MoE: the routed experts' copies at the most-loaded rank's load (expert_comm.hpp moe_rank_load).
  const double routed = m.mlp_copies_per_token(moe_rank_load(m, pc.ep));
  const bool eager = !plan.training.compiled_elementwise;
  LayerMemoryBytes b;
  auto add = [&b](double fwd, double bwd) {
    b.elementwise_forward += fwd;
    b.elementwise_backward += bwd;
  };
  // `n` eager instances of `op` over `elements` elements in all, in place of `fused` fused ops.
  auto add_eager = [&](const EagerOp& op, double elements, int n, int fused) {
    add(elements * op.forward_bytes, elements * op.backward_bytes);
    const EagerLaunches l = eager_extra_launches(op, n, fused);
    b.eager_extra_forward_launches += l.forward;
    b.eager_extra_backward_launches += l.backward;
  };
  if (eager && m.norm == NormType::rmsnorm) {
    add_eager(eager_rmsnorm(A), 2.0 * Tn * h, 2, 2);
  } else {
    add(Tn * h * A * 2.0 * 2.0, Tn * h * A * 2.0 * 3.0);  // two norms: read+write; read x, dy + write dx
  }
  if (m.dropout && eager) {
    add_eager(eager_dropout_add(A), 2.0 * Tn * h, 2, 2);
  } else if (m.dropout) {
    // Two dropout + residual adds, fused into one kernel as in Megatron-LM's bias_dropout_add_fused_train: forward
    // reads x and the residual, writes the sum and the 1-byte mask; backward reads dy and the mask, writes dx, then
    // the residual-stream gradients are summed (2 reads + write).
    add(2.0 * (3.0 * A + 1.0) * Tn * h, 2.0 * (5.0 * A + 1.0) * Tn * h);
  } else {
    add(Tn * h * A * 2.0 * 3.0, Tn * h * A * 2.0 * 3.0);  // two residual adds: 2 reads + write, both ways
  }
  if (m.ffn_type == FfnType::swiglu && eager) {
    add_eager(eager_swiglu(A), T * f * routed, 1, 1);
  } else if (m.ffn_type == FfnType::swiglu) {
    add(3.0 * T * f * A * routed, 5.0 * T * f * A * routed);
  } else {
    add(2.0 * T * f * A * routed, 3.0 * T * f * A * routed);
  }
  if (m.position == PositionEmbedding::rotary) {
    // Queries and keys (and, as Megatron's fused kernel passes them, values); MLA: the rotary parts only, the keys'
    // one shared by all heads. Eager: queries and keys, one op each.
    const double rope_q = m.is_mla() ? d(m.heads * m.qk_rope_head_dim) / d(pc.tp) : d(m.q_dim()) / d(pc.tp);
    const double rope_k = m.is_mla() ? d(m.qk_rope_head_dim) : d(m.kv_dim()) / d(pc.tp);
    if (eager) {
      add_eager(eager_rotary(A), (rope_q + rope_k) * T, 2, 1);
    } else {
      const double width = m.is_mla() ? rope_q + rope_k : d(m.q_dim() + 2 * m.kv_dim()) / d(pc.tp);
      const double qk = 2.0 * T * width * A;
      add(qk, qk);
    }
  }
  const MoeRoutingBytes routing = moe_routing_bytes(plan);  // router, permute / unpermute
  b.moe_routing_forward = routing.forward;
  b.moe_routing_backward = routing.backward;
  add(routing.forward, routing.backward);
  const Fp8CastBytes cast = fp8_cast_bytes(plan, layer_params(plan));
  b.fp8_cast_forward = cast.forward;
  b.fp8_cast_backward = cast.backward;
  add(cast.forward, cast.backward);
  if (plan.training.attention == AttentionKernel::unfused) {
    const double scores = d(pc.micro_batch) * d(m.heads / pc.tp) * (d(plan.seq_len()) / d(pc.cp)) * d(plan.seq_len());
    b.scores_forward = scores * 2.0 * A;
    b.scores_backward = scores * 3.0 * A;
    if (m.dropout) {
      b.scores_forward += scores * (2.0 * A + 1.0);
      b.scores_backward += scores * (2.0 * A + 1.0);
    }
  }
  return b;
}

PlanParamCounts plan_param_counts(const Plan& plan) {
  PlanParamCounts p;
  p.counts = count_params(plan.model);
  p.layer_params = layer_params(plan);
  if (plan.model.has_dense_layers()) p.dense_layer_params = layer_params(dense_layer_plan(plan));
  return p;
}

double stage_params(const Plan& plan, int64_t stage) { return stage_params(plan, stage, plan_param_counts(plan)); }

double output_weight_params(const Plan& plan, const ParamCounts& c) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& pc = plan.parallel;
  if (!m.tied_embeddings) return d(c.lm_head) / d(pc.tp);
  // Megatron keeps a copy of the tied embedding on the last stage; with pp = 1 (or ZB-V, whose output layer is on the
  // first stage) it is the embedding itself.
  return pc.pp > 1 && pc.output_stage() != 0 ? d(m.vocab * m.hidden) / d(pc.tp) : 0.0;
}

double stage_params(const Plan& plan, int64_t stage, const PlanParamCounts& counts) {
  const int64_t dense = stage_dense_layers(plan, stage);
  double p = d(stage_layers(plan, stage) - dense) * counts.layer_params + d(dense) * counts.dense_layer_params;
  p += stage_non_layer_params(plan, stage, counts);
  if (stage == plan.parallel.output_stage()) p += mtp_stage_params(plan, counts);
  return p;
}

double stage_non_layer_params(const Plan& plan, int64_t stage, const PlanParamCounts& counts) {
  const ParallelConfig& pc = plan.parallel;
  const ParamCounts& c = counts.counts;
  double p = stage == 0 ? c.embedding_per_tp_rank(pc.tp) : 0.0;
  if (stage == pc.output_stage()) {
    p += d(c.final_norm) + output_weight_params(plan, c);
  }
  return p;
}

double mtp_stage_params(const Plan& plan, const PlanParamCounts& counts) {
  const ModelSpec& m = plan.model;
  if (m.mtp_layers <= 0) return 0.0;
  const bool dense = last_layer_dense(m);
  return d(m.mtp_layers) * ((dense ? counts.dense_layer_params : counts.layer_params) +
                            d(counts.counts.mtp_projection) / d(plan.parallel.tp));
}

// Megatron-LM's --gradient-accumulation-fusion makes the weight-gradient GEMM accumulate into the fp32 main_grad
// buffer (beta = 1: fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32 in
// LinearWithGradAccumulationAndAsyncCommunication), so accumulation costs nothing extra. Without it, autograd writes
// each microbatch's weight gradient and a hook adds it to the buffer: Megatron-LM 2021's local DDP
// (megatron/model/distributed.py _make_param_hook: param.main_grad.add_(param.grad.data), once per parameter and
// microbatch), which read the buffer, read the new gradient (activation dtype) and write the buffer. With ZeRO-2/3
// the gradient is reduce-scattered first and only this rank's 1/(dp cp) shard (1/F of its shard group with HSDP) is
// accumulated.
double grad_accumulation_bytes(const Plan& plan, double params) {
  if (plan.training.fused_grad_accumulation || params <= 0) return 0.0;
  const ParallelConfig& pc = plan.parallel;
  const double g = d(plan.training.grad_bytes());
  const double shard = pc.step_zero_stage() >= 2 ? d(pc.shard_group()) : 1.0;
  return params / shard * (2.0 * g + d(dtype_bytes(plan.activation_dtype())));
}

namespace {
// Time of that pass: its bytes at achieved HBM bandwidth plus one kernel launch per weight tensor; 0 when fused.
double grad_accumulation_s(const Plan& plan, double params, int tensors) {
  const double bytes = grad_accumulation_bytes(plan, params);
  return bytes > 0 ? memory_bound_time_s(plan.gpu, bytes) + tensors * plan.gpu.gemm.kernel_overhead_s : 0.0;
}
}  // namespace

double stage_expert_params(const Plan& plan, int64_t stage, const ParamCounts& c) {
  const ModelSpec& m = plan.model;
  // The MTP modules' blocks on the last stage hold experts when the model's last layer does.
  const int64_t mtp = stage == plan.parallel.output_stage() && m.is_moe() && !last_layer_dense(m) ? m.mtp_layers : 0;
  return d(stage_layers(plan, stage) - stage_dense_layers(plan, stage) + mtp) * layer_expert_params(plan, c);
}

double moe_expert_params(const Plan& plan, int64_t stage, const ParamCounts& c) {
  return plan.model.is_moe() ? stage_expert_params(plan, stage, c) : 0.0;
}

OptimizerStepBytes stage_optimizer_step_bytes(const Plan& plan, double stage_params, double expert_params) {
  const ParallelConfig& pc = plan.parallel;
  const ModelStateOptions o = model_state_options(plan);
  const OptimizerStepBytes dense = optimizer_step_bytes(stage_params - expert_params, pc.shard_group(), o);
  if (expert_params <= 0) return dense;
  const OptimizerStepBytes expert = optimizer_step_bytes(expert_params, expert_dp_size(pc), o);
  return {dense.states + expert.states, dense.grads + expert.grads, dense.weights + expert.weights};
}

double stage_owned_params(const Plan& plan, double stage_params, double expert_params) {
  const ParallelConfig& pc = plan.parallel;
  if (!pc.shards_optimizer()) return stage_params;
  return (stage_params - expert_params) / d(pc.shard_group()) + expert_params / d(expert_dp_size(pc));
}

OffloadStepTime stage_offload_step(const Plan& plan, double stage_params, double expert_params) {
  return offload_step_time(plan, stage_owned_params(plan, stage_params, expert_params));
}

double fsdp2_step_copies_s(const Plan& plan, double stage_params, double expert_params) {
  if (plan.parallel.step_zero_stage() >= 3) return 0.0;
  const Fsdp2CopyBytes fc = fsdp2_copy_bytes(plan, stage_params, expert_params);
  return memory_bound_time_s(plan.gpu, fc.gather + fc.reduce);
}

double optimizer_step_s(const Plan& plan, double stage_params, double expert_params) {
  const double copies = fsdp2_step_copies_s(plan, stage_params, expert_params);
  if (plan.parallel.offload.optimizer) return stage_offload_step(plan, stage_params, expert_params).total() + copies;
  return memory_bound_time_s(plan.gpu, stage_optimizer_step_bytes(plan, stage_params, expert_params).total()) + copies;
}

namespace {
// The dimensions of one layer's work for one microbatch on one GPU: T tokens of the microbatch's sequence shard,
// s_q = s / cp query positions per sequence, heads_local = heads / tp.
struct LayerDims {
  int64_t tp, cp, b, s, T;
  int64_t h, kv, f;  // kv: key + value widths per token (2 kv_heads head_dim unless MLA)
  int64_t heads_local, s_q;
};

LayerDims layer_dims(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& pc = plan.parallel;
  const int64_t tp = pc.tp, cp = pc.cp, b = pc.micro_batch, s = plan.seq_len();
  return {tp, cp, b, s, b * s / cp, m.hidden, m.k_width() + m.v_width(), m.ffn_hidden, m.heads / tp, s / cp};
}

// A layer's work in its forward and its backward pass.
struct PassTimes {
  double forward = 0, backward = 0;
};

// The layer's forward GEMMs (backward = dgrad + wgrad of the same shapes, but for the routed experts' grouped GEMMs,
// priced pass by pass): QKV and attention output, the MLP (MoE: the local experts' grouped GEMMs and the router), and
// the two column-parallel GEMMs (QKV and MLP up) whose input gradients run beside the sequence-parallel re-gather.
struct LayerGemms {
  double qkv = 0, proj = 0, column = 0;
  double shared = 0;  // a MoE layer's shared experts (0 without)
  double total = 0;   // every GEMM of the forward
  double dgrad = 0, wgrad = 0;  // every GEMM of the backward's input gradients, of its weight gradients
};

// The routed experts' grouped GEMMs of one layer (expert_gemms() shapes, grouped_gemm_time_s) in each pass: forward
// x W_up and a W_down; dgrad dY_up W_up (depth the up width) and dY W_down (depth h); wgrad dY_up^T x and dY^T a,
// each expert's [up x h] / [h x down_k] weight layout over its tokens (depth the tokens per expert), as the runtime
// issues them (runtime/lower.cpp).
struct ExpertPassTimes {
  double forward = 0, dgrad = 0, wgrad = 0;
};
ExpertPassTimes routed_expert_gemms(const Plan& plan, const ExpertGemms& e) {
  const GpuSpec& gpu = plan.gpu;
  const DType gd = plan.gemm_dtype();
  const int64_t h = plan.model.hidden, t = e.tokens_per_expert, g = e.local_experts;
  ExpertPassTimes p;
  p.forward = grouped_gemm_time_s(gpu, gd, t, e.up_width, h, g) + grouped_gemm_time_s(gpu, gd, t, h, e.down_k, g);
  p.dgrad = grouped_gemm_time_s(gpu, gd, t, h, e.up_width, g) + grouped_gemm_time_s(gpu, gd, t, e.down_k, h, g);
  p.wgrad = grouped_gemm_time_s(gpu, gd, e.up_width, h, t, g) + grouped_gemm_time_s(gpu, gd, h, e.down_k, t, g);
  return p;
}

// MLA's up-projections to the local heads: K and V from the kv latent, Q from the q latent (or the hidden state).
double mla_up_proj_gemms_s(const Plan& plan, const LayerDims& x) {
  const ModelSpec& m = plan.model;
  const DType gd = plan.gemm_dtype();
  return gemm_time_s(plan.gpu, gd, x.T, m.heads * (m.head_dim() + m.v_head_dim()) / x.tp, m.kv_lora_rank) +
         gemm_time_s(plan.gpu, gd, x.T, m.q_dim() / x.tp, m.q_lora_rank > 0 ? m.q_lora_rank : x.h);
}

// The projections to queries, keys and values. Standard attention: one GEMM, split over tp. MLA (DeepSeek-V2
// Sec. 2.1): the down-projections to the latents (and the shared rotary key), whole on every tp rank as Megatron-Core
// runs them, then the up-projections to the local heads.
double qkv_gemms_s(const Plan& plan, const LayerDims& x) {
  const ModelSpec& m = plan.model;
  const GpuSpec& gpu = plan.gpu;
  const DType gd = plan.gemm_dtype();
  const int64_t T = x.T, h = x.h, tp = x.tp;
  if (!m.is_mla()) return gemm_time_s(gpu, gd, T, (m.q_dim() + 2 * m.kv_dim()) / tp, h);
  const double down = gemm_time_s(gpu, gd, T, m.kv_lora_rank + m.qk_rope_head_dim, h) +
                      (m.q_lora_rank > 0 ? gemm_time_s(gpu, gd, T, m.q_lora_rank, h) : 0.0);
  return down + mla_up_proj_gemms_s(plan, x);
}

}  // namespace

ExpertGemms expert_gemms(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& pc = plan.parallel;
  const LayerDims x = layer_dims(plan);
  ExpertGemms e;
  if (!m.is_moe()) return e;
  const int64_t mats = m.ffn_type == FfnType::swiglu ? 2 : 1;
  e.shared_up_width = m.shared_experts * (mats * x.f / x.tp);
  e.shared_down_k = m.shared_experts * x.f / x.tp;
  e.local_experts = m.experts / pc.ep;
  const double load = moe_rank_load(m, pc.ep);  // the most-loaded rank's experts set the time (expert_comm.hpp)
  if (pc.etp > 0) {
    // Folding: a rank's T / tp tokens (SP) go to the experts of its ep group, gathered over its etp group; each
    // local expert runs its share of them on an etp-th of the FFN (Liu et al. 2025, MoE parallel folding).
    e.tokens_per_expert = std::max<int64_t>(1, std::llround(d(x.T / x.tp * pc.etp * m.top_k * pc.ep / m.experts) * load));
    e.up_width = mats * x.f / pc.etp;
    e.down_k = x.f / pc.etp;
  } else {
    e.tokens_per_expert = std::max<int64_t>(1, std::llround(d(x.T * m.top_k * pc.ep / m.experts) * load));
    e.up_width = mats * x.f / x.tp;
    e.down_k = x.f / x.tp;
  }
  return e;
}

// Micro-pipelined TP (cost_model.hpp; ParallelConfig::micropipeline_tp; PyTorch's async TP,
// torch/distributed/_symmetric_memory fused_all_gather_matmul / fused_matmul_reduce_scatter, as torchtitan runs it;
// the decomposition of Wang et al. 2023,
// "Overlap Communication with Dependent Computation via Decomposition in Large Deep Learning Models", ASPLOS):
// a collective of time `comm` over n = tp ranks and the GEMM `gemm` it feeds (or is fed by) run as n GEMM pieces of
// 1/n of the rows, each beside the transfer of one peer's chunk (comm / (n - 1)); the first piece (an all-gather's
// local chunk) or the last (a reduce-scatter's own) has no transfer beside it. What stays on the critical path: each
// of the n - 1 transfers past its piece, and the n - 1 extra GEMM launches.
double micropipelined_exposed_s(double comm, double gemm, int64_t n, double kernel_overhead_s) {
  if (n <= 1) return comm;
  const double piece = gemm / d(n) + kernel_overhead_s, step = comm / d(n - 1);
  return d(n - 1) * (kernel_overhead_s + std::max(0.0, step - piece));
}

namespace {

LayerGemms layer_gemms(const Plan& plan, const LayerDims& x) {
  const ModelSpec& m = plan.model;
  const GpuSpec& gpu = plan.gpu;
  const DType gd = plan.gemm_dtype(), ad = plan.activation_dtype();
  const int64_t T = x.T, h = x.h, f = x.f, tp = x.tp;
  LayerGemms g;
  g.qkv = qkv_gemms_s(plan, x);
  g.proj = gemm_time_s(gpu, gd, T, h, m.context_dim() / tp);
  double gemm = g.qkv + g.proj;
  const int64_t up_width = (m.ffn_type == FfnType::swiglu ? 2 : 1) * f / tp;
  g.column = g.qkv + (m.is_moe() ? 0.0 : gemm_time_s(gpu, gd, T, up_width, h));
  if (m.is_moe()) {
    const ExpertGemms e = expert_gemms(plan);
    // The shared experts (0 s without them: gemm_time_s of an empty shape), the routed ones, the router.
    g.shared = gemm_time_s(gpu, gd, T, e.shared_up_width, h) + gemm_time_s(gpu, gd, T, h, e.shared_down_k);
    gemm += g.shared;
    const ExpertPassTimes routed = routed_expert_gemms(plan, e);
    const double rest = gemm + gemm_time_s(gpu, ad, T, m.experts, h);  // the router's GEMM and the others
    g.total = rest + routed.forward;
    g.dgrad = rest + routed.dgrad;
    g.wgrad = rest + routed.wgrad;
    return g;
  }
  gemm += gemm_time_s(gpu, gd, T, up_width, h) + gemm_time_s(gpu, gd, T, h, f / tp);
  g.total = g.dgrad = g.wgrad = gemm;
  return g;
}

// The fused attention calls of one layer and microbatch on one GPU, over `units` (batch x local heads) attentions of
// a sequence of s tokens. Without context parallelism one call over the whole sequence. With cp ranks, ring
// attention over the load-balanced split (Megatron-Core / Transformer Engine and PyTorch's context_parallel: each
// rank holds chunks r and 2 cp - 1 - r of 2 cp, c = s / (2 cp) tokens each; Liu et al. 2023, arXiv:2310.01889, ring
// attention; Megatron-Core context parallelism docs): the first round attends its 2c queries to its own 2c keys,
// causal; each of the cp - 1 others attends 2c queries to one chunk of c keys (or c queries to 2c keys), unmasked:
// s^2 / (2 cp) scores in all, as one rank's share of the causal total. A model without the causal mask: cp rounds of
// s / cp queries over s / cp keys.
std::vector<AttentionCall> attention_calls(const Plan& plan, int64_t units, int64_t s) {
  const int64_t cp = plan.parallel.cp;
  if (cp <= 1) return {AttentionCall{units, s, s, plan.model.causal}};
  if (!plan.model.causal) return std::vector<AttentionCall>(static_cast<size_t>(cp), AttentionCall{units, s / cp, s / cp, false});
  const int64_t c = s / (2 * cp);
  std::vector<AttentionCall> calls{AttentionCall{units, 2 * c, 2 * c, true}};
  calls.insert(calls.end(), static_cast<size_t>(cp - 1), AttentionCall{units, 2 * c, c, false});
  return calls;
}

// Attention core: scores and context per local head, forward and backward.
PassTimes attention_core(const Plan& plan, const LayerDims& x) {
  const GpuSpec& gpu = plan.gpu;
  const DType ad = plan.activation_dtype();
  const ModelSpec& m = plan.model;
  const int64_t b = x.b, heads_local = x.heads_local, s_q = x.s_q, s = x.s;
  double attn_fwd, attn_bwd;
  const AttentionKernel kernel = plan.training.attention;
  if (kernel != AttentionKernel::unfused) {
    // Scores over the query/key head width, context over the value head width (both the head width unless MLA),
    // call by call (attention_calls: one, or a ring of cp), each at its shape's efficiency (attention_shape_factor).
    const double per_score = 2.0 * d(m.qk_head_dim() + m.v_head_dim());
    double shaped = 0;  // the calls' FLOPs, each times its shape factor
    const std::vector<AttentionCall> calls = attention_calls(plan, b * heads_local, s);
    for (const AttentionCall& c : calls) {
      const double flops = per_score * d(c.units) * d(c.q_tokens) * d(c.kv_tokens) * (c.causal ? 0.5 : 1.0);
      shaped += flops * attention_shape_factor(gpu.gemm, c);
    }
    // A windowed layer (cp 1 only: validate() refuses cp > 1 with a window): the kernel skips the key tiles outside
    // the band and runs the rest at the full call's fraction and shape factor (flops.hpp window_pair_fraction).
    shaped *= attention_pair_fraction(m, s);
    const double launches = d(calls.size()) * gpu.gemm.kernel_overhead_s;
    attn_fwd = shaped / (gpu.peak(ad) * gpu.gemm.attention_efficiency(kernel, false)) + launches;
    attn_bwd = kFlashBackwardFactor * shaped / (gpu.peak(ad) * gpu.gemm.attention_efficiency(kernel, true)) + launches;
  } else {
    attn_fwd = gemm_time_s(gpu, ad, s_q, s, m.qk_head_dim(), b * heads_local) +
               gemm_time_s(gpu, ad, s_q, m.v_head_dim(), s, b * heads_local);
    attn_bwd = 2.0 * attn_fwd;
  }
  return {attn_fwd, attn_bwd};
}

// The memory-bound ops (layer_memory_bound_bytes) at achieved HBM bandwidth plus their kernel launches; the backward
// launches twice as many kernels. Uncompiled element-wise ops add their own launches (eager_elementwise.hpp).
PassTimes memory_bound_ops(const Plan& plan) {
  const GpuSpec& gpu = plan.gpu;
  const LayerMemoryBytes mb_bytes = layer_memory_bound_bytes(plan);
  // MoE: five more (score function, top-k, aux loss, permute, unpermute; their backwards in the backward).
  const double launches =
      (kMemoryBoundKernelsPerLayer + (plan.model.is_moe() ? kMoeRoutingKernelsPerLayer : 0.0)) * gpu.gemm.kernel_overhead_s;
  // fp8: a cast kernel per GEMM operand (4 inputs, 4 weights) forward; backward a cast-transpose per output gradient
  // and a transpose per saved input and weight (fp8.hpp); rowwise quantizes each output gradient twice (16).
  const bool fp8 = plan.training.precision == Precision::fp8;
  const double bwd_casts = plan.training.fp8_recipe == Fp8Recipe::rowwise ? 16.0 : 12.0;
  const double cast_fwd = fp8 ? 8.0 * gpu.gemm.kernel_overhead_s : 0.0, cast_bwd = fp8 ? bwd_casts * gpu.gemm.kernel_overhead_s : 0.0;
  const double k = gpu.gemm.kernel_overhead_s;
  const double mem = memory_bound_time_s(gpu, mb_bytes.forward()) + launches + cast_fwd + mb_bytes.eager_extra_forward_launches * k;
  const double mem_bwd =
      memory_bound_time_s(gpu, mb_bytes.backward()) + 2.0 * launches + cast_bwd + mb_bytes.eager_extra_backward_launches * k;
  return {mem, mem_bwd};
}

// Megatron-Core selective recompute (--recompute-modules; what each module rebuilds: recompute_module_bytes,
// activations.hpp). core_attn: Korthikanti et al. 2022 Sec. 5, QK^T, softmax, softmax dropout and attention over V
// again; with the unfused kernel the softmax and dropout are memory-bound passes over the score matrix. layernorm and
// moe_act: memory-bound passes that read the kept input and write the rebuilt output (a norm reads what it writes,
// SwiGLU twice that, GeLU once). mla_up_proj: the up-projection GEMMs. mlp / moe / shared_experts: the module's
// forward GEMMs and its activation pass (mlp also its fused norm, moe its routing kernels; its all-to-alls and the
// MLP's TP collectives are charged in tp_comm / charge_exposed_comm).
double selective_recompute_s(const Plan& plan, const LayerDims& x, const LayerGemms& g, double attn_fwd) {
  using M = RecomputeModule;
  const GpuSpec& gpu = plan.gpu;
  const ModelSpec& m = plan.model;
  const RecomputeModules mods = plan.parallel.recompute_modules;
  double t = 0;
  if (mods.has(M::core_attn)) {
    double softmax_s = 0;
    if (plan.training.attention == AttentionKernel::unfused) {
      const double A = d(dtype_bytes(plan.activation_dtype()));
      const double scores = d(x.b) * d(x.heads_local) * d(x.s_q) * d(x.s);
      softmax_s = memory_bound_time_s(gpu, scores * (2.0 * A + (m.dropout ? 2.0 * A + 1.0 : 0.0))) +
                  2.0 * gpu.gemm.kernel_overhead_s;
    }
    t += attn_fwd + softmax_s;
  }
  if (mods.is_default()) return t;
  const ActivationShape sh = activation_shape(plan);
  const RecomputeModuleBytes b = recompute_module_bytes(m, sh);
  // The passes run in the activation dtype: a GEMM input stored as a 1-byte fp8 copy is written A-wide first.
  const double wide = sh.fp8_saved_inputs ? static_cast<double>(sh.bytes_per_element) : 1.0;
  const double act_moved = (m.ffn_type == FfnType::swiglu ? 3.0 : 2.0) * wide;  // bytes moved per stored byte written
  const double k = gpu.gemm.kernel_overhead_s;
  const auto pass = [&](double bytes) { return bytes > 0 ? memory_bound_time_s(gpu, bytes) + k : 0.0; };
  const bool moe = mods.has(M::moe) && m.is_moe(), shared = moe || mods.has(M::shared_experts);
  if (mods.has(M::layernorm)) t += pass(2.0 * wide * b.norm_qkv) + pass(2.0 * b.norm_mlp);
  if (mods.has(M::moe_act)) t += (moe ? 0.0 : pass(act_moved * b.act_routed)) + (shared ? 0.0 : pass(act_moved * b.act_shared));
  if (mods.has(M::mla_up_proj) && m.is_mla()) t += mla_up_proj_gemms_s(plan, x);
  const double mlp_gemms = g.total - g.qkv - g.proj;  // the MLP's, or the MoE layer's experts and router
  if (mods.has(M::mlp) && !m.is_moe()) t += mlp_gemms + pass(act_moved * b.act_dense) + pass(2.0 * wide * b.mlp_input);
  if (moe) {
    t += mlp_gemms + pass(act_moved * (b.act_routed + b.act_shared)) +
         memory_bound_time_s(gpu, layer_memory_bound_bytes(plan).moe_routing_forward) + kMoeRoutingKernelsPerLayer * k;
  } else if (shared && m.shared_experts > 0) {
    t += g.shared + pass(act_moved * b.act_shared);
  }
  return t;
}

// DeepSeek-V3's fp8 activation cache (activations.hpp ActivationShape::fp8_activation_cache): a MoE layer's expert
// copies rebuild their activation's output from its fp8-cached input before the backward, one memory-bound pass
// reading the input (2 f per copy for SwiGLU, 1 f otherwise) and writing the fp8 down-projection input (f), 1 byte
// each, over the copies the layer's activations count. 0 without the cache or in a dense layer.
double fp8_cache_recompute_s(const Plan& plan, const LayerDims& x) {
  const ActivationShape sh = activation_shape(plan);
  if (!sh.fp8_activation_cache || !plan.model.is_moe()) return 0;
  const double halves = plan.model.ffn_type == FfnType::swiglu ? 2.0 : 1.0;
  const double bytes = (halves + 1.0) * d(x.T) * d(x.f) / d(x.tp) * plan.model.mlp_copies_per_token(sh.moe_load);
  return memory_bound_time_s(plan.gpu, bytes) + plan.gpu.gemm.kernel_overhead_s;
}

// The recomputed forward work of one layer, given its forward_s: none, the selective modules' (selective), every
// second matmul and the memory-bound ops (selective_op) or the whole forward (full); with the fp8 activation cache,
// its activation pass (under none or selective: a module that reruns the experts finds no activation output stored).
double recompute_s(const Plan& plan, const LayerDims& x, const LayerGemms& g, const LayerCost& lc, double attn_fwd) {
  switch (plan.parallel.recompute) {
    case Recompute::none:
      return fp8_cache_recompute_s(plan, x);
    case Recompute::selective:
      return selective_recompute_s(plan, x, g, attn_fwd) + fp8_cache_recompute_s(plan, x);
    case Recompute::selective_op: {
      // torchtitan's per-op policy (activations.hpp): the forward's memory-bound ops and every second matmul run
      // again; the attention kernel and the other matmuls return their kept outputs, and the last matmul, whose
      // output the backward does not read, is not rerun. Memory-bound forward = forward - GEMMs - attention core.
      double gemms = 0;
      for (const LayerMatmul& g : selective_op_matmuls(plan.model).rerun) {
        gemms += gemm_time_s(plan.gpu, plan.gemm_dtype(), x.T, g.column_parallel ? g.n / x.tp : g.n,
                             g.column_parallel ? g.k : g.k / x.tp);
      }
      return gemms + (lc.forward_s - lc.gemm_forward_s - lc.attention_forward_s);
    }
    case Recompute::full:
      return lc.forward_s;
  }
  return 0;
}

// One layer pass's TP collectives: the blocking all-gathers (SP) and the all-reduces / reduce-scatters that Megatron
// can overlap in backward.
struct TpCollectives {
  double gather = 0, reduce = 0;
};

// The TP collectives of one pass: all-gathers (with sequence parallelism) and reduce-scatters (SP) or all-reduces.
struct TpPassCounts {
  double gathers = 0, reduces = 0;
};
struct TpCollectiveCounts {
  TpPassCounts forward, backward, recompute;
};
// The forward's two all-reduces, or with SP two all-gathers and two reduce-scatters; the backward's as many plus, with
// SP, the two re-gathers of the column-parallel GEMMs' input; the recomputed forward's (full recompute: all of the
// forward's; a recomputed dense MLP under selective recompute: its two).
TpCollectiveCounts tp_collective_counts(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  const bool sp = pc.sequence_parallel;
  const TpPassCounts forward = {sp ? 2.0 : 0.0, 2.0};
  const bool mlp_rerun = pc.recompute == Recompute::selective && pc.recompute_modules.has(RecomputeModule::mlp) &&
                         !plan.model.is_moe();
  const double rerun = pc.recompute == Recompute::full ? 1.0 : (mlp_rerun ? 0.5 : 0.0);
  return {forward, {forward.gathers + (sp ? 2.0 : 0.0), forward.reduces},
          {rerun * forward.gathers, rerun * forward.reduces}};
}

// The copies PyTorch's functional collectives add around each sequence-parallel TP collective when the sequence is not
// the tensor's dim 0 (ParallelConfig::tp_collective_copies, torchtitan's DTensor TP on [batch, seq, hidden]):
// all_gather_tensor cats the ranks' chunks of the gathered tensor along the gather dim, reduce_scatter_tensor cats
// its input's chunks into dim-0 order first (torch/distributed/_functional_collectives.py). Each reads and writes the
// whole gathered tensor, 2 x its bytes (an all-gather's tp_gather_bytes, a reduce-scatter's tp_bytes), on the compute
// stream. Bytes per pass; zeros without the copies.
struct TpCopyBytes {
  double forward = 0, backward = 0, recompute = 0;
};
TpCopyBytes tp_copy_bytes(const Plan& plan, const LayerCost& lc) {
  if (!plan.parallel.tp_collective_copies || plan.parallel.tp <= 1) return {};
  const TpCollectiveCounts n = tp_collective_counts(plan);
  auto bytes = [&](const TpPassCounts& c) { return 2.0 * (c.gathers * lc.tp_gather_bytes + c.reduces * lc.tp_bytes); };
  return {bytes(n.forward), bytes(n.backward), bytes(n.recompute)};
}

// Tensor parallel: 2 all-reduces per pass, or 2 all-gathers + 2 reduce-scatters with sequence parallelism; sets the
// layer's tp_bytes and tp_comm_*_s.
TpCollectives tp_comm(const Plan& plan, const LayerDims& x, LayerCost& lc) {
  const ParallelConfig& pc = plan.parallel;
  const int64_t tp = x.tp;
  const double A = d(dtype_bytes(plan.activation_dtype()));
  lc.tp_bytes = A * d(x.T) * d(x.h);
  // fp8 TP all-gathers (TrainingSpec::fp8_tp_gather) move one byte per element.
  lc.tp_gather_bytes = plan.training.fp8_tp_gather ? d(x.T) * d(x.h) : lc.tp_bytes;
  const LinkSpec& tpl = group_link(plan, GroupKind::tp);
  const bool sp = pc.sequence_parallel;
  // Per layer and pass: two collectives that block (SP: the all-gathers before the column-parallel GEMMs in forward,
  // of the output gradients before the row-parallel GEMMs in backward; else none in backward) and two that Megatron
  // can overlap in backward (the input-gradient reduce-scatter / all-reduce of the column-parallel GEMMs).
  const double tp_gather = sp ? 2.0 * collective_time_s(Collective::all_gather, lc.tp_gather_bytes, tp, tpl) : 0.0;
  const double tp_reduce = 2.0 * collective_time_s(sp ? Collective::reduce_scatter : Collective::all_reduce, lc.tp_bytes, tp, tpl);
  const double tp_pass = tp_gather + tp_reduce;
  // Sequence parallelism keeps only the sharded input of the two column-parallel GEMMs, so the backward all-gathers
  // it again for their weight gradients (Megatron-LM LinearWithGradAccumulationAndAsyncCommunication.backward, Korthikanti
  // et al. 2022 Sec. 4.2.3). Megatron launches each re-gather asynchronously beside the GEMM that computes the input
  // gradient, so only what outlasts those GEMMs is exposed. Full recompute repeats the forward's collectives; a
  // recomputed dense MLP (selective, mlp) its two (tp_collective_counts).
  const TpCollectiveCounts n = tp_collective_counts(plan);
  lc.tp_comm_forward_s = tp_pass;
  lc.tp_comm_backward_s = tp_pass + tp_gather;
  lc.tp_comm_recompute_s = tp_pass * n.recompute.reduces / n.forward.reduces;
  return {tp_gather, tp_reduce};
}

// Context parallel: ring attention, (cp-1) steps each passing this rank's K and V chunk; backward twice that.
void cp_comm(const Plan& plan, const LayerDims& x, LayerCost& lc) {
  const double A = d(dtype_bytes(plan.activation_dtype()));
  lc.cp_bytes = A * d(x.b) * d(x.s_q) * d(x.kv) / d(x.tp);
  const double cp_fwd =
      d(x.cp - 1) * collective_time_s(Collective::send_recv, lc.cp_bytes, 2, group_link(plan, GroupKind::cp));
  lc.cp_comm_forward_s = x.cp > 1 ? cp_fwd : 0.0;
  lc.cp_comm_backward_s = 2.0 * lc.cp_comm_forward_s;
}

// Expert parallel: dispatch + combine of the routed tokens in each pass (expert_comm.hpp).
void ep_comm(const Plan& plan, LayerCost& lc) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& pc = plan.parallel;
  if (!(m.is_moe() && pc.ep > 1)) return;
  const ExpertA2A a2a = layer_expert_a2a(plan);
  lc.ep_bytes = a2a.copies_bytes;
  lc.ep_comm_forward_s = 2.0 * a2a.time_s;
  lc.ep_comm_backward_s = 2.0 * a2a.time_s;
}

// A ZeRO-3 collective of one layer of `params` parameters (`experts` of them its local experts), `bytes_per_param`
// each: the experts over the expert-data-parallel group that shards them (none when that is 1), the rest over dp cp,
// one after the other on the link (as dp_cost).
double zero3_collective_s(const Plan& plan, Collective c, double bytes_per_param, double params, double experts) {
  const ParallelConfig& pc = plan.parallel;
  double t =
      collective_time_s(c, bytes_per_param * (params - experts), pc.shard_group(), group_link(plan, GroupKind::dp_cp));
  if (experts > 0) {
    t += collective_time_s(c, bytes_per_param * experts, expert_dp_size(pc), expert_dp_link(plan));
  }
  return t;
}

// What of `comm` stays on the critical path: with overlap, what outlasts the `behind` compute it runs beside.
double exposed_s(double comm, double behind, bool overlap) { return overlap ? std::max(0.0, comm - behind) : comm; }

// One pass's four sequence-parallel collectives, each micro-pipelined with its GEMM (forward: the all-gathers before
// QKV and the MLP's up projection, the reduce-scatters after the attention output and the MLP's down projection;
// backward: the same pairs in the input-gradient GEMMs, of the same shapes). tc: the pass's two all-gathers and two
// reduce-scatters.
double micropipelined_pass_s(const Plan& plan, const LayerGemms& g, const TpCollectives& tc) {
  const int64_t n = plan.parallel.tp;
  const double ko = plan.gpu.gemm.kernel_overhead_s;
  const double up = g.column - g.qkv, down = g.total - g.column - g.proj;
  return micropipelined_exposed_s(tc.gather / 2, g.qkv, n, ko) + micropipelined_exposed_s(tc.gather / 2, up, n, ko) +
         micropipelined_exposed_s(tc.reduce / 2, g.proj, n, ko) + micropipelined_exposed_s(tc.reduce / 2, down, n, ko);
}

// The backward's exposed TP communication.
double tp_exposed_backward(const ParallelConfig& pc, const LayerCost& lc, const LayerGemms& g,
                           const TpCollectives& tc) {
  // Backward without --overlap-tp, as Megatron-LM runs it: the input-gradient all-reduce (reduce-scatter with SP) of
  // the two column-parallel GEMMs is launched asynchronously beside their weight-gradient GEMMs (async
  // tensor-model-parallel all-reduce), the SP re-gathers beside their input-gradient GEMMs; only the all-gathers of
  // the output gradients before the two row-parallel GEMMs (SP) block.
  // Without the asynchronous collectives (async_tp_backward false: Megatron-LM before them, Narayanan et al. 2021
  // Fig. 5, whose f operator all-reduces in backward inside the autograd graph) every backward collective blocks.
  const double regather = tc.gather;
  return pc.overlap_tp_comm      ? exposed_s(lc.tp_comm_backward_s, 2.0 * g.total, true)
         : !pc.async_tp_backward ? lc.tp_comm_backward_s
                                 : tc.gather + std::max(0.0, tc.reduce - g.column) +
                                       std::max(0.0, regather - g.column);
}

// Exposed ZeRO-3 gathers of a layer gathered one linear at a time, the next one prefetched (planner/cost/zero3.hpp):
// the forward's stalls, and the rest of the backward phase's. Each linear's compute runs from its start to the next
// linear's: attention core after QKV in forward, before QKV in backward (so after the attention output in backward
// order); the memory-bound work is spread evenly. In the backward (with full recompute: after the layer's recomputed
// forward, which gathers again) each linear's gradient reduce-scatter follows it on the link when the reduction
// overlaps the backward.
PassTimes zero3_linear_exposed(const Plan& plan, const LayerCost& lc, const LayerGemms& gm, const PassTimes& attn,
                               const PassTimes& mem, double layer_experts) {
  const ParallelConfig& pc = plan.parallel;
  const bool full = pc.recompute == Recompute::full;
  const auto share = zero3_linear_shares(plan);
  const double g_mlp = gm.total - gm.qkv - gm.proj;  // MLP up + down (+ MoE router), split by parameter share
  const double mlp_share = share[2] + share[3];
  const std::array<double, kZero3Linears> g = {gm.qkv, gm.proj, g_mlp * share[2] / mlp_share,
                                               g_mlp * share[3] / mlp_share};
  const double ga = lc.grad_accumulation_s / kZero3Linears;
  const double reduce = pc.overlap_dp_comm ? zero3_collective_s(plan, Collective::reduce_scatter,
                                                                d(plan.training.grad_bytes()), lc.params, layer_experts)
                                           : 0.0;
  std::array<Zero3Step, kZero3Linears> fwd{};
  std::vector<Zero3Step> bwd;
  double fwd_compute = 0, bwd_compute = 0;
  for (size_t k = 0; k < share.size(); ++k) {
    fwd[k] = {g[k] + (k == 0 ? attn.forward : 0.0) + mem.forward / kZero3Linears, share[k] * lc.zero3_gather_s, 0.0};
    fwd_compute += fwd[k].compute_s;
  }
  if (full) bwd.assign(fwd.begin(), fwd.end());
  for (size_t k = share.size(); k-- > 0;) {
    const double extra = k == 1 ? attn.backward + (full ? 0.0 : lc.recompute_s) : 0.0;
    bwd.push_back({2.0 * g[k] + ga + extra + mem.backward / kZero3Linears, share[k] * lc.zero3_gather_s,
                   share[k] * reduce});
  }
  for (const Zero3Step& st : bwd) bwd_compute += st.compute_s;
  const double z_f = std::max(0.0, zero3_prefetch_layer_s(fwd) - fwd_compute);
  // The recomputed forward's own stalls are the forward's; the rest of the backward phase's is the backward's.
  const double z_phase = std::max(0.0, zero3_prefetch_layer_s(bwd) - bwd_compute);
  return {z_f, std::max(0.0, z_phase - (full ? z_f : 0.0))};
}

// Exposed ZeRO-3 gathers of one layer per pass: whole-layer units hide behind the pass, linears as above.
PassTimes zero3_exposed(const Plan& plan, const LayerCost& lc, const LayerGemms& g, const PassTimes& attn,
                        const PassTimes& mem, double layer_experts) {
  const ParallelConfig& pc = plan.parallel;
  if (pc.step_zero_stage() >= 3 && pc.zero3_gather_unit == Zero3GatherUnit::linear) {
    return zero3_linear_exposed(plan, lc, g, attn, mem, layer_experts);
  }
  return {exposed_s(lc.zero3_gather_s, lc.forward_s, true),
          exposed_s(lc.zero3_gather_s, lc.backward_input_s + lc.backward_weight_s, true)};
}

// What stays on the critical path after the configured overlaps, per pass and per kind (LayerCost::exposed_*).
void charge_exposed_comm(const Plan& plan, const LayerGemms& g, const PassTimes& attn, const TpCollectives& tc,
                         const PassTimes& z, LayerCost& lc) {
  const ParallelConfig& pc = plan.parallel;
  const double tp_piped = pc.micropipeline_tp ? micropipelined_pass_s(plan, g, tc) : 0.0;
  const double tp_f = pc.micropipeline_tp ? tp_piped : exposed_s(lc.tp_comm_forward_s, g.total, pc.overlap_tp_comm);
  // Micro-pipelined, the backward splits the same four pairs (input-gradient GEMMs of the forward's shapes); its SP
  // re-gathers block as without it.
  const double tp_b = pc.micropipeline_tp ? tp_piped + tc.gather : tp_exposed_backward(pc, lc, g, tc);
  // A recomputed forward reruns the forward's collectives (all, or the MLP's: tp_collective_counts' share).
  const double tp_r = pc.micropipeline_tp
                          ? (lc.tp_comm_forward_s > 0 ? tp_piped * lc.tp_comm_recompute_s / lc.tp_comm_forward_s : 0.0)
                          : exposed_s(lc.tp_comm_recompute_s, g.total, pc.overlap_tp_comm);
  const double cp_f = exposed_s(lc.cp_comm_forward_s, attn.forward, pc.overlap_cp_comm);
  const double cp_b = exposed_s(lc.cp_comm_backward_s, attn.backward, pc.overlap_cp_comm);
  const bool full = pc.recompute == Recompute::full;
  const double z_f = z.forward, z_b = z.backward;
  // MoE all-to-alls overlapped with another microbatch's pass (expert_comm.hpp ep_overlap_exposed_s): a forward's
  // behind the other's backward GEMMs and attention core, a backward's behind the other's forward ones.
  const EpOverlap ep = ep_overlap(plan);
  const double ep_f = ep_overlap_exposed_s(ep, lc.ep_comm_forward_s, g.total * 2.0 + attn.backward);
  const double ep_b = ep_overlap_exposed_s(ep, lc.ep_comm_backward_s, g.total + attn.forward);
  lc.exposed_forward_comm_s = tp_f + cp_f + ep_f + z_f;
  lc.exposed_backward_comm_s = tp_b + cp_b + ep_b + z_b;
  // A recomputed MoE layer (selective, moe) runs its forward all-to-alls again.
  const bool ep_again = full || (pc.recompute == Recompute::selective && pc.recompute_modules.has(RecomputeModule::moe));
  const double ep_r = ep_again ? lc.ep_comm_forward_s : 0.0;
  // A recomputed forward gathers its ZeRO-3 parameters again only per submodule (recompute_regathers, zero3.hpp).
  const double z_r = full && recompute_regathers(pc) ? z_f : 0.0;
  lc.exposed_recompute_comm_s = tp_r + (full ? cp_f + ep_r + z_r : ep_r);
  lc.exposed_tp_s = tp_f + tp_b + tp_r;
  lc.exposed_cp_s = cp_f + cp_b + (full ? cp_f : 0.0);
  lc.exposed_ep_s = ep_f + ep_b + ep_r;
  lc.exposed_zero3_s = z_f + z_b + z_r;
}
}  // namespace

namespace {
// Activation offload (offload.hpp): the layer's stored activations go down while the next layer's forward runs and
// come back while the next layer's backward runs (its input-gradient pass and recompute; with the zero-bubble
// schedule the weight pass runs apart, so it hides nothing). What outlasts them is exposed in that pass. The link is
// full duplex: the copies down share it with nothing in the forward; the copies up share its host-to-GPU direction
// with the backward's fetch of offloaded ZeRO-3 parameters, which comes off the time they hide behind.
// Fine-grained activation offloading (offload_modules) copies only the modules' bytes (offloaded_module_bytes), with
// the same rule: Megatron-Core's offload manager copies them on its own streams, as the layer-level offload does.
void charge_activation_offload(const Plan& plan, LayerCost& lc) {
  const ActivationShape a = activation_shape(plan);
  const double bytes = plan.parallel.offload.activations ? layer_activation_bytes(plan.model, a).total
                                                         : offloaded_module_bytes(plan.model, a);
  if (!(bytes > 0)) return;
  const bool split_w = splits_backward(plan.parallel.schedule);
  const double backward =
      std::max(0.0, lc.backward_input_s + lc.recompute_s + (split_w ? 0.0 : lc.backward_weight_s) - lc.offload_fetch_s);
  const ActivationOffloadTime t = activation_offload_time(plan.cluster, bytes, lc.forward_s, backward);
  lc.activation_copy_s = t.copy_s;
  lc.exposed_offload_s = t.exposed_forward_s + t.exposed_backward_s;
  lc.exposed_offload_forward_s = t.exposed_forward_s;
  lc.exposed_forward_comm_s += t.exposed_forward_s;
  lc.exposed_backward_comm_s += t.exposed_backward_s;
}
}  // namespace

namespace {
// Every field of LayerCost, so that a field added there and not here fails to compile.
constexpr double LayerCost::*kLayerCostFields[] = {
    &LayerCost::forward_s,          &LayerCost::backward_input_s,     &LayerCost::backward_weight_s,
    &LayerCost::grad_accumulation_s, &LayerCost::recompute_s,         &LayerCost::tp_comm_forward_s,
    &LayerCost::tp_comm_backward_s, &LayerCost::tp_comm_recompute_s, &LayerCost::cp_comm_forward_s,
    &LayerCost::cp_comm_backward_s, &LayerCost::ep_comm_forward_s,   &LayerCost::ep_comm_backward_s,
    &LayerCost::zero3_gather_s,     &LayerCost::tp_bytes,            &LayerCost::tp_gather_bytes,
    &LayerCost::cp_bytes,           &LayerCost::ep_bytes,            &LayerCost::params,
    &LayerCost::gemm_forward_s,
    &LayerCost::attention_forward_s, &LayerCost::exposed_forward_comm_s, &LayerCost::exposed_backward_comm_s,
    &LayerCost::exposed_recompute_comm_s, &LayerCost::exposed_tp_s, &LayerCost::exposed_cp_s,
    &LayerCost::exposed_ep_s,       &LayerCost::exposed_zero3_s,      &LayerCost::offload_fetch_s,
    &LayerCost::activation_copy_s,  &LayerCost::exposed_offload_s,   &LayerCost::exposed_offload_forward_s};
static_assert(sizeof(LayerCost) == std::size(kLayerCostFields) * sizeof(double), "list every LayerCost field");

// sum_i w_i c_i over every field.
LayerCost weighted_layer_cost(std::initializer_list<std::pair<double, const LayerCost*>> parts) {
  LayerCost out;
  for (double LayerCost::*f : kLayerCostFields) {
    double x = 0;
    for (const auto& [w, c] : parts) x += w * c->*f;
    out.*f = x;
  }
  return out;
}
}  // namespace

LayerCost mean_layer_cost(const LayerCost& lc, const LayerCost& dense_lc, int64_t layers, int64_t dense) {
  if (layers <= 0 || dense <= 0) return lc;
  const double w = d(dense) / d(layers);
  return weighted_layer_cost({{1.0 - w, &lc}, {w, &dense_lc}});
}

namespace {
// stage_layer_cost() of a model mixing windowed and full-attention layers: each of the stage's layers at its kind's
// cost (dense or not, windowed or full, recomputed or kept when recompute_layers leaves some out).
LayerCost mixed_attention_stage_cost(const Plan& plan, int64_t stage, const LayerCosts& c) {
  const int64_t layers = stage_layers(plan, stage), dense = stage_dense_layers(plan, stage);
  if (layers <= 0) return c.layer;
  const FullAttentionLayers f = stage_full_attention_layers(plan, stage);
  // Without recompute_layers every layer is priced as c.layer / c.dense (its recompute as the plan says).
  const RecomputedLayers r =
      plan.parallel.recompute_layers > 0 ? stage_recomputed_layers(plan, stage) : RecomputedLayers{layers, dense, f};
  const double n = d(layers);
  const int64_t r_moe = r.layers - r.dense, r_full_moe = r.full.layers - r.full.dense;
  const int64_t kept_moe = layers - dense - r_moe, kept_full_moe = f.layers - f.dense - r_full_moe;
  return weighted_layer_cost({{d(r_moe - r_full_moe) / n, &c.layer},
                              {d(r.dense - r.full.dense) / n, &c.dense},
                              {d(kept_moe - kept_full_moe) / n, &c.kept},
                              {d(dense - r.dense - (f.dense - r.full.dense)) / n, &c.dense_kept},
                              {d(r_full_moe) / n, &c.full},
                              {d(r.full.dense) / n, &c.dense_full},
                              {d(kept_full_moe) / n, &c.kept_full},
                              {d(f.dense - r.full.dense) / n, &c.dense_kept_full}});
}
}  // namespace

LayerCost stage_layer_cost(const Plan& plan, int64_t stage, const LayerCosts& c) {
  if (plan.model.mixes_attention()) return mixed_attention_stage_cost(plan, stage, c);
  const int64_t layers = stage_layers(plan, stage), dense = stage_dense_layers(plan, stage);
  if (plan.parallel.recompute_layers <= 0 || layers <= 0) return mean_layer_cost(c.layer, c.dense, layers, dense);
  // Each layer at its own cost: recomputed or kept, dense or not (the first recompute_layers of each chunk).
  const RecomputedLayers r = stage_recomputed_layers(plan, stage);
  const double n = d(layers);
  return weighted_layer_cost({{d(r.layers - r.dense) / n, &c.layer},
                              {d(r.dense) / n, &c.dense},
                              {d(layers - dense - (r.layers - r.dense)) / n, &c.kept},
                              {d(dense - r.dense) / n, &c.dense_kept}});
}

LayerCost layer_cost(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const LayerDims x = layer_dims(plan);
  LayerCost lc;
  // Compute: GEMMs, attention core and memory-bound ops in each pass; the backward's GEMMs repeat the forward's
  // shapes, but for the routed experts' (layer_gemms).
  const LayerGemms g = layer_gemms(plan, x);
  const PassTimes attn = attention_core(plan, x);
  const PassTimes mem = memory_bound_ops(plan);
  lc.gemm_forward_s = g.total;
  lc.attention_forward_s = attn.forward;
  lc.forward_s = g.total + attn.forward + mem.forward;
  lc.backward_input_s = g.dgrad + attn.backward + mem.backward;
  lc.params = layer_params(plan);
  // One add per weight matrix (QKV, attention out, MLP up, MLP down); biases and norms ride in the same bytes.
  lc.grad_accumulation_s = grad_accumulation_s(plan, lc.params, 4);
  lc.backward_weight_s = g.wgrad + lc.grad_accumulation_s;
  lc.recompute_s = recompute_s(plan, x, g, lc, attn.forward);
  // FSDP2's copies around each gather and reduce-scatter (zero3.hpp fsdp2_copy_bytes), on the compute stream: the
  // forward's all-gather, the backward's all-gather (the parameters were resharded after the forward; a recomputed
  // forward finds them gathered) and reduce-scatter. With pipelining they run once a step (fsdp2_step_copies_s).
  const double layer_experts = m.is_moe() ? layer_expert_params(plan, count_params(m)) : 0.0;
  if (plan.parallel.step_zero_stage() >= 3) {
    const Fsdp2CopyBytes fc = fsdp2_copy_bytes(plan, lc.params, layer_experts);
    lc.forward_s += memory_bound_time_s(plan.gpu, fc.gather);
    lc.backward_input_s += memory_bound_time_s(plan.gpu, fc.gather + fc.reduce);
  }

  // Communication of each parallel dimension; the copies around the TP collectives (tp_copy_bytes) on the compute
  // stream.
  const TpCollectives tc = tp_comm(plan, x, lc);
  const TpCopyBytes tp_copies = tp_copy_bytes(plan, lc);
  lc.forward_s += memory_bound_time_s(plan.gpu, tp_copies.forward);
  lc.backward_input_s += memory_bound_time_s(plan.gpu, tp_copies.backward);
  lc.recompute_s += memory_bound_time_s(plan.gpu, tp_copies.recompute);
  cp_comm(plan, x, lc);
  ep_comm(plan, lc);
  if (plan.parallel.step_zero_stage() >= 3) {
    lc.offload_fetch_s = offload_param_fetch_s(plan, stage_owned_params(plan, lc.params, layer_experts));
    lc.zero3_gather_s =
        zero3_collective_s(plan, Collective::all_gather, gathered_param_bytes(plan), lc.params, layer_experts) + lc.offload_fetch_s;
  }

  charge_exposed_comm(plan, g, attn, tc, zero3_exposed(plan, lc, g, attn, mem, layer_experts), lc);
  if (plan.parallel.offloads_activations()) charge_activation_offload(plan, lc);
  return lc;
}

namespace {
// layer_costs() of one attention kind (all of a model's layers alike in their attention).
LayerCosts layer_kind_costs(const Plan& plan) {
  LayerCosts c;
  c.layer = layer_cost(plan);
  if (plan.model.has_dense_layers()) c.dense = layer_cost(dense_layer_plan(plan));
  if (plan.parallel.recompute_layers > 0) {  // the layers full recompute leaves out, priced as recompute none
    Plan kept = plan;
    kept.parallel.recompute = Recompute::none;
    kept.parallel.recompute_layers = 0;
    c.kept = layer_cost(kept);
    if (plan.model.has_dense_layers()) c.dense_kept = layer_cost(dense_layer_plan(kept));
  }
  return c;
}
}  // namespace

LayerCosts layer_costs(const Plan& plan) {
  if (!plan.model.mixes_attention()) return layer_kind_costs(plan);
  LayerCosts c = layer_kind_costs(attention_layer_plan(plan, false));
  const LayerCosts full = layer_kind_costs(attention_layer_plan(plan, true));
  c.full = full.layer;
  c.dense_full = full.dense;
  c.kept_full = full.kept;
  c.dense_kept_full = full.dense_kept;
  return c;
}

EdgeBytes edge_bytes(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& pc = plan.parallel;
  const int64_t T = pc.micro_batch * plan.seq_len() / pc.cp;
  const double A = d(dtype_bytes(plan.activation_dtype()));
  const double Tn = pc.sequence_parallel ? d(T) / d(pc.tp) : d(T);
  EdgeBytes b;
  b.embedding_forward = 2.0 * Tn * d(m.hidden) * A;
  b.embedding_backward = 2.0 * Tn * d(m.hidden) * 4.0;
  b.final_norm = 2.0 * Tn * d(m.hidden) * A;
  const double logits = d(T) * d(m.vocab) / d(pc.tp);
  b.cross_entropy = (plan.training.fused_cross_entropy ? 12.0 : 22.0) * logits;
  b.cross_entropy_backward = (plan.training.fused_cross_entropy ? 12.0 : 26.0) * logits;
  if (pc.tp > 1) {
    b.ce_all_reduce = 4.0 * d(T);
    if (pc.sequence_parallel) b.sp_gather = A * d(T) * d(m.hidden);
  }
  return b;
}

namespace {
// The multi-token prediction modules (DeepSeek-V3 Sec. 2.2) on the last stage, per microbatch: each embeds the
// tokens shifted by its depth, normalises that and the previous depth's hidden state, projects the two (2h -> h,
// column-parallel), runs one block of the model's last layer kind and a second output head (the shared weights)
// with its cross entropy. Set before the main head's TP collectives and gradient accumulation are added.
void add_mtp_cost(const Plan& plan, const EdgeBytes& b, EdgeCost& e) {
  const ModelSpec& m = plan.model;
  const GpuSpec& gpu = plan.gpu;
  const ParallelConfig& pc = plan.parallel;
  const int64_t T = pc.micro_batch * plan.seq_len() / pc.cp;
  Plan block = last_layer_dense(m) ? dense_layer_plan(plan) : plan;
  block.model = mtp_block_model(m);
  const LayerCost lc = layer_cost(block);
  const double norms = 2.0 * memory_bound_time_s(gpu, b.final_norm);
  const double proj = gemm_time_s(gpu, plan.gemm_dtype(), T, m.hidden / pc.tp, 2 * m.hidden);
  const double embed_fwd = memory_bound_time_s(gpu, b.embedding_forward) + gpu.gemm.kernel_overhead_s;
  const double embed_bwd = memory_bound_time_s(gpu, b.embedding_backward) + gpu.gemm.kernel_overhead_s;
  const double fwd = embed_fwd + norms + proj + lc.forward_s + lc.exposed_forward_comm_s + e.output_forward_s;
  const double bwd = embed_bwd + 1.5 * norms + 2.0 * proj + lc.backward_input_s + lc.backward_weight_s +
                     lc.recompute_s + lc.exposed_backward_comm_s + lc.exposed_recompute_comm_s + e.output_backward_s;
  e.mtp_forward_s = d(m.mtp_layers) * fwd;
  e.mtp_backward_s = d(m.mtp_layers) * bwd;
  e.output_forward_s += e.mtp_forward_s;
  e.output_backward_s += e.mtp_backward_s;
}
}  // namespace

EdgeCost edge_cost(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& pc = plan.parallel;
  const GpuSpec& gpu = plan.gpu;
  const int64_t T = pc.micro_batch * plan.seq_len() / pc.cp;
  const EdgeBytes b = edge_bytes(plan);
  EdgeCost e;
  // Embedding: gather rows (read + write), backward scatter-add in fp32.
  e.embedding_forward_s = memory_bound_time_s(gpu, b.embedding_forward) + gpu.gemm.kernel_overhead_s;
  e.embedding_backward_s = memory_bound_time_s(gpu, b.embedding_backward) + gpu.gemm.kernel_overhead_s;
  // Output layer: final norm, logits GEMM (vocab split over tp), fp32 cross entropy (write, read, write grad).
  const double norm = memory_bound_time_s(gpu, b.final_norm);
  const double logits = gemm_time_s(gpu, plan.gemm_dtype(), T, m.vocab / pc.tp, m.hidden);
  e.output_forward_s = norm + logits + memory_bound_time_s(gpu, b.cross_entropy);
  e.output_backward_s = 2.0 * norm + 2.0 * logits + memory_bound_time_s(gpu, b.cross_entropy_backward);
  if (m.mtp_layers > 0) add_mtp_cost(plan, b, e);
  // Unfused gradient accumulation of the embedding (first stage) and of the output layer's weight (last stage).
  const ParamCounts c = count_params(m);
  e.embedding_backward_s += grad_accumulation_s(plan, c.embedding_per_tp_rank(pc.tp), 1);
  e.output_backward_s += grad_accumulation_s(plan, output_weight_params(plan, c), 1);
  // FSDP2's copies of the root parameters (zero3.hpp): gathered once for the forward and kept to the backward's end
  // (zero3_root_gathered_bytes), reduce-scattered once.
  if (pc.step_zero_stage() >= 3) {
    const Fsdp2CopyBytes embedding = fsdp2_copy_bytes(plan, c.embedding_per_tp_rank(pc.tp));
    const Fsdp2CopyBytes output = fsdp2_copy_bytes(plan, output_weight_params(plan, c));
    e.embedding_forward_s += memory_bound_time_s(gpu, embedding.gather);
    e.embedding_backward_s += memory_bound_time_s(gpu, embedding.reduce);
    e.output_forward_s += memory_bound_time_s(gpu, output.gather);
    e.output_backward_s += memory_bound_time_s(gpu, output.reduce);
  }
  if (pc.tp > 1) {
    const LinkSpec& l = group_link(plan, GroupKind::tp);
    // vocab-parallel cross entropy: 3 all-reduces of T fp32 values; SP gathers the hidden states first and
    // reduce-scatters their gradient in backward.
    // Each MTP module's head repeats them.
    const double heads = d(1 + m.mtp_layers);
    e.output_tp_comm_s = heads * 3.0 * collective_time_s(Collective::all_reduce, b.ce_all_reduce, pc.tp, l);
    if (pc.sequence_parallel) {
      e.output_tp_comm_s += heads * collective_time_s(Collective::all_gather, b.sp_gather, pc.tp, l);
      e.output_tp_comm_backward_s = heads * collective_time_s(Collective::reduce_scatter, b.sp_gather, pc.tp, l);
    }
  }
  return e;
}

double p2p_bytes(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  // Activation tensor b x s/cp x h; with tp > 1 each rank sends 1/tp of it (scatter-gather, Narayanan 2021 Sec. 4.1;
  // with sequence parallelism the tensor is already split). Without either, each TP rank sends the whole tensor
  // (DeepSpeed's PipelineEngine, Megatron-LM --no-scatter-gather-tensors-in-pipeline).
  const bool split = pc.p2p_scatter_gather || pc.sequence_parallel;
  return d(dtype_bytes(plan.activation_dtype())) * d(pc.micro_batch) * d(plan.seq_len()) / d(pc.cp) *
         d(plan.model.hidden) / d(split ? pc.tp : 1);
}

double p2p_time_s(const Plan& plan) {
  if (plan.parallel.pp <= 1) return 0.0;
  return collective_time_s(Collective::send_recv, p2p_bytes(plan), 2, group_link(plan, GroupKind::pp));
}

double embedding_grad_sync_s(const Plan& plan, int64_t stage) {
  const ParallelConfig& pc = plan.parallel;
  // Only between two stages: ZB-V's first stage holds the embedding and the output layer.
  if (!plan.model.tied_embeddings || pc.output_stage() == 0 || (stage != 0 && stage != pc.pp - 1)) return 0.0;
  const double bytes = d(plan.model.vocab) * d(plan.model.hidden) / d(pc.tp) * d(plan.training.grad_bytes());
  return collective_time_s(Collective::all_reduce, bytes, 2, group_link(plan, GroupKind::pp));
}

DpCost dp_cost(const Plan& plan, double params, double expert_params) {
  const ParallelConfig& pc = plan.parallel;
  DpCost dc;
  dc.group = pc.shard_group();
  if (dc.group <= 1) return dc;
  const double grad_bytes_per_param = d(plan.training.grad_bytes());
  const bool sharded = pc.step_zero_stage() >= 1 || pc.distributed_optimizer;
  dc.per_microbatch = pc.step_zero_stage() >= 2;
  dc.replica_group = sharded && pc.dp_replicate > 1 ? pc.dp_replicate : 1;
  // Each part over its own group: the dense parameters over dp cp (the shard group with HSDP), the experts over the
  // expert-data-parallel group (nothing to reduce where each expert has one copy: dp cp = ep).
  auto part = [&](double n, int64_t group, const LinkSpec& l) {
    if (group <= 1 || n <= 0) return;
    dc.grad_bytes += n * grad_bytes_per_param;
    if (sharded) {
      dc.grad_reduce_s += collective_time_s(Collective::reduce_scatter, n * grad_bytes_per_param, group, l);
      if (pc.step_zero_stage() < 3) dc.param_gather_s += collective_time_s(Collective::all_gather, gathered_param_bytes(plan) * n, group, l);
      // HSDP: each rank's reduced shard, 1/group of the part's gradients, is all-reduced across the replicas (Zhao et
      // al. 2023, arXiv:2304.11277, Sec. 3.2.2: reduce-scatter within the sharding group, all-reduce across the
      // replication group; FSDP2's foreach_reduce all-reduces the reduce-scattered shard over the replicate mesh dim
      // and Megatron-Core's partial distributed optimizer each bucket's shard over its instances, both read from
      // their code, not checked against a pinned revision). It follows the reduce-scatter as often as that runs
      // and in grad_reduce_s, so it overlaps the backward as the reduce-scatter does.
      if (dc.replica_group > 1) {
        const double shard_bytes = n * grad_bytes_per_param / d(group);
        const double t = collective_time_s(Collective::all_reduce, shard_bytes, dc.replica_group,
                                           group_link(plan, GroupKind::dp_replicate));
        dc.replica_bytes += shard_bytes;
        dc.replica_reduce_s += t;
        dc.grad_reduce_s += t;
      }
    } else {
      dc.grad_reduce_s += collective_time_s(Collective::all_reduce, n * grad_bytes_per_param, group, l);
    }
  };
  part(params - expert_params, dc.group, group_link(plan, GroupKind::dp_cp));
  const double dense_bytes = dc.grad_bytes;
  if (expert_params > 0) part(expert_params, expert_dp_size(pc), expert_dp_link(plan));
  dc.expert_grad_bytes = dc.grad_bytes - dense_bytes;
  dc.expert_group = expert_params > 0 ? expert_dp_size(pc) : 1;
  dc.buckets = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(dc.grad_bytes / d(plan.training.dp_bucket_bytes))));
  dc.bucket_s = dc.grad_reduce_s / d(dc.buckets);
  return dc;
}

DpCost stage_dp_cost(const Plan& plan, int64_t stage, const PlanParamCounts& counts) {
  return dp_cost(plan, stage_params(plan, stage, counts), moe_expert_params(plan, stage, counts.counts));
}

StageMemoryInputs stage_memory_inputs(const Plan& plan) {
  StageMemoryInputs in;
  in.params = plan_param_counts(plan);
  in.states = model_state_options(plan);
  const ActivationShape a = activation_shape(plan);
  in.layer_activation_bytes = layer_activation_bytes(plan.model, a).total;
  in.layer_offloaded_bytes = offloaded_module_bytes(plan.model, a);
  in.embedding_activation_bytes = embedding_activation_bytes(plan.model, a);
  in.output_activation_bytes = output_layer_activation_bytes(plan.model, a);
  in.loss_working_set_bytes = loss_backward_working_set_bytes(plan.model, a);
  if (plan.model.mtp_layers > 0) {
    // Each MTP module keeps its block's activations, its head's (as the output layer's) and the projection's input,
    // the two normalised halves (2 h per token, and their norms' inputs: 4 h A, / tp with SP).
    const ModelSpec& m = plan.model;
    const ModelSpec block = mtp_block_model(m);
    const double tokens = d(a.micro_batch) * d(a.seq) / d(a.cp) / (a.sequence_parallel ? d(a.tp) : 1.0);
    in.output_activation_bytes += d(m.mtp_layers) * (layer_activation_bytes(block, a).total + in.output_activation_bytes +
                                                     4.0 * tokens * d(m.hidden) * d(a.bytes_per_element));
  }
  in.recompute_working_set_bytes = recompute_working_set_bytes(plan.model, a);
  if (plan.model.has_dense_layers()) {  // the leading dense layers, with their own MLP
    const ModelSpec dense = dense_layer_model(plan.model);
    in.dense_layer_activation_bytes = layer_activation_bytes(dense, a).total;
    in.dense_recompute_working_set_bytes = recompute_working_set_bytes(dense, a);
  }
  if (plan.parallel.recompute_layers > 0) {  // the layers full recompute leaves out keep what recompute none keeps
    ActivationShape kept = a;
    kept.recompute = Recompute::none;
    in.kept_layer_activation_bytes = layer_activation_bytes(plan.model, kept).total;
    if (plan.model.has_dense_layers()) {
      in.kept_dense_layer_activation_bytes = layer_activation_bytes(dense_layer_model(plan.model), kept).total;
    }
  }
  return in;
}

StageMemory stage_memory(const Plan& plan, int64_t stage) { return stage_memory(plan, stage, stage_memory_inputs(plan)); }

// The stored activations of `layers` layers (`dense` of them a MoE model's dense layers) per microbatch, `layer_bytes`
// per MoE (or only) layer; with full recompute of only some layers (recompute_layers), the `r` recomputed ones at
// those bytes and the rest at recompute none's (kept_*_activation_bytes).
double layers_activation_bytes(const StageMemoryInputs& in, int64_t layers, int64_t dense, const RecomputedLayers& r,
                               bool partial, double layer_bytes) {
  if (!partial) return d(layers - dense) * layer_bytes + d(dense) * in.dense_layer_activation_bytes;
  return d(r.layers - r.dense) * layer_bytes + d(r.dense) * in.dense_layer_activation_bytes +
         d(layers - dense - (r.layers - r.dense)) * in.kept_layer_activation_bytes +
         d(dense - r.dense) * in.kept_dense_layer_activation_bytes;
}

namespace {

// Chunks of different sizes: the peak of each live chunk-microbatch's layers (the embedding with stage 0's chunk 0)
// over the stage's order (interleaved: interleaved_peak_bytes; DualPipeV: its order, order_peak_bytes).
double uneven_chunk_activations(const Plan& plan, int64_t stage, const StageMemoryInputs& in, double layer_bytes) {
  const ParallelConfig& pc = plan.parallel;
  const bool partial = pc.recompute_layers > 0;
  const int64_t v = pc.schedule == Schedule::dualpipe_v ? 2 : pc.vpp;
  std::vector<double> bytes(static_cast<size_t>(v));
  for (int64_t c = 0; c < v; ++c) {
    const RecomputedLayers r = partial ? chunk_recomputed(plan, stage, c) : RecomputedLayers{};
    bytes[static_cast<size_t>(c)] =
        layers_activation_bytes(in, chunk_layers(plan, stage, c), chunk_dense_layers(plan, stage, c), r, partial,
                                layer_bytes) +
        (stage == 0 && c == 0 ? in.embedding_activation_bytes : 0.0);
  }
  if (pc.schedule == Schedule::dualpipe_v) {
    return order_peak_bytes(dualpipe_v_order(pc.pp, pc.num_microbatches)[static_cast<size_t>(stage)], bytes);
  }
  return interleaved_peak_bytes(pc.pp, pc.num_microbatches, pc.vpp, stage, bytes);
}

// The stage's transformer layers' stored activations at the schedule's peak, `layer_bytes` per MoE (or only) layer
// and microbatch: the in-flight chunk-microbatches' share of the stage's layers (its dense ones, and with
// recompute_layers its recomputed ones, spread evenly over its chunks), or with an explicit per-chunk layout each
// chunk's bytes over the order (the embedding included).
double held_layer_activations(const Plan& plan, int64_t stage, const StageMemoryInputs& in, int64_t in_flight,
                              bool uneven, double layer_bytes) {
  if (uneven) return uneven_chunk_activations(plan, stage, in, layer_bytes);
  const bool partial = plan.parallel.recompute_layers > 0;
  const RecomputedLayers r = partial ? stage_recomputed_layers(plan, stage) : RecomputedLayers{};
  const double stage_layer_bytes =
      layers_activation_bytes(in, stage_layers(plan, stage), stage_dense_layers(plan, stage), r, partial, layer_bytes);
  return d(in_flight) * stage_layer_bytes / d(plan.parallel.chunks_per_stage());
}
}  // namespace

StageMemory stage_memory(const Plan& plan, int64_t stage, const StageMemoryInputs& in) {
  const ParallelConfig& pc = plan.parallel;
  const GpuSpec& gpu = plan.gpu;
  StageMemory sm;
  sm.stage = stage;
  sm.layers = stage_layers(plan, stage);
  sm.params = stage_params(plan, stage, in.params);

  // Model states: expert weights are replicated over dp/ep ranks, the rest over dp*cp.
  const ParamCounts& c = in.params.counts;
  const double expert_params = stage_expert_params(plan, stage, c);
  const ModelStateOptions& o = in.states;
  // fp8's weight copy (ModelStateOptions::extra_weight_bytes) covers the transformer layers' GEMM weights only: the
  // embedding, the output layer and the final norm stay in 16 bits (model_states.hpp).
  ModelStateOptions outside = o;
  outside.extra_weight_bytes = 0;
  const double non_layer = stage_non_layer_params(plan, stage, in.params);
  const ModelStateBytes dense = model_state_bytes(sm.params - expert_params - non_layer, pc.shard_group(), o);
  const ModelStateBytes head = model_state_bytes(non_layer, pc.shard_group(), outside);
  const ModelStateBytes experts = model_state_bytes(expert_params, expert_dp_size(pc), o);
  sm.weights = dense.weights + head.weights + experts.weights;
  sm.grads = dense.grads + head.grads + experts.grads;
  // Gradients the allocator frees and reallocates every step (fragmentation below): FSDP2's, per parameter, freed by
  // the optimizer's zero_grad (set_to_none, PyTorch's default since 2.0); ZeRO-2's unit of unsharded gradient.
  double cycled_grads = pc.fsdp2 ? sm.grads : 0.0;
  if (pc.step_zero_stage() == 2) {
    const double unit = zero_unsharded_grad_bytes(plan, std::max(in.params.layer_params, in.params.dense_layer_params));
    sm.grads += unit;
    cycled_grads += unit;
  }
  sm.optimizer = dense.optimizer + head.optimizer + experts.optimizer;
  sm.host = dense.host + head.host + experts.host;

  // Activations held at the schedule's peak.
  const int64_t v = pc.chunks_per_stage();
  sm.in_flight_chunks = in_flight_chunks(pc.schedule, pc.pp, pc.num_microbatches, v, stage);
  const int64_t dense_layers = stage_dense_layers(plan, stage);
  const bool uneven = v > 1 && uneven_chunks(plan, stage);
  sm.activations = held_layer_activations(plan, stage, in, sm.in_flight_chunks, uneven, in.layer_activation_bytes);
  if (pc.offload.activations) {  // the layers' go to the host; the GPU keeps the window (offload.hpp)
    const double window = kActivationOffloadWindowLayers *
                          std::max(in.layer_activation_bytes, dense_layers > 0 ? in.dense_layer_activation_bytes : 0.0);
    sm.offloaded_activations = sm.activations;
    sm.host += sm.offloaded_activations;
    sm.activations = std::min(sm.activations, window);
  } else if (in.layer_offloaded_bytes > 0) {
    // Fine-grained activation offloading (activations.hpp offloaded_module_bytes): every in-flight layer's offloaded
    // modules' bytes go to the host; the GPU keeps the rest of each layer and the same double-buffer window of the
    // offloaded part, kActivationOffloadWindowLayers layers' (offload.hpp: the layer computing and the one whose copy
    // is in flight).
    const double kept = held_layer_activations(plan, stage, in, sm.in_flight_chunks, uneven,
                                               in.layer_activation_bytes - in.layer_offloaded_bytes);
    sm.offloaded_activations = sm.activations - kept;
    sm.host += sm.offloaded_activations;
    sm.activations = kept + std::min(sm.offloaded_activations, kActivationOffloadWindowLayers * in.layer_offloaded_bytes);
  }
  if (stage == 0 && !uneven) {
    sm.activations += d(in_flight_first_chunks(pc.schedule, pc.pp, pc.num_microbatches, v, stage)) *
                      in.embedding_activation_bytes;
  }
  if (stage == pc.output_stage()) {
    // Each microbatch's output layer lives as long as its last chunk: the in-flight count (GPipe m, 1F1B 1, ZB-H1
    // min(p, m) until W); interleaved: 1 (on the last stage Megatron's order runs each last-chunk forward right before
    // its backward); ZB-V: 1 (on the first stage its order runs each last-chunk F right before that chunk's B,
    // simulator/schedule.cpp; the W the B leaves behind keeps the chunk's stash, counted in in_flight_chunks).
    const double held = v == 1 ? d(sm.in_flight_chunks) : 1.0;
    sm.activations += held * in.output_activation_bytes + in.loss_working_set_bytes;  // the loss's backward: once
  }
  // The rebuild working set of the layers this stage holds (an MTP module's block is a MoE layer).
  const int64_t dense_here = stage_dense_layers(plan, stage);
  const bool moe_here = stage_layers(plan, stage) > dense_here || (stage == pc.output_stage() && plan.model.mtp_layers > 0);
  sm.recompute_working_set = std::max(moe_here ? in.recompute_working_set_bytes : 0.0,
                                      dense_here > 0 ? in.dense_recompute_working_set_bytes : 0.0);
  sm.zero3_buffers = zero3_buffer_bytes(plan, std::max(in.params.layer_params, in.params.dense_layer_params));
  const double root_params = (stage == 0 ? c.embedding_per_tp_rank(pc.tp) : 0.0) +
                             (stage == pc.output_stage() ? d(c.final_norm) + output_weight_params(plan, c) : 0.0);
  sm.zero3_buffers += zero3_root_gathered_bytes(plan, root_params);
  sm.workspace = d(gpu.workspace_bytes);
  int groups = 0;
  for (int64_t g : {pc.tp, pc.cp, pc.shard_group(), pc.dp_replicate, pc.pp, pc.ep}) groups += g > 1 ? 1 : 0;
  sm.comm_buffers = d(gpu.comm_buffer_bytes_per_group) * groups;
  sm.cuda_context = d(gpu.cuda_context_bytes);
  const double tensors = sm.weights + sm.grads + sm.optimizer + sm.activations + sm.recompute_working_set + sm.zero3_buffers;
  // PyTorch's caching allocator fragments the blocks it frees and reuses within a step; what is allocated once at
  // start-up and kept (weights, optimizer states, gradients in a persistent buffer: Megatron-LM's and DeepSpeed's
  // contiguous gradient buffers) it does not. The allowance is a fraction of the bytes it cycles.
  sm.fragmentation =
      gpu.fragmentation_fraction * (sm.activations + sm.recompute_working_set + sm.zero3_buffers + cycled_grads);
  sm.total = tensors + sm.workspace + sm.comm_buffers + sm.cuda_context + sm.fragmentation;
  return sm;
}


double peak_memory_bytes(const Plan& plan, int64_t* peak_stage) {
  const StageMemoryInputs in = stage_memory_inputs(plan);
  double peak = -1;
  int64_t at = 0;
  for (int64_t i = 0; i < plan.parallel.pp; ++i) {
    const double t = stage_memory(plan, i, in).total;
    if (t > peak) {
      peak = t;
      at = i;
    }
  }
  if (peak_stage) *peak_stage = at;
  return peak;
}

Estimate estimate(const Plan& plan, const EstimateOptions& options) {
  const ParallelConfig& pc = plan.parallel;
  const int64_t p = pc.pp;
  Estimate e;
  const LayerCosts lcs = layer_costs(plan);
  e.layer = lcs.layer;
  e.dense_layer = lcs.dense;
  e.kept_layer = lcs.kept;
  e.kept_dense_layer = lcs.dense_kept;
  e.full_layer = lcs.full;
  e.full_dense_layer = lcs.dense_full;
  e.full_kept_layer = lcs.kept_full;
  e.full_kept_dense_layer = lcs.dense_kept_full;
  e.edge = edge_cost(plan);
  e.p2p_bytes = p > 1 ? p2p_bytes(plan) : 0.0;
  e.p2p_s = p2p_time_s(plan);

  // Memory per stage.
  const StageMemoryInputs in = stage_memory_inputs(plan);
  e.memory.reserve(static_cast<size_t>(p));
  for (int64_t i = 0; i < p; ++i) {
    e.memory.push_back(stage_memory(plan, i, in));
    if (e.memory.back().total > e.peak_memory_bytes) {
      e.peak_memory_bytes = e.memory.back().total;
      e.peak_stage = i;
    }
  }
  e.capacity_bytes = d(plan.gpu.memory_bytes);
  double host = 0;
  for (const StageMemory& m : e.memory) host = std::max(host, m.host);
  e.host_bytes_per_node = host_bytes_per_node(plan, host);
  e.host_fits = host_memory_fits(plan, host);
  e.fits = e.peak_memory_bytes <= e.capacity_bytes && e.host_fits;

  StepScratch scratch;
  e.time = step_time(plan, lcs, e.edge, e.p2p_s, in.params, scratch, &e.stages, &e.dp, options);
  return e;
}

// A stage's DP gradient reduction (step_time): its total, the part exposed after the stage's last pipeline op, and
// the exposed parameter gather after the optimizer step.
StageDpTail stage_dp_tail(const Plan& plan, const LayerCost& lc, int64_t i, const StageMicrobatchTime& t,
                          double stage_p, double expert_p, std::span<const ChunkWindow> windows) {
  const ParallelConfig& pc = plan.parallel;
  const double md = d(pc.num_microbatches);
  StageDpTail r;
  r.dc = dp_cost(plan, stage_p, expert_p);
  const DpCost& dc = r.dc;
  if (dc.group > 1) {
    const double bwd = t.backward_input_s + t.backward_weight_s;
    // The buckets leave as the last microbatch's backward completes each layer's weight gradient. ZB-H1 splits the
    // backward: the weight gradients complete in its W pass only, so only that pass hides them, with one stage too
    // (so ZB-H1 at pp 1 is never faster than 1F1B; search.cpp relies on it).
    const bool zb = splits_backward(pc.schedule);
    const double backward_window = zb ? t.backward_weight_s : bwd;
    if (dc.per_microbatch) {
      r.total = md * dc.grad_reduce_s;
      // ZeRO-3: the backward (and, per submodule, recompute: recompute_regathers) parameter gathers use the same dp
      // link as the gradient reduce-scatter, so only the backward time those gathers leave free can hide it (one
      // link, one queue).
      const int64_t regathered = recompute_regathers(pc) ? stage_recomputed_layers(plan, i).layers : 0;
      const double gathers =
          pc.step_zero_stage() >= 3 ? d(stage_layers(plan, i) + regathered) * lc.zero3_gather_s : 0.0;
      // ZB-H1: the gathers serve B_input (W needs no gathered weights: dW = X^T dY), so they take W's time only
      // where they outlast B_input.
      const double window =
          std::max(0.0, backward_window - (zb ? std::max(0.0, gathers - t.backward_input_s) : gathers));
      // Each microbatch puts its forward and backward gathers and its reduce-scatter on that link while the next
      // microbatch computes, so a reduce-scatter may also run beside the next forward: only the last
      // microbatch's leaves the window above, unless the link work of a microbatch outlasts its compute, when the
      // backlog grows by the difference every microbatch (the simulator's dp stream does the same).
      // GPipe runs every forward before the first backward, so there the reduce-scatters have only the backward
      // phase (backward and recompute) to run beside.
      const double forward_gathers = pc.step_zero_stage() >= 3 ? d(stage_layers(plan, i)) * lc.zero3_gather_s : 0.0;
      // No reduce-scatter leaves before the first microbatch's forward (and, under ZB-H1, its B_input) is done, and
      // the link can do only that microbatch's gathers by then: all the rest of the link work follows.
      const double first_release = t.forward_s + (zb ? t.backward_input_s : 0.0);
      const double before_release = std::min(first_release, forward_gathers + (zb ? gathers : 0.0));
      const double backlog =
          pc.schedule == Schedule::gpipe
              ? md * (gathers + dc.grad_reduce_s - bwd)
              : first_release + md * (forward_gathers + gathers + dc.grad_reduce_s) - before_release - md * t.total();
      r.exposed = pc.overlap_dp_comm ? std::max(std::max(dc.bucket_s, dc.grad_reduce_s - window), backlog) : r.total;
    } else {
      r.total = dc.grad_reduce_s;
      // Where an order was timed (a V schedule, interleaved chunks of their own sizes) the chunks release their
      // buckets in their last W (B), wherever it runs them.
      r.exposed = !pc.overlap_dp_comm ? r.total
                  : !windows.empty() ? dp_reduction_tail_s(dc.bucket_s, dc.buckets, windows)
                                  : dp_reduction_tail_s(dc.bucket_s, dc.buckets, backward_window,
                                                        pc.chunks_per_stage(), pc.pp);
    }
    // Sharded optimizer states without sharded parameters (ZeRO-1/2, Megatron's distributed optimizer): the
    // updated parameters are all-gathered after the optimizer step, overlapped with the next step's first forward.
    if (dc.param_gather_s > 0) {
      r.total += dc.param_gather_s;
      r.gather = pc.overlap_dp_comm ? std::max(dc.param_gather_s / d(dc.buckets), dc.param_gather_s - t.forward_s)
                                  : dc.param_gather_s;
    }
  }
  return r;
}

namespace {
// Whether every layer of stage i is priced as LayerCosts::layer: no dense layers among a MoE model's, no windowed and
// full-attention layers mixed (else stage_layer_cost weighs the kinds).
bool stage_layers_alike(const Plan& plan, int64_t stage) {
  return stage_dense_layers(plan, stage) == 0 && !plan.model.mixes_attention();
}

// What every stage's step-time formulas share: the plan's per-plan costs and its pipeline's shape.
struct StepInputs {
  const Plan& plan;
  const LayerCosts& lcs;  // the layer, a MoE model's leading dense layers, those recompute_layers leaves out
  const EdgeCost& edge;
  double p2p_s;
  const PlanParamCounts& params;
  int64_t p, v;  // stages, chunks per stage
  // Overlapped pipeline sends (interleaved only, as Megatron-Core offers them) leave the stages' per-microbatch time;
  // what remains is the fill / drain path's transfers, charged in pipeline_terms().
  bool p2p_overlap;
  // Interleaved chunks or stages of their own sizes (an explicit layout, an uneven last stage): pipeline_terms()
  // times Megatron's order.
  bool timed_interleaved;
  // The chunks per stage whose windows pipeline_time() gives (ChunkWindow): 2 for a V schedule, v for timed
  // interleaved chunks, 0 for the closed forms.
  int64_t window_chunks() const { return v_shaped(plan.parallel.schedule) ? 2 : timed_interleaved ? v : 0; }
  // The per-layer costs stage i scales by: lcs.layer, or the mean over its layers when it holds dense ones or
  // layers recompute_layers leaves out (stage_layer_cost, into `buf`).
  const LayerCost& layer(int64_t i, LayerCost& buf) const {
    if (plan.parallel.recompute_layers <= 0 && stage_layers_alike(plan, i)) return lcs.layer;
    buf = stage_layer_cost(plan, i, lcs);
    return buf;
  }
};

// Stage i's time per microbatch: its StageTime and, into t, its ops as the pipeline schedules them (inline: the
// search's hot path, where the compiler then keeps it inside stage_times()).
inline StageTime stage_time(const StepInputs& in, int64_t i, StageMicrobatchTime& t) {
  LayerCost buf;
  const LayerCost& lc = in.layer(i, buf);
  const EdgeCost& edge = in.edge;
  const int64_t p = in.p, v = in.v;
  const double p2p_s = in.p2p_s;
  StageTime st;
  st.stage = i;
  st.layers = stage_layers(in.plan, i);
  const bool out = i == in.plan.parallel.output_stage();  // holds the output layer
  const double L = d(st.layers);
  st.forward_s = L * lc.forward_s + (i == 0 ? edge.embedding_forward_s : 0) + (out ? edge.output_forward_s : 0);
  st.backward_input_s = L * lc.backward_input_s + (i == 0 ? edge.embedding_backward_s : 0) +
                        (out ? edge.output_backward_s : 0);
  st.backward_weight_s = L * lc.backward_weight_s;
  st.recompute_s = L * lc.recompute_s;
  st.tp_comm_s = L * lc.exposed_tp_s + (out ? edge.output_tp_comm_s + edge.output_tp_comm_backward_s : 0);
  st.cp_comm_s = L * lc.exposed_cp_s;
  st.ep_comm_s = L * lc.exposed_ep_s;
  st.zero3_comm_s = L * lc.exposed_zero3_s;
  st.offload_s = L * lc.exposed_offload_s;
  const double sends = in.p2p_overlap ? 0.0 : p2p_sends_per_microbatch(i, p, v, in.plan.parallel.schedule);
  const double forward_sends = in.p2p_overlap ? 0.0 : p2p_forward_sends(i, p, v, in.plan.parallel.schedule);
  st.p2p_s = sends * p2p_s;
  t.forward_s = st.forward_s + L * lc.exposed_forward_comm_s + (out ? edge.output_tp_comm_s : 0);
  t.backward_input_s = st.backward_input_s + st.recompute_s + L * (lc.exposed_backward_comm_s + lc.exposed_recompute_comm_s) +
                       (out ? edge.output_tp_comm_backward_s : 0);
  t.backward_weight_s = st.backward_weight_s;
  t.p2p_forward_s = forward_sends * p2p_s;
  t.p2p_backward_s = (sends - forward_sends) * p2p_s;
  t.last_send_delay_s = 0;
  const bool uneven = v > 1 && uneven_chunks(in.plan, i);  // an explicit per-chunk layout: its layer fractions
  t.first_chunk_share = uneven ? d(chunk_layers(in.plan, i, 0)) / L : -1.0;
  t.last_chunk_share = uneven ? d(chunk_layers(in.plan, i, v - 1)) / L : -1.0;
  t.first_chunk_edge = {i == 0 ? edge.embedding_forward_s : 0.0, i == 0 ? edge.embedding_backward_s : 0.0};
  t.last_chunk_edge = {out ? edge.output_forward_s + edge.output_tp_comm_s : 0.0,
                       out ? edge.output_backward_s + edge.output_tp_comm_backward_s : 0.0};
  st.per_microbatch_s = t.total();
  return st;
}

// Every stage's time per microbatch into mb, and its StageTime into `stages` when given.
void stage_times(const StepInputs& in, std::span<StageMicrobatchTime> mb, std::vector<StageTime>* stages) {
  const int64_t p = in.p;
  if (stages) {
    stages->clear();
    stages->reserve(static_cast<size_t>(p));
  }
  int64_t prev_layers = -1;  // -1: the stage before is not one to repeat
  for (int64_t i = 0; i < p; ++i) {
    // Middle stages with as many layers as the one before (neither holding dense ones, the model not mixing windowed
    // and full-attention layers) have its times (the search asks for no StageTime).
    if (!stages && i >= 1 && i < p - 1 && in.plan.parallel.stage_layout.empty()) {
      const int64_t layers = stage_layers_alike(in.plan, i) ? stage_layers(in.plan, i) : -1;
      if (i >= 2 && layers >= 0 && layers == prev_layers) {
        mb[static_cast<size_t>(i)] = mb[static_cast<size_t>(i - 1)];
        continue;
      }
      prev_layers = layers;
    }
    const StageTime st = stage_time(in, i, mb[static_cast<size_t>(i)]);
    if (stages) stages->push_back(st);
  }
}

// Stage i's DP tail (stage_dp_tail), computed once per step: the link-sharing pass and the tails both need it.
const StageDpTail& dp_tail(const StepInputs& in, StepScratch& scratch, int64_t i, const StageMicrobatchTime& t,
                           double stage_p, double expert_p) {
  const auto k = static_cast<size_t>(i);
  if (!scratch.dp_ready[k]) {
    LayerCost buf;
    const auto chunks = static_cast<size_t>(in.window_chunks());
    const std::span<const ChunkWindow> windows =
        scratch.windows_ready ? std::span<const ChunkWindow>(scratch.windows).subspan(k * chunks, chunks)
                              : std::span<const ChunkWindow>();
    scratch.dp[k] = stage_dp_tail(in.plan, in.layer(i, buf), i, t, stage_p, expert_p, windows);
    scratch.dp_ready[k] = 1;
  }
  return scratch.dp[k];
}

// A blocking send after a stage's last backward shares the stage's link with its DP reduction, still running then:
// both at half bandwidth (the simulator's processor sharing), so the send takes min(x, R) longer, R the reduction
// left. It applies where the pipeline neighbours and the DP group are on one tier and the reduction overlaps the
// backward (once per step: ZeRO-2/3 need pp 1), and not to ZB-H1, whose last send precedes the W passes that
// release the buckets.
bool last_send_shares_link(const StepInputs& in, const EstimateOptions& options) {
  const ParallelConfig& pc = in.plan.parallel;
  return options.link_sharing && in.p > 1 && !in.p2p_overlap && pc.overlap_dp_comm &&
         !splits_backward(pc.schedule) &&
         group_crosses_domain(pc, GroupKind::pp, in.plan.cluster) == dp_reduction_crosses_domain(pc, in.plan.cluster);
}

// Each stage's last_send_delay_s where its last send shares the link with its DP reduction.
void last_send_delays(const StepInputs& in, StepScratch& scratch, std::span<StageMicrobatchTime> mb) {
  const int64_t p = in.p;
  for (int64_t i = 1; i < p; ++i) {
    StageMicrobatchTime& t = mb[static_cast<size_t>(i)];
    if (i >= 2 && i < p - 1 && same_times(t, mb[static_cast<size_t>(i - 1)])) {
      t.last_send_delay_s = mb[static_cast<size_t>(i - 1)].last_send_delay_s;
      continue;
    }
    const int64_t layers = stage_layers(in.plan, i);
    const StageDpTail& sd = dp_tail(in, scratch, i, t, stage_params(in.plan, i, in.params),
                                    moe_expert_params(in.plan, i, in.params.counts));
    // The reduction's exposed part counts from the end of the backward, whose exposed TP/CP communication comes
    // after the last bucket leaves (as the simulator runs a pass: compute, then its exposed collectives).
    LayerCost buf;
    const double trailing_comm = d(layers) * in.layer(i, buf).exposed_backward_comm_s / d(in.v);
    if (sd.dc.group > 1) t.last_send_delay_s = std::min(in.p2p_s, std::max(0.0, sd.exposed - trailing_comm));
  }
}

// The pipeline phase (pipeline_time, each stage's lead into `lead`) and its terms: compute and exposed communication
// are the slowest stage's, m times.
TimeBreakdown pipeline_terms(const StepInputs& in, std::span<const StageMicrobatchTime> mb, std::span<double> lead,
                             double cutoff_s, std::span<ChunkWindow> windows) {
  const ParallelConfig& pc = in.plan.parallel;
  const int64_t p = in.p, v = in.v;
  const double md = d(pc.num_microbatches);
  // Interleaved chunks or stages of their own sizes (StepInputs::timed_interleaved): the order is timed with each
  // chunk's share.
  std::vector<double> shares;
  if (in.timed_interleaved) {
    for (int64_t i = 0; i < p; ++i) {
      // Derived chunks (no per-chunk layout) at their average, as the stage times and the simulator price them.
      const bool own = uneven_chunks(in.plan, i);
      for (int64_t c = 0; c < v; ++c) {
        shares.push_back(own ? d(chunk_layers(in.plan, i, c)) / d(std::max<int64_t>(1, stage_layers(in.plan, i)))
                             : 1.0 / d(v));
      }
    }
  }
  const PipelineTime pt = pipeline_time(pc.schedule, pc.num_microbatches, v, mb, lead, pc.post_validation, cutoff_s,
                                        windows, shares);
  TimeBreakdown tb;
  tb.pipeline_s = pt.step_s;
  if (std::isinf(pt.step_s)) return tb;  // beyond the cutoff (EstimateOptions::step_cutoff_s)
  tb.slowest_stage = pt.slowest_stage;
  StageMicrobatchTime unused;  // mb keeps the delays the pipeline was timed with
  const StageTime slow = stage_time(in, pt.slowest_stage, unused);  // recomputed: the same numbers as stage_times()
  tb.compute_s = md * (slow.forward_s + slow.backward_input_s + slow.backward_weight_s + slow.recompute_s);
  tb.tp_comm_s = md * slow.tp_comm_s;
  tb.cp_comm_s = md * slow.cp_comm_s;
  tb.ep_comm_s = md * slow.ep_comm_s;
  tb.pp_comm_s = in.p2p_overlap ? p2p_fill_drain_s(p, v, in.p2p_s) : md * slow.p2p_s;
  tb.pipeline_s += in.p2p_overlap ? tb.pp_comm_s : 0.0;
  tb.zero3_exposed_s = md * slow.zero3_comm_s;
  tb.offload_exposed_s = md * slow.offload_s;
  tb.bubble_s = pt.bubble_s;
  return tb;
}

// A stage's work after its last pipeline op, timed from the step's start.
struct Tail {
  double ready = 0;    // the stage's gradient reduction done
  double tied = 0;     // the tied-embedding all-reduce, after the reduction
  double after = 0;    // optimizer step and exposed parameter gather, after both
  double exposed = 0, total = 0, opt = 0, lead = 0;
  DpCost dc;
  OffloadStepTime offload;
};

// The stage whose tail finishes last: it decides the step.
struct DecidingTail {
  Tail best;
  double finish = -1;
  double wait = 0;  // its idle wait for the tied all-reduce's other side
  void consider(const Tail& x, double x_finish, double idle) {
    if (x_finish > finish) {
      finish = x_finish;
      best = x;
      wait = idle;
    }
  }
};

// Data-parallel synchronisation and optimizer: each stage starts them after its last pipeline op, lead_i before the
// pipeline's end (pipeline_time, which ends at pipeline_s); the stage that finishes last decides the step.
DecidingTail deciding_tail(const StepInputs& in, StepScratch& scratch, std::span<const StageMicrobatchTime> mb,
                           std::span<const double> lead, double pipeline_s) {
  const Plan& plan = in.plan;
  const int64_t p = in.p;
  DecidingTail r;
  Tail tied_side[2];
  int64_t prev = -1;  // the last stage whose tail was taken
  for (int64_t i = 0; i < p; ++i) {
    const StageMicrobatchTime& t = mb[static_cast<size_t>(i)];
    const double stage_lead = lead[static_cast<size_t>(i)];
    // A middle stage like the last one taken has its tail; ending no later, it cannot beat it.
    if (prev >= 1 && i < p - 1 && stage_lead >= lead[static_cast<size_t>(prev)] &&
        same_times(t, mb[static_cast<size_t>(prev)])) {
      continue;
    }
    prev = i;
    const double stage_p = stage_params(plan, i, in.params), expert_p = moe_expert_params(plan, i, in.params.counts);
    const double tied = embedding_grad_sync_s(plan, i);
    const StageDpTail& sd = dp_tail(in, scratch, i, t, stage_p, expert_p);
    const DpCost& dc = sd.dc;
    const double total = sd.total, exposed = sd.exposed, gather = sd.gather;
    // The tied-embedding all-reduce follows the DP gradient reduction (Megatron-Core finalize_model_grads order); it
    // joins the first and the last stage, so it starts when both have reduced.
    const double opt = optimizer_step_s(plan, stage_p, expert_p);
    const Tail x{pipeline_s - stage_lead + exposed, tied, opt + gather, exposed + tied + gather, total + tied, opt,
                 stage_lead, dc, stage_offload_step(plan, stage_p, expert_p)};
    if (tied > 0) {
      tied_side[i == 0 ? 0 : 1] = x;
    } else {
      r.consider(x, x.ready + x.after, 0.0);
    }
  }
  if (tied_side[0].tied > 0) {  // then the last stage's too (pp > 1)
    const double start = std::max(tied_side[0].ready, tied_side[1].ready);
    for (const Tail& x : tied_side) r.consider(x, start + x.tied + x.after, start - x.ready);
  }
  return r;
}

// The deciding stage's terms: its own DP exposure and optimizer; the lead it ends its pipeline work with comes off
// the bubble (its wait for the tied all-reduce's other side is idle time), the rest, if any, off its DP exposure (a
// stage lighter than the slowest that ends before m t_max and still decides the step; on 3,000 random command-line
// plans only rounding reached it, at most 7e-15 s, pp 1 GPipe).
void charge_tail(const DecidingTail& tail, TimeBreakdown& tb, DpCost* dp_out) {
  const Tail& best = tail.best;
  tb.dp_comm_exposed_s = best.exposed;
  tb.dp_comm_total_s = best.total;
  tb.optimizer_s = best.opt;
  tb.offload = best.offload;
  if (dp_out) *dp_out = best.dc;
  tb.bubble_s += tail.wait - best.lead;
  if (tb.bubble_s < 0) {  // the tail began inside the bubble; a rounding-level excess leaves no negative term
    tb.dp_comm_exposed_s = std::max(0.0, tb.dp_comm_exposed_s + tb.bubble_s);
    tb.bubble_s = 0;
  }
  tb.step_s = tail.finish;
}

// Throughput and FLOPs utilisation of a step of tb.step_s.
void throughput_terms(const Plan& plan, TimeBreakdown& tb) {
  const int64_t s = plan.seq_len();
  const double gpus = d(plan.num_gpus);
  const double peak = plan.gpu.peak(plan.gemm_dtype());
  tb.model_flops = model_flops_per_step(plan.model, plan.training.global_batch, s);
  if (plan.parallel.recompute_layers > 0) {  // only the recomputed layers rerun their forward
    RecomputedLayers r;
    for (int64_t i = 0; i < plan.parallel.pp; ++i) {
      const RecomputedLayers ri = stage_recomputed_layers(plan, i);
      r.layers += ri.layers;
      r.dense += ri.dense;
      r.full.layers += ri.full.layers;
      r.full.dense += ri.full.dense;
    }
    tb.hardware_flops =
        tb.model_flops + partial_recompute_flops(plan.model, plan.training.global_batch, s, r.layers, r.dense, r.full);
  } else {
    tb.hardware_flops = hardware_flops_per_step(plan.model, plan.training.global_batch, s, plan.parallel.recompute,
                                               plan.parallel.recompute_modules);
  }
  tb.tokens_per_s = d(plan.training.global_batch) * d(s) / tb.step_s;
  tb.mfu = tb.model_flops / (tb.step_s * gpus * peak);
  tb.hfu = tb.hardware_flops / (tb.step_s * gpus * peak);
}
}  // namespace

TimeBreakdown step_time(const Plan& plan, const LayerCosts& lc, const EdgeCost& edge, double p2p_s,
                        const PlanParamCounts& params, StepScratch& scratch, std::vector<StageTime>* stages,
                        DpCost* dp_out, const EstimateOptions& options) {
  const ParallelConfig& pc = plan.parallel;
  const int64_t p = pc.pp;
  // Interleaved over chunks or stages of different sizes (an explicit layout, an uneven last stage): interleaved_step_s
  // assumes equal chunks on stages of one size, which such a layout's order does not run (up to 7.4% short of the
  // simulator, 5/5,3/3,4/4,4/4 on llama3-8b pp 4), so pipeline_terms() times the order.
  // Megatron's order needs m a multiple of p (validate(); a plan --explain prices as if allowed may break it).
  bool timed_interleaved = false;
  const bool runs_order = pc.schedule == Schedule::interleaved && p > 1 && pc.num_microbatches % p == 0;
  for (int64_t i = 0; runs_order && i < p && !timed_interleaved; ++i) {
    timed_interleaved = uneven_chunks(plan, i) || stage_layers(plan, i) != stage_layers(plan, 0);
  }
  const StepInputs in{plan, lc, edge, p2p_s, params, p, pc.chunks_per_stage(), p > 1 && pc.overlaps_p2p(),
                      timed_interleaved};
  scratch.resize(static_cast<size_t>(p));
  scratch.windows.resize(static_cast<size_t>(p * in.window_chunks()));
  scratch.windows_ready = false;
  const std::span<StageMicrobatchTime> mb(scratch.microbatch.data(), static_cast<size_t>(p));
  const std::span<double> lead(scratch.lead.data(), static_cast<size_t>(p));
  stage_times(in, mb, stages);
  std::fill_n(scratch.dp_ready.begin(), p, uint8_t{0});  // no stage's DP tail yet this step (dp_tail)
  if (last_send_shares_link(in, options)) last_send_delays(in, scratch, mb);
  TimeBreakdown tb = pipeline_terms(in, mb, lead, options.step_cutoff_s, scratch.windows);
  if (std::isinf(tb.pipeline_s)) {  // the step exceeds the cutoff: it ends no earlier than the pipeline (charge_tail)
    tb.step_s = tb.pipeline_s;
    return tb;
  }
  // The DP tails with the windows the order gave (the link-sharing pass, before it, took the equal-chunk form).
  scratch.windows_ready = in.window_chunks() > 0;
  if (scratch.windows_ready) std::fill_n(scratch.dp_ready.begin(), p, uint8_t{0});
  charge_tail(deciding_tail(in, scratch, mb, lead, tb.pipeline_s), tb, dp_out);
  throughput_terms(plan, tb);
  return tb;
}

}  // namespace parplan
