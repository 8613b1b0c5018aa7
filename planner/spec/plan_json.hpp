// The Plan document (JSON): model, GPU, cluster, GPU count, parallel config and training settings; written by
// `estimate -o` / `suggest -o`, read by simulate, check and run. Model, GPU and cluster may be inline objects or
// profile names (schema in docs/json-schema.md).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "planner/spec/profiles.hpp"
#include "planner/spec/spec.hpp"

namespace parplan {

inline constexpr int kPlanFormatVersion = 1;

Plan plan_from_json(const nlohmann::json& j, const ProfileSet& profiles, const std::string& where);
Plan plan_from_text(std::string_view text, const ProfileSet& profiles, const std::string& where);
nlohmann::json plan_to_json(const Plan& plan);  // self-contained: model, GPU and cluster inline

// Checks a plan's own consistency (positive sizes, GPU memory, the mesh multiplies to num_gpus, ...) and throws
// InputError naming `where`; validate() (config.hpp) then tells whether the mesh is usable for the model.
void check_plan_inputs(const Plan& plan, const std::string& where);

}  // namespace parplan
