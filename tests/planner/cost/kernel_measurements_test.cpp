// The GPU profiles' measured kernel fields against the measurement they cite: bench/gpu/kernels.py's output on an
// H200 (bench/gpu/results/h200-2026-11-26/kernels.json), recomputed here as the profile's source describes.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
nlohmann::json h200_kernels() {
  std::ifstream in(std::string(PARPLAN_SOURCE_DIR) + "/bench/gpu/results/h200-2026-11-26/kernels.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

double median(std::vector<double> v) {
  REQUIRE(!v.empty());
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median fraction of the bf16 peak over the head-dim-128 shapes of one SDPA backend.
double attention_median(const nlohmann::json& k, const std::string& backend, const char* key, double peak) {
  std::vector<double> v;
  for (const auto& a : k["attention"]) {
    if (a["backend"] == backend && a["d_qk"] == 128) v.push_back(a[key].get<double>() * 1e12 / peak);
  }
  CHECK(v.size() == 4);
  return median(v);
}
}  // namespace

TEST_CASE("H100 and H200 attention fractions are the measured SDPA backends' medians") {
  const nlohmann::json k = h200_kernels();
  for (const char* name : {"h100", "h200"}) {
    const GpuSpec g = test::profiles().gpu(name, "t");
    const double peak = g.peak(DType::bf16);
    // flash: cuDNN fused attention (Transformer Engine's default on Hopper); flash2: PyTorch SDPA's flash backend.
    CHECK(g.gemm.attention_efficiency(AttentionKernel::flash, false) ==
          doctest::Approx(attention_median(k, "cudnn", "fwd_tflops", peak)).epsilon(0.005));
    CHECK(g.gemm.attention_efficiency(AttentionKernel::flash, true) ==
          doctest::Approx(attention_median(k, "cudnn", "bwd_tflops", peak)).epsilon(0.005));
    CHECK(g.gemm.attention_efficiency(AttentionKernel::flash2, false) ==
          doctest::Approx(attention_median(k, "flash", "fwd_tflops", peak)).epsilon(0.005));
    CHECK(g.gemm.attention_efficiency(AttentionKernel::flash2, true) ==
          doctest::Approx(attention_median(k, "flash", "bwd_tflops", peak)).epsilon(0.005));
  }
}

TEST_CASE("H100 and H200 fp8_efficiency is the measured tensorwise fp8 over bf16 median") {
  const nlohmann::json k = h200_kernels();
  std::vector<double> ratio;
  for (const auto& g : k["gemm"]) {
    ratio.push_back(g["fp8_tensorwise_tflops"].get<double>() / g["bf16_tflops"].get<double>() / 2.0);
  }
  CHECK(ratio.size() == 11);
  for (const char* name : {"h100", "h200"}) {
    CHECK(test::profiles().gpu(name, "t").gemm.fp8_efficiency == doctest::Approx(median(ratio)).epsilon(0.001));
  }
}

TEST_CASE("a profile without FlashAttention-2 figures prices flash2 as its fused kernel") {
  GemmEfficiency e;
  e.attention_fraction = 0.4;
  CHECK(e.attention_efficiency(AttentionKernel::flash2, false) == doctest::Approx(0.4));
  CHECK(e.attention_efficiency(AttentionKernel::flash2, true) == doctest::Approx(0.4));
  e.attention_backward_fraction = 0.3;
  CHECK(e.attention_efficiency(AttentionKernel::flash, true) == doctest::Approx(0.3));
  CHECK(e.attention_efficiency(AttentionKernel::flash2, true) == doctest::Approx(0.3));
  e.flash2_fraction = 0.25;
  CHECK(e.attention_efficiency(AttentionKernel::flash2, false) == doctest::Approx(0.25));
  CHECK(e.attention_efficiency(AttentionKernel::flash2, true) == doctest::Approx(0.25));
  e.flash2_backward_fraction = 0.2;
  CHECK(e.attention_efficiency(AttentionKernel::flash2, true) == doctest::Approx(0.2));
}
