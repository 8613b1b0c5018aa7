// The GPU and cluster profiles against validation/hardware-reference.json, the vendored datasheet figures they cite:
// each figure is pinned to the published value, and the profile to the reference entry.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "planner/spec/profiles.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
const nlohmann::json& reference() {
  static const nlohmann::json j = [] {
    const std::string path = PARPLAN_SOURCE_DIR "/validation/hardware-reference.json";
    std::ifstream in(path);
    REQUIRE_MESSAGE(in.good(), "missing ", path);
    return nlohmann::json::parse(in);
  }();
  return j;
}

const nlohmann::json& ref_gpu(std::string_view name) {
  for (const auto& g : reference()["gpus"]) {
    if (g["name"].get<std::string>().rfind(name, 0) == 0) return g;
  }
  FAIL("no hardware-reference.json gpu named ", name);
  static const nlohmann::json none;
  return none;
}

double tflops(const GpuSpec& g, DType d) { return g.peak(d) / 1e12; }
double tflops(const GpuSpec& g, const char* dtype) {
  DType d{};
  REQUIRE(parse_enum(dtype, d));
  return tflops(g, d);
}
double GBps(const LinkSpec& l) { return l.bandwidth_Bps / 1e9; }
}  // namespace

TEST_CASE("hardware reference: H100 SXM5 96GB HBM2e peaks are the midpoint of torchtitan's SXM..NVL bracket") {
  const auto& r = ref_gpu("H100-SXM5-96GB-HBM2e");
  const auto& lo = r["peak_tflops_dense_bracket"]["low_H100_NVL"];
  const auto& hi = r["peak_tflops_dense_bracket"]["high_H100_SXM"];
  CHECK(lo["bf16"] == 835);  // H100 NVL datasheet, dense
  CHECK(lo["fp8"] == 1671);
  CHECK(hi["bf16"] == ref_gpu("H100-SXM5-80GB")["peak_tflops_dense"]["bf16"]);
  CHECK(hi["fp8"] == ref_gpu("H100-SXM5-80GB")["peak_tflops_dense"]["fp8"]);
  const GpuSpec& g = test::profiles().gpu("H100-SXM5-96GB-HBM2e", "test");
  for (const char* d : {"fp32", "tf32", "bf16", "fp8"}) {
    const double mid = (lo[d].get<double>() + hi[d].get<double>()) / 2;
    CHECK_MESSAGE(r["peak_tflops_dense"][d].get<double>() == doctest::Approx(mid).epsilon(0.001), d);
    CHECK_MESSAGE(tflops(g, d) == doctest::Approx(r["peak_tflops_dense"][d].get<double>()), d);
    // The source's bracket: the true peak is within +-8.5% of the midpoint.
    CHECK((hi[d].get<double>() - mid) / mid < 0.085);
  }
  // Six 16 GB HBM2e stacks at the H100 PCIe's per-stack rate (2.0 TB/s over five): 2.4 TB/s.
  CHECK(r["hbm_GB"] == 96);
  CHECK(r["hbm_bw_GBps"] == 2000 / 5 * 6);
  CHECK(g.hbm_bandwidth_Bps == doctest::Approx(2400e9));
  CHECK(r["tdp_W"] == 500);
  // Usable memory as the 80 GB profile's device total relates to its 80 GB.
  const GpuSpec& h80 = test::profiles().gpu("H100-SXM5-80GB", "test");
  CHECK(g.memory_bytes / 96.0 == doctest::Approx(h80.memory_bytes / 80.0).epsilon(1e-4));
  // Same die and kernels: the H100 SXM's calibrated efficiencies, not fitted.
  CHECK(g.gemm.peak_fraction == h80.gemm.peak_fraction);
  CHECK(g.gemm.attention_fraction == h80.gemm.attention_fraction);
  CHECK(g.hbm_efficiency == h80.hbm_efficiency);
  const ClusterSpec& c = test::profiles().cluster("grand-teton-h100", "test");
  CHECK(GBps(c.intra_node) == 450);  // NVLink4 900 GB/s bidirectional
  CHECK(GBps(c.inter_node) == 50);   // 400 Gb/s per GPU
  CHECK(c.gpus_per_node == 8);
}

TEST_CASE("hardware reference: H800 is the H100 SXM with 400 GB/s NVLink (DeepSeek-V3: 160 GB/s achieved, 50 GB/s IB)") {
  const auto& r = ref_gpu("H800-SXM5-80GB");
  const auto& h100 = ref_gpu("H100-SXM5-80GB");
  CHECK(r["peak_tflops_dense"]["bf16"] == 989.4);
  for (const char* d : {"tf32", "bf16", "fp16", "fp8"}) CHECK_MESSAGE(r["peak_tflops_dense"][d] == h100["peak_tflops_dense"][d], d);
  CHECK(r["hbm_bw_GBps"] == 3350);
  CHECK(r["nvlink_GBps_total"] == 400);
  const GpuSpec& g = test::profiles().gpu("H800", "test");
  CHECK(tflops(g, DType::bf16) == doctest::Approx(989.4));
  CHECK(tflops(g, DType::fp8) == doctest::Approx(1978.9));
  CHECK(g.hbm_bandwidth_Bps == doctest::Approx(3350e9));
  const ClusterSpec& c = test::profiles().cluster("dgx-h800", "test");
  CHECK(GBps(c.intra_node) == r["nvlink_GBps_per_direction"].get<double>());
  CHECK(c.intra_node.effective_Bps() / 1e9 == doctest::Approx(160).epsilon(0.03));  // DeepSeek-V3 Sec. 3.2.2
  CHECK(GBps(c.inter_node) == 50);
}

TEST_CASE("hardware reference: AMD Instinct MI300X data sheet figures") {
  const auto& r = ref_gpu("AMD Instinct MI300X");
  CHECK(r["peak_tflops_dense"]["bf16"] == 1307.4);
  CHECK(r["peak_tflops_dense"]["fp8"] == 2614.9);
  CHECK(r["peak_tflops_dense"]["fp32_matrix"] == 163.4);
  CHECK(r["hbm_bw_GBps"] == 5300);
  CHECK(r["tdp_W"] == 750);
  const GpuSpec& g = test::profiles().gpu("MI300X", "test");
  for (const char* d : {"tf32", "bf16", "fp16", "fp8"}) {
    CHECK_MESSAGE(tflops(g, d) == doctest::Approx(r["peak_tflops_dense"][d].get<double>()), d);
  }
  CHECK(g.hbm_bandwidth_Bps == doctest::Approx(5300e9));
  CHECK(g.gemm.sm_count == 304);  // compute units
  // No fit of its own (one source family's runs): the GEMM fraction is the prior the modern architectures' fits give,
  // the mean of the Hopper and Blackwell training-step values (profiles/gpus/MI300X.json's source).
  const double hopper = test::profiles().gpu("H100", "t").gemm.peak_fraction;
  const double blackwell = test::profiles().gpu("B200", "t").gemm.peak_fraction;
  CHECK(g.gemm.peak_fraction == doctest::Approx((hopper + blackwell) / 2).epsilon(1e-3));
  CHECK(g.memory_bytes / 192.0 == doctest::Approx(test::profiles().gpu("H100", "t").memory_bytes / 80.0).epsilon(1e-4));
  // 7 Infinity Fabric links of 128 GB/s bidirectional: 448 GB/s per direction to all peers together.
  CHECK(r["infinity_fabric_links"].get<int>() * r["infinity_fabric_GBps_per_link_total"].get<double>() ==
        r["infinity_fabric_GBps_total"].get<double>());
  const ClusterSpec& c = test::profiles().cluster("mi300x-oam", "test");
  CHECK(GBps(c.intra_node) == r["infinity_fabric_GBps_total"].get<double>() / 2);
  CHECK(c.intra_node.nvls_efficiency == 0);  // no in-switch reduction
  CHECK(GBps(c.host_link) == 64);            // PCIe Gen5 x16
}

TEST_CASE("hardware reference: B300 (HGX B300) per-GPU dense figures from the 8-GPU sparse datasheet") {
  const auto& r = ref_gpu("B300");
  const auto& hgx = r["peak_tflops_sparse_hgx_8gpu_PF"];
  CHECK(hgx["bf16"] == 36);
  CHECK(hgx["fp8"] == 72);
  for (const char* d : {"bf16", "fp8"}) {
    CHECK_MESSAGE(r["peak_tflops_dense"][d].get<double>() == doctest::Approx(hgx[d].get<double>() * 1000 / 8 / 2), d);
  }
  CHECK(r["hbm_GB"] == 288);
  CHECK(r["hbm_bw_GBps"] == 8000);
  const GpuSpec& g = test::profiles().gpu("B300", "test");
  CHECK(tflops(g, DType::bf16) == doctest::Approx(2250));
  CHECK(tflops(g, DType::fp8) == doctest::Approx(4500));
  CHECK(g.hbm_bandwidth_Bps == doctest::Approx(8000e9));
  // Usable memory as the B200 profile's device total relates to its 192 GB of HBM3e.
  CHECK(g.memory_bytes / 288.0 == doctest::Approx(test::profiles().gpu("B200", "t").memory_bytes / 192.0).epsilon(1e-4));
  const ClusterSpec& c = test::profiles().cluster("dgx-b300", "test");
  CHECK(GBps(c.intra_node) == r["nvlink_GBps_per_direction"].get<double>());
  CHECK(GBps(c.inter_node) == 100);  // ConnectX-8, 800 Gb/s per GPU
}
