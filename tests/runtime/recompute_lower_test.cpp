// Tests for lowering full recompute of only some layers (recompute_layers, Megatron-LM's block method) and
// torchtitan's per-op selective recompute (selective-op): the recompute work the runtime issues is the work the cost
// model prices, and a host run allocates the memory model's tensors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "planner/cost/activations.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/gemm.hpp"
#include "planner/spec/config.hpp"
#include "runtime/executor.hpp"
#include "runtime/lower.hpp"
#include "runtime/schedule_source.hpp"
#include "test_plan.hpp"

using namespace parplan;
using namespace parplan::runtime;
using parplan::runtime::testing::small_plan;

namespace {

bool is(const Op& op, const char* label) { return std::strcmp(op.label, label) == 0; }

std::vector<Program> lower_all(const Plan& plan) {
  const int64_t per_stage = plan.parallel.tp * plan.parallel.cp * plan.parallel.dp;
  std::vector<Program> progs;
  for (int64_t r = 0; r < plan.parallel.gpus(); ++r) progs.push_back(lower(plan, r, stage_schedule(plan, r / per_stage)));
  return progs;
}

// Runs the plan on host ranks and returns, per rank, (measured model-tensor peak) - (the memory model's tensors).
std::vector<int64_t> peak_minus_model(const Plan& plan, const std::vector<Program>& progs) {
  auto world = make_host_world(static_cast<int>(plan.parallel.gpus()));
  const RunResult r = execute(*world, progs, ExecOptions{.warmup = 0, .steps = 1});
  std::vector<int64_t> out;
  for (const RankRun& rr : r.ranks) {
    const StageMemory sm = stage_memory(plan, rr.stage);
    out.push_back(rr.model_peak_bytes() - std::llround(sm.weights + sm.grads + sm.optimizer + sm.activations +
                                                       sm.recompute_working_set + sm.zero3_buffers));
  }
  return out;
}

// Per backward task (microbatch, chunk) of a program: the layers whose forward is rerun (recompute QKV GEMMs) and
// the layers whose input gradient follows the task's last recompute op.
struct TaskRecompute {
  int rerun = 0, after_last = 0;
};
std::vector<TaskRecompute> recompute_per_task(const Program& prog) {
  std::vector<TaskRecompute> tasks;
  int64_t mb = -1, chunk = -1;
  for (const Op& op : prog.ops) {
    if (op.phase != Phase::backward) continue;
    if (op.microbatch != mb || op.chunk != chunk) {
      tasks.emplace_back();
      mb = op.microbatch;
      chunk = op.chunk;
    }
    if (op.term == Term::recompute && is(op, "qkv")) {
      ++tasks.back().rerun;
      tasks.back().after_last = 0;
    }
    if (is(op, "qkv.dgrad")) ++tasks.back().after_last;
  }
  return tasks;
}

Plan partial_plan(int64_t k, Schedule schedule) {
  Plan plan = small_plan(1, 2, 2, 4);
  plan.model.layers = 8;  // 4 per stage; interleaved: 2 chunks of 2
  plan.parallel.schedule = schedule;
  plan.parallel.vpp = schedule == Schedule::interleaved ? 2 : 1;
  plan.parallel.recompute = Recompute::full;
  plan.parallel.recompute_layers = k;
  return plan;
}

}  // namespace

TEST_CASE("recompute_layers K: the first K layers of each chunk rerun their forward, the host run allocates the "
          "memory model's bytes") {
  for (Schedule s : {Schedule::one_f_one_b, Schedule::interleaved}) {
    const int64_t chunk_layers = s == Schedule::interleaved ? 2 : 4;
    for (int64_t k = 1; k < chunk_layers; ++k) {
      CAPTURE(static_cast<int>(s));
      CAPTURE(k);
      const Plan plan = partial_plan(k, s);
      REQUIRE(validate(plan).ok());
      const auto progs = lower_all(plan);
      const LayerCost lc = layer_cost(plan);
      for (const Program& prog : progs) {
        const auto tasks = recompute_per_task(prog);
        REQUIRE(tasks.size() == static_cast<size_t>(plan.parallel.num_microbatches * plan.parallel.vpp));
        for (const TaskRecompute& t : tasks) {
          CHECK(t.rerun == k);
          CHECK(t.after_last == 1);  // the last rerun is the chunk's first layer (model order), just before its backward
        }
        // The rerun GEMMs are the forward's: K layers' worth of LayerCost::gemm_forward_s per backward task.
        double rerun_s = 0;
        for (const Op& op : prog.ops) {
          const bool linear = is(op, "qkv") || is(op, "attn.out") || is(op, "mlp.up") || is(op, "mlp.down");
          if (op.term == Term::recompute && linear) rerun_s += op.predicted_s;
        }
        CHECK(rerun_s == doctest::Approx(static_cast<double>(tasks.size() * k) * lc.gemm_forward_s).epsilon(1e-12));
      }
      // The kept layers' stash is recompute none's: more than a fully recomputed plan's, and what the model says.
      for (int64_t diff : peak_minus_model(plan, progs)) CHECK(std::llabs(diff) <= 4);
      const StageMemory part = stage_memory(plan, 0), all = stage_memory(partial_plan(0, s), 0);
      CHECK(part.activations > all.activations);
    }
  }
}

TEST_CASE("recompute_layers 0 and K = the chunk's layers lower to the same program: every layer reruns, as before") {
  for (Schedule s : {Schedule::one_f_one_b, Schedule::interleaved}) {
    const int64_t chunk_layers = s == Schedule::interleaved ? 2 : 4;
    const auto every = lower_all(partial_plan(0, s)), k_all = lower_all(partial_plan(chunk_layers, s));
    REQUIRE(every.size() == k_all.size());
    for (size_t r = 0; r < every.size(); ++r) {
      REQUIRE(every[r].ops.size() == k_all[r].ops.size());
      REQUIRE(every[r].slots.size() == k_all[r].slots.size());
      for (size_t i = 0; i < every[r].slots.size(); ++i) CHECK(every[r].slots[i].bytes == k_all[r].slots[i].bytes);
      for (size_t i = 0; i < every[r].ops.size(); ++i) {
        CHECK(every[r].ops[i].kind == k_all[r].ops[i].kind);
        CHECK(every[r].ops[i].term == k_all[r].ops[i].term);
      }
      for (const TaskRecompute& t : recompute_per_task(every[r])) CHECK(t.rerun == chunk_layers);
    }
    for (int64_t diff : peak_minus_model(partial_plan(0, s), every)) CHECK(std::llabs(diff) <= 4);
  }
}

namespace {

Plan selective_op_plan(FfnType ffn) {
  Plan plan = small_plan(1, 2, 2, 2);  // tp 2 x pp 2
  plan.model.kv_heads = 2;            // GQA: wk narrower than wq
  plan.model.ffn_type = ffn;
  plan.parallel.recompute = Recompute::selective_op;
  return plan;
}

struct RerunShape {
  int64_t m, n, k;
};

}  // namespace

TEST_CASE("selective-op reruns every second matmul of each layer (not the last), at the cost model's shapes and time") {
  // hidden 64, 4 heads of 16, 2 KV heads, ffn 256, tp 2, T = 32 tokens. Forward order wq, wk, wv, wo, then
  // w1, w3, w2 (SwiGLU) or up, down (GeLU); rerun the 2nd, 4th, ...: wk [T, 2 x 16 / 2 = 16, 64] (column-parallel),
  // wo [T, 64, 64 / 2 = 32] (row-parallel), and for SwiGLU w3 [T, 256 / 2 = 128, 64]; GeLU's 6th (down) is the last.
  const std::vector<RerunShape> swiglu = {{32, 16, 64}, {32, 64, 32}, {32, 128, 64}};
  for (FfnType ffn : {FfnType::swiglu, FfnType::gelu}) {
    CAPTURE(static_cast<int>(ffn));
    const Plan plan = selective_op_plan(ffn);
    REQUIRE(validate(plan).ok());
    const std::vector<RerunShape> want(swiglu.begin(), swiglu.begin() + (ffn == FfnType::swiglu ? 3 : 2));
    const LayerCost lc = layer_cost(plan);
    const auto progs = lower_all(plan);
    for (const Program& prog : progs) {
      std::vector<RerunShape> got;
      double rerun_s = 0;
      int layer_backwards = 0;
      for (const Op& op : prog.ops) {
        if (op.phase == Phase::backward && is(op, "qkv.dgrad")) ++layer_backwards;
        if (op.term != Term::recompute) continue;
        CHECK(op.kind != OpKind::collective);  // no collective runs again
        CHECK(op.kind != OpKind::p2p);
        rerun_s += op.predicted_s;
        if (op.kind == OpKind::gemm) {
          CHECK(is(op, "selective_op.matmul"));  // the attention kernel is not rerun
          got.push_back({op.gemm.m, op.gemm.n, op.gemm.k});
        }
      }
      REQUIRE(layer_backwards == 2 * 2);  // 2 layers x 2 microbatches
      REQUIRE(got.size() == want.size() * 4);
      for (size_t i = 0; i < got.size(); ++i) {
        CHECK(got[i].m == want[i % want.size()].m);
        CHECK(got[i].n == want[i % want.size()].n);
        CHECK(got[i].k == want[i % want.size()].k);
      }
      // The cost model's recompute_s: those GEMMs and the forward's memory-bound ops, whose 10 kernel launches the
      // runtime's two passes do not charge (as in the forward: lower_test "the layer GEMMs ...").
      CHECK(rerun_s == doctest::Approx(4.0 * (lc.recompute_s - 10 * plan.gpu.gemm.kernel_overhead_s)).epsilon(1e-9));
    }
    for (int64_t diff : peak_minus_model(plan, progs)) CHECK(std::llabs(diff) <= 4);
  }
}

TEST_CASE("selective-op: each stash keeps the policy's outputs, the working set holds what the rerun rebuilds") {
  const Plan plan = selective_op_plan(FfnType::swiglu);
  const StageMemoryInputs in = stage_memory_inputs(plan);
  const Program prog = lower(plan, 0, stage_schedule(plan, 0));
  int64_t working = -1, stash = -1;
  for (const Slot& s : prog.slots) {
    if (s.kind == SlotKind::recompute_working_set) working = s.bytes;
    if (s.kind == SlotKind::activations && stash < 0) stash = s.bytes;
  }
  CHECK(working == std::llround(in.recompute_working_set_bytes));
  // Stage 0: 2 layers and the embedding's dropout output.
  CHECK(stash == std::llround(2 * in.layer_activation_bytes + in.embedding_activation_bytes));
  // Per layer, T = 32 tokens, bf16, tp 2, no SP: the input 32 x 64 x 2 = 4096 bytes, the kept outputs wq 64 + wv 32
  // + w1 256 and the attention output 64 elements per token before tp: 416 x 32 x 2 / 2 = 13312, the log-sum-exp
  // 4 x 4 heads x 32 / 2 = 256: 17664 bytes (compiled element-wise ops keep nothing more).
  CHECK(in.layer_activation_bytes == doctest::Approx(17664.0));
  // The rebuilt part runs in the working set: both memory-bound passes go there.
  for (const Op& op : prog.ops) {
    if (op.term == Term::recompute && op.kind == OpKind::memory) CHECK(prog.slots[static_cast<size_t>(op.slot)].kind == SlotKind::recompute_working_set);
  }
}

TEST_CASE("ZeRO-3 recompute_layers K: per-linear units gather again for the K rerun layers only; whole layers and "
          "selective-op never") {
  // dp 4, one stage of 4 layers, 2 microbatches: per microbatch a gather per layer in forward and in backward; the
  // per-linear unit adds one per rerun layer (the cost model's (stage layers + recomputed layers) x zero3_gather_s),
  // FSDP's whole layers none (recompute_regathers: the rerun reads the block gathered for the backward).
  for (int k : {1, 3}) {
    Plan linear = small_plan(4, 1, 1, 2);
    linear.parallel.zero_stage = 3;
    linear.parallel.recompute = Recompute::full;
    linear.parallel.recompute_layers = k;
    linear.parallel.zero3_gather_unit = Zero3GatherUnit::linear;
    REQUIRE(validate(linear).ok());
    int per_linear = 0;
    for (const Op& op : lower(linear, 0, stage_schedule(linear, 0)).ops) {
      per_linear += std::strncmp(op.label, "zero3.all_gather.", 17) == 0;
    }
    CHECK(per_linear == 4 * 2 * (4 + k + 4));
  }
  for (int k : {1, 3}) {
    Plan plan = small_plan(4, 1, 1, 2);
    plan.parallel.zero_stage = 3;
    plan.parallel.recompute = Recompute::full;
    plan.parallel.recompute_layers = k;
    REQUIRE(validate(plan).ok());
    int gathers = 0;
    for (const Op& op : lower(plan, 0, stage_schedule(plan, 0)).ops) gathers += is(op, "zero3.all_gather");
    CHECK(gathers == 2 * (4 + 4));
    for (int64_t diff : peak_minus_model(plan, lower_all(plan))) CHECK(std::llabs(diff) <= 4);
  }
  Plan plan = small_plan(4, 1, 1, 2);
  plan.parallel.zero_stage = 3;
  plan.parallel.recompute = Recompute::selective_op;
  REQUIRE(validate(plan).ok());
  const Program prog = lower(plan, 0, stage_schedule(plan, 0));
  int gathers = 0, reruns = 0;
  bool gathered = false;  // the layer's backward gather precedes each layer's rerun
  for (const Op& op : prog.ops) {
    if (is(op, "zero3.all_gather")) {
      ++gathers;
      gathered = op.phase == Phase::backward;
    }
    if (op.term == Term::recompute && op.kind == OpKind::gemm) {
      ++reruns;
      CHECK(gathered);
    }
    if (is(op, "qkv.dgrad")) gathered = false;
  }
  CHECK(gathers == 2 * (4 + 4));
  CHECK(reruns == static_cast<int>(2 * 4 * selective_op_matmuls(plan.model).rerun.size()));
  for (int64_t diff : peak_minus_model(plan, lower_all(plan))) CHECK(std::llabs(diff) <= 4);
}

TEST_CASE("recompute_layers with a MoE model's leading dense layer: the chunk's first layer in model order reruns, "
          "the stashes are the model's") {
  // 4 layers (1 dense, 3 MoE of 8 experts, top-2, ep 2) on pp 2, K = 1: stage 0 reruns its dense layer and keeps
  // its MoE layer, stage 1 reruns its first MoE layer.
  Plan plan = small_plan(4, 1, 2);
  plan.model.experts = 8;
  plan.model.top_k = 2;
  plan.model.ffn_hidden = 128;
  plan.model.ffn_type = FfnType::swiglu;
  plan.model.dense_layers = 1;
  plan.model.dense_ffn_hidden = 256;
  plan.parallel.ep = 2;
  plan.parallel.recompute = Recompute::full;
  plan.parallel.recompute_layers = 1;
  REQUIRE(validate(plan).ok());
  const auto progs = lower_all(plan);
  for (int64_t rank : {0, 4}) {
    const Program& prog = progs[static_cast<size_t>(rank)];
    CAPTURE(rank);
    int qkv = 0, router = 0;
    for (const Op& op : prog.ops) {
      if (op.term != Term::recompute) continue;
      qkv += is(op, "qkv");
      router += is(op, "moe.router");
    }
    CHECK(qkv == 2);                         // one layer per backward task, 2 microbatches
    CHECK(router == (rank == 0 ? 0 : 2));  // stage 0's rerun layer is the dense one
  }
  for (int64_t diff : peak_minus_model(plan, progs)) CHECK(std::llabs(diff) <= 4);
}
