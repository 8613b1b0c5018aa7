// Tests for simulator/simulate with sliding-window attention: stages whose layers mix windowed and full attention run
// the cost model's per-stage times, so the simulated step equals the closed form's.
#include <doctest/doctest.h>

#include <cmath>

#include "planner/cost/cost_model.hpp"
#include "planner/spec/config.hpp"
#include "planner/test_plans.hpp"
#include "simulator/simulate.hpp"

using namespace parplan;
using namespace parplan::sim;

TEST_CASE("simulate: gpt-oss-20b's alternating windowed and full layers equal the closed form per pipeline stage") {
  SimOptions o;
  o.overlap = false;
  o.contention = false;
  o.edges_in_owning_chunk = false;
  int checked = 0;
  for (int64_t p : {4, 8}) {
    for (Schedule s : {Schedule::one_f_one_b, Schedule::interleaved}) {
      Plan plan;
      plan.model = test::profiles().model("gpt-oss-20b", "test");
      plan.gpu = test::profiles().gpu("h100", "test");
      plan.cluster = test::profiles().cluster("dgx-h100", "test");
      plan.cluster.inter_node.bandwidth_Bps = 1e21;
      plan.cluster.inter_node.latency_s = 0;
      plan.num_gpus = p;
      plan.parallel.pp = p;
      plan.parallel.schedule = s;
      plan.parallel.vpp = s == Schedule::interleaved ? 2 : 1;
      plan.parallel.num_microbatches = 2 * p;
      plan.parallel.overlap_dp_comm = plan.parallel.overlap_tp_comm = plan.parallel.overlap_cp_comm = false;
      plan.training.global_batch = 2 * p;
      plan.training.seq_len = 8192;
      CAPTURE(p);
      CAPTURE(to_string(s));
      if (!validate(plan).ok()) continue;  // interleaved pp 8: 24 layers do not split into 16 chunks
      ++checked;
      const Estimate e = estimate(plan);
      const SimResult r = simulate(plan, o);
      CHECK(std::abs(r.summary.step_s / e.time.step_s - 1.0) < 1e-3);
      // The stages differ by their full-attention layers alone (pp 8: 3 layers each, 1 or 2 full).
      if (p == 8 && s == Schedule::one_f_one_b) CHECK(e.stages[1].forward_s > e.stages[2].forward_s);
    }
  }
  CHECK(checked == 3);
}

TEST_CASE("simulate: a dense model's alternating windowed and full layers equal the closed form per pipeline stage") {
  SimOptions o;
  o.overlap = false;
  o.contention = false;
  o.edges_in_owning_chunk = false;
  Plan plan;
  plan.model = test::profiles().model("llama3-8b", "test");
  plan.model.sliding_window = 1024;
  plan.model.sliding_window_pattern = 2;
  plan.gpu = test::profiles().gpu("h100", "test");
  plan.cluster = test::profiles().cluster("dgx-h100", "test");
  plan.num_gpus = 4;
  plan.parallel.pp = 4;
  plan.parallel.num_microbatches = 8;
  plan.parallel.overlap_dp_comm = plan.parallel.overlap_tp_comm = plan.parallel.overlap_cp_comm = false;
  plan.training.global_batch = 8;
  plan.training.seq_len = 16384;
  REQUIRE(validate(plan).ok());
  Plan all = plan;
  all.model.sliding_window_pattern = 0;
  const Estimate e = estimate(plan), ea = estimate(all);
  const SimResult r = simulate(plan, o);
  CHECK(std::abs(r.summary.step_s / e.time.step_s - 1.0) < 1e-3);
  // Half the layers attend in full: slower than every layer windowed, in the closed form and in the simulator.
  CHECK(e.time.step_s > ea.time.step_s * 1.01);
  CHECK(r.summary.step_s > simulate(all, o).summary.step_s * 1.01);
  CHECK(e.stages[1].forward_s > ea.stages[1].forward_s);
}
