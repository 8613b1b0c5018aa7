// Tests for simulator/schedule: op orders, dependencies and live-activation counts per schedule.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include "planner/spec/error.hpp"
#include "planner/cost/pipeline.hpp"
#include "simulator/schedule.hpp"

using namespace parplan;
using namespace parplan::sim;

namespace {
// Every (microbatch, chunk) appears exactly once per needed kind on every stage.
void check_complete(const PipelineSchedule& s, bool split) {
  for (const auto& o : s.order) {
    std::set<std::tuple<int, int, int>> seen;
    for (const PipeOp& x : o) CHECK(seen.insert({static_cast<int>(x.kind), x.microbatch, x.chunk}).second);
    CHECK(o.size() == static_cast<size_t>((split ? 3 : 2) * s.microbatches * s.chunks));
  }
}
// Every op's producer on another stage is in that stage's order.
void check_producers_scheduled(const PipelineSchedule& s) {
  for (size_t i = 0; i < s.order.size(); ++i) {
    for (const PipeOp& x : s.order[i]) {
      const CrossDep d = cross_stage_dependency(s, static_cast<int64_t>(i), x);
      if (!d.exists) continue;
      const auto& o = s.order[static_cast<size_t>(d.stage)];
      CHECK(std::find(o.begin(), o.end(), d.op) != o.end());
    }
  }
}
}  // namespace

TEST_CASE("schedule: every op once per stage, for all schedules") {
  for (int64_t p : {1, 2, 4, 7}) {
    for (int64_t m : {1, 3, 8, 16}) {
      check_complete(make_schedule(Schedule::gpipe, p, m), false);
      check_complete(make_schedule(Schedule::one_f_one_b, p, m), false);
      check_complete(make_schedule(Schedule::zero_bubble, p, m), true);
      check_complete(make_schedule(Schedule::zb_2p, p, m), true);
      if (m % p == 0) {
        for (int64_t v : {2, 3}) check_complete(make_schedule(Schedule::interleaved, p, m, v), false);
      }
    }
  }
}

TEST_CASE("schedule: 1F1B warm-up is p - stage - 1 forwards, then strict alternation") {
  const PipelineSchedule s = make_schedule(Schedule::one_f_one_b, 4, 8);
  const auto& o0 = s.order[0];
  for (int k = 0; k < 3; ++k) CHECK(o0[static_cast<size_t>(k)].kind == OpKind::forward);
  CHECK(o0[3] == PipeOp{OpKind::forward, 3, 0});
  CHECK(o0[4] == PipeOp{OpKind::backward, 0, 0});
  const auto& o3 = s.order[3];
  CHECK(o3[0] == PipeOp{OpKind::forward, 0, 0});
  CHECK(o3[1] == PipeOp{OpKind::backward, 0, 0});
}

TEST_CASE("schedule: ZB-2p runs 2p - 1 forwards on stage 0 before its first B, then B first, W to fill") {
  // The paper's ZB-H2 shape (Qi et al. 2023 Fig. 3): stage i's warm-up is 2(p - 1 - i) + 1 forwards, so stage 0 holds
  // 2p - 1 microbatches; the last stage alternates F and B from the start; the W passes come once the in-flight limit
  // stops the forwards, and all that is left at the end.
  const int64_t p = 4, m = 12;
  const PipelineSchedule s = make_schedule(Schedule::zb_2p, p, m);
  for (int64_t i = 0; i < p; ++i) {
    const auto& o = s.order[static_cast<size_t>(i)];
    const auto first_b = std::find_if(o.begin(), o.end(), [](const PipeOp& x) { return x.kind != OpKind::forward; });
    CHECK(first_b - o.begin() == 2 * (p - 1 - i) + 1);
    CHECK(first_b->kind == OpKind::backward_input);
    CHECK(o.back() == PipeOp{OpKind::backward_weight, static_cast<int32_t>(m - 1), 0});
  }
  CHECK(s.order[3][1] == PipeOp{OpKind::backward_input, 0, 0});
  CHECK(s.order[3][2] == PipeOp{OpKind::forward, 1, 0});
  check_producers_scheduled(s);
  CHECK_THROWS_AS(make_schedule(Schedule::zb_2p, 4, 8, 2), InputError);  // one chunk per stage
}

namespace {
// A stage's order as text: "F3.1" is microbatch 3's forward of the stage's chunk 1.
std::string order_text(const std::vector<PipeOp>& o) {
  std::string s;
  for (const PipeOp& x : o) {
    if (!s.empty()) s += ' ';
    s += std::string(to_string(x.kind)) + std::to_string(x.microbatch) + "." + std::to_string(x.chunk);
  }
  return s;
}
}  // namespace

TEST_CASE("schedule: ZB-V places the chunks in a V and runs the hand-checked p 4, m 8 order") {
  const int64_t p = 4, m = 8;
  const PipelineSchedule s = make_schedule(Schedule::zb_v, p, m, 2);
  // The V: stage i holds virtual stages i and 2p - 1 - i; the first and the last are stage 0's, the turn (3 -> 4) is
  // the last stage's own.
  CHECK(s.virtual_stage(0, 0) == 0);
  CHECK(s.virtual_stage(0, 1) == 7);
  CHECK(s.virtual_stage(3, 0) == 3);
  CHECK(s.virtual_stage(3, 1) == 4);
  for (int64_t v = 0; v < 2 * p; ++v) CHECK(s.virtual_stage(s.stage_of(v), s.chunk_of(v)) == v);
  const CrossDep turn = cross_stage_dependency(s, 3, PipeOp{OpKind::forward, 0, 1});
  CHECK((turn.exists && turn.stage == 3 && turn.op == PipeOp{OpKind::forward, 0, 0}));
  const CrossDep loss = cross_stage_dependency(s, 0, PipeOp{OpKind::backward_input, 0, 1});
  CHECK((loss.exists && loss.stage == 0 && loss.op == PipeOp{OpKind::forward, 0, 1}));
  // Stage 0: 2p - 1 chunk-0 forwards while microbatch 0 goes down and up the V, then its chunk 1 and at once that
  // chunk's B (the loss is here); W fills what the B's leave. Stage 3: chunk 0 and chunk 1 back to back (no send), up
  // to 2p chunk-microbatches, then B's of both chunks (chunk 0 first once its gradient has come round).
  CHECK(order_text(s.order[0]) ==
        "F0.0 F1.0 F2.0 F3.0 F4.0 F5.0 F6.0 F0.1 B0.1 W0.1 F1.1 B1.1 W1.1 F2.1 B2.1 B0.0 W2.1 F3.1 B3.1 B1.0 W0.0 B2.0 "
        "F7.0 W3.1 F4.1 B3.0 B4.1 W1.0 W2.0 W3.0 F5.1 B5.1 W4.1 B4.0 W5.1 F6.1 B6.1 W4.0 W6.1 B5.0 W5.0 F7.1 B7.1 B6.0 "
        "W7.1 W6.0 B7.0 W7.0");
  CHECK(order_text(s.order[3]) ==
        "F0.0 F0.1 F1.0 F1.1 F2.0 F2.1 F3.0 F3.1 B0.1 B0.0 W0.1 F4.0 B1.1 B1.0 B2.1 B2.0 W0.0 F4.1 B3.1 B3.0 W1.1 F5.0 "
        "W1.0 F5.1 W2.1 F6.0 B4.1 B4.0 W2.0 F6.1 W3.1 F7.0 B5.1 B5.0 W3.0 F7.1 B6.1 B6.0 W4.1 W4.0 W5.1 W5.0 B7.1 B7.0 "
        "W6.1 W6.0 W7.1 W7.0");
  for (int64_t pp : {1, 2, 3, 5}) {
    for (int64_t mm : {1, 2, 5, 12}) check_complete(make_schedule(Schedule::zb_v, pp, mm, 2), true);
  }
  check_producers_scheduled(s);
  CHECK_THROWS_AS(make_schedule(Schedule::zb_v, 4, 8, 1), InputError);  // the V has 2 chunks
  CHECK_THROWS_AS(make_schedule(Schedule::zb_v, 4, 8, 3), InputError);
}

TEST_CASE("schedule: ZB-V holds 2 min(p, m) chunk-microbatches on every stage: 1F1B's stage-0 peak (Qi et al.)") {
  // Qi et al. 2023 Sec. 6: ZB-V's peak activation memory is 1F1B's, p M_B: 2p chunks of half a stage each.
  for (int64_t p : {1, 2, 3, 4, 8}) {
    for (int64_t m : {1, 2, 3, 8, 16, 24}) {
      const LiveActivations live = live_activations(make_schedule(Schedule::zb_v, p, m, 2));
      for (int64_t i = 0; i < p; ++i) {
        CAPTURE(p);
        CAPTURE(m);
        CHECK(live.peak_until_weight_grad[static_cast<size_t>(i)] == 2 * std::min(p, m));
        CHECK(in_flight_chunks(Schedule::zb_v, p, m, 2, i) == 2 * std::min(p, m));
      }
      CHECK(in_flight_chunks(Schedule::zb_v, p, m, 2, 0) == 2 * in_flight_chunks(Schedule::one_f_one_b, p, m, 1, 0));
    }
  }
}

TEST_CASE("schedule: ZB-V over real op times: every op once, the producers first, at most 2p chunks in flight") {
  // Seeded op times, some zero (a stage with no layers: its chunks' F, B and W are 0), one stage much slower: the
  // order built from them must still run every op (a chunk-0 F never takes the last place among 2p chunk-0
  // activations awaiting their B, which only the stage's own chunk-1 F could free) within 1F1B's memory.
  uint64_t state = 7;
  const auto u01 = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) / 9007199254740992.0;
  };
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t p = 1 + static_cast<int64_t>(u01() * 9), m = 1 + static_cast<int64_t>(u01() * 30);
    std::vector<ZbVOpTimes> t(static_cast<size_t>(p));
    for (ZbVOpTimes& o : t) {
      for (int c = 0; c < 2; ++c) o.forward[c] = u01(), o.backward_input[c] = 2 * u01(), o.backward_weight[c] = u01();
    }
    if (trial % 3 == 0) t[0] = ZbVOpTimes{{0, 0}, {0, 0}, {0, 0}};
    if (trial % 5 == 0) t[static_cast<size_t>(p - 1)].backward_input[0] *= 20;
    CAPTURE(trial);
    const PipelineSchedule s = make_schedule(Schedule::zb_v, p, m, 2, t);
    check_complete(s, true);
    check_producers_scheduled(s);
    const LiveActivations live = live_activations(s);
    for (int64_t i = 0; i < p; ++i) CHECK(live.peak_until_weight_grad[static_cast<size_t>(i)] <= 2 * std::min(p, m));
  }
  const std::vector<ZbVOpTimes> three(3);
  CHECK_THROWS_AS(make_schedule(Schedule::zb_v, 4, 8, 2, three), InputError);  // times for other than p stages
  CHECK_THROWS_AS(make_schedule(Schedule::zb_2p, 3, 8, 1, three), InputError);  // another schedule
}

TEST_CASE("schedule: Megatron interleaved order maps forwards to chunks in groups of p") {
  const PipelineSchedule s = make_schedule(Schedule::interleaved, 2, 4, 2);
  // stage 0: warm-up 2(p-1) + (v-1)p = 4 forwards: mb 0,1 chunk 0, then mb 0,1 chunk 1.
  const auto& o = s.order[0];
  CHECK(o[0] == PipeOp{OpKind::forward, 0, 0});
  CHECK(o[1] == PipeOp{OpKind::forward, 1, 0});
  CHECK(o[2] == PipeOp{OpKind::forward, 0, 1});
  CHECK(o[3] == PipeOp{OpKind::forward, 1, 1});
  CHECK(o[4] == PipeOp{OpKind::forward, 2, 0});
  CHECK(o[5] == PipeOp{OpKind::backward, 0, 1});  // backwards start on the last chunk
}

TEST_CASE("schedule: bad shapes are InputErrors naming the problem") {
  CHECK_THROWS_AS(make_schedule(Schedule::interleaved, 4, 6, 2), InputError);
  CHECK_THROWS_WITH(make_schedule(Schedule::interleaved, 4, 6, 2), doctest::Contains("multiple of the pipeline stages"));
  CHECK_THROWS_AS(make_schedule(Schedule::one_f_one_b, 4, 8, 2), InputError);
  CHECK_THROWS_AS(make_schedule(Schedule::gpipe, 0, 8), InputError);
  CHECK_THROWS_AS(make_schedule(Schedule::gpipe, 4, 0), InputError);
}

TEST_CASE("schedule: cross-stage dependencies follow the virtual stages") {
  const PipelineSchedule s = make_schedule(Schedule::interleaved, 4, 8, 2);
  // F of chunk 1 on stage 0 (virtual stage 4) waits for F of chunk 0 on stage 3 (virtual stage 3).
  CrossDep d = cross_stage_dependency(s, 0, {OpKind::forward, 5, 1});
  REQUIRE(d.exists);
  CHECK(d.stage == 3);
  CHECK(d.op == PipeOp{OpKind::forward, 5, 0});
  // B of chunk 0 on stage 3 (virtual stage 3) waits for B on stage 0 chunk 1.
  d = cross_stage_dependency(s, 3, {OpKind::backward, 2, 0});
  REQUIRE(d.exists);
  CHECK(d.stage == 0);
  CHECK(d.op == PipeOp{OpKind::backward, 2, 1});
  // The first virtual stage's forward waits for nothing; the last virtual stage's backward waits for its forward.
  CHECK_FALSE(cross_stage_dependency(s, 0, {OpKind::forward, 0, 0}).exists);
  d = cross_stage_dependency(s, 3, {OpKind::backward, 1, 1});
  REQUIRE(d.exists);
  CHECK(d.op == PipeOp{OpKind::forward, 1, 1});
  // W waits for its own B.
  const PipelineSchedule z = make_schedule(Schedule::zero_bubble, 4, 8);
  d = cross_stage_dependency(z, 2, {OpKind::backward_weight, 3, 0});
  REQUIRE(d.exists);
  CHECK(d.stage == 2);
  CHECK(d.op == PipeOp{OpKind::backward_input, 3, 0});
}

TEST_CASE("schedule: peak live activations equal the memory model's in-flight counts") {
  for (int64_t p : {1, 2, 4, 8}) {
    for (int64_t m : {1, 2, 4, 8, 16, 32}) {
      for (Schedule sc : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::zero_bubble}) {
        const LiveActivations live = live_activations(make_schedule(sc, p, m));
        for (int64_t i = 0; i < p; ++i) {
          CAPTURE(p);
          CAPTURE(m);
          CAPTURE(i);
          // Memory holds a stash until its W (ZB-H1) or full backward.
          CHECK(live.peak_until_weight_grad[static_cast<size_t>(i)] == in_flight_chunks(sc, p, m, 1, i));
          if (sc == Schedule::zero_bubble) CHECK(live.peak[static_cast<size_t>(i)] == std::min(p - i, m));
        }
      }
      if (m % p != 0) continue;
      for (int64_t v : {2, 3, 4}) {
        const LiveActivations live = live_activations(make_schedule(Schedule::interleaved, p, m, v));
        for (int64_t i = 0; i < p; ++i) {
          CAPTURE(p);
          CAPTURE(m);
          CAPTURE(v);
          CHECK(live.peak[static_cast<size_t>(i)] == in_flight_chunks(Schedule::interleaved, p, m, v, i));
        }
        // Stage 0: Megatron warm-up + 1 = 2(p-1) + (v-1)p + 1, capped at m v.
        CHECK(live.peak[0] == std::min(2 * (p - 1) + (v - 1) * p + 1, m * v));
      }
    }
  }
}

TEST_CASE("schedule: at the peak, the first chunk's microbatches (the embedding outputs stage 0 stores) equal the "
          "memory model's count") {
  // Walk each stage's order: a forward adds a chunk-microbatch, its backward frees it; at every instant the stage
  // holds its peak, count the chunk-0 ones held. The largest such count is what the memory model must charge.
  const auto first_chunks_at_peak = [](const PipelineSchedule& s, int64_t stage) {
    int64_t held = 0, held0 = 0, peak = 0, peak0 = 0;
    for (const PipeOp& x : s.order[static_cast<size_t>(stage)]) {
      const int64_t step = x.kind == OpKind::forward ? 1 : -1;
      held += step;
      if (x.chunk == 0) held0 += step;
      if (held > peak) peak = held, peak0 = held0;
      else if (held == peak) peak0 = std::max(peak0, held0);
    }
    return peak0;
  };
  for (int64_t p : {1, 2, 3, 4, 8}) {
    for (int64_t m : {1, 2, 3, 4, 8, 16, 24, 32}) {
      for (Schedule sc : {Schedule::gpipe, Schedule::one_f_one_b}) {
        const PipelineSchedule s = make_schedule(sc, p, m);
        for (int64_t i = 0; i < p; ++i) CHECK(first_chunks_at_peak(s, i) == in_flight_first_chunks(sc, p, m, 1, i));
      }
      if (m % p != 0) continue;
      for (int64_t v : {2, 3, 4, 6}) {
        const PipelineSchedule s = make_schedule(Schedule::interleaved, p, m, v);
        for (int64_t i = 0; i < p; ++i) {
          CAPTURE(p);
          CAPTURE(m);
          CAPTURE(v);
          CAPTURE(i);
          CHECK(first_chunks_at_peak(s, i) == in_flight_first_chunks(Schedule::interleaved, p, m, v, i));
        }
      }
    }
  }
  // More than in-flight / v: p = 2, v = 2, m = 4 holds 5 chunk-microbatches on stage 0, 4 of them chunk 0; p = 8,
  // v = 3, m = 64: 31, of which 16 chunk 0 (in-flight / v would say 10.3).
  CHECK(in_flight_first_chunks(Schedule::interleaved, 2, 4, 2, 0) == 4);
  CHECK(in_flight_first_chunks(Schedule::interleaved, 8, 64, 3, 0) == 16);
}

TEST_CASE("schedule: explicit peaks: GPipe m, 1F1B min(p - stage, m), ZB-H1 keeps W inputs for min(p, m)") {
  const int64_t p = 4, m = 8;
  const LiveActivations g = live_activations(make_schedule(Schedule::gpipe, p, m));
  const LiveActivations f = live_activations(make_schedule(Schedule::one_f_one_b, p, m));
  const LiveActivations z = live_activations(make_schedule(Schedule::zero_bubble, p, m));
  for (int64_t i = 0; i < p; ++i) {
    const auto iz = static_cast<size_t>(i);
    CHECK(g.peak[iz] == m);
    CHECK(f.peak[iz] == p - i);
    CHECK(z.peak[iz] == p - i);
    CHECK(z.peak_until_weight_grad[iz] == p);
    CHECK(f.peak_until_weight_grad[iz] == f.peak[iz]);
  }
}

TEST_CASE("schedule: the first stage runs first_stage_warmup() + 1 forwards before its first backward and (1F1B "
          "family) as many backwards after its last forward, in every order") {
  const auto is_fwd = [](const PipeOp& x) { return x.kind == OpKind::forward; };
  for (int64_t p : {1, 2, 3, 4, 8}) {
    for (int64_t m : {1, 2, 3, 4, 8, 16, 24}) {
      for (Schedule sc : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::zero_bubble, Schedule::zb_2p,
                          Schedule::zb_v, Schedule::interleaved}) {
        for (int64_t v : {1, 2, 4}) {
          if (v != (sc == Schedule::zb_v ? 2 : 1) && !(sc == Schedule::interleaved && v > 1)) continue;
          if (sc == Schedule::interleaved && m % p != 0) continue;
          CAPTURE(p);
          CAPTURE(m);
          CAPTURE(v);
          CAPTURE(static_cast<int>(sc));
          const PipelineSchedule s = make_schedule(sc, p, m, v);
          const std::vector<PipeOp>& o = s.order[0];
          const auto first_b = std::find_if_not(o.begin(), o.end(), is_fwd);
          const auto last_f = std::find_if(o.rbegin(), o.rend(), is_fwd).base();
          const auto cool = std::count_if(last_f, o.end(), [](const PipeOp& x) { return x.kind != OpKind::backward_weight; });
          const int64_t w = first_stage_warmup(sc, p, m, v);
          CHECK(w <= m * v);
          CHECK(first_b - o.begin() == std::min(w + 1, m * v));
          // ZB-2p and ZB-V run backwards first where both are ready, so their cool-down is no longer.
          if (sc == Schedule::zb_2p || sc == Schedule::zb_v) CHECK(cool <= std::min(w + 1, m * v));
          else CHECK(cool == std::min(w + 1, m * v));
        }
      }
    }
  }
}
