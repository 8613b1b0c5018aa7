// Out-of-sample accuracy of a plan's family (see accuracy_note.hpp).
#include "cli/accuracy_note.hpp"

#include <fmt/core.h>

#include "cli/render.hpp"
#include "planner/validation/accuracy.hpp"

namespace parplan::cli {

std::string accuracy_sentence(std::string_view gpu, Precision precision) {
  const auto a = shipped_accuracy(gpu, precision);
  if (!a) {
    return fmt::format("Out of sample: no published run of a {} {} plan is scored; the step-time error is unknown "
                       "(docs/accuracy.md)\n", gpu, precision_family(precision));
  }
  return fmt::format("Out of sample: {} {} plans are predicted within {} median ({} mean, {} worst) of {} published "
                     "run{} (leave one source out; docs/accuracy.md)\n", a->gpu, a->precision,
                     fmt_percent(a->median_abs), fmt_percent(a->mean_abs), fmt_percent(a->worst_abs), a->runs,
                     a->runs == 1 ? "" : "s");
}

nlohmann::json accuracy_json(std::string_view gpu, Precision precision) {
  const auto a = shipped_accuracy(gpu, precision);
  if (!a) return nullptr;
  return {{"gpu", a->gpu},
          {"precision", a->precision},
          {"runs", a->runs},
          {"median_abs_error", a->median_abs},
          {"mean_abs_error", a->mean_abs},
          {"worst_abs_error", a->worst_abs},
          {"method", "leave one source out (validation/accuracy.json)"}};
}

bool within_model_error(std::string_view gpu, Precision precision, double step_s, double best_step_s) {
  const auto a = shipped_accuracy(gpu, precision);
  return a && best_step_s > 0 && step_s - best_step_s < a->median_abs * best_step_s;
}

}  // namespace parplan::cli
