// Bytes one rank sends in a collective under NCCL's ring algorithms (what the cuda backend logs, since NCCL
// does not report it) and the nccl-tests bus-bandwidth factors used by `parplan calibrate`.
#pragma once
#include <cstdint>

#include "runtime/backend.hpp"

namespace parplan::runtime {

// Bytes one of `n` ranks sends when the operation's size is S = payload_bytes (nccl-tests' S: the full
// buffer of all-reduce, the gathered output of all-gather, the input of reduce-scatter, all of one rank's
// all-to-all send buffer; the message of send). Ring all-reduce: 2(n-1)/n * S; all-gather, reduce-scatter and
// all-to-all: (n-1)/n * S. Rounded down to whole bytes.
int64_t ring_bytes_sent(CollectiveKind kind, int64_t payload_bytes, int n);

// nccl-tests' busbw = algbw * factor (doc/PERFORMANCE.md there): all-reduce 2(n-1)/n; all-gather,
// reduce-scatter and all-to-all (n-1)/n; send/recv 1.
double bus_bandwidth_factor(CollectiveKind kind, int n);

}  // namespace parplan::runtime
