// Out-of-sample accuracy of a plan's family (see accuracy_note.hpp).
#include "cli/accuracy_note.hpp"

#include <fmt/core.h>

#include "cli/render.hpp"
#include "planner/validation/accuracy.hpp"

namespace parplan::cli {

std::string accuracy_sentence(const Plan& plan) {
  const auto a = shipped_accuracy(plan.gpu.name, plan.training.precision);
  const std::string_view family = precision_family(plan.training.precision);
  if (!a) {
    return fmt::format("Out of sample: no published run of a {} {} plan is scored; the step-time error is unknown "
                       "(docs/accuracy.md)\n", plan.gpu.name, family);
  }
  return fmt::format("Out of sample: {} {} plans are predicted within {} median ({} mean, {} worst) of {} published "
                     "run{} (leave one source out; docs/accuracy.md)\n", a->gpu, a->precision,
                     fmt_percent(a->median_abs), fmt_percent(a->mean_abs), fmt_percent(a->worst_abs), a->runs,
                     a->runs == 1 ? "" : "s");
}

nlohmann::json accuracy_json(const Plan& plan) {
  const auto a = shipped_accuracy(plan.gpu.name, plan.training.precision);
  if (!a) return nullptr;
  return {{"gpu", a->gpu},
          {"precision", a->precision},
          {"runs", a->runs},
          {"median_abs_error", a->median_abs},
          {"mean_abs_error", a->mean_abs},
          {"worst_abs_error", a->worst_abs},
          {"method", "leave one source out (validation/accuracy.json)"}};
}

}  // namespace parplan::cli
