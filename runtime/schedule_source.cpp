// Converts the simulator's per-stage pipeline order into the lowering's steps.
#include "runtime/schedule_source.hpp"

#include "simulator/schedule.hpp"

namespace parplan::runtime {

std::vector<ScheduleStep> stage_schedule(const Plan& plan, int64_t stage) {
  const sim::PipelineSchedule s = sim::make_schedule(plan);
  std::vector<ScheduleStep> out;
  for (const sim::PipeOp& op : s.order.at(static_cast<size_t>(stage))) {
    Phase phase = Phase::forward;
    switch (op.kind) {
      case sim::OpKind::forward:
        phase = Phase::forward;
        break;
      case sim::OpKind::backward:
      case sim::OpKind::backward_input:
        phase = Phase::backward;
        break;
      case sim::OpKind::backward_weight:
        phase = Phase::backward_weight;
        break;
    }
    out.push_back({phase, op.microbatch, op.chunk});
  }
  return out;
}

}  // namespace parplan::runtime
