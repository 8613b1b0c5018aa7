// Leave-one-source-out scoring: a family's out-of-sample errors never depend on its own rows, and with no field
// fitted they equal the shipped profiles' errors.
#include <doctest/doctest.h>

#include "planner/validation/cross_validate.hpp"
#include "planner/vendored_runs.hpp"

using namespace parplan;

namespace {

const FamilyScore& family(const CrossValidation& cv, const std::string& name) {
  for (const FamilyScore& f : cv.families) {
    if (f.family == name) return f;
  }
  FAIL("no family ", name);
  return cv.families.front();
}

}  // namespace

TEST_CASE("cross-validation: a left-out family's predictions do not depend on its own measured times") {
  FitOptions opt;
  opt.fields = {fit_field("gemm.peak_fraction", "test")};
  opt.sweeps = 1;
  std::vector<MappedRun> runs = test::vendored_runs("published-runs.json");
  const std::string left = "Korthikanti et al. 2022";
  const CrossValidation before = cross_validate(runs, opt);
  const FamilyScore& k = family(before, left);
  REQUIRE(k.out_of_sample.count == 10);
  for (const auto& note : k.fits) CHECK(note.find("fitted on") != std::string::npos);

  // Scale the family's measured times: a fit that saw them would move; one fitted on the others does not, so each
  // error moves exactly as (1 + e) / 1.3 - 1, and the worst row stays the worst.
  for (MappedRun& r : runs) {
    if (r.source_key == left && r.measured_step_time_s) *r.measured_step_time_s *= 1.3;
  }
  const CrossValidation after = cross_validate(runs, opt);
  const FamilyScore& k2 = family(after, left);
  REQUIRE(k2.out_of_sample.count == 10);
  CHECK(k2.out_of_sample.mean_signed == doctest::Approx((1 + k.out_of_sample.mean_signed) / 1.3 - 1).epsilon(1e-12));
  // The other families were fitted with the scaled rows among theirs: their numbers move.
  CHECK(family(after, "Narayanan et al. 2021").out_of_sample.mean_signed !=
        family(before, "Narayanan et al. 2021").out_of_sample.mean_signed);
}

TEST_CASE("cross-validation: with no field fitted, every family scores as the shipped profiles do") {
  FitOptions opt;
  opt.fields.clear();
  const CrossValidation cv = cross_validate(test::vendored_runs("published-runs.json"), opt);
  CHECK(cv.overall.count == 45);
  CHECK(cv.overall.mean_abs == doctest::Approx(cv.overall_shipped.mean_abs).epsilon(1e-15));
  for (const FamilyScore& f : cv.families) {
    CAPTURE(f.family);
    CHECK(f.out_of_sample.mean_signed == doctest::Approx(f.shipped.mean_signed).epsilon(1e-15));
  }
  // Families with a GPU type found nowhere else are scored with the shipped profile, and say so.
  bool shipped_note = false;
  for (const auto& note : family(cv, "mosaicml/llm-foundry").fits) shipped_note |= note.find("shipped profile") != std::string::npos;
  CHECK(shipped_note);
}

TEST_CASE("cross-validation: a GPU type no other family ran is fitted on the other families' rows of its architecture") {
  FitOptions opt;
  opt.fields = {fit_field("gemm.peak_fraction", "test")};
  opt.sweeps = 1;
  std::vector<MappedRun> runs = test::vendored_runs("published-runs.json");
  const CrossValidation cv = cross_validate(runs, opt);
  const FamilyScore& m = family(cv, "mosaicml/llm-foundry");
  // MosaicML alone ran the A100 40GB; the A100 80GB rows of the other families are Ampere too. Its H100 rows have
  // no other Hopper rows in this file.
  int ampere = 0, hopper_shipped = 0;
  for (const auto& note : m.fits) {
    CAPTURE(note);
    ampere += note.starts_with("A100-SXM4-40GB (Ampere): fitted on ") && note.find("gemm.peak_fraction 0.") != std::string::npos;
    hopper_shipped += note.starts_with("H100-SXM5-80GB (Hopper): shipped profile (0 row(s)");
  }
  CHECK(ampere == 1);
  CHECK(hopper_shipped == 1);

  // Scaling every other family's A100 80GB times moves the 40GB rows' out-of-sample errors: they were fitted there.
  const double before = m.out_of_sample.mean_signed;
  for (MappedRun& r : runs) {
    if (r.source_key != "mosaicml/llm-foundry" && r.gpu_type == "A100-SXM4-80GB" && r.measured_step_time_s) {
      *r.measured_step_time_s *= 1.3;
    }
  }
  const CrossValidation scaled = cross_validate(runs, opt);
  CHECK(family(scaled, "mosaicml/llm-foundry").out_of_sample.mean_signed != doctest::Approx(before));
}
