// The executor: runs each rank's Program on a backend World for warm-up + N steps and records per-op times,
// step times (median step chosen over the slowest rank), exact peak memory and the collectives each rank ran.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/program.hpp"

namespace parplan::runtime {

struct ExecOptions {
  int warmup = 1;
  int steps = 3;
  // Rank-local mode: the world has one rank that runs programs[0] (any plan rank); collectives and p2p are not
  // executed, their time is the op's predicted_s, marked not measured and placed by place_predicted_communication.
  bool rank_local = false;
  // Called on the first program's thread after each of its steps (warm-up ones too): the steps done so far
  // (1-based), warmup + steps, whether it was a warm-up step, and its time. For progress lines; may be empty.
  std::function<void(int done, int total, bool warmup, double step_s)> on_step = {};
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

// Rank-local mode's step: places each collective's predicted time on a virtual communication stream, as execute()
// issues collectives on a real one. A collective starts when the compute stream reaches it and the communication
// stream is free (a grouped p2p exchange, both directions at once, takes its longest op); compute waits for it at
// once when it blocks, at the op that joins it (Op::wait_for), or at the step's end when it overlaps (DP buckets).
// `times` holds each op's measured start/end on the compute stream (communication ops: start == end == the compute
// time they were issued at) and is shifted in place; `compute_end_s` is the compute stream's measured end. Returns
// the step time. The cost model hides overlapped communication the same way, so the step is comparable with it.
double place_predicted_communication(const std::vector<Op>& ops, std::vector<OpTime>& times, double compute_end_s);

// One past the last op of the exchange op i starts, as execute() issues it: consecutive p2p ops on one group form one
// grouped exchange (a send and a receive at once: send_forward_recv_backward, a ring-attention step), every op of it
// given the exchange's span; any other op is its own (i + 1).
size_t exchange_end(const std::vector<Op>& ops, size_t i);

// Runs programs[world rank] on every rank of `world` (or programs[0] alone in rank-local mode).
RunResult execute(World& world, const std::vector<Program>& programs, const ExecOptions& opt);

}  // namespace parplan::runtime
