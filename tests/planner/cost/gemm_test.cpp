// Tests for planner/gemm: wave quantization, roofline and launch overhead.
#include <doctest/doctest.h>

#include "planner/cost/gemm.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

TEST_CASE("wave efficiency: full waves are 1, a partial last wave and padded tiles cost") {
  GemmEfficiency e;
  e.sm_count = 108;
  e.tile_m = 128;
  e.tile_n = 256;
  CHECK(wave_efficiency(e, 128 * 108, 256, 1) == doctest::Approx(1.0));
  CHECK(wave_efficiency(e, 128 * 109, 256, 1) == doctest::Approx(109.0 / 216.0));
  CHECK(wave_efficiency(e, 64, 256 * 108, 1) == doctest::Approx(0.5));  // half of every tile is padding
}

TEST_CASE("a large square GEMM runs at peak x peak_fraction; a thin one is HBM bound") {
  GpuSpec g = test::profiles().gpu("a100-80gb", "t");
  g.gemm.kernel_overhead_s = 0;
  const int64_t n = 128 * 108;  // one full wave of 128x256 tiles in m, and n a multiple of 256
  const double t = gemm_time_s(g, DType::bf16, n, 256 * 8, 8192);
  const double flops = 2.0 * n * 256 * 8 * 8192;
  CHECK(flops / t == doctest::Approx(312e12 * g.gemm.peak_fraction));
  const double thin = gemm_time_s(g, DType::bf16, 65536, 65536, 8);  // output dominates: memory bound
  const double bytes = 2.0 * (65536.0 * 8 + 8 * 65536.0 + 65536.0 * 65536.0);
  CHECK(thin == doctest::Approx(bytes / (g.hbm_bandwidth_Bps * g.hbm_efficiency)));
  CHECK(gemm_time_s(g, DType::bf16, 0, 10, 10) == 0.0);
}

TEST_CASE("an fp8 GEMM reaches fp8_efficiency x peak_fraction of the fp8 peak") {
  GpuSpec g = test::profiles().gpu("h100", "t");
  g.gemm.kernel_overhead_s = 0;
  const int64_t m = 128 * 132, n = 256 * 8, k = 8192;  // whole waves of 128x256 tiles on 132 SMs
  const double flops = 2.0 * m * n * k;
  CHECK(flops / gemm_time_s(g, DType::bf16, m, n, k) == doctest::Approx(989.4e12 * g.gemm.peak_fraction));
  CHECK(flops / gemm_time_s(g, DType::fp8, m, n, k) ==
        doctest::Approx(1978.9e12 * g.gemm.peak_fraction * g.gemm.fp8_efficiency));
  g.gemm.fp8_efficiency = 1.0;  // the same fraction as bf16: twice as fast
  CHECK(gemm_time_s(g, DType::bf16, m, n, k) == doctest::Approx(2.0 * gemm_time_s(g, DType::fp8, m, n, k)).epsilon(1e-3));
}
