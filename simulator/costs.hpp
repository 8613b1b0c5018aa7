// Plan -> StepCosts: every duration the simulator uses comes from the planner's cost functions (layer_cost,
// edge_cost, p2p_time_s, dp_cost, estimate); nothing here re-derives a formula.
#pragma once
#include "planner/spec/spec.hpp"
#include "simulator/task_graph.hpp"

namespace parplan::sim {

struct CostOptions {
  // Put the embedding / output-layer work in the chunk that owns it (true, physical) or spread it evenly over the
  // stage's chunks (false: the closed form's assumption of equal chunks, used by the cross-check). ZB-V's closed form
  // puts it in the owning chunk, as true does (its order follows the op times).
  bool edges_in_owning_chunk = true;
  bool blocking_p2p = false;  // sends block the sender's compute stream (no p2p overlap)
};

// Per-stage, per-chunk costs of `plan` as the planner prices them. The plan's overlap flags decide what is exposed.
StepCosts step_costs(const Plan& plan, const CostOptions& opt = {});

}  // namespace parplan::sim
