// Tests for planner/cost/fp8: the fp8 operand casts as memory-bound work, per recipe.
#include <doctest/doctest.h>

#include "planner/cost/cost_model.hpp"
#include "planner/cost/fp8.hpp"
#include "planner/cost/gemm.hpp"
#include "planner/cost/model_states.hpp"
#include "planner/cost/zero3.hpp"
#include "planner/spec/config.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
// Llama 3 8B on 8 H100s, FSDP, one sequence of 8192 per microbatch (torchao's float8 benchmark layout).
Plan llama3_8b_fp8(Fp8Recipe recipe) {
  Plan p;
  p.model = test::profiles().model("llama3-8b", "test");
  p.gpu = test::profiles().gpu("h100", "test");
  p.cluster = test::profiles().cluster("dgx-h100", "test");
  p.parallel.dp = 8;
  p.parallel.zero_stage = 3;
  p.num_gpus = 8;
  p.training.precision = Precision::fp8;
  p.training.fp8_recipe = recipe;
  p.training.global_batch = 8;
  p.training.seq_len = 8192;
  return p;
}
}  // namespace

TEST_CASE("fp8 casts: every GEMM operand in 16 bits is cast forward, output gradients cast-transposed backward") {
  const Plan p = llama3_8b_fp8(Fp8Recipe::tensorwise);
  const double T = 8192, h = 4096, f = 14336, W = 218e6;
  const Fp8CastBytes c = fp8_cast_bytes(p, W);
  CHECK(c.inputs == doctest::Approx(T * (h + h + h + f)));                   // QKV, out-proj, MLP up, MLP down
  CHECK(c.output_grads == doctest::Approx(T * ((h + 2 * 1024) + h + 2 * f + h)));  // their outputs' gradients
  // Tensorwise scaling reads each bf16 tensor twice (amax, then the cast) and writes 1 byte; backward writes the
  // cast and its transpose, and transposes the saved fp8 inputs and weights.
  CHECK(c.forward == doctest::Approx((c.inputs + W) * (2 + 1 + 2)));
  CHECK(c.backward == doctest::Approx(c.output_grads * (2 + 2 + 2) + 2 * c.inputs + 2 * W));
  // Delayed scaling (amax from history) and MXFP8 (scales from the cast kernel) skip the amax pass.
  for (Fp8Recipe r : {Fp8Recipe::delayed, Fp8Recipe::mxfp8, Fp8Recipe::blockwise}) {
    const Fp8CastBytes d = fp8_cast_bytes(llama3_8b_fp8(r), W);
    CHECK(d.forward == doctest::Approx((c.inputs + W) * 3));
    CHECK(d.backward == doctest::Approx(c.output_grads * 4 + 2 * c.inputs + 2 * W));
  }
  // Rowwise (torchao's axiswise scales) casts forward as tensorwise does, but quantizes every backward operand again
  // from 16 bits along the backward GEMM's reduction dimension (amax read 2, cast read 2, write 1): the output
  // gradient once per backward GEMM, the saved input and the weight once each.
  const Fp8CastBytes row = fp8_cast_bytes(llama3_8b_fp8(Fp8Recipe::rowwise), W);
  CHECK(row.forward == doctest::Approx(c.forward));
  CHECK(row.backward == doctest::Approx(c.output_grads * 2 * (2 + 2 + 1) + c.inputs * (2 + 2 + 1) + W * (2 + 2 + 1)));
  // Per 8192-token Llama 3 8B layer: 352.3M gradient, 218.1M input and 218M weight elements, 5.70 GB against
  // tensorwise's 2.99 GB backward.
  CHECK(row.backward == doctest::Approx(5.7037e9).epsilon(0.001));
  CHECK(c.backward == doctest::Approx(2.9861e9).epsilon(0.001));
  // bf16 training casts nothing.
  Plan bf16 = p;
  bf16.training.precision = Precision::bf16;
  CHECK(fp8_cast_bytes(bf16, W).forward == 0.0);
}

// Rowwise against tensorwise in one layer's input-gradient backward: the extra bytes at achieved HBM bandwidth and
// four more cast launches (each output gradient quantized twice: 16 against 12); the forward is the same.
// torchtitan's float8 tensorwise TP (fp8_tp_gather): the QKV and MLP-up inputs are cast on this rank's 1/tp of the
// tokens before their all-gather (torchao PrepareFloat8ModuleInput / Float8ColwiseParallel), the attention-out and
// MLP-down output gradients likewise before the backward's (Float8RowwiseParallel, NoopFwToFloat8BwDynamic), whose
// gathered fp8 copy is then transposed alone. Llama 3 8B, tp 8, SP, 8192 tokens: S = 8192 x 4096 x 2 elements.
TEST_CASE("fp8 TP all-gathers: the gathered operands are cast on the shard, before the all-gather") {
  Plan p = llama3_8b_fp8(Fp8Recipe::tensorwise);
  p.parallel.tp = 8;
  p.parallel.dp = 1;
  p.parallel.zero_stage = 0;
  p.parallel.sequence_parallel = true;
  p.training.global_batch = 1;
  const double W = 218e6 / 8, S = 8192.0 * 4096 * 2;
  const Fp8CastBytes base = fp8_cast_bytes(p, W);
  p.training.fp8_tp_gather = true;
  REQUIRE(validate(p).ok());
  const Fp8CastBytes c = fp8_cast_bytes(p, W);
  CHECK(c.inputs == doctest::Approx(base.inputs));
  CHECK(c.output_grads == doctest::Approx(base.output_grads));
  CHECK(c.forward == doctest::Approx(base.forward - S * (1.0 - 1.0 / 8) * (2 + 1 + 2)));
  CHECK(c.backward == doctest::Approx(base.backward - S * (2 + 2 + 2) + S * ((2 + 1 + 2) / 8.0 + 2)));
  CHECK(c.forward < base.forward);
  CHECK(c.backward < base.backward);
}

TEST_CASE("fp8 rowwise: the backward's extra casts cost their bytes and four launches, the forward nothing") {
  const Plan tensorwise = llama3_8b_fp8(Fp8Recipe::tensorwise), rowwise = llama3_8b_fp8(Fp8Recipe::rowwise);
  REQUIRE(validate(rowwise).ok());
  const double W = layer_cost(tensorwise).params;
  const double extra_bytes = fp8_cast_bytes(rowwise, W).backward - fp8_cast_bytes(tensorwise, W).backward;
  const GpuSpec& g = tensorwise.gpu;
  CHECK(layer_cost(rowwise).backward_input_s - layer_cost(tensorwise).backward_input_s ==
        doctest::Approx(memory_bound_time_s(g, extra_bytes) + 4.0 * g.gemm.kernel_overhead_s).epsilon(1e-9));
  CHECK(layer_cost(rowwise).forward_s == doctest::Approx(layer_cost(tensorwise).forward_s).epsilon(1e-12));
}

TEST_CASE("fp8 casts are part of the layer's memory-bound passes and slow the layer down") {
  Plan p = llama3_8b_fp8(Fp8Recipe::tensorwise);
  REQUIRE(validate(p).ok());
  const LayerMemoryBytes b = layer_memory_bound_bytes(p);
  CHECK(b.fp8_cast_forward > 0);
  CHECK(b.elementwise_forward > b.fp8_cast_forward);  // the norms, residuals and activation besides
  Plan delayed = p;
  delayed.training.fp8_recipe = Fp8Recipe::delayed;
  CHECK(layer_cost(p).forward_s > layer_cost(delayed).forward_s);
  // The casts take back part of what the fp8 GEMMs save over bf16, not all of it.
  Plan bf16 = p;
  bf16.training.precision = Precision::bf16;
  CHECK(layer_cost(p).forward_s < layer_cost(bf16).forward_s);
}

TEST_CASE("fp8 parameter gather: weights held in fp8 take 2 bytes (fp8 + its transpose), gathers move 1 byte") {
  // Megatron-Core --fp8-param-gather (Transformer Engine fp8 parameters) / torchao's FSDP float8 all-gather.
  Plan p = llama3_8b_fp8(Fp8Recipe::tensorwise);
  Plan g = p;
  g.training.fp8_param_gather = true;
  REQUIRE(validate(p).ok());
  REQUIRE(validate(g).ok());
  // 16-bit weights + Transformer Engine's cached fp8 weight and transpose, against fp8 weights and their transpose;
  // torchao (16-bit saved inputs) casts one fp8 copy per forward.
  CHECK(model_state_options(p).weight_bytes + model_state_options(p).extra_weight_bytes == 4);
  CHECK(model_state_options(g).weight_bytes + model_state_options(g).extra_weight_bytes == 2);
  Plan torchao = p;
  torchao.training.fp8_saved_inputs = false;
  CHECK(model_state_options(torchao).weight_bytes + model_state_options(torchao).extra_weight_bytes == 3);
  CHECK(gathered_param_bytes(p) == 2.0);
  CHECK(gathered_param_bytes(g) == 1.0);
  // ZeRO-3: the gathered layer buffers hold 1 byte per parameter, and the per-layer gathers take less time.
  const double W = 218e6;
  CHECK(zero3_buffer_bytes(g, W) < zero3_buffer_bytes(p, W));
  CHECK(zero3_buffer_bytes(p, W) - zero3_buffer_bytes(g, W) == doctest::Approx(zero3_gathered_params(p, W)));
  CHECK(layer_cost(g).zero3_gather_s < layer_cost(p).zero3_gather_s);
  // The weights are cast once per step by the optimizer, not in each forward.
  CHECK(fp8_cast_bytes(p, W).forward - fp8_cast_bytes(g, W).forward == doctest::Approx(W * (2 + 1 + 2)));
  CHECK(fp8_cast_bytes(g, W).backward == doctest::Approx(fp8_cast_bytes(p, W).backward));
  // It needs fp8 training and a sharded parameter gather.
  Plan bf16 = g;
  bf16.training.precision = Precision::bf16;
  CHECK(validate(bf16).has(Reject::fp8_param_gather_invalid));
  Plan unsharded = g;
  unsharded.parallel.zero_stage = 0;
  CHECK(validate(unsharded).has(Reject::fp8_param_gather_invalid));
  unsharded.parallel.distributed_optimizer = true;
  CHECK(validate(unsharded).ok());
}

TEST_CASE("fp8 weight copy: the transformer layers' weights only, not the embedding, output layer or final norm") {
  // DeepSeek-V3 report (arXiv:2412.19437) Sec. 3.3.1 keeps the embedding and the output head in BF16; torchtitan
  // converts every nn.Linear but the output layer. Llama 3 8B on one GPU, no sharding, torchao's float8: the fp8
  // plan's weights exceed the bf16 plan's by one byte per layer parameter, 32 x 218.1M, not by one per parameter
  // (8.03B); Transformer Engine's cached weight and transpose by two.
  Plan p = llama3_8b_fp8(Fp8Recipe::tensorwise);
  p.training.fp8_saved_inputs = false;
  p.parallel.dp = 1;
  p.parallel.zero_stage = 0;
  p.num_gpus = 1;
  p.training.global_batch = 1;
  Plan bf16 = p;
  bf16.training.precision = Precision::bf16;
  REQUIRE(validate(p).ok());
  const PlanParamCounts counts = plan_param_counts(p);
  const double layers = 32.0 * counts.layer_params;
  CHECK(layers == doctest::Approx(6.98e9).epsilon(0.01));
  CHECK(stage_non_layer_params(p, 0, counts) == doctest::Approx(2.0 * 128256.0 * 4096.0 + 4096.0));
  CHECK(stage_memory(p, 0).weights - stage_memory(bf16, 0).weights == doctest::Approx(layers));
  CHECK(stage_memory(bf16, 0).weights == doctest::Approx(2.0 * stage_params(p, 0)));
  Plan te = p;
  te.training.fp8_saved_inputs = true;
  CHECK(stage_memory(te, 0).weights - stage_memory(bf16, 0).weights == doctest::Approx(2.0 * layers));
}
