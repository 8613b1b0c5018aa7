// Round trip (issue 31): for random valid plans (seeded), export --to F then import gives the same mesh, batch,
// precision, recompute and sharding, for each framework F; plans a framework cannot express are made expressible
// first (the export of what remains must carry no warning).
#include <doctest/doctest.h>

#include <array>
#include <filesystem>
#include <random>

#include "cli/interop/export.hpp"
#include "cli/interop/from_file.hpp"
#include "cli/run_helper.hpp"
#include "planner/spec/config.hpp"

using namespace parplan;
using namespace parplan::cli;

namespace {

// A random plan on 8-GPU nodes for one of a few embedded models; nullopt when validate() refuses it.
std::optional<Plan> random_plan(std::mt19937& rng, const ProfileSet& profiles, Framework f) {
  auto pick = [&](std::initializer_list<int64_t> xs) { return *(xs.begin() + std::uniform_int_distribution<size_t>(0, xs.size() - 1)(rng)); };
  // Megatron-LM and NeMo also write MoE and MLA shapes: shared experts, leading dense layers and MLA (deepseek-v3), a
  // head width beside hidden / heads (qwen3-30b-a3b), MoE every other layer (llama4-maverick).
  const char* models[] = {"llama3-8b", "llama3-70b", "gpt3-13b", "mixtral-8x7b", "deepseek-v3", "qwen3-30b-a3b",
                          "llama4-maverick"};
  const bool megatron_like = f == Framework::megatron || f == Framework::nemo;
  Plan p;
  p.model = profiles.model(f == Framework::torchtitan ? "llama3-8b" : models[rng() % (megatron_like ? 7 : 4)], "--model");
  p.cluster = profiles.cluster("dgx-h100", "--cluster");
  p.gpu = profiles.gpu(p.cluster.gpu, "--gpu");
  ParallelConfig& pc = p.parallel;
  const bool mesh = f != Framework::deepspeed;
  pc.tp = mesh ? pick({1, 2, 4, 8}) : 1;
  pc.pp = mesh ? pick({1, 1, 2, 4}) : 1;
  pc.cp = mesh ? pick({1, 1, 2}) : 1;
  pc.dp = pick({1, 2, 4, 8, 16});
  pc.ep = mesh && p.model.is_moe() ? pick({1, 2}) : 1;
  if (megatron_like && pc.ep > 1) {  // the token dispatcher and the 1F1B A2A overlap, which both write
    pc.moe_dispatcher = pick({0, 1}) ? MoeDispatcher::deepep : MoeDispatcher::alltoall;
    pc.overlap_ep_comm = pick({0, 1}) != 0;
  }
  pc.micro_batch = pick({1, 2, 4});
  pc.num_microbatches = pick({1, 2, 4, 8});
  pc.schedule = pc.pp > 1 ? (pick({0, 1}) ? Schedule::one_f_one_b : Schedule::gpipe) : Schedule::one_f_one_b;
  if (pc.pp > 1 && f != Framework::torchtitan && pick({0, 1})) {
    pc.schedule = Schedule::interleaved;
    pc.vpp = 2;
  } else if (f == Framework::megatron || f == Framework::nemo) {
    if (pc.schedule == Schedule::gpipe) pc.schedule = Schedule::one_f_one_b;
  }
  pc.sequence_parallel = pc.tp > 1 && (f == Framework::torchtitan || pick({0, 1}));
  pc.recompute = f == Framework::deepspeed ? Recompute::none : static_cast<Recompute>(pick({0, 1, 2}));
  // torchtitan's selective mode is its per-op policy; Megatron's attention-core selective has no torchtitan form.
  if (f == Framework::torchtitan && pc.recompute == Recompute::selective) pc.recompute = Recompute::selective_op;
  p.training.precision = static_cast<Precision>(f == Framework::deepspeed ? pick({0, 1}) : f == Framework::torchtitan ? pick({0, 2}) : pick({0, 1, 2}));
  p.training.grad_fp32 = p.training.precision != Precision::fp16;
  switch (f) {
    case Framework::megatron:
      pc.distributed_optimizer = pick({0, 1});
      pc.overlap_dp_comm = pick({0, 1});
      pc.zero_stage = pc.distributed_optimizer ? 0 : static_cast<int>(pick({0, 1}));
      // HSDP: Megatron-Core's partial distributed optimizer (--num-distributed-optimizer-instances).
      if (pc.distributed_optimizer) pc.dp_replicate = pick({1, 1, 2});
      break;
    case Framework::nemo:
      pc.distributed_optimizer = pc.overlap_dp_comm = pick({0, 1});
      break;
    case Framework::torchtitan:
      // FSDP over 1 rank is none; torchtitan's DDP (unsharded dp) runs on a 1-D mesh only, so beside tp, pp or cp
      // the data-parallel ranks shard (export warns otherwise).
      // With cp > 1 torchtitan's FSDP shards over the cp ranks even at dp 1.
      pc.zero_stage = pc.dp > 1 || pc.cp > 1 ? static_cast<int>(pc.tp * pc.pp * pc.cp > 1 ? 1 : pick({0, 1})) * 3 : 0;
      pc.fsdp2 = pc.zero_stage == 3;  // torchtitan's FSDP is FSDP2, with or without pipelining
      if (pc.fsdp2) pc.dp_replicate = pick({1, 1, 2});  // HSDP (data_parallel_replicate_degree x shard degree)
      // DTensor TP: blocking backward collectives, each with a copy of the tensor on the sequence dim.
      pc.async_tp_backward = pc.tp == 1;
      pc.tp_collective_copies = pc.tp > 1;
      break;
    case Framework::deepspeed:
      pc.zero_stage = static_cast<int>(pick({0, 1, 2, 3}));
      if (pc.zero_stage == 3) pc.zero3_gather_unit = Zero3GatherUnit::linear;
      break;
    case Framework::nanotron:
      break;
  }
  // Gradient reduce dtype and fp8 weights gathered in fp8, where the framework has them (NeMo reduces in its default).
  if (f == Framework::megatron || f == Framework::torchtitan) p.training.grad_fp32 = pick({0, 1}) != 0;
  const bool sharded = pc.distributed_optimizer || pc.zero_stage >= 1;
  if (p.training.precision == Precision::fp8 && sharded && f != Framework::deepspeed) {
    p.training.fp8_param_gather = pick({0, 1}) != 0;
  }
  if (f == Framework::megatron) p.training.adam_moments = pick({0, 1}) ? DType::bf16 : DType::fp32;
  p.training.fp8_saved_inputs = f != Framework::torchtitan;  // Transformer Engine keeps fp8 inputs, torchao 16-bit
  if ((f == Framework::megatron || f == Framework::nemo) && p.training.precision == Precision::fp8) {
    p.training.fp8_recipe = std::array{Fp8Recipe::delayed, Fp8Recipe::tensorwise, Fp8Recipe::mxfp8,
                                       Fp8Recipe::blockwise}[static_cast<size_t>(pick({0, 1, 2, 3}))];
  }
  if (f == Framework::torchtitan && p.training.precision == Precision::fp8) {
    p.training.fp8_recipe = std::array{Fp8Recipe::tensorwise, Fp8Recipe::rowwise, Fp8Recipe::mxfp8}[static_cast<size_t>(pick({0, 1, 2}))];
    if (p.training.fp8_recipe == Fp8Recipe::mxfp8) p.training.fp8_param_gather = false;  // the mx converter's: bf16
    p.training.fp8_tp_gather = pc.tp > 1 && p.training.fp8_recipe == Fp8Recipe::tensorwise;  // float8 tensorwise TP
  }
  // Full recompute of the first K layers of each chunk where the framework writes it (Megatron's and NeMo's block
  // method); K = 0 is every layer.
  if ((f == Framework::megatron || f == Framework::nemo) && pc.recompute == Recompute::full) {
    pc.recompute_layers = pick({0, 0, 1, 2});
  }
  p.num_gpus = pc.gpus();
  p.training.seq_len = f == Framework::deepspeed ? p.model.seq_len : pick({2048, 4096});  // DeepSpeed: the model's
  p.training.global_batch = pc.dp * pc.micro_batch * pc.num_microbatches;
  if (!validate(p).ok()) return std::nullopt;
  return p;
}

// Imports `text` as `f` (through a file, as the CLI does), with --model / --gpus where the format has no model or
// GPU count.
Plan reimport(const std::string& text, Framework f, const Plan& want, const ProfileSet& profiles, const std::string& dir) {
  const std::string ext = f == Framework::megatron ? ".sh" : f == Framework::torchtitan ? ".toml" : f == Framework::deepspeed ? ".json" : ".yaml";
  const std::string file = dir + "/roundtrip" + ext;
  parplan::test::write_text(file, text);
  CLI::App app;
  ModelOptions mo;
  MeshOptions me;
  add_model_options(app, mo);
  add_mesh_options(app, me);
  std::vector<std::string> words;
  if (f == Framework::deepspeed) words = {"--model=" + want.model.name, fmt::format("--gpus={}", want.num_gpus)};
  if (f == Framework::torchtitan) words = {fmt::format("--gpus={}", want.num_gpus)};
  std::reverse(words.begin(), words.end());
  app.parse(words);
  return plan_from_framework(file, std::string(framework_name(f)), mo, me, profiles).plan;
}

void check_same(const Plan& a, const Plan& b, Framework f) {
  const ParallelConfig &x = a.parallel, &y = b.parallel;
  CHECK(b.num_gpus == a.num_gpus);
  CHECK(y.dp == x.dp);
  CHECK(y.tp == x.tp);
  CHECK(y.pp == x.pp);
  CHECK(y.cp == x.cp);
  CHECK(y.ep == x.ep);
  CHECK(y.chunks_per_stage() == x.chunks_per_stage());
  CHECK(y.schedule == x.schedule);
  CHECK(y.micro_batch == x.micro_batch);
  CHECK(y.num_microbatches == x.num_microbatches);
  CHECK(b.training.global_batch == a.training.global_batch);
  CHECK(b.seq_len() == a.seq_len());
  CHECK(y.sequence_parallel == x.sequence_parallel);
  CHECK(y.recompute == x.recompute);
  CHECK(y.zero_stage == x.zero_stage);
  CHECK(y.fsdp2 == x.fsdp2);
  CHECK(y.dp_replicate == x.dp_replicate);
  if (x.tp > 1) CHECK(y.async_tp_backward == x.async_tp_backward);
  CHECK(y.tp_collective_copies == x.tp_collective_copies);
  CHECK(b.training.fp8_tp_gather == a.training.fp8_tp_gather);
  CHECK(y.distributed_optimizer == x.distributed_optimizer);
  CHECK(b.training.precision == a.training.precision);
  CHECK(b.training.grad_fp32 == a.training.grad_fp32);
  CHECK(b.training.fp8_param_gather == a.training.fp8_param_gather);
  CHECK(b.training.adam_moments == a.training.adam_moments);
  if (a.training.precision == Precision::fp8) CHECK(b.training.fp8_saved_inputs == a.training.fp8_saved_inputs);
  if (f != Framework::deepspeed && f != Framework::nanotron && a.training.precision == Precision::fp8) {
    CHECK(b.training.fp8_recipe == a.training.fp8_recipe);
  }
  if (f == Framework::megatron || f == Framework::nemo) {
    CHECK(y.recompute_layers == x.recompute_layers);
    CHECK(y.overlap_dp_comm == x.overlap_dp_comm);
    CHECK(b.model.layers == a.model.layers);
    CHECK(b.model.hidden == a.model.hidden);
    CHECK(b.model.heads == a.model.heads);
    CHECK(b.model.kv_heads == a.model.kv_heads);
    CHECK(b.model.ffn_hidden == a.model.ffn_hidden);
    if (f == Framework::megatron) CHECK(b.model.vocab == a.model.vocab);  // NeMo takes it from the tokenizer
    CHECK(b.model.experts == a.model.experts);
    CHECK(b.model.top_k == a.model.top_k);
    CHECK(b.model.ffn_type == a.model.ffn_type);
    CHECK(b.model.shared_experts == a.model.shared_experts);
    CHECK(b.model.dense_layers == a.model.dense_layers);
    CHECK(b.model.moe_layer_step == a.model.moe_layer_step);
    if (a.model.has_dense_layers()) CHECK(b.model.dense_ffn_hidden == a.model.dense_ffn_hidden);
    CHECK(b.model.head_dim() == a.model.head_dim());
    CHECK(b.model.q_lora_rank == a.model.q_lora_rank);
    CHECK(b.model.kv_lora_rank == a.model.kv_lora_rank);
    CHECK(b.model.qk_rope_head_dim == a.model.qk_rope_head_dim);
    CHECK(b.model.v_head_dim() == a.model.v_head_dim());
    CHECK(b.model.mtp_layers == a.model.mtp_layers);
    CHECK(y.moe_dispatcher == x.moe_dispatcher);
    CHECK(y.overlap_ep_comm == x.overlap_ep_comm);
  }
}

}  // namespace

TEST_CASE("interop round trip: export then import gives the same plan, for each framework") {
  const ProfileSet profiles = ProfileSet::embedded();
  parplan::test::ScratchDir dir;
  for (Framework f : {Framework::megatron, Framework::nemo, Framework::torchtitan, Framework::deepspeed}) {
    std::mt19937 rng(31 + static_cast<unsigned>(f));
    int tried = 0;
    for (int n = 0; n < 300; ++tried) {
      REQUIRE(tried < 20000);
      const std::optional<Plan> p = random_plan(rng, profiles, f);
      if (!p) continue;
      ++n;
      const Exported e = export_plan(*p, f, "roundtrip");
      CAPTURE(e.text);
      CHECK(e.warnings.empty());
      check_same(*p, reimport(e.text, f, *p, profiles, dir.path.string()), f);
    }
  }
}
