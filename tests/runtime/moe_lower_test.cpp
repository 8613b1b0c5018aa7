// Tests for lowering MoE plans: the expert all-to-alls carry the cost model's bytes, the router / shared / expert
// GEMMs are the ones layer_cost() prices, the slots are StageMemory's, the experts' gradients reduce over the
// expert-data-parallel group, and a host run moves exactly those bytes.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "planner/cost/collectives.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/expert_comm.hpp"
#include "planner/spec/config.hpp"
#include "planner/spec/error.hpp"
#include "runtime/executor.hpp"
#include "runtime/measured_timeline.hpp"
#include "runtime/schedule_source.hpp"
#include "test_plan.hpp"

using namespace parplan;
using namespace parplan::runtime;
using parplan::runtime::testing::small_plan;

namespace {

// The small test model with 8 routed experts of ffn 128, top_k each, on dp x tp x pp with ep carved out of dp.
Plan moe_plan(int64_t dp, int64_t tp, int64_t ep, int64_t top_k, bool sp, int64_t pp = 1) {
  Plan p = small_plan(dp, tp, pp);
  p.model.name = "tiny-moe";
  p.model.experts = 8;
  p.model.top_k = top_k;
  p.model.ffn_hidden = 128;
  p.model.ffn_type = FfnType::swiglu;
  p.parallel.ep = ep;
  p.parallel.sequence_parallel = sp;
  return p;
}

Program lower_rank(const Plan& plan, int64_t rank) {
  const int64_t stage = rank / (plan.parallel.tp * plan.parallel.cp * plan.parallel.dp);
  return lower(plan, rank, stage_schedule(plan, stage));
}

bool is(const Op& op, const char* label) { return std::strcmp(op.label, label) == 0; }
bool starts(const Op& op, const char* prefix) { return std::strncmp(op.label, prefix, std::strlen(prefix)) == 0; }

}  // namespace

TEST_CASE("MoE all-to-alls: every rank sends the cost model's bytes (ep 2 / 4, top-k 1 / 2, with and without SP)") {
  struct Case {
    int64_t dp, tp, ep, top_k;
    bool sp;
  };
  for (const Case& c : {Case{2, 1, 2, 1, false}, Case{2, 2, 2, 2, true}, Case{4, 1, 4, 2, false},
                        Case{4, 2, 4, 1, true}, Case{4, 2, 2, 2, false}, Case{4, 2, 2, 1, true}}) {
    const Plan plan = moe_plan(c.dp, c.tp, c.ep, c.top_k, c.sp);
    CAPTURE(c.ep);
    CAPTURE(c.top_k);
    CAPTURE(c.sp);
    REQUIRE(validate(plan).ok());
    const ExpertA2A a2a = layer_expert_a2a(plan);
    const LayerCost lc = layer_cost(plan);
    REQUIRE(a2a.copies_bytes > 0);
    CHECK(lc.ep_bytes == a2a.copies_bytes);  // the cost model prices the same exchange
    const Program prog = lower_rank(plan, 0);
    int a2as = 0;
    double predicted = 0;
    for (const Op& op : prog.ops) {
      if (op.kind != OpKind::collective || op.collective != CollectiveKind::all_to_all) continue;
      ++a2as;
      CHECK(starts(op, "ep."));
      CHECK(op.group == Group::ep);
      CHECK(op.term == Term::ep_comm);
      CHECK(op.bytes == std::llround(a2a.copies_bytes));
      // What the rank sends of it: the copies for the other ep ranks, the cost model's two tiers together.
      CHECK(bytes_sent_per_rank(Collective::all_to_all, static_cast<double>(op.bytes), c.ep) ==
            doctest::Approx(a2a.inter_node_bytes + a2a.intra_node_bytes).epsilon(1e-12));
      if (op.microbatch == 0) predicted += op.predicted_s;
    }
    // Dispatch + combine in forward and in backward, per layer and microbatch.
    CHECK(a2as == 4 * plan.model.layers * plan.parallel.num_microbatches);
    CHECK(predicted == doctest::Approx(plan.model.layers * (lc.ep_comm_forward_s + lc.ep_comm_backward_s)));
    CHECK(group_members(plan.parallel, Group::ep, 0).size() == static_cast<size_t>(c.ep));
  }
}

TEST_CASE("MoE layer GEMMs: router, shared experts and the local experts' grouped GEMMs are layer_cost()'s") {
  Plan plan = moe_plan(2, 2, 2, 2, true);
  plan.model.shared_experts = 1;
  plan.model.dense_layers = 1;
  plan.model.dense_ffn_hidden = 256;
  REQUIRE(validate(plan).ok());
  const LayerCosts lcs = layer_costs(plan);
  const ExpertGemms eg = expert_gemms(plan);
  CHECK(eg.local_experts == 4);
  CHECK(eg.tokens_per_expert == 32 * 2 * 2 / 8);  // T top_k ep / experts
  const Program prog = lower_rank(plan, 0);
  double fwd = 0, fwd_flops = 0, bwd_flops = 0;
  int grouped = 0;
  for (const Op& op : prog.ops) {
    const bool core = starts(op, "attn.") && !starts(op, "attn.out");  // the attention core is priced apart
    if (op.microbatch != 0 || op.kind != OpKind::gemm || core || starts(op, "lm_head")) continue;
    const double flops = 2.0 * static_cast<double>(op.gemm.m * op.gemm.n * op.gemm.k * op.gemm.batch);
    if (op.phase == Phase::forward) {
      fwd += op.predicted_s;
      fwd_flops += flops;
    }
    if (op.phase == Phase::backward) bwd_flops += flops;
    if (op.phase == Phase::forward && starts(op, "moe.experts.")) {
      ++grouped;
      CHECK(op.gemm.batch == eg.local_experts);
      CHECK(op.gemm.m == eg.tokens_per_expert);
    }
  }
  CHECK(grouped == 2 * 3);  // up and down in each of the 3 MoE layers
  // 1 leading dense layer and 3 MoE layers; backward = input + weight gradients of every forward GEMM.
  CHECK(fwd == doctest::Approx(lcs.dense.gemm_forward_s + 3 * lcs.layer.gemm_forward_s).epsilon(1e-12));
  CHECK(bwd_flops == 2 * fwd_flops);
}

TEST_CASE("MoE slots are StageMemory's: expert states, dense and MoE layer stashes") {
  Plan plan = moe_plan(4, 1, 2, 2, false, 2);
  plan.model.dense_layers = 1;
  plan.model.dense_ffn_hidden = 256;
  plan.parallel.distributed_optimizer = true;
  REQUIRE(validate(plan).ok());
  for (int64_t rank : {0, 4}) {
    const Program prog = lower_rank(plan, rank);
    const StageMemory sm = stage_memory(plan, prog.stage);
    int64_t persistent = 0, stash = 0;
    for (const Slot& s : prog.slots) {
      if (s.persistent && !is_allowance(s.kind)) persistent += s.bytes;
      if (s.kind == SlotKind::activations) stash = s.bytes;
    }
    CAPTURE(rank);
    CHECK(std::llabs(persistent - std::llround(sm.weights + sm.grads + sm.optimizer + sm.recompute_working_set)) <= 3);
    CHECK(std::llabs(stash * sm.in_flight_chunks - std::llround(sm.activations)) <= sm.in_flight_chunks);
  }
}

TEST_CASE("MoE gradients: the experts' reduce over the expert-data-parallel group, the rest over dp") {
  for (const bool sharded : {false, true}) {
    Plan plan = moe_plan(4, 1, 2, 2, false);
    plan.parallel.distributed_optimizer = sharded;
    REQUIRE(validate(plan).ok());
    CAPTURE(sharded);
    const PlanParamCounts counts = plan_param_counts(plan);
    const double experts = moe_expert_params(plan, 0, counts.counts);
    const DpCost dc = stage_dp_cost(plan, 0, counts);
    REQUIRE(dc.expert_group == 2);
    REQUIRE(dc.expert_grad_bytes == doctest::Approx(experts * plan.training.grad_bytes()));
    CHECK(group_members(plan.parallel, Group::edp, 1) == std::vector<int64_t>{1, 3});
    CHECK(group_members(plan.parallel, Group::ep, 1) == std::vector<int64_t>{0, 1});
    int64_t dense_bytes = 0, expert_bytes = 0, gathers = 0, buckets = 0;
    for (const Op& op : lower_rank(plan, 1).ops) {
      if (op.term != Term::dp_comm) continue;
      if (is(op, "dp.param_all_gather")) {
        ++gathers;
        CHECK(op.bytes == std::llround(2.0 * (op.group == Group::edp ? experts : stage_params(plan, 0) - experts)));
        continue;
      }
      ++buckets;
      (op.group == Group::edp ? expert_bytes : dense_bytes) += op.bytes;
    }
    CHECK(expert_bytes == std::llround(dc.expert_grad_bytes));
    CHECK(dense_bytes + expert_bytes == std::llround(dc.grad_bytes));
    CHECK(buckets == dc.buckets);
    CHECK(gathers == (sharded ? 2 : 0));
  }
}

TEST_CASE("MoE lowering refuses what it cannot run, naming the field") {
  Plan folded = moe_plan(2, 2, 2, 2, true);
  folded.parallel.etp = 1;
  CHECK_THROWS_WITH_AS(lower_rank(folded, 0), doctest::Contains("/parallel/etp 1"), InputError);
  Plan deepep = moe_plan(2, 1, 2, 2, false);
  deepep.parallel.moe_dispatcher = MoeDispatcher::deepep;
  CHECK_THROWS_WITH_AS(lower_rank(deepep, 0), doctest::Contains("/parallel/moe_dispatcher deepep"), InputError);
  Plan zero3 = moe_plan(2, 1, 2, 2, false);
  zero3.parallel.zero_stage = 3;
  CHECK_THROWS_WITH_AS(lower_rank(zero3, 0), doctest::Contains("/parallel/zero_stage 3"), InputError);
}

TEST_CASE("a MoE plan (8 experts, top-2, ep 4) runs on 4 host ranks: a2a bytes, memory and trace") {
  Plan plan = moe_plan(4, 1, 4, 2, false);
  plan.parallel.distributed_optimizer = true;
  REQUIRE(validate(plan).ok());
  std::vector<Program> progs;
  for (int64_t r = 0; r < 4; ++r) progs.push_back(lower_rank(plan, r));
  auto world = make_host_world(4);
  const RunResult r = execute(*world, progs, ExecOptions{.warmup = 1, .steps = 1});
  REQUIRE(r.ranks.size() == 4);
  const ExpertA2A a2a = layer_expert_a2a(plan);
  const StageMemory sm = stage_memory(plan, 0);
  for (const RankRun& rr : r.ranks) {
    CAPTURE(rr.rank);
    int a2as = 0;
    for (const CollectiveRecord& c : rr.collectives) {
      if (c.kind != CollectiveKind::all_to_all) continue;
      ++a2as;
      CHECK(c.group_size == 4);
      CHECK(c.payload_bytes == std::llround(a2a.copies_bytes));
      CHECK(static_cast<double>(c.bytes_sent) == a2a.inter_node_bytes + a2a.intra_node_bytes);
    }
    CHECK(a2as == 4 * plan.model.layers * plan.parallel.num_microbatches);  // the measured step's
    CHECK(std::llabs(rr.model_peak_bytes() - std::llround(sm.weights + sm.grads + sm.optimizer + sm.activations +
                                                          sm.recompute_working_set)) <= 4);
  }
  const Timeline tl = measured_timeline(r, progs, false);
  REQUIRE(tl.tracks.size() == 1);
  const auto& streams = tl.tracks[0].streams;
  REQUIRE(streams.back().name == "ep");
  CHECK(streams.back().events.size() == static_cast<size_t>(4 * plan.model.layers * plan.parallel.num_microbatches));
  for (const TimelineEvent& e : streams.back().events) CHECK(e.category == EventCategory::ep_comm);
}
