// Offload step-time formulas (sources and overlap rules in offload.hpp).
#include "planner/cost/offload.hpp"

#include <algorithm>

namespace parplan {

double host_link_s(const ClusterSpec& c, double bytes) {
  if (bytes <= 0) return 0.0;
  return c.host_link.latency_s + bytes / c.host_link.effective_Bps();
}

namespace {
// GPUs of the plan on one node: they share its CPUs and its host memory.
double gpus_sharing_host(const Plan& plan) {
  return static_cast<double>(std::min(plan.cluster.gpus_per_node, std::max<int64_t>(plan.num_gpus, 1)));
}
}  // namespace

double cpu_adam_s(const Plan& plan, double owned_params) {
  return owned_params * gpus_sharing_host(plan) / plan.cluster.host_adam_params_per_s;
}

double host_bytes_per_node(const Plan& plan, double host_per_gpu) { return host_per_gpu * gpus_sharing_host(plan); }

bool host_memory_fits(const Plan& plan, double host_per_gpu) {
  return plan.cluster.host_memory_bytes <= 0 ||
         host_bytes_per_node(plan, host_per_gpu) <= static_cast<double>(plan.cluster.host_memory_bytes);
}

OffloadStepTime offload_step_time(const Plan& plan, double owned_params) {
  OffloadStepTime t;
  if (!plan.parallel.offload.optimizer) return t;
  t.grad_bytes = owned_params * static_cast<double>(plan.training.grad_bytes());
  t.param_bytes = plan.parallel.offload.params ? 0.0 : owned_params * 2.0;
  t.grad_d2h_s = host_link_s(plan.cluster, t.grad_bytes);
  t.cpu_optimizer_s = cpu_adam_s(plan, owned_params);
  t.param_h2d_s = host_link_s(plan.cluster, t.param_bytes);
  return t;
}

ActivationOffloadTime activation_offload_time(const ClusterSpec& c, double layer_bytes, double forward_s,
                                              double backward_s) {
  ActivationOffloadTime t;
  t.copy_s = host_link_s(c, layer_bytes);
  t.exposed_forward_s = std::max(0.0, t.copy_s - forward_s);
  t.exposed_backward_s = std::max(0.0, t.copy_s - backward_s);
  return t;
}

double offload_param_fetch_s(const Plan& plan, double shard_params) {
  if (!plan.parallel.offload.params) return 0.0;
  return host_link_s(plan.cluster, shard_params * 2.0);
}

}  // namespace parplan
