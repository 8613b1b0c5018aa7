// Collective communication cost: nccl-tests bus-bandwidth factors and the ring/alpha-beta time model.
#pragma once
#include <cstdint>

#include "planner/spec/spec.hpp"

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
// An all-reduce on a link with NVLink SHARP (LinkSpec::nvls_efficiency > 0, NVSwitch 3 and later) takes the faster
// of the ring and nvls_all_reduce_time_s, as NCCL's tuner picks the algorithm by its predicted time.
double collective_time_s(Collective c, double bytes, int64_t n, const LinkSpec& link);
// NVLS all-reduce (NCCL 2.17+): the switch reduces each 1/n slice as it reads it from all n ranks (multimem
// ld_reduce) and multicasts the result back (multimem st), so each rank's link carries its whole buffer once plus one
// slice in each direction, S (n + 1) / n, in two switch passes:
//   t = 2 * latency + S (n + 1) / n / (bandwidth * nvls_efficiency).
// Pinned to DGX H100: 480 GB/s busbw (275 GB/s algbw) on 8 GPUs against 370 GB/s for the ring (nccl-tests #212;
// validation/hardware-reference.json), so nvls_efficiency = 275 * 9/8 / 450 = 0.6875. The ring is faster
// below 4 ranks (2 ranks: 206 against 370 GB/s algbw) and about level at 4.
double nvls_all_reduce_time_s(double bytes, int64_t n, const LinkSpec& link);
// The nvls_efficiency under which nvls_all_reduce_time_s gives `seconds` for this all-reduce on `link` (its inverse,
// for calibrate's fit); 0 when the time does not exceed the two latencies.
double nvls_efficiency_for(double bytes, int64_t n, const LinkSpec& link, double seconds);

// Bytes each rank sends in one ring collective (used by the runtime and its tests): all_reduce 2(n-1)/n S,
// all_gather / reduce_scatter / all_to_all (n-1)/n S, send_recv S.
double bytes_sent_per_rank(Collective c, double bytes, int64_t n);

}  // namespace parplan
