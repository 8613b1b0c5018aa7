// Names of the program's enums (report rows, trace categories).
#include "runtime/program.hpp"

namespace parplan::runtime {

std::string_view to_string(Term t) {
  switch (t) {
    case Term::forward:
      return "forward";
    case Term::backward:
      return "backward";
    case Term::recompute:
      return "recompute";
    case Term::tp_comm:
      return "tp_comm";
    case Term::cp_comm:
      return "cp_comm";
    case Term::ep_comm:
      return "ep_comm";
    case Term::pp_comm:
      return "pp_comm";
    case Term::dp_comm:
      return "dp_comm";
    case Term::zero3_comm:
      return "zero3_comm";
    case Term::optimizer:
      return "optimizer";
    case Term::memory:
      return "memory";
  }
  return "?";
}

std::string_view to_string(SlotKind k) {
  switch (k) {
    case SlotKind::weights:
      return "weights";
    case SlotKind::grads:
      return "grads";
    case SlotKind::optimizer:
      return "optimizer";
    case SlotKind::activations:
      return "activations";
    case SlotKind::recompute_working_set:
      return "recompute_working_set";
    case SlotKind::zero3_buffers:
      return "zero3_buffers";
    case SlotKind::scratch:
      return "scratch";
  }
  return "?";
}

std::string_view to_string(Phase p) {
  switch (p) {
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::backward_weight:
      return "backward_weight";
    case Phase::tail:
      return "tail";
  }
  return "?";
}

std::string_view to_string(Group g) {
  switch (g) {
    case Group::tp:
      return "tp";
    case Group::cp:
      return "cp";
    case Group::dp_cp:
      return "dp";
    case Group::pp:
      return "pp";
    case Group::ep:
      return "ep";
    case Group::edp:
      return "edp";
    case Group::dp_replica:
      return "dp_replica";
  }
  return "?";
}

}  // namespace parplan::runtime
