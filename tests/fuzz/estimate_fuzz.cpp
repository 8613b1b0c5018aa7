// libFuzzer target: the cost model on arbitrary plans that the JSON readers would accept. Every field is drawn
// from the range its reader allows (spec_json.cpp), so this reaches extreme but legal combinations that byte-level
// JSON mutation rarely builds. Oracle: check_plan_inputs / check_model reject with InputError, validate() rejects,
// or estimate() returns finite, positive memory and step time (no sanitizer report on the way).
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "planner/spec/config.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/spec/error.hpp"
#include "planner/spec/plan_json.hpp"
#include "planner/spec/profiles.hpp"
#include "planner/spec/spec_json.hpp"

namespace {

using parplan::Plan;

// Small values are the interesting ones for divisibility; sometimes jump to the range's end.
int64_t pick(FuzzedDataProvider& in, int64_t lo, int64_t hi) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return in.ConsumeIntegralInRange<int64_t>(lo, std::min<int64_t>(hi, lo + 16));
    case 1:
      return std::min<int64_t>(hi, lo << in.ConsumeIntegralInRange<int>(0, 30));
    case 2:
      return hi;
    default:
      return in.ConsumeIntegralInRange<int64_t>(lo, hi);
  }
}

template <typename E>
E pick_enum(FuzzedDataProvider& in, int n) {
  return static_cast<E>(in.ConsumeIntegralInRange<int>(0, n - 1));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const parplan::ProfileSet profiles = parplan::ProfileSet::embedded();
  static const char* kModels[] = {"gpt3-175b", "llama2-70b", "mixtral-8x7b", "llama3-405b", "gpt3-1.3b"};
  static const char* kClusters[] = {"dgx-h100", "dgx-a100", "dgx-b200"};
  FuzzedDataProvider in(data, size);
  Plan plan;
  plan.cluster = profiles.cluster(kClusters[in.ConsumeIntegralInRange<int>(0, 2)], "fuzz");
  plan.gpu = profiles.gpu(plan.cluster.gpu, "fuzz");
  if (in.ConsumeBool()) {
    plan.model = profiles.model(kModels[in.ConsumeIntegralInRange<int>(0, 4)], "fuzz");
  } else {  // the ranges of model_from_json
    parplan::ModelSpec& m = plan.model;
    m.name = "fuzz";
    m.layers = pick(in, 1, 100'000);
    m.hidden = pick(in, 1, 10'000'000);
    m.heads = pick(in, 1, 10'000'000);
    m.kv_heads = in.ConsumeBool() ? m.heads : pick(in, 1, 10'000'000);
    m.ffn_hidden = pick(in, 1, 10'000'000);
    m.ffn_type = pick_enum<parplan::FfnType>(in, 2);
    m.vocab = pick(in, 1, 100'000'000);
    m.seq_len = pick(in, 1, 100'000'000);
    m.tied_embeddings = in.ConsumeBool();
    m.bias = in.ConsumeBool();
    m.dropout = in.ConsumeBool();
    m.norm = pick_enum<parplan::NormType>(in, 2);
    m.position = pick_enum<parplan::PositionEmbedding>(in, 3);
    m.experts = pick(in, 1, 65'536);
    m.top_k = pick(in, 1, 65'536);
    m.causal = in.ConsumeBool();
  }
  if (in.ConsumeBool()) {  // GPU knobs at the ends of their ranges
    plan.gpu.memory_bytes = static_cast<int64_t>(in.ConsumeFloatingPointInRange<double>(0.001, 1e6) * 1073741824.0);
    plan.gpu.hbm_bandwidth_Bps = in.ConsumeFloatingPointInRange<double>(0.001, 1e7) * 1e9;
    plan.gpu.gemm.sm_count = pick(in, 1, 100'000);
    plan.gpu.gemm.tile_m = pick(in, 1, 4096);
    plan.gpu.gemm.tile_n = pick(in, 1, 4096);
    plan.cluster.gpus_per_node = pick(in, 1, 1'000'000);
    plan.cluster.inter_node.bandwidth_Bps = in.ConsumeFloatingPointInRange<double>(1e-6, 1e7) * 1e9;
  }
  parplan::ParallelConfig& pc = plan.parallel;
  constexpr int64_t kMax = 100'000'000;
  pc.dp = pick(in, 1, kMax);
  pc.tp = pick(in, 1, kMax);
  pc.pp = pick(in, 1, kMax);
  pc.cp = pick(in, 1, kMax);
  pc.ep = pick(in, 1, kMax);
  pc.vpp = pick(in, 1, 1024);
  pc.micro_batch = pick(in, 1, kMax);
  pc.num_microbatches = pick(in, 1, kMax);
  pc.schedule = pick_enum<parplan::Schedule>(in, 4);
  pc.recompute = pick_enum<parplan::Recompute>(in, 3);
  pc.sequence_parallel = in.ConsumeBool();
  pc.zero_stage = in.ConsumeIntegralInRange<int>(0, 3);
  pc.distributed_optimizer = in.ConsumeBool();
  pc.overlap_dp_comm = in.ConsumeBool();
  pc.overlap_tp_comm = in.ConsumeBool();
  pc.overlap_cp_comm = in.ConsumeBool();
  pc.async_tp_backward = in.ConsumeBool();
  pc.tp_collective_copies = in.ConsumeBool();
  pc.micropipeline_tp = in.ConsumeBool();
  pc.p2p_scatter_gather = in.ConsumeBool();
  pc.zero3_gather_unit = in.ConsumeBool() ? parplan::Zero3GatherUnit::linear : parplan::Zero3GatherUnit::layer;
  plan.training.fused_grad_accumulation = in.ConsumeBool();
  pc.overlap_p2p_comm = in.ConsumeBool();  // the models read it only for the interleaved schedule
  if (in.ConsumeBool()) {
    pc.first_stage_layers = pick(in, 0, kMax);
    pc.last_stage_layers = pick(in, 0, kMax);
  }
  int64_t gpus = 1;
  for (int64_t x : {pc.dp, pc.tp, pc.pp, pc.cp}) {
    if (__builtin_mul_overflow(gpus, x, &gpus) || gpus > kMax) return 0;  // parallel_from_json refuses these
  }
  plan.num_gpus = gpus;
  plan.training.precision = pick_enum<parplan::Precision>(in, 3);
  plan.training.attention = pick_enum<parplan::AttentionKernel>(in, 2);
  plan.training.grad_fp32 = in.ConsumeBool();
  plan.training.seq_len = in.ConsumeBool() ? 0 : pick(in, 1, kMax);
  plan.training.dp_bucket_bytes = static_cast<int64_t>(in.ConsumeFloatingPointInRange<double>(0.001, 1e6) * 1e6);
  int64_t gb = 0;
  if (__builtin_mul_overflow(pc.dp, pc.micro_batch, &gb) || __builtin_mul_overflow(gb, pc.num_microbatches, &gb) ||
      gb > 1'000'000'000) {
    return 0;  // training_from_json caps global_batch at 1e9
  }
  plan.training.global_batch = gb;
  try {
    parplan::check_model(plan.model, "fuzz");
    parplan::check_plan_inputs(plan, "fuzz");
  } catch (const parplan::InputError&) {
    return 0;
  }
  if (!parplan::validate(plan, {in.ConsumeBool()}).ok()) return 0;
  const parplan::Estimate e = parplan::estimate(plan);
  const bool ok = std::isfinite(e.peak_memory_bytes) && e.peak_memory_bytes > 0 && std::isfinite(e.time.step_s) &&
                  e.time.step_s > 0 && std::isfinite(e.time.mfu) && std::isfinite(e.time.tokens_per_s);
  if (!ok) std::abort();
  return 0;
}
