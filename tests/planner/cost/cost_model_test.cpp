// Tests for planner/cost_model: the Korthikanti 2022 175B acceptance case and internal consistency of the breakdown.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "planner/spec/config.hpp"
#include "planner/cost/collectives.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/fp8.hpp"
#include "planner/cost/gemm.hpp"
#include "planner/cost/layout.hpp"
#include "planner/cost/model_states.hpp"
#include "planner/cost/pipeline.hpp"
#include "planner/cost/zero3.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

TEST_CASE("Korthikanti 2022 GPT-3 175B (64 A100-80GB, tp 8, pp 8, selective + SP): within 5% of 13.75 s and fits") {
  const Plan p = test::korthikanti_175b();
  REQUIRE(validate(p).ok());
  const Estimate e = estimate(p);
  CHECK(std::fabs(e.time.step_s - 13.75) / 13.75 < 0.05);
  CHECK(e.fits);
  CHECK(e.peak_memory_bytes < 80.0 * 1024 * 1024 * 1024);
  // Published MFU for this run: 51.4% (Korthikanti 2022 Table 5 / published-runs.json); ours from the same FLOP basis,
  // within 3% of it (relative: scale(0), doctest's default scale of 1 would let 0.36..0.67 pass).
  MESSAGE("MFU ", e.time.mfu, " (published 0.514)");
  CHECK(e.time.mfu == doctest::Approx(0.514).scale(0).epsilon(0.03));
}

TEST_CASE("the step-time terms add up to the step, fractions to one") {
  Plan p = test::korthikanti_175b();
  p.parallel.dp = 2;
  p.num_gpus = 128;
  p.training.global_batch = 128;
  const Estimate e = estimate(p);
  const TimeBreakdown& t = e.time;
  const double sum = t.compute_s + t.bubble_s + t.tp_comm_s + t.cp_comm_s + t.ep_comm_s + t.pp_comm_s +
                     t.zero3_exposed_s + t.dp_comm_exposed_s + t.optimizer_s;
  CHECK(sum == doctest::Approx(t.step_s).epsilon(1e-9));
  CHECK(t.dp_comm_total_s >= t.dp_comm_exposed_s);
  CHECK(t.dp_comm_total_s > 0);
  CHECK(t.tokens_per_s == doctest::Approx(128.0 * 2048 / t.step_s));
}

TEST_CASE("memory per stage: model states follow ZeRO, stage 0 holds the most activations under 1F1B") {
  Plan p = test::korthikanti_175b();
  p.parallel.schedule = Schedule::one_f_one_b;
  p.parallel.vpp = 1;
  const Estimate e = estimate(p);
  REQUIRE(e.memory.size() == 8);
  CHECK(e.memory[0].activations > e.memory[3].activations);
  CHECK(e.memory[0].in_flight_chunks == 8);
  CHECK(e.memory[7].in_flight_chunks == 1);
  const StageMemory& s3 = e.memory[3];
  const ModelStateBytes ms = model_state_bytes(s3.params, 1, model_state_options(p));
  CHECK(s3.weights + s3.grads + s3.optimizer == doctest::Approx(ms.total()));
  // Total parameters across stages = the model (tied embedding counted twice when pp > 1, as Megatron stores it).
  double params = 0;
  for (const auto& m : e.memory) params += m.params * 8;
  CHECK(params == doctest::Approx(174.6e9 + 51200.0 * 12288).epsilon(0.002));
  CHECK(peak_memory_bytes(p) == doctest::Approx(e.peak_memory_bytes));
}

TEST_CASE("fragmentation: a fraction of what the allocator cycles each step, not of what it keeps from start-up") {
  // Megatron-style states (a persistent gradient buffer): the allowance covers activations, recompute and ZeRO-3
  // working sets only; FSDP2's per-parameter gradients (freed by zero_grad every step) and ZeRO-2's unit of
  // unsharded gradient are cycled too; weights and optimizer states never.
  const auto cycled = [](const StageMemory& m) { return m.activations + m.recompute_working_set + m.zero3_buffers; };
  Plan p = test::korthikanti_175b();
  const double f = p.gpu.fragmentation_fraction;
  REQUIRE(f > 0);
  for (const StageMemory& m : estimate(p).memory) {
    CHECK(m.fragmentation == doctest::Approx(f * cycled(m)));
    CHECK(m.weights + m.optimizer > 0);
  }
  Plan z2 = test::korthikanti_175b_sharded_dp(2, 4);
  const StageMemory s2 = estimate(z2).memory.at(0);
  const PlanParamCounts pc = plan_param_counts(z2);
  const double unit = zero_unsharded_grad_bytes(z2, std::max(pc.layer_params, pc.dense_layer_params));
  CHECK(unit > 0);
  CHECK(s2.fragmentation == doctest::Approx(f * (cycled(s2) + unit)));
  Plan fsdp2 = test::korthikanti_175b_sharded_dp(3, 4);
  fsdp2.parallel.fsdp2 = true;
  const StageMemory s3 = estimate(fsdp2).memory.at(0);
  CHECK(s3.fragmentation == doctest::Approx(f * (cycled(s3) + s3.grads)));
  // The model's total is the tensors, the fixed allowances and that fragmentation.
  CHECK(s3.total == doctest::Approx(s3.weights + s3.grads + s3.optimizer + cycled(s3) + s3.workspace + s3.comm_buffers +
                                    s3.cuda_context + s3.fragmentation));
}

TEST_CASE("knobs move the estimate the right way") {
  Plan p = test::korthikanti_175b();
  const Estimate base = estimate(p);
  Plan full = p;
  full.parallel.recompute = Recompute::full;
  const Estimate ef = estimate(full);
  CHECK(ef.time.step_s > base.time.step_s);
  CHECK(ef.memory[0].activations < base.memory[0].activations);
  Plan dist = p;
  dist.parallel.dp = 4;
  dist.num_gpus = 256;
  dist.training.global_batch = 256;
  dist.parallel.distributed_optimizer = true;
  CHECK(estimate(dist).memory[0].optimizer < base.memory[0].optimizer / 3.9);
  Plan h100 = p;
  h100.gpu = test::profiles().gpu("h100", "t");
  h100.cluster = test::profiles().cluster("dgx-h100", "t");
  // 3.2x the peak at the Hopper training-step GEMM fraction (0.513, the A100's 0.791): still well under 2/3 the step.
  CHECK(estimate(h100).time.step_s < base.time.step_s / 1.5);
}

// Memory-bound traffic, pass by pass (cost_model.cpp): forward = norms 2 passes + residual adds 3 + activation 2;
// backward = norms 3 (read x, dy; write dx) + residual gradient adds 3 + activation 3 (read x, dy; write dx).
TEST_CASE("memory-bound bytes: backward counts the passes of each op's backward") {
  Plan p = test::korthikanti_175b();
  p.model.dropout = false;
  p.training.attention = AttentionKernel::flash;
  const double A = 2, T = 2048, h = 12288, f = 49152.0 / 8, Tn = T / 8;
  const LayerMemoryBytes b = layer_memory_bound_bytes(p);
  CHECK(b.elementwise_forward == doctest::Approx(Tn * h * A * (2 * 2 + 2 * 3) + 2 * T * f * A));
  CHECK(b.elementwise_backward == doctest::Approx(Tn * h * A * (2 * 3 + 2 * 3) + 3 * T * f * A));
  CHECK(b.scores_forward == 0);
  // With dropout: Megatron's fused bias-dropout-add reads x and the residual, writes the sum and a 1-byte mask.
  p.model.dropout = true;
  const LayerMemoryBytes d = layer_memory_bound_bytes(p);
  CHECK(d.elementwise_forward == doctest::Approx(Tn * h * A * 2 * 2 + 2 * (3 * A + 1) * Tn * h + 2 * T * f * A));
  CHECK(d.elementwise_backward == doctest::Approx(Tn * h * A * 2 * 3 + 2 * (5 * A + 1) * Tn * h + 3 * T * f * A));
  // Unfused attention: softmax (read, write) and dropout over the b * heads/tp * s * s scores; backward 3 passes.
  p.training.attention = AttentionKernel::unfused;
  const double scores = 1.0 * (96 / 8) * T * T;
  const LayerMemoryBytes u = layer_memory_bound_bytes(p);
  CHECK(u.scores_forward == doctest::Approx(scores * (2 * A + 2 * A + 1)));
  CHECK(u.scores_backward == doctest::Approx(scores * (3 * A + 2 * A + 1)));
}

// Korthikanti et al. 2022 Table 4 (22B, 8 A100, tp 8, one layer): full recompute without sequence parallelism
// 7.7 + 19.5 = 27.2 ms, selective recompute with sequence parallelism 7.2 + 13.1 = 20.3 ms: ratio 1.34.
TEST_CASE("Korthikanti 2022 Table 4: full recompute costs 1.34x selective + SP per layer (within 6%)") {
  Plan sel = test::korthikanti_175b();
  sel.model.hidden = 6144;
  sel.model.heads = 64;
  sel.model.kv_heads = 64;
  sel.model.ffn_hidden = 4 * 6144;
  sel.model.layers = 48;
  sel.num_gpus = 8;
  sel.parallel.pp = 1;
  sel.parallel.micro_batch = 4;
  sel.parallel.num_microbatches = 1;
  sel.parallel.schedule = Schedule::one_f_one_b;
  sel.parallel.vpp = 1;
  sel.training.global_batch = 4;
  Plan full = sel;
  full.parallel.recompute = Recompute::full;
  full.parallel.sequence_parallel = false;
  auto per_layer = [](const Plan& p) {
    const LayerCost lc = layer_cost(p);
    return lc.forward_s + lc.backward_input_s + lc.backward_weight_s + lc.recompute_s + lc.exposed_forward_comm_s +
           lc.exposed_backward_comm_s + lc.exposed_recompute_comm_s;
  };
  const double ratio = per_layer(full) / per_layer(sel);
  MESSAGE("per layer: full ", per_layer(full) * 1e3, " ms (published 27.2), selective+SP ", per_layer(sel) * 1e3,
          " ms (published 20.3)");
  MESSAGE("full / selective+SP per layer: ", ratio, " (published 1.34)");
  CHECK(ratio == doctest::Approx(27.2 / 20.3).scale(0).epsilon(0.06));
  // Each mode's time per layer within 10% of the published one.
  CHECK(per_layer(full) == doctest::Approx(27.2e-3).scale(0).epsilon(0.10));
  CHECK(per_layer(sel) == doctest::Approx(20.3e-3).scale(0).epsilon(0.10));
  // Sequence parallelism shortens the forward (Table 4: 7.2 vs 7.7 ms).
  Plan nosp = sel;
  nosp.parallel.sequence_parallel = false;
  CHECK(layer_cost(sel).forward_s < layer_cost(nosp).forward_s);
}

// Narayanan et al. 2021 Fig. 5: the f operator all-reduces the input gradient in backward, in the autograd graph, so
// without Megatron's asynchronous all-reduce every backward TP collective is on the critical path.
TEST_CASE("blocking backward TP collectives: the whole backward TP time is exposed") {
  Plan p = test::korthikanti_175b();
  const LayerCost async = layer_cost(p);
  p.parallel.async_tp_backward = false;
  const LayerCost blocking = layer_cost(p);
  CHECK(blocking.tp_comm_backward_s == doctest::Approx(async.tp_comm_backward_s));
  // Exposed backward TP = all of it; the asynchronous mode hides part of the reduce-scatter and the re-gather.
  CHECK(blocking.exposed_tp_s - blocking.tp_comm_forward_s - blocking.tp_comm_recompute_s ==
        doctest::Approx(blocking.tp_comm_backward_s));
  CHECK(async.exposed_tp_s < blocking.exposed_tp_s);
  CHECK(blocking.forward_s == doctest::Approx(async.forward_s));
  CHECK(estimate(p).time.tp_comm_s > estimate(test::korthikanti_175b()).time.tp_comm_s);
  // --overlap-tp hides against the GEMMs regardless.
  p.parallel.overlap_tp_comm = true;
  Plan q = p;
  q.parallel.async_tp_backward = true;
  CHECK(layer_cost(p).exposed_tp_s == doctest::Approx(layer_cost(q).exposed_tp_s));
}

// PyTorch's functional collectives on a dim other than 0 (torch/distributed/_functional_collectives.py): all_gather_tensor
// cats the ranks' chunks of the gathered tensor along gather_dim, reduce_scatter_tensor cats its input's chunks along
// scatter_dim into dim-0 order before the collective; each reads and writes the whole (gathered) tensor. torchtitan's
// DTensor TP shards [batch, seq, hidden] on dim 1, so each of its SP collectives pays one such copy. 175B (tp 8, SP,
// micro-batch 1, seq 2048, fp16): one collective's tensor is 2 x 2048 x 12288 = 50.33 MB; the forward runs 4 collectives
// (2 all-gathers, 2 reduce-scatters), the backward 6 (and the 2 re-gathers), full recompute the forward's 4 again.
TEST_CASE("TP collective copies: one read and write of the whole tensor per sequence-parallel collective") {
  Plan p = test::korthikanti_175b();
  REQUIRE(p.parallel.tp == 8);
  REQUIRE(p.parallel.sequence_parallel);
  const double tensor = 2.0 * 2048 * 12288;
  const double rate = p.gpu.hbm_bandwidth_Bps * p.gpu.hbm_efficiency;
  const LayerCost base = layer_cost(p);
  Plan c = p;
  c.parallel.tp_collective_copies = true;
  REQUIRE(validate(c).ok());
  const LayerCost copies = layer_cost(c);
  CHECK(copies.forward_s - base.forward_s == doctest::Approx(4 * 2 * tensor / rate).epsilon(1e-9));
  CHECK(copies.backward_input_s - base.backward_input_s == doctest::Approx(6 * 2 * tensor / rate).epsilon(1e-9));
  CHECK(copies.recompute_s == doctest::Approx(base.recompute_s).epsilon(1e-12));  // selective: no collective rerun
  // The collectives themselves are unchanged: the copies run on the compute stream.
  CHECK(copies.tp_comm_forward_s == doctest::Approx(base.tp_comm_forward_s));
  CHECK(copies.tp_comm_backward_s == doctest::Approx(base.tp_comm_backward_s));
  Plan full = c;
  full.parallel.recompute = Recompute::full;
  Plan full_base = p;
  full_base.parallel.recompute = Recompute::full;
  CHECK(layer_cost(full).recompute_s - layer_cost(full_base).recompute_s ==
        doctest::Approx(4 * 2 * tensor / rate).epsilon(1e-9));
  CHECK(estimate(c).time.step_s > estimate(p).time.step_s);
  // Without sequence parallelism (all-reduces, no gather dim) or without tp the plan is refused.
  Plan nosp = c;
  nosp.parallel.sequence_parallel = false;
  CHECK(validate(nosp).has(Reject::tp_collective_copies_invalid));
  Plan notp = c;
  notp.parallel.tp = 1;
  notp.parallel.dp *= 8;
  CHECK(validate(notp).has(Reject::tp_collective_copies_invalid));
}

// torchtitan's float8 tensorwise TP (parallelize_llama.py apply_tp with enable_float8_tensorwise_tp; torchao
// float8/float8_tensor_parallel.py): the column-parallel input is cast to float8 before its all-gather, the
// row-parallel output gradient before the backward all-gather; the reduce-scatters carry the 16-bit GEMM outputs.
// Every all-gather (forward 2, backward 2 and the 2 re-gathers) moves 1 byte per element, and so does its copy.
TEST_CASE("fp8 TP all-gathers: one byte per element in every all-gather and its copy, reduce-scatters unchanged") {
  Plan p = test::korthikanti_175b();
  p.gpu = test::profiles().gpu("h100", "test");
  p.cluster = test::profiles().cluster("dgx-h100", "test");
  p.training.precision = Precision::fp8;
  p.parallel.tp_collective_copies = true;
  REQUIRE(validate(p).ok());
  Plan f = p;
  f.training.fp8_tp_gather = true;
  REQUIRE(validate(f).ok());
  const LayerCost a = layer_cost(p), b = layer_cost(f);
  const double elements = 2048.0 * 12288;
  CHECK(a.tp_gather_bytes == doctest::Approx(2 * elements));
  CHECK(b.tp_gather_bytes == doctest::Approx(elements));
  CHECK(b.tp_bytes == doctest::Approx(a.tp_bytes));
  const LinkSpec& l = group_link(p, GroupKind::tp);
  const double saved = collective_time_s(Collective::all_gather, 2 * elements, 8, l) -
                       collective_time_s(Collective::all_gather, elements, 8, l);
  CHECK(a.tp_comm_forward_s - b.tp_comm_forward_s == doctest::Approx(2 * saved).epsilon(1e-9));
  CHECK(a.tp_comm_backward_s - b.tp_comm_backward_s == doctest::Approx(4 * saved).epsilon(1e-9));
  // The copies: 2 (forward) and 4 (backward) all-gathers at half the bytes; and the casts of the gathered operands on
  // the shard (fp8_cast_bytes, tests/planner/cost/fp8_test.cpp).
  const double rate = p.gpu.hbm_bandwidth_Bps * p.gpu.hbm_efficiency;
  const Fp8CastBytes ca = fp8_cast_bytes(p, a.params), cb = fp8_cast_bytes(f, b.params);
  CHECK(a.forward_s - b.forward_s == doctest::Approx((2 * 2 * elements + ca.forward - cb.forward) / rate).epsilon(1e-9));
  CHECK(a.backward_input_s - b.backward_input_s ==
        doctest::Approx((4 * 2 * elements + ca.backward - cb.backward) / rate).epsilon(1e-9));
  // Needs fp8, tp > 1 and sequence parallelism.
  Plan bf16 = f;
  bf16.training.precision = Precision::bf16;
  CHECK(validate(bf16).has(Reject::fp8_tp_gather_invalid));
  Plan nosp = f;
  nosp.parallel.sequence_parallel = false;
  nosp.parallel.tp_collective_copies = false;
  CHECK(validate(nosp).has(Reject::fp8_tp_gather_invalid));
}

// Tied embeddings with pp > 1: one all-reduce of the embedding gradient between the first and the last stage
// (Megatron-LM train_step / finalize_model_grads). 175B, tp 8: 51200 x 12288 / 8 fp16 values = 157.3 MB between
// two nodes (tp fills the node): 157.3 MB / (25 GB/s x 0.86) + 2 x 6 us = 7.33 ms.
TEST_CASE("tied embedding gradient all-reduce between the first and last stage") {
  Plan p = test::korthikanti_175b();
  REQUIRE(p.model.tied_embeddings);
  REQUIRE_FALSE(p.training.grad_fp32);
  const double bytes = 51200.0 * 12288 / 8 * 2;
  const double want = bytes / (25e9 * 0.86) + 2 * 6e-6;
  CHECK(embedding_grad_sync_s(p, 0) == doctest::Approx(want).epsilon(1e-9));
  CHECK(embedding_grad_sync_s(p, 7) == doctest::Approx(want).epsilon(1e-9));
  for (int64_t s = 1; s < 7; ++s) CHECK(embedding_grad_sync_s(p, s) == 0.0);
  // dp 1: the only gradient synchronisation of the step is this one, exposed in the tail.
  const Estimate e = estimate(p);
  CHECK(e.time.dp_comm_total_s == doctest::Approx(want).epsilon(1e-9));
  CHECK(e.time.dp_comm_exposed_s == doctest::Approx(want).epsilon(1e-9));
  Plan untied = p;
  untied.model.tied_embeddings = false;
  CHECK(embedding_grad_sync_s(untied, 0) == 0.0);
  Plan one = test::korthikanti_175b();
  one.parallel.pp = 1;
  CHECK(embedding_grad_sync_s(one, 0) == 0.0);
}

TEST_CASE("ZB-V: the first stage holds the output layer (the V's last chunk), the last stage none of it") {
  const Plan f = test::korthikanti_175b();  // pp 8 (interleaved, vpp 3), 12 layers per stage, tied embeddings
  Plan v = f;
  v.parallel.schedule = Schedule::zb_v;
  v.parallel.vpp = 1;  // the V's 2 chunks are implied
  REQUIRE(validate(v).ok());
  REQUIRE(v.parallel.output_stage() == 0);
  // Both ends of the model on stage 0: no tied-embedding all-reduce between stages, no second embedding copy.
  for (int64_t s = 0; s < 8; ++s) CHECK(embedding_grad_sync_s(v, s) == 0.0);
  const PlanParamCounts cf = plan_param_counts(f), cv = plan_param_counts(v);
  CHECK(stage_params(v, 7, cv) == doctest::Approx(stage_params(v, 3, cv)));
  CHECK(stage_params(v, 0, cv) - stage_params(f, 0, cf) == doctest::Approx(static_cast<double>(cf.counts.final_norm)));
  // Activations: every stage holds 2 min(p, m) half-stage chunks (1F1B's stage-0 p microbatches); stage 0 also the
  // output layer's, the last stage only its layers'.
  const StageMemory s0 = stage_memory(v, 0), s3 = stage_memory(v, 3), s7 = stage_memory(v, 7);
  for (const StageMemory* s : {&s0, &s3, &s7}) CHECK(s->in_flight_chunks == 16);
  CHECK(s7.activations == doctest::Approx(s3.activations));
  CHECK(s0.activations > s3.activations);
  // A middle stage's layers: p whole microbatches until their W, as ZB-H1 holds them (Qi et al.: both p M_B).
  Plan h1 = v;
  h1.parallel.schedule = Schedule::zero_bubble;
  CHECK(s3.activations == doctest::Approx(stage_memory(h1, 3).activations));
}

// Unfused gradient accumulation (Megatron-LM 2021 local DDP: param.main_grad.add_(param.grad) once per parameter and
// microbatch): read the buffer, read the 16-bit weight gradient, write the buffer.
TEST_CASE("unfused gradient accumulation: bytes per parameter and where the pass sits") {
  Plan p = test::korthikanti_175b();
  REQUIRE_FALSE(p.training.grad_fp32);
  REQUIRE(p.training.fused_grad_accumulation);
  CHECK(grad_accumulation_bytes(p, 1e9) == 0.0);
  const LayerCost fused = layer_cost(p);
  CHECK(fused.grad_accumulation_s == 0.0);
  p.training.fused_grad_accumulation = false;
  CHECK(grad_accumulation_bytes(p, 1e9) == doctest::Approx(6e9));  // 2 + 2 + 2 bytes (fp16 buffer)
  p.training.grad_fp32 = true;
  CHECK(grad_accumulation_bytes(p, 1e9) == doctest::Approx(10e9));  // 4 + 2 + 4 bytes (fp32 main_grad)
  p.training.grad_fp32 = false;
  const LayerCost lc = layer_cost(p);
  // 175B, tp 8: 12 h^2 / 8 weights (+ biases, norms) per layer; the pass adds 6 bytes per parameter.
  CHECK(lc.params == doctest::Approx(12.0 * 12288 * 12288 / 8).epsilon(0.001));
  const double want = lc.params * 6.0 / (p.gpu.hbm_bandwidth_Bps * p.gpu.hbm_efficiency) + 4 * p.gpu.gemm.kernel_overhead_s;
  CHECK(lc.grad_accumulation_s == doctest::Approx(want).epsilon(1e-12));
  CHECK(lc.backward_weight_s == doctest::Approx(fused.backward_weight_s + want).epsilon(1e-12));
  CHECK(lc.forward_s == fused.forward_s);
  CHECK(lc.backward_input_s == fused.backward_input_s);
  // The embedding (first stage) and the tied copy on the last stage (pp > 1) are accumulated too.
  const EdgeCost e0 = edge_cost(test::korthikanti_175b()), e1 = edge_cost(p);
  const double emb = grad_accumulation_bytes(p, 51200.0 * 12288 / 8);
  CHECK(e1.embedding_backward_s - e0.embedding_backward_s >= memory_bound_time_s(p.gpu, emb));
  CHECK(e1.output_backward_s - e0.output_backward_s >= memory_bound_time_s(p.gpu, emb));
  // ZeRO-2/3 accumulate the reduce-scattered shard only (without pipelining: with pp > 1 they run as ZeRO-1).
  p.parallel.zero_stage = 2;
  p.parallel.dp = 4;
  CHECK(grad_accumulation_bytes(p, 1e9) == doctest::Approx(6e9));
  p.parallel.pp = 1;
  CHECK(grad_accumulation_bytes(p, 1e9) == doctest::Approx(6e9 / 4));
}

// Narayanan et al. 2021 Table 1 and Korthikanti et al. 2022 Table 5 ran the same 1T per-pipeline plan (tp 8, pp 64,
// micro-batch 1, 512 microbatches, full recompute, fp16) on Selene: 102.63 s (2021, dp 6) and 94.42 s (2022, dp 1),
// 8.7% apart. The 2021 code differs in what its rows state: blocking backward TP all-reduce, the gradient
// accumulation pass, local DDP (all-reduce after the backward). The model must reproduce that gap.
TEST_CASE("Megatron-LM 2021 vs 2022 on one 1T plan: the published 8.7% gap") {
  Plan p22 = test::korthikanti_175b();
  p22.model.layers = 128;
  p22.model.hidden = 25600;
  p22.model.heads = 160;
  p22.model.kv_heads = 160;
  p22.model.ffn_hidden = 4 * 25600;
  p22.num_gpus = 512;
  p22.parallel.pp = 64;
  p22.parallel.schedule = Schedule::one_f_one_b;
  p22.parallel.vpp = 1;
  p22.parallel.num_microbatches = 512;
  p22.parallel.recompute = Recompute::full;
  p22.parallel.sequence_parallel = false;
  p22.training.global_batch = 512;
  Plan p21 = p22;
  p21.num_gpus = 3072;
  p21.parallel.dp = 6;
  p21.training.global_batch = 3072;
  p21.parallel.async_tp_backward = false;
  p21.parallel.overlap_dp_comm = false;
  p21.training.fused_grad_accumulation = false;
  const double ratio = estimate(p21).time.step_s / estimate(p22).time.step_s;
  MESSAGE("2021 / 2022 step time: ", ratio, " (published 102.63 / 94.42 = ", 102.63 / 94.42, ")");
  CHECK(ratio == doctest::Approx(102.63 / 94.42).scale(0).epsilon(0.015));
  // Without the accumulation pass the model explains less than two thirds of the gap.
  Plan no_pass = p21;
  no_pass.training.fused_grad_accumulation = true;
  CHECK(estimate(no_pass).time.step_s / estimate(p22).time.step_s - 1.0 < 0.66 * (102.63 / 94.42 - 1.0));
}

// Narayanan et al. 2021 Sec. 4.1: with scatter-gather each TP rank sends b s h / tp elements; without it (DeepSpeed's
// PipelineEngine) the whole b s h; sequence parallelism splits the tensor either way.
TEST_CASE("pipeline send bytes: scatter-gather splits the activation over the TP ranks") {
  Plan p = test::korthikanti_175b();
  p.parallel.sequence_parallel = false;
  const double full = 2.0 * 1 * 2048 * 12288;  // fp16, micro-batch 1
  CHECK(p2p_bytes(p) == doctest::Approx(full / 8));
  p.parallel.p2p_scatter_gather = false;
  CHECK(p2p_bytes(p) == doctest::Approx(full));
  CHECK(p2p_time_s(p) > 7.0 * [&] { Plan q = p; q.parallel.p2p_scatter_gather = true; return p2p_time_s(q); }());
  p.parallel.sequence_parallel = true;
  CHECK(p2p_bytes(p) == doctest::Approx(full / 8));
}

TEST_CASE("ZeRO-2/3 data-parallel tail: the link's backlog, the last microbatch's reduce-scatter, ZeRO-2's gather") {
  for (int zero : {2, 3}) {
    CAPTURE(zero);
    const Plan one = test::korthikanti_175b_sharded_dp(zero, 1);
    REQUIRE(validate(one).ok());
    const Estimate e1 = estimate(one);
    const DpCost dc = dp_cost(one, stage_params(one, 0));
    REQUIRE(dc.per_microbatch);
    // The total: a reduce-scatter per microbatch, plus (ZeRO-2) the updated parameters' all-gather once per step.
    for (int64_t m : {1, 8}) {
      const Estimate e = estimate(test::korthikanti_175b_sharded_dp(zero, m));
      CHECK(e.time.dp_comm_total_s ==
            doctest::Approx(static_cast<double>(m) * dc.grad_reduce_s + (zero == 2 ? dc.param_gather_s : 0.0)));
    }
    CHECK((dc.param_gather_s > 0) == (zero == 2));
    // Exposed: the last microbatch's spill past its backward window, or the link's backlog when a microbatch's
    // link work (ZeRO-3: 2 gathers per layer, full recompute's forward finding FSDP's block gathered, and the
    // reduce-scatter) outlasts its compute.
    const Plan p32 = test::korthikanti_175b_sharded_dp(zero, 32);
    const Estimate e32 = estimate(p32);
    const double link = (zero == 3 ? 2.0 * 96 * e32.layer.zero3_gather_s : 0.0) + dc.grad_reduce_s;
    const double cycle = e32.stages[0].per_microbatch_s;
    const double gather2 = zero == 2 ? std::max(dc.param_gather_s / static_cast<double>(dc.buckets),
                                                dc.param_gather_s - e32.stages[0].forward_s - e32.layer.exposed_forward_comm_s * 96)
                                     : 0.0;
    const double last = e1.time.dp_comm_exposed_s - (zero == 2 ? gather2 : 0.0);
    // No reduce-scatter leaves before the first forward is done, by when the link has done that forward's gathers.
    const double first = e32.stages[0].forward_s + e32.layer.exposed_forward_comm_s * 96;
    const double forward_gathers = zero == 3 ? 96 * e32.layer.zero3_gather_s : 0.0;
    const double backlog = first + 32.0 * (link - cycle) - std::min(first, forward_gathers);
    CHECK(e1.time.dp_comm_exposed_s > 0);
    // (to 1e-5: `first` rebuilds the forward from the per-layer terms; the lead is seconds here)
    CHECK(e32.time.dp_comm_exposed_s == doctest::Approx(std::max(last, backlog) + gather2).epsilon(1e-5));
    // ZeRO-2 keeps up with the link here: 32 microbatches expose what one does, not 32 spills.
    if (zero == 2) CHECK(e32.time.dp_comm_exposed_s == doctest::Approx(e1.time.dp_comm_exposed_s).epsilon(1e-9));
  }
  // A link that cannot keep up (0.5 GB/s per GPU between nodes): the backlog grows by the excess every microbatch.
  Plan slow1 = test::korthikanti_175b_sharded_dp(3, 1), slow8 = test::korthikanti_175b_sharded_dp(3, 8);
  for (Plan* p : {&slow1, &slow8}) p->cluster.inter_node.bandwidth_Bps = 0.5e9;
  const Estimate s1 = estimate(slow1), s8 = estimate(slow8);
  const double excess8 = s8.time.dp_comm_exposed_s - s1.time.dp_comm_exposed_s;
  CHECK(excess8 > 0);
  const Plan slow16 = [&] {
    Plan p = test::korthikanti_175b_sharded_dp(3, 16);
    p.cluster.inter_node.bandwidth_Bps = 0.5e9;
    return p;
  }();
  const double excess16 = estimate(slow16).time.dp_comm_exposed_s - s1.time.dp_comm_exposed_s;
  CHECK(excess16 > 1.9 * excess8);  // linear in m once the backlog dominates
}

TEST_CASE("dp x cp collectives take the link of the whole dp x cp group, also with dp 1") {
  // tp 8 on 8-GPU nodes, 16 GPUs: dp 2 x cp 1 and dp 1 x cp 2 reduce the same gradients over the same two ranks
  // (stride 8, one per node), so both run on the inter-node link; dp 1 used to take the dp group (one rank) as
  // intra-node and priced the cross-node reduction at NVLink speed.
  Plan a = test::korthikanti_175b_sharded_dp(1, 4);
  a.parallel.dp = 2;
  a.num_gpus = 16;
  a.training.global_batch = 8;
  Plan b = a;
  b.parallel.dp = 1;
  b.parallel.cp = 2;
  b.training.global_batch = 4;
  const double params = 1e9;
  const DpCost da = dp_cost(a, params), db = dp_cost(b, params);
  CHECK(da.group == 2);
  CHECK(db.group == 2);
  CHECK(db.grad_reduce_s == doctest::Approx(da.grad_reduce_s).epsilon(1e-12));
  CHECK(db.param_gather_s == doctest::Approx(da.param_gather_s).epsilon(1e-12));
  CHECK(db.grad_reduce_s == doctest::Approx(collective_time_s(Collective::reduce_scatter, 2.0 * params, 2,
                                                              a.cluster.inter_node)));
  // ZeRO-3 gathers: the same.
  a.parallel.zero_stage = 3;
  b.parallel.zero_stage = 3;
  CHECK(estimate(b).layer.zero3_gather_s == doctest::Approx(estimate(a).layer.zero3_gather_s).epsilon(1e-12));
}

TEST_CASE("first stage: the word embedding is split over tp, learned positions are whole on every tp rank") {
  // Megatron-LM: VocabParallelEmbedding splits the vocabulary over tp; the position embedding is a plain
  // torch.nn.Embedding(max_sequence_length, hidden), replicated. GPT-3 175B at tp 8: 51200 x 12288 / 8 + 2048 x 12288.
  Plan p = test::korthikanti_175b();
  const double layers = static_cast<double>(stage_layers(p, 0));
  const double layer = stage_params(p, 1) / static_cast<double>(stage_layers(p, 1));  // a middle stage: layers only
  CHECK(stage_params(p, 0) - layers * layer == doctest::Approx(78643200.0 + 25165824.0));
  CHECK(count_params(p.model).embedding_per_tp_rank(8) == 78643200.0 + 25165824.0);
  CHECK(total_params(p.model) == 174615846912);  // unchanged: positions counted once
}

TEST_CASE("dp_reduction_tail_s over given windows (a V schedule's last W per chunk): the same queue, in window order") {
  // The interleaved case above as windows: chunk 1 from 2.5 before the end for 0.5, chunk 0 from 0.5 for 0.5.
  const std::array<ChunkWindow, 2> interleaved{ChunkWindow{0.5, 0.5}, ChunkWindow{2.5, 0.5}};
  CHECK(dp_reduction_tail_s(0.1, 30, interleaved) == doctest::Approx(dp_reduction_tail_s(0.1, 30, 1.0, 2, 4)));
  // Chunk 0's window first (2.0 before the end): its 15 buckets end at -0.5; chunk 1's (0.3 before, 0.3 long) start
  // at -0.3 and end at 1.2. Listed the other way round, the same (the windows are taken in the order they start).
  const std::array<ChunkWindow, 2> v{ChunkWindow{2.0, 0.4}, ChunkWindow{0.3, 0.3}};
  CHECK(dp_reduction_tail_s(0.1, 30, v) == doctest::Approx(1.2));
  // Odd buckets: chunk 0 holds the extra one (the simulator's split), 16 x 0.1 from -2.0, then 15 from -0.3.
  CHECK(dp_reduction_tail_s(0.1, 31, v) == doctest::Approx(1.2));
  const std::array<ChunkWindow, 2> late_first{ChunkWindow{0.3, 0.3}, ChunkWindow{2.0, 0.4}};
  CHECK(dp_reduction_tail_s(0.1, 30, late_first) == doctest::Approx(1.2));
}

TEST_CASE("dp_reduction_tail_s: one chunk is max(bucket, reduce - backward); interleaved chunks queue from their own "
          "last backward") {
  // One chunk: the buckets leave during the last backward (30 x 0.1 = 3.0 over a backward of 1.0).
  CHECK(dp_reduction_tail_s(0.1, 30, 1.0, 1, 8) == doctest::Approx(2.0));
  CHECK(dp_reduction_tail_s(0.1, 5, 1.0, 1, 8) == doctest::Approx(0.1));
  // v = 2, p = 4, backward 1.0 (0.5 per chunk), 30 buckets of 0.1 (15 per chunk). Chunk 1's last backward starts
  // (1 x 4 + 1) x 0.5 = 2.5 before the end and its buckets are done at -1.0; chunk 0's starts at -0.5, its buckets end
  // at max(-0.5, -1.0) + 1.5 = 1.0: exposed 1.0 (one chunk over the same backward: 2.0).
  CHECK(dp_reduction_tail_s(0.1, 30, 1.0, 2, 4) == doctest::Approx(1.0));
  // A long reduction queues: v = 3, p = 2, backward 0.3 (0.1 per chunk), 300 buckets of 0.01 (1.0 per chunk): chunk 2
  // starts at -0.5, ends 0.5; chunk 1 at 1.5; chunk 0 at 2.5 (the link never idles once chunk 2 starts: 3.0 - 0.5).
  CHECK(dp_reduction_tail_s(0.01, 300, 0.3, 3, 2) == doctest::Approx(2.5));
  // Fewer buckets than chunks: whole buckets go to the first chunks (one bucket, v = 2: chunk 0 holds it), and the
  // result never exceeds the unoverlapped buckets x bucket_s (a per-chunk bucket term gave 1.3 for 1.0 here).
  CHECK(dp_reduction_tail_s(1.0, 1, 0.2, 2, 2) == doctest::Approx(1.0));
  CHECK(dp_reduction_tail_s(1.0, 3, 0.2, 4, 2) <= 3.0);
  for (int64_t buckets : {1, 2, 3, 5, 8, 40}) {
    for (int64_t v : {1, 2, 3, 4, 6}) {
      for (double bwd : {0.01, 0.5, 2.0, 50.0}) {
        const double tail = dp_reduction_tail_s(0.2, buckets, bwd, v, 4);
        CHECK(tail <= 0.2 * static_cast<double>(buckets) + 1e-12);
        CHECK(tail >= 0.2 - 1e-12);  // chunk 0 always holds a bucket, and the last one cannot hide
      }
    }
  }
}

namespace {
// Mixtral 8x7B on 64 GPUs: tp 2, pp 2, dp 16, ep 8, ZeRO-1, full recompute, 4 microbatches of seq 4096.
Plan mixtral_tp2_pp2_dp16_ep8() {
  Plan p = test::korthikanti_175b_sharded_dp(1, 4);
  p.model = test::profiles().model("mixtral-8x7b", "test");
  p.parallel.pp = 2;
  p.parallel.tp = 2;
  p.parallel.dp = 16;
  p.parallel.ep = 8;
  p.num_gpus = 64;
  p.training.global_batch = 64;
  p.training.seq_len = 4096;
  return p;
}
}  // namespace

TEST_CASE("MoE optimizer step: expert states are updated over dp cp / ep ranks, as stage_memory shards them") {
  Plan p = mixtral_tp2_pp2_dp16_ep8();
  REQUIRE(validate(p).ok());
  const PlanParamCounts counts = plan_param_counts(p);
  for (int64_t i = 0; i < p.parallel.pp; ++i) {
    const double all = stage_params(p, i, counts), experts = stage_expert_params(p, i, counts.counts);
    CAPTURE(i);
    CHECK(experts > 0.7 * all);  // Mixtral's 8 experts: 78% of a stage on this mesh (the rest: attention, embeddings)
    // Adam reads and writes the owned fp32 master weights and moments (12 bytes each): twice the states in memory.
    const OptimizerStepBytes b = stage_optimizer_step_bytes(p, all, moe_expert_params(p, i, counts.counts));
    CHECK(b.states == doctest::Approx(2.0 * stage_memory(p, i).optimizer).scale(0).epsilon(1e-12));
    CHECK(b.states == doctest::Approx(24.0 * ((all - experts) / 16.0 + experts / 2.0)).scale(0).epsilon(1e-12));
    // Sharding the experts over all 16 dp ranks, as before, undercounted the step about ep = 8 times.
    CHECK(optimizer_step_s(p, all, experts) > 6.0 * memory_bound_time_s(p.gpu, optimizer_step_bytes(all, 16, model_state_options(p)).total()));
  }
  // A dense model's MLP counts as its one expert, sharded over the same dp cp group: nothing changes there.
  const Plan dense = test::korthikanti_175b_sharded_dp(1, 4);
  const PlanParamCounts dc = plan_param_counts(dense);
  CHECK(moe_expert_params(dense, 0, dc.counts) == 0.0);
  CHECK(optimizer_step_s(dense, stage_params(dense, 0, dc), moe_expert_params(dense, 0, dc.counts)) ==
        doctest::Approx(memory_bound_time_s(dense.gpu, optimizer_step_bytes(stage_params(dense, 0, dc), 8,
                                                                              model_state_options(dense)).total()))
            .scale(0).epsilon(1e-12));
}

TEST_CASE("MoE DP reduction: experts' gradients over the expert-data-parallel group, the rest over dp cp") {
  Plan p = mixtral_tp2_pp2_dp16_ep8();
  REQUIRE(validate(p).ok());
  const PlanParamCounts counts = plan_param_counts(p);
  const double all = stage_params(p, 0, counts), experts = stage_expert_params(p, 0, counts.counts);
  const double g = static_cast<double>(p.training.grad_bytes());
  // dp 16, ep 8: the experts are reduced over 2 ranks (stride ep tp = 16 ranks: across nodes), the rest over 16.
  CHECK(expert_dp_size(p.parallel) == 2);
  const LinkSpec& nic = p.cluster.inter_node;
  CHECK(&expert_dp_link(p) == &nic);
  const DpCost dc = stage_dp_cost(p, 0, counts);
  CHECK(dc.grad_bytes == doctest::Approx(all * g).scale(0).epsilon(1e-12));
  const double expected = collective_time_s(Collective::reduce_scatter, (all - experts) * g, 16, nic) +
                          collective_time_s(Collective::reduce_scatter, experts * g, 2, nic);
  CHECK(dc.grad_reduce_s == doctest::Approx(expected).scale(0).epsilon(1e-12));
  // Reduced over all 16 ranks, as before, the experts cost 15/8 as much link time.
  CHECK(dp_cost(p, all).grad_reduce_s > 1.5 * dc.grad_reduce_s);
  // dp 8 = ep: each expert has one copy, so only the dense part is reduced (and gathered).
  p.parallel.dp = 8;
  p.num_gpus = 32;
  p.training.global_batch = 32;
  REQUIRE(validate(p).ok());
  const PlanParamCounts c8 = plan_param_counts(p);
  const double all8 = stage_params(p, 0, c8), experts8 = stage_expert_params(p, 0, c8.counts);
  const DpCost d8 = stage_dp_cost(p, 0, c8);
  CHECK(expert_dp_size(p.parallel) == 1);
  CHECK(d8.grad_bytes == doctest::Approx((all8 - experts8) * g).scale(0).epsilon(1e-12));
  CHECK(d8.param_gather_s ==
        doctest::Approx(collective_time_s(Collective::all_gather, 2.0 * (all8 - experts8), 8,
                                          group_link(p, GroupKind::dp_cp))).scale(0).epsilon(1e-12));
  // A dense model is one part over dp cp, as before.
  const Plan dense = test::korthikanti_175b_sharded_dp(1, 4);
  const PlanParamCounts dcounts = plan_param_counts(dense);
  const DpCost dd = stage_dp_cost(dense, 0, dcounts);
  CHECK(dd.grad_reduce_s == collective_time_s(Collective::reduce_scatter, stage_params(dense, 0, dcounts) *
                                                  static_cast<double>(dense.training.grad_bytes()), 8,
                                              group_link(dense, GroupKind::dp_cp)));
}

TEST_CASE("MoE ZeRO-3: a layer's experts are gathered over the expert-data-parallel group, the rest over dp cp") {
  Plan p = mixtral_tp2_pp2_dp16_ep8();
  p.parallel.zero_stage = 3;
  p.parallel.pp = 1;
  p.parallel.dp = 32;
  p.training.global_batch = 128;
  REQUIRE(validate(p).ok());
  const LayerCost lc = layer_cost(p);
  const ParamCounts c = count_params(p.model);
  const double experts = static_cast<double>(c.mlp_per_expert) * (8.0 / 8.0) / 2.0;  // 8 experts over ep 8, tp 2
  REQUIRE(expert_dp_size(p.parallel) == 4);
  const double expected =
      collective_time_s(Collective::all_gather, 2.0 * (lc.params - experts), 32, group_link(p, GroupKind::dp_cp)) +
      collective_time_s(Collective::all_gather, 2.0 * experts, 4, expert_dp_link(p));
  CHECK(lc.zero3_gather_s == doctest::Approx(expected).scale(0).epsilon(1e-12));
  // Over all 32 ranks the experts' gather would cost 31/32 of their bytes instead of 3/4.
  CHECK(lc.zero3_gather_s <
        0.9 * collective_time_s(Collective::all_gather, 2.0 * lc.params, 32, group_link(p, GroupKind::dp_cp)));
}

TEST_CASE("ZeRO-2/3 with pipelining run as ZeRO-1 within the step (FSDP with PP, torchtitan / Llama 3)") {
  // GPT-3 175B at tp 8 pp 8 dp 2: ZeRO-3 and ZeRO-2 cost what the distributed optimizer costs, memory and time.
  Plan dist = test::korthikanti_175b();
  dist.parallel.dp = 2;
  dist.num_gpus = 128;
  dist.training.global_batch = 128;
  dist.parallel.distributed_optimizer = true;
  REQUIRE(validate(dist).ok());
  const Estimate d = estimate(dist);
  for (int zero : {2, 3}) {
    Plan z = dist;
    z.parallel.distributed_optimizer = false;
    z.parallel.zero_stage = zero;
    REQUIRE(validate(z).ok());
    CHECK(z.parallel.step_zero_stage() == 1);
    const Estimate e = estimate(z);
    CAPTURE(zero);
    CHECK(e.peak_memory_bytes == doctest::Approx(d.peak_memory_bytes).epsilon(1e-12));
    CHECK(e.time.step_s == doctest::Approx(d.time.step_s).epsilon(1e-12));
    CHECK(e.time.zero3_exposed_s == 0.0);
  }
  // Without pipelining the stage is what it says: ZeRO-3 shards the weights.
  Plan flat = test::korthikanti_175b_sharded_dp(3, 4);
  CHECK(flat.parallel.step_zero_stage() == 3);
  CHECK(estimate(flat).memory[0].weights < estimate(test::korthikanti_175b_sharded_dp(1, 4)).memory[0].weights / 4);
}

TEST_CASE("memory: an explicit per-chunk layout charges each chunk's layers for the microbatches it holds") {
  Plan even = test::korthikanti_175b();  // 96 layers, pp 8, interleaved vpp 3, 64 microbatches: chunks of 4 layers
  Plan same = even;
  same.parallel.stage_layout = parse_stage_layout("4/4/4,4/4/4,4/4/4,4/4/4,4/4/4,4/4/4,4/4/4,4/4/4", "--stage-layers");
  Plan light = even;  // stage 0's chunk 0 one layer short, stage 3's chunk 0 one more
  light.parallel.stage_layout = parse_stage_layout("3/4/4,4/4/4,4/4/4,5/4/4,4/4/4,4/4/4,4/4/4,4/4/4", "--stage-layers");
  REQUIRE(validate(light).ok());
  const StageMemoryInputs in = stage_memory_inputs(even);
  for (int64_t i = 0; i < 8; ++i) {
    CHECK(stage_memory(same, i, in).activations == doctest::Approx(stage_memory(even, i, in).activations));
  }
  // Megatron-LM's order holds chunk 0 of in_flight_first_chunks microbatches at the stage's peak: one layer more in
  // chunk 0 is that many layers' activations more; one fewer, at most that many fewer (the peak may move to where
  // the order holds more of the other chunks) and fewer than the even split's.
  const int64_t first = in_flight_first_chunks(Schedule::interleaved, 8, 64, 3, 0);
  const double even0 = stage_memory(even, 0, in).activations, light0 = stage_memory(light, 0, in).activations;
  CHECK(light0 < even0);
  CHECK(light0 >= even0 - static_cast<double>(first) * in.layer_activation_bytes);
  const int64_t first3 = in_flight_first_chunks(Schedule::interleaved, 8, 64, 3, 3);
  CHECK(stage_memory(light, 3, in).activations ==
        doctest::Approx(stage_memory(even, 3, in).activations +
                        static_cast<double>(first3) * in.layer_activation_bytes));
}

TEST_CASE("the attention kernel sets the attention core's rate: FlashAttention-2 against the fused kernel") {
  Plan p = test::korthikanti_175b();
  p.gpu = test::profiles().gpu("h100", "t");
  p.gpu.gemm.kernel_overhead_s = 0;
  p.training.attention = AttentionKernel::flash;
  const LayerCost fused = layer_cost(p);
  p.training.attention = AttentionKernel::flash2;
  const LayerCost fa2 = layer_cost(p);
  const GemmEfficiency& e = p.gpu.gemm;
  CHECK(fa2.attention_forward_s / fused.attention_forward_s == doctest::Approx(e.attention_fraction / e.flash2_fraction));
  // The backward is 2.5x the forward's FLOPs at each kernel's backward rate; everything else is the same work.
  const double bwd_delta = 2.5 * fused.attention_forward_s * e.attention_fraction *
                           (1.0 / e.flash2_backward_fraction - 1.0 / e.attention_backward_fraction);
  CHECK(fa2.backward_input_s - fused.backward_input_s == doctest::Approx(bwd_delta));
  CHECK(fa2.backward_weight_s == doctest::Approx(fused.backward_weight_s));
}

TEST_CASE("eager cross entropy: the loss's backward working set once, on the output stage only") {
  Plan p = test::korthikanti_175b();  // pp > 1: the output stage is the last
  REQUIRE(p.parallel.pp > 1);
  Plan eager = p;
  eager.training.fused_cross_entropy = false;
  const double ws = loss_backward_working_set_bytes(p.model, activation_shape(eager));
  REQUIRE(ws > 0);
  const int64_t last = p.parallel.output_stage();
  CHECK(stage_memory(eager, last).activations - stage_memory(p, last).activations == doctest::Approx(ws));
  CHECK(stage_memory(eager, 0).activations == doctest::Approx(stage_memory(p, 0).activations));
  // Time: its passes over the fp32 logits move 22 + 26 bytes per logit where the fused one moves 12 + 12
  // (EdgeBytes::cross_entropy), on the output stage only.
  const double logits = 2048.0 * 51200.0 / 8.0;
  const EdgeCost fused = edge_cost(p), unfused = edge_cost(eager);
  CHECK(unfused.output_forward_s + unfused.output_backward_s - fused.output_forward_s - fused.output_backward_s ==
        doctest::Approx(memory_bound_time_s(p.gpu, 24.0 * logits)));
  CHECK(unfused.embedding_forward_s + unfused.embedding_backward_s ==
        doctest::Approx(fused.embedding_forward_s + fused.embedding_backward_s));
  CHECK(estimate(eager).time.step_s > estimate(p).time.step_s);
}

// Llama 3 8B on an H200 without tensor parallelism (the Korthikanti plan's other settings): the recompute tests' plan.
static Plan llama3_8b_h200_tp1() {
  Plan p = test::korthikanti_175b();
  p.model = test::profiles().model("llama3-8b", "t");
  p.gpu = test::profiles().gpu("h200", "t");
  p.parallel.tp = 1;
  p.parallel.sequence_parallel = false;
  return p;
}

TEST_CASE("selective-op recomputes every second matmul but the last, and the forward's memory-bound ops") {
  Plan p = llama3_8b_h200_tp1();
  p.training.attention = AttentionKernel::flash2;
  p.parallel.recompute = Recompute::selective_op;
  const LayerCost lc = layer_cost(p);
  const ModelSpec& m = p.model;
  const int64_t T = p.parallel.micro_batch * p.seq_len();  // the microbatch's tokens (cp 1)
  // wk, wo and w3: the 2nd, 4th and 6th matmul of a SwiGLU layer.
  const double gemms = gemm_time_s(p.gpu, DType::bf16, T, m.kv_dim(), m.hidden) +
                       gemm_time_s(p.gpu, DType::bf16, T, m.hidden, m.context_dim()) +
                       gemm_time_s(p.gpu, DType::bf16, T, m.ffn_hidden, m.hidden);
  CHECK(lc.recompute_s == doctest::Approx(gemms + lc.forward_s - lc.gemm_forward_s - lc.attention_forward_s));
  CHECK(lc.recompute_s < lc.forward_s);
}

TEST_CASE("recompute modules on a dense layer: mlp reruns the MLP's GEMMs, activation and fused norm; default = core_attn") {
  Plan p = llama3_8b_h200_tp1();
  p.parallel.recompute = Recompute::selective;
  const LayerCost core = layer_cost(p);
  Plan q = p;
  q.parallel.recompute_modules.add(RecomputeModule::mlp);  // {core_attn, mlp}
  const ModelSpec& m = p.model;
  const double T = static_cast<double>(p.parallel.micro_batch * p.seq_len());
  const double A = 2, h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn_hidden);
  const double gemms = gemm_time_s(p.gpu, DType::bf16, p.parallel.micro_batch * p.seq_len(), 2 * m.ffn_hidden, m.hidden) +
                       gemm_time_s(p.gpu, DType::bf16, p.parallel.micro_batch * p.seq_len(), m.hidden, m.ffn_hidden);
  const double k = p.gpu.gemm.kernel_overhead_s;
  const double passes = memory_bound_time_s(p.gpu, 3 * T * f * A) + k + memory_bound_time_s(p.gpu, 2 * T * h * A) + k;
  CHECK(layer_cost(q).recompute_s == doctest::Approx(core.recompute_s + gemms + passes).epsilon(1e-12));
  // layernorm and the MoE / MLA modules do not apply to this layer (its norms are fused into the GEMMs).
  Plan r = p;
  r.parallel.recompute_modules.bits = 0;
  for (RecomputeModule x : {RecomputeModule::layernorm, RecomputeModule::moe_act, RecomputeModule::mla_up_proj,
                            RecomputeModule::moe, RecomputeModule::shared_experts}) {
    r.parallel.recompute_modules.add(x);
  }
  CHECK(layer_cost(r).recompute_s == 0);
}

// Full recompute of only some layers (ParallelConfig::recompute_layers k; Megatron-Core --recompute-method block):
// the first k layers of each chunk are recomputed, the rest keep everything. GPT-3 175B, tp 8 + SP, pp 8, vpp 3:
// 12 layers per stage, 4 per chunk. Per layer and microbatch (Korthikanti 2022 Table 2, fp16, unfused attention,
// s 2048, b 1, h 12288, a 96, t 8): recompute none s b h / t (34 + 5 a s / h) = 3145728 x (34 + 80) = 358612992 B,
// full 2 s b h / t = 6291456 B. With k = 2 per chunk a stage recomputes 6 of its 12 layers, so its stored activations
// are full recompute's plus (in-flight chunks / 3) x 6 x (358612992 - 6291456) bytes; its recompute pass reruns 6 of
// 12 layers' forward: half of full's recompute time; the step's hardware FLOPs add half of full's recompute FLOPs.
TEST_CASE("recompute_layers: k of each chunk at full recompute's bytes and time, the rest at none's") {
  Plan full = test::korthikanti_175b();
  full.parallel.recompute = Recompute::full;
  Plan half = full;
  half.parallel.recompute_layers = 2;
  Plan all = full;
  all.parallel.recompute_layers = 4;
  Plan none = full;
  none.parallel.recompute = Recompute::none;
  REQUIRE(validate(half).ok());
  REQUIRE(validate(all).ok());
  CHECK(chunk_recomputed_layers(half, 0, 1) == 2);
  CHECK(stage_recomputed_layers(half, 3).layers == 6);
  CHECK(stage_recomputed_layers(full, 3).layers == 12);  // k 0: every layer
  const Estimate ef = estimate(full), eh = estimate(half), ea = estimate(all), en = estimate(none);
  // k = every layer of a chunk is full recompute.
  CHECK(ea.time.step_s == doctest::Approx(ef.time.step_s).epsilon(1e-12));
  CHECK(ea.peak_memory_bytes == doctest::Approx(ef.peak_memory_bytes).epsilon(1e-12));
  for (int64_t i : {0, 3, 7}) {
    const double chunks = static_cast<double>(eh.memory[static_cast<size_t>(i)].in_flight_chunks);
    CHECK(eh.memory[static_cast<size_t>(i)].activations - ef.memory[static_cast<size_t>(i)].activations ==
          doctest::Approx(chunks / 3.0 * 6.0 * (358612992.0 - 6291456.0)).epsilon(1e-9));
    // The recompute working set stays full recompute's (one layer rebuilt at a time).
    CHECK(eh.memory[static_cast<size_t>(i)].recompute_working_set == ef.memory[static_cast<size_t>(i)].recompute_working_set);
    CHECK(eh.stages[static_cast<size_t>(i)].recompute_s == doctest::Approx(0.5 * ef.stages[static_cast<size_t>(i)].recompute_s));
    CHECK(eh.stages[static_cast<size_t>(i)].forward_s == doctest::Approx(ef.stages[static_cast<size_t>(i)].forward_s));
  }
  CHECK(eh.time.hardware_flops ==
        doctest::Approx(en.time.hardware_flops + 0.5 * (ef.time.hardware_flops - en.time.hardware_flops)));
  CHECK(eh.time.step_s < ef.time.step_s);
  CHECK(eh.time.step_s > en.time.step_s);
  // recompute_layers needs full recompute and at most a chunk's layers.
  Plan bad = half;
  bad.parallel.recompute_layers = 5;
  CHECK(validate(bad).has(Reject::recompute_layers_invalid));
  bad.parallel.recompute_layers = 2;
  bad.parallel.recompute = Recompute::selective;
  CHECK(validate(bad).has(Reject::recompute_layers_invalid));
}

TEST_CASE("ring attention under cp: cp calls, one rank's share of the FLOPs, each call at its shape's efficiency") {
  // GPT-3 175B at tp 8 (12 local heads) on one sequence of 2048: cp 2 splits it into 4 chunks of 512; each rank runs
  // a causal 1024 x 1024 call and a 1024 x 512 one (Megatron-Core's load-balanced ring).
  Plan one = test::korthikanti_175b();
  one.parallel.pp = 1;
  one.parallel.dp = 1;
  one.num_gpus = 8;
  one.training.global_batch = 1;
  one.training.attention = AttentionKernel::flash;
  one.parallel.num_microbatches = 1;
  Plan two = one;
  two.parallel.cp = 2;
  two.num_gpus = 16;
  const GpuSpec& g = one.gpu;
  const double per_score = 2.0 * 2.0 * 128.0 * 12.0;  // (q.k and p.v) x 2 FLOPs x head width x local heads
  const double flops_one = per_score * 2048.0 * 2048.0 / 2.0, flops_two = flops_one / 2.0;
  const double f = g.peak(one.activation_dtype()) * g.gemm.attention_efficiency(AttentionKernel::flash, false);
  // Flat fractions (no attention_tile_overhead in this profile): the FLOPs at the fraction, one launch per call.
  CHECK(estimate(one).layer.attention_forward_s == doctest::Approx(flops_one / f + g.gemm.kernel_overhead_s));
  CHECK(estimate(two).layer.attention_forward_s == doctest::Approx(flops_two / f + 2.0 * g.gemm.kernel_overhead_s));
  // With the shape term each call is priced at its own shape: the split into smaller calls costs more per FLOP.
  one.gpu.gemm.attention_tile_overhead = two.gpu.gemm.attention_tile_overhead = 3.0;
  const double shaped_one = estimate(one).layer.attention_forward_s, shaped_two = estimate(two).layer.attention_forward_s;
  const double k = g.gemm.kernel_overhead_s;
  const double factor_one = (shaped_one - k) * f / flops_one, factor_two = (shaped_two - 2.0 * k) * f / flops_two;
  CHECK(factor_one == doctest::Approx(attention_shape_factor(one.gpu.gemm, AttentionCall{12, 2048, 2048, true})));
  const double causal = per_score * 1024.0 * 1024.0 / 2.0, rest = per_score * 1024.0 * 512.0;
  CHECK(factor_two == doctest::Approx((causal * attention_shape_factor(two.gpu.gemm, AttentionCall{12, 1024, 1024, true}) +
                                       rest * attention_shape_factor(two.gpu.gemm, AttentionCall{12, 1024, 512, false})) /
                                      flops_two));
  CHECK(factor_two > factor_one);
  CHECK(factor_one > 1.0);
}

TEST_CASE("micro-pipelined TP: each transfer past its GEMM piece, and the extra launches, stay exposed") {
  // 8 ms of all-gather over 8 ranks beside an 8 ms GEMM: 7 transfers of 1.1429 ms against pieces of 1.004 ms (1 ms
  // + a 4 us launch): 7 x (0.004 + 0.1389) = 1.000 ms exposed. Behind a 10x longer GEMM only the 7 launches remain.
  CHECK(micropipelined_exposed_s(8e-3, 8e-3, 8, 4e-6) == doctest::Approx(1.0e-3));
  CHECK(micropipelined_exposed_s(8e-3, 80e-3, 8, 4e-6) == doctest::Approx(28e-6));
  CHECK(micropipelined_exposed_s(8e-3, 0.0, 1, 4e-6) == 8e-3);  // nothing to split over one rank
  // The transfers never beat the whole collective by more than their pieces hide.
  CHECK(micropipelined_exposed_s(8e-3, 0.0, 8, 0.0) == doctest::Approx(8e-3));

  // On Korthikanti et al.'s 175B plan (tp 8, SP): less exposed TP time per layer than the whole collectives, more
  // than none; the flag needs tp > 1 with SP, and is not TP comm overlap too.
  const Plan p = test::korthikanti_175b();
  Plan m = p;
  m.parallel.micropipeline_tp = true;
  REQUIRE(validate(m).ok());
  const LayerCost whole = layer_costs(p).layer, piped = layer_costs(m).layer;
  CHECK(piped.exposed_tp_s > 0);
  // 0.645 ms against 1.263 ms per layer; of it the backward's two SP re-gathers (0.421 ms, priced as without it),
  // and of the eight split collectives (1.683 ms whole) about an eighth.
  const double regather = piped.tp_comm_backward_s - piped.tp_comm_forward_s;
  CHECK(piped.exposed_tp_s < whole.exposed_tp_s);
  CHECK(piped.exposed_tp_s > regather);
  CHECK(piped.exposed_tp_s - regather < 0.2 * 2.0 * piped.tp_comm_forward_s);
  CHECK(piped.tp_comm_forward_s == whole.tp_comm_forward_s);  // the same bytes move
  CHECK(estimate(m).time.step_s < estimate(p).time.step_s);
  Plan no_sp = m;
  no_sp.parallel.sequence_parallel = false;
  CHECK(validate(no_sp).has(Reject::micropipeline_tp_invalid));
  Plan both = m;
  both.parallel.overlap_tp_comm = true;
  CHECK(validate(both).has(Reject::micropipeline_tp_invalid));
}
