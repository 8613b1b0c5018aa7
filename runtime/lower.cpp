// Lowers a plan's per-stage schedule into per-rank programs of GEMMs, memory-bound ops, collectives and slots.
#include "runtime/lower.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>

#include "planner/cost/activations.hpp"
#include "planner/cost/collectives.hpp"
#include "planner/cost/expert_comm.hpp"
#include "planner/spec/config.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/spec/error.hpp"
#include "planner/cost/gemm.hpp"
#include "planner/cost/layout.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/cost/model_states.hpp"
#include "planner/cost/pipeline.hpp"
#include "planner/cost/zero3.hpp"

namespace parplan::runtime {
namespace {

int64_t bytes_of(double b) { return static_cast<int64_t>(std::llround(b)); }

// Elements (per rank for the sharded kinds) and bytes a collective of nccl-tests size `payload` moves over `n` ranks
// in elements of `es` bytes: whole elements, and for all-gather / reduce-scatter a whole number per rank.
struct CollectiveSize {
  int64_t count = 0, bytes = 0;
};
CollectiveSize collective_size(CollectiveKind kind, double payload, int64_t n, int64_t es) {
  const int64_t elems = bytes_of(payload) / es;
  const int64_t count = kind == CollectiveKind::all_reduce ? elems : elems / n;
  return {count, kind == CollectiveKind::all_reduce ? count * es : count * n * es};
}
double d(int64_t x) { return static_cast<double>(x); }

// Query rows per attention block: the attention core runs as batched GEMMs over blocks of queries so the score
// matrix of a flash-attention plan is never materialised whole (its memory model stores none).
constexpr int64_t kAttentionQueryBlock = 512;

class Lowerer {
 public:
  Lowerer(const Plan& plan, int64_t rank)
      : plan_(plan), pc_(plan.parallel), m_(plan.model), rank_(rank), coord_(coord_of(pc_, rank)),
        lc_(layer_cost(plan)), mb_bytes_(layer_memory_bound_bytes(plan)), gd_(plan.gemm_dtype()),
        ad_(plan.activation_dtype()), wd_(plan.activation_dtype()),
        gw_(plan.training.fp8_param_gather ? DType::fp8 : wd_), gb_(gathered_param_bytes(plan)),
        zero3_shares_(zero3_linear_shares(plan)) {
    prog_.rank = rank;
    prog_.stage = coord_.pp;
    for (int g = 0; g < kNumGroups; ++g) prog_.colors[g] = group_color(pc_, static_cast<Group>(g), rank);
    T_ = pc_.micro_batch * plan.seq_len() / pc_.cp;
    edge_ = edge_bytes(plan);
    dp_ = stage_dp_cost(plan, coord_.pp, plan_param_counts(plan));
    v_ = pc_.chunks_per_stage();
    layers_ = stage_layers(plan, coord_.pp);
    if (m_.is_moe()) {
      experts_ = expert_gemms(plan);
      a2a_ = layer_expert_a2a(plan);
    }
    if (m_.has_dense_layers()) {  // a MoE model's leading dense layers, priced as layers of dense_layer_plan()
      dense_plan_ = dense_layer_plan(plan);
      dense_lc_ = layer_cost(dense_plan_);
      dense_mb_ = layer_memory_bound_bytes(dense_plan_);
    }
  }

  Program run(const std::vector<ScheduleStep>& order) {
    split_weight_ = std::any_of(order.begin(), order.end(), [](const ScheduleStep& s) { return s.phase == Phase::backward_weight; });
    make_persistent_slots();
    for (const ScheduleStep& st : order) {
      switch (st.phase) {
        case Phase::forward:
          forward_task(st.microbatch, st.chunk);
          break;
        case Phase::backward:
          backward_task(st.microbatch, st.chunk);
          break;
        case Phase::backward_weight:
          weight_task(st.microbatch, st.chunk);
          break;
        case Phase::tail:
          break;
      }
    }
    tail();
    return std::move(prog_);
  }

 private:
  // ---- slots -------------------------------------------------------------------------------------------------
  int add_slot(SlotKind k, int64_t bytes, bool persistent, std::string name) {
    prog_.slots.push_back(Slot{k, std::max<int64_t>(bytes, 0), persistent, std::move(name)});
    return static_cast<int>(prog_.slots.size() - 1);
  }

  void make_persistent_slots() {
    const StageMemory sm = stage_memory(plan_, coord_.pp);
    weights_ = add_slot(SlotKind::weights, bytes_of(sm.weights), true, "weights");
    grads_ = add_slot(SlotKind::grads, bytes_of(sm.grads), true, "gradients");
    optimizer_ = add_slot(SlotKind::optimizer, bytes_of(sm.optimizer), true, "optimizer state");
    if (sm.recompute_working_set > 0) working_ = add_slot(SlotKind::recompute_working_set, bytes_of(sm.recompute_working_set), true, "recompute working set");
    if (sm.zero3_buffers > 0) {
      zero3_ = add_slot(SlotKind::zero3_buffers, bytes_of(sm.zero3_buffers), true,
                        "zero3 gathered parameters + unsharded gradient");
      // The slot holds the gathered parameters first, then the unsharded gradient (zero3_buffer_bytes).
      zero3_params_end_ = std::min(bytes_of(sm.zero3_buffers), bytes_of(2.0 * zero3_gathered_params(plan_, lc_.params)));
    }
    // The planner's per-layer, edge and MTP activation bytes, so the stashes add up to StageMemory::activations.
    in_ = stage_memory_inputs(plan_);
    scratch_ = add_slot(SlotKind::scratch, 0, true, "scratch (allowance)");  // sized by the ops that use it
  }

  // ---- op builders -------------------------------------------------------------------------------------------
  void need_scratch(int64_t bytes) {
    Slot& s = prog_.slots[static_cast<size_t>(scratch_)];
    s.bytes = std::max(s.bytes, bytes);
  }

  void push(Op op) {
    op.phase = phase_;
    op.microbatch = mb_;
    op.chunk = chunk_;
    if (join_next_ >= 0 && op.kind != OpKind::alloc && op.kind != OpKind::free) {
      op.wait_for = join_next_;
      join_next_ = -1;
    }
    prog_.ops.push_back(op);
  }
  int32_t last_op() const { return static_cast<int32_t>(prog_.ops.size()) - 1; }

  // C[m,n] = A[m,k] op(B): A and C in scratch, B in the weights (or ZeRO-3 gather buffer) when it fits.
  void gemm(const char* label, Term term, int64_t m, int64_t n, int64_t k, int64_t batch, DType dt, bool b_transposed,
            bool accumulate = false, bool weight_operand = true) {
    gemm_op(label, term, m, n, k, batch, dt, b_transposed, accumulate, weight_operand,
            gemm_time_s(plan_.gpu, dt, m, n, k, batch));
  }

  // A MoE layer's local experts' GEMM: one op of `groups` products (run batched), predicted as the cost model's grouped
  // kernel (grouped_gemm_time_s).
  void expert_gemm(const char* label, Term term, int64_t m, int64_t n, int64_t k, int64_t groups, bool b_transposed,
                   bool weight_operand = true) {
    gemm_op(label, term, m, n, k, groups, gd_, b_transposed, false, weight_operand,
            grouped_gemm_time_s(plan_.gpu, gd_, m, n, k, groups));
  }

  // The GEMM op gemm() and expert_gemm() issue, predicted to take `predicted_s`.
  void gemm_op(const char* label, Term term, int64_t m, int64_t n, int64_t k, int64_t batch, DType dt, bool b_transposed,
               bool accumulate, bool weight_operand, double predicted_s) {
    Op op;
    op.kind = OpKind::gemm;
    op.term = term;
    op.label = label;
    op.gemm = GemmShape{m, n, k, batch, dt, b_transposed, accumulate};
    op.slot = scratch_;
    op.c_slot = scratch_;
    const int b_home = zero3_ >= 0 ? zero3_ : weights_;
    op.b_slot = weight_operand && prog_.slots[b_home].bytes >= op.gemm.b_bytes() ? b_home : scratch_;
    need_scratch(op.gemm.a_bytes() + op.gemm.c_bytes() + (op.b_slot == scratch_ ? op.gemm.b_bytes() : 0));
    op.predicted_s = predicted_s;
    push(op);
  }

  // A memory-bound op moving `traffic` bytes (read + write) through `slot`.
  void memory(const char* label, Term term, double traffic, int slot) {
    if (traffic <= 0) return;
    Op op;
    op.kind = OpKind::memory;
    op.term = term;
    op.label = label;
    op.slot = slot >= 0 ? slot : scratch_;
    op.bytes = bytes_of(traffic);
    if (op.slot == scratch_) need_scratch(64);
    op.predicted_s = memory_bound_time_s(plan_.gpu, traffic);
    push(op);
  }

  // A collective over `g` of nccl-tests size `payload` bytes of `dt` elements, staged in `slot` at `offset`.
  void collective(const char* label, Term term, Group g, CollectiveKind kind, double payload, DType dt, int slot = -1,
                  int64_t offset = 0, bool overlap = false) {
    const int64_t n = static_cast<int64_t>(group_members(pc_, g, rank_).size());
    if (n <= 1 || payload <= 0) return;
    const int64_t es = dtype_bytes(dt);
    Op op;
    op.kind = OpKind::collective;
    op.term = term;
    op.label = label;
    op.group = g;
    op.collective = kind;
    op.dtype = dt;
    op.slot = slot >= 0 ? slot : scratch_;
    op.offset = offset;
    op.overlap = overlap;
    const CollectiveSize size = collective_size(kind, payload, n, es);
    op.count = size.count;
    op.bytes = size.bytes;
    if (op.slot == scratch_ || prog_.slots[op.slot].bytes < offset + op.bytes) {
      op.slot = scratch_;
      op.offset = 0;
      need_scratch(op.bytes);
    }
    op.predicted_s = collective_time_s(to_planner_kind(kind), payload, n, link_of(g));
    push(op);
  }

  void p2p(const char* label, bool is_send, int64_t peer_stage) {
    Op op;
    op.kind = OpKind::p2p;
    op.term = Term::pp_comm;
    op.label = label;
    op.group = Group::pp;
    op.collective = is_send ? CollectiveKind::send : CollectiveKind::recv;
    op.dtype = ad_;
    op.peer = static_cast<int>(peer_stage);
    op.count = bytes_of(p2p_bytes(plan_)) / dtype_bytes(ad_);
    op.bytes = op.count * dtype_bytes(ad_);
    op.slot = scratch_;
    need_scratch(op.bytes);
    op.predicted_s = p2p_time_s(plan_);
    push(op);
  }

  void alloc(int slot) { bookkeeping(OpKind::alloc, slot, "alloc"); }
  void release(int slot) { bookkeeping(OpKind::free, slot, "free"); }
  void bookkeeping(OpKind kind, int slot, const char* label) {
    Op op;
    op.kind = kind;
    op.term = Term::memory;
    op.slot = slot;
    op.label = label;
    push(op);
  }

  static Collective to_planner_kind(CollectiveKind k) {
    switch (k) {
      case CollectiveKind::all_reduce:
        return Collective::all_reduce;
      case CollectiveKind::all_gather:
        return Collective::all_gather;
      case CollectiveKind::reduce_scatter:
        return Collective::reduce_scatter;
      case CollectiveKind::all_to_all:
        return Collective::all_to_all;
      case CollectiveKind::send:
      case CollectiveKind::recv:
      case CollectiveKind::barrier:
        return Collective::send_recv;
    }
    return Collective::send_recv;
  }
  const LinkSpec& link_of(Group g) const {
    switch (g) {
      case Group::tp:
        return group_link(plan_, GroupKind::tp);
      case Group::cp:
        return group_link(plan_, GroupKind::cp);
      case Group::dp_cp:
        return group_link(plan_, GroupKind::dp_cp);
      case Group::pp:
        return group_link(plan_, GroupKind::pp);
      case Group::ep:
        return group_link(plan_, GroupKind::ep);
      case Group::edp:
        return expert_dp_link(plan_);
      case Group::dp_replica:
        return group_link(plan_, GroupKind::dp_replicate);
    }
    return group_link(plan_, GroupKind::tp);
  }

  // ---- one layer -----------------------------------------------------------------------------------------------
  // The forward GEMMs of one layer, as layer_cost() prices them: QKV, output projection, MLP up (x2 for SwiGLU),
  // MLP down. Attention core separately.
  struct LinearShape {
    const char* label;
    int64_t n, k;
  };
  std::vector<LinearShape> linears() const {
    const int64_t tp = pc_.tp, h = m_.hidden, f = lead_dense_ ? dense_plan_.model.ffn_hidden : m_.ffn_hidden;
    const int64_t up = (m_.ffn_type == FfnType::swiglu ? 2 : 1) * f / tp;
    return {{"qkv", (m_.q_dim() + 2 * m_.kv_dim()) / tp, h},
            {"attn.out", h, m_.context_dim() / tp},
            {"mlp.up", up, h},
            {"mlp.down", h, f / tp}};
  }

  // The TP all-gathers' dtype: fp8 with TrainingSpec::fp8_tp_gather (LayerCost::tp_gather_bytes), else the activations'.
  DType tp_gather_dtype() const { return plan_.training.fp8_tp_gather ? DType::fp8 : ad_; }

  // The copy of the whole tensor around one sequence-parallel TP collective (ParallelConfig::tp_collective_copies,
  // cost_model.cpp tp_copy_bytes): a read and a write of `bytes`, on the compute stream.
  void tp_copy(const char* label, Term term, double bytes) {
    if (pc_.tp_collective_copies) memory(label, term, 2.0 * bytes, -1);
  }

  // Returns the index of the collective issued, -1 when none; `overlap`: the compute stream does not wait for it.
  // With the copies around the collectives, an all-gather's follows it and a reduce-scatter's precedes it, priced
  // in `pass` (the forward's, the recompute's or the backward's compute).
  int32_t tp_collectives(Term term, bool before_block, bool overlap = false, Term pass = Term::backward) {
    if (pc_.tp <= 1) return -1;
    if (pc_.sequence_parallel) {
      if (before_block) {
        collective("tp.all_gather", term, Group::tp, CollectiveKind::all_gather, lc_.tp_gather_bytes, tp_gather_dtype(),
                   -1, 0, overlap);
        const int32_t gather = last_op();
        if (overlap && pc_.tp_collective_copies) join_after(gather);  // the copy reads what the gather brings
        tp_copy("tp.all_gather.copy", pass, lc_.tp_gather_bytes);
        return gather;
      }
      tp_copy("tp.reduce_scatter.copy", pass, lc_.tp_bytes);
      collective("tp.reduce_scatter", term, Group::tp, CollectiveKind::reduce_scatter, lc_.tp_bytes, ad_, -1, 0,
                 overlap);
      return last_op();
    }
    if (before_block) return -1;
    collective("tp.all_reduce", term, Group::tp, CollectiveKind::all_reduce, lc_.tp_bytes, ad_, -1, 0, overlap);
    return last_op();
  }

  void cp_exchange(Term term, int passes) {
    if (pc_.cp <= 1) return;
    for (int p = 0; p < passes; ++p) {
      for (int64_t step = 0; step < pc_.cp - 1; ++step) {
        // Ring attention: pass this rank's K/V chunk to the next rank and receive the previous rank's.
        Op send;
        send.kind = OpKind::p2p;
        send.term = term;
        send.label = "cp.kv";
        send.group = Group::cp;
        send.collective = CollectiveKind::send;
        send.dtype = ad_;
        send.count = bytes_of(lc_.cp_bytes) / dtype_bytes(ad_);
        send.bytes = send.count * dtype_bytes(ad_);
        send.slot = scratch_;
        need_scratch(send.bytes);
        send.peer = static_cast<int>((coord_.cp + 1) % pc_.cp);
        send.predicted_s = collective_time_s(Collective::send_recv, lc_.cp_bytes, 2, link_of(Group::cp));
        push(send);
        Op recv = send;
        recv.collective = CollectiveKind::recv;
        recv.peer = static_cast<int>((coord_.cp + pc_.cp - 1) % pc_.cp);
        push(recv);
      }
    }
  }

  // Attention core as batched GEMMs over query blocks; `gemms_per_block` 2 in forward (scores, context), 5 in the
  // flash backward (recomputed scores, dP, dV, dQ, dK: 2.5x the forward, like the planner's kFlashBackwardFactor).
  void attention_core(Term term, bool backward) {
    const int64_t s = plan_.seq_len(), sq = s / pc_.cp, hd = m_.head_dim();
    const int64_t batch = pc_.micro_batch * (m_.heads / pc_.tp);
    const bool flash = plan_.training.attention != AttentionKernel::unfused;
    const int64_t qb = flash ? std::min(sq, kAttentionQueryBlock) : sq;
    for (int64_t q0 = 0; q0 < sq; q0 += qb) {
      const int64_t rows = std::min(qb, sq - q0);
      // Causal flash attention skips key blocks above the diagonal (single context-parallel rank only).
      const int64_t keys = flash && m_.causal && pc_.cp == 1 ? std::min(s, q0 + rows) : s;
      // Unfused: the softmax (+ dropout) passes over this block's rows of the score matrix, the planner's
      // LayerMemoryBytes::scores_forward / scores_backward (0 with flash).
      const double block_share = d(rows) / d(sq);
      if (!backward) {
        gemm("attn.scores", term, rows, keys, hd, batch, ad_, true, false, false);
        if (!flash) memory("attn.softmax", term, mb_bytes_.scores_forward * block_share, -1);
        gemm("attn.context", term, rows, hd, keys, batch, ad_, false, false, false);
      } else {
        gemm("attn.scores", term, rows, keys, hd, batch, ad_, true, false, false);
        gemm("attn.dP", term, rows, keys, hd, batch, ad_, true, false, false);
        if (!flash) memory("attn.softmax.bwd", term, mb_bytes_.scores_backward * block_share, -1);
        gemm("attn.dV", term, keys, hd, rows, batch, ad_, false, false, false);
        gemm("attn.dQ", term, rows, hd, keys, batch, ad_, false, false, false);
        if (flash) gemm("attn.dK", term, keys, hd, rows, batch, ad_, false, false, false);
      }
    }
  }

  // ZeRO-3 all-gather of one gather unit (planner/cost/zero3.hpp). With whole-layer units (`linear` < 0 calls) the layer
  // is gathered once per pass; with linear units each linear (0 QKV .. 3 MLP down) just before its GEMM, into the
  // start of the slot's parameter region for even linears and its end for odd ones, so consecutive linears never
  // overlap in a region sized for the largest consecutive pair (the unsharded gradient follows it).
  void zero3_gather(Term term, int linear = -1) {
    if (zero3_ < 0) return;
    const bool per_linear = pc_.zero3_gather_unit == Zero3GatherUnit::linear;
    if (per_linear != (linear >= 0)) return;
    if (!per_linear) {
      collective("zero3.all_gather", term, Group::dp_cp, CollectiveKind::all_gather, gb_ * lc_.params, gw_, zero3_);
      return;
    }
    const double payload = gb_ * lc_.params * zero3_shares_[static_cast<size_t>(linear)];
    const int64_t n = static_cast<int64_t>(group_members(pc_, Group::dp_cp, rank_).size());
    const int64_t bytes = collective_size(CollectiveKind::all_gather, payload, n, dtype_bytes(gw_)).bytes;
    const int64_t offset = linear % 2 == 0 ? 0 : std::max<int64_t>(0, zero3_params_end_ - bytes);
    static constexpr const char* kLabels[] = {"zero3.all_gather.qkv", "zero3.all_gather.attn.out",
                                              "zero3.all_gather.mlp.up", "zero3.all_gather.mlp.down"};
    collective(kLabels[linear], term, Group::dp_cp, CollectiveKind::all_gather, payload, gw_, zero3_, offset);
  }

  // FSDP2's copies around a layer's (or the root's) gather and reduce-scatter (zero3.hpp fsdp2_copy_bytes), on the
  // compute stream as layer_cost() and edge_cost() price them: without pipelining only (with it, once a step: tail()).
  void fsdp2_copies(const char* label, Term term, double bytes) {
    if (pc_.step_zero_stage() < 3) return;
    memory(label, term, bytes, zero3_);
  }

  void layer_forward(Term term, int stash) {
    const auto lin = linears();
    const double mem = layer_mb().elementwise_forward;  // norms, residuals, dropout, activation, rotary
    // A recomputed forward reads the block FSDP gathered before its backward (recompute_regathers, zero3.hpp).
    if (term != Term::recompute || recompute_regathers(pc_)) zero3_gather(term);
    if (term == Term::forward) fsdp2_copies("fsdp2.gather_copies", Term::forward, fsdp2_copy_bytes(plan_, layer_params()).gather);
    memory("norm+residual", term, mem / 2, stash);
    tp_collectives(term, true, false, term);
    zero3_gather(term, 0);
    gemm(lin[0].label, term, T_, lin[0].n, lin[0].k, 1, gd_, true);
    cp_exchange(Term::cp_comm, 1);
    attention_core(term, false);
    zero3_gather(term, 1);
    gemm(lin[1].label, term, T_, lin[1].n, lin[1].k, 1, gd_, true);
    tp_collectives(Term::tp_comm, false, false, term);
    memory("norm+act+residual", term, mem / 2, stash);
    tp_collectives(Term::tp_comm, true, false, term);
    if (moe_layer()) {
      moe_forward(term);
    } else {
      zero3_gather(term, 2);
      gemm(lin[2].label, term, T_, lin[2].n, lin[2].k, 1, gd_, true);
      zero3_gather(term, 3);
      gemm(lin[3].label, term, T_, lin[3].n, lin[3].k, 1, gd_, true);
    }
    tp_collectives(Term::tp_comm, false, false, term);
  }

  // torchtitan's per-op selective recompute (Recompute::selective_op), as recompute_s (cost_model.cpp) prices it: the
  // forward's memory-bound ops and the matmuls selective_op_matmuls() reruns (every second one in forward order, the
  // last excepted: wk, wo and w3 of a SwiGLU layer), each its own GEMM [T, n, k] split over tp like the forward's
  // (column-parallel: n / tp, row-parallel: k / tp). The attention kernel and the other matmuls return their kept
  // outputs; no collective runs again (the cost model charges none). Rebuilt into the recompute working set.
  void selective_op_rerun(int slot) {
    const double mem = layer_mb().elementwise_forward;
    memory("norm+residual", Term::recompute, mem / 2, slot);
    for (const LayerMatmul& g : selective_op_matmuls(m_).rerun) {
      const int64_t n = g.column_parallel ? g.n / pc_.tp : g.n, k = g.column_parallel ? g.k : g.k / pc_.tp;
      gemm("selective_op.matmul", Term::recompute, T_, n, k, 1, gd_, true);
    }
    memory("norm+act+residual", Term::recompute, mem / 2, slot);
  }

  // ---- MoE layers ----------------------------------------------------------------------------------------------
  // A MoE layer's MLP as layer_gemms() prices it: the router GEMM [T, experts, h] (activation dtype), the shared
  // experts as one dense MLP split over tp, and the local experts' grouped GEMMs of expert_gemms() between the token
  // dispatch and combine all-to-alls over the ep group (layer_expert_a2a() bytes each). Backward mirrors it: the
  // combine's gradient goes back first, then the experts' input gradients, the dispatch's gradient, the router's and
  // shared experts' input gradients; the weight gradients are issued with the layer's others (layer_backward_weight).
  bool moe_layer() const { return m_.is_moe() && !lead_dense_; }
  const LayerMemoryBytes& layer_mb() const { return lead_dense_ ? dense_mb_ : mb_bytes_; }
  double layer_params() const { return lead_dense_ ? dense_lc_.params : lc_.params; }

  // One dispatch or combine: an all-to-all of every routed copy (ExpertA2A::copies_bytes, the nccl-tests size),
  // separate send and receive halves of the scratch (NCCL's grouped send / receive must not alias), priced as the
  // cost model prices it (ExpertA2A::time_s).
  void ep_all_to_all(const char* label) {
    const size_t before = prog_.ops.size();
    collective(label, Term::ep_comm, Group::ep, CollectiveKind::all_to_all, a2a_.copies_bytes, ad_);
    if (prog_.ops.size() == before) return;
    Op& op = prog_.ops.back();
    op.predicted_s = a2a_.time_s;
    need_scratch(2 * op.bytes);
  }

  void moe_forward(Term term) {
    const int64_t h = m_.hidden, tpe = experts_.tokens_per_expert, le = experts_.local_experts;
    gemm("moe.router", term, T_, m_.experts, h, 1, ad_, true);
    if (m_.shared_experts > 0) {
      gemm("moe.shared.up", term, T_, experts_.shared_up_width, h, 1, gd_, true);
      gemm("moe.shared.down", term, T_, h, experts_.shared_down_k, 1, gd_, true);
    }
    ep_all_to_all("ep.dispatch");
    expert_gemm("moe.experts.up", term, tpe, experts_.up_width, h, le, true);
    expert_gemm("moe.experts.down", term, tpe, h, experts_.down_k, le, true);
    ep_all_to_all("ep.combine");
  }

  // The MLP's input gradients; its reduction over tp (and SP's re-gather of the MLP input) block: the cost model
  // hides only the QKV weight gradient's worth of them in a MoE layer (LayerGemms::column).
  void moe_backward_input() {
    const int64_t h = m_.hidden, tpe = experts_.tokens_per_expert, le = experts_.local_experts;
    ep_all_to_all("ep.combine.bwd");
    expert_gemm("moe.experts.down.dgrad", Term::backward, tpe, experts_.down_k, h, le, false);
    expert_gemm("moe.experts.up.dgrad", Term::backward, tpe, h, experts_.up_width, le, false);
    ep_all_to_all("ep.dispatch.bwd");
    if (m_.shared_experts > 0) {
      gemm("moe.shared.down.dgrad", Term::backward, T_, experts_.shared_down_k, h, 1, gd_, false);
      gemm("moe.shared.up.dgrad", Term::backward, T_, h, experts_.shared_up_width, 1, gd_, false);
    }
    gemm("moe.router.dgrad", Term::backward, T_, h, m_.experts, 1, ad_, false);
    if (pc_.sequence_parallel && pc_.tp > 1) {
      collective("tp.all_gather.regather", Term::tp_comm, Group::tp, CollectiveKind::all_gather, lc_.tp_gather_bytes,
                 tp_gather_dtype());
      tp_copy("tp.all_gather.regather.copy", Term::backward, lc_.tp_gather_bytes);
    }
    tp_collectives(Term::tp_comm, false);
  }

  void moe_weight_gradients() {
    const int64_t h = m_.hidden, tpe = experts_.tokens_per_expert, le = experts_.local_experts;
    expert_gemm("moe.experts.down.wgrad", Term::backward, h, experts_.down_k, tpe, le, false, false);
    expert_gemm("moe.experts.up.wgrad", Term::backward, experts_.up_width, h, tpe, le, false, false);
    if (m_.shared_experts > 0) {
      gemm("moe.shared.down.wgrad", Term::backward, h, experts_.shared_down_k, T_, 1, gd_, false, false, false);
      gemm("moe.shared.up.wgrad", Term::backward, experts_.shared_up_width, h, T_, 1, gd_, false, false, false);
    }
    gemm("moe.router.wgrad", Term::backward, m_.experts, h, T_, 1, ad_, false, false, false);
  }

  // dgrad: dX[T,k] = dY[T,n] W[n,k]; wgrad: dW[n,k] += dY^T X (same FLOPs as the forward GEMM).
  // With Megatron-LM's asynchronous backward (ParallelConfig::async_tp_backward, as the cost model prices it) the
  // input-gradient reduction of each column-parallel GEMM (MLP up, QKV) runs beside that GEMM's weight gradient and
  // the SP re-gather beside its input gradient. So, unless a split schedule defers the weight gradients, each of
  // the two weight-gradient GEMMs is issued right after its input gradient, waits for its re-gather, and the op
  // after it waits for the reduction. Without it (async_tp_backward false) every backward collective blocks.
  bool async_backward() const { return pc_.async_tp_backward && pc_.tp > 1 && !split_weight_; }

  void layer_backward_input(int stash, bool gather = true) {
    const auto lin = linears();
    const bool async = async_backward();
    if (gather) zero3_gather(Term::zero3_comm);
    const Fsdp2CopyBytes fc = fsdp2_copy_bytes(plan_, layer_params());
    fsdp2_copies("fsdp2.gather_reduce_copies", Term::backward, fc.gather + fc.reduce);
    // The per-op rerun follows the layer's gather (FSDP2 gathers a block before its backward, and the checkpointed
    // ops rerun inside it): it reads the gathered weights and costs no gather of its own.
    if (pc_.recompute == Recompute::selective_op) selective_op_rerun(working_ >= 0 ? working_ : stash);
    tp_collectives(Term::tp_comm, true);
    for (int i = 3; i >= 0; --i) {
      if (moe_layer() && i >= 2) {  // the MoE MLP in place of MLP down and up
        if (i == 3) moe_backward_input();
      } else {
        const int32_t regather = (i == 2 || i == 0) ? sp_regather() : -1;
        zero3_gather(Term::zero3_comm, i);
        gemm(i == 3 ? "mlp.down.dgrad" : i == 2 ? "mlp.up.dgrad" : i == 1 ? "attn.out.dgrad" : "qkv.dgrad",
             Term::backward, T_, lin[i].k, lin[i].n, 1, gd_, false);
        if (regather >= 0 && pc_.tp_collective_copies) {  // the re-gather's copy, once it has arrived
          join_after(regather);
          tp_copy("tp.all_gather.regather.copy", Term::backward, lc_.tp_gather_bytes);
        }
        if (i == 2 || i == 0) {
          if (async) {
            const int32_t reduce = tp_collectives(Term::tp_comm, false, true);
            weight_gradient(i, regather);
            if (reduce >= 0) join_after(reduce);
          } else {
            tp_collectives(Term::tp_comm, false);
          }
        }
      }
      if (i == 2) tp_collectives(Term::tp_comm, true);
      if (i == 1) {
        cp_exchange(Term::cp_comm, 2);
        attention_core(Term::backward, true);
      }
    }
    memory("norm+act+residual.bwd", Term::backward, layer_mb().elementwise_backward, stash);
  }

  // The next compute op waits for op `index` (an overlapped collective issued earlier).
  void join_after(int32_t index) { join_next_ = index; }

  // Sequence parallelism keeps only the sharded input of the column-parallel GEMMs (QKV, MLP up), so their weight
  // gradients need it all-gathered again; Megatron launches that asynchronously beside the input-gradient GEMM, and
  // the cost model exposes only what outlasts it (LayerCost::tp_comm_backward_s has two of these per layer).
  // Returns the op's index, -1 when there is none.
  int32_t sp_regather() {
    if (!pc_.sequence_parallel || pc_.tp <= 1) return -1;
    collective("tp.all_gather.regather", Term::backward, Group::tp, CollectiveKind::all_gather, lc_.tp_gather_bytes,
               tp_gather_dtype(), -1, 0, true);
    return last_op();
  }

  // Weight gradient of linear i (3 = MLP down ... 0 = QKV); with `wait_for` >= 0 it first waits for that op.
  void weight_gradient(int i, int32_t wait_for = -1) {
    const auto lin = linears();
    if (wait_for >= 0) join_after(wait_for);
    gemm(i == 3 ? "mlp.down.wgrad" : i == 2 ? "mlp.up.wgrad" : i == 1 ? "attn.out.wgrad" : "qkv.wgrad", Term::backward,
         lin[static_cast<size_t>(i)].n, lin[static_cast<size_t>(i)].k, T_, 1, gd_, false, false, false);
  }

  // The weight gradients layer_backward_input has not issued (all four with a split weight pass or blocking TP).
  void layer_backward_weight() {
    const bool async = async_backward();
    for (int i = 3; i >= 0; --i) {
      if (moe_layer() && i >= 2) {
        if (i == 3) moe_weight_gradients();
      } else if (!(async && (i == 2 || i == 0))) {
        weight_gradient(i);
      }
    }
    accumulate_grads("grad.accumulate", layer_params());
  }

  // Unfused gradient accumulation (TrainingSpec::fused_grad_accumulation false): this microbatch's weight gradients
  // are added to the gradient buffer by a separate memory-bound pass (grad_accumulation_bytes; nothing when fused).
  void accumulate_grads(const char* label, double params) {
    memory(label, Term::backward, grad_accumulation_bytes(plan_, params), grads_);
  }

  // The output layer's weight gradient, then its accumulation (output_weight_params: nothing for a tied weight at
  // pp = 1, which is the embedding's parameter).
  void output_wgrad() {
    gemm("lm_head.wgrad", Term::backward, m_.vocab / pc_.tp, m_.hidden, T_, 1, gd_, false, false, false);
    accumulate_grads("lm_head.grad.accumulate", output_weight_params(plan_, count_params(m_)));
  }

  // ---- pipeline tasks ----------------------------------------------------------------------------------------
  int64_t virtual_stage(int64_t chunk) const { return chunk * pc_.pp + coord_.pp; }
  int64_t last_virtual() const { return v_ * pc_.pp - 1; }
  // The current chunk's layers: an explicit per-chunk layout's count (config.hpp chunk_layers), else an equal share.
  int64_t layers_in_chunk() const {
    return uneven_chunks(plan_, coord_.pp) ? chunk_layers(plan_, coord_.pp, chunk_) : layers_ / v_;
  }
  // The chunk's layer stash: its layers' stored activations (layers_activation_bytes), a MoE model's leading dense
  // layers at their own size and, with recompute_layers, the layers full recompute leaves out at recompute none's
  // (spread evenly over the stage's chunks, as StageMemory counts them, unless the chunks are laid out explicitly).
  double chunk_layers_stash() const {
    const int64_t stage = coord_.pp;
    const bool partial = pc_.recompute_layers > 0;
    if (uneven_chunks(plan_, stage)) {
      const RecomputedLayers r = partial ? chunk_recomputed(plan_, stage, chunk_) : RecomputedLayers{};
      return layers_activation_bytes(in_, layers_in_chunk(), chunk_dense_layers(plan_, stage, chunk_), r, partial,
                                     in_.layer_activation_bytes);
    }
    const RecomputedLayers r = partial ? stage_recomputed_layers(plan_, stage) : RecomputedLayers{};
    return layers_activation_bytes(in_, layers_, stage_dense_layers(plan_, stage), r, partial, in_.layer_activation_bytes) /
           d(v_);
  }
  // Full recompute reruns the forward of the chunk's first chunk_recomputed_layers() layers (model order; all of them
  // without recompute_layers); the others keep their activations, as with recompute none.
  bool recomputes_whole_layer(int64_t l) const {
    return pc_.recompute == Recompute::full && l < chunk_recomputed_layers(plan_, coord_.pp, chunk_);
  }
  // Layer `l` of the current chunk (model order) is next: a MoE model's leading dense layers come first.
  void enter_layer(int64_t l) { lead_dense_ = m_.has_dense_layers() && l < chunk_dense_layers(plan_, coord_.pp, chunk_); }

  int& stash_of(int64_t mb, int64_t chunk) {
    const size_t key = static_cast<size_t>(mb * v_ + chunk);
    if (stashes_.size() <= key) stashes_.resize(key + 1, -1);
    return stashes_[key];
  }

  void forward_task(int64_t mb, int64_t chunk) {
    phase_ = Phase::forward;
    mb_ = mb;
    chunk_ = chunk;
    const int64_t vs = virtual_stage(chunk);
    double stash_bytes = chunk_layers_stash();
    if (vs == 0) stash_bytes += in_.embedding_activation_bytes;
    if (vs == last_virtual()) stash_bytes += in_.output_activation_bytes;
    int& stash = stash_of(mb, chunk);
    stash = add_slot(SlotKind::activations, bytes_of(stash_bytes), false, fmt::format("stash mb{} chunk{}", mb, chunk));
    // The receive comes first so it pairs with the previous task's send in one grouped exchange.
    if (vs > 0) p2p("pp.recv_forward", false, (vs - 1) % pc_.pp);
    alloc(stash);
    if (vs == 0) {
      memory("embedding", Term::forward, edge_.embedding_forward, stash);
      fsdp2_copies("fsdp2.embedding_gather_copies", Term::forward,
                   fsdp2_copy_bytes(plan_, count_params(m_).embedding_per_tp_rank(pc_.tp)).gather);
    }
    for (int64_t l = 0; l < layers_in_chunk(); ++l) {
      enter_layer(l);
      layer_forward(Term::forward, stash);
    }
    lead_dense_ = false;
    if (vs == last_virtual()) output_forward(stash);
    if (vs < last_virtual()) p2p("pp.send_forward", true, (vs + 1) % pc_.pp);
  }

  // The output layer's work in edge_bytes() (planner/cost/cost_model.hpp), as edge_cost() prices it.
  void output_forward(int stash) {
    memory("final_norm", Term::forward, edge_.final_norm, stash);
    collective("output.sp_all_gather", Term::tp_comm, Group::tp, CollectiveKind::all_gather, edge_.sp_gather, ad_);
    gemm("lm_head", Term::forward, T_, m_.vocab / pc_.tp, m_.hidden, 1, gd_, true);
    output_tp_comm();  // the vocab-parallel cross entropy reduces over the logits' shards: max, sum, target logit
    memory("cross_entropy", Term::forward, edge_.cross_entropy, stash);
    fsdp2_copies("fsdp2.output_gather_copies", Term::forward,
                 fsdp2_copy_bytes(plan_, output_weight_params(plan_, count_params(m_))).gather);
  }

  void output_tp_comm() {
    for (int i = 0; i < 3; ++i) {
      collective("ce.all_reduce", Term::tp_comm, Group::tp, CollectiveKind::all_reduce, edge_.ce_all_reduce, DType::fp32);
    }
  }

  void backward_task(int64_t mb, int64_t chunk) {
    phase_ = Phase::backward;
    mb_ = mb;
    chunk_ = chunk;
    const int64_t vs = virtual_stage(chunk);
    const int stash = stash_of(mb, chunk);
    if (stash < 0) throw InputError(fmt::format("schedule: backward of microbatch {} chunk {} before its forward", mb, chunk));
    if (vs < last_virtual()) p2p("pp.recv_backward", false, (vs + 1) % pc_.pp);
    if (vs == last_virtual()) {
      // An eager cross entropy's backward holds two more fp32 tokens x vocab tensors (loss_backward_working_set_bytes).
      const double loss_bytes = in_.loss_working_set_bytes;
      const int loss =
          loss_bytes > 0 ? add_slot(SlotKind::activations, bytes_of(loss_bytes), false, fmt::format("loss backward mb{}", mb))
                         : -1;
      if (loss >= 0) alloc(loss);
      memory("cross_entropy.bwd", Term::backward, edge_.cross_entropy_backward, stash);
      if (loss >= 0) release(loss);
      gemm("lm_head.dgrad", Term::backward, T_, m_.hidden, m_.vocab / pc_.tp, 1, gd_, false);
      collective("output.sp_reduce_scatter", Term::tp_comm, Group::tp, CollectiveKind::reduce_scatter, edge_.sp_gather,
                 ad_);
      if (!split_weight_) output_wgrad();
      memory("final_norm.bwd", Term::backward, 2.0 * edge_.final_norm, stash);
      fsdp2_copies("fsdp2.output_reduce_copies", Term::backward,
                   fsdp2_copy_bytes(plan_, output_weight_params(plan_, count_params(m_))).reduce);
    }
    for (int64_t l = 0; l < layers_in_chunk(); ++l) {
      const int64_t layer = layers_in_chunk() - 1 - l;  // backward runs the layers in reverse
      enter_layer(layer);
      // Whole-layer ZeRO-3 units (FSDP): the block's pre-backward gather comes before its checkpointed forward
      // reruns, which reads it; DeepSpeed's per-linear fetch gathers again inside the rerun (recompute_regathers).
      const bool recompute = recomputes_whole_layer(layer), gathered = recompute && !recompute_regathers(pc_);
      if (gathered) zero3_gather(Term::zero3_comm);
      if (recompute) layer_forward(Term::recompute, working_ >= 0 ? working_ : stash);
      if (pc_.recompute == Recompute::selective) attention_core(Term::recompute, false);
      layer_backward_input(stash, !gathered);
      if (!split_weight_) layer_backward_weight();
      dp_buckets_after_layer(mb, l);
    }
    lead_dense_ = false;
    if (vs == 0) {
      memory("embedding.bwd", Term::backward, edge_.embedding_backward, stash);
      fsdp2_copies("fsdp2.embedding_reduce_copies", Term::backward,
                   fsdp2_copy_bytes(plan_, count_params(m_).embedding_per_tp_rank(pc_.tp)).reduce);
      accumulate_grads("embedding.grad.accumulate", count_params(m_).embedding_per_tp_rank(pc_.tp));
    }
    if (!split_weight_) {  // freed before the send, so the send can pair with the next task's receive
      release(stash);
      stash_of(mb, chunk) = -1;
    }
    if (vs > 0) p2p("pp.send_backward", true, (vs - 1) % pc_.pp);
  }

  void weight_task(int64_t mb, int64_t chunk) {
    phase_ = Phase::backward_weight;
    mb_ = mb;
    chunk_ = chunk;
    int& stash = stash_of(mb, chunk);
    if (stash < 0) throw InputError(fmt::format("schedule: weight gradient of microbatch {} chunk {} without its forward", mb, chunk));
    if (virtual_stage(chunk) == last_virtual()) output_wgrad();
    for (int64_t l = 0; l < layers_in_chunk(); ++l) {
      enter_layer(layers_in_chunk() - 1 - l);
      layer_backward_weight();
    }
    lead_dense_ = false;
    release(stash);
    stash = -1;
  }

  // DP gradient reduction in DpCost::buckets buckets: without ZeRO-2/3, during the last microbatch's backward (one
  // bucket becomes ready every layers/buckets layers, overlapped like Megatron's); with ZeRO-2/3 every microbatch.
  // A MoE stage reduces two parts, each over its own group (dp_cost): the dense parameters' gradients over dp cp and
  // the local experts' over the expert-data-parallel group, the buckets shared between them by bytes.
  struct GradPart {
    Group group = Group::dp_cp;
    int64_t ranks = 1, buckets = 0, issued = 0;
    double bytes = 0, offset = 0;  // offset: where the part starts in the gradient buffer
  };
  std::vector<GradPart> grad_parts() const {
    const DpCost& dc = dp_;
    const double dense = dc.grad_bytes - dc.expert_grad_bytes, expert = dc.expert_grad_bytes;
    std::vector<GradPart> parts;
    int64_t expert_buckets = 0;
    if (expert > 0) {
      const int64_t share = std::llround(d(dc.buckets) * expert / dc.grad_bytes);
      expert_buckets = dense > 0 ? std::clamp<int64_t>(share, 1, std::max<int64_t>(1, dc.buckets - 1)) : dc.buckets;
    }
    if (dense > 0) parts.push_back({Group::dp_cp, dc.group, std::max<int64_t>(1, dc.buckets - expert_buckets), 0, dense, 0});
    if (expert > 0) parts.push_back({Group::edp, dc.expert_group, expert_buckets, 0, expert, dense});
    return parts;
  }

  void dp_buckets_after_layer(int64_t mb, int64_t layer_index) {
    const DpCost& dc = dp_;
    if (dc.grad_bytes <= 0) return;
    const bool last_mb = mb == pc_.num_microbatches - 1 || dc.per_microbatch;
    if (!last_mb) return;
    if (grad_parts_.empty()) grad_parts_ = grad_parts();
    const int64_t total_layers = layers_in_chunk();
    const int64_t done = layer_index + 1;
    for (GradPart& part : grad_parts_) {
      const int64_t due = part.buckets * done / total_layers;  // buckets ready after `done` layers of this backward
      while (part.issued < due) dp_bucket(part);
      if (dc.per_microbatch && done == total_layers) part.issued = 0;
    }
  }

  // Bucket `part.issued` of a part: its bytes split into whole-element buckets (sizes differ by at most one unit),
  // so the buckets add up to the planner's bytes exactly; sharded buckets are whole multiples of the group size.
  void dp_bucket(GradPart& part) {
    const bool sharded = pc_.step_zero_stage() >= 1 || pc_.distributed_optimizer;
    const DType gdt = plan_.training.grad_fp32 ? DType::fp32 : wd_;
    const int64_t es = dtype_bytes(gdt), unit = sharded ? part.ranks : 1;
    const int64_t units = bytes_of(part.bytes) / es / unit;
    const int64_t grads_bytes = prog_.slots[static_cast<size_t>(grads_)].bytes;
    const int64_t j = part.issued, base = units / part.buckets, extra = units % part.buckets;
    const int64_t first = j * base + std::min(j, extra), len = base + (j < extra ? 1 : 0);
    const int64_t offset = bytes_of(part.offset) + first * unit * es, bytes = len * unit * es;
    // Buckets walk through the gradient buffer; a sharded (ZeRO-2) buffer too small for them stages in scratch.
    const int64_t at = offset + bytes <= grads_bytes ? offset : 0;
    collective(sharded ? "dp.reduce_scatter" : "dp.all_reduce", Term::dp_comm, part.group,
               sharded ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce, d(bytes), gdt, grads_, at,
               pc_.overlap_dp_comm);
    // HSDP: the bucket's reduced shard, 1/group of it, all-reduced across the replicas (dp_cost's replica_bytes).
    if (dp_.replica_group > 1) {
      collective("dp.replica_all_reduce", Term::dp_comm, Group::dp_replica, CollectiveKind::all_reduce,
                 d(bytes / part.ranks), gdt, grads_, at, pc_.overlap_dp_comm);
    }
    ++part.issued;
  }

  // After the last task: optimizer step over the rank's shard, then the parameter all-gather when sharded.
  void tail() {
    phase_ = Phase::tail;
    mb_ = -1;
    chunk_ = 0;
    const double params = stage_params(plan_, coord_.pp);
    const double experts = moe_expert_params(plan_, coord_.pp, plan_param_counts(plan_).counts);
    const bool sharded = pc_.step_zero_stage() >= 1 || pc_.distributed_optimizer;
    // The planner's Adam traffic (stage_optimizer_step_bytes, cost_model.hpp), each part on its own slot.
    const OptimizerStepBytes ob = stage_optimizer_step_bytes(plan_, params, experts);
    memory("optimizer.states", Term::optimizer, ob.states, optimizer_);
    memory("optimizer.grads", Term::optimizer, ob.grads, grads_);
    memory("optimizer.weights", Term::optimizer, ob.weights, weights_);
    // FSDP2 under pipelining: its copies once a step (fsdp2_step_copies_s, cost_model.cpp)
    if (pc_.step_zero_stage() < 3) {
      const Fsdp2CopyBytes fc = fsdp2_copy_bytes(plan_, params, experts);
      memory("fsdp2.step_copies", Term::optimizer, fc.gather + fc.reduce, weights_);
    }
    if (sharded && pc_.step_zero_stage() < 3) {  // each part's updated shards over its own group (dp_cost)
      collective("dp.param_all_gather", Term::dp_comm, Group::dp_cp, CollectiveKind::all_gather,
                 gb_ * (params - experts), gw_, weights_);
      collective("dp.param_all_gather", Term::dp_comm, Group::edp, CollectiveKind::all_gather, gb_ * experts, gw_,
                 weights_);
    }
  }

  const Plan& plan_;
  const ParallelConfig& pc_;
  const ModelSpec& m_;
  int64_t rank_;
  RankCoord coord_;
  LayerCost lc_;
  LayerMemoryBytes mb_bytes_;
  DType gd_, ad_;
  DType wd_;  // the 16-bit model weights and gradients the DP / ZeRO collectives carry (fp16 plans: fp16)
  DType gw_;   // the weights the parameter all-gathers carry: wd_, or fp8 with fp8_param_gather
  double gb_;  // their bytes per parameter (gathered_param_bytes, model_states.hpp)
  std::array<double, kZero3Linears> zero3_shares_;
  int64_t zero3_params_end_ = 0;  // bytes of the ZeRO-3 slot's parameter region
  int64_t T_ = 0, v_ = 1, layers_ = 0;
  EdgeBytes edge_;
  DpCost dp_;  // this stage's DP reduction (stage_dp_cost)
  ExpertGemms experts_;  // MoE: the local experts' grouped GEMMs (expert_gemms)
  ExpertA2A a2a_;        // MoE: one dispatch or combine (layer_expert_a2a)
  Plan dense_plan_;      // a MoE model's leading dense layers: dense_layer_plan(), their cost and traffic
  LayerCost dense_lc_;
  LayerMemoryBytes dense_mb_;
  bool lead_dense_ = false;  // the layer being lowered is one of those
  Program prog_;
  int weights_ = -1, grads_ = -1, optimizer_ = -1, working_ = -1, zero3_ = -1, scratch_ = -1;
  StageMemoryInputs in_;  // the planner's per-layer, edge and loss activation bytes (stage_memory_inputs)
  std::vector<int> stashes_;
  bool split_weight_ = false;
  int32_t join_next_ = -1;  // >= 0: the next compute op waits for this op (an overlapped collective)
  std::vector<GradPart> grad_parts_;  // the DP reduction's parts, made at the first bucket
  Phase phase_ = Phase::forward;
  int64_t mb_ = -1, chunk_ = 0;
};

}  // namespace

std::vector<int64_t> group_members(const ParallelConfig& pc, Group g, int64_t rank) {
  switch (g) {
    case Group::tp:
      return group_ranks(pc, GroupKind::tp, rank);
    case Group::cp:
      return group_ranks(pc, GroupKind::cp, rank);
    case Group::pp:
      return group_ranks(pc, GroupKind::pp, rank);
    case Group::ep:
      return group_ranks(pc, GroupKind::ep, rank);
    case Group::dp_replica:
      return group_ranks(pc, GroupKind::dp_replicate, rank);
    case Group::dp_cp:  // the ranks sharding the states: dp x cp, with HSDP the shard group (layout.hpp), in rank order
      return group_ranks(pc, GroupKind::dp_cp, rank);
    case Group::edp: {
      // The expert-data-parallel group (layout.hpp): same tp and pp coordinates, the dp indices equal to this rank's
      // mod ep (experts are not folded: lower() refuses etp), every cp rank; in rank order.
      const RankCoord me = coord_of(pc, rank);
      std::vector<int64_t> out;
      for (int64_t dp = me.dp % pc.ep; dp < pc.dp; dp += pc.ep) {
        for (int64_t cp = 0; cp < pc.cp; ++cp) out.push_back(rank_of(pc, RankCoord{me.tp, cp, dp, me.pp}));
      }
      std::sort(out.begin(), out.end());
      return out;
    }
  }
  return {rank};
}

int group_color(const ParallelConfig& pc, Group g, int64_t rank) {
  const auto members = group_members(pc, g, rank);
  return static_cast<int>(static_cast<int64_t>(g) * pc.gpus() + members.front());
}

Program lower(const Plan& plan, int64_t rank, const std::vector<ScheduleStep>& order) {
  const ParallelConfig& pc = plan.parallel;
  if (pc.micropipeline_tp) {
    throw InputError("run: /parallel/micropipeline_tp: micro-pipelined TP is not lowered yet: the runtime issues each TP "
                     "collective whole (leave it false to run the plan's collectives blocking)");
  }
  if (plan.model.is_moe() && pc.etp > 0) {
    throw InputError(fmt::format("run: /parallel/etp {}: MoE parallel folding (expert tensor parallelism) is not lowered "
                                 "yet; leave etp unset to split the experts over tp",
                                 pc.etp));
  }
  if (plan.model.is_moe() && pc.ep > 1 && pc.moe_dispatcher == MoeDispatcher::deepep) {
    throw InputError("run: /parallel/moe_dispatcher deepep is not lowered yet: the runtime's all-to-all sends every routed "
                     "copy (use alltoall)");
  }
  if (plan.model.is_moe() && pc.zero_stage >= 3) {
    throw InputError(fmt::format("run: /parallel/zero_stage {} with experts is not lowered yet: the ZeRO-3 gathers of a "
                                 "MoE layer's experts over the expert-data-parallel group are missing",
                                 pc.zero_stage));
  }
  if (plan.model.is_mla()) {
    throw InputError("run: /model/kv_lora_rank: multi-head latent attention is not lowered yet: its down- and "
                     "up-projections are missing");
  }
  if (plan.model.sliding_window > 0) {
    throw InputError(fmt::format("run: /model/sliding_window {}: sliding-window attention is not lowered yet: the "
                                 "attention blocks visit every key up to the diagonal",
                                 plan.model.sliding_window));
  }
  if (plan.model.mtp_layers > 0) {
    throw InputError(fmt::format("run: /model/mtp_layers {}: multi-token prediction is not lowered yet: its projection, "
                                 "block and second output head (and, in a MoE model, their all-to-alls) are missing",
                                 plan.model.mtp_layers));
  }
  if (plan.parallel.recompute == Recompute::selective && !plan.parallel.recompute_modules.is_default()) {
    throw InputError(fmt::format("run: /parallel/recompute_modules {}: not lowered yet: the runtime's selective recompute "
                                 "reruns the attention core (core_attn) only",
                                 to_string(plan.parallel.recompute_modules)));
  }
  if (!plan.parallel.offload_modules.empty()) {
    throw InputError(fmt::format("run: /parallel/offload_modules {}: fine-grained activation offloading is not lowered yet",
                                 to_string(plan.parallel.offload_modules)));
  }
  if (plan.parallel.offload.any()) {
    throw InputError(fmt::format("run: /parallel/offload {}: offload is not lowered yet: the host copies and the CPU "
                                 "optimizer step are missing",
                                 to_string(plan.parallel.offload)));
  }
  if (rank < 0 || rank >= plan.parallel.gpus()) {
    throw InputError(fmt::format("--rank: {} is outside the plan's {} ranks", rank, plan.parallel.gpus()));
  }
  return Lowerer(plan, rank).run(order);
}

}  // namespace parplan::runtime
