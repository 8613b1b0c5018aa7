// Leave-one-source-out scoring: for each source family (MappedRun::source_key), the calibration fields of each GPU
// architecture (GpuSpec::architecture: the H100 variants, H800 and H200 are one, Hopper) are fitted on the scored
// rows of every other family on that architecture, and the left-out family is scored with them. The out-of-sample
// number docs/accuracy.md leads with.
#pragma once
#include <string>
#include <vector>

#include "planner/validation/fit.hpp"
#include "planner/validation/validation.hpp"

namespace parplan {

struct FamilyScore {
  std::string family;                // source_key of the left-out rows
  ErrorSummary out_of_sample;        // its rows, scored with the fields fitted on the other families
  ErrorSummary shipped;              // the same rows with the shipped profiles, for reference
  std::vector<std::string> fits;     // per GPU type: "H200-141GB (Hopper): fitted on 51 rows of other sources:
                                     // gemm.peak_fraction 0.538" / "...: shipped profile (1 row(s) ...)"
};

// One scored row's step-time error out of its own family.
struct OutOfSampleRow {
  const MappedRun* run = nullptr;
  double error = 0;  // signed, (predicted - measured) / measured
};

struct CrossValidation {
  std::vector<std::string> fields;   // the fitted fields
  std::vector<OutOfSampleRow> rows;  // every scored row, by family
  std::vector<FamilyScore> families; // sorted by family
  ErrorSummary overall;              // every scored row, each scored out of its own family
  ErrorSummary overall_shipped;
};

// Fits need at least `min_fit_rows` scored rows of the architecture outside the family; with fewer, the family's
// rows on that GPU are scored with the shipped profile (and `fits` says so).
CrossValidation cross_validate(const std::vector<MappedRun>& runs, const FitOptions& opt = {}, int min_fit_rows = 2);

}  // namespace parplan
