// How far to trust a prediction: the out-of-sample step-time error of the plan's GPU and precision family
// (validation/accuracy.json, compiled in), as a sentence for the text reports and an object for --json.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "planner/spec/spec.hpp"

namespace parplan::cli {

std::string accuracy_sentence(const Plan& plan);
nlohmann::json accuracy_json(const Plan& plan);  // null when no published run of the family was scored

}  // namespace parplan::cli
