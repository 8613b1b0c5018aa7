// Where the runtime gets each stage's task order: the simulator's schedule (simulator/schedule.hpp, the single
// definition of pipeline op order), converted to the lowering's ScheduleStep.
#pragma once
#include <cstdint>
#include <vector>

#include "planner/spec/spec.hpp"
#include "runtime/lower.hpp"

namespace parplan::runtime {

// The order of pipeline tasks on stage `stage`, from sim::make_schedule(plan). Split backwards (ZB-H1) become
// backward (input gradients) + backward_weight steps.
std::vector<ScheduleStep> stage_schedule(const Plan& plan, int64_t stage);

}  // namespace parplan::runtime
