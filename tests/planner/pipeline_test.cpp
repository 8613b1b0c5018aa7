// Tests for planner/pipeline: bubble fractions per schedule (GPipe/1F1B, interleaved, ZB-H1) and in-flight counts.
#include <doctest/doctest.h>

#include <vector>

#include "planner/pipeline.hpp"

using namespace parplan;

namespace {
std::vector<StageMicrobatchTime> uniform(int64_t p, double f, double bi, double bw) {
  return std::vector<StageMicrobatchTime>(static_cast<size_t>(p), StageMicrobatchTime{f, bi, bw, 0});
}
}  // namespace

TEST_CASE("GPipe and 1F1B bubble: (p-1)/m of ideal, (p-1)/(m+p-1) of the step") {
  for (int64_t p : {2, 4, 8, 16}) {
    for (int64_t m : {1, 4, 8, 64}) {
      for (Schedule s : {Schedule::gpipe, Schedule::one_f_one_b}) {
        const PipelineTime t = pipeline_time(s, m, 1, uniform(p, 1.0, 1.0, 1.0));
        CHECK(t.bubble_s / t.busy_s == doctest::Approx(double(p - 1) / double(m)));
        CHECK(t.bubble_s / t.step_s == doctest::Approx(double(p - 1) / double(m + p - 1)));
      }
    }
  }
}

TEST_CASE("interleaved bubble: (p-1)/(v m) of ideal (Narayanan 2021 Sec. 2.2.2)") {
  const PipelineTime t = pipeline_time(Schedule::interleaved, 64, 3, uniform(8, 1.0, 1.0, 1.0));
  CHECK(t.bubble_s / t.busy_s == doctest::Approx(7.0 / (3.0 * 64.0)));
}

TEST_CASE("ZB-H1 bubble (p-1)(F + B - W) is below 1F1B's (p-1)(F + B + W)") {
  const auto st = uniform(8, 1.0, 1.0, 1.0);
  const PipelineTime zb = pipeline_time(Schedule::zero_bubble, 16, 1, st);
  const PipelineTime ofob = pipeline_time(Schedule::one_f_one_b, 16, 1, st);
  CHECK(zb.bubble_s == doctest::Approx(7.0 * 1.0));
  CHECK(ofob.bubble_s == doctest::Approx(7.0 * 3.0));
  CHECK(zb.bubble_s < ofob.bubble_s);
}

TEST_CASE("ZB-H1 with fewer microbatches than stages: 1F1B's critical path over F + B, then one W") {
  const auto st = uniform(8, 1.0, 1.2, 0.8);  // F, B_input, B_weight
  for (int64_t m : {1, 3, 7}) {
    CAPTURE(m);
    const PipelineTime zb = pipeline_time(Schedule::zero_bubble, m, 1, st);
    CHECK(zb.step_s == doctest::Approx(static_cast<double>(m + 7) * 2.2 + 0.8));
    // 1F1B pays every W on the critical path: (m + p - 1)(F + B + W).
    const PipelineTime ofob = pipeline_time(Schedule::one_f_one_b, m, 1, st);
    CHECK(ofob.step_s - zb.step_s == doctest::Approx(static_cast<double>(m + 6) * 0.8));
  }
  // m = p - 1 and m = p differ by one steady-state F + B (the two forms meet).
  const double below = pipeline_time(Schedule::zero_bubble, 7, 1, st).step_s;
  const double at = pipeline_time(Schedule::zero_bubble, 8, 1, st).step_s;
  CHECK(at - below == doctest::Approx(2.2));
}

TEST_CASE("uneven stages: the slowest stage sets the steady state") {
  std::vector<StageMicrobatchTime> st = uniform(4, 1.0, 1.0, 1.0);
  st[2].forward_s = 2.0;  // stage 2 takes 4 per microbatch
  const PipelineTime t = pipeline_time(Schedule::one_f_one_b, 10, 1, st);
  CHECK(t.slowest_stage == 2);
  CHECK(t.step_s == doctest::Approx(10 * 4.0 + 3 * 3.0));
}

TEST_CASE("in-flight microbatches: GPipe m, 1F1B min(p-i, m), interleaved Megatron warm-up + 1, ZB-H1 min(p, m)") {
  CHECK(in_flight_chunks(Schedule::gpipe, 8, 32, 1, 3) == 32);
  CHECK(in_flight_chunks(Schedule::one_f_one_b, 8, 32, 1, 0) == 8);
  CHECK(in_flight_chunks(Schedule::one_f_one_b, 8, 32, 1, 7) == 1);
  CHECK(in_flight_chunks(Schedule::one_f_one_b, 8, 4, 1, 0) == 4);
  // Stage 0 with p = 8, v = 3: 2*7 + 2*8 + 1 = 31 chunks = p + (p-1)/v microbatches (Korthikanti 2022 Sec. 4.2.3).
  CHECK(in_flight_chunks(Schedule::interleaved, 8, 64, 3, 0) == 31);
  CHECK(31.0 / 3.0 == doctest::Approx(8 + 7.0 / 3.0));
  CHECK(in_flight_chunks(Schedule::interleaved, 8, 64, 3, 7) == 17);
  // ZB-H1: stage i holds p - i awaiting B and i awaiting W, so every stage reaches Qi et al.'s bound p M_B (1F1B's
  // stage 0); with m < p, all m.
  for (int64_t i : {0, 3, 7}) CHECK(in_flight_chunks(Schedule::zero_bubble, 8, 32, 1, i) == 8);
  CHECK(in_flight_chunks(Schedule::zero_bubble, 8, 32, 1, 0) == in_flight_chunks(Schedule::one_f_one_b, 8, 32, 1, 0));
  CHECK(in_flight_chunks(Schedule::zero_bubble, 8, 4, 1, 7) == 4);
}
