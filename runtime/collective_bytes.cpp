// Ring bytes per rank and nccl-tests bus-bandwidth factors for each collective kind.
#include "runtime/collective_bytes.hpp"

namespace parplan::runtime {

int64_t ring_bytes_sent(CollectiveKind kind, int64_t payload_bytes, int n) {
  if (n <= 1) return kind == CollectiveKind::send ? payload_bytes : 0;
  switch (kind) {
    case CollectiveKind::all_reduce:
      return 2 * (n - 1) * payload_bytes / n;
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_to_all:
      return (n - 1) * payload_bytes / n;
    case CollectiveKind::send:
      return payload_bytes;
    case CollectiveKind::recv:
    case CollectiveKind::barrier:
      return 0;
  }
  return 0;
}

double bus_bandwidth_factor(CollectiveKind kind, int n) {
  if (n <= 1) return kind == CollectiveKind::send || kind == CollectiveKind::recv ? 1.0 : 0.0;
  switch (kind) {
    case CollectiveKind::all_reduce:
      return 2.0 * (n - 1) / n;
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_to_all:
      return static_cast<double>(n - 1) / n;
    case CollectiveKind::send:
    case CollectiveKind::recv:
      return 1.0;
    case CollectiveKind::barrier:
      return 0.0;
  }
  return 0.0;
}

}  // namespace parplan::runtime
