// Tests for lowering: GEMM shapes and memory traffic priced like layer_cost(), collective payloads from the cost
// model, slots equal to StageMemory, schedule order kept.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "planner/spec/config.hpp"
#include "planner/cost/collectives.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/layout.hpp"
#include "planner/spec/error.hpp"
#include "planner/cost/gemm.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/cost/zero3.hpp"
#include "runtime/lower.hpp"
#include "test_plan.hpp"

using namespace parplan;
using namespace parplan::runtime;
using parplan::runtime::testing::one_f_one_b;
using parplan::runtime::testing::small_plan;

namespace {

Program lower_rank(const Plan& plan, int64_t rank) {
  const int64_t stage = rank / (plan.parallel.tp * plan.parallel.cp * plan.parallel.dp);
  return lower(plan, rank, one_f_one_b(plan.parallel.pp, plan.parallel.num_microbatches, stage));
}

bool is(const Op& op, const char* label) { return std::strcmp(op.label, label) == 0; }

}  // namespace

TEST_CASE("group members follow the planner's layout and colours separate groups") {
  const Plan plan = small_plan();
  const ParallelConfig& pc = plan.parallel;
  CHECK(group_members(pc, Group::tp, 5) == std::vector<int64_t>{4, 5});
  CHECK(group_members(pc, Group::dp_cp, 5) == std::vector<int64_t>{5, 7});
  CHECK(group_members(pc, Group::pp, 5) == std::vector<int64_t>{1, 5});
  std::set<int> colors;
  for (int64_t r = 0; r < 8; ++r) {
    for (int g = 0; g < kNumGroups; ++g) colors.insert(group_color(pc, static_cast<Group>(g), r));
  }
  // tp, cp (cp = 1: 8 singletons), dp, pp, ep (8 singletons), edp = dp, dp_replica (no HSDP: 8 singletons)
  CHECK(colors.size() == 4 + 8 + 4 + 4 + 8 + 4 + 8);
  CHECK(group_members(pc, Group::edp, 5) == group_members(pc, Group::dp_cp, 5));  // a dense model: ep 1
}

TEST_CASE("HSDP: states shard over the shard group, each reduced shard all-reduced across the replicas") {
  // dp 4 as 2 replicas of 2 (tp 2): ranks tp + 2 dp, the replica dp / 2 (layout tp, cp, dp_shard, dp_replicate).
  Plan plan = small_plan(4, 2, 1, 2);
  plan.parallel.zero_stage = 3;
  plan.parallel.dp_replicate = 2;
  REQUIRE(validate(plan).ok());
  const ParallelConfig& pc = plan.parallel;
  CHECK(group_members(pc, Group::dp_cp, 5) == std::vector<int64_t>{5, 7});     // dp 2, 3: replica 1
  CHECK(group_members(pc, Group::dp_replica, 5) == std::vector<int64_t>{1, 5});  // dp 0 and 2: shard place 0
  CHECK(group_members(pc, Group::dp_replica, 2) == std::vector<int64_t>{2, 6});
  const DpCost dc = dp_cost(plan, stage_params(plan, 0));
  REQUIRE(dc.group == 2);
  REQUIRE(dc.replica_group == 2);
  int64_t rs = 0, ar = 0, gathers = 0;
  int replicas = 0;
  for (const Op& op : lower_rank(plan, 5).ops) {
    if (is(op, "dp.reduce_scatter")) rs += op.bytes;
    if (is(op, "dp.replica_all_reduce")) {
      ++replicas;
      ar += op.bytes;
      CHECK(op.group == Group::dp_replica);
      CHECK(op.collective == CollectiveKind::all_reduce);
      CHECK(op.predicted_s == doctest::Approx(collective_time_s(Collective::all_reduce, static_cast<double>(op.bytes), 2,
                                                                group_link(plan, GroupKind::dp_replicate))));
    }
    if (is(op, "zero3.all_gather")) {
      ++gathers;
      CHECK(op.group == Group::dp_cp);
    }
  }
  // ZeRO-3 reduces every microbatch (2): the planner's bytes per reduction twice, the replica part 1/2 of them.
  CHECK(rs == std::llround(2 * dc.grad_bytes));
  CHECK(ar == std::llround(2 * dc.replica_bytes));
  CHECK(dc.replica_bytes == doctest::Approx(dc.grad_bytes / 2));
  CHECK(replicas == 2 * dc.buckets);
  CHECK(gathers > 0);
}

TEST_CASE("the layer GEMMs and memory-bound ops are the ones layer_cost() prices") {
  const Plan plan = small_plan();
  const LayerCost lc = layer_cost(plan);
  const LayerMemoryBytes mb = layer_memory_bound_bytes(plan);
  const Program prog = lower_rank(plan, 0);
  double gemm = 0, mem = 0, mem_bwd = 0;
  int64_t mem_bytes = 0, mem_bwd_bytes = 0;
  for (const Op& op : prog.ops) {
    if (op.microbatch != 0) continue;
    if (op.phase == Phase::forward) {
      if (is(op, "qkv") || is(op, "attn.out") || is(op, "mlp.up") || is(op, "mlp.down")) gemm += op.predicted_s;
      if (is(op, "norm+residual") || is(op, "norm+act+residual")) {
        mem += op.predicted_s;
        mem_bytes += op.bytes;
      }
    }
    if (op.phase == Phase::backward && is(op, "norm+act+residual.bwd")) {
      mem_bwd += op.predicted_s;
      mem_bwd_bytes += op.bytes;
    }
  }
  const double layers = 2;  // stage 0 of 4 layers over pp = 2
  CHECK(gemm == doctest::Approx(layers * lc.gemm_forward_s).epsilon(1e-12));
  // The element-wise passes are the planner's, forward and backward counted separately (not backward = 2x forward).
  CHECK(std::llabs(mem_bytes - std::llround(layers * mb.elementwise_forward)) <= 2 * 2);
  CHECK(std::llabs(mem_bwd_bytes - std::llround(layers * mb.elementwise_backward)) <= 2);
  CHECK(mb.elementwise_backward != doctest::Approx(2.0 * mb.elementwise_forward));
  CHECK(mem == doctest::Approx(layers * memory_bound_time_s(plan.gpu, mb.elementwise_forward)).epsilon(1e-9));
  CHECK(mem_bwd == doctest::Approx(layers * memory_bound_time_s(plan.gpu, mb.elementwise_backward)).epsilon(1e-9));
  // forward_s = GEMMs + attention + memory-bound traffic + 10 kernel launches (cost_model.cpp). Flash attention
  // here: no score-matrix passes.
  REQUIRE(mb.scores_forward == 0);
  const double planner_mem = lc.forward_s - lc.gemm_forward_s - lc.attention_forward_s - 10 * plan.gpu.gemm.kernel_overhead_s;
  CHECK(mem == doctest::Approx(layers * planner_mem).epsilon(1e-9));
}

TEST_CASE("unfused attention issues the planner's score-matrix passes, forward and backward") {
  Plan plan = small_plan();
  plan.training.attention = AttentionKernel::unfused;
  plan.model.dropout = true;
  const LayerMemoryBytes mb = layer_memory_bound_bytes(plan);
  REQUIRE(mb.scores_forward > 0);
  REQUIRE(mb.scores_backward > mb.scores_forward);
  const Program prog = lower_rank(plan, 0);
  int64_t fwd = 0, bwd = 0;
  for (const Op& op : prog.ops) {
    if (op.microbatch != 0) continue;
    if (op.phase == Phase::forward && is(op, "attn.softmax")) fwd += op.bytes;
    if (op.phase == Phase::backward && is(op, "attn.softmax.bwd")) bwd += op.bytes;
  }
  const double layers = 2;
  CHECK(std::llabs(fwd - std::llround(layers * mb.scores_forward)) <= 2);
  CHECK(std::llabs(bwd - std::llround(layers * mb.scores_backward)) <= 2);
}

TEST_CASE("sequence parallelism re-gathers the column-parallel GEMM inputs twice per layer in backward") {
  Plan plan = small_plan();
  plan.parallel.sequence_parallel = true;
  const LayerCost lc = layer_cost(plan);
  for (const bool sp : {true, false}) {
    plan.parallel.sequence_parallel = sp;
    const Program prog = lower_rank(plan, 0);
    int regathers = 0, forward_gathers = 0;
    for (size_t i = 0; i < prog.ops.size(); ++i) {
      const Op& op = prog.ops[i];
      if (op.kind != OpKind::collective || op.collective != CollectiveKind::all_gather || op.group != Group::tp) continue;
      if (is(op, "tp.all_gather.regather")) {
        ++regathers;
        CHECK(op.phase == Phase::backward);
        CHECK(op.term == Term::backward);
        CHECK(op.bytes == std::llround(lc.tp_bytes));
        // Issued beside the input-gradient GEMM of QKV or MLP up.
        REQUIRE(i + 1 < prog.ops.size());
        CHECK((is(prog.ops[i + 1], "qkv.dgrad") || is(prog.ops[i + 1], "mlp.up.dgrad")));
      } else if (op.phase == Phase::forward) {
        ++forward_gathers;
      }
    }
    // 2 per layer x 2 layers x 2 microbatches with SP; none without.
    CHECK(regathers == (sp ? 2 * 2 * 2 : 0));
    CHECK(forward_gathers == (sp ? 2 * 2 * 2 : 0));
  }
}

TEST_CASE("unfused gradient accumulation adds the planner's pass to the gradients after each weight gradient") {
  Plan plan = small_plan();
  for (const bool fused : {true, false}) {
    plan.training.fused_grad_accumulation = fused;
    const LayerCost lc = layer_cost(plan);
    const double want = grad_accumulation_bytes(plan, lc.params);
    CHECK((want > 0) == !fused);
    for (const int64_t rank : {int64_t{0}, plan.num_gpus - 1}) {  // first stage (embedding), last stage (output)
      const Program prog = lower_rank(plan, rank);
      int layer_passes = 0, edge_passes = 0;
      for (size_t i = 0; i < prog.ops.size(); ++i) {
        const Op& op = prog.ops[i];
        if (is(op, "grad.accumulate")) {
          ++layer_passes;
          CHECK(op.kind == OpKind::memory);
          CHECK(op.term == Term::backward);
          CHECK(prog.slots[static_cast<size_t>(op.slot)].kind == SlotKind::grads);
          CHECK(std::llabs(op.bytes - std::llround(want)) <= 1);
          CHECK(op.predicted_s == doctest::Approx(memory_bound_time_s(plan.gpu, want)).epsilon(1e-9));
          REQUIRE(i > 0);
          // After the layer's four weight-gradient GEMMs (with the asynchronous TP backward the QKV and MLP-up ones
          // run earlier, beside their input-gradient reductions).
          CHECK(std::string(prog.ops[i - 1].label).ends_with(".wgrad"));
          int wgrads = 0;
          for (size_t k = i; k-- > 0 && !std::string(prog.ops[k].label).ends_with("grad.accumulate");) {
            for (const char* w : {"mlp.down.wgrad", "mlp.up.wgrad", "attn.out.wgrad", "qkv.wgrad"}) wgrads += is(prog.ops[k], w);
          }
          CHECK(wgrads == 4);
        }
        if (is(op, "embedding.grad.accumulate") || is(op, "lm_head.grad.accumulate")) ++edge_passes;
      }
      // 2 layers x 2 microbatches on each stage, plus the embedding or the output weight once per microbatch.
      CHECK(layer_passes == (fused ? 0 : 2 * 2));
      CHECK(edge_passes == (fused ? 0 : 2));
    }
  }
}

TEST_CASE("asynchronous TP backward: the column-parallel input-gradient reductions run beside their weight gradients") {
  for (bool sp : {false, true}) {
    for (bool async : {true, false}) {
      Plan plan = small_plan();  // tp 2
      plan.parallel.sequence_parallel = sp;
      plan.parallel.async_tp_backward = async;
      REQUIRE(validate(plan).ok());
      CAPTURE(sp);
      CAPTURE(async);
      const Program prog = lower_rank(plan, 0);
      const char* reduce = sp ? "tp.reduce_scatter" : "tp.all_reduce";
      int overlapped = 0, joined = 0;
      for (size_t i = 0; i < prog.ops.size(); ++i) {
        const Op& op = prog.ops[i];
        if (op.wait_for >= 0) {
          REQUIRE(static_cast<size_t>(op.wait_for) < i);
          CHECK(prog.ops[static_cast<size_t>(op.wait_for)].overlap);
          ++joined;
        }
        if (!(is(op, "mlp.up.dgrad") || is(op, "qkv.dgrad"))) continue;
        const std::string wgrad = is(op, "mlp.up.dgrad") ? "mlp.up.wgrad" : "qkv.wgrad";
        REQUIRE(i + 3 < prog.ops.size());
        const Op& r = prog.ops[i + 1];
        CHECK(is(r, reduce));
        CHECK(r.phase == Phase::backward);
        if (async) {
          // dgrad, its reduction (not waited for), the same GEMM's weight gradient, then an op that waits for it.
          ++overlapped;
          CHECK(r.overlap);
          CHECK(is(prog.ops[i + 2], wgrad.c_str()));
          CHECK(prog.ops[i + 3].wait_for == static_cast<int32_t>(i + 1));
          // With SP the weight gradient first waits for the re-gather of its input, issued before the dgrad.
          if (sp) {
            REQUIRE(prog.ops[i + 2].wait_for >= 0);
            CHECK(is(prog.ops[static_cast<size_t>(prog.ops[i + 2].wait_for)], "tp.all_gather.regather"));
          } else {
            CHECK(prog.ops[i + 2].wait_for == -1);
          }
        } else {
          CHECK_FALSE(r.overlap);
          CHECK_FALSE(is(prog.ops[i + 2], wgrad.c_str()));
        }
      }
      // 2 column-parallel GEMMs x 2 layers x 2 microbatches on stage 0.
      CHECK(overlapped == (async ? 8 : 0));
      CHECK(joined == (async ? (sp ? 16 : 8) : 0));
    }
  }
  // A split weight pass (ZB-H1) defers the weight gradients, so the reductions block as before.
  Plan zb = small_plan();
  zb.parallel.schedule = Schedule::zero_bubble;
  REQUIRE(validate(zb).ok());
  const Program prog = lower(zb, 0, stage_schedule(zb, 0));
  for (const Op& op : prog.ops) {
    CHECK(op.wait_for == -1);
    if (is(op, "tp.all_reduce")) CHECK_FALSE(op.overlap);
  }
}

TEST_CASE("collective payloads come from the cost model") {
  const Plan plan = small_plan();
  const LayerCost lc = layer_cost(plan);
  const DpCost dc = dp_cost(plan, stage_params(plan, 0));
  const Program prog = lower_rank(plan, 0);
  int tp_ar = 0, sends = 0, dp = 0;
  int64_t dp_bytes = 0;
  for (const Op& op : prog.ops) {
    if (is(op, "tp.all_reduce")) {
      ++tp_ar;
      CHECK(op.bytes == std::llround(lc.tp_bytes));
    }
    if (op.kind == OpKind::p2p && op.group == Group::pp) {
      ++sends;
      CHECK(op.bytes == std::llround(p2p_bytes(plan)));
    }
    if (is(op, "dp.all_reduce")) {
      ++dp;
      dp_bytes += op.bytes;
      CHECK(std::llabs(op.bytes - std::llround(dc.grad_bytes / static_cast<double>(dc.buckets))) <= 4);
    }
  }
  CHECK(tp_ar == 2 * 2 * 2 * 2);  // 2 per pass x (forward + backward) x 2 layers x 2 microbatches
  CHECK(sends == 2 * 2);          // stage 0: send forward + receive backward per microbatch
  CHECK(dc.buckets > 1);
  CHECK(dp == dc.buckets);
  CHECK(dp_bytes == std::llround(dc.grad_bytes));  // the buckets add up to the planner's gradient bytes exactly
}

TEST_CASE("DP and ZeRO-3 collectives carry the plan's 16-bit dtype (fp16 plans reduce fp16), fp32 with main_grad") {
  for (Precision prec : {Precision::bf16, Precision::fp16}) {
    for (int zero : {0, 1, 3}) {
      for (bool fp32_grads : {false, true}) {
        Plan plan = small_plan(2, 2, zero >= 2 ? 1 : 2);  // ZeRO-2/3 run without a pipeline
        plan.training.precision = prec;
        plan.parallel.zero_stage = zero;
        plan.training.grad_fp32 = fp32_grads;
        REQUIRE(validate(plan).ok());
        const DType sixteen = prec == Precision::fp16 ? DType::fp16 : DType::bf16;
        CAPTURE(zero);
        CAPTURE(fp32_grads);
        int grads = 0, params = 0;
        for (const Op& op : lower_rank(plan, 0).ops) {
          if (is(op, "dp.all_reduce") || is(op, "dp.reduce_scatter")) {
            ++grads;
            CHECK(op.dtype == (fp32_grads ? DType::fp32 : sixteen));
          }
          if (is(op, "dp.param_all_gather") || is(op, "zero3.all_gather")) {
            ++params;
            CHECK(op.dtype == sixteen);
          }
        }
        CHECK(grads > 0);
        CHECK((params > 0) == (zero >= 1));
      }
    }
  }
}

TEST_CASE("fp8 parameter gather: the parameter all-gathers carry fp8, half the 16-bit bytes") {
  for (int zero : {1, 3}) {
    Plan plan = small_plan(2, 2, zero >= 2 ? 1 : 2);
    plan.training.precision = Precision::fp8;
    plan.parallel.zero_stage = zero;
    REQUIRE(validate(plan).ok());
    Plan fp8 = plan;
    fp8.training.fp8_param_gather = true;
    REQUIRE(validate(fp8).ok());
    CAPTURE(zero);
    auto gathers = [](const Plan& p, DType& dtype) {
      int64_t bytes = 0;
      for (const Op& op : lower_rank(p, 0).ops) {
        if (is(op, "dp.param_all_gather") || is(op, "zero3.all_gather")) {
          bytes += op.bytes;
          dtype = op.dtype;
        }
      }
      return bytes;
    };
    DType sixteen = DType::fp32, eight = DType::fp32;
    const int64_t b16 = gathers(plan, sixteen), b8 = gathers(fp8, eight);
    CHECK(sixteen == DType::bf16);
    CHECK(eight == DType::fp8);
    REQUIRE(b16 > 0);
    CHECK(std::llabs(2 * b8 - b16) <= 8);  // each gather rounds to whole elements
  }
}

TEST_CASE("fp8 TP all-gathers: every TP all-gather carries fp8 at the cost model's bytes, the reduce-scatters 16 bits") {
  Plan plan = small_plan();  // tp 2
  plan.training.precision = Precision::fp8;
  plan.parallel.sequence_parallel = true;
  plan.training.fp8_tp_gather = true;
  REQUIRE(validate(plan).ok());
  const LayerCost lc = layer_cost(plan);
  CHECK(lc.tp_gather_bytes == doctest::Approx(lc.tp_bytes / 2));
  int gathers = 0, reduces = 0;
  for (const Op& op : lower_rank(plan, 0).ops) {
    if (op.kind != OpKind::collective || op.group != Group::tp) continue;
    if (op.collective == CollectiveKind::all_gather) {
      ++gathers;
      CHECK(op.dtype == DType::fp8);
      CHECK(op.bytes == std::llround(lc.tp_gather_bytes));
    } else if (op.collective == CollectiveKind::reduce_scatter) {
      ++reduces;
      CHECK(op.dtype == DType::bf16);
      CHECK(op.bytes == std::llround(lc.tp_bytes));
    }
  }
  CHECK(gathers > 0);
  CHECK(reduces > 0);
}

TEST_CASE("TP collective copies: one copy of the whole tensor beside every sequence-parallel TP collective") {
  // cost_model.cpp tp_copy_bytes: a read and a write of the gathered tensor per collective (an all-gather's after it,
  // a reduce-scatter's before it), on the compute stream, in the pass that runs the collective.
  for (const Recompute rc : {Recompute::none, Recompute::full}) {
    Plan plan = small_plan();  // tp 2
    plan.parallel.sequence_parallel = true;
    plan.parallel.tp_collective_copies = true;
    plan.parallel.async_tp_backward = false;
    plan.parallel.recompute = rc;
    REQUIRE(validate(plan).ok());
    CAPTURE(static_cast<int>(rc));
    const LayerCost lc = layer_cost(plan);
    const std::vector<Op>& ops = lower_rank(plan, 0).ops;
    int gathers = 0, reduces = 0, gather_copies = 0, reduce_copies = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      if (op.kind == OpKind::collective && op.group == Group::tp) {
        if (op.collective == CollectiveKind::all_gather) ++gathers;
        if (op.collective == CollectiveKind::reduce_scatter) {
          ++reduces;
          REQUIRE(i > 0);
          CHECK(is(ops[i - 1], "tp.reduce_scatter.copy"));  // the copy into dim-0 order comes first
        }
      }
      if (op.kind != OpKind::memory) continue;
      if (is(op, "tp.all_gather.copy") || is(op, "tp.all_gather.regather.copy")) {
        ++gather_copies;
        CHECK(op.bytes == std::llround(2 * lc.tp_gather_bytes));
        CHECK(op.term != Term::tp_comm);
      } else if (is(op, "tp.reduce_scatter.copy")) {
        ++reduce_copies;
        CHECK(op.bytes == std::llround(2 * lc.tp_bytes));
        CHECK(op.term != Term::tp_comm);
      }
    }
    CHECK(gathers > 0);
    CHECK(gather_copies == gathers);
    CHECK(reduce_copies == reduces);
    // Per layer pass: the forward's 2 + 2, the backward's 4 + 2 (its 2 re-gathers), full recompute's 2 + 2 again.
    // Rank 0 is on the first stage (no output layer and its SP gather): gathers / reduce-scatters = 6 / 4 or 8 / 6.
    CHECK(gathers * (rc == Recompute::full ? 6 : 4) == reduces * (rc == Recompute::full ? 8 : 6));
  }
}

TEST_CASE("slots are StageMemory's states plus one activation stash per microbatch") {
  const Plan plan = small_plan();
  for (int64_t rank : {0, 7}) {
    const Program prog = lower_rank(plan, rank);
    const StageMemory sm = stage_memory(plan, prog.stage);
    int64_t persistent_model = 0, stash = 0, stashes = 0;
    for (const Slot& s : prog.slots) {
      if (s.persistent && !is_allowance(s.kind)) persistent_model += s.bytes;
      if (s.kind == SlotKind::activations) {
        ++stashes;
        stash = s.bytes;
      }
    }
    CHECK(std::llabs(persistent_model - std::llround(sm.weights + sm.grads + sm.optimizer + sm.recompute_working_set +
                                                    sm.zero3_buffers)) <= 3);
    CHECK(stashes == plan.parallel.num_microbatches);
    CHECK(std::llabs(stash * sm.in_flight_chunks - std::llround(sm.activations)) <= sm.in_flight_chunks);
  }
}

TEST_CASE("an eager cross entropy: the output stage holds the loss's backward working set around its backward") {
  Plan plan = small_plan();
  plan.training.fused_cross_entropy = false;
  const int64_t last_rank = plan.num_gpus - 1;
  const Program prog = lower_rank(plan, last_rank);
  const StageMemoryInputs in = stage_memory_inputs(plan);
  REQUIRE(in.loss_working_set_bytes > 0);
  int loss = -1;
  for (size_t i = 0; i < prog.slots.size(); ++i) {
    if (prog.slots[i].name == "loss backward mb0") loss = static_cast<int>(i);
  }
  REQUIRE(loss >= 0);
  CHECK(prog.slots[static_cast<size_t>(loss)].bytes == std::llround(in.loss_working_set_bytes));
  CHECK_FALSE(prog.slots[static_cast<size_t>(loss)].persistent);
  // alloc, the cross entropy's backward, free: in that order.
  int64_t at_alloc = -1, at_ce = -1, at_free = -1;
  for (size_t i = 0; i < prog.ops.size(); ++i) {
    const Op& op = prog.ops[i];
    if (op.kind == OpKind::alloc && op.slot == loss) at_alloc = static_cast<int64_t>(i);
    if (at_alloc >= 0 && at_ce < 0 && is(op, "cross_entropy.bwd")) at_ce = static_cast<int64_t>(i);
    if (op.kind == OpKind::free && op.slot == loss) at_free = static_cast<int64_t>(i);
  }
  CHECK(at_alloc >= 0);
  CHECK(at_alloc < at_ce);
  CHECK(at_ce < at_free);
  for (const Slot& s : lower_rank(plan, 0).slots) CHECK(s.name.find("loss backward") == std::string::npos);
}

TEST_CASE("ops follow the schedule's order of tasks") {
  const Plan plan = small_plan();
  const auto order = one_f_one_b(2, 2, 0);
  const Program prog = lower(plan, 0, order);
  std::vector<std::pair<Phase, int64_t>> tasks;
  for (const Op& op : prog.ops) {
    if (op.microbatch < 0) continue;
    if (tasks.empty() || tasks.back() != std::make_pair(op.phase, op.microbatch)) tasks.emplace_back(op.phase, op.microbatch);
  }
  REQUIRE(tasks.size() == order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    CHECK(tasks[i].first == order[i].phase);
    CHECK(tasks[i].second == order[i].microbatch);
  }
  CHECK(prog.ops.back().phase == Phase::tail);
}

TEST_CASE("lowering rejects what it cannot run") {
  CHECK_THROWS_AS(lower(small_plan(), 8, one_f_one_b(2, 2, 0)), InputError);
  std::vector<ScheduleStep> bad{{Phase::backward, 0, 0}};
  CHECK_THROWS_AS(lower(small_plan(), 0, bad), InputError);
}

TEST_CASE("ZeRO-3 per-linear gathers: four per layer and pass, the layer's bytes, inside the model's buffer slot") {
  Plan plan = small_plan(4, 1, 1, 2);
  plan.parallel.zero_stage = 3;
  plan.parallel.recompute = Recompute::full;
  plan.parallel.zero3_gather_unit = Zero3GatherUnit::linear;
  REQUIRE(validate(plan).ok());
  const LayerCost lc = layer_cost(plan);
  const Program prog = lower_rank(plan, 0);
  const StageMemory sm = stage_memory(plan, 0);
  int slot = -1;
  for (size_t i = 0; i < prog.slots.size(); ++i) {
    if (prog.slots[i].kind == SlotKind::zero3_buffers) slot = static_cast<int>(i);
  }
  REQUIRE(slot >= 0);
  const int64_t slot_bytes = prog.slots[static_cast<size_t>(slot)].bytes;
  CHECK(slot_bytes == std::llround(sm.zero3_buffers));
  const int64_t param_bytes = std::llround(2.0 * zero3_gathered_params(plan, lc.params));
  CHECK(param_bytes < slot_bytes);  // the unsharded gradient of one linear follows
  int gathers = 0, whole = 0;
  int64_t bytes = 0;
  int64_t prev_begin = -1, prev_end = -1;
  const char* prev_label = "";
  for (const Op& op : prog.ops) {
    if (is(op, "zero3.all_gather")) ++whole;
    if (std::strncmp(op.label, "zero3.all_gather.", 17) != 0) continue;
    ++gathers;
    bytes += op.bytes;
    CHECK(op.slot == slot);
    CHECK(op.offset + op.bytes <= param_bytes);
    // The linear in use and a different one gathered after it occupy disjoint parts of the slot (the same linear
    // gathered again, recompute then backward, lands where it was).
    if (prev_begin >= 0 && std::strcmp(op.label, prev_label) != 0) {
      CHECK((op.offset >= prev_end || op.offset + op.bytes <= prev_begin));
    }
    prev_begin = op.offset;
    prev_end = op.offset + op.bytes;
    prev_label = op.label;
  }
  CHECK(whole == 0);
  const int passes = 3 * 2;  // forward, recompute, backward x 2 microbatches
  CHECK(gathers == 4 * passes * static_cast<int>(plan.model.layers));
  // Per pass the linears add up to the layer's gather (each rounded down to whole elements per rank).
  const double per_layer = bytes / static_cast<double>(passes * plan.model.layers);
  CHECK(per_layer <= 2.0 * lc.params + 1e-9);
  CHECK(per_layer >= 2.0 * lc.params - 4 * 2 * 4);
  // Whole-layer units (FSDP): one gather per layer in forward and one before the backward, which the recomputed
  // forward reads (recompute_regathers).
  plan.parallel.zero3_gather_unit = Zero3GatherUnit::layer;
  whole = 0;
  for (const Op& op : lower_rank(plan, 0).ops) whole += is(op, "zero3.all_gather") ? 1 : 0;
  CHECK(whole == 2 * 2 * static_cast<int>(plan.model.layers));
}

TEST_CASE("the output layer issues edge_bytes(): norm, cross entropy, its all-reduces and SP's gather / reduce-scatter") {
  Plan plan = small_plan();  // dp 2, tp 2, pp 2, 2 microbatches
  plan.parallel.sequence_parallel = true;
  REQUIRE(validate(plan).ok());
  const EdgeBytes eb = edge_bytes(plan);
  const EdgeCost ec = edge_cost(plan);
  REQUIRE(eb.sp_gather > 0);
  auto count = [&](const Plan& p, double* comm_s) {
    int gathers = 0, scatters = 0, ce = 0;
    const EdgeBytes b = edge_bytes(p);
    for (const Op& op : lower_rank(p, p.num_gpus - 1).ops) {  // a rank of the last stage
      const bool sp_op = is(op, "output.sp_all_gather") || is(op, "output.sp_reduce_scatter");
      gathers += is(op, "output.sp_all_gather");
      scatters += is(op, "output.sp_reduce_scatter");
      ce += is(op, "ce.all_reduce");
      if (sp_op || is(op, "ce.all_reduce")) *comm_s += op.predicted_s;
      if (is(op, "cross_entropy")) CHECK(std::llabs(op.bytes - std::llround(b.cross_entropy)) <= 1);
      if (is(op, "cross_entropy.bwd")) CHECK(std::llabs(op.bytes - std::llround(b.cross_entropy_backward)) <= 1);
      if (is(op, "final_norm")) CHECK(std::llabs(op.bytes - std::llround(b.final_norm)) <= 1);
      if (is(op, "final_norm.bwd")) CHECK(std::llabs(op.bytes - std::llround(2 * b.final_norm)) <= 1);
    }
    return std::array<int, 3>{gathers, scatters, ce};
  };
  double comm = 0;
  CHECK(count(plan, &comm) == std::array<int, 3>{2, 2, 6});  // per microbatch: one each, 3 cross-entropy all-reduces
  // What the runtime issues is what the closed form charges the last stage per microbatch.
  CHECK(comm == doctest::Approx(2 * (ec.output_tp_comm_s + ec.output_tp_comm_backward_s)).scale(0).epsilon(1e-9));
  CHECK(ec.output_tp_comm_backward_s > 0);
  plan.parallel.sequence_parallel = false;
  CHECK(edge_bytes(plan).sp_gather == 0);
  comm = 0;
  CHECK(count(plan, &comm) == std::array<int, 3>{0, 0, 6});
  CHECK(comm == doctest::Approx(2 * edge_cost(plan).output_tp_comm_s).scale(0).epsilon(1e-9));
  CHECK(edge_cost(plan).output_tp_comm_backward_s == 0);
}

TEST_CASE("FSDP2: the copies around each gather and reduce-scatter are the model's, per layer or once a step") {
  // Without pipelining: per layer and microbatch a gather's copies forward, a gather's and a reduce-scatter's
  // backward; the root (embedding, output layer) gathered once and reduce-scattered once per microbatch.
  Plan plan = small_plan(2, 2, 1, 2);
  plan.parallel.zero_stage = 3;
  plan.parallel.fsdp2 = true;
  REQUIRE(validate(plan).ok());
  const Fsdp2CopyBytes fc = fsdp2_copy_bytes(plan);
  REQUIRE(fc.gather > 0);
  const LayerCost lc = layer_cost(plan);
  const ParamCounts c = count_params(plan.model);
  const double root = c.embedding_per_tp_rank(plan.parallel.tp) + output_weight_params(plan, c);
  double fwd = 0, bwd = 0;
  for (const Op& op : lower_rank(plan, 0).ops) {
    if (std::strncmp(op.label, "fsdp2.", 6) != 0) continue;
    (op.term == Term::forward ? fwd : bwd) += static_cast<double>(op.bytes);
    CHECK((op.term == Term::forward || op.term == Term::backward));
  }
  const double m = 2, layers = 4;
  CHECK(fwd == doctest::Approx(m * (layers * fc.gather * lc.params + fc.gather * root)).epsilon(1e-6));
  CHECK(bwd == doctest::Approx(m * (layers * (fc.gather + fc.reduce) * lc.params + fc.reduce * root)).epsilon(1e-6));
  // The layer's forward and backward times carry the same bytes at the HBM rate (layer_cost).
  Plan fsdp1 = plan;
  fsdp1.parallel.fsdp2 = false;
  const LayerCost lc1 = layer_cost(fsdp1);
  CHECK(lc.forward_s - lc1.forward_s == doctest::Approx(memory_bound_time_s(plan.gpu, fc.gather * lc.params)));
  CHECK(lc.backward_input_s - lc1.backward_input_s ==
        doctest::Approx(memory_bound_time_s(plan.gpu, (fc.gather + fc.reduce) * lc.params)));
  // With pipelining the parameters stay gathered through the step: the copies once, with the optimizer step.
  Plan piped = small_plan(2, 2, 2, 2);
  piped.parallel.zero_stage = 3;
  piped.parallel.fsdp2 = true;
  REQUIRE(validate(piped).ok());
  double step = 0;
  int per_layer = 0;
  for (const Op& op : lower_rank(piped, 0).ops) {
    if (is(op, "fsdp2.step_copies")) step += static_cast<double>(op.bytes);
    else if (std::strncmp(op.label, "fsdp2.", 6) == 0) ++per_layer;
  }
  CHECK(per_layer == 0);
  const Fsdp2CopyBytes pc = fsdp2_copy_bytes(piped);
  CHECK(step == doctest::Approx((pc.gather + pc.reduce) * stage_params(piped, 0, plan_param_counts(piped))).epsilon(1e-6));
}
