// Tests for planner/collectives: nccl-tests bus-bandwidth factors and the ring time model.
#include <doctest/doctest.h>

#include "planner/cost/collectives.hpp"
#include "planner/spec/profiles.hpp"

using namespace parplan;

namespace {
LinkSpec link(double bandwidth_Bps, double efficiency, double latency_s) {
  LinkSpec l;
  l.bandwidth_Bps = bandwidth_Bps;
  l.efficiency = efficiency;
  l.latency_s = latency_s;
  return l;
}
}  // namespace

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
  const LinkSpec l = link(100e9, 0.5, 5e-6);
  const double S = 1e9;
  CHECK(collective_time_s(Collective::all_reduce, S, 8, l) == doctest::Approx(14 * 5e-6 + 1.75 * S / 50e9));
  CHECK(collective_time_s(Collective::all_gather, S, 8, l) == doctest::Approx(7 * 5e-6 + 0.875 * S / 50e9));
  CHECK(collective_time_s(Collective::all_reduce, S, 1, l) == 0.0);
  CHECK(bytes_sent_per_rank(Collective::all_reduce, S, 4) == doctest::Approx(1.5 * S));
}

// The shipped node profiles against nccl-tests measurements (hardware-reference.json): a 4 GiB collective on one
// node's 8 GPUs must come out at the measured bus bandwidth. nccl-tests #175: 232.54 GB/s all-reduce on 8 A100-SXM4;
// nccl-tests #212 / nccl #1455: ~370 GB/s on 8 H100 for the ring (NCCL_ALGO=RING, and every collective but the
// all-reduce), nccl-tests #212 / dgxc-benchmarking: ~480 GB/s busbw (~275 GB/s algbw) for the default NVLS all-reduce.
TEST_CASE("shipped node profiles reproduce nccl-tests bus bandwidth on 8 GPUs (A100 232.5, H100 ring 370, NVLS 480 GB/s)") {
  const double S = 4.0 * 1024 * 1024 * 1024;
  auto busbw = [S](Collective c, const LinkSpec& l) { return S * bus_factor(c, 8) / collective_time_s(c, S, 8, l); };
  const ProfileSet& p = ProfileSet::embedded();
  const LinkSpec a100 = p.cluster("dgx-a100", "test").intra_node, h100 = p.cluster("dgx-h100", "test").intra_node;
  CHECK(busbw(Collective::all_reduce, a100) == doctest::Approx(232.5e9).scale(0).epsilon(0.01));
  CHECK(busbw(Collective::all_reduce, h100) == doctest::Approx(480e9).scale(0).epsilon(0.01));
  CHECK(S / collective_time_s(Collective::all_reduce, S, 8, h100) == doctest::Approx(275e9).scale(0).epsilon(0.01));
  CHECK(busbw(Collective::all_gather, h100) == doctest::Approx(370e9).scale(0).epsilon(0.01));
  CHECK(busbw(Collective::reduce_scatter, h100) == doctest::Approx(370e9).scale(0).epsilon(0.01));
  // The H200 node has the same fabric; the A100 node has no NVLink SHARP.
  CHECK(p.cluster("dgx-h200", "test").intra_node.nvls_efficiency == h100.nvls_efficiency);
  CHECK(a100.nvls_efficiency == 0.0);
}

// NVLS moves S (n + 1) / n over each rank's link, the ring 2 (n - 1) / n S: NVLS wins from about 4 ranks up, the ring
// below; the faster one is charged, and links without NVLS are unchanged.
TEST_CASE("NVLS all-reduce: S (n + 1) / n at nvls_efficiency, the faster of it and the ring") {
  LinkSpec l = link(450e9, 0.82, 3e-6);
  const double S = 1e9;
  const double ring8 = collective_time_s(Collective::all_reduce, S, 8, l);
  CHECK(ring8 == doctest::Approx(14 * 3e-6 + 1.75 * S / (450e9 * 0.82)));
  l.nvls_efficiency = 0.6875;
  CHECK(nvls_all_reduce_time_s(S, 8, l) == doctest::Approx(2 * 3e-6 + 1.125 * S / (450e9 * 0.6875)));
  CHECK(collective_time_s(Collective::all_reduce, S, 8, l) == nvls_all_reduce_time_s(S, 8, l));
  // calibrate's inverse recovers the efficiency from the time; a time within the two latencies gives none.
  CHECK(nvls_efficiency_for(S, 8, l, nvls_all_reduce_time_s(S, 8, l)) == doctest::Approx(0.6875).scale(0).epsilon(1e-12));
  CHECK(nvls_efficiency_for(S, 8, l, 2 * 3e-6) == 0.0);
  CHECK(collective_time_s(Collective::all_reduce, S, 8, l) < 0.8 * ring8);  // 4.76 vs 3.66 ms
  // 2 ranks: NVLS 206 GB/s algbw against the ring's 369: the ring.
  CHECK(collective_time_s(Collective::all_reduce, S, 2, l) ==
        doctest::Approx(2 * 3e-6 + S / (450e9 * 0.82)));
  CHECK(nvls_all_reduce_time_s(S, 2, l) > 1.7 * collective_time_s(Collective::all_reduce, S, 2, l));
  // 4 ranks: within 1% of each other.
  LinkSpec ring_only = l;
  ring_only.nvls_efficiency = 0;
  CHECK(nvls_all_reduce_time_s(S, 4, l) ==
        doctest::Approx(collective_time_s(Collective::all_reduce, S, 4, ring_only)).scale(0).epsilon(0.01));
  // Only the all-reduce: the others keep the ring.
  CHECK(collective_time_s(Collective::all_gather, S, 8, l) == collective_time_s(Collective::all_gather, S, 8, ring_only));
  CHECK(collective_time_s(Collective::all_reduce, S, 1, l) == 0.0);
  CHECK(nvls_all_reduce_time_s(S, 1, l) == 0.0);
}
