// Tests for planner/check: memory gate with headroom, each performance floor, baseline regression naming the term.
#include <doctest/doctest.h>

#include <cmath>
#include <fmt/core.h>

#include <string>

#include "planner/check/check.hpp"
#include "planner/spec/config.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/spec/error.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

const GateResult* gate(const CheckResult& r, Gate g) {
  for (const auto& x : r.gates) {
    if (x.gate == g) return &x;
  }
  return nullptr;
}

// The 175B plan with dp 2 (so DP communication is non-zero).
Plan dp2_plan() {
  Plan p = test::korthikanti_175b();
  p.num_gpus = 128;
  p.parallel.dp = 2;
  p.training.global_batch = 128;
  REQUIRE(validate(p).ok());
  return p;
}

size_t term_index(std::string_view name, const auto& names) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return i;
  }
  FAIL("no term " << name);
  return 0;
}
}  // namespace

TEST_CASE("check: the 175B plan passes with default limits; the margin is capacity minus peak") {
  const Plan p = test::korthikanti_175b();
  const Estimate e = estimate(p);
  REQUIRE(e.fits);
  const CheckResult r = check_plan(p, e, {}, nullptr);
  CHECK(r.pass);
  REQUIRE(r.gates.size() == 1);  // only the memory gate without floors or a baseline
  CHECK(r.gates[0].gate == Gate::memory);
  CHECK(r.budget_bytes == doctest::Approx(static_cast<double>(p.gpu.memory_bytes)));
  CHECK(r.margin_bytes == doctest::Approx(e.capacity_bytes - e.peak_memory_bytes));
  CHECK(r.peak_stage == e.peak_stage);
  CHECK(contains(r.gates[0].message, "under"));
  CHECK(contains(r.summary, "under the"));
  CHECK(contains(r.summary, fmt::format("stage {}", e.peak_stage)));
  CHECK(!r.largest_term.empty());
}

TEST_CASE("check: memory fails against --memory and against headroom (fraction or bytes), naming stage and term") {
  const Plan p = test::korthikanti_175b();
  const Estimate e = estimate(p);
  SUBCASE("budget below the peak") {
    CheckLimits lim;
    lim.memory_bytes = static_cast<int64_t>(e.peak_memory_bytes - 2 * kGiB);
    const CheckResult r = check_plan(p, e, lim, nullptr);
    CHECK_FALSE(r.pass);
    CHECK(r.margin_bytes == doctest::Approx(-2 * kGiB).epsilon(1e-6));
    CHECK(contains(r.gates[0].message, "2.00 GiB over"));
    CHECK(contains(r.gates[0].message, fmt::format("on stage {}", e.peak_stage)));
    CHECK(contains(r.gates[0].message, "largest term"));
    CHECK(contains(r.summary, "OVER"));
  }
  SUBCASE("a budget above the capacity is capped at the capacity") {
    CheckLimits lim;
    lim.memory_bytes = int64_t{1} << 50;
    const CheckResult r = check_plan(p, e, lim, nullptr);
    CHECK(r.budget_bytes == doctest::Approx(e.capacity_bytes));
  }
  SUBCASE("fractional headroom") {
    const double free_frac = 1 - e.peak_memory_bytes / e.capacity_bytes;
    CheckLimits lim;
    lim.headroom.fraction = free_frac + 0.01;
    CHECK_FALSE(check_plan(p, e, lim, nullptr).pass);
    lim.headroom.fraction = free_frac - 0.01;
    const CheckResult ok = check_plan(p, e, lim, nullptr);
    CHECK(ok.pass);
    CHECK(ok.limit_bytes == doctest::Approx(e.capacity_bytes * (1 - lim.headroom.fraction)));
  }
  SUBCASE("absolute headroom") {
    CheckLimits lim;
    lim.headroom.bytes = static_cast<int64_t>(e.capacity_bytes - e.peak_memory_bytes + kGiB);
    const CheckResult r = check_plan(p, e, lim, nullptr);
    CHECK_FALSE(r.pass);
    CHECK(r.margin_bytes == doctest::Approx(-kGiB).epsilon(1e-6));
    CHECK(contains(r.gates[0].message, "headroom"));
  }
}

TEST_CASE("check: each performance floor fails alone when set just past the plan's value") {
  const Plan p = dp2_plan();
  const Estimate e = estimate(p);
  const TimeBreakdown& t = e.time;
  REQUIRE(t.bubble_fraction() > 0);
  REQUIRE(t.dp_comm_exposed_s > 0);
  REQUIRE(t.mfu > 0);
  struct Case {
    Gate gate;
    CheckLimits failing, passing;
  };
  std::vector<Case> cases(4);
  cases[0].gate = Gate::bubble;
  cases[0].failing.max_bubble_fraction = t.bubble_fraction() * 0.99;
  cases[0].passing.max_bubble_fraction = t.bubble_fraction() * 1.01;
  cases[1].gate = Gate::dp_comm;
  cases[1].failing.max_dp_comm_fraction = t.dp_comm_exposed_s / t.step_s * 0.99;
  cases[1].passing.max_dp_comm_fraction = t.dp_comm_exposed_s / t.step_s * 1.01;
  cases[2].gate = Gate::mfu;
  cases[2].failing.min_mfu = t.mfu * 1.01;
  cases[2].passing.min_mfu = t.mfu * 0.99;
  cases[3].gate = Gate::step_time;
  cases[3].failing.max_step_s = t.step_s * 0.99;
  cases[3].passing.max_step_s = t.step_s * 1.01;
  for (const Case& c : cases) {
    CAPTURE(to_string(c.gate));
    const CheckResult bad = check_plan(p, e, c.failing, nullptr);
    CHECK_FALSE(bad.pass);
    const GateResult* g = gate(bad, c.gate);
    REQUIRE(g != nullptr);
    CHECK_FALSE(g->pass);
    CHECK(gate(bad, Gate::memory)->pass);  // only the floor failed
    CHECK((contains(g->message, "exceeds") || contains(g->message, "below")));
    const CheckResult good = check_plan(p, e, c.passing, nullptr);
    CHECK(good.pass);
    CHECK(gate(good, c.gate)->pass);
  }
}

TEST_CASE("check: a larger micro-batch regresses memory against the baseline and names activations") {
  const Plan base = test::korthikanti_175b();
  const PlanSnapshot before = snapshot(estimate(base));
  Plan bigger = base;
  bigger.parallel.micro_batch = 2;
  bigger.parallel.num_microbatches = 32;
  REQUIRE(validate(bigger).ok());
  const Estimate e = estimate(bigger);
  const CheckResult r = check_plan(bigger, e, {}, &before);
  CHECK_FALSE(r.pass);
  const GateResult* g = gate(r, Gate::memory_regression);
  REQUIRE(g != nullptr);
  CHECK_FALSE(g->pass);
  REQUIRE(r.memory_moved.has_value());
  CHECK(r.memory_moved->term == "activations");
  CHECK(r.memory_moved->after > r.memory_moved->before);
  CHECK(contains(g->message, "activations on stage"));
  CHECK(contains(r.summary, "vs baseline: memory +"));
  // The same plan against itself: no regression, nothing moved.
  const CheckResult same = check_plan(base, estimate(base), {}, &before);
  CHECK(same.pass);
  CHECK_FALSE(same.memory_moved.has_value());
  CHECK_FALSE(same.time_moved.has_value());
  REQUIRE(gate(same, Gate::time_regression) != nullptr);
  CHECK(gate(same, Gate::time_regression)->value == doctest::Approx(0));
}

TEST_CASE("check: step-time regression names the time term that grew; the threshold is respected") {
  const Plan p = test::korthikanti_175b();
  const Estimate e = estimate(p);
  PlanSnapshot before = snapshot(e);
  const size_t bubble = term_index("bubble", kTimeTerms);
  const double cut = 0.9 * before.time_s[bubble];
  REQUIRE(cut / before.step_s > 0.02);
  before.time_s[bubble] -= cut;
  before.step_s -= cut;  // the baseline was faster, all of it in the bubble
  CheckLimits lim;
  lim.max_time_regression = 0.02;
  const CheckResult r = check_plan(p, e, lim, &before);
  CHECK_FALSE(r.pass);
  CHECK_FALSE(gate(r, Gate::time_regression)->pass);
  CHECK(gate(r, Gate::memory_regression)->pass);
  REQUIRE(r.time_moved.has_value());
  CHECK(r.time_moved->term == "bubble");
  CHECK(r.time_moved->stage == e.time.slowest_stage);
  CHECK(contains(gate(r, Gate::time_regression)->message, "bubble grew most"));
  lim.max_time_regression = 0.5;  // a looser threshold lets the same change pass
  CHECK(check_plan(p, e, lim, &before).pass);
}

TEST_CASE("check: the time regression compares time per token; a baseline without tokens compares step time") {
  const Plan p = test::korthikanti_175b();
  const Estimate e = estimate(p);
  const double tokens = tokens_per_step(p);
  CHECK(tokens == doctest::Approx(static_cast<double>(p.training.global_batch * p.seq_len())));
  // The baseline ran half the tokens in half the time: the same time per token.
  PlanSnapshot before = snapshot(e, tokens / 2);
  before.step_s /= 2;
  for (double& t : before.time_s) t /= 2;
  const CheckResult r = check_plan(p, e, {}, &before);
  const GateResult* g = gate(r, Gate::time_regression);
  REQUIRE(g != nullptr);
  CHECK(g->pass);
  CHECK(g->value == doctest::Approx(0).epsilon(1e-9));
  CHECK(contains(g->message, "time per token"));
  CHECK_FALSE(r.time_moved.has_value());
  CHECK(contains(r.summary, "time per token +0.0%"));
  // Without tokens_per_step (a baseline written before it was kept) the step times are compared: +100%.
  before.tokens_per_step = 0;
  const CheckResult old = check_plan(p, e, {}, &before);
  CHECK_FALSE(gate(old, Gate::time_regression)->pass);
  CHECK(gate(old, Gate::time_regression)->value == doctest::Approx(1.0));
  CHECK(contains(gate(old, Gate::time_regression)->message, "the baseline has no tokens_per_step"));
}

TEST_CASE("check: memory regression on one stage names that stage") {
  const Plan p = test::korthikanti_175b();
  const Estimate e = estimate(p);
  PlanSnapshot before = snapshot(e);
  const size_t opt = term_index("optimizer", kMemoryTerms);
  before.stage_memory_bytes[3][opt] -= 6 * kGiB;
  before.peak_memory_bytes -= 6 * kGiB;
  const CheckResult r = check_plan(p, e, {}, &before);
  CHECK_FALSE(gate(r, Gate::memory_regression)->pass);
  REQUIRE(r.memory_moved.has_value());
  CHECK(r.memory_moved->term == "optimizer");
  CHECK(r.memory_moved->stage == 3);
  CHECK(contains(r.summary, "optimizer on stage 3 +6.00 GiB"));
}

TEST_CASE("check: the offloaded states' host memory per node is kept in the baseline and gated like the GPU's") {
  Plan p = test::korthikanti_175b();
  p.parallel.distributed_optimizer = true;
  p.parallel.offload.optimizer = true;  // ZeRO-Offload: the optimizer states in host memory
  REQUIRE(validate(p).ok());
  const Estimate e = estimate(p);
  REQUIRE(e.host_bytes_per_node > 0);
  PlanSnapshot before = snapshot(e);
  REQUIRE(before.host_bytes_per_node.has_value());
  CHECK(*before.host_bytes_per_node == e.host_bytes_per_node);
  CHECK(check_plan(p, e, {}, &before).pass);
  // The baseline needed 20% less host memory: a regression, though the GPU's peak did not move.
  before.host_bytes_per_node = e.host_bytes_per_node / 1.2;
  const CheckResult r = check_plan(p, e, {}, &before);
  const GateResult* g = gate(r, Gate::memory_regression);
  REQUIRE(g != nullptr);
  CHECK_FALSE(g->pass);
  CHECK(g->value == doctest::Approx(0.2));
  CHECK(contains(g->message, "; host memory "));
  CHECK(contains(g->message, "(+20.0%)"));
  CheckLimits loose;
  loose.max_memory_regression = 0.25;
  CHECK(check_plan(p, e, loose, &before).pass);
  // A baseline that offloaded nothing: newly offloading fails; one written before host memory was kept is not gated.
  before.host_bytes_per_node = 0.0;
  const CheckResult fresh = check_plan(p, e, loose, &before);
  CHECK_FALSE(gate(fresh, Gate::memory_regression)->pass);
  CHECK(contains(gate(fresh, Gate::memory_regression)->message, "none in the baseline"));
  CHECK(std::isfinite(gate(fresh, Gate::memory_regression)->value));
  before.host_bytes_per_node.reset();
  CHECK(check_plan(p, e, {}, &before).pass);
  // Round trip; absent from an older document.
  Baseline b;
  b["x"] = snapshot(e);
  CHECK(baseline_from_text(baseline_to_json(b).dump(), "base.json").at("x").host_bytes_per_node == e.host_bytes_per_node);
  auto old = baseline_to_json(b);
  old["plans"]["x"].erase("host_bytes_per_node");
  CHECK_FALSE(baseline_from_text(old.dump(), "base.json").at("x").host_bytes_per_node.has_value());
}

TEST_CASE("baseline document: round trip, strict keys with the JSON path") {
  const Estimate e = estimate(test::korthikanti_175b());
  Baseline b;
  b["plans/a.json"] = snapshot(e);
  const std::string text = baseline_to_json(b).dump(2);
  const Baseline back = baseline_from_text(text, "base.json");
  REQUIRE(back.count("plans/a.json") == 1);
  const PlanSnapshot& s = back.at("plans/a.json");
  CHECK(s.peak_memory_bytes == doctest::Approx(e.peak_memory_bytes));
  CHECK(s.step_s == doctest::Approx(e.time.step_s));
  CHECK(s.stage_memory_bytes.size() == e.memory.size());
  CHECK(s.time_s == snapshot(e).time_s);
  CHECK(s.tokens_per_step == 0);  // unknown: not written, read back as unknown
  b["plans/t.json"] = snapshot(e, 1048576);
  CHECK(baseline_from_text(baseline_to_json(b).dump(), "base.json").at("plans/t.json").tokens_per_step == 1048576);

  // A baseline written before activation offload has no offload_exposed term: it reads as 0; the others stay required.
  auto old = baseline_to_json(b);
  old["plans"]["plans/a.json"]["time_s"].erase("offload_exposed");
  CHECK(baseline_from_text(old.dump(), "base.json").at("plans/a.json").time_s == snapshot(e).time_s);
  old["plans"]["plans/a.json"]["time_s"].erase("bubble");
  CHECK_THROWS_WITH_AS(baseline_from_text(old.dump(), "base.json"), doctest::Contains("time_s/bubble"), InputError);

  auto j = baseline_to_json(b);
  j["plans"]["plans/a.json"]["surprise"] = 1;
  try {
    baseline_from_text(j.dump(), "base.json");
    FAIL("accepted an unknown key");
  } catch (const InputError& err) {
    CHECK(std::string(err.what()) == "base.json: /plans/plans~1a.json/surprise: unknown key");
  }
  auto k = baseline_to_json(b);
  k["plans"]["plans/a.json"]["time_s"]["bubble"] = -1;
  CHECK_THROWS_WITH_AS(baseline_from_text(k.dump(), "base.json"),
                       doctest::Contains("base.json: /plans/plans~1a.json/time_s/bubble"), InputError);
  CHECK_THROWS_WITH_AS(baseline_from_text("{\"parplan_check_baseline\": 1, \"plans\": []}", "b.json"), doctest::Contains("b.json: /plans"), InputError);
  CHECK_THROWS_WITH_AS(baseline_from_text("{", "b.json"), doctest::Contains("b.json: malformed JSON"), InputError);
  CHECK_THROWS_AS(baseline_from_text("{\"parplan_check_baseline\": 2, \"plans\": {}}", "b.json"), InputError);
}

TEST_CASE("parse_fraction and parse_headroom") {
  CHECK(parse_fraction("0.2", "--max-bubble") == doctest::Approx(0.2));
  CHECK(parse_fraction("35%", "--min-mfu") == doctest::Approx(0.35));
  CHECK(parse_fraction("0", "--x") == 0);
  CHECK_THROWS_WITH_AS(parse_fraction("1.5", "--max-bubble"), doctest::Contains("--max-bubble"), InputError);
  CHECK_THROWS_AS(parse_fraction("-0.1", "--x"), InputError);
  CHECK_THROWS_AS(parse_fraction("abc", "--x"), InputError);
  CHECK_THROWS_AS(parse_fraction("0.2x", "--x"), InputError);
  CHECK_THROWS_AS(parse_fraction("%", "--x"), InputError);
  CHECK_THROWS_AS(parse_fraction("nan", "--x"), InputError);
  const Headroom f = parse_headroom("10%", "--headroom");
  CHECK(f.fraction == doctest::Approx(0.1));
  CHECK(f.bytes == 0);
  const Headroom b = parse_headroom("8GiB", "--headroom");
  CHECK(b.bytes == int64_t{8} << 30);
  CHECK(b.fraction == 0);
  CHECK_THROWS_WITH_AS(parse_headroom("100%", "--headroom"), doctest::Contains("--headroom"), InputError);
  CHECK_THROWS_AS(parse_headroom("8Gb", "--headroom"), InputError);
}
