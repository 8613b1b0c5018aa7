// Plan -> StepCosts from the planner's cost functions (see costs.hpp).
#include "simulator/costs.hpp"

#include <algorithm>

#include "planner/spec/config.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/layout.hpp"
#include "planner/cost/zero3.hpp"

namespace parplan::sim {
namespace {

double d(int64_t x) { return static_cast<double>(x); }

}  // namespace

StepCosts step_costs(const Plan& plan, const CostOptions& opt) {
  const ParallelConfig& pc = plan.parallel;
  const int64_t p = pc.pp;
  const int64_t v = pc.chunks_per_stage();
  const Estimate e = estimate(plan);
  const EdgeCost& edge = e.edge;

  StepCosts sc;
  sc.p2p_s = p > 1 ? e.p2p_s : 0.0;
  sc.p2p_bytes = static_cast<int64_t>(e.p2p_bytes);
  sc.p2p_blocking = opt.blocking_p2p || !pc.overlaps_p2p();
  sc.dp_overlap = pc.overlap_dp_comm;
  const int32_t pp_tier = group_crosses_domain(pc, GroupKind::pp, plan.cluster) ? 1 : 0;
  const int32_t dp_tier = dp_reduction_crosses_domain(pc, plan.cluster) ? 1 : 0;

  const PlanParamCounts counts = plan_param_counts(plan);
  std::vector<double> params(static_cast<size_t>(p));
  for (int64_t i = 0; i < p; ++i) params[static_cast<size_t>(i)] = stage_params(plan, i, counts);

  sc.stages.resize(static_cast<size_t>(p));
  for (int64_t i = 0; i < p; ++i) {
    StageCosts& st = sc.stages[static_cast<size_t>(i)];
    st.pp_tier = pp_tier;
    st.dp_tier = dp_tier;
    // The stage's mean layer (its dense layers, a MoE model's leading ones, and with recompute_layers its recomputed
    // ones spread evenly over its chunks); an explicit per-chunk layout gives each chunk its own layers (chunk_layers).
    const LayerCost lc = stage_layer_cost(plan, i, e.layer_costs());
    const bool uneven = uneven_chunks(plan, i);
    const double n = d(std::max<int64_t>(1, stage_layers(plan, i)));
    // The share of its layers full recompute reruns (all of them, or recompute_layers' per chunk), whose ZeRO-3
    // parameters are gathered a third time where the recomputed forward gathers again (recompute_regathers).
    const double rerun = recompute_regathers(pc) ? d(stage_recomputed_layers(plan, i).layers) / n : 0.0;
    st.layers_per_chunk = std::max<int64_t>(1, stage_layers(plan, i) / v);
    st.chunks.resize(static_cast<size_t>(v));
    for (int64_t c = 0; c < v; ++c) {
      ChunkCosts& cc = st.chunks[static_cast<size_t>(c)];
      const double Lc = uneven ? d(chunk_layers(plan, i, c)) : d(stage_layers(plan, i)) / d(v);
      cc.forward_s = Lc * lc.forward_s;
      cc.forward_comm_s = Lc * lc.exposed_forward_comm_s;
      cc.backward_input_s = Lc * lc.backward_input_s;
      cc.backward_comm_s = Lc * lc.exposed_backward_comm_s;
      cc.backward_weight_s = Lc * lc.backward_weight_s;
      cc.recompute_s = Lc * lc.recompute_s;
      cc.recompute_comm_s = Lc * lc.exposed_recompute_comm_s;
      if (pc.overlap_tp_comm && pc.tp > 1) {
        cc.tp_overlapped_forward_s = Lc * lc.tp_comm_forward_s;
        cc.tp_overlapped_backward_s = Lc * lc.tp_comm_backward_s;
      }
      if (pc.overlap_cp_comm && pc.cp > 1) {
        cc.cp_overlapped_forward_s = Lc * lc.cp_comm_forward_s;
        cc.cp_overlapped_backward_s = Lc * lc.cp_comm_backward_s;
      }
      cc.exposed_tp_s = Lc * lc.exposed_tp_s;
      cc.exposed_cp_s = Lc * lc.exposed_cp_s;
      cc.exposed_ep_s = Lc * lc.exposed_ep_s;
      cc.ep_forward_s = Lc * lc.ep_comm_forward_s;
      cc.ep_backward_s = Lc * lc.ep_comm_backward_s;
      cc.exposed_zero3_s = Lc * lc.exposed_zero3_s;
      cc.exposed_offload_s = Lc * lc.exposed_offload_s;
      cc.exposed_offload_forward_s = Lc * lc.exposed_offload_forward_s;
      cc.host_copy_s = Lc * lc.activation_copy_s;
      cc.zero3_gather_forward_s = cc.zero3_gather_backward_s = Lc * lc.zero3_gather_s;
      cc.zero3_gather_recompute_s = rerun * Lc * lc.zero3_gather_s;
      // Embedding (first stage) and output layer (output_stage(): the last; ZB-V the first): in the chunk that owns
      // them, or spread evenly.
      // Spread: as the closed form spreads the stage's time, in the chunks' layer fractions.
      const double spread = uneven ? Lc / n : 1.0 / d(v);
      const double share_first = opt.edges_in_owning_chunk ? (c == 0 ? 1.0 : 0.0) : spread;
      const double share_last = opt.edges_in_owning_chunk ? (c == v - 1 ? 1.0 : 0.0) : spread;
      if (i == 0) {
        cc.forward_s += share_first * edge.embedding_forward_s;
        cc.backward_input_s += share_first * edge.embedding_backward_s;
      }
      if (i == pc.output_stage()) {
        cc.forward_s += share_last * edge.output_forward_s;
        cc.backward_input_s += share_last * edge.output_backward_s;
        cc.forward_comm_s += share_last * edge.output_tp_comm_s;
        cc.backward_comm_s += share_last * edge.output_tp_comm_backward_s;
        cc.exposed_tp_s += share_last * (edge.output_tp_comm_s + edge.output_tp_comm_backward_s);
      }
    }
    const double experts = moe_expert_params(plan, i, counts.counts);
    const DpCost dc = dp_cost(plan, params[static_cast<size_t>(i)], experts);
    if (dc.group > 1 && dc.grad_reduce_s > 0) {
      st.dp_buckets = dc.buckets;
      st.dp_bucket_s = dc.bucket_s;
      st.dp_bucket_bytes = static_cast<int64_t>(dc.grad_bytes / d(std::max<int64_t>(1, dc.buckets)));
      st.dp_per_microbatch = dc.per_microbatch;
      st.param_gather_s = dc.param_gather_s;
    }
    st.optimizer_s = optimizer_step_s(plan, params[static_cast<size_t>(i)], experts);
    if (plan.parallel.offload.optimizer) {
      const OffloadStepTime off = stage_offload_step(plan, params[static_cast<size_t>(i)], experts);
      st.grad_to_host_s = off.grad_d2h_s;
      st.optimizer_s = off.cpu_optimizer_s + fsdp2_step_copies_s(plan, params[static_cast<size_t>(i)], experts);
      st.params_to_gpu_s = off.param_h2d_s;
    }
    st.embedding_grad_s = embedding_grad_sync_s(plan, i);
  }
  return sc;
}

}  // namespace parplan::sim
