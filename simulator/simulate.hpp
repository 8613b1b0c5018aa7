// simulate(): one training step of a Plan through the schedule, task graph and event engine, returned as a
// Timeline plus a summary (step time, per-stage busy / bubble / exposed comm, whole-step fractions, activation peaks).
#pragma once
#include <cstdint>
#include <vector>

#include "planner/spec/spec.hpp"
#include "simulator/schedule.hpp"
#include "simulator/task_graph.hpp"
#include "simulator/timeline.hpp"

namespace parplan::sim {

struct SimOptions {
  bool overlap = true;     // false: TP / CP / DP comm and p2p sends all block the compute stream
  bool contention = true;  // transfers on one link tier of a stage share its bandwidth
  int64_t bucket_bytes = 0;  // DP gradient bucket size; 0 = the plan's (TrainingSpec::dp_bucket_bytes)
  bool edges_in_owning_chunk = true;  // see CostOptions
  bool record_timeline = true;        // false: summary only (faster, for re-ranking many plans)
};

struct StageSummary {
  int64_t stage = 0;
  double end_s = 0;           // when this stage's step work (incl. optimizer, exposed parameter gather) ends
  double compute_s = 0;       // forward / backward / recompute
  double busy_s = 0;          // compute + exposed in-layer comm + blocking p2p (the compute stream's pipeline work)
  double bubble_s = 0;        // idle inside the pipeline phase: step_s - busy - dp exposed - optimizer
  double exposed_comm_s = 0;  // exposed in-layer comm + blocking p2p + exposed DP
  double tp_exposed_s = 0, cp_exposed_s = 0, ep_exposed_s = 0, zero3_exposed_s = 0;
  double offload_exposed_s = 0;  // activation offload copies outlasting the compute (in exposed_comm_s)
  double pp_exposed_s = 0, pp_total_s = 0;
  double dp_exposed_s = 0, dp_total_s = 0;
  double optimizer_s = 0;
  int64_t peak_live_chunks = 0;             // simulated: max chunk-microbatches between F and B (B_input)
  int64_t peak_live_until_weight_grad = 0;  // ... between F and W (ZB-H1), else equal: what memory holds
  int64_t planner_in_flight_chunks = 0;     // the memory model's count
  double peak_activation_bytes = 0;         // simulated peak (until W) x the planner's bytes per chunk-microbatch
  double planner_activation_bytes = 0;
};

struct SimSummary {
  double step_s = 0;
  int64_t critical_stage = 0;  // the busiest stage; whole-step fractions are its
  double compute = 0, bubble = 0, tp_comm = 0, cp_comm = 0, ep_comm = 0, pp_comm = 0, zero3_comm = 0;
  double offload_exposed = 0;
  double dp_comm_exposed = 0, dp_comm_total = 0, optimizer = 0;  // fractions of step_s
  std::vector<StageSummary> stages;
  int64_t tasks = 0, events = 0;
};

struct SimResult {
  SimSummary summary;
  Timeline timeline;
};

// Simulates one step of `plan` (which must pass validate()). Throws InputError for plans the schedules cannot
// order (interleaved with m % pp != 0).
SimResult simulate(const Plan& plan, const SimOptions& opt = {});

// The plan as simulate() prices it under `opt`: opt.bucket_bytes its DP bucket size where given; without overlap its
// TP, CP and DP collectives and its pipeline sends not overlapped. estimate() of it is the closed form for the same
// knobs (simulate's "closed form" column).
Plan priced_plan(const Plan& plan, const SimOptions& opt);

// The tasks simulate() would build for `plan` under `opt`, counted from the schedule's shape without building
// anything; counting stops once past `limit` (the result is then some number above it). Callers simulating many
// plans (suggest --simulate) budget their work with it.
int64_t step_graph_tasks(const Plan& plan, const SimOptions& opt, int64_t limit);

// The engine part on its own: a schedule with explicit costs (tests, benchmarks). Memory fields use 1 byte per
// chunk-microbatch.
SimResult simulate_costs(const PipelineSchedule& s, const StepCosts& costs, const SimOptions& opt = {});

}  // namespace parplan::sim
