// The JSON rendering of an Estimate: the plan document, memory per stage and the step's time terms
// (`estimate --json`; schema in docs/json-schema.md).
#pragma once
#include <nlohmann/json.hpp>

#include "planner/cost/cost_model.hpp"
#include "planner/spec/spec.hpp"

namespace parplan {

nlohmann::json estimate_to_json(const Plan& plan, const Estimate& e);

}  // namespace parplan
