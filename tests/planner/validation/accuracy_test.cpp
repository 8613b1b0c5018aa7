// The accuracy table compiled into parplan (validation/accuracy.json) is what leave-one-source-out scoring of the
// vendored runs gives today: a cost-model change that moves it fails here until the table is regenerated with the
// command recorded in it.
#include <doctest/doctest.h>

#include "planner/spec/error.hpp"
#include "planner/spec/profiles.hpp"
#include "planner/validation/accuracy.hpp"
#include "planner/vendored_runs.hpp"

using namespace parplan;

TEST_CASE("accuracy: validation/accuracy.json matches leave-one-source-out scoring of the vendored runs") {
  std::vector<MappedRun> runs = test::vendored_runs("published-runs.json", Unstated::search);
  for (MappedRun& r : test::vendored_runs("published-runs-modern.json", Unstated::search)) runs.push_back(std::move(r));
  FitOptions opt;
  opt.fields = {fit_field("gemm.peak_fraction", "test")};
  const std::vector<FamilyAccuracy> table = accuracy_table(cross_validate(runs, opt));
  REQUIRE(table.size() >= 5);
  for (const FamilyAccuracy& f : table) {
    CAPTURE(f.gpu);
    CAPTURE(f.precision);
    CAPTURE(f.architecture);
    const std::optional<FamilyAccuracy> shipped = shipped_family(f);
    REQUIRE_MESSAGE(shipped, "regenerate validation/accuracy.json with the command it records");
    CHECK(shipped->runs == f.runs);
    CHECK(shipped->gpus == f.gpus);
    CHECK(shipped->mean_abs == doctest::Approx(f.mean_abs).epsilon(1e-9));
    CHECK(shipped->median_abs == doctest::Approx(f.median_abs).epsilon(1e-9));
    CHECK(shipped->worst_abs == doctest::Approx(f.worst_abs).epsilon(1e-9));
    CHECK(shipped->ratio_p10 == doctest::Approx(f.ratio_p10).epsilon(1e-9));
    CHECK(shipped->ratio_median == doctest::Approx(f.ratio_median).epsilon(1e-9));
    CHECK(shipped->ratio_p90 == doctest::Approx(f.ratio_p90).epsilon(1e-9));
    CHECK(f.ratio_p10 <= f.ratio_median);
    CHECK(f.ratio_median <= f.ratio_p90);
  }
  // bf16 and fp16 are one family; a GPU without published runs has none.
  CHECK(shipped_accuracy("A100-SXM4-80GB", Precision::fp16)->runs == shipped_accuracy("A100-SXM4-80GB", Precision::bf16)->runs);
  CHECK_FALSE(shipped_accuracy("no-such-gpu", Precision::bf16));
}

TEST_CASE("accuracy: a GPU without runs of its own takes its architecture's family, which adds up its GPUs' runs") {
  const ProfileSet& profiles = ProfileSet::embedded();
  const GpuSpec h200 = profiles.gpu("H200-141GB", "t");
  REQUIRE_FALSE(shipped_accuracy(h200.name, Precision::bf16));  // no H200 16-bit run is scored
  const std::optional<FamilyAccuracy> hopper = plan_accuracy(h200, Precision::bf16);
  REQUIRE(hopper);
  CHECK(hopper->gpu.empty());
  CHECK(hopper->architecture == "Hopper");
  int64_t runs = 0;
  for (const std::string& g : hopper->gpus) {
    CAPTURE(g);
    CHECK(profiles.gpu(g, "t").architecture == "Hopper");
    const auto own = shipped_accuracy(g, Precision::bf16);
    REQUIRE(own);
    runs += own->runs;
  }
  CHECK(runs == hopper->runs);
  CHECK(hopper->gpus.size() >= 2);
  // A GPU with runs keeps its own family; one naming no architecture has no fallback.
  const GpuSpec h100 = profiles.gpu("H100-SXM5-80GB", "t");
  CHECK(plan_accuracy(h100, Precision::bf16)->gpu == "H100-SXM5-80GB");
  GpuSpec custom = h200;
  custom.name = "my-gpu";
  custom.architecture.clear();
  CHECK_FALSE(plan_accuracy(custom, Precision::bf16));
  custom.architecture = "Hopper";
  CHECK(plan_accuracy(custom, Precision::bf16)->architecture == "Hopper");
}

TEST_CASE("accuracy: quantiles interpolate between the sorted values") {
  CHECK(quantile_sorted({}, 0.5) == 0.0);
  CHECK(quantile_sorted({2.0}, 0.1) == 2.0);
  const std::vector<double> v = {1, 2, 3, 4, 5};  // position q (n - 1)
  CHECK(quantile_sorted(v, 0.1) == doctest::Approx(1.4));
  CHECK(quantile_sorted(v, 0.5) == doctest::Approx(3.0));
  CHECK(quantile_sorted(v, 0.9) == doctest::Approx(4.6));
  CHECK(quantile_sorted(v, 1.0) == doctest::Approx(5.0));
  CHECK(quantile_sorted({1, 3}, 0.5) == doctest::Approx(2.0));
}

TEST_CASE("accuracy: a family's measured / predicted ratios come from its out-of-sample errors") {
  // One family of three rows: errors +25%, 0, -50% are ratios 0.8, 1 and 2.
  MappedRun base = test::vendored_runs("published-runs.json", Unstated::search).front();
  REQUIRE(base.scored());
  std::vector<MappedRun> runs(3, base);
  CrossValidation cv;
  const double errors[] = {0.25, 0.0, -0.5};
  for (size_t i = 0; i < runs.size(); ++i) cv.rows.push_back({&runs[i], errors[i]});
  const std::vector<FamilyAccuracy> t = accuracy_table(cv);
  REQUIRE(t.size() == 2);  // the GPU's family, then its architecture's, of the same rows
  CHECK(t[0].gpu == base.gpu_type);
  CHECK(t[1].gpu.empty());
  CHECK(t[1].architecture == base.plan->gpu.architecture);
  CHECK(t[1].gpus == std::vector<std::string>{base.gpu_type});
  CHECK(t[1].runs == 3);
  CHECK(t[1].ratio_median == doctest::Approx(t[0].ratio_median));
  CHECK(t[0].runs == 3);
  CHECK(t[0].ratio_p10 == doctest::Approx(0.8 + 0.2 * 0.2));
  CHECK(t[0].ratio_median == doctest::Approx(1.0));
  CHECK(t[0].ratio_p90 == doctest::Approx(1.0 + 0.8 * 1.0));
  CHECK(t[0].median_abs == doctest::Approx(0.25));
}

TEST_CASE("accuracy: the table document is strict") {
  CHECK_THROWS_WITH_AS(accuracy_from_json(R"({"parplan_accuracy": 1, "command": "", "families": [{"gpu": "x"}]})", "t.json"),
                       doctest::Contains("t.json: /families/0/precision"), InputError);
  CHECK_THROWS_WITH_AS(accuracy_from_json(R"({"parplan_accuracy": 1, "command": "", "families": [], "x": 1})", "t.json"),
                       doctest::Contains("x"), InputError);
  const std::string family = R"({"gpu": "g", "precision": "fp8", "runs": 2, "mean_abs_error": 0.1, "median_abs_error": 0.1,
      "worst_abs_error": 0.2, "measured_over_predicted": )";
  auto doc = [&](const std::string& ratios) { return R"({"parplan_accuracy": 1, "command": "", "families": [)" + family + ratios + "}]}"; };
  CHECK(accuracy_from_json(doc(R"({"p10": 0.9, "median": 1.1, "p90": 1.3})"), "t.json").at(0).ratio_median == 1.1);
  CHECK_THROWS_WITH_AS(accuracy_from_json(doc(R"({"p10": 0.9, "median": 1.1})"), "t.json"),
                       doctest::Contains("t.json: /families/0/measured_over_predicted/p90"), InputError);
  CHECK_THROWS_WITH_AS(accuracy_from_json(doc(R"({"p10": 1.2, "median": 1.1, "p90": 1.3})"), "t.json"),
                       doctest::Contains("/families/0/measured_over_predicted: expected p10 <= median <= p90"), InputError);
  CHECK_THROWS_WITH_AS(accuracy_from_json(doc(R"({"p10": 0, "median": 1.1, "p90": 1.3})"), "t.json"),
                       doctest::Contains("/families/0/measured_over_predicted/p10"), InputError);
}
