// Host-backend runs of a 2 x 2 x 2 plan: completes, bytes per collective equal the cost model's, the schedule's
// order holds, the allocated bytes equal the memory model's; rank-local mode marks communication as predicted.
#include <doctest/doctest.h>

#include <cmath>

#include "planner/cost/collectives.hpp"
#include "planner/spec/config.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/spec/error.hpp"
#include "runtime/collective_bytes.hpp"
#include "runtime/executor.hpp"
#include "runtime/measured_timeline.hpp"
#include "runtime/schedule_source.hpp"
#include "test_plan.hpp"

using namespace parplan;
using namespace parplan::runtime;
using parplan::runtime::testing::one_f_one_b;
using parplan::runtime::testing::small_plan;

namespace {

std::vector<Program> lower_all(const Plan& plan) {
  std::vector<Program> progs;
  const int64_t per_stage = plan.parallel.tp * plan.parallel.cp * plan.parallel.dp;
  for (int64_t r = 0; r < plan.parallel.gpus(); ++r) {
    progs.push_back(lower(plan, r, one_f_one_b(plan.parallel.pp, plan.parallel.num_microbatches, r / per_stage)));
  }
  return progs;
}

}  // namespace

TEST_CASE("HSDP on 4 host ranks (2 replicas of 2): runs, reduce-scatter and replica all-reduce bytes are the model's") {
  for (const bool fsdp : {false, true}) {  // ZeRO-1 (once a step) and ZeRO-3 (every microbatch)
    CAPTURE(fsdp);
    Plan plan = small_plan(4, 1, 1, 2);
    plan.parallel.zero_stage = fsdp ? 3 : 1;
    plan.parallel.dp_replicate = 2;
    REQUIRE(validate(plan).ok());
    auto world = make_host_world(4);
    const RunResult r = execute(*world, lower_all(plan), ExecOptions{.warmup = 1, .steps = 2});
    REQUIRE(r.ranks.size() == 4);
    const DpCost dc = dp_cost(plan, stage_params(plan, 0));
    const double reductions = fsdp ? 2.0 : 1.0;
    for (const RankRun& rr : r.ranks) {
      CAPTURE(rr.rank);
      int64_t scattered = 0, replicated = 0;
      for (const CollectiveRecord& c : rr.collectives) {
        CHECK(c.group_size == 2);  // the shard group and the replica group: 2 ranks each
        CHECK(static_cast<double>(c.bytes_sent) ==
              bytes_sent_per_rank(to_planner(c.kind), static_cast<double>(c.payload_bytes), c.group_size));
        if (c.kind == CollectiveKind::reduce_scatter) scattered += c.payload_bytes;
        if (c.kind == CollectiveKind::all_reduce) replicated += c.payload_bytes;  // tp 1: no TP all-reduce
      }
      // One step's records (the executor keeps the last step's).
      CHECK(scattered == std::llround(reductions * dc.grad_bytes));
      CHECK(replicated == std::llround(reductions * dc.replica_bytes));
    }
  }
}

TEST_CASE("dp x tp x pp = 2 x 2 x 2 on 8 host ranks: runs, bytes equal the cost model's, memory equals the model's") {
  const Plan plan = small_plan();
  const auto progs = lower_all(plan);
  auto world = make_host_world(8);
  const RunResult r = execute(*world, progs, ExecOptions{.warmup = 1, .steps = 2});
  REQUIRE(r.ranks.size() == 8);
  CHECK(r.median_step_s() > 0);
  const LayerCost lc = layer_cost(plan);
  for (const RankRun& rr : r.ranks) {
    CAPTURE(rr.rank);
    const DpCost dc = dp_cost(plan, stage_params(plan, rr.stage));
    int tp = 0, dp = 0, sends = 0;
    int64_t dp_bytes = 0;
    for (const CollectiveRecord& c : rr.collectives) {
      // Every rank sent exactly what the planner's ring formula says for the op's size.
      const bool receives_only = c.kind == CollectiveKind::recv || c.kind == CollectiveKind::barrier;
      CHECK(static_cast<double>(c.bytes_sent) ==
            (receives_only ? 0.0 : bytes_sent_per_rank(to_planner(c.kind), static_cast<double>(c.payload_bytes), c.group_size)));
      if (c.kind == CollectiveKind::all_reduce && c.payload_bytes == std::llround(lc.tp_bytes)) ++tp;
      if (c.kind == CollectiveKind::all_reduce && c.payload_bytes != std::llround(lc.tp_bytes) && c.payload_bytes != 4 * 32) {
        ++dp;  // not a TP all-reduce nor a cross-entropy one (4 bytes x 32 tokens): a DP gradient bucket
        dp_bytes += c.payload_bytes;
      }
      if (c.kind == CollectiveKind::send) {
        ++sends;
        CHECK(c.payload_bytes == std::llround(p2p_bytes(plan)));
      }
    }
    CHECK(tp == 16);
    CHECK(dp == dc.buckets);
    CHECK(dp_bytes == std::llround(dc.grad_bytes));
    CHECK(sends == 2);
    // Allocations: the memory model's tensors (weights, grads, optimizer, activations at the schedule's peak).
    const StageMemory sm = stage_memory(plan, rr.stage);
    CHECK(std::llabs(rr.model_peak_bytes() - std::llround(sm.weights + sm.grads + sm.optimizer + sm.activations +
                                                          sm.recompute_working_set + sm.zero3_buffers)) <= 4);
    CHECK(rr.allowance_bytes > 0);
    // The schedule's dependency order: on the host every op starts after the previous one ended.
    const auto& times = rr.step_ops[static_cast<size_t>(r.median_step)];
    // (Adjacent p2p ops run as one grouped exchange and share its span.)
    const auto& ops = progs[static_cast<size_t>(rr.rank)].ops;
    int grouped = 0;
    for (size_t i = 1; i < times.size(); ++i) {
      CAPTURE(i);
      if (ops[i].kind == OpKind::p2p && ops[i - 1].kind == OpKind::p2p) {
        ++grouped;
        CHECK(times[i].start_s == times[i - 1].start_s);
        continue;
      }
      CHECK(times[i].start_s >= times[i - 1].end_s - 1e-9);
    }
    CHECK(grouped == 1);  // 1F1B on 2 stages x 2 microbatches: one send_forward + recv_backward pair per stage
  }
}

TEST_CASE("ZeRO-3 on 4 host ranks, whole-layer and per-linear gathers: runs, gathers the layer's bytes, allocates the "
          "memory model's bytes") {
  for (Zero3GatherUnit unit : {Zero3GatherUnit::layer, Zero3GatherUnit::linear}) {
    Plan plan = small_plan(4, 1, 1, 2);
    plan.parallel.zero_stage = 3;
    plan.parallel.recompute = Recompute::full;
    plan.parallel.zero3_gather_unit = unit;
    REQUIRE(validate(plan).ok());
    const auto progs = lower_all(plan);
    auto world = make_host_world(4);
    const RunResult r = execute(*world, progs, ExecOptions{.warmup = 1, .steps = 2});
    REQUIRE(r.ranks.size() == 4);
    CAPTURE(static_cast<int>(unit));
    const LayerCost lc = layer_cost(plan);
    for (const RankRun& rr : r.ranks) {
      int gathers = 0;
      int64_t gathered = 0;
      for (const CollectiveRecord& c : rr.collectives) {
        if (c.kind != CollectiveKind::all_gather) continue;
        ++gathers;
        gathered += c.payload_bytes;
      }
      // Per step, 4 layers x 2 microbatches: per linear a gather in forward, recompute and backward; whole layers
      // (FSDP) one in forward and one before the backward, which the recompute reads (recompute_regathers).
      const int passes = (unit == Zero3GatherUnit::linear ? 3 : 2) * 4 * 2;
      CHECK(gathers == passes * (unit == Zero3GatherUnit::linear ? 4 : 1));
      // Each gather's size is rounded down to whole elements per rank: within 4 ranks x 2 bytes per gather.
      CHECK(static_cast<double>(gathered) <= passes * 2.0 * lc.params + 1e-9);
      CHECK(static_cast<double>(gathered) >= passes * 2.0 * lc.params - gathers * 4.0 * 2.0);
      const StageMemory sm = stage_memory(plan, rr.stage);
      CHECK(std::llabs(rr.model_peak_bytes() - std::llround(sm.weights + sm.grads + sm.optimizer + sm.activations +
                                                            sm.recompute_working_set + sm.zero3_buffers)) <= 4);
    }
  }
}

TEST_CASE("rank-local mode runs one rank's program with communication predicted, not measured") {
  const Plan plan = small_plan();
  const auto all = lower_all(plan);
  auto world = make_host_world(1);
  const RunResult r = execute(*world, {all[5]}, ExecOptions{.warmup = 0, .steps = 1, .rank_local = true});
  REQUIRE(r.ranks.size() == 1);
  const RankRun& rr = r.ranks[0];
  CHECK(rr.rank == 5);
  CHECK(rr.collectives.empty());
  int predicted = 0;
  for (size_t i = 0; i < all[5].ops.size(); ++i) {
    const Op& op = all[5].ops[i];
    const OpTime& t = rr.step_ops[0][i];
    if (op.kind == OpKind::collective || op.kind == OpKind::p2p) {
      CHECK_FALSE(t.measured);
      CHECK(t.duration_s() == doctest::Approx(op.predicted_s));
      ++predicted;
    }
    if (op.kind == OpKind::gemm) CHECK(t.measured);
  }
  CHECK(predicted > 0);
  // One virtual communication stream: predicted collectives do not overlap each other, and the step ends after
  // every op.
  double comm_free = 0;
  for (size_t i = 0; i < all[5].ops.size(); ++i) {
    const OpTime& t = rr.step_ops[0][i];
    CHECK(t.end_s <= rr.step_s[0] + 1e-12);
    if (t.measured || (all[5].ops[i].kind != OpKind::collective && all[5].ops[i].kind != OpKind::p2p)) continue;
    if (i > 0 && all[5].ops[i - 1].kind == OpKind::p2p && all[5].ops[i].kind == OpKind::p2p &&
        all[5].ops[i - 1].group == all[5].ops[i].group) {
      continue;  // the same grouped exchange
    }
    CHECK(t.start_s >= comm_free - 1e-12);
    comm_free = t.end_s;
  }
  const StageMemory sm = stage_memory(plan, 1);
  CHECK(std::llabs(rr.model_peak_bytes() - std::llround(sm.weights + sm.grads + sm.optimizer + sm.activations)) <= 4);
}

TEST_CASE("rank-local mode places predicted communication on a virtual stream: blocking waits, overlapped hides") {
  const auto gemm = [](int32_t wait_for = -1) {
    Op o;
    o.kind = OpKind::gemm;
    o.wait_for = wait_for;
    return o;
  };
  const auto comm = [](OpKind kind, double predicted, bool overlap, Group g = Group::dp_cp) {
    Op o;
    o.kind = kind;
    o.predicted_s = predicted;
    o.overlap = overlap;
    o.group = g;
    return o;
  };
  const auto m = [](double a, double b) { return OpTime{a, b, true}; };
  const auto c = [](double at) { return OpTime{at, at, false}; };
  // Measured compute 0..4.5 s with communication issued between the GEMMs.
  const std::vector<Op> ops = {
      gemm(),                                           // 0: 0-1
      comm(OpKind::collective, 2.5, true),              // 1: overlapped bucket, 1-3.5 on the comm stream
      gemm(),                                           // 2: 1-2, beside it
      comm(OpKind::collective, 0.5, false, Group::tp),  // 3: blocking, queued behind op 1: 3.5-4.0, compute waits 2.0
      gemm(),                                           // 4: 4-5
      gemm(1),                                          // 5: joins op 1 (done at 3.5): no wait, 5-6
      comm(OpKind::p2p, 0.3, false, Group::pp),         // 6-7: one exchange of both directions, 6-6.3
      comm(OpKind::p2p, 0.2, false, Group::pp),
      comm(OpKind::collective, 1.0, true),              // 8: overlapped, 6.3-7.3: the step's end waits for it
      gemm(),                                           // 9: 6.3-6.8
  };
  std::vector<OpTime> t = {m(0, 1), c(1), m(1, 2), c(2), m(2, 3), m(3, 4), c(4), c(4), c(4), m(4, 4.5)};
  CHECK(place_predicted_communication(ops, t, 4.5) == doctest::Approx(7.3));
  const std::vector<std::pair<double, double>> want = {{0, 1}, {1, 3.5}, {1, 2}, {3.5, 4}, {4, 5}, {5, 6}, {6, 6.3},
                                                       {6, 6.3}, {6.3, 7.3}, {6.3, 6.8}};
  for (size_t i = 0; i < t.size(); ++i) {
    CAPTURE(i);
    CHECK(t[i].start_s == doctest::Approx(want[i].first));
    CHECK(t[i].end_s == doctest::Approx(want[i].second));
    CHECK(t[i].measured == (ops[i].kind == OpKind::gemm));
  }
  // A join that comes before the collective is done waits for it.
  const std::vector<Op> early = {gemm(), comm(OpKind::collective, 3.0, true), gemm(1)};
  std::vector<OpTime> te = {m(0, 1), c(1), m(1, 2)};
  CHECK(place_predicted_communication(early, te, 2.0) == doctest::Approx(5.0));
  CHECK(te[2].start_s == doctest::Approx(4.0));
  // Without overlap every collective adds its time.
  std::vector<Op> blocking = ops;
  for (Op& o : blocking) o.overlap = false;
  std::vector<OpTime> tb = {m(0, 1), c(1), m(1, 2), c(2), m(2, 3), m(3, 4), c(4), c(4), c(4), m(4, 4.5)};
  CHECK(place_predicted_communication(blocking, tb, 4.5) == doctest::Approx(4.5 + 2.5 + 0.5 + 0.3 + 1.0));
  CHECK_THROWS_AS(place_predicted_communication(ops, te, 1.0), BackendError);
}

TEST_CASE("execute checks its inputs") {
  const Plan plan = small_plan();
  const auto all = lower_all(plan);
  auto world = make_host_world(2);
  CHECK_THROWS_AS(execute(*world, all, ExecOptions{}), BackendError);
  CHECK_THROWS(execute(*world, {all[0], all[1]}, ExecOptions{.warmup = 0, .steps = 0}));
}

TEST_CASE("interleaved and ZB-H1 orders from the simulator run on host ranks and allocate the memory model's bytes") {
  for (Schedule s : {Schedule::interleaved, Schedule::zero_bubble}) {
    Plan plan = small_plan(2, 1, 2, 2);
    plan.parallel.schedule = s;
    plan.parallel.vpp = s == Schedule::interleaved ? 2 : 1;
    std::vector<Program> progs;
    for (int64_t r = 0; r < 4; ++r) progs.push_back(lower(plan, r, stage_schedule(plan, r / 2)));
    auto world = make_host_world(4);
    const RunResult r = execute(*world, progs, ExecOptions{.warmup = 0, .steps = 1});
    for (const RankRun& rr : r.ranks) {
      int sends = 0;
      for (const CollectiveRecord& c : rr.collectives) sends += c.kind == CollectiveKind::send;
      // Interleaved: each chunk sends forward or backward across the stage boundary (2 chunks x 2 microbatches);
      // ZB-H1: one send per microbatch.
      CHECK(sends == (s == Schedule::interleaved ? 6 : 2));
      const StageMemory sm = stage_memory(plan, rr.stage);
      const double model = sm.weights + sm.grads + sm.optimizer + sm.activations + sm.recompute_working_set;
      // Every stage allocates what the memory model says (ZB-H1: each stash kept until its W, min(p, m) of them).
      CHECK(std::llabs(rr.model_peak_bytes() - std::llround(model)) <= 4);
    }
  }
}

TEST_CASE("the ZB-2p order runs on host ranks and each stage allocates 2p - 1 stashes, the memory model's bytes") {
  // pp 2, 4 microbatches: ZB-2p keeps min(2p - 1, m) = 3 microbatches until their W on both stages, ZB-H1
  // min(p, m) = 2.
  double peak[2] = {};
  for (Schedule s : {Schedule::zero_bubble, Schedule::zb_2p}) {
    Plan plan = small_plan(2, 1, 2, 4);
    plan.parallel.schedule = s;
    REQUIRE(validate(plan).ok());
    std::vector<Program> progs;
    for (int64_t r = 0; r < 4; ++r) progs.push_back(lower(plan, r, stage_schedule(plan, r / 2)));
    auto world = make_host_world(4);
    const RunResult r = execute(*world, progs, ExecOptions{.warmup = 0, .steps = 1});
    for (const RankRun& rr : r.ranks) {
      const StageMemory sm = stage_memory(plan, rr.stage);
      CHECK(sm.in_flight_chunks == (s == Schedule::zb_2p ? 3 : 2));
      const double model = sm.weights + sm.grads + sm.optimizer + sm.activations + sm.recompute_working_set;
      CHECK(std::llabs(rr.model_peak_bytes() - std::llround(model)) <= 4);
      if (rr.stage == 0) peak[s == Schedule::zb_2p] = static_cast<double>(rr.model_peak_bytes());
    }
  }
  CHECK(peak[1] > peak[0]);
}

TEST_CASE("interleaving with uneven stages (4 + 2 layers, 2 chunks each) runs; the stages allocate what the memory "
          "model says, as with an even split") {
  // Per stage: (measured model-state + activation peak) - (the memory model's), and forward GEMMs.
  const auto run = [](int64_t layers, int64_t last, const char* layout = nullptr) {
    Plan plan = small_plan(1, 1, 2, 4);
    plan.model.layers = layers;
    plan.parallel.schedule = Schedule::interleaved;
    plan.parallel.vpp = 2;
    plan.parallel.last_stage_layers = last;
    if (layout) plan.parallel.stage_layout = parse_stage_layout(layout, "--stage-layers");
    REQUIRE(validate(plan).ok());
    std::vector<Program> progs;
    for (int64_t r = 0; r < 2; ++r) progs.push_back(lower(plan, r, stage_schedule(plan, r)));
    auto world = make_host_world(2);
    const RunResult r = execute(*world, progs, ExecOptions{.warmup = 0, .steps = 1});
    std::vector<std::pair<int64_t, int>> out(2);
    for (const RankRun& rr : r.ranks) {
      const StageMemory sm = stage_memory(plan, rr.stage);
      out[static_cast<size_t>(rr.stage)].first =
          rr.model_peak_bytes() - std::llround(sm.weights + sm.grads + sm.optimizer + sm.activations + sm.recompute_working_set);
      for (const Op& op : progs[static_cast<size_t>(rr.rank)].ops) {
        out[static_cast<size_t>(rr.stage)].second += op.kind == OpKind::gemm && op.term == Term::forward;
      }
    }
    return out;
  };
  const auto uneven = run(6, 2), even = run(4, 0);
  // Both stages allocate exactly what the model says, the first stage's embedding outputs included (at its peak the
  // interleaved order holds 4 chunk-0 microbatches of 5 chunk-microbatches, in_flight_first_chunks).
  for (const auto* x : {&uneven, &even}) {
    CHECK(std::llabs((*x)[0].first) <= 4);
    CHECK(std::llabs((*x)[1].first) <= 4);
  }
  // Twice the layers on stage 0: twice its forward GEMMs of the even split; the last stage's are unchanged.
  CHECK(uneven[0].second == 2 * even[0].second);
  CHECK(uneven[1].second == even[1].second);
  // An explicit per-chunk layout (stage 0: chunk 0 without a layer, chunk 1 two; stage 1: 1 + 1): each chunk stashes
  // its own layers, and the memory model's walk over the order (interleaved_peak_bytes) allocates the same bytes.
  const auto chunks = run(4, 0, "0/2,1/1");
  CHECK(std::llabs(chunks[0].first) <= 4);
  CHECK(std::llabs(chunks[1].first) <= 4);
  CHECK(chunks[0].second == even[0].second);
  CHECK(chunks[1].second == even[1].second);
}

TEST_CASE("the measured timeline has a track per stage with forward and backward tasks and pp transfers") {
  const Plan plan = small_plan();
  const auto progs = lower_all(plan);
  auto world = make_host_world(8);
  const RunResult r = execute(*world, progs, ExecOptions{.warmup = 0, .steps = 1});
  const Timeline tl = measured_timeline(r, progs, false);
  CHECK(tl.source == "measured");
  REQUIRE(tl.tracks.size() == 2);
  for (const TimelineTrack& tr : tl.tracks) {
    int f = 0, b = 0;
    for (const TimelineEvent& e : tr.streams[0].events) {
      f += e.category == EventCategory::forward;
      b += e.category == EventCategory::backward;
    }
    CHECK(f == 2);  // one merged event per forward task
    CHECK(b == 2);
    CHECK(tr.streams[3].name == "pp");
    // 2 sends per stage, each naming the other stage; a receive batched with a send (1F1B's steady state: one
    // send_forward_recv_backward call) is drawn once, as the send, so no two events share an interval; the others
    // (the cool-down's) name no stage.
    const std::vector<TimelineEvent>& pp = tr.streams[3].events;
    int sends = 0;
    for (size_t i = 0; i < pp.size(); ++i) {
      sends += pp[i].peer_stage == 1 - tr.stage;
      CHECK((pp[i].peer_stage == 1 - tr.stage || pp[i].peer_stage == -1));
      for (size_t j = i + 1; j < pp.size(); ++j) {
        CHECK_FALSE((pp[i].start_s == pp[j].start_s && pp[i].end_s == pp[j].end_s));
      }
    }
    CHECK(sends == 2);
    CHECK(pp.size() == 3);  // 2 sends and the one receive not batched with a send
  }
  CHECK(tl.step_s == r.median_step_s());
}

TEST_CASE("the measured timeline draws each ring-attention step (a send and a receive in one exchange) once") {
  Plan plan = small_plan(1, 1, 1);
  plan.parallel.cp = 2;
  plan.num_gpus = 2;
  REQUIRE(validate(plan).ok());
  const auto progs = lower_all(plan);
  auto world = make_host_world(2);
  const RunResult r = execute(*world, progs, ExecOptions{.warmup = 0, .steps = 1});
  const Timeline tl = measured_timeline(r, progs, false);
  REQUIRE(tl.tracks.size() == 1);
  const TimelineStream& cp = tl.tracks[0].streams[2];
  REQUIRE(cp.name == "cp");
  // The exchanges execute() issues on the cp group (exchange_end), and the ops in them.
  const std::vector<Op>& ops = progs[0].ops;
  int64_t exchanges = 0, cp_ops = 0;
  for (size_t i = 0; i < ops.size(); i = exchange_end(ops, i)) {
    if (ops[i].kind != OpKind::p2p || ops[i].group != Group::cp) continue;
    ++exchanges;
    cp_ops += static_cast<int64_t>(exchange_end(ops, i) - i);
  }
  REQUIRE(exchanges > 0);
  CHECK(cp_ops >= 2 * exchanges);  // a send and a receive at least in each
  CHECK(static_cast<int64_t>(cp.events.size()) == exchanges);  // one event per exchange, not one per op
  for (size_t i = 1; i < cp.events.size(); ++i) {
    CHECK_FALSE((cp.events[i].start_s == cp.events[i - 1].start_s && cp.events[i].end_s == cp.events[i - 1].end_s));
  }
}
