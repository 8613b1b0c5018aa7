// Tests for offload (planner/cost/offload.hpp, model_states.hpp): pinned to ZeRO-Offload's memory split and CPU-Adam
// time, ZeRO's 7.5B-on-64-GPUs figure, and the A100 / H100 datasheets' PCIe bandwidths.
#include <doctest/doctest.h>

#include "planner/cost/cost_model.hpp"
#include "planner/cost/model_states.hpp"
#include "planner/cost/offload.hpp"
#include "planner/spec/config.hpp"
#include "planner/spec/plan_json.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

TEST_CASE("ZeRO-Offload Fig. 2: the GPU keeps 2 Psi of 16-bit parameters, the host 14 Psi; 13B fits a 32 GB V100") {
  // Ren et al. 2021 Sec. 4.1: 16-bit parameters on the GPU; 16-bit gradients (2 Psi) and fp32 parameters, momentum,
  // variance (12 Psi) on the host. Its headline: a 13B model trains on one 32 GB V100.
  ModelStateOptions o;  // 2-byte weights and gradients, K = 12
  o.zero_stage = 2;
  o.offload.optimizer = true;
  const double psi = 13e9;
  const ModelStateBytes b = model_state_bytes(psi, 1, o);
  CHECK(b.weights == doctest::Approx(2.0 * psi));
  CHECK(b.grads == 0);
  CHECK(b.optimizer == 0);
  CHECK(b.host == doctest::Approx(14.0 * psi));
  CHECK(b.total() < 32e9);
  o.offload = {};
  CHECK(model_state_bytes(psi, 1, o).total() == doctest::Approx(16.0 * psi));  // 208 GB without offload
}

TEST_CASE("ZeRO-1 / distributed optimizer with offload: the GPU keeps the whole gradient, the host its shard") {
  ModelStateOptions o;
  o.distributed_optimizer = true;
  o.grad_bytes = 4;
  o.offload.optimizer = true;
  const ModelStateBytes b = model_state_bytes(8e9, 8, o);
  CHECK(b.weights == doctest::Approx(16e9));
  CHECK(b.grads == doctest::Approx(32e9));
  CHECK(b.optimizer == 0);
  CHECK(b.host == doctest::Approx(12.0 * 1e9 + 4.0 * 1e9));  // K Psi / N + 4 Psi / N
}

TEST_CASE("ZeRO-3 with optimizer and parameter offload: ZeRO's 7.5B on 64 GPUs, 1.9 GB per GPU, all on the host") {
  // Rajbhandari et al. 2020 Fig. 1: P_os+g+p holds (2 + 2 + 12) Psi / N = 1.875 GB; ZeRO-Infinity's CPU offload
  // moves all of it to host memory (Rajbhandari et al. 2021 Sec. 5.1).
  ModelStateOptions o;
  o.zero_stage = 3;
  o.offload = {true, true};
  const ModelStateBytes b = model_state_bytes(7.5e9, 64, o);
  CHECK(b.total() == 0);
  CHECK(b.host / 1e9 == doctest::Approx(1.875));
}

TEST_CASE("ZeRO-Offload Table 3: CPU-Adam updates 10 billion parameters in 2.57 s") {
  Plan p = test::korthikanti_175b();
  p.num_gpus = 1;  // one GPU's process has the node's CPUs
  CHECK(cpu_adam_s(p, 10e9) == doctest::Approx(2.57));
  p.num_gpus = 64;  // 8 GPUs of a DGX node share its CPUs: each shard takes 8x as long
  CHECK(cpu_adam_s(p, 10e9 / 8.0) == doctest::Approx(2.57));
}

TEST_CASE("host links from the datasheets: PCIe Gen4 x16 (A100) 64 GB/s, Gen5 x16 (H100) 128 GB/s bidirectional") {
  const ClusterSpec a100 = test::profiles().cluster("dgx-a100", "test");
  const ClusterSpec h100 = test::profiles().cluster("dgx-h100", "test");
  CHECK(a100.host_link.effective_Bps() * 2 == doctest::Approx(64e9));
  CHECK(h100.host_link.effective_Bps() * 2 == doctest::Approx(128e9));
  CHECK(host_link_s(a100, 32e9) == doctest::Approx(1.0));
  CHECK(host_link_s(a100, 0) == 0);
  CHECK(test::profiles().cluster("dgx-a100-40gb", "test").host_link.bandwidth_Bps == a100.host_link.bandwidth_Bps);
  CHECK(test::profiles().cluster("dgx-b200", "test").host_adam_params_per_s == doctest::Approx(kCpuAdamParamsPerS));
}

TEST_CASE("estimate with optimizer offload: states leave the GPU, the step gains the host tail in its optimizer term") {
  Plan p = test::korthikanti_175b_sharded_dp(1, 8);  // ZeRO-1 over dp 8, tp 8, one stage
  const Estimate on_gpu = estimate(p);
  p.parallel.offload.optimizer = true;
  REQUIRE(validate(p).ok());
  const Estimate off = estimate(p);
  const StageMemory& g = on_gpu.memory[0];
  const StageMemory& h = off.memory[0];
  CHECK(h.optimizer == 0);
  CHECK(h.weights == doctest::Approx(g.weights));
  CHECK(h.grads == doctest::Approx(g.grads));  // below ZeRO-2 the GPU accumulates the whole gradient
  CHECK(h.host == doctest::Approx(g.optimizer + g.grads / 8.0));  // the optimizer shard and the gradient shard
  CHECK(off.peak_memory_bytes < on_gpu.peak_memory_bytes);

  // The tail: gradient copy down, CPU Adam, parameter copy up, serial; each priced from its formula.
  const double owned = stage_params(p, 0) / 8.0;
  CHECK(stage_owned_params(p, stage_params(p, 0)) == doctest::Approx(owned));
  const OffloadStepTime& o = off.time.offload;
  CHECK(o.grad_bytes == doctest::Approx(owned * 2.0));  // fp16 run: 16-bit gradients
  CHECK(o.param_bytes == doctest::Approx(owned * 2.0));
  CHECK(o.grad_d2h_s == doctest::Approx(host_link_s(p.cluster, o.grad_bytes)));
  CHECK(o.param_h2d_s == doctest::Approx(host_link_s(p.cluster, o.param_bytes)));
  CHECK(o.cpu_optimizer_s == doctest::Approx(cpu_adam_s(p, owned)));
  CHECK(off.time.optimizer_s == doctest::Approx(o.total()));
  CHECK(on_gpu.time.offload.total() == 0);
  CHECK(off.time.step_s - on_gpu.time.step_s ==
        doctest::Approx(off.time.optimizer_s - on_gpu.time.optimizer_s).epsilon(1e-6));
}

TEST_CASE("parameter offload: ZeRO-3 gathers first copy the shard up; no parameter copy after the host step") {
  Plan p = test::korthikanti_175b_sharded_dp(3, 8);
  const LayerCost gpu = layer_cost(p);
  p.parallel.offload = {true, true};
  REQUIRE(validate(p).ok());
  const LayerCost off = layer_cost(p);
  const double shard_bytes = off.params / 8.0 * 2.0;
  CHECK(off.offload_fetch_s == doctest::Approx(host_link_s(p.cluster, shard_bytes)));
  CHECK(off.zero3_gather_s == doctest::Approx(gpu.zero3_gather_s + off.offload_fetch_s));
  const Estimate e = estimate(p);
  CHECK(e.memory[0].weights == 0);
  CHECK(e.memory[0].optimizer == 0);
  CHECK(e.memory[0].zero3_buffers > 0);  // the gathered working layers stay
  CHECK(e.time.offload.param_bytes == 0);
  CHECK(e.time.offload.param_h2d_s == 0);
}

TEST_CASE("offload validity: parameters need ZeRO-3 and the optimizer; the optimizer a sharded optimizer; a host link") {
  Plan p = test::korthikanti_175b();
  p.parallel.offload.optimizer = true;
  CHECK(validate(p).has(Reject::offload_invalid));
  CHECK(describe(Reject::offload_invalid, p).find("ZeRO 1-3 or the distributed optimizer") != std::string::npos);
  p.parallel.zero_stage = 1;
  CHECK(validate(p).ok());
  p.parallel.offload.params = true;
  CHECK(validate(p).has(Reject::offload_invalid));
  CHECK(describe(Reject::offload_invalid, p).find("needs ZeRO-3") != std::string::npos);
  Plan z3 = test::korthikanti_175b_sharded_dp(3, 8);
  z3.parallel.offload.params = true;
  CHECK(describe(Reject::offload_invalid, z3).find("use optimizer,params") != std::string::npos);
  z3.parallel.offload.optimizer = true;
  CHECK(validate(z3).ok());
  z3.cluster.host_link = {};
  CHECK(validate(z3).has(Reject::offload_invalid));
  CHECK(describe(Reject::offload_invalid, z3).find("no host_link") != std::string::npos);
}

TEST_CASE("offload sets parse from the flag / JSON syntax and print back") {
  OffloadSet o;
  CHECK(parse_offload("none", o));
  CHECK(!o.any());
  CHECK(parse_offload("params,optimizer", o));
  CHECK(o == OffloadSet{true, true});
  CHECK(to_string(o) == "optimizer,params");
  CHECK(parse_offload("optimizer", o));
  CHECK(to_string(o) == "optimizer");
  CHECK(to_string(OffloadSet{}) == "none");
  CHECK(parse_offload("activations,optimizer", o));
  CHECK(o == OffloadSet{true, false, true});
  CHECK(to_string(o) == "optimizer,activations");
  CHECK(parse_offload("activations", o));
  CHECK((o.any() && !o.states()));
  CHECK(to_string(OffloadSet{true, true, true}) == "optimizer,params,activations");
  for (const char* bad : {"", "cpu", "optimizer,", ",params", "optimizer,optimizer", "none,params", "activation",
                          "activations,activations", "activations,none"}) {
    CHECK_MESSAGE(!parse_offload(bad, o), bad);
  }
}

// Activation offload (offload.hpp: TransformerEngine's double-buffered CPU offload of activations). There is no
// published step time for it on a plan parplan can rebuild, so the tests pin the formulas to the mechanism: two layers
// of stored activations on the GPU, the layers' bytes on the host, each layer's copy hidden behind a layer's compute.
namespace {
// Korthikanti et al. 2022 Table 2: with selective recompute and sequence parallelism a layer stores 34 s b h / t bytes.
constexpr double kKorthikantiLayerBytes = 34.0 * 2048 * 1 * 12288 / 8;
}  // namespace

TEST_CASE("activation offload memory: the GPU keeps two layers, the host the in-flight layers (hand computed)") {
  Plan p = test::korthikanti_175b();  // pp 8 interleaved v 3: 12 layers per stage, 4 per chunk
  const Estimate on = estimate(p);
  REQUIRE(stage_memory_inputs(p).layer_activation_bytes == doctest::Approx(kKorthikantiLayerBytes));
  p.parallel.offload.activations = true;
  REQUIRE(validate(p).ok());
  const Estimate off = estimate(p);
  for (size_t i = 0; i < off.memory.size(); ++i) {
    const StageMemory& g = on.memory[i];
    const StageMemory& h = off.memory[i];
    CHECK(h.in_flight_chunks == g.in_flight_chunks);
    const double layers_part = static_cast<double>(g.in_flight_chunks) * 4.0 * kKorthikantiLayerBytes;
    CHECK(h.offloaded_activations == doctest::Approx(layers_part));
    CHECK(h.host == doctest::Approx(layers_part));  // no model state offloaded
    // The window replaces the layers' part; the embedding (first stage) and the output layer (last) stay.
    CHECK(h.activations == doctest::Approx(g.activations - layers_part + 2.0 * kKorthikantiLayerBytes));
    CHECK(h.weights == g.weights);
    CHECK(h.total < g.total);
  }
  // The interleaved peak holds many chunk-microbatches on stage 0: the host takes far more than the window keeps.
  CHECK(off.memory[0].offloaded_activations > 10.0 * 2.0 * kKorthikantiLayerBytes);
  CHECK(off.host_bytes_per_node == doctest::Approx(8.0 * off.memory[0].host));  // 8 GPUs of a node, stage 0 the most
  // Host memory is checked like the optimizer offload's: a node with too little fails the plan.
  p.cluster.host_memory_bytes = static_cast<int64_t>(off.host_bytes_per_node / 2);
  const Estimate small = estimate(p);
  CHECK(!small.host_fits);
  CHECK(!small.fits);
}

TEST_CASE("activation offload time: hidden when PCIe keeps up, exposed per layer when it does not") {
  Plan p = test::korthikanti_175b();
  const Estimate on = estimate(p);
  p.parallel.offload.activations = true;
  // A100 PCIe Gen4 x16, 32 GB/s per direction (datasheet): 107 MB in 3.3 ms, inside the layer's forward.
  const LayerCost fast = layer_cost(p);
  CHECK(fast.activation_copy_s == doctest::Approx(kKorthikantiLayerBytes / 32e9));
  CHECK(fast.activation_copy_s < fast.forward_s);
  CHECK(fast.exposed_offload_s == 0);
  const Estimate hidden = estimate(p);
  CHECK(hidden.time.offload_exposed_s == 0);
  CHECK(hidden.time.step_s == doctest::Approx(on.time.step_s).epsilon(1e-12));

  // A 2 GB/s link: 53 ms per copy, longer than the layer's forward and its backward; the rest is exposed.
  p.cluster.host_link.bandwidth_Bps = 2e9;
  p.cluster.host_link.efficiency = 1.0;
  p.cluster.host_link.latency_s = 0;
  const LayerCost slow = layer_cost(p);
  const double copy = kKorthikantiLayerBytes / 2e9;
  CHECK(slow.activation_copy_s == doctest::Approx(copy));
  REQUIRE(copy > slow.forward_s);
  const double backward = slow.backward_input_s + slow.recompute_s + slow.backward_weight_s;
  REQUIRE(copy > backward);
  CHECK(slow.exposed_offload_s == doctest::Approx((copy - slow.forward_s) + (copy - backward)));
  CHECK(slow.exposed_forward_comm_s - fast.exposed_forward_comm_s == doctest::Approx(copy - slow.forward_s));
  const Estimate e = estimate(p);
  // m microbatches x 12 layers on the slowest stage.
  CHECK(e.time.offload_exposed_s == doctest::Approx(64.0 * 12.0 * slow.exposed_offload_s));
  CHECK(e.time.step_s > on.time.step_s + e.time.offload_exposed_s);  // the bubble grows with the stage time too
  double sum = 0;
  for (double x : time_terms(e.time)) sum += x;
  CHECK(sum == doctest::Approx(e.time.step_s).epsilon(1e-9));

  // Zero-bubble's weight pass runs apart from the input-gradient pass: the copy up hides behind B and recompute only.
  Plan zb = test::korthikanti_175b_sharded_dp(0, 8);
  zb.parallel.offload.activations = true;
  zb.cluster.host_link = p.cluster.host_link;
  const LayerCost one = layer_cost(zb);
  zb.parallel.schedule = Schedule::zero_bubble;
  const LayerCost split = layer_cost(zb);
  CHECK(split.exposed_offload_s >= one.exposed_offload_s);
}

TEST_CASE("activation offload: needs a host link, not a sharded optimizer; combines with optimizer offload") {
  Plan p = test::korthikanti_175b();
  p.parallel.offload.activations = true;
  CHECK(validate(p).ok());  // ZeRO 0, no distributed optimizer
  p.cluster.host_link = {};
  CHECK(validate(p).has(Reject::offload_invalid));
  CHECK(describe(Reject::offload_invalid, p).find("offload activations: cluster dgx-a100 has no host_link") !=
        std::string::npos);
  Plan q = test::korthikanti_175b_sharded_dp(1, 8);
  q.parallel.offload = {true, false, true};
  REQUIRE(validate(q).ok());
  const Estimate both = estimate(q);
  q.parallel.offload.activations = false;
  const Estimate opt = estimate(q);
  CHECK(both.memory[0].host == doctest::Approx(opt.memory[0].host + both.memory[0].offloaded_activations));
  CHECK(both.time.optimizer_s == doctest::Approx(opt.time.optimizer_s));
}

TEST_CASE("activation offload: the plan document round trip keeps the set") {
  Plan p = test::korthikanti_175b_sharded_dp(1, 8);
  p.parallel.offload = {true, false, true};
  const nlohmann::json j = plan_to_json(p);
  CHECK(j["parallel"]["offload"] == "optimizer,activations");
  const Plan back = plan_from_json(j, test::profiles(), "test");
  CHECK(back.parallel.offload == p.parallel.offload);
  CHECK(estimate(back).time.step_s == doctest::Approx(estimate(p).time.step_s));
}

// Megatron-Core fine-grained activation offloading (--offload-modules expert_fc1 moe_act; activations.hpp
// offloaded_module_bytes, cost_model.cpp stage_memory / charge_activation_offload). No published memory figure
// isolates it, so the bytes are worked by hand from the mechanism.
namespace {
// Qwen3-235B-A22B (h 4096, expert f 1536, SwiGLU, top-8, 94 layers) on 64 GB200 (NVL72 trays of 4): tp 1, pp 2
// (47 layers a stage), 1F1B, dp 32, ep 32, 8 microbatches of one 4096-token sequence, bf16, selective recompute of
// layernorm and moe_act, the distributed optimizer. Balanced routing (imbalance 1).
Plan qwen3_offload_modules() {
  Plan p;
  p.model = test::profiles().model("qwen3-235b-a22b", "test");
  p.gpu = test::profiles().gpu("gb200", "test");
  p.cluster = test::profiles().cluster("gb200-nvl72", "test");
  p.num_gpus = 64;
  p.parallel.pp = 2;
  p.parallel.dp = 32;
  p.parallel.ep = 32;
  p.parallel.num_microbatches = 8;
  p.parallel.recompute = Recompute::selective;
  p.parallel.recompute_modules.bits = 0;
  p.parallel.recompute_modules.add(RecomputeModule::layernorm);
  p.parallel.recompute_modules.add(RecomputeModule::moe_act);
  p.parallel.distributed_optimizer = true;
  p.training.precision = Precision::bf16;
  p.training.global_batch = 256;
  p.training.seq_len = 4096;
  p.parallel.offload_modules.add(OffloadModule::expert_fc1);
  p.parallel.offload_modules.add(OffloadModule::moe_act);
  return p;
}
// Per layer and microbatch, 4096 tokens x 8 routed copies = 32768 copies (load 1, tp 1):
//   expert_fc1: the experts' fc1 input, 32768 x h 4096 x 2 bytes           = 268,435,456 B (256 MiB)
//   moe_act:    the activation's input (fc1 out), 32768 x 2 f 3072 x 2 bytes = 201,326,592 B (192 MiB)
constexpr double kFc1Bytes = 32768.0 * 4096 * 2, kActBytes = 32768.0 * 3072 * 2;
}  // namespace

TEST_CASE("fine-grained activation offload memory: the modules' bytes of every in-flight layer go to the host") {
  Plan p = qwen3_offload_modules();
  REQUIRE(validate(p).ok());
  const StageMemoryInputs in = stage_memory_inputs(p);
  CHECK(in.layer_offloaded_bytes == doctest::Approx(kFc1Bytes + kActBytes).epsilon(1e-12));
  const Estimate off = estimate(p);
  Plan q = p;
  q.parallel.offload_modules = {};
  const Estimate on = estimate(q);
  CHECK(stage_memory_inputs(q).layer_activation_bytes == doctest::Approx(in.layer_activation_bytes));
  const double x = kFc1Bytes + kActBytes;
  // 1F1B: stage 0 holds min(p, m) = 2 microbatches of its 47 layers, stage 1 one. The host takes the modules' bytes of
  // each; the GPU keeps the rest of each layer and the double-buffer window, 2 layers' of the offloaded part.
  for (size_t i = 0; i < 2; ++i) {
    const double in_flight = i == 0 ? 2.0 : 1.0;
    REQUIRE(off.memory[i].in_flight_chunks == static_cast<int64_t>(in_flight));
    CHECK(off.memory[i].offloaded_activations == doctest::Approx(in_flight * 47.0 * x).epsilon(1e-12));
    CHECK(off.memory[i].host == doctest::Approx(in_flight * 47.0 * x).epsilon(1e-12));  // no state offloaded
    CHECK(off.memory[i].activations ==
          doctest::Approx(on.memory[i].activations - in_flight * 47.0 * x + 2.0 * x).epsilon(1e-12));
    CHECK(off.memory[i].weights == on.memory[i].weights);
  }
  CHECK(off.host_bytes_per_node == doctest::Approx(4.0 * 2.0 * 47.0 * x));  // 4 GPUs a tray, stage 0 the most
  CHECK(off.host_fits);
  // Each module alone takes its own term.
  p.parallel.offload_modules = {};
  p.parallel.offload_modules.add(OffloadModule::expert_fc1);
  CHECK(stage_memory_inputs(p).layer_offloaded_bytes == doctest::Approx(kFc1Bytes));
  p.parallel.offload_modules = {};
  p.parallel.offload_modules.add(OffloadModule::moe_act);
  CHECK(stage_memory_inputs(p).layer_offloaded_bytes == doctest::Approx(kActBytes));
  // A node with too little host memory fails the plan, as with the other offloads.
  Plan small = qwen3_offload_modules();
  small.cluster.host_memory_bytes = static_cast<int64_t>(off.host_bytes_per_node / 2);
  CHECK(!estimate(small).fits);
}

TEST_CASE("fine-grained activation offload time: the modules' copy over the host link, exposed beyond the layer") {
  Plan p = qwen3_offload_modules();
  Plan q = p;
  q.parallel.offload_modules = {};
  const double x = kFc1Bytes + kActBytes;
  // GB200's host link: NVLink-C2C, 225 GB/s per GPU per direction (gb200-nvl72 profile): 470 MB in 2.09 ms.
  const LayerCost fast = layer_cost(p);
  CHECK(fast.activation_copy_s == doctest::Approx(x / 225e9));
  const LayerCost plain = layer_cost(q);
  CHECK(plain.activation_copy_s == 0);
  CHECK(fast.exposed_offload_s == doctest::Approx(std::max(0.0, x / 225e9 - fast.forward_s) +
                                                  std::max(0.0, x / 225e9 - (fast.backward_input_s + fast.recompute_s +
                                                                             fast.backward_weight_s))));
  // A 2 GB/s link: 235 ms per copy, longer than the layer's forward and backward; the rest is exposed in each pass.
  p.cluster.host_link = {2e9, 0.0, 1.0};
  const LayerCost slow = layer_cost(p);
  const double copy = x / 2e9;
  CHECK(slow.activation_copy_s == doctest::Approx(copy));
  const double backward = slow.backward_input_s + slow.recompute_s + slow.backward_weight_s;
  REQUIRE(copy > slow.forward_s);
  REQUIRE(copy > backward);
  CHECK(slow.exposed_offload_s == doctest::Approx((copy - slow.forward_s) + (copy - backward)));
  const Estimate e = estimate(p);
  CHECK(e.time.offload_exposed_s == doctest::Approx(8.0 * 47.0 * slow.exposed_offload_s));  // m x layers a stage
  double sum = 0;
  for (double t : time_terms(e.time)) sum += t;
  CHECK(sum == doctest::Approx(e.time.step_s).epsilon(1e-9));
}

TEST_CASE("fine-grained activation offload: what it needs, and the plan document round trip") {
  Plan p = qwen3_offload_modules();
  REQUIRE(validate(p).ok());
  Plan layers = p;
  layers.parallel.offload.activations = true;  // Megatron-Core: not with the whole-layer CPU offload
  CHECK(validate(layers).has(Reject::offload_modules_invalid));
  CHECK(describe(Reject::offload_modules_invalid, layers).find("exclude each other") != std::string::npos);
  Plan full = p;
  full.parallel.recompute = Recompute::full;
  full.parallel.recompute_modules = {};
  CHECK(validate(full).has(Reject::offload_modules_invalid));
  Plan no_link = p;
  no_link.cluster.host_link = {};
  CHECK(describe(Reject::offload_modules_invalid, no_link).find("has no host_link") != std::string::npos);
  Plan dense = test::korthikanti_175b();
  dense.parallel.offload_modules.add(OffloadModule::expert_fc1);
  CHECK(validate(dense).has(Reject::offload_modules_invalid));
  CHECK(describe(Reject::offload_modules_invalid, dense).find("has no MoE experts") != std::string::npos);

  const nlohmann::json j = plan_to_json(p);
  CHECK(j["parallel"]["offload_modules"] == nlohmann::json::array({"expert_fc1", "moe_act"}));
  const Plan back = plan_from_json(j, test::profiles(), "test");
  CHECK(back.parallel.offload_modules == p.parallel.offload_modules);
  CHECK(estimate(back).peak_memory_bytes == doctest::Approx(estimate(p).peak_memory_bytes));
  p.parallel.offload_modules = {};
  CHECK_FALSE(plan_to_json(p)["parallel"].contains("offload_modules"));  // none: not written
  OffloadModules mods;
  CHECK(parse_offload_modules("moe_act,expert_fc1", mods));
  CHECK(to_string(mods) == "expert_fc1,moe_act");
  CHECK_FALSE(parse_offload_modules("expert_fc1,expert_fc1", mods));
  CHECK_FALSE(parse_offload_modules("core_attn", mods));  // Megatron-Core's, not priced
  CHECK(is_unpriced_offload_module("core_attn"));
}
