// Tests for the MoE layer kinds and attention widths in the cost model: shared experts, leading dense layers
// (stage_dense_layers, dense_layer_plan, mean_layer_cost), multi-head latent attention and head_dim.
#include <doctest/doctest.h>

#include <cmath>

#include "planner/cost/activations.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/flops.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/spec/config.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
// DeepSeekMoE 16B (1 dense layer, 2 shared + 64 routed experts, top-6) on 16 H100s: tp 1, pp 2, dp 8, ep 8.
Plan deepseek_moe_16b(int64_t pp, int64_t vpp = 1) {
  Plan p;
  p.model = test::profiles().model("deepseek-moe-16b", "test");
  p.gpu = test::profiles().gpu("h100", "test");
  p.cluster = test::profiles().cluster("dgx-h100", "test");
  p.parallel.pp = pp;
  p.parallel.dp = 8;
  p.parallel.ep = 8;
  p.parallel.vpp = vpp;
  p.parallel.schedule = vpp > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
  p.parallel.micro_batch = 1;
  p.parallel.num_microbatches = 8;
  p.parallel.recompute = Recompute::selective;
  p.num_gpus = 8 * pp;
  p.training.global_batch = 64;
  p.training.seq_len = 4096;
  return p;
}
double d(int64_t x) { return static_cast<double>(x); }
}  // namespace

TEST_CASE("stage_dense_layers: a MoE model's leading dense layers in model order over the stages' chunks") {
  Plan p = deepseek_moe_16b(2);
  REQUIRE(validate(p).ok());
  CHECK(stage_dense_layers(p, 0) == 1);
  CHECK(stage_dense_layers(p, 1) == 0);
  // 8 layers, 3 dense, pp 2, vpp 2: chunks of 2 in the order s0c0 (layers 0-1), s1c0 (2-3), s0c1, s1c1.
  p.model.layers = 8;
  p.model.dense_layers = 3;
  p.parallel.vpp = 2;
  p.parallel.schedule = Schedule::interleaved;
  CHECK(stage_dense_layers(p, 0) == 2);
  CHECK(stage_dense_layers(p, 1) == 1);
  p.model.experts = 1;  // a dense model has no leading dense layers of its own
  p.model.dense_layers = 0;
  CHECK(stage_dense_layers(p, 0) == 0);
}

TEST_CASE("Leading dense layers: the stage holding them counts their parameters and times, the others the MoE layer") {
  const Plan p = deepseek_moe_16b(2);
  REQUIRE(validate(p).ok());
  const Estimate e = estimate(p);
  const Plan dense_plan = dense_layer_plan(p);
  CHECK(dense_plan.model.experts == 1);
  CHECK(dense_plan.model.ffn_hidden == 10944);
  const LayerCost dense = layer_cost(dense_plan), moe = layer_cost(p);
  CHECK(e.dense_layer.forward_s == doctest::Approx(dense.forward_s).epsilon(1e-12));
  // Stage 0: 14 layers, 1 dense; stage 1: 14 MoE layers. Its forward = the sum over its layers (+ the embedding).
  REQUIRE(stage_layers(p, 0) == 14);
  const double layers0 = 13.0 * moe.forward_s + dense.forward_s;
  CHECK(e.stages[0].forward_s == doctest::Approx(layers0 + e.edge.embedding_forward_s).epsilon(1e-9));
  CHECK(e.stages[1].forward_s == doctest::Approx(14.0 * moe.forward_s + e.edge.output_forward_s).epsilon(1e-9));
  // Parameters: the dense layer's MLP (10944 wide) in place of the local experts, shared experts and router.
  const ParamCounts c = count_params(p.model);
  const double moe_layer = d(c.attention + c.norms + c.router + c.shared_mlp) + d(c.mlp_per_expert) * 8.0;
  const double dense_layer = d(c.attention + c.norms + c.dense_mlp);
  CHECK(stage_params(p, 0) == doctest::Approx(13.0 * moe_layer + dense_layer + c.embedding_per_tp_rank(1)).epsilon(1e-12));
  CHECK(stage_expert_params(p, 0, c) == doctest::Approx(13.0 * 8.0 * d(c.mlp_per_expert)).epsilon(1e-12));
  // mean_layer_cost weighs the two kinds by their counts; no dense layers, the MoE layer as it is.
  const LayerCost mean = mean_layer_cost(moe, dense, 14, 1);
  CHECK(mean.backward_weight_s == doctest::Approx((13.0 * moe.backward_weight_s + dense.backward_weight_s) / 14.0));
  CHECK(mean_layer_cost(moe, dense, 14, 0).forward_s == moe.forward_s);
}

TEST_CASE("Shared experts run on every token: FLOPs, GEMM time and activations grow with top_k + shared") {
  Plan p = deepseek_moe_16b(1);
  p.model.dense_layers = 0;
  p.model.dense_ffn_hidden = 0;
  p.parallel.dp = 8;
  p.parallel.pp = 1;
  p.num_gpus = 8;
  REQUIRE(validate(p).ok());
  Plan none = p;
  none.model.shared_experts = 0;
  const LayerFlops with = layer_forward_flops(p.model, 1, 4096, true), without = layer_forward_flops(none.model, 1, 4096, true);
  // 6 routed + 2 shared SwiGLU experts of 1408: 2 x 3 x s h f x 8 against x 6.
  CHECK(with.mlp == doctest::Approx(without.mlp * 8.0 / 6.0).epsilon(1e-12));
  CHECK(with.mlp == doctest::Approx(2.0 * 3.0 * 4096.0 * 2048.0 * 1408.0 * 8.0).epsilon(1e-12));
  CHECK(layer_cost(p).gemm_forward_s > layer_cost(none).gemm_forward_s);
  ActivationShape a;
  a.seq = 4096;
  a.attention = AttentionKernel::flash;
  const double extra = layer_activation_bytes(p.model, a).tp_sharded - layer_activation_bytes(none.model, a).tp_sharded;
  CHECK(extra == doctest::Approx(4096.0 * 2048.0 * 2.0 * 3.0 * 1408.0 / 2048.0 * 2.0).epsilon(1e-12));  // 2 x SwiGLU's 3f
  // Their weights split over tp like a dense MLP and stay whole over ep.
  CHECK(plan_param_counts(p).layer_params - plan_param_counts(none).layer_params ==
        doctest::Approx(d(count_params(p.model).shared_mlp)).epsilon(1e-12));
}

TEST_CASE("MLA (DeepSeek-V3): latent down-projections whole on every tp rank, heads split; attention at nope + rope") {
  const ModelSpec& m = test::profiles().model("deepseek-v3", "test");
  const ParamCounts c = count_params(m);
  // Sec. 4.2: q 7168 -> 1536 -> 128 x 192; kv 7168 -> 512 + 64 -> 128 x (128 + 128); out 128 x 128 -> 7168.
  CHECK(c.qkv_replicated == 7168 * 1536 + 1536 + 7168 * (512 + 64) + 512);
  CHECK(c.qkv == c.qkv_replicated + 1536 * 128 * 192 + 512 * 128 * 256);
  CHECK(c.attn_out == 128 * 128 * 7168);
  const LayerFlops f = layer_forward_flops(m, 1, 4096, false);
  CHECK(f.scores == doctest::Approx(2.0 * 4096.0 * 4096.0 * 128.0 * 192.0).epsilon(1e-12));
  CHECK(f.context == doctest::Approx(2.0 * 4096.0 * 4096.0 * 128.0 * 128.0).epsilon(1e-12));
  CHECK(f.qkv == doctest::Approx(2.0 * 4096.0 * d(c.qkv - 1536 - 512)).epsilon(1e-12));  // weights, not the norms
  // On tp 8 the up-projections and the output split, the down-projections do not.
  Plan p;
  p.model = m;
  p.gpu = test::profiles().gpu("h100", "test");
  p.cluster = test::profiles().cluster("dgx-h100", "test");
  p.parallel.tp = 8;
  p.parallel.sequence_parallel = true;
  p.parallel.ep = 8;
  p.parallel.etp = 1;
  p.parallel.dp = 8;
  p.parallel.pp = 1;
  p.num_gpus = 64;
  p.parallel.num_microbatches = 1;
  p.training.global_batch = 8;
  const PlanParamCounts pc = plan_param_counts(p);
  const double attention = d(c.attention - c.qkv_replicated) / 8.0 + d(c.qkv_replicated);
  const double experts = d(c.mlp_per_expert) * 256.0 / 8.0;  // etp 1: each local expert whole
  CHECK(pc.layer_params == doctest::Approx(attention + d(c.norms + c.router) + d(c.shared_mlp) / 8.0 + experts).epsilon(1e-12));
}

TEST_CASE("head_dim wider than hidden / heads (Qwen3-30B-A3B): Q and the out-projection at heads x head_dim") {
  const ModelSpec& m = test::profiles().model("qwen3-30b-a3b", "test");
  REQUIRE(m.head_dim() == 128);
  const ParamCounts c = count_params(m);
  CHECK(c.qkv == 2048 * (32 * 128 + 2 * 4 * 128));
  CHECK(c.attn_out == 32 * 128 * 2048);
  ModelSpec narrow = m;  // as the model was read before head_dim: 64-wide heads
  narrow.head_dim_override = 0;
  const LayerFlops wide = layer_forward_flops(m, 1, 4096, true), thin = layer_forward_flops(narrow, 1, 4096, true);
  CHECK(wide.attention_core() == doctest::Approx(2.0 * thin.attention_core()).epsilon(1e-12));
  CHECK(wide.attn_out == doctest::Approx(2.0 * thin.attn_out).epsilon(1e-12));
}
