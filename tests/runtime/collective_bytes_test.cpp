// Tests for ring bytes per rank and the nccl-tests bus-bandwidth factors.
#include <doctest/doctest.h>

#include "runtime/collective_bytes.hpp"

using namespace parplan::runtime;

TEST_CASE("ring bytes per rank follow 2(n-1)/n and (n-1)/n") {
  CHECK(ring_bytes_sent(CollectiveKind::all_reduce, 800, 8) == 1400);
  CHECK(ring_bytes_sent(CollectiveKind::all_gather, 800, 8) == 700);
  CHECK(ring_bytes_sent(CollectiveKind::reduce_scatter, 800, 4) == 600);
  CHECK(ring_bytes_sent(CollectiveKind::all_to_all, 800, 2) == 400);
  CHECK(ring_bytes_sent(CollectiveKind::send, 123, 2) == 123);
  CHECK(ring_bytes_sent(CollectiveKind::recv, 123, 2) == 0);
  CHECK(ring_bytes_sent(CollectiveKind::all_reduce, 800, 1) == 0);
}

TEST_CASE("bus bandwidth factors are nccl-tests'") {
  CHECK(bus_bandwidth_factor(CollectiveKind::all_reduce, 8) == doctest::Approx(1.75));
  CHECK(bus_bandwidth_factor(CollectiveKind::all_gather, 8) == doctest::Approx(0.875));
  CHECK(bus_bandwidth_factor(CollectiveKind::reduce_scatter, 2) == doctest::Approx(0.5));
  CHECK(bus_bandwidth_factor(CollectiveKind::send, 2) == 1.0);
}
