// Tests for planner/cost/eager_elementwise: uncompiled PyTorch's element-wise ops, kernel by kernel, and how the cost
// model charges them (TrainingSpec::compiled_elementwise false).
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/cost/cost_model.hpp"
#include "planner/cost/eager_elementwise.hpp"
#include "planner/cost/gemm.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

// Per element, bf16 (A = 2) and fp32 (A = 4, no casts), from the kernel lists in eager_elementwise.hpp:
// RMSNorm forward  cast 2+4, pow 4+4, mean 4, mul 4+4, cast 4+2, * weight 2+2 = 36 (8 kernels: + eps and rsqrt too);
//         backward dy*w 2+2, dy*y 2+2+2, sum 2, cast 2+4, g*r 4+4, g*x 4+4+4, sum 4, mean 4, pow(1) 4+4, 2* 4+4,
//                  grad* 4+4+4, sum of the two grads 4+4+4, cast 4+2 = 92 (16 kernels, 3 of them rsqrt's).
//         fp32: the four casts drop out: 36 - 12 = 24 + 4 (the weight multiply moves 4+4) = 28 forward, 6 kernels;
//                  92 - 12 - 12 + 24 = 92 backward (the weight terms 6 x 4 instead of 6 x 2), 14 kernels.
// Rotary  cast 2+4, complex mul 4+4, cast 4+2 = 20 each way (3 kernels); fp32: 8 (1 kernel).
// SwiGLU  silu 2+2, mul 2+2+2 = 10 (2 kernels); backward 2 muls 6+6, silu_backward 6 = 18 (3 kernels).
TEST_CASE("eager ops: bytes per element and kernels, bf16 and fp32") {
  const EagerOp n2 = eager_rmsnorm(2), n4 = eager_rmsnorm(4);
  CHECK(n2.forward_bytes == 36);
  CHECK(n2.backward_bytes == 92);
  CHECK(n2.forward_kernels == 8);
  CHECK(n2.backward_kernels == 16);
  CHECK(n4.forward_bytes == 28);
  CHECK(n4.backward_bytes == 92);
  CHECK(n4.forward_kernels == 6);
  CHECK(n4.backward_kernels == 14);
  const EagerOp r2 = eager_rotary(2), r4 = eager_rotary(4);
  CHECK(r2.forward_bytes == 20);
  CHECK(r2.backward_bytes == 20);
  CHECK(r2.forward_kernels == 3);
  CHECK(r4.forward_bytes == 8);
  CHECK(r4.backward_kernels == 1);
  const EagerOp s = eager_swiglu(2);
  CHECK(s.forward_bytes == 10);
  CHECK(s.backward_bytes == 18);
  CHECK(s.forward_kernels == 2);
  CHECK(s.backward_kernels == 3);
  // Dropout then add: native_dropout 2 + 2 + 1-byte mask, add 6 = 11; backward 2 + 1 + 2, gradient sum 6 = 11.
  CHECK(eager_dropout_add(2).forward_bytes == 11);
  CHECK(eager_dropout_add(2).backward_bytes == 11);
}

// A Llama layer small enough to count by hand: hidden 8, 2 query heads and 1 KV head of width 4, ffn 16, 4 tokens
// (micro-batch 1, seq 4), bf16, tp 1.
//   compiled: norms 2 x 32 x (2+2) = 256 / 2 x 32 x 6 = 384; residual adds 2 x 32 x 6 = 384 both ways;
//             SwiGLU 64 x 6 = 384 / 64 x 10 = 640; rotary (q 8 + k 4 + v 4) x 4 tokens x (2+2) = 256 both ways
//             -> forward 1280, backward 1664.
//   eager:    norms 2 x 32 x 36 = 2304 / 2 x 32 x 92 = 5888; residual adds as compiled, 384 / 384;
//             SwiGLU 64 x 10 = 640 / 64 x 18 = 1152; rotary (q 8 + k 4) x 4 tokens x 20 = 960 both ways
//             -> forward 4288, backward 8384.
//   launches over the compiled count: forward norms 2 x 8 - 2, rotary 2 x 3 - 1, SwiGLU 2 - 1 = 20;
//             backward norms 2 x 16 - 2 x 2, rotary 2 x 3 - 2, SwiGLU 3 - 2 = 33.
TEST_CASE("eager element-wise bytes of a hand-counted Llama layer") {
  Plan p = test::korthikanti_175b();
  p.model = test::profiles().model("llama3-8b", "t");
  p.model.hidden = 8;
  p.model.heads = 2;
  p.model.kv_heads = 1;
  p.model.ffn_hidden = 16;
  p.model.head_dim_override = 0;
  p.parallel.tp = 1;
  p.parallel.sequence_parallel = false;
  p.parallel.micro_batch = 1;
  p.training.seq_len = 4;
  p.training.precision = Precision::bf16;
  p.training.attention = AttentionKernel::flash;
  REQUIRE(p.model.norm == NormType::rmsnorm);
  REQUIRE(p.model.position == PositionEmbedding::rotary);
  REQUIRE_FALSE(p.model.dropout);
  REQUIRE(p.model.head_dim() == 4);
  const LayerMemoryBytes c = layer_memory_bound_bytes(p);
  CHECK(c.elementwise_forward == 1280);
  CHECK(c.elementwise_backward == 1664);
  CHECK(c.eager_extra_forward_launches == 0);
  p.training.compiled_elementwise = false;
  const LayerMemoryBytes e = layer_memory_bound_bytes(p);
  CHECK(e.elementwise_forward == 4288);
  CHECK(e.elementwise_backward == 8384);
  CHECK(e.eager_extra_forward_launches == 20);
  CHECK(e.eager_extra_backward_launches == 33);
}

// Llama 3 8B on one H200, no pipeline, no recompute, 4 microbatches: the only thing eager changes is the layers'
// memory-bound work, so each layer pass grows by the extra bytes at achieved HBM bandwidth (memory_bound_time_s) plus
// the extra launches, and the step by layers x microbatches x (forward + backward) of that.
static Plan llama3_8b_one_gpu() {
  Plan p = test::korthikanti_175b();
  p.model = test::profiles().model("llama3-8b", "t");
  p.gpu = test::profiles().gpu("h200", "t");
  p.num_gpus = 1;
  p.parallel.tp = p.parallel.pp = p.parallel.vpp = 1;
  p.parallel.schedule = Schedule::one_f_one_b;
  p.parallel.sequence_parallel = false;
  p.parallel.recompute = Recompute::none;
  p.parallel.num_microbatches = 4;
  p.training.global_batch = 4;
  p.training.precision = Precision::bf16;
  p.training.attention = AttentionKernel::flash;
  return p;
}

TEST_CASE("eager vs compiled: the step grows by the extra bytes at HBM bandwidth plus the extra launches") {
  const Plan c = llama3_8b_one_gpu();
  Plan e = c;
  e.training.compiled_elementwise = false;
  const LayerMemoryBytes bc = layer_memory_bound_bytes(c), be = layer_memory_bound_bytes(e);
  const double k = c.gpu.gemm.kernel_overhead_s;
  const double dfwd = memory_bound_time_s(c.gpu, be.forward() - bc.forward()) + be.eager_extra_forward_launches * k;
  const double dbwd = memory_bound_time_s(c.gpu, be.backward() - bc.backward()) + be.eager_extra_backward_launches * k;
  REQUIRE(dfwd > 0);
  REQUIRE(dbwd > 0);
  const LayerCost lc = layer_cost(c), le = layer_cost(e);
  CHECK(le.forward_s - lc.forward_s == doctest::Approx(dfwd).epsilon(1e-9));
  CHECK(le.backward_input_s - lc.backward_input_s == doctest::Approx(dbwd).epsilon(1e-9));
  CHECK(le.backward_weight_s == lc.backward_weight_s);
  CHECK(le.gemm_forward_s == lc.gemm_forward_s);
  const double layers = static_cast<double>(c.model.layers), m = 4;
  CHECK(estimate(e).time.step_s - estimate(c).time.step_s == doctest::Approx(layers * m * (dfwd + dbwd)).epsilon(1e-6));
}

TEST_CASE("eager vs compiled under recompute: full and selective-op rerun the eager forward") {
  Plan c = llama3_8b_one_gpu();
  for (Recompute r : {Recompute::full, Recompute::selective_op}) {
    c.parallel.recompute = r;
    Plan e = c;
    e.training.compiled_elementwise = false;
    const LayerCost lc = layer_cost(c), le = layer_cost(e);
    REQUIRE(le.forward_s > lc.forward_s);
    // Full reruns the whole forward, selective-op its memory-bound ops (and matmuls, which eager leaves alone).
    CHECK(le.recompute_s - lc.recompute_s == doctest::Approx(le.forward_s - lc.forward_s).epsilon(1e-9));
  }
}

TEST_CASE("eager leaves LayerNorm, GeLU and learned positions alone; dropout + add becomes two kernels") {
  Plan c = test::korthikanti_175b();  // GPT-3: LayerNorm, GeLU, learned positions, dropout; tp 8 with SP
  REQUIRE(c.model.norm == NormType::layernorm);
  REQUIRE(c.model.dropout);
  Plan e = c;
  e.training.compiled_elementwise = false;
  const LayerMemoryBytes bc = layer_memory_bound_bytes(c), be = layer_memory_bound_bytes(e);
  // Forward: dropout and add apart move 5A + 1 per element instead of the fused 3A + 1 (A = 2: 4 bytes more), two
  // of them over the Tn = 2048 / 8 tokens of the SP shard x hidden 12288; backward the same bytes.
  CHECK(be.elementwise_forward - bc.elementwise_forward == doctest::Approx(2.0 * 4 * (2048 / 8) * 12288));
  CHECK(be.elementwise_backward == doctest::Approx(bc.elementwise_backward));
  CHECK(be.eager_extra_forward_launches == 2);  // 2 x (2 - 1)
  CHECK(be.eager_extra_backward_launches == 0);  // 2 x (2 - 2)
}

// bench/gpu/kernels.py --layer-variants on an H200 (bench/gpu/results/h200-2026-11-26/layers.json): one Llama 3 layer
// at 8192 tokens, forward + backward, eager and under torch.compile, no recompute. Measured gaps: 8B 23.658 - 21.063 =
// 2.595 ms, 70B 79.736 - 74.301 = 5.435 ms. parplan's gap (eager minus compiled layer, H200 profile, flash2) is
// printed beside it and checked to within 20%: on 2026-11-26 it was 2.97 ms (+15%) and 5.68 ms (+5%).
TEST_CASE("eager vs compiled layer gap against the H200 measurement (layers.json)") {
  std::ifstream in(std::string(PARPLAN_SOURCE_DIR) + "/bench/gpu/results/h200-2026-11-26/layers.json");
  REQUIRE(in.good());
  const nlohmann::json j = nlohmann::json::parse(in);
  for (const char* name : {"llama3-8b", "llama3-70b"}) {
    double eager_ms = 0, compiled_ms = 0;
    for (const auto& r : j["layer"]) {
      if (r["name"] != name || r["ac"] != "none" || r["b"] != 1 || r["s"] != 8192) continue;
      (r["compiled"].get<bool>() ? compiled_ms : eager_ms) = r["fwd_bwd_ms"].get<double>();
    }
    REQUIRE(eager_ms > 0);
    REQUIRE(compiled_ms > 0);
    Plan p = test::korthikanti_175b();
    p.model = test::profiles().model(name, "t");
    p.gpu = test::profiles().gpu("h200", "t");
    p.parallel.tp = 1;
    p.parallel.sequence_parallel = false;
    p.parallel.recompute = Recompute::none;
    p.training.seq_len = 8192;
    p.training.precision = Precision::bf16;
    p.training.attention = AttentionKernel::flash2;
    const auto pass_ms = [](const LayerCost& lc) {
      return (lc.forward_s + lc.backward_input_s + lc.backward_weight_s) * 1e3;
    };
    const double compiled = pass_ms(layer_cost(p));
    p.training.compiled_elementwise = false;
    const double eager = pass_ms(layer_cost(p));
    MESSAGE(std::string(name), ": measured eager ", eager_ms, " compiled ", compiled_ms, " ms; parplan eager ", eager,
            " compiled ", compiled, " ms");
    CHECK(eager - compiled == doctest::Approx(eager_ms - compiled_ms).epsilon(0.20));
  }
}
