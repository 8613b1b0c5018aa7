// How far to trust a prediction: the out-of-sample step-time error of the plan's GPU and precision family
// (validation/accuracy.json, compiled in), as a sentence for the text reports and an object for --json.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "planner/spec/spec.hpp"

namespace parplan::cli {

// The family is the GPU's own runs, else its architecture's (plan_accuracy, accuracy.hpp). With a step time (> 0),
// also the range the family's measured / predicted ratios put it in (the sentence, naming `subject`) and
// "expected_step_s" (the object): the 10th percentile, median and 90th percentile of those ratios times the step.
std::string accuracy_sentence(const GpuSpec& gpu, Precision precision, double step_s = 0,
                              std::string_view subject = "this plan");
nlohmann::json accuracy_json(const GpuSpec& gpu, Precision precision, double step_s = 0);  // null: no published run
inline std::string accuracy_sentence(const Plan& p, double step_s) {
  return accuracy_sentence(p.gpu, p.training.precision, step_s);
}
inline nlohmann::json accuracy_json(const Plan& p, double step_s) { return accuracy_json(p.gpu, p.training.precision, step_s); }

// Whether a step time is within the family's median out-of-sample error of the best one: the two plans' order is
// then below what the model can tell apart (suggest marks them as ties). False when the error is unknown.
bool within_model_error(const GpuSpec& gpu, Precision precision, double step_s, double best_step_s);

}  // namespace parplan::cli
