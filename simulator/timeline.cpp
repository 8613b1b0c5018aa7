// Timeline category names.
#include "simulator/timeline.hpp"

namespace parplan {

std::string_view to_string(EventCategory c) {
  switch (c) {
    case EventCategory::forward: return "forward";
    case EventCategory::backward: return "backward";
    case EventCategory::backward_input: return "backward_input";
    case EventCategory::backward_weight: return "backward_weight";
    case EventCategory::recompute: return "recompute";
    case EventCategory::layer_comm: return "layer_comm";
    case EventCategory::tp_comm: return "tp_comm";
    case EventCategory::cp_comm: return "cp_comm";
    case EventCategory::pp_comm: return "pp_comm";
    case EventCategory::dp_comm: return "dp_comm";
    case EventCategory::zero3_gather: return "zero3_gather";
    case EventCategory::optimizer: return "optimizer";
    case EventCategory::host_copy: return "host_copy";
    case EventCategory::ep_comm: return "ep_comm";
  }
  return "?";
}

bool is_compute(EventCategory c) {
  switch (c) {
    case EventCategory::forward:
    case EventCategory::backward:
    case EventCategory::backward_input:
    case EventCategory::backward_weight:
    case EventCategory::recompute:
    case EventCategory::optimizer:
    case EventCategory::host_copy:
      return true;
    default:
      return false;
  }
}

}  // namespace parplan
