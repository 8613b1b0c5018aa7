// Out-of-sample accuracy of a plan's family (see accuracy_note.hpp).
#include "cli/accuracy_note.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "cli/render.hpp"
#include "planner/validation/accuracy.hpp"

namespace parplan::cli {

namespace {
// "those runs took 0.98x-1.47x the predicted step (10th-90th percentile; median 1.19x)", and with a step time what
// that makes of it.
std::string lean_clause(const FamilyAccuracy& a, double step_s, std::string_view subject) {
  std::string s = a.runs == 1 ? fmt::format("; that run took {:.2f}x the predicted step", a.ratio_median)
                              : fmt::format("; those runs took {:.2f}x-{:.2f}x the predicted step (10th-90th "
                                            "percentile; median {:.2f}x)",
                                            a.ratio_p10, a.ratio_p90, a.ratio_median);
  if (step_s > 0) {
    s += a.runs == 1 ? fmt::format(": {} for {}", fmt_seconds(step_s * a.ratio_median), subject)
                     : fmt::format(": {} to {} for {}", fmt_seconds(step_s * a.ratio_p10),
                                   fmt_seconds(step_s * a.ratio_p90), subject);
  }
  return s;
}
}  // namespace

std::string accuracy_sentence(const GpuSpec& gpu, Precision precision, double step_s, std::string_view subject) {
  const auto a = plan_accuracy(gpu, precision);
  if (!a) {
    return fmt::format("Out of sample: no published run of a {} {} plan is scored; the step-time error is unknown "
                       "(docs/accuracy.md)\n", gpu.name, precision_family(precision));
  }
  // A GPU without runs of its own is given its architecture's, and says whose runs they are.
  const std::string who = a->gpu.empty() ? fmt::format("no published {} {} run is scored; {} {} plans ({})", gpu.name,
                                                       a->precision, a->architecture, a->precision,
                                                       fmt::join(a->gpus, ", "))
                                         : fmt::format("{} {} plans", a->gpu, a->precision);
  return fmt::format("Out of sample: {} are predicted within {} median ({} mean, {} worst) of {} published "
                     "run{} (leave one source out; docs/accuracy.md){}\n", who,
                     fmt_percent(a->median_abs), fmt_percent(a->mean_abs), fmt_percent(a->worst_abs), a->runs,
                     a->runs == 1 ? "" : "s", lean_clause(*a, step_s, subject));
}

nlohmann::json accuracy_json(const GpuSpec& gpu, Precision precision, double step_s) {
  const auto a = plan_accuracy(gpu, precision);
  if (!a) return nullptr;
  nlohmann::json j = {{"precision", a->precision},
                      {"runs", a->runs},
                      {"median_abs_error", a->median_abs},
                      {"mean_abs_error", a->mean_abs},
                      {"worst_abs_error", a->worst_abs},
                      {"measured_over_predicted", ratios_json(*a)},
                      {"method", "leave one source out (validation/accuracy.json)"}};
  if (!a->gpu.empty()) {
    j["gpu"] = a->gpu;
  } else {  // the architecture's runs stand for this GPU's
    j["architecture"] = a->architecture;
    j["gpus"] = a->gpus;
  }
  if (step_s > 0) {
    j["expected_step_s"] = ratios_json(*a, step_s);
  }
  return j;
}

bool within_model_error(const GpuSpec& gpu, Precision precision, double step_s, double best_step_s) {
  const auto a = plan_accuracy(gpu, precision);
  return a && best_step_s > 0 && step_s - best_step_s < a->median_abs * best_step_s;
}

}  // namespace parplan::cli
