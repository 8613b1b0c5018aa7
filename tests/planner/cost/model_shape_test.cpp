// Tests for planner/model_shape: parameter counts pinned to published model sizes; GPT shape inference.
#include <doctest/doctest.h>

#include <cmath>

#include "planner/spec/error.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

TEST_CASE("GPT-3 175B parameter count matches Narayanan et al. 2021 Sec. 5.1 formula and the published 174.6B") {
  const ModelSpec& m = test::profiles().model("gpt3-175b", "test");
  const double l = 96, h = 12288, V = 51200, s = 2048;
  // P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12lh)); parplan also counts the final LayerNorm (2h).
  const double narayanan = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
  CHECK(static_cast<double>(total_params(m)) == doctest::Approx(narayanan + 2 * h).epsilon(1e-12));
  CHECK(static_cast<double>(total_params(m)) / 1e9 == doctest::Approx(174.6).epsilon(0.001));
}

TEST_CASE("Llama and Mixtral parameter counts match their published sizes") {
  // Published: Llama-2 7B 6.74B, Llama-3 8B 8.03B, Llama-3 70B 70.6B, Llama-3 405B 405B (paper: 405B, config 405.9B),
  // Mixtral 8x7B 46.7B total / 12.9B active (Jiang et al. 2024).
  CHECK(total_params(test::profiles().model("llama2-7b", "t")) / 1e9 == doctest::Approx(6.74).epsilon(0.002));
  CHECK(total_params(test::profiles().model("llama3-8b", "t")) / 1e9 == doctest::Approx(8.03).epsilon(0.002));
  CHECK(total_params(test::profiles().model("llama3-70b", "t")) / 1e9 == doctest::Approx(70.6).epsilon(0.002));
  CHECK(total_params(test::profiles().model("llama3-405b", "t")) / 1e9 == doctest::Approx(405.0).epsilon(0.005));
  const ModelSpec& mix = test::profiles().model("mixtral-8x7b", "t");
  CHECK(total_params(mix) / 1e9 == doctest::Approx(46.7).epsilon(0.002));
  CHECK(active_params(mix) / 1e9 == doctest::Approx(12.9).epsilon(0.005));
}

TEST_CASE("MoE parameter counts with shared experts, leading dense layers, MLA and head_dim match published sizes") {
  // DeepSeek-V3 (arXiv:2412.19437 Sec. 4.2): 671B total, 37B activated; MLA, 1 shared + 256 routed, 3 dense layers.
  const ModelSpec& v3 = test::profiles().model("deepseek-v3", "t");
  CHECK(v3.is_mla());
  CHECK(total_params(v3) / 1e9 == doctest::Approx(671.0).epsilon(0.005));
  CHECK(active_params(v3) / 1e9 == doctest::Approx(37.0).epsilon(0.02));
  // DeepSeekMoE 16B (arXiv:2401.06066 Sec. 5.1): 16.4B total, 2.8B activated; 2 shared + 64 routed, 1 dense layer.
  const ModelSpec& ds16 = test::profiles().model("deepseek-moe-16b", "t");
  CHECK(total_params(ds16) / 1e9 == doctest::Approx(16.4).epsilon(0.005));
  CHECK(active_params(ds16) / 1e9 == doctest::Approx(2.8).epsilon(0.015));
  // Qwen3 (arXiv:2505.09388 Table 2): 235B / 22B and 30.5B / 3.3B, heads x head_dim (8192, 4096) wider than hidden.
  const ModelSpec& q235 = test::profiles().model("qwen3-235b-a22b", "t");
  CHECK(q235.q_dim() == 2 * q235.hidden);
  CHECK(total_params(q235) / 1e9 == doctest::Approx(235.0).epsilon(0.005));
  CHECK(active_params(q235) / 1e9 == doctest::Approx(22.0).epsilon(0.01));
  const ModelSpec& q30 = test::profiles().model("qwen3-30b-a3b", "t");
  CHECK(total_params(q30) / 1e9 == doctest::Approx(30.5).epsilon(0.005));
  CHECK(active_params(q30) / 1e9 == doctest::Approx(3.3).epsilon(0.02));
  // Mixtral 8x22B (release): 141B total, 39B active.
  const ModelSpec& m22 = test::profiles().model("mixtral-8x22b", "t");
  CHECK(total_params(m22) / 1e9 == doctest::Approx(141.0).epsilon(0.005));
  CHECK(active_params(m22) / 1e9 == doctest::Approx(39.0).epsilon(0.01));
}

TEST_CASE("A MoE model's parts add up term by term (DeepSeekMoE 16B by hand)") {
  const ModelSpec& m = test::profiles().model("deepseek-moe-16b", "t");
  const ParamCounts c = count_params(m);
  const int64_t h = 2048;
  CHECK(c.attention == 4 * h * h);                 // MHA, no biases
  CHECK(c.mlp_per_expert == 3 * h * 1408);         // SwiGLU expert
  CHECK(c.shared_mlp == 2 * c.mlp_per_expert);     // 2 shared experts of the routed width
  CHECK(c.dense_mlp == 3 * h * 10944);             // the first layer's dense MLP
  CHECK(c.router == 64 * h);
  const int64_t layers = 28 * (c.attention + c.norms) + c.dense_mlp + 27 * (c.router + c.shared_mlp + 64 * c.mlp_per_expert);
  CHECK(total_params(m) == layers + 2 * 102400 * h + c.final_norm);
  const int64_t active = 28 * (c.attention + c.norms) + c.dense_mlp + 27 * (c.router + c.shared_mlp + 6 * c.mlp_per_expert);
  CHECK(active_params(m) == active + 2 * 102400 * h + c.final_norm);
}

TEST_CASE("infer_gpt_shape reproduces GPT-3 175B and scales monotonically") {
  ModelSpec m = infer_gpt_shape(175e9);
  CHECK(m.layers == 96);
  CHECK(m.hidden == 12288);
  CHECK(m.heads == 96);
  CHECK(m.ffn_hidden == 4 * 12288);
  CHECK(std::fabs(static_cast<double>(total_params(m)) - 175e9) / 175e9 < 0.01);
  ModelSpec t = infer_gpt_shape(1e12);
  CHECK(t.layers > m.layers);
  CHECK(t.hidden > m.hidden);
  CHECK(std::fabs(static_cast<double>(total_params(t)) - 1e12) / 1e12 < 0.02);
  CHECK(t.hidden % t.heads == 0);
  CHECK_THROWS_AS(infer_gpt_shape(1e30), InputError);
  CHECK_THROWS_AS(infer_gpt_shape(-5), InputError);
  // GPT-3 family sizes (Brown et al. 2020, Table 2.1): 1.3B is 24 x 2048, 13B is 40 x 5120.
  CHECK(infer_gpt_shape(1.3e9).layers == 24);
  CHECK(infer_gpt_shape(1.3e9).hidden == 2048);
  CHECK(infer_gpt_shape(13e9).layers == 40);
  CHECK(infer_gpt_shape(13e9).hidden == 5120);
}

TEST_CASE("infer_gpt_shape: from 16 heads up the head count splits over a node's 8 GPUs; the total stays near N") {
  // 70e9 used to give 71 heads (prime: tp 1 only). Log-spaced sizes from 1e9 to 1e14.
  int n = 0;
  for (double p = 1e9; p <= 1e14 * 1.0001; p *= std::pow(10.0, 0.05), ++n) {
    CAPTURE(p);
    const ModelSpec m = infer_gpt_shape(p);
    CHECK(m.hidden == 128 * m.heads);
    if (m.heads >= 16) CHECK(m.heads % 8 == 0);
    CHECK(m.layers >= 2);
    // Hidden steps of 1024 leave the layer count to absorb the rest: within half a layer's parameters of N.
    const double layer = 12.0 * static_cast<double>(m.hidden) * static_cast<double>(m.hidden);
    CHECK(std::fabs(static_cast<double>(total_params(m)) - p) <= 0.5 * layer + 13.0 * static_cast<double>(m.hidden));
  }
  CHECK(n == 101);
  const ModelSpec s = infer_gpt_shape(70e9);
  CHECK(s.heads == 72);
  CHECK(s.layers == 68);
}
