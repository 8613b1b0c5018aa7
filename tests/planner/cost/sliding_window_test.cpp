// Tests for sliding-window attention (ModelSpec::sliding_window, sliding_window_pattern): the pair count pinned to the
// Mistral 7B paper, the FLOPs and kernel time that follow it, the layer kinds per pipeline stage, and the profiles
// that use it (mistral-7b, gpt-oss-120b, gpt-oss-20b) against their published parameter counts.
#include <doctest/doctest.h>

#include <cmath>

#include "planner/cost/cost_model.hpp"
#include "planner/cost/flops.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/spec/config.hpp"
#include "planner/spec/json_reader.hpp"
#include "planner/spec/spec_json.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
// mistral-7b on one DGX H100, tp 8, one sequence of s tokens, flash attention.
Plan mistral_plan(int64_t s) {
  Plan p;
  p.model = test::profiles().model("mistral-7b", "test");
  p.gpu = test::profiles().gpu("h100", "test");
  p.cluster = test::profiles().cluster("dgx-h100", "test");
  p.num_gpus = 8;
  p.parallel.tp = 8;
  p.parallel.dp = 1;
  p.parallel.pp = 1;
  p.parallel.micro_batch = 1;
  p.parallel.num_microbatches = 1;
  p.training.global_batch = 1;
  p.training.seq_len = s;
  return p;
}

// gpt-oss-20b (24 layers, window on even layers, full on odd) on 8 GPUs of a DGX H100: pp p, dp 8 / p, ep 1.
Plan gpt_oss_plan(int64_t p) {
  Plan plan = mistral_plan(4096);
  plan.model = test::profiles().model("gpt-oss-20b", "test");
  plan.parallel.tp = 1;
  plan.parallel.pp = p;
  plan.parallel.dp = 8 / p;
  plan.parallel.num_microbatches = 2 * p;
  plan.training.global_batch = plan.parallel.dp * plan.parallel.num_microbatches;
  return plan;
}
}  // namespace

// Jiang et al. 2023 (Mistral 7B, arXiv:2310.06825) Sec. 2: with W = 4096 each token attends at most W tokens; at a
// sequence of 16K the paper reports "a 2x speed improvement over a vanilla attention baseline" (a measured kernel
// speedup with FlashAttention and xFormers). The FLOP ratio it rests on is pinned here: full causal attention scores
// s(s+1)/2 pairs, the window w s - w(w-1)/2, 2.286x fewer.
TEST_CASE("sliding window: the pair count at 16K tokens with W = 4096 is Mistral 7B's, 2.29x below full causal") {
  const int64_t s = 16384, w = 4096;
  double brute = 0;
  for (int64_t q = 0; q < s; ++q) brute += static_cast<double>(std::min(q + 1, w));
  const double closed = static_cast<double>(w) * s - static_cast<double>(w) * (w - 1) / 2.0;
  CHECK(causal_attention_pairs(s, w) == brute);
  CHECK(causal_attention_pairs(s, w) == closed);
  CHECK(causal_attention_pairs(s, 0) == static_cast<double>(s) * (s + 1) / 2.0);
  CHECK(1.0 / window_pair_fraction(s, w) == doctest::Approx(2.2858).epsilon(1e-4));
  // Within the window the mask is the causal one.
  CHECK(window_pair_fraction(4096, 4096) == 1.0);
  CHECK(window_pair_fraction(100, 4096) == 1.0);
  CHECK(causal_attention_pairs(5, 2) == 1 + 2 + 2 + 2 + 2);
}

TEST_CASE("sliding window: the attention core's FLOPs scale by the kept pairs, the rest of the layer does not") {
  ModelSpec full = test::profiles().model("mistral-7b", "test");
  full.sliding_window = 0;
  const ModelSpec& windowed = test::profiles().model("mistral-7b", "test");
  for (bool causal : {true, false}) {
    const LayerFlops a = layer_forward_flops(full, 2, 16384, causal), b = layer_forward_flops(windowed, 2, 16384, causal);
    CHECK(b.scores == doctest::Approx(a.scores * window_pair_fraction(16384, 4096)).epsilon(1e-12));
    CHECK(b.context == doctest::Approx(a.context * window_pair_fraction(16384, 4096)).epsilon(1e-12));
    CHECK(b.qkv == a.qkv);
    CHECK(b.mlp == a.mlp);
  }
  // Model FLOPs (MFU's numerator) count the window; at the profile's 8192 tokens too (w(w+1)/2 + (s - w) w pairs).
  CHECK(model_flops_per_step(windowed, 1, 16384) < model_flops_per_step(full, 1, 16384));
  CHECK(model_flops_per_step(windowed, 1, 4096) == model_flops_per_step(full, 1, 4096));
}

TEST_CASE("sliding window: pattern 2 counts half the layers windowed in model, recompute and MTP FLOPs") {
  const ModelSpec& mixed = test::profiles().model("gpt-oss-20b", "test");
  ModelSpec all = mixed, none = mixed;
  all.sliding_window_pattern = 0;  // every layer windowed
  none.sliding_window = none.sliding_window_pattern = 0;
  REQUIRE(mixed.layers % 2 == 0);
  CHECK(mixed.full_attention_layers_before(mixed.layers) == mixed.layers / 2);
  const auto mid = [](double a, double b) { return (a + b) / 2.0; };
  CHECK(model_flops_per_step(mixed, 4, 8192) ==
        doctest::Approx(mid(model_flops_per_step(all, 4, 8192), model_flops_per_step(none, 4, 8192))).epsilon(1e-12));
  CHECK(model_flops_per_step(all, 4, 8192) < model_flops_per_step(none, 4, 8192));
  for (Recompute r : {Recompute::selective, Recompute::full}) {
    CAPTURE(to_string(r));
    CHECK(hardware_flops_per_step(mixed, 4, 8192, r) ==
          doctest::Approx(mid(hardware_flops_per_step(all, 4, 8192, r), hardware_flops_per_step(none, 4, 8192, r)))
              .epsilon(1e-12));
  }
  // Full recompute of some layers: the recomputed layers' own kinds (here one windowed, layer 0).
  const double one_windowed = partial_recompute_flops(mixed, 4, 8192, 1, 0, FullAttentionLayers{0, 0});
  const double one_full = partial_recompute_flops(mixed, 4, 8192, 1, 0, FullAttentionLayers{1, 0});
  CHECK(one_windowed == doctest::Approx(layer_forward_flops(attention_layer_model(mixed, false), 4, 8192, false).total()));
  CHECK(one_full == doctest::Approx(layer_forward_flops(none, 4, 8192, false).total()));
  // An MTP block is of the last layer's kind: layer 23 attends in full.
  ModelSpec mtp = mixed;
  mtp.mtp_layers = 1;
  CHECK(mtp_block_model(mtp).sliding_window == 0);
  mtp.layers = 23;  // the last layer, 22, is windowed
  CHECK(mtp_block_model(mtp).every_layer_windowed());
}

TEST_CASE("sliding window: mistral-7b at 16K tokens spends 2.29x less attention kernel time than without it") {
  Plan windowed = mistral_plan(16384);
  Plan full = windowed;
  full.model.sliding_window = 0;
  REQUIRE(validate(windowed).ok());
  const LayerCost a = layer_cost(full), b = layer_cost(windowed);
  const double launch = windowed.gpu.gemm.kernel_overhead_s;
  CHECK(b.attention_forward_s < a.attention_forward_s);
  CHECK((a.attention_forward_s - launch) / (b.attention_forward_s - launch) ==
        doctest::Approx(1.0 / window_pair_fraction(16384, 4096)).epsilon(1e-9));
  CHECK(b.backward_input_s < a.backward_input_s);
  CHECK(b.gemm_forward_s == a.gemm_forward_s);
  const Estimate ew = estimate(windowed), ef = estimate(full);
  CHECK(ew.time.step_s < ef.time.step_s);
  CHECK(ew.time.model_flops < ef.time.model_flops);
  // The unfused kernel materialises the s x s scores and masks them: no saving in time or memory.
  windowed.training.attention = full.training.attention = AttentionKernel::unfused;
  CHECK(layer_cost(windowed).attention_forward_s == layer_cost(full).attention_forward_s);
  CHECK(estimate(windowed).peak_memory_bytes == estimate(full).peak_memory_bytes);
}

TEST_CASE("sliding window: pipeline stages count their own full-attention layers (pattern 2)") {
  // pp 8: 3 layers a stage, layers 3i .. 3i + 2, the odd ones full: 1 on even stages, 2 on odd ones.
  Plan plan = gpt_oss_plan(8);
  REQUIRE(validate(plan).ok());
  int64_t total = 0;
  for (int64_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(stage_full_attention_layers(plan, i).layers == (i % 2 == 0 ? 1 : 2));
    total += stage_full_attention_layers(plan, i).layers;
  }
  CHECK(total == 12);
  // Each stage's mean layer: the full-attention layers cost more attention time, so odd stages more.
  const LayerCosts lcs = layer_costs(plan);
  CHECK(lcs.full.attention_forward_s > lcs.layer.attention_forward_s);
  const LayerCost s0 = stage_layer_cost(plan, 0, lcs), s1 = stage_layer_cost(plan, 1, lcs);
  CHECK(s0.attention_forward_s == doctest::Approx((2 * lcs.layer.attention_forward_s + lcs.full.attention_forward_s) / 3));
  CHECK(s1.attention_forward_s == doctest::Approx((lcs.layer.attention_forward_s + 2 * lcs.full.attention_forward_s) / 3));
  const Estimate e = estimate(plan);
  REQUIRE(e.stages.size() == 8);
  CHECK(e.stages[1].forward_s > e.stages[2].forward_s);  // middle stages, same layer count, one more full layer
  // Interleaved, 2 chunks of 3 on pp 4: stage i holds layers 3i .. 3i + 2 and 12 + 3i .. 14 + 3i.
  Plan inter = gpt_oss_plan(4);
  inter.parallel.schedule = Schedule::interleaved;
  inter.parallel.vpp = 2;
  REQUIRE(validate(inter).ok());
  for (int64_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(stage_full_attention_layers(inter, i).layers == (i % 2 == 0 ? 2 : 4));
  }
  // Full recompute of the first layer of each chunk: layers 3i and 12 + 3i, full when 3i is odd.
  Plan partial = gpt_oss_plan(8);
  partial.parallel.recompute = Recompute::full;
  partial.parallel.recompute_layers = 1;
  REQUIRE(validate(partial).ok());
  CHECK(stage_recomputed_layers(partial, 0).full.layers == 0);
  CHECK(stage_recomputed_layers(partial, 1).full.layers == 1);
  Plan every = partial;
  every.parallel.recompute_layers = 0;
  every.parallel.recompute = Recompute::full;
  partial.parallel.recompute_layers = 3;  // every layer of every chunk: the same as full recompute
  CHECK(estimate(partial).time.hardware_flops == doctest::Approx(estimate(every).time.hardware_flops).epsilon(1e-12));
  CHECK(estimate(partial).time.step_s == doctest::Approx(estimate(every).time.step_s).epsilon(1e-9));
}

// A dense model (no MoE) mixing windowed and full-attention layers: each layer at its own kind's cost. Pattern 2 on
// mistral-7b's 32 layers leaves 16 full; everything but attention is the same in both kinds, so the step, the stage
// times and the model FLOPs are the mean of the all-windowed and the full-attention model's, and MFU (their ratio)
// lies between those two models' MFUs.
TEST_CASE("sliding window: a dense model with pattern 2 prices its full-attention layers as full (mistral-7b)") {
  Plan mixed = mistral_plan(16384);
  mixed.parallel.num_microbatches = 8;
  mixed.training.global_batch = 8;
  mixed.model.sliding_window_pattern = 2;
  Plan all = mixed, none = mixed;
  all.model.sliding_window_pattern = 0;
  none.model.sliding_window = none.model.sliding_window_pattern = 0;
  REQUIRE(validate(mixed).ok());
  REQUIRE(stage_full_attention_layers(mixed, 0).layers == 16);
  const LayerCosts lcs = layer_costs(mixed);
  CHECK(lcs.full.attention_forward_s == layer_cost(none).attention_forward_s);
  CHECK(lcs.layer.attention_forward_s == layer_cost(all).attention_forward_s);
  const LayerCost stage = stage_layer_cost(mixed, 0, lcs);
  const double mean_attention = (lcs.layer.attention_forward_s + lcs.full.attention_forward_s) / 2.0;
  CHECK(stage.attention_forward_s == doctest::Approx(mean_attention).epsilon(1e-12));
  CHECK(stage.attention_forward_s > lcs.layer.attention_forward_s);
  CHECK(stage.attention_forward_s < lcs.full.attention_forward_s);
  const Estimate em = estimate(mixed), ea = estimate(all), en = estimate(none);
  const auto mid = [](double a, double b) { return (a + b) / 2.0; };
  CHECK(em.time.step_s > ea.time.step_s);
  CHECK(em.time.step_s < en.time.step_s);
  CHECK(em.time.step_s == doctest::Approx(mid(ea.time.step_s, en.time.step_s)).epsilon(1e-9));
  CHECK(em.stages[0].forward_s == doctest::Approx(mid(ea.stages[0].forward_s, en.stages[0].forward_s)).epsilon(1e-9));
  CHECK(em.time.model_flops == doctest::Approx(mid(ea.time.model_flops, en.time.model_flops)).epsilon(1e-12));
  CHECK(em.time.mfu > ea.time.mfu);
  CHECK(em.time.mfu < en.time.mfu);
  // Pipelined (pp 4, 8 layers a stage, 4 of them full): every stage's forward time the mean of the two models'.
  for (Plan* p : {&mixed, &all, &none}) {
    p->parallel.tp = 2;
    p->parallel.pp = 4;
  }
  REQUIRE(validate(mixed).ok());
  const Estimate pm = estimate(mixed), pa = estimate(all), pn = estimate(none);
  REQUIRE(pm.stages.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(pm.stages[i].forward_s == doctest::Approx(mid(pa.stages[i].forward_s, pn.stages[i].forward_s)).epsilon(1e-9));
  }
}

TEST_CASE("sliding window: context parallelism is refused as not modelled") {
  Plan plan = mistral_plan(16384);
  plan.parallel.tp = 4;
  plan.parallel.cp = 2;
  CHECK(validate(plan).has(Reject::cp_with_sliding_window));
  plan.model.sliding_window = 0;
  CHECK_FALSE(validate(plan).has(Reject::cp_with_sliding_window));
}

// Parameter counts against the published ones: Mistral 7B 7.24B (Hugging Face model card); gpt-oss (model card,
// arXiv:2508.10925, Table 1) 116.83B total / 5.13B active and 20.91B / 3.61B. The card's active count holds the
// unembedding but not the embedding (a lookup); parplan's active_params counts both, so the embedding is taken off.
TEST_CASE("sliding window profiles: parameter counts within 0.5% of the published ones") {
  const auto near = [](double ours, double published) { return std::fabs(ours / published - 1.0) < 0.005; };
  const ModelSpec& mistral = test::profiles().model("mistral-7b", "test");
  CHECK(near(static_cast<double>(total_params(mistral)), 7.24e9));
  const ModelSpec& big = test::profiles().model("gpt-oss-120b", "test");
  const ModelSpec& small = test::profiles().model("gpt-oss-20b", "test");
  CHECK(near(static_cast<double>(total_params(big)), 116.83e9));
  CHECK(near(static_cast<double>(total_params(small)), 20.91e9));
  const auto active = [](const ModelSpec& m) {
    return static_cast<double>(active_params(m) - count_params(m).embedding);
  };
  CHECK(near(active(big), 5.13e9));
  CHECK(near(active(small), 3.61e9));
  CHECK(big.head_dim() * big.heads == 4096);
  CHECK(big.full_attention_layers_before(big.layers) == 18);
  CHECK_FALSE(big.layer_full_attention(0));
  CHECK(big.layer_full_attention(1));
}

// The window fields are integers as every integer key of a model document is (JsonReader::get_int): an integral
// number written with a fraction (4096.0) reads as the integer, as "layers": 4.0 does; 4096.5 is refused. A pattern
// above the layer count (no layer full) is refused naming the key.
TEST_CASE("sliding window: the model document's window keys read integers as its other integer keys do") {
  const auto read = [](const std::string& text) {
    const nlohmann::json j = nlohmann::json::parse(text);
    JsonReader r(j, "m.json");
    return model_from_json(r);
  };
  const std::string head = R"({"kind": "model", "name": "m", "hidden": 256, "heads": 4, "ffn_hidden": 1024, )"
                           R"("vocab": 1000, "seq_len": 128, )";
  const ModelSpec a = read(head + R"("layers": 4.0, "sliding_window": 64.0, "sliding_window_pattern": 2.0})");
  CHECK(a.layers == 4);
  CHECK(a.sliding_window == 64);
  CHECK(a.sliding_window_pattern == 2);
  CHECK_THROWS_WITH_AS(read(head + R"("layers": 4, "sliding_window": 64.5})"),
                       doctest::Contains("/sliding_window: expected an integer"), InputError);
  CHECK_THROWS_WITH_AS(read(head + R"("layers": 4.5, "sliding_window": 64})"), doctest::Contains("/layers: expected an integer"),
                       InputError);
  CHECK_THROWS_WITH_AS(read(head + R"("layers": 4, "sliding_window": 64, "sliding_window_pattern": 5})"),
                       doctest::Contains("/sliding_window_pattern: 5 is above the model's 4 layers"), InputError);
  CHECK(read(head + R"("layers": 4, "sliding_window": 64, "sliding_window_pattern": 4})").full_attention_layers_before(4) == 1);
}
