// CI gates for one plan: memory against capacity with headroom, performance floors, and regression against a
// stored baseline naming the term (and stage) that moved. Pure: results and sentences, no printing.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/cost/cost_model.hpp"
#include "planner/spec/memory_budget.hpp"
#include "planner/spec/spec.hpp"

namespace parplan {

struct CheckLimits {
  std::optional<int64_t> memory_bytes;  // per-GPU memory budget; default and upper bound: the GPU's capacity
  Headroom headroom;
  std::optional<double> max_bubble_fraction;   // pipeline bubble / step time
  std::optional<double> max_dp_comm_fraction;  // exposed DP communication / step time
  std::optional<double> min_mfu;               // model FLOPs utilisation, 0..1
  std::optional<double> max_step_s;
  // Peak GPU memory, and the offloaded states in a node's host memory, may grow by this fraction over the baseline.
  double max_memory_regression = 0.05;
  // Time per token (step time / tokens per step) may grow by this fraction over the baseline: a larger batch or a
  // longer sequence that takes longer per step but not per token is no regression (docs/ci.md).
  double max_time_regression = 0.05;
};

// baseline: the plan has no baseline entry and one is required (check --require-baseline).
enum class Gate : uint8_t { memory, bubble, dp_comm, mfu, step_time, memory_regression, time_regression, baseline };
std::string_view to_string(Gate g);  // "memory", "bubble", "dp_comm", "mfu", "step_time", ..., "baseline"

// Per-GPU memory terms of one stage, in the order of kMemoryTerms (step-time terms: kTimeTerms, cost_model.hpp).
inline constexpr int kNumMemoryTerms = 10;
extern const std::array<std::string_view, kNumMemoryTerms> kMemoryTerms;  // "weights", "grads", ... (bytes)

// What a baseline keeps of one plan's estimate.
struct PlanSnapshot {
  double peak_memory_bytes = 0;
  int64_t peak_stage = 0;
  std::vector<std::array<double, kNumMemoryTerms>> stage_memory_bytes;  // per pipeline stage
  double step_s = 0;
  std::array<double, kNumTimeTerms> time_s{};
  int64_t slowest_stage = 0;
  double tokens_per_step = 0;  // global batch x sequence length; 0 = unknown (a baseline written before it was kept)
  // Offloaded states per node in host memory (0: nothing offloaded); none: a baseline written before it was kept.
  std::optional<double> host_bytes_per_node;
};
PlanSnapshot snapshot(const Estimate& e, double tokens_per_step = 0);
double tokens_per_step(const Plan& plan);

// The term that grew most between a baseline and now (absolute growth, bytes or seconds).
struct TermDelta {
  std::string term;
  int64_t stage = -1;  // memory: the stage holding the term; time: the slowest stage
  double before = 0, after = 0;
};

struct GateResult {
  Gate gate{};
  bool pass = true;
  double value = 0, limit = 0;  // memory gates in bytes, time in seconds, fractions as 0..1
  std::string message;          // one sentence with the numbers, e.g. "peak 85.3 GiB on stage 0 exceeds ..."
};

struct CheckResult {
  bool pass = true;
  std::vector<GateResult> gates;  // every gate that was evaluated, memory first
  double capacity_bytes = 0;      // the GPU's memory
  double budget_bytes = 0;        // min(--memory, capacity)
  double limit_bytes = 0;         // budget minus headroom: the peak must not exceed this
  double peak_bytes = 0;
  int64_t peak_stage = 0;
  double margin_bytes = 0;        // limit - peak: > 0 under, < 0 over
  std::string largest_term;       // largest memory term on the peak stage ("activations 30.12 GiB")
  // Offloaded states in a node's host memory (0 when nothing is offloaded) and the node's host memory (0: the
  // cluster profile gives none, not checked); the memory gate fails when they do not fit, as estimate says.
  double host_bytes_per_node = 0;
  double host_capacity_bytes = 0;
  bool host_fits = true;
  double mfu = 0, bubble_fraction = 0, dp_comm_fraction = 0;  // of the step
  std::optional<TermDelta> memory_moved, time_moved;  // vs the baseline, when one was given
  PlanSnapshot now;
  std::string summary;            // one line: margin, stage, term, time figures and any failures
};

// Evaluates every configured gate. `baseline` (may be null) is the stored snapshot of the same plan.
CheckResult check_plan(const Plan& plan, const Estimate& e, const CheckLimits& limits, const PlanSnapshot* baseline);

// Baseline document: {"parplan_check_baseline": 1, "plans": {"<plan key>": {snapshot}}} (docs/ci.md). The key is the
// plan's name, or "content:<hash>" of its document; baselines written before keep the plan path as typed.
inline constexpr int kBaselineFormatVersion = 1;
using Baseline = std::map<std::string, PlanSnapshot>;
nlohmann::json snapshot_to_json(const PlanSnapshot& s);
nlohmann::json baseline_to_json(const Baseline& b);
// Strict: unknown keys, wrong types and negative sizes are InputError naming `where` and the JSON path.
Baseline baseline_from_text(std::string_view text, const std::string& where);

// Flag values: "10%" or "0.1" -> 0.1 (within [0, 1]); headroom also takes a byte size ("8GiB").
double parse_fraction(std::string_view text, std::string_view flag);
Headroom parse_headroom(std::string_view text, std::string_view flag);

}  // namespace parplan
