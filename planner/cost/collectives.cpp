// Collective cost formulas (see collectives.hpp for the sources).
#include "planner/cost/collectives.hpp"

#include <algorithm>

namespace parplan {

double bus_factor(Collective c, int64_t n) {
  if (n <= 1) return 0.0;
  const double nd = static_cast<double>(n);
  switch (c) {
    case Collective::all_reduce:
      return 2.0 * (nd - 1) / nd;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
      return (nd - 1) / nd;
    case Collective::send_recv:
    case Collective::broadcast:
      return 1.0;
  }
  return 1.0;
}

int64_t latency_steps(Collective c, int64_t n) {
  if (n <= 1) return 0;
  switch (c) {
    case Collective::all_reduce:
      return 2 * (n - 1);
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
      return n - 1;
    case Collective::send_recv:
      return 1;
    case Collective::broadcast:
      return n - 1;
  }
  return 1;
}

double nvls_all_reduce_time_s(double bytes, int64_t n, const LinkSpec& link) {
  if (n <= 1 || bytes <= 0) return 0.0;
  const double nd = static_cast<double>(n);
  return 2.0 * link.latency_s + bytes * (nd + 1) / nd / (link.bandwidth_Bps * link.nvls_efficiency);
}

double nvls_efficiency_for(double bytes, int64_t n, const LinkSpec& link, double seconds) {
  const double wire_s = seconds - 2.0 * link.latency_s;
  if (n <= 1 || bytes <= 0 || wire_s <= 0) return 0.0;
  const double nd = static_cast<double>(n);
  return bytes * (nd + 1) / nd / (wire_s * link.bandwidth_Bps);
}

double collective_time_s(Collective c, double bytes, int64_t n, const LinkSpec& link) {
  if (n <= 1 || bytes <= 0) return 0.0;
  const double ring =
      static_cast<double>(latency_steps(c, n)) * link.latency_s + bytes * bus_factor(c, n) / link.effective_Bps();
  if (c == Collective::all_reduce && link.nvls_efficiency > 0) return std::min(ring, nvls_all_reduce_time_s(bytes, n, link));
  return ring;
}

double bytes_sent_per_rank(Collective c, double bytes, int64_t n) {
  if (n <= 1) return 0.0;
  if (c == Collective::broadcast) return bytes;
  return bytes * bus_factor(c, n);
}

}  // namespace parplan
