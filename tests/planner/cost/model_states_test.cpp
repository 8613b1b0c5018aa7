// Tests for planner/model_states: pinned to the ZeRO paper's 7.5B-on-64-GPUs figures (Rajbhandari et al. 2020 Fig. 1).
#include <doctest/doctest.h>

#include "planner/cost/model_states.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

TEST_CASE("ZeRO paper Figure 1: 7.5B parameters on 64 GPUs: 120 / 31.4 / 16.6 / 1.9 GB") {
  ModelStateOptions o;  // 2-byte weights, 2-byte grads, K = 12
  const double psi = 7.5e9;
  o.zero_stage = 0;
  CHECK(model_state_bytes(psi, 64, o).total() / 1e9 == doctest::Approx(120.0).epsilon(1e-9));
  o.zero_stage = 1;
  CHECK(model_state_bytes(psi, 64, o).total() / 1e9 == doctest::Approx(31.4).epsilon(0.002));
  o.zero_stage = 2;
  CHECK(model_state_bytes(psi, 64, o).total() / 1e9 == doctest::Approx(16.6).epsilon(0.003));
  o.zero_stage = 3;
  CHECK(model_state_bytes(psi, 64, o).total() / 1e9 == doctest::Approx(1.9).scale(0).epsilon(0.02));
}

TEST_CASE("175B with Adam: 2.8 TB of model states, 43.75 GB per GPU fully sharded over 64") {
  ModelStateOptions o;
  o.zero_stage = 3;
  CHECK(model_state_bytes(175e9, 1, o).total() / 1e12 == doctest::Approx(2.8));
  CHECK(model_state_bytes(175e9, 64, o).total() / 1e9 == doctest::Approx(43.75));
}

TEST_CASE("distributed optimizer shards only the optimizer state; fp32 grads take 4 bytes") {
  ModelStateOptions o;
  o.distributed_optimizer = true;
  o.grad_bytes = 4;
  const ModelStateBytes b = model_state_bytes(1e9, 8, o);
  CHECK(b.weights == doctest::Approx(2e9));
  CHECK(b.grads == doctest::Approx(4e9));
  CHECK(b.optimizer == doctest::Approx(12e9 / 8));
}

TEST_CASE("Adam step traffic: 2K bytes of fp32 states (ZeRO's K = 12), the gradient read twice, the 16-bit weight written") {
  ModelStateOptions o;  // 16-bit grads
  OptimizerStepBytes b = optimizer_step_bytes(1e9, 64, o);
  CHECK(b.states == doctest::Approx(24e9));  // 2 x K with K = 12 (Rajbhandari et al. 2020 Sec. 3.1)
  CHECK(b.grads == doctest::Approx(4e9));    // clip-norm pass + Adam, 2 bytes each
  CHECK(b.weights == doctest::Approx(2e9));
  CHECK(b.total() / 1e9 == doctest::Approx(30.0));
  o.grad_bytes = 4;  // fp32 main_grad
  CHECK(optimizer_step_bytes(1e9, 64, o).total() / 1e9 == doctest::Approx(34.0));
  // A sharded optimizer (ZeRO-1..3, distributed optimizer) updates only this rank's 1/N; the state bytes stay
  // 2 x the optimizer memory model_state_bytes() gives for the same shard.
  o.distributed_optimizer = true;
  b = optimizer_step_bytes(1e9, 64, o);
  CHECK(b.total() / 1e9 == doctest::Approx(34.0 / 64));
  CHECK(b.states == doctest::Approx(2.0 * model_state_bytes(1e9, 64, o).optimizer));
  o.distributed_optimizer = false;
  o.zero_stage = 3;
  CHECK(optimizer_step_bytes(1e9, 8, o).total() == doctest::Approx(34e9 / 8));
}

// Megatron-Core docs, "Distributed Optimizer" (megatron/core docs/source/api-guide/dist_optimizer.md), bytes per
// parameter: bf16 parameters with fp32 gradients take 18 without the distributed optimizer and 6 + 12/d with it.
// Reduced in bf16 (Megatron-LM --grad-reduce-in-bf16) the gradient takes 2: 4 + 12/d.
TEST_CASE("Megatron distributed optimizer table: bf16 params, fp32 grads 18 -> 6 + 12/d; bf16 grads 4 + 12/d") {
  ModelStateOptions o;
  o.grad_bytes = 4;
  CHECK(model_state_bytes(1.0, 1, o).total() == doctest::Approx(18.0));
  o.distributed_optimizer = true;
  CHECK(model_state_bytes(1.0, 8, o).total() == doctest::Approx(6.0 + 12.0 / 8));
  o.grad_bytes = 2;
  CHECK(model_state_bytes(1.0, 8, o).total() == doctest::Approx(4.0 + 12.0 / 8));
}

// Megatron-Core's precision-aware optimizer with bf16 moments (--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16; the
// DeepSeek-V3 report, arXiv:2412.19437 Sec. 3.3.2: "BF16 for the first and second moments", fp32 master weights):
// K = 4 + 2 + 2 = 8 bytes per parameter instead of 12; the Adam step reads and writes 2K.
TEST_CASE("bf16 Adam moments: K = 8 bytes per parameter, the step's state traffic 16") {
  ModelStateOptions o;
  o.optimizer_bytes = 4 + 2 * 2;
  o.distributed_optimizer = true;
  o.grad_bytes = 4;
  CHECK(model_state_bytes(1.0, 8, o).total() == doctest::Approx(6.0 + 8.0 / 8));
  CHECK(optimizer_step_bytes(1.0, 1, o).states == doctest::Approx(16.0));
}

TEST_CASE("a plan's Adam moments dtype sets K: fp32 12, bf16 8, fp8 6") {
  Plan p = test::korthikanti_175b();
  CHECK(model_state_options(p).optimizer_bytes == 12);
  p.training.adam_moments = DType::bf16;
  CHECK(model_state_options(p).optimizer_bytes == 8);
  p.training.adam_moments = DType::fp8;
  CHECK(model_state_options(p).optimizer_bytes == 6);
}
