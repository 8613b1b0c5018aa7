// Tests for planner/collectives: nccl-tests bus-bandwidth factors and the ring time model.
#include <doctest/doctest.h>

#include "planner/collectives.hpp"

using namespace parplan;

TEST_CASE("nccl-tests PERFORMANCE.md bus bandwidth factors") {
  CHECK(bus_factor(Collective::all_reduce, 8) == doctest::Approx(2.0 * 7 / 8));
  CHECK(bus_factor(Collective::all_gather, 8) == doctest::Approx(7.0 / 8));
  CHECK(bus_factor(Collective::reduce_scatter, 8) == doctest::Approx(7.0 / 8));
  CHECK(bus_factor(Collective::all_to_all, 4) == doctest::Approx(3.0 / 4));
  CHECK(bus_factor(Collective::send_recv, 2) == doctest::Approx(1.0));
  CHECK(bus_factor(Collective::broadcast, 16) == doctest::Approx(1.0));
  CHECK(bus_factor(Collective::all_reduce, 1) == 0.0);
}

TEST_CASE("measured DGX H100 all-reduce: busbw 480 GB/s at algbw 275 GB/s is the 2(n-1)/n factor") {
  // nccl-tests issue #212 (NVIDIA): ~480 GB/s busbw, ~275 GB/s algbw on 8 H100 (hardware-reference.json).
  CHECK(480.0 / 275.0 == doctest::Approx(bus_factor(Collective::all_reduce, 8)).epsilon(0.005));
}

TEST_CASE("ring all-reduce time is 2(n-1)/n S/B plus 2(n-1) latencies") {
  LinkSpec l;
  l.bandwidth_Bps = 100e9;
  l.efficiency = 0.5;
  l.latency_s = 5e-6;
  const double S = 1e9;
  CHECK(collective_time_s(Collective::all_reduce, S, 8, l) == doctest::Approx(14 * 5e-6 + 1.75 * S / 50e9));
  CHECK(collective_time_s(Collective::all_gather, S, 8, l) == doctest::Approx(7 * 5e-6 + 0.875 * S / 50e9));
  CHECK(collective_time_s(Collective::all_reduce, S, 1, l) == 0.0);
  CHECK(bytes_sent_per_rank(Collective::all_reduce, S, 4) == doctest::Approx(1.5 * S));
}
