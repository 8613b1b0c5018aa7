// Model-state memory (formulas and sources in model_states.hpp).
#include "planner/cost/model_states.hpp"

namespace parplan {

ModelStateBytes model_state_bytes(double params, int64_t shard, const ModelStateOptions& o) {
  const double n = static_cast<double>(shard < 1 ? 1 : shard);
  ModelStateBytes b;
  b.weights = params * static_cast<double>(o.weight_bytes + o.extra_weight_bytes);
  b.grads = params * static_cast<double>(o.grad_bytes);
  b.optimizer = params * static_cast<double>(o.optimizer_bytes);
  if (o.zero_stage >= 1 || o.distributed_optimizer) b.optimizer /= n;
  if (o.zero_stage >= 2) b.grads /= n;
  if (o.zero_stage >= 3) b.weights /= n;
  if (o.offload.optimizer) {
    b.host = b.optimizer + (o.zero_stage >= 2 ? b.grads : b.grads / n);
    b.optimizer = 0;
    if (o.zero_stage >= 2) b.grads = 0;
  }
  if (o.offload.params && o.zero_stage >= 3) {
    b.host += b.weights;
    b.weights = 0;
  }
  return b;
}

OptimizerStepBytes optimizer_step_bytes(double params, int64_t shard, const ModelStateOptions& o) {
  const bool sharded = o.zero_stage >= 1 || o.distributed_optimizer;
  const double owned = sharded ? params / static_cast<double>(shard < 1 ? 1 : shard) : params;
  OptimizerStepBytes b;
  b.states = owned * 2.0 * static_cast<double>(o.optimizer_bytes);
  b.grads = owned * (o.clip_scales_always ? 4.0 : 2.0) * static_cast<double>(o.grad_bytes);
  b.weights = owned * static_cast<double>(o.weight_bytes);
  return b;
}

ModelStateOptions model_state_options(const Plan& plan) {
  ModelStateOptions o;
  o.zero_stage = plan.parallel.step_zero_stage();
  o.distributed_optimizer = plan.parallel.distributed_optimizer;
  o.weight_bytes = 2;
  o.grad_bytes = plan.training.grad_bytes();
  o.optimizer_bytes = 4 + 2 * dtype_bytes(plan.training.adam_moments);  // fp32 master + the two moments
  // Transformer Engine caches the fp8 weight and its transpose across microbatches; torchao casts one copy per forward.
  if (plan.training.precision == Precision::fp8 && !plan.training.fp8_param_gather) {
    o.extra_weight_bytes = plan.training.fp8_saved_inputs ? 2 : 1;
  }
  o.offload = plan.parallel.offload;
  o.clip_scales_always = plan.parallel.fsdp2;  // FSDP2 plans run PyTorch's clip_grad_norm_ (torchtitan)
  return o;
}

double gathered_param_bytes(const Plan& plan) { return plan.training.fp8_param_gather ? 1.0 : 2.0; }

}  // namespace parplan
