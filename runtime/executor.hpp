// The executor: runs each rank's Program on a backend World for warm-up + N steps and records per-op times,
// step times (median step chosen over the slowest rank), exact peak memory and the collectives each rank ran.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/program.hpp"

namespace parplan::runtime {

struct ExecOptions {
  int warmup = 1;
  int steps = 3;
  // Rank-local mode: the world has one rank that runs programs[0] (any plan rank); collectives and p2p are not
  // executed, their time is the op's predicted_s and is marked not measured.
  bool rank_local = false;
};

struct OpTime {
  double start_s = 0, end_s = 0;  // from the step's start
  bool measured = true;           // false: predicted (rank-local communication), or bookkeeping (alloc/free)
  double duration_s() const { return end_s - start_s; }
};

struct RankRun {
  int64_t rank = 0, stage = 0;
  std::vector<double> step_s;                   // every measured step
  std::vector<std::vector<OpTime>> step_ops;    // per measured step, one entry per program op
  int64_t peak_bytes = 0;       // exact peak of live allocations over the measured steps (Device accounting)
  int64_t allowance_bytes = 0;  // of which the declared allowances (scratch slots)
  int64_t pool_reserved_peak_bytes = 0;
  int64_t device_total_bytes = 0;
  std::vector<CollectiveRecord> collectives;  // the last step's, in order
  int64_t model_peak_bytes() const { return peak_bytes - allowance_bytes; }
};

struct RunResult {
  std::vector<RankRun> ranks;  // indexed by program order
  std::vector<double> step_s;  // per measured step: the slowest rank's step time
  int median_step = 0;         // index into step_s of the median step
  double median_step_s() const { return step_s.empty() ? 0.0 : step_s[static_cast<size_t>(median_step)]; }
};

// Runs programs[world rank] on every rank of `world` (or programs[0] alone in rank-local mode).
RunResult execute(World& world, const std::vector<Program>& programs, const ExecOptions& opt);

}  // namespace parplan::runtime
