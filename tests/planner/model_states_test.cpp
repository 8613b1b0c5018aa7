// Tests for planner/model_states: pinned to the ZeRO paper's 7.5B-on-64-GPUs figures (Rajbhandari et al. 2020 Fig. 1).
#include <doctest/doctest.h>

#include "planner/model_states.hpp"

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
  CHECK(model_state_bytes(psi, 64, o).total() / 1e9 == doctest::Approx(1.9).epsilon(0.02));
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
