// Tests for offload (planner/cost/offload.hpp, model_states.hpp): pinned to ZeRO-Offload's memory split and CPU-Adam
// time, ZeRO's 7.5B-on-64-GPUs figure, and the A100 / H100 datasheets' PCIe bandwidths.
#include <doctest/doctest.h>

#include "planner/cost/cost_model.hpp"
#include "planner/cost/model_states.hpp"
#include "planner/cost/offload.hpp"
#include "planner/spec/config.hpp"
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
  for (const char* bad : {"", "cpu", "optimizer,", ",params", "optimizer,optimizer", "none,params", "activations"}) {
    CHECK_MESSAGE(!parse_offload(bad, o), bad);
  }
}
