// ZeRO-3 gather units: parameter shares, buffer memory and the one-ahead prefetch recurrence (see zero3.hpp).
#include "planner/cost/zero3.hpp"

#include <algorithm>

#include "planner/cost/layout.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/cost/model_states.hpp"

namespace parplan {

namespace {
double d(int64_t x) { return static_cast<double>(x); }
}  // namespace

std::array<double, kZero3Linears> zero3_linear_shares(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& pc = plan.parallel;
  const ParamCounts c = count_params(m);
  const double tp = d(pc.tp);
  // Each local expert's MLP is split by the expert tp (etp under folding, else tp).
  const double local = d(m.experts / pc.ep), experts = !m.is_moe() ? 1.0 : pc.etp > 0 ? local * tp / d(pc.etp) : local;
  // The MoE router gathers with the MLP's first linear, the shared experts with the MLP's linears; MLA's
  // down-projections (whole on every tp rank) with the QKV projections.
  const double shared = d(m.is_moe() ? m.shared_experts : 0);
  const std::array<double, kZero3Linears> w = {
      d(c.qkv - c.qkv_replicated) / tp + d(c.qkv_replicated), d(c.attn_out) / tp,
      d(c.mlp_up) / tp * (experts + shared) + d(c.router), d(c.mlp_down) / tp * (experts + shared)};
  const double sum = w[0] + w[1] + w[2] + w[3];
  std::array<double, kZero3Linears> s{};
  for (int k = 0; k < kZero3Linears; ++k) s[static_cast<size_t>(k)] = w[static_cast<size_t>(k)] / sum;
  return s;
}

double zero3_gathered_params(const Plan& plan, double layer_params) {
  if (plan.parallel.zero3_gather_unit == Zero3GatherUnit::layer) return 2.0 * layer_params;
  const auto s = zero3_linear_shares(plan);
  double pair = 0;
  for (size_t k = 0; k < s.size(); ++k) pair = std::max(pair, s[k] + s[(k + 1) % s.size()]);
  return pair * layer_params;
}

bool recompute_regathers(const ParallelConfig& pc) { return pc.zero3_gather_unit == Zero3GatherUnit::linear; }

double zero3_unsharded_grad_params(const Plan& plan, double layer_params) {
  if (plan.parallel.zero3_gather_unit == Zero3GatherUnit::layer) return layer_params;
  const auto s = zero3_linear_shares(plan);
  return *std::max_element(s.begin(), s.end()) * layer_params;
}

double zero_unsharded_grad_bytes(const Plan& plan, double layer_params) {
  if (plan.parallel.step_zero_stage() < 2) return 0.0;
  return d(plan.training.grad_bytes()) * zero3_unsharded_grad_params(plan, layer_params);
}

double zero3_buffer_bytes(const Plan& plan, double layer_params) {
  if (plan.parallel.step_zero_stage() < 3) return 0.0;
  return gathered_param_bytes(plan) * zero3_gathered_params(plan, layer_params) + zero_unsharded_grad_bytes(plan, layer_params);
}

Fsdp2CopyBytes fsdp2_copy_bytes(const Plan& plan, double params, double expert_params) {
  const ParallelConfig& pc = plan.parallel;
  if (!pc.fsdp2 || pc.zero_stage != 3) return {};
  const double g = gathered_param_bytes(plan), copy_out = 2.0 * g;
  const double copy_in =
      (4.0 + g) * ((params - expert_params) / d(pc.shard_group()) + expert_params / d(expert_dp_size(pc)));
  return {copy_in + copy_out * params, (2.0 + d(plan.training.grad_bytes())) * params};
}

double zero3_root_gathered_bytes(const Plan& plan, double root_params) {
  if (plan.parallel.step_zero_stage() < 3 || plan.parallel.zero3_gather_unit != Zero3GatherUnit::layer) return 0.0;
  return gathered_param_bytes(plan) * root_params;
}

double zero3_prefetch_layer_s(std::span<const Zero3Step> per_layer) {
  const size_t n = per_layer.size();
  if (n == 0) return 0.0;
  bool reduces = false;
  double no_queue = 0;
  for (size_t j = 0; j < n; ++j) {
    reduces = reduces || per_layer[j].reduce_s > 0;
    no_queue += std::max(per_layer[j].compute_s, per_layer[(j + 1) % n].gather_s);
  }
  if (!reduces) return no_queue;
  // Follow the link and the compute stream for enough layers that the rate settles (the state is the link's
  // backlog, which either stays bounded or grows by a fixed amount per layer), then take the last layers' mean.
  constexpr int kLayers = 48, kMeasured = 24;
  double gather_done = per_layer[0].gather_s, link = gather_done, compute = 0, at_measure = 0;
  for (int l = 0; l < kLayers; ++l) {
    if (l == kLayers - kMeasured) at_measure = compute;
    for (size_t j = 0; j < n; ++j) {
      const double start = std::max(compute, gather_done);
      const Zero3Step& next = per_layer[(j + 1) % n];
      const double next_done = std::max(link, start) + next.gather_s;  // one ahead, issued as this unit starts
      link = next_done;
      compute = start + per_layer[j].compute_s;
      if (per_layer[j].reduce_s > 0) link = std::max(link, compute) + per_layer[j].reduce_s;
      gather_done = next_done;
    }
  }
  return (compute - at_measure) / kMeasured;
}

}  // namespace parplan
