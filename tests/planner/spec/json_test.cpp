// Tests for planner/json_reader, spec_json and profiles: strict parsing of every profile key, errors with paths.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <utility>

#include "planner/spec/error.hpp"
#include "planner/spec/profiles.hpp"
#include "planner/spec/spec_json.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
std::string error_of(const std::string& text) {
  try {
    validate_profile(text, "p.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
const char* kGpu = R"({"kind":"gpu","name":"X","peak_tflops":{"bf16":100},"memory_GiB":16,"hbm_bandwidth_GBps":900})";
const char* kCluster =
    R"({"kind":"cluster","name":"c","gpu":"X","gpus_per_node":4,"intra_node":{"bandwidth_GBps":100},"inter_node":{"bandwidth_GBps":10}})";
const char* kModel = R"({"kind":"model","name":"m","layers":2,"hidden":64,"heads":4,"ffn_hidden":256,"vocab":100,"seq_len":16})";
}  // namespace

TEST_CASE("all embedded profiles load and the required ones are present") {
  const ProfileSet& s = test::profiles();
  for (const char* g : {"A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H100-SXM5-96GB-HBM2e", "H200-141GB", "H800",
                        "B200", "B300", "MI300X"}) {
    CHECK_MESSAGE(s.find_gpu(g), g);
  }
  for (const char* c : {"dgx-a100", "dgx-h100", "grand-teton-h100", "dgx-h200", "dgx-h800", "dgx-b200", "dgx-b300",
                        "mi300x-oam"}) {
    CHECK_MESSAGE(s.find_cluster(c), c);
  }
  for (const char* m : {"gpt3-1.3b", "gpt3-6.7b", "gpt3-13b", "gpt3-175b", "megatron-530b", "megatron-1t", "bloom-176b",
                        "opt-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b",
                        "mixtral-8x7b"}) {
    CHECK_MESSAGE(s.find_model(m), m);
  }
  CHECK(s.find_gpu("H100")->name == "H100-SXM5-80GB");  // aliases, case-insensitive
  CHECK(s.find_cluster("default")->gpu == "H100-SXM5-80GB");
  CHECK(s.find_cluster("default")->inter_node.bandwidth_Bps == doctest::Approx(50e9));  // NDR 400 Gb/s per GPU
}

TEST_CASE("minimal profiles validate; units convert once") {
  CHECK(validate_profile(kGpu, "g") == "gpu");
  CHECK(validate_profile(kCluster, "c") == "cluster");
  CHECK(validate_profile(kModel, "m") == "model");
  ProfileSet s;
  s.add(kGpu, "g");
  CHECK(s.find_gpu("x")->memory_bytes == 16LL * 1024 * 1024 * 1024);
  CHECK(s.find_gpu("x")->peak(DType::bf16) == doctest::Approx(100e12));
  CHECK(s.find_gpu("x")->peak(DType::fp8) == 0.0);
}

TEST_CASE("strict parsing: unknown keys, wrong types, ranges and missing keys name the JSON path") {
  CHECK(error_of(R"({"kind":"gpu","name":"X","peak_tflops":{"bf16":100},"memory_GiB":16,"hbm_bandwidth_GBps":900,"colour":1})") ==
        "p.json: /colour: unknown key");
  CHECK(error_of(R"({"kind":"gpu","name":"X","peak_tflops":{"bf16":100,"int4":5},"memory_GiB":16,"hbm_bandwidth_GBps":900})") ==
        "p.json: /peak_tflops/int4: unknown key");
  CHECK(error_of(R"({"kind":"gpu","name":"X","peak_tflops":{"bf16":100},"memory_GiB":0,"hbm_bandwidth_GBps":900})")
            .find("/memory_GiB") != std::string::npos);
  CHECK(error_of(R"({"kind":"gpu","name":"X","peak_tflops":{"bf16":100},"memory_GiB":16,"hbm_bandwidth_GBps":0})")
            .find("/hbm_bandwidth_GBps") != std::string::npos);
  CHECK(error_of(R"({"kind":"gpu","name":"X","peak_tflops":{"bf16":100},"memory_GiB":"16","hbm_bandwidth_GBps":900})")
            .find("/memory_GiB: expected a number") != std::string::npos);
  CHECK(error_of(R"({"kind":"gpu","name":"X","peak_tflops":{"bf16":100},"memory_GiB":16,"hbm_bandwidth_GBps":900,"gemm":{"peak_fraction":2}})")
            .find("/gemm/peak_fraction") != std::string::npos);
  CHECK(error_of(R"({"kind":"gpu","name":"X","architecture":"","peak_tflops":{"bf16":100},"memory_GiB":16,"hbm_bandwidth_GBps":900})") ==
        "p.json: /architecture: expected 1 to 64 characters");
  CHECK(error_of(R"({"kind":"gpu","name":"X","architecture":7,"peak_tflops":{"bf16":100},"memory_GiB":16,"hbm_bandwidth_GBps":900})")
            .find("/architecture") != std::string::npos);
  CHECK(error_of(R"({"kind":"gpu","name":"X","peak_tflops":{"bf16":100},"memory_GiB":16,"hbm_bandwidth_GBps":900,"gemm":{"tiles":2}})") ==
        "p.json: /gemm/tiles: unknown key");
  CHECK(error_of(R"({"kind":"cluster","name":"c","gpu":"X","gpus_per_node":4,"intra_node":{"bandwidth_GBps":100}})") ==
        "p.json: /inter_node: missing required key");
  CHECK(error_of(R"({"kind":"cluster","name":"c","gpu":"X","gpus_per_node":4,"intra_node":{"bandwidth_GBps":100,"latency_us":-1},"inter_node":{"bandwidth_GBps":10}})")
            .find("/intra_node/latency_us") != std::string::npos);
  CHECK(error_of(R"({"kind":"model","name":"m","layers":2.5,"hidden":64,"heads":4,"ffn_hidden":256,"vocab":100,"seq_len":16})") ==
        "p.json: /layers: expected an integer");
  CHECK(error_of(R"({"kind":"model","name":"m","layers":2,"hidden":64,"heads":5,"ffn_hidden":256,"vocab":100,"seq_len":16})")
            .find("/heads") != std::string::npos);
  CHECK(error_of(R"({"kind":"model","name":"m","layers":2,"hidden":64,"heads":4,"kv_heads":3,"ffn_hidden":256,"vocab":100,"seq_len":16})")
            .find("/kv_heads") != std::string::npos);
  CHECK(error_of(R"({"kind":"model","name":"m","layers":2,"hidden":64,"heads":4,"ffn_hidden":256,"vocab":100,"seq_len":16,"ffn_type":"relu"})") ==
        "p.json: /ffn_type: unknown value 'relu'");
  CHECK(error_of(R"({"kind":"model","name":"m","layers":0,"hidden":64,"heads":4,"ffn_hidden":256,"vocab":100,"seq_len":16})")
            .find("/layers: 0 is out of range") != std::string::npos);
  CHECK(error_of(R"({"kind":"robot"})") == "p.json: /kind: unknown kind 'robot' (expected gpu, cluster or model)");
  CHECK(error_of("{\"kind\": ") == "p.json: malformed JSON at byte 10");
  CHECK(error_of("[1,2]") == "p.json: /: expected a JSON object");
}

TEST_CASE("a user profile with the same name overrides the embedded one") {
  ProfileSet s = ProfileSet::embedded();
  s.add(R"({"kind":"gpu","name":"H100-SXM5-80GB","peak_tflops":{"bf16":500},"memory_GiB":80,"hbm_bandwidth_GBps":3000})", "mine.json");
  CHECK(s.find_gpu("h100-sxm5-80gb")->peak(DType::bf16) == doctest::Approx(500e12));
}

namespace {
// validation/hardware-reference.json's entry named `name` in `list` ("gpus" or "nodes").
nlohmann::json reference_entry(const std::string& list, const std::string& name) {
  std::ifstream in(PARPLAN_SOURCE_DIR "/validation/hardware-reference.json");
  REQUIRE(in.good());
  const nlohmann::json ref = nlohmann::json::parse(in);
  for (const nlohmann::json& e : ref.at(list)) {
    if (e.at("name") == name) return e;
  }
  FAIL("no hardware-reference entry ", name);
  return {};
}
}  // namespace

// The Grace-Blackwell rack profiles against validation/hardware-reference.json (NVIDIA GB200 / GB300 NVL72 product
// pages and datasheets): dense peaks, HBM, NVLink per direction and the per-GPU NIC; 72 GPUs share NVLink, 4 a tray.
TEST_CASE("GB200 and GB300 NVL72 profiles carry the reference's figures") {
  const ProfileSet& s = test::profiles();
  for (const char* name : {"GB200", "GB300"}) {
    CAPTURE(name);
    const nlohmann::json ref = reference_entry("gpus", name);
    const GpuSpec* g = s.find_gpu(name);
    REQUIRE(g);
    for (const auto& [d, key] : {std::pair{DType::tf32, "tf32"}, std::pair{DType::bf16, "bf16"},
                                 std::pair{DType::fp16, "fp16"}, std::pair{DType::fp8, "fp8"}}) {
      CHECK(g->peak(d) == doctest::Approx(ref["peak_tflops_dense"][key].get<double>() * 1e12));
    }
    CHECK(g->peak(DType::bf16) == doctest::Approx(2500e12));  // 360 PF sparse per rack / 2 / 72
    CHECK(g->peak(DType::fp8) == doctest::Approx(5000e12));   // 720 PF sparse per rack / 2 / 72
    CHECK(g->hbm_bandwidth_Bps == doctest::Approx(ref["hbm_bw_GBps"].get<double>() * 1e9));
    CHECK(ref["nvlink_GBps_per_direction"].get<double>() == 900);
  }
  // HBM: the datasheet's 186 GB (13.4 TB / 72) and 288 GB, as the B200's 180 GB shows 179.06 GiB (of 192 GB stacks).
  CHECK(reference_entry("gpus", "GB200")["hbm_GB"].get<double>() == 186);
  CHECK(s.find_gpu("GB200")->memory_bytes == doctest::Approx(186.0 * 179.06 / 180.0 * 1024.0 * 1024.0 * 1024.0).epsilon(1e-4));
  CHECK(reference_entry("gpus", "GB300")["hbm_GB"].get<double>() == 288);
  CHECK(s.find_gpu("GB300")->memory_bytes == doctest::Approx(288.0 * 179.06 / 192.0 * 1024.0 * 1024.0 * 1024.0).epsilon(1e-4));

  const nlohmann::json rack = reference_entry("nodes", "GB200 NVL72 / GB300 NVL72 scale-out");
  for (const auto& [name, nic_GBps] : {std::pair{"gb200-nvl72", 50.0}, std::pair{"gb300-nvl72", 100.0}}) {
    CAPTURE(name);
    const ClusterSpec* c = s.find_cluster(name);
    REQUIRE(c);
    CHECK(c->gpus_per_node == rack["gpus_per_node"].get<int64_t>());
    CHECK(c->nvlink_domain() == rack["nvlink_domain_gpus"].get<int64_t>());
    CHECK(c->intra_node.bandwidth_Bps == doctest::Approx(900e9));
    CHECK(c->inter_node.bandwidth_Bps == doctest::Approx(nic_GBps * 1e9));  // ConnectX-7 400 / ConnectX-8 800 Gb/s
  }
  CHECK(s.find_cluster("gb200-nvl72")->gpu == "GB200");
  CHECK(s.find_cluster("gb300-nvl72")->gpu == "GB300");
  CHECK(s.find_cluster("dgx-b200")->nvlink_domain() == 8);  // unset: one domain per node
}

TEST_CASE("nvlink_domain_gpus: a multiple of gpus_per_node, named by its JSON path") {
  const std::string base = R"({"kind":"cluster","name":"c","gpu":"X","gpus_per_node":4,"intra_node":{"bandwidth_GBps":100},"inter_node":{"bandwidth_GBps":10})";
  CHECK(validate_profile(base + R"(,"nvlink_domain_gpus":72})", "c") == "cluster");
  CHECK(error_of(base + R"(,"nvlink_domain_gpus":70})") ==
        "p.json: /nvlink_domain_gpus: must be a multiple of gpus_per_node (4)");
  CHECK(error_of(base + R"(,"nvlink_domain_gpus":0})").find("/nvlink_domain_gpus") != std::string::npos);
  CHECK(error_of(base + R"(,"nvlink_domain_gpus":"72"})").find("/nvlink_domain_gpus: expected an integer") !=
        std::string::npos);
  // Written back only where it differs from the node.
  ProfileSet set;
  set.add(base + R"(,"nvlink_domain_gpus":72})", "c");
  CHECK(to_json(*set.find_cluster("c"))["nvlink_domain_gpus"] == 72);
  ProfileSet plain;
  plain.add(base + "}", "d");
  CHECK_FALSE(to_json(*plain.find_cluster("c")).contains("nvlink_domain_gpus"));
}
