// Tests for MoE routing fidelity: the most-loaded rank's load (capacity factor, imbalance), the router and token
// permutation as memory-bound work and stored activations, alternating MoE / dense layers (Llama 4) and multi-token
// prediction (DeepSeek-V3).
#include <doctest/doctest.h>

#include <cmath>

#include "planner/cost/activations.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/expert_comm.hpp"
#include "planner/cost/flops.hpp"
#include "planner/cost/gemm.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/spec/config.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
double d(int64_t x) { return static_cast<double>(x); }

// Mixtral 8x7B (8 experts, top-2, hidden 4096) on one DGX H100: tp 1, dp 8, ep 8, micro-batch 1 of 4096 tokens.
Plan mixtral_ep8() {
  Plan p;
  p.model = test::profiles().model("mixtral-8x7b", "test");
  p.gpu = test::profiles().gpu("h100", "test");
  p.cluster = test::profiles().cluster("dgx-h100", "test");
  p.parallel.dp = 8;
  p.parallel.ep = 8;
  p.parallel.micro_batch = 1;
  p.parallel.num_microbatches = 4;
  p.num_gpus = 8;
  p.training.global_batch = 32;
  p.training.seq_len = 4096;
  return p;
}
}  // namespace

TEST_CASE("moe_rank_load: the capacity factor when set, else the imbalance bounded by ep") {
  ModelSpec m = test::profiles().model("mixtral-8x7b", "test");
  CHECK(moe_rank_load(m, 8) == 1.0);  // default: balanced (Megatron-Core's benchmarks force it)
  m.imbalance = 1.5;
  CHECK(moe_rank_load(m, 8) == 1.5);
  CHECK(moe_rank_load(m, 1) == 1.0);  // one rank holds every expert: exactly tokens x top_k copies
  m.imbalance = 3.0;
  CHECK(moe_rank_load(m, 2) == 2.0);  // no rank receives more than every token's copies, ep x the mean
  m.imbalance = 1.0;
  m.capacity_factor = 1.25;  // padded to capacity: every expert runs 1.25 x the mean, at any ep
  CHECK(moe_rank_load(m, 8) == 1.25);
  CHECK(moe_rank_load(m, 1) == 1.25);
  CHECK(moe_rank_load(test::profiles().model("llama3-8b", "test"), 8) == 1.0);  // dense: no routing
}

TEST_CASE("moe_routing_error: capacity and imbalance between 1 and experts / top_k, imbalance only dropless") {
  ModelSpec m = test::profiles().model("mixtral-8x7b", "test");  // 8 experts, top-2: at most 4
  CHECK(moe_routing_error(m).field == MoeRoutingError::Field::none);
  m.capacity_factor = 0.5;
  CHECK(moe_routing_error(m).message.find("capacity factor 0.5 is outside 1 .. experts / top_k = 4") != std::string::npos);
  CHECK(moe_routing_error(m).field == MoeRoutingError::Field::capacity_factor);
  m.capacity_factor = 4.0;
  CHECK(moe_routing_error(m).field == MoeRoutingError::Field::none);
  m.imbalance = 1.2;
  CHECK(moe_routing_error(m).message.find("imbalance is for dropless routing") != std::string::npos);
  CHECK(moe_routing_error(m).field == MoeRoutingError::Field::imbalance);
  m.capacity_factor = 0;
  m.imbalance = 4.5;
  CHECK(moe_routing_error(m).message.find("imbalance 4.5 is outside 1 .. experts / top_k = 4") != std::string::npos);
  CHECK(moe_routing_error(m).field == MoeRoutingError::Field::imbalance);
  ModelSpec dense = test::profiles().model("llama3-8b", "test");
  dense.imbalance = 1.1;
  CHECK(moe_routing_error(dense).message.find("for MoE models") != std::string::npos);
  CHECK(moe_routing_error(dense).field == MoeRoutingError::Field::not_moe);
}

TEST_CASE("imbalance: the most-loaded rank's all-to-all bytes and expert GEMMs scale with its load") {
  Plan p = mixtral_ep8();
  REQUIRE(validate(p).ok());
  const double tokens = 4096;
  const ExpertA2A balanced = expert_a2a(p, tokens);
  CHECK(balanced.copies_bytes == doctest::Approx(tokens * 2 * 4096 * 2).epsilon(1e-12));
  const LayerCost lc1 = layer_cost(p);
  p.model.imbalance = 1.5;
  const ExpertA2A skewed = expert_a2a(p, tokens);
  CHECK(skewed.copies_bytes == doctest::Approx(1.5 * balanced.copies_bytes).epsilon(1e-12));
  const LayerCost lc15 = layer_cost(p);
  // The experts' grouped GEMMs: 1 local expert of 8 runs T k ep / E = 8192 tokens balanced, 12288 at load 1.5.
  const GpuSpec& g = p.gpu;
  const DType bf = DType::bf16;
  const double experts_1 =
      grouped_gemm_time_s(g, bf, 8192, 2 * 14336, 4096, 1) + grouped_gemm_time_s(g, bf, 8192, 4096, 14336, 1);
  const double experts_15 =
      grouped_gemm_time_s(g, bf, 12288, 2 * 14336, 4096, 1) + grouped_gemm_time_s(g, bf, 12288, 4096, 14336, 1);
  CHECK(lc15.gemm_forward_s - lc1.gemm_forward_s == doctest::Approx(experts_15 - experts_1).epsilon(1e-9));
  CHECK(experts_15 > 1.4 * experts_1);  // compute-bound: about 1.5x
  CHECK(lc15.ep_comm_forward_s > lc1.ep_comm_forward_s);
  // A capacity factor pads every expert to it: the same load as that imbalance.
  p.model.imbalance = 1.0;
  p.model.capacity_factor = 1.5;
  CHECK(layer_cost(p).gemm_forward_s == doctest::Approx(lc15.gemm_forward_s).epsilon(1e-12));
}

TEST_CASE("router and permutation bytes: Megatron-Core's score function, top-k, permute and unpermute, by hand") {
  const Plan p = mixtral_ep8();
  const MoeTokenCopies c = moe_token_copies(p);
  CHECK(c.tokens == 4096);
  CHECK(c.dispatched == 8192);
  CHECK(c.expert == 8192);  // tp 1: the rank's experts run as many copies as it routes, balanced
  const MoeRoutingBytes b = moe_routing_bytes(p);
  const double t = 4096, n = 8192, E = 8, k = 2, h = 4096, A = 2;
  // Router: logits read, fp32 scores written, top-k reads them and writes fp32 probs + int64 indices, aux loss reads
  // the scores; permute reads and writes every copy, unpermute reads the copies and writes the tokens.
  CHECK(b.forward == doctest::Approx(t * E * (A + 4) + t * E * 4 + t * k * 12 + 2 * n * h * A + (n * h * A + t * h * A))
                         .epsilon(1e-12));
  CHECK(b.backward == doctest::Approx(t * E * (20 + A) + (n * h * A + t * h * A) + (t * h * A + 2 * n * h * A))
                          .epsilon(1e-12));
  // One local expert per rank (8 experts, ep 8): no sort by local expert. With ep 4, two local experts: the received
  // copies are sorted after the dispatch and back before the combine, read + write each, in both passes.
  Plan p4 = p;
  p4.parallel.ep = 4;
  const MoeRoutingBytes b4 = moe_routing_bytes(p4);
  CHECK(b4.forward - b.forward == doctest::Approx(4 * n * h * A).epsilon(1e-12));
  CHECK(b4.backward - b.backward == doctest::Approx(4 * n * h * A).epsilon(1e-12));
  // Priced on the memory-bound path: the layer's memory-bound bytes carry them.
  const LayerMemoryBytes mb = layer_memory_bound_bytes(p);
  CHECK(mb.moe_routing_forward == b.forward);
  CHECK(mb.moe_routing_backward == b.backward);
  Plan dense = p;
  dense.model = test::profiles().model("llama3-8b", "test");
  CHECK(layer_memory_bound_bytes(dense).moe_routing_forward == 0.0);
}

TEST_CASE("stored routing activations: the experts' permuted input at the rank's load and the router's scores") {
  Plan p = mixtral_ep8();
  const LayerActivationBytes a1 = layer_activation_bytes(p.model, activation_shape(p));
  const double t = 4096, h = 4096, A = 2;
  CHECK(a1.moe_routing == doctest::Approx(8192 * h * A + t * 8 * 4 + 8192 * 12).epsilon(1e-12));
  p.model.imbalance = 2.0;
  const LayerActivationBytes a2 = layer_activation_bytes(p.model, activation_shape(p));
  CHECK(a2.moe_routing - a1.moe_routing == doctest::Approx(8192 * h * A).epsilon(1e-12));
  // The routed experts' SwiGLU intermediates (3 f per copy) grow with the load too.
  CHECK(a2.tp_sharded - a1.tp_sharded == doctest::Approx(t * A * 3 * 14336 * 2).epsilon(1e-12));
  p.parallel.recompute = Recompute::full;  // only the layer input stays
  CHECK(layer_activation_bytes(p.model, activation_shape(p)).total == doctest::Approx(t * h * A).epsilon(1e-12));
}

TEST_CASE("Llama 4: Maverick alternates dense and MoE layers; parameter counts match Meta's published totals") {
  const ModelSpec& mav = test::profiles().model("llama4-maverick", "t");
  CHECK(mav.moe_layer_step == 2);
  CHECK(mav.dense_layer_count() == 24);
  CHECK(mav.moe_layers() == 24);
  CHECK(mav.dense_layers_before(4) == 2);  // layers 0 and 2 dense, 1 and 3 MoE (interleave_moe_layer_step 2)
  CHECK(mav.dense_layers_before(3) == 2);
  CHECK(mav.dense_layers_before(1) == 1);
  CHECK_FALSE(last_layer_dense(mav));
  // By hand: 48 layers of attention (40 x 128 queries, 8 x 128 keys and values, output) and two RMSNorms; 24 MoE
  // layers of 128 routed + 1 shared SwiGLU experts of 8192 and the router; 24 dense SwiGLU MLPs of 16384; untied
  // embedding and head of 202048 x 5120 and the final norm.
  const double h = 5120, attn = h * (5120 + 2 * 1024) + 5120 * h, expert = 3 * h * 8192;
  const double by_hand = 48 * (attn + 2 * h) + 24 * (129 * expert + 128 * h) + 24 * 3 * h * 16384 + 2 * 202048 * h + h;
  CHECK(d(total_params(mav)) == doctest::Approx(by_hand).epsilon(1e-12));
  // Meta's model card: 400B total, 17B active (Maverick); 109B total, 17B active (Scout).
  CHECK(d(total_params(mav)) / 1e9 == doctest::Approx(400.0).epsilon(0.01));
  CHECK(d(active_params(mav)) / 1e9 == doctest::Approx(17.0).epsilon(0.015));
  const ModelSpec& scout = test::profiles().model("llama4-scout", "t");
  CHECK_FALSE(scout.has_dense_layers());
  CHECK(d(active_params(scout)) / 1e9 == doctest::Approx(17.0).epsilon(0.015));
  // The card's 109B counts the vision encoder, which parplan does not model: the text model is 107.8B, 1.1% under.
  CHECK(d(total_params(scout)) / 1e9 == doctest::Approx(107.77).epsilon(0.001));
  CHECK(d(total_params(scout)) / 1e9 == doctest::Approx(109.0).epsilon(0.012));
}

namespace {
// A MoE model on H100s: pp stages, dp = ep ranks, `microbatches` of one sequence per dp rank, full recompute.
Plan pipelined_moe_plan(const ModelSpec& m, int64_t pp, int64_t dp, int64_t microbatches) {
  Plan p;
  p.model = m;
  p.gpu = test::profiles().gpu("h100", "test");
  p.cluster = test::profiles().cluster("dgx-h100", "test");
  p.parallel.pp = pp;
  p.parallel.dp = dp;
  p.parallel.ep = dp;
  p.parallel.num_microbatches = microbatches;
  p.parallel.recompute = Recompute::full;
  p.num_gpus = pp * dp;
  p.training.global_batch = dp * microbatches;
  return p;
}
}  // namespace

TEST_CASE("Llama 4 Maverick on a pipeline: each stage holds its dense layers; params, FLOPs and memory follow") {
  Plan p = pipelined_moe_plan(test::profiles().model("llama4-maverick", "test"), 4, 8, 8);
  REQUIRE(validate(p).ok());
  for (int64_t i = 0; i < 4; ++i) CHECK(stage_dense_layers(p, i) == 6);  // 12 layers each, every other one dense
  const PlanParamCounts pc = plan_param_counts(p);
  CHECK(pc.dense_layer_params > 0);
  CHECK(stage_params(p, 1, pc) == doctest::Approx(6 * pc.layer_params + 6 * pc.dense_layer_params).epsilon(1e-12));
  // Model FLOPs: 24 MoE layers and 24 dense ones.
  const double flops = 3 * (24 * layer_forward_flops(p.model, 64, 8192, false).total() +
                            24 * layer_forward_flops(dense_layer_model(p.model), 64, 8192, false).total() +
                            logits_forward_flops(p.model, 64, 8192));
  CHECK(model_flops_per_step(p.model, 64, 8192) == doctest::Approx(flops).epsilon(1e-12));
  // A stage's time and activations mix the two layer kinds (mean_layer_cost with 6 of 12 dense).
  const Estimate e = estimate(p);
  CHECK(e.memory.size() == 4);
  Plan all_moe = p;
  all_moe.model.moe_layer_step = 1;
  all_moe.model.dense_ffn_hidden = 0;
  CHECK(estimate(all_moe).time.step_s > e.time.step_s);  // 128 experts in every layer: more expert weight traffic
}

TEST_CASE("recompute working set: a stage holds the rebuild of the layer kinds it has (DeepSeek-V3's dense MLPs)") {
  // Selective recompute of `mlp` rebuilds the dense layers' MLP and does nothing on a MoE layer (Megatron-Core's
  // recompute_modules): on DeepSeek-V3's 8 stages only the first holds its 3 dense layers, so only the first holds
  // that working set (the others: the attention core's, Megatron-Core's default module, 2 MiB of flash-attention
  // statistics here), and the peak never rises above recompute none's.
  Plan p = pipelined_moe_plan(test::profiles().model("deepseek-v3", "t"), 8, 32, 32);
  p.num_gpus = 256;
  p.parallel.recompute = Recompute::selective;
  p.parallel.recompute_modules = RecomputeModules{};  // core_attn
  p.parallel.recompute_modules.add(RecomputeModule::mlp);
  REQUIRE(validate(p).ok());
  REQUIRE(stage_dense_layers(p, 0) == 3);
  const Estimate e = estimate(p);
  CHECK(e.memory[0].recompute_working_set > 0);
  for (size_t i = 1; i < e.memory.size(); ++i) {
    CAPTURE(i);
    CHECK(e.memory[i].recompute_working_set < 0.01 * e.memory[0].recompute_working_set);
  }
  Plan none = p;
  none.parallel.recompute = Recompute::none;
  none.parallel.recompute_modules = RecomputeModules{};
  REQUIRE(validate(none).ok());
  CHECK(e.peak_memory_bytes <= estimate(none).peak_memory_bytes);
  // The MoE layers' own rebuild (moe_act) is on every stage.
  p.parallel.recompute_modules = RecomputeModules{};
  p.parallel.recompute_modules.add(RecomputeModule::moe_act);
  for (const StageMemory& m : estimate(p).memory) CHECK(m.recompute_working_set > 0);
}

TEST_CASE("MTP: DeepSeek-V3's module on the last stage: params, FLOPs, time and memory") {
  const ModelSpec& v3 = test::profiles().model("deepseek-v3", "t");
  REQUIRE(v3.mtp_layers == 1);
  const ParamCounts c = count_params(v3);
  const double h = 7168;
  // One MoE block (DeepSeek-V3's last layer kind) + the projection 2h -> h and the two input norms.
  const double block = d(c.attention + c.norms + c.router + c.shared_mlp + c.per_layer_experts(256));
  CHECK(d(mtp_params(v3)) == doctest::Approx(block + 2 * h * h + 2 * h).epsilon(1e-12));
  // The Hugging Face release's 685B = 671B main model + 14B MTP module, which also stores its own embedding and
  // output head (2 x 129280 x 7168): parplan's count of them agrees within 0.5%.
  CHECK((d(total_params(v3)) + d(mtp_params(v3)) + 2 * 129280 * h) / 1e9 == doctest::Approx(685.0).epsilon(0.005));
  CHECK((d(mtp_params(v3)) + 2 * 129280 * h) / 1e9 == doctest::Approx(14.0).epsilon(0.05));

  Plan p = pipelined_moe_plan(v3, 16, 64, 16);
  REQUIRE(validate(p).ok());
  Plan without = p;
  without.model.mtp_layers = 0;
  const PlanParamCounts pc = plan_param_counts(p);
  CHECK(stage_params(p, 15, pc) - stage_params(without, 15, plan_param_counts(without)) ==
        doctest::Approx(pc.layer_params + 2 * h * h + 2 * h).epsilon(1e-12));
  CHECK(stage_params(p, 3, pc) == stage_params(without, 3, plan_param_counts(without)));
  // Time: the module's block, projection and second head, in the last stage's output work.
  const EdgeCost e = edge_cost(p), e0 = edge_cost(without);
  CHECK(e.mtp_forward_s > layer_cost(p).forward_s);
  CHECK(e.output_forward_s == doctest::Approx(e0.output_forward_s + e.mtp_forward_s).epsilon(1e-12));
  CHECK(e.output_backward_s == doctest::Approx(e0.output_backward_s + e.mtp_backward_s).epsilon(1e-12));
  // FLOPs: the block, the projection 2 b s 2h h and another logits GEMM, x3 for forward and backward.
  const double mtp = layer_forward_flops(v3, 1024, 4096, false).total() + 2.0 * 1024 * 4096 * 2 * h * h +
                     logits_forward_flops(v3, 1024, 4096);
  CHECK(model_flops_per_step(v3, 1024, 4096) - model_flops_per_step(without.model, 1024, 4096) ==
        doctest::Approx(3 * mtp).epsilon(1e-9));
  // Memory: only the last stage holds it.
  const Estimate with_mtp = estimate(p), no_mtp = estimate(without);
  CHECK(with_mtp.memory[15].activations > no_mtp.memory[15].activations);
  CHECK(with_mtp.memory[15].weights > no_mtp.memory[15].weights);
  CHECK(with_mtp.memory[3].activations == no_mtp.memory[3].activations);
  CHECK(with_mtp.time.step_s > no_mtp.time.step_s);
}

TEST_CASE("MTP block kind: the model's last layer (dense model, or a MoE model ending on a dense layer)") {
  ModelSpec dense = test::profiles().model("llama3-8b", "t");
  dense.mtp_layers = 1;
  const ParamCounts c = count_params(dense);
  const double h = 4096;
  CHECK_FALSE(last_layer_dense(dense));  // one layer kind: the model's own
  CHECK(d(mtp_params(dense)) == doctest::Approx(d(c.attention + c.norms + c.mlp_per_expert) + 2 * h * h + h + h));
  ModelSpec mav = test::profiles().model("llama4-maverick", "t");
  mav.layers = 47;  // layers 0, 2, .., 46 dense: the last one is
  mav.mtp_layers = 2;
  REQUIRE(last_layer_dense(mav));
  const ParamCounts m = count_params(mav);
  CHECK(mtp_block_model(mav).experts == 1);
  CHECK(d(mtp_params(mav)) == doctest::Approx(2 * d(m.attention + m.norms + m.dense_mlp + m.mtp_projection)));
}

TEST_CASE("fp8 activation cache: the experts' SwiGLU rerun is one memory-bound pass; the plan needs fp8") {
  // DeepSeek-V3 report Sec. 3.3.3: the SwiGLU output is recomputed from its fp8-cached input in the backward, one pass
  // reading 2 f and writing the fp8 f per expert copy (activations.hpp, cost_model.cpp fp8_cache_recompute_s).
  Plan p = pipelined_moe_plan(test::profiles().model("deepseek-v3", "t"), 8, 32, 32);
  p.num_gpus = 256;
  p.training.precision = Precision::fp8;
  p.parallel.recompute = Recompute::selective;  // the attention core (the helper's is full)
  REQUIRE(validate(p).ok());
  Plan cache = p;
  cache.training.fp8_activation_cache = true;
  REQUIRE(validate(cache).ok());
  const double T = static_cast<double>(p.parallel.micro_batch * p.seq_len());
  const double copies = p.model.mlp_copies_per_token(moe_rank_load(p.model, p.parallel.ep));  // 8 routed + 1 shared
  CHECK(copies == doctest::Approx(9.0));
  const double tp = static_cast<double>(p.parallel.tp);
  const double pass = memory_bound_time_s(p.gpu, 3.0 * T * 2048 / tp * copies) + p.gpu.gemm.kernel_overhead_s;
  CHECK(layer_cost(cache).recompute_s - layer_cost(p).recompute_s == doctest::Approx(pass).epsilon(1e-9));
  CHECK(estimate(cache).peak_memory_bytes < estimate(p).peak_memory_bytes);
  // Full recompute stores only the layer input: the cache changes neither its memory nor its rerun.
  p.parallel.recompute = cache.parallel.recompute = Recompute::full;
  CHECK(layer_cost(cache).recompute_s == doctest::Approx(layer_cost(p).recompute_s).epsilon(1e-12));
  // Without fp8 training there is no fp8 cache: refused, naming it.
  cache.training.precision = Precision::bf16;
  CHECK(validate(cache).has(Reject::fp8_activation_cache_invalid));
  CHECK(describe(Reject::fp8_activation_cache_invalid, cache).find("needs --precision fp8") != std::string::npos);
}
