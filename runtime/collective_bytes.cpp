// Seam collective kinds -> planner collective formulas.
#include "runtime/collective_bytes.hpp"

#include <cmath>

namespace parplan::runtime {

Collective to_planner(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce:
      return Collective::all_reduce;
    case CollectiveKind::all_gather:
      return Collective::all_gather;
    case CollectiveKind::reduce_scatter:
      return Collective::reduce_scatter;
    case CollectiveKind::all_to_all:
      return Collective::all_to_all;
    case CollectiveKind::send:
    case CollectiveKind::recv:
    case CollectiveKind::barrier:
      return Collective::send_recv;
  }
  return Collective::send_recv;
}

int64_t ring_bytes_sent(CollectiveKind kind, int64_t payload_bytes, int n) {
  if (kind == CollectiveKind::recv || kind == CollectiveKind::barrier) return 0;
  if (kind == CollectiveKind::send) return payload_bytes;  // a send is a 2-rank transfer whatever the group size
  return std::llround(bytes_sent_per_rank(to_planner(kind), static_cast<double>(payload_bytes), n));
}

double bus_bandwidth_factor(CollectiveKind kind, int n) {
  if (kind == CollectiveKind::barrier) return 0.0;
  if (kind == CollectiveKind::send || kind == CollectiveKind::recv) return 1.0;
  return bus_factor(to_planner(kind), n);
}

}  // namespace parplan::runtime
