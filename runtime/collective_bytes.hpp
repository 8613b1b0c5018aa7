// The seam's collective kinds mapped onto the planner's collective formulas (one copy of each formula: the ring
// bytes per rank and the nccl-tests bus-bandwidth factors live in planner/cost/collectives.hpp).
#pragma once
#include <cstdint>

#include "planner/cost/collectives.hpp"
#include "runtime/backend.hpp"

namespace parplan::runtime {

// The planner's Collective for a seam kind (send and recv are both send_recv; barrier has none).
Collective to_planner(CollectiveKind kind);

// Bytes one of `n` ranks sends when the operation's size is S = payload_bytes (nccl-tests' S: the full buffer of
// all-reduce, the gathered output of all-gather, the input of reduce-scatter, one rank's whole all-to-all send
// buffer; the message of a send): planner::bytes_sent_per_rank rounded to whole bytes; recv and barrier send 0.
int64_t ring_bytes_sent(CollectiveKind kind, int64_t payload_bytes, int n);

// nccl-tests' busbw / algbw (planner::bus_factor); send/recv 1.
double bus_bandwidth_factor(CollectiveKind kind, int n);

}  // namespace parplan::runtime
