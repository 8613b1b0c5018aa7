// Out-of-sample accuracy per plan family (GPU profile x precision class): the leave-one-source-out step-time errors
// of the published runs, tabulated by `validate --accuracy-out` into validation/accuracy.json, which is compiled
// in, so that estimate and suggest can say how far a prediction is to be trusted (docs/accuracy.md).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/validation/cross_validate.hpp"

namespace parplan {

// A family is one GPU profile's runs of a precision class, or (gpu empty) every run of one architecture
// (GpuSpec::architecture) of that class, which stands for a GPU of the architecture without runs of its own.
struct FamilyAccuracy {
  std::string gpu;           // GPU profile name; empty for an architecture's family
  std::string architecture;  // the GPU's architecture ("" when it has none), or the architecture family's
  std::vector<std::string> gpus;  // an architecture family's GPU profiles with runs, sorted
  std::string precision;  // precision_family(): "16-bit" or "fp8"
  int64_t runs = 0;       // published runs scored out of sample in this family
  double mean_abs = 0, median_abs = 0, worst_abs = 0;  // |step-time error|, fractions
  // The runs' measured step over the predicted one (1 / (1 + error)): 10th percentile, median, 90th percentile,
  // interpolated between the sorted ratios (quantile_sorted, validation.hpp). Which way the family's predictions
  // lean, and how far: a plan's step is likely to take ratio_p10..ratio_p90 times its prediction.
  double ratio_p10 = 1, ratio_median = 1, ratio_p90 = 1;
};

// bf16 and fp16 share a peak on every shipped GPU and form one family; fp8 is its own.
std::string_view precision_family(Precision p);

// The families of a cross-validation's rows: per GPU, sorted by GPU then precision, then per architecture (of the
// rows' GPUs that name one), sorted by architecture then precision.
std::vector<FamilyAccuracy> accuracy_table(const CrossValidation& cv);

// {"p10", "median", "p90"}: the family's measured / predicted ratios times `scale` (1: the ratios; a step time: the
// range they put it in). accuracy.json's "measured_over_predicted" and estimate's "expected_step_s".
nlohmann::json ratios_json(const FamilyAccuracy& f, double scale = 1.0);

// The document validation/accuracy.json: {"parplan_accuracy": 1, "command": ..., "families": [...]}.
nlohmann::json accuracy_to_json(const std::vector<FamilyAccuracy>& table, std::string_view command);
std::vector<FamilyAccuracy> accuracy_from_json(std::string_view text, const std::string& where);

// The table compiled into parplan; nullopt when no published run of this GPU and precision was scored.
std::optional<FamilyAccuracy> shipped_accuracy(std::string_view gpu, Precision p);
// The family of the compiled-in table an entry of `table`'s kind is: a GPU family by its GPU, an architecture
// family by its architecture (accuracy_test compares the two tables with it).
std::optional<FamilyAccuracy> shipped_family(const FamilyAccuracy& like);
// A plan's family: its GPU's runs of the precision class, else (a GPU with none that names an architecture) its
// architecture's; nullopt when neither was scored.
std::optional<FamilyAccuracy> plan_accuracy(const GpuSpec& gpu, Precision p);

}  // namespace parplan
