// Collective communication cost: nccl-tests bus-bandwidth factors and the ring/alpha-beta time model.
#pragma once
#include <cstdint>

#include "planner/spec.hpp"

namespace parplan {

enum class Collective : uint8_t { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, broadcast };

// Bus-bandwidth factor, nccl-tests doc/PERFORMANCE.md: busbw = algbw * factor, algbw = S / t, with S the
// buffer size nccl-tests reports (all_gather: the gathered output; reduce_scatter: the full input).
//   all_reduce 2(n-1)/n, all_gather (n-1)/n, reduce_scatter (n-1)/n, all_to_all (n-1)/n, send_recv 1, broadcast 1.
double bus_factor(Collective c, int64_t n);

// Sequential latency steps of the ring algorithm: all_reduce 2(n-1), all_gather / reduce_scatter / all_to_all (n-1).
int64_t latency_steps(Collective c, int64_t n);

// Time for one collective of `bytes` (nccl-tests size convention) over n ranks on `link`:
//   t = steps * latency + bytes * bus_factor / (bandwidth * efficiency)   (ring: 2(n-1)/n * S / B for all-reduce).
// n == 1 costs nothing.
double collective_time_s(Collective c, double bytes, int64_t n, const LinkSpec& link);

// Bytes each rank sends in one ring collective (used by the runtime and its tests): all_reduce 2(n-1)/n S,
// all_gather / reduce_scatter / all_to_all (n-1)/n S, send_recv S.
double bytes_sent_per_rank(Collective c, double bytes, int64_t n);

}  // namespace parplan
