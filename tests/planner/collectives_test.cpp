// Tests for planner/collectives: nccl-tests bus-bandwidth factors and the ring time model.
#include <doctest/doctest.h>

#include "planner/collectives.hpp"
#include "planner/profiles.hpp"

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

// The shipped node profiles against nccl-tests measurements (hardware-reference.json): a 4 GiB all-reduce on one
// node's 8 GPUs must come out at the measured bus bandwidth. nccl-tests #175: 232.54 GB/s on 8 A100-SXM4; nccl-tests
// #212 / nccl #1455: ~370 GB/s on 8 H100 with NCCL_ALGO=RING (the ring every non-all-reduce collective runs; the
// NVLS all-reduce's 480 GB/s is not modelled, docs/cost-model.md).
TEST_CASE("shipped node profiles reproduce nccl-tests bus bandwidth on 8 GPUs (A100 232.5, H100 ring 370 GB/s)") {
  const double S = 4.0 * 1024 * 1024 * 1024;
  auto busbw = [S](const LinkSpec& l) {
    return S * bus_factor(Collective::all_reduce, 8) / collective_time_s(Collective::all_reduce, S, 8, l);
  };
  const ProfileSet& p = ProfileSet::embedded();
  CHECK(busbw(p.cluster("dgx-a100", "test").intra_node) == doctest::Approx(232.5e9).scale(0).epsilon(0.01));
  CHECK(busbw(p.cluster("dgx-h100", "test").intra_node) == doctest::Approx(370e9).scale(0).epsilon(0.01));
}
