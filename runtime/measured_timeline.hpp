// The measured run as a Timeline (simulator/timeline.hpp), the same type the simulator fills with predictions.
#pragma once
#include <vector>

#include "runtime/executor.hpp"
#include "runtime/program.hpp"
#include "simulator/timeline.hpp"

namespace parplan::runtime {

// One track per pipeline stage from the stage's first rank in `programs` (its median step): consecutive compute ops
// of one task merge into one event (F, B, B_input, W, recompute, optimizer) on "compute"; each collective / p2p is
// an event on its group's stream ("tp", "cp", "pp", "dp"). In rank-local mode communication events carry the
// predicted times; `source` says so.
Timeline measured_timeline(const RunResult& r, const std::vector<Program>& programs, bool rank_local);

}  // namespace parplan::runtime
