// Where the runtime gets each stage's task order. It must be the simulator's schedule (simulator/schedule.hpp,
// the single definition of pipeline op order); until that header lands this adapter carries an interim GPipe and
// 1F1B order, and refuses interleaved and zero-bubble plans rather than guess them.
#pragma once
#include <cstdint>
#include <vector>

#include "planner/spec.hpp"
#include "runtime/lower.hpp"

namespace parplan::runtime {

// The order of pipeline tasks on stage `stage`. Throws InputError for schedules the runtime cannot order yet.
std::vector<ScheduleStep> stage_schedule(const Plan& plan, int64_t stage);

}  // namespace parplan::runtime
