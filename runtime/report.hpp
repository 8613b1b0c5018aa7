// Predicted vs measured, term by term: the cost model's step breakdown and per-stage memory against a run.
#pragma once
#include <string>
#include <vector>

#include "planner/cost/cost_model.hpp"
#include "runtime/executor.hpp"
#include "runtime/program.hpp"

namespace parplan::runtime {

struct TermRow {
  std::string term;     // "step", "compute", "bubble", "tp comm", ..., "peak memory stage 0"
  bool is_bytes = false;
  double predicted = 0;
  double measured = 0;
  bool measured_valid = true;  // false: not measured (rank-local communication)
  std::string note;
  double error() const { return predicted != 0 ? (measured - predicted) / predicted : 0.0; }
};

// Time terms use the rank whose compute is largest (the slowest stage); communication terms sum that rank's op
// durations (raw, including any time spent waiting for peers), except that a collective overlapped with compute
// (the asynchronous TP backward, SP re-gathers) counts only the compute stream's wait where it is joined; DP
// buckets count whole, as the "dp comm (total)" row; bubble = step - that rank's busy time. Memory rows
// compare the model's tensors (weights, grads, optimizer, activations, recompute and ZeRO-3 buffers) with the
// exact peak of the same allocations on each stage's first measured rank.
std::vector<TermRow> compare(const Estimate& e, const RunResult& r, const std::vector<Program>& programs, bool rank_local);

}  // namespace parplan::runtime
