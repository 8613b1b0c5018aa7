// A whole training step as torchtitan runs it, measured on one GPU by bench/gpu/step.py (Llama 3 8B's shapes with 4
// layers and the whole vocabulary, 8192 tokens; bench/gpu/results/h100-2026-11-26b and h200-2026-11-26c), against
// the terms of the cost model it tests: FSDP2's copies (zero3.hpp fsdp2_copy_bytes), the eager cross entropy's
// bytes (cost_model.hpp EdgeBytes) and clip_grad_norm_'s unconditional scale (model_states.hpp optimizer_step_bytes).
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/cost/cost_model.hpp"
#include "planner/cost/gemm.hpp"
#include "planner/cost/layout.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/cost/zero3.hpp"
#include "planner/spec/config.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
nlohmann::json step_run(const std::string& dir) {
  std::ifstream in(std::string(PARPLAN_SOURCE_DIR) + "/bench/gpu/results/" + dir + "/step.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// The measured step variant: eager, 4 layers, batch 1; FSDP2-wrapped or with unsharded bf16 parameters.
const nlohmann::json& variant(const nlohmann::json& run, bool fsdp2) {
  for (const auto& s : run["steps"]) {
    if (s["layers"] == 4 && s["b"] == 1 && s["compiled"] == false && (s["wrapping"] == "fsdp2") == fsdp2) return s;
  }
  FAIL("no such step variant");
  return run;
}

double forward_backward_ms(const nlohmann::json& s) {
  return s["gpu_ms"]["forward_loss"].get<double>() + s["gpu_ms"]["backward"].get<double>();
}

// bench/gpu/step.py's model on one GPU as torchtitan's FSDP2 runs it: fp32 reduction, PyTorch's cross entropy on
// fp32 logits, uncompiled element-wise ops, the default SDPA backend (cuDNN: the profiles' flash).
Plan one_rank_step(const char* gpu, bool fsdp2) {
  Plan p;
  p.model = test::profiles().model("llama3-8b", "t");
  p.model.layers = 4;
  p.gpu = test::profiles().gpu(gpu, "t");
  p.cluster = test::profiles().cluster(std::string(gpu) == "h100" ? "dgx-h100" : "dgx-h200", "t");
  p.num_gpus = 1;
  p.parallel.zero_stage = 3;
  p.parallel.fsdp2 = fsdp2;
  p.training.precision = Precision::bf16;
  p.training.grad_fp32 = true;
  p.training.fused_cross_entropy = false;
  p.training.compiled_elementwise = false;
  p.training.global_batch = 1;
  p.training.seq_len = 8192;
  REQUIRE(validate(p).ok());
  return p;
}

double forward_backward_s(const Estimate& e) {
  const StageTime& s = e.stages.at(0);
  return s.forward_s + s.backward_input_s + s.backward_weight_s;
}
}  // namespace

TEST_CASE("FSDP2's copies: bytes per parameter as fully_shard moves them") {
  Plan p = one_rank_step("h100", true);
  // One rank: the copy-in reads the fp32 shard and writes it in bf16 (6), the copy-out reads and writes the gathered
  // bf16 (4); the reduce-scatter's copy-in reads the bf16 gradient and writes it in fp32 (6).
  CHECK(fsdp2_copy_bytes(p).gather == doctest::Approx(10.0));
  CHECK(fsdp2_copy_bytes(p).reduce == doctest::Approx(6.0));
  p.parallel.dp = 8;  // the shard is an eighth: only the copy-in shrinks
  p.num_gpus = 8;
  CHECK(fsdp2_copy_bytes(p).gather == doctest::Approx(6.0 / 8.0 + 4.0));
  p.training.grad_fp32 = false;  // bf16 reduction: the gradients are copied, not widened
  CHECK(fsdp2_copy_bytes(p).reduce == doctest::Approx(4.0));
  p.parallel.fsdp2 = false;
  CHECK(fsdp2_copy_bytes(p).gather == 0.0);
  CHECK(fsdp2_copy_bytes(p).reduce == 0.0);
  p.parallel.fsdp2 = true;
  p.parallel.zero_stage = 2;
  CHECK(validate(p).has(Reject::fsdp2_invalid));
  p.parallel.zero_stage = 3;
  p.parallel.zero3_gather_unit = Zero3GatherUnit::linear;
  CHECK(validate(p).has(Reject::fsdp2_invalid));
}

TEST_CASE("FSDP2's copies against a one-rank FSDP2 step measured on an H100 and an H200") {
  // Measured: the FSDP2 step's forward and backward less the same step's with unsharded bf16 parameters (no FSDP),
  // less what only a one-rank reduce-scatter does: NCCL copies its fp32 input to the separate output (read and write
  // 4 bytes per parameter); a one-rank all-gather runs in place.
  for (const auto& [gpu, dir] : {std::pair{"h100", "h100-2026-11-26b"}, std::pair{"h200", "h200-2026-11-26c"}}) {
    CAPTURE(gpu);
    const nlohmann::json run = step_run(dir);
    const Plan with = one_rank_step(gpu, true), without = one_rank_step(gpu, false);
    const double params = static_cast<double>(total_params(with.model));
    REQUIRE(variant(run, true)["params"].get<double>() == params);
    const double one_rank_reduce_scatter_s = memory_bound_time_s(with.gpu, 8.0 * params);
    const double measured_s =
        (forward_backward_ms(variant(run, true)) - forward_backward_ms(variant(run, false))) / 1e3 - one_rank_reduce_scatter_s;
    const double modelled_s = forward_backward_s(estimate(with)) - forward_backward_s(estimate(without));
    // 4 layers x 26 bytes and the root's 1.05e9 parameters x 16 bytes at the profile's HBM rate: 13.5 ms (H100),
    // 10.3 ms (H200). The measured copies are 1.3x that: FSDP2's chunk_cat and per-parameter copies run below the
    // rate of one large copy (the H200 profile: casts 6.6 ms, chunk_cat 6.0 ms, device copies 7.9 ms).
    CHECK(modelled_s / measured_s > 0.70);
    CHECK(modelled_s / measured_s < 0.85);
  }
}

TEST_CASE("The eager cross entropy's bytes: what torchtitan's loss moves per logit") {
  Plan p = one_rank_step("h200", false);
  const double logits = 8192.0 * 128256.0;
  CHECK(edge_bytes(p).cross_entropy == doctest::Approx(22.0 * logits));
  CHECK(edge_bytes(p).cross_entropy_backward == doctest::Approx(26.0 * logits));
  p.training.fused_cross_entropy = true;
  CHECK(edge_bytes(p).cross_entropy == doctest::Approx(12.0 * logits));
  CHECK(edge_bytes(p).cross_entropy_backward == doctest::Approx(12.0 * logits));
  // log_softmax's kernels, 16 of those bytes each way, as the H200's profile of the step timed them: at the profile's
  // HBM rate they moved 14.5 and 15.6 bytes per logit.
  const nlohmann::json run = step_run("h200-2026-11-26c");
  double fwd_ms = 0, bwd_ms = 0;
  const nlohmann::json* profiled = nullptr;  // the FSDP2 step profiled after its timed steps
  for (const auto& st : run["steps"]) {
    if (st["wrapping"] == "fsdp2" && st.contains("kernels")) profiled = &st;
  }
  REQUIRE(profiled != nullptr);
  for (const auto& k : (*profiled)["kernels"]["top"]) {
    const std::string name = k["kernel"];
    if (name.find("cunn_SoftMaxForward") != std::string::npos) fwd_ms = k["ms"];
    if (name.find("cunn_SoftMaxBackward") != std::string::npos) bwd_ms = k["ms"];
  }
  const double rate = p.gpu.hbm_bandwidth_Bps * p.gpu.hbm_efficiency;
  CHECK(fwd_ms * 1e-3 * rate / logits == doctest::Approx(16.0).epsilon(0.12));
  CHECK(bwd_ms * 1e-3 * rate / logits == doctest::Approx(16.0).epsilon(0.12));
}

TEST_CASE("The output layer and loss of a one-GPU step against the measured head on an H100") {
  // bench/gpu/step.py's head: final norm, output GEMM and F.cross_entropy on fp32 logits, forward and backward, and
  // the embedding's forward and backward, alone (8192 tokens, vocab 128256). The model's: 53.8 ms (45.2 before the eager
  // cross entropy's bytes); measured 57.0 ms.
  const nlohmann::json run = step_run("h100-2026-11-26b");
  const double measured_s =
      (run["head"]["head_fwd_bwd_ms"].get<double>() + run["head"]["embedding_fwd_bwd_ms"].get<double>()) / 1e3;
  const EdgeCost e = edge_cost(one_rank_step("h100", false));
  const double modelled_s = e.output_forward_s + e.output_backward_s + e.embedding_forward_s + e.embedding_backward_s;
  CHECK(modelled_s == doctest::Approx(measured_s).epsilon(0.06));
}

TEST_CASE("PyTorch's clip_grad_norm_ scales every gradient: the clip of a one-rank FSDP2 step") {
  // The measured clip: torchtitan's clip_grad_norm_(1.0) over the 1.92e9 fp32 gradients (the norm's read, then
  // _foreach_mul_ by the clamped coefficient: a read and a write). The model's clip is the gradient bytes its Adam
  // step does not read: 12 per fp32 gradient (4 for the norm, 8 for the scale) with FSDP2, 4 without.
  for (const auto& [gpu, dir] : {std::pair{"h100", "h100-2026-11-26b"}, std::pair{"h200", "h200-2026-11-26c"}}) {
    CAPTURE(gpu);
    const Plan with = one_rank_step(gpu, true), megatron = one_rank_step(gpu, false);
    const double params = static_cast<double>(total_params(with.model));
    const OptimizerStepBytes b = stage_optimizer_step_bytes(with, params);
    CHECK(b.grads == doctest::Approx(16.0 * params));  // norm, scale (read + write), Adam: 4 x 4 bytes
    CHECK(stage_optimizer_step_bytes(megatron, params).grads == doctest::Approx(8.0 * params));
    const double measured_s = variant(step_run(dir), true)["gpu_ms"]["clip"].get<double>() / 1e3;
    const double modelled_s = memory_bound_time_s(with.gpu, 12.0 * params);
    // 7.9 ms against 8.9 (H100), 6.0 against 6.8 (H200): the foreach kernels' launches and the norm's reduction
    // are not priced; the norm alone (4 bytes) would be 2.6 and 2.0 ms.
    CHECK(modelled_s / measured_s > 0.80);
    CHECK(modelled_s / measured_s < 1.0);
    CHECK(memory_bound_time_s(with.gpu, 4.0 * params) / measured_s < 0.35);
  }
}

TEST_CASE("FSDP2's copies of a MoE layer: the experts' copy-in over their own shard group") {
  Plan p;
  p.model = test::profiles().model("mixtral-8x7b", "t");
  p.gpu = test::profiles().gpu("h100", "t");
  p.cluster = test::profiles().cluster("dgx-h100", "t");
  p.num_gpus = 16;
  p.parallel.dp = 16;
  p.parallel.ep = 8;
  p.parallel.zero_stage = 3;
  p.parallel.fsdp2 = true;
  p.parallel.recompute = Recompute::full;
  p.training.global_batch = 16;
  p.training.seq_len = 4096;
  REQUIRE(validate(p).ok());
  REQUIRE(expert_dp_size(p.parallel) == 2);
  // every one of Mixtral's 32 layers is a MoE layer: the stage's expert parameters over its layers
  const double experts = moe_expert_params(p, 0, plan_param_counts(p).counts) / static_cast<double>(p.model.layers);
  const double params = layer_cost(p).params;
  REQUIRE(experts > 0);
  REQUIRE(experts < params);
  // Dense parameters gathered over dp 16, the experts over the expert-data-parallel group of 2.
  const double gather_bytes = (6.0 / 16.0 + 4.0) * (params - experts) + (6.0 / 2.0 + 4.0) * experts;
  Plan fsdp1 = p;
  fsdp1.parallel.fsdp2 = false;
  CHECK(layer_cost(p).forward_s - layer_cost(fsdp1).forward_s ==
        doctest::Approx(memory_bound_time_s(p.gpu, gather_bytes)));
  CHECK(fsdp2_copy_bytes(p, params, experts).gather == doctest::Approx(gather_bytes));
}
