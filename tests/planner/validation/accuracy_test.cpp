// The accuracy table compiled into parplan (validation/accuracy.json) is what leave-one-source-out scoring of the
// vendored runs gives today: a cost-model change that moves it fails here until the table is regenerated with the
// command recorded in it.
#include <doctest/doctest.h>

#include "planner/spec/error.hpp"
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
    const Precision p = f.precision == "fp8" ? Precision::fp8 : Precision::bf16;
    const std::optional<FamilyAccuracy> shipped = shipped_accuracy(f.gpu, p);
    REQUIRE_MESSAGE(shipped, "regenerate validation/accuracy.json with the command it records");
    CHECK(shipped->runs == f.runs);
    CHECK(shipped->mean_abs == doctest::Approx(f.mean_abs).epsilon(1e-9));
    CHECK(shipped->median_abs == doctest::Approx(f.median_abs).epsilon(1e-9));
    CHECK(shipped->worst_abs == doctest::Approx(f.worst_abs).epsilon(1e-9));
  }
  // bf16 and fp16 are one family; a GPU without published runs has none.
  CHECK(shipped_accuracy("A100-SXM4-80GB", Precision::fp16)->runs == shipped_accuracy("A100-SXM4-80GB", Precision::bf16)->runs);
  CHECK_FALSE(shipped_accuracy("no-such-gpu", Precision::bf16));
}

TEST_CASE("accuracy: the table document is strict") {
  CHECK_THROWS_WITH_AS(accuracy_from_json(R"({"parplan_accuracy": 1, "command": "", "families": [{"gpu": "x"}]})", "t.json"),
                       doctest::Contains("t.json: /families/0/precision"), InputError);
  CHECK_THROWS_WITH_AS(accuracy_from_json(R"({"parplan_accuracy": 1, "command": "", "families": [], "x": 1})", "t.json"),
                       doctest::Contains("x"), InputError);
}
