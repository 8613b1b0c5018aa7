// Tests for HSDP (ParallelConfig::dp_replicate): model states over the shard group, the replica all-reduce of each
// gradient shard, the shard and replica groups of the rank layout.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "planner/cost/collectives.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/estimate_json.hpp"
#include "planner/cost/layout.hpp"
#include "planner/spec/config.hpp"
#include "planner/spec/plan_json.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
// Llama 3 8B on 256 H100s (32 DGX nodes of 8): tp 1, dp 256, ZeRO `zero` (3: FSDP2), micro-batch 1, 2 microbatches,
// replicated `r` times (shard group 256 / r).
Plan llama8b_dp256(int zero, int64_t r) {
  Plan p;
  p.model = test::profiles().model("llama3-8b", "test");
  p.gpu = test::profiles().gpu("h100", "test");
  p.cluster = test::profiles().cluster("dgx-h100", "test");
  p.num_gpus = 256;
  p.parallel.dp = 256;
  p.parallel.zero_stage = zero;
  p.parallel.fsdp2 = zero == 3;
  p.parallel.dp_replicate = r;
  p.parallel.num_microbatches = 2;
  p.training.global_batch = 512;
  return p;
}
}  // namespace

TEST_CASE("HSDP layout: the shard group is dp / r x cp ranks inside a block, the replica group strides across blocks") {
  // tp 2, cp 1, dp 8 as 2 replicas of 4: rank = tp_i + 2 (shard_i + 4 replica_i).
  ParallelConfig pc;
  pc.tp = 2;
  pc.dp = 8;
  pc.dp_replicate = 2;
  CHECK(pc.dp_shard() == 4);
  CHECK(pc.shard_group() == 4);
  CHECK(group_ranks(pc, GroupKind::dp_cp, 0) == std::vector<int64_t>{0, 2, 4, 6});
  CHECK(group_ranks(pc, GroupKind::dp_cp, 13) == std::vector<int64_t>{9, 11, 13, 15});
  CHECK(group_ranks(pc, GroupKind::dp_replicate, 0) == std::vector<int64_t>{0, 8});
  CHECK(group_ranks(pc, GroupKind::dp_replicate, 13) == std::vector<int64_t>{5, 13});
  ClusterSpec nodes;
  nodes.gpus_per_node = 8;
  CHECK_FALSE(group_crosses_domain(pc, GroupKind::dp_cp, nodes));  // one node per shard group
  CHECK(group_crosses_domain(pc, GroupKind::dp_replicate, nodes));
  CHECK(dp_reduction_crosses_domain(pc, nodes));
  // With cp the shard group takes every cp index of its dp shard: cp 2, dp 4 as 2 x 2, tp 1.
  ParallelConfig cp;
  cp.cp = 2;
  cp.dp = 4;
  cp.dp_replicate = 2;
  CHECK(group_ranks(cp, GroupKind::dp_cp, 0) == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(group_ranks(cp, GroupKind::dp_replicate, 1) == std::vector<int64_t>{1, 5});
}

TEST_CASE("HSDP memory: each GPU holds 1/F of the sharded model states, F the shard group (Zhao et al. 2023 3.2.2)") {
  // FSDP over 256 ranks vs 32 replicas of 8: the sharded states (ZeRO-3 parameters, gradients and optimizer; ZeRO-1
  // the optimizer) are 256 / 8 = 32 times larger, and equal to a plain dp 8 plan's, which shards over the same 8.
  for (int zero : {1, 3}) {
    CAPTURE(zero);
    const Plan fsdp = llama8b_dp256(zero, 1), hsdp = llama8b_dp256(zero, 32);
    REQUIRE(validate(fsdp).ok());
    REQUIRE(validate(hsdp).ok());
    Plan dp8 = llama8b_dp256(zero, 1);
    dp8.parallel.dp = 8;
    dp8.num_gpus = 8;
    dp8.training.global_batch = 16;
    const StageMemory f = estimate(fsdp).memory.at(0), h = estimate(hsdp).memory.at(0), d8 = estimate(dp8).memory.at(0);
    CHECK(h.optimizer == doctest::Approx(32.0 * f.optimizer));
    CHECK(h.optimizer == doctest::Approx(d8.optimizer));
    CHECK(h.weights == doctest::Approx(zero == 3 ? 32.0 * f.weights : f.weights));
    CHECK(h.weights == doctest::Approx(d8.weights));
    CHECK(h.grads == doctest::Approx(d8.grads));
  }
}

TEST_CASE("HSDP communication: reduce-scatter over the shard group, each 1/F shard all-reduced over the r replicas") {
  for (int zero : {1, 3}) {
    CAPTURE(zero);
    const Plan p = llama8b_dp256(zero, 32);
    const double params = stage_params(p, 0);
    const DpCost dc = dp_cost(p, params);
    const double grads = params * static_cast<double>(p.training.grad_bytes());
    CHECK(dc.group == 8);
    CHECK(dc.replica_group == 32);
    CHECK(dc.grad_bytes == doctest::Approx(grads));
    CHECK(dc.replica_bytes == doctest::Approx(grads / 8.0));
    // The shard group is one node (NVLink); the replica group has one rank per node (the NIC).
    const double rs = collective_time_s(Collective::reduce_scatter, grads, 8, p.cluster.intra_node);
    const double ar = collective_time_s(Collective::all_reduce, grads / 8.0, 32, p.cluster.inter_node);
    CHECK(dc.replica_reduce_s == doctest::Approx(ar).epsilon(1e-12));
    CHECK(dc.grad_reduce_s == doctest::Approx(rs + ar).epsilon(1e-12));
    // The all-reduce runs as often as the reduce-scatter: every microbatch under FSDP (ZeRO-3 without pp), once a
    // step under ZeRO-1 (Megatron-Core's partial distributed optimizer), whose updated parameters are gathered over
    // the shard group only.
    const Estimate e = estimate(p);
    const nlohmann::json j = estimate_to_json(p, e).at("time").at("hsdp");
    CHECK(j.at("replica_group") == 32);
    CHECK(j.at("replica_all_reduce_s").get<double>() == doctest::Approx(ar).epsilon(1e-12));
    if (zero == 3) {
      CHECK(dc.per_microbatch);
      CHECK(e.time.dp_comm_total_s == doctest::Approx(2.0 * dc.grad_reduce_s).epsilon(1e-9));
    } else {
      CHECK_FALSE(dc.per_microbatch);
      CHECK(dc.param_gather_s ==
            doctest::Approx(collective_time_s(Collective::all_gather, 2.0 * params, 8, p.cluster.intra_node)));
      CHECK(e.time.dp_comm_total_s == doctest::Approx(dc.grad_reduce_s + dc.param_gather_s).epsilon(1e-9));
    }
  }
  // dp_replicate 1: no replica term, the reduction over all dp ranks as before.
  const DpCost plain = dp_cost(llama8b_dp256(3, 1), 1e9);
  CHECK(plain.group == 256);
  CHECK(plain.replica_group == 1);
  CHECK(plain.replica_reduce_s == 0);
  CHECK_FALSE(estimate_to_json(llama8b_dp256(3, 1), estimate(llama8b_dp256(3, 1))).at("time").contains("hsdp"));
}

TEST_CASE("HSDP validity: dp_replicate divides dp, leaves a shard group, needs sharding, no split experts") {
  CHECK(validate(llama8b_dp256(3, 32)).ok());
  CHECK(validate(llama8b_dp256(1, 2)).ok());
  for (int64_t r : {0, -1, 3, 256}) {
    CAPTURE(r);
    CHECK(validate(llama8b_dp256(3, r)).has(Reject::dp_replicate_invalid));
  }
  CHECK(validate(llama8b_dp256(0, 32)).has(Reject::dp_replicate_invalid));
  Plan dist = llama8b_dp256(0, 32);
  dist.parallel.distributed_optimizer = true;
  CHECK(validate(dist).ok());
  Plan linear = llama8b_dp256(3, 32);
  linear.parallel.fsdp2 = false;
  linear.parallel.zero3_gather_unit = Zero3GatherUnit::linear;
  CHECK(validate(linear).has(Reject::dp_replicate_invalid));
  Plan moe = llama8b_dp256(1, 32);
  moe.model = test::profiles().model("mixtral-8x7b", "test");
  CHECK(validate(moe).ok());  // ep 1: the experts are sharded and replicated as the rest
  moe.parallel.ep = 8;
  CHECK(validate(moe).has(Reject::dp_replicate_invalid));
}

TEST_CASE("HSDP plan JSON: dp_replicate round-trips, and is omitted at 1 (the documents before HSDP)") {
  const Plan hsdp = llama8b_dp256(3, 32);
  const nlohmann::json j = plan_to_json(hsdp);
  CHECK(j.at("parallel").at("dp_replicate") == 32);
  CHECK_FALSE(plan_to_json(llama8b_dp256(3, 1)).at("parallel").contains("dp_replicate"));
  CHECK(plan_from_text(j.dump(), test::profiles(), "t").parallel.dp_replicate == 32);
}
