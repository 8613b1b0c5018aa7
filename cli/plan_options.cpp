// Shared plan flags -> Plan (see plan_options.hpp).
#include "cli/plan_options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <unordered_set>

#include "cli/interop/hf_config.hpp"
#include "cli/io.hpp"
#include "cli/render.hpp"
#include "cli/text.hpp"
#include "planner/spec/config.hpp"
#include "planner/spec/error.hpp"
#include "planner/spec/json_reader.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/spec/plan_json.hpp"
#include "planner/spec/spec_json.hpp"
#include "planner/spec/units.hpp"

namespace parplan::cli {
namespace {


// Loads one profile file named by `flag` and returns the profile set's view of it.
std::string add_profile_file(ProfileSet& set, const std::string& path, std::string_view flag) {
  const std::string text = read_file(path, flag);
  return set.add(text, path);
}

// The options added to `app` after the first `before` (CLI11 keeps them in the order they were added).
std::vector<const CLI::Option*> options_since(CLI::App& app, size_t before) {
  const auto all = app.get_options();
  return {all.begin() + static_cast<std::ptrdiff_t>(before), all.end()};
}

// A V (ZB-V, DualPipeV) needs vpp 1 or 2, pp >= 2 and an even layer count on every stage, DualPipeV also 2 pp
// microbatches: the flag that set the one that fails (the order vpp_problem describes them in,
// planner/spec/config.cpp). An odd layer count: only a per-chunk layout.
std::string_view v_shape_flag(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  if (pc.vpp > 2) return "--vpp";
  if (pc.pp < 2) return "--pp";
  if (stage_layers_divisible(plan, 2)) return "--global-batch/--micro-batch/--microbatches";  // DualPipeV's m >= 2 pp
  if (!pc.stage_layout.empty() || plan.model.layers % 2 != 0) return "--stage-layers";
  if (pc.split_extra_layers() == 0 && pc.first_stage_layers == 0 && pc.last_stage_layers == 0) return "--pp";
  if (pc.split_extra_layers() > 0) return "--pp/--account-for-*-in-pipeline-split";
  return "--pp/--first-stage-layers/--last-stage-layers";
}

// The flag that sets what a validity rule refused in `plan` (the error line names it).
std::string_view reject_flag(Reject r, const Plan& plan) {
  switch (r) {
    case Reject::gpu_count_mismatch:
      return "--gpus";
    case Reject::tp_crosses_node:
    case Reject::tp_not_dividing_heads:
    case Reject::tp_not_dividing_ffn:
      return "--tp";
    case Reject::pp_exceeds_layers:
      return "--pp";
    case Reject::uneven_stages_invalid:
      return "--first-stage-layers/--last-stage-layers/--stage-layers/--account-for-*-in-pipeline-split";
    case Reject::vpp_invalid:
      return v_shaped(plan.parallel.schedule) ? v_shape_flag(plan) : "--vpp";
    case Reject::cp_not_dividing_seq:
      return "--cp";
    case Reject::ep_invalid:
      return "--ep/--etp";
    case Reject::batch_not_divisible:
      return "--global-batch";
    case Reject::sp_without_tp:
    case Reject::sp_not_dividing_seq:
      return "--sequence-parallel";
    case Reject::precision_unsupported:  // a GPU without the precision, or without MXFP8's block-scaled fp8 cores
      return mxfp8_unsupported(plan) && plan.gpu.peak(plan.gemm_dtype()) > 0 ? "--fp8-recipe" : "--precision";
    case Reject::zb_full_recompute:
      return "--schedule";
    case Reject::selective_op_unsupported:
      return "--recompute";
    case Reject::cp_with_sliding_window:
      return "--cp";
    case Reject::fp8_param_gather_invalid:
      return "--fp8-param-gather";
    case Reject::recompute_layers_invalid:
      return "--recompute-layers";
    case Reject::offload_invalid:
      return "--offload";
    case Reject::offload_modules_invalid:
      return "--offload-modules";
    case Reject::overlap_p2p_not_interleaved:
      return "--overlap-p2p";
    case Reject::overlap_ep_unpaired:
      return "--overlap-ep";
    case Reject::post_validation_invalid:
      return "--post-validation";
    case Reject::fsdp2_invalid:
      return "--fsdp2";
    case Reject::zero3_gather_unit_invalid:
      return "--zero3-gather-unit";
    case Reject::dp_replicate_invalid:
      return "--dp-replicate";
    case Reject::tp_collective_copies_invalid:
      return "--tp-collective-copies";
    case Reject::micropipeline_tp_invalid:
      return "--micropipeline-tp";
    case Reject::fp8_tp_gather_invalid:
      return "--fp8-tp-gather";
    case Reject::fp8_activation_cache_invalid:
      return "--fp8-activation-cache";
    case Reject::out_of_memory:
    case Reject::host_out_of_memory:
    case Reject::count:
      break;
  }
  return "";
}

// The mesh from the flags: tp, pp, cp, ep, vpp and the micro-batch as given (default 1), dp given or the GPUs left
// over, and the GPU count they must multiply to.
void size_mesh(Plan& plan, const ModelOptions& mo, const MeshOptions& me) {
  ParallelConfig& pc = plan.parallel;
  pc.tp = me.tp.value_or(1);
  pc.pp = me.pp.value_or(1);
  pc.cp = me.cp.value_or(1);
  pc.ep = me.ep.value_or(1);
  pc.vpp = me.vpp.value_or(1);
  pc.micro_batch = me.micro_batch.value_or(1);
  const int64_t tpc = saturating_product({pc.tp, pc.pp, pc.cp});
  if (tpc > kMaxMeshGpus) {
    throw InputError(fmt::format("--tp: tp*pp*cp = {}*{}*{} exceeds {} GPUs", pc.tp, pc.pp, pc.cp, kMaxMeshGpus));
  }
  if (me.dp) {
    pc.dp = *me.dp;
    if (saturating_product({pc.dp, tpc}) > kMaxMeshGpus) {
      throw InputError(fmt::format("--dp: dp*tp*pp*cp = {}*{}*{}*{} exceeds {} GPUs", pc.dp, pc.tp, pc.pp, pc.cp,
                                   kMaxMeshGpus));
    }
    plan.num_gpus = mo.gpus.value_or(pc.dp * tpc);
  } else {
    if (!mo.gpus) throw InputError("--gpus (or --dp) is required");
    plan.num_gpus = *mo.gpus;
    if (plan.num_gpus % tpc != 0) {
      throw InputError(fmt::format("--gpus: {} GPUs are not divisible by tp*pp*cp = {}", plan.num_gpus, tpc));
    }
    pc.dp = plan.num_gpus / tpc;
  }
  if (pc.gpus() != plan.num_gpus) {
    throw InputError(fmt::format("--gpus: dp*tp*pp*cp = {}*{}*{}*{} = {} but --gpus is {}", pc.dp, pc.tp, pc.pp, pc.cp,
                                 pc.gpus(), plan.num_gpus));
  }
}

// The knobs from the flags: schedule, recompute, sharding, overlaps and the uneven stage split.
void set_knobs(ParallelConfig& pc, const MeshOptions& me) {
  pc.schedule = me.schedule.empty()
                    ? (pc.vpp > 1 ? Schedule::interleaved : Schedule::one_f_one_b)
                    : enum_flag<Schedule>(me.schedule, "--schedule", "gpipe, 1f1b, interleaved, zb-h1, zb-2p, zb-v, dualpipe-v");
  pc.recompute = me.recompute.empty() ? Recompute::none
                                      : enum_flag<Recompute>(me.recompute, "--recompute", "none, selective, selective-op, full");
  if (!me.recompute_modules.empty()) {
    if (pc.recompute != Recompute::selective) throw InputError("--recompute-modules: needs --recompute selective");
    if (!parse_recompute_modules(me.recompute_modules, pc.recompute_modules)) {
      throw InputError(fmt::format("--recompute-modules: unknown or repeated module in '{}' (use {})",
                                   excerpt(me.recompute_modules), kRecomputeModuleChoices));
    }
  }
  if (me.recompute_layers) {
    if (pc.recompute != Recompute::full) throw InputError("--recompute-layers: needs --recompute full");
    pc.recompute_layers = recompute_layers_arg(*me.recompute_layers);
  }
  pc.sequence_parallel = me.sequence_parallel;
  pc.zero_stage = me.zero;
  pc.zero3_gather_unit = me.zero3_gather_unit.empty()
                             ? Zero3GatherUnit::layer
                             : enum_flag<Zero3GatherUnit>(me.zero3_gather_unit, "--zero3-gather-unit", "layer, linear");
  pc.fsdp2 = me.fsdp2;
  pc.distributed_optimizer = me.distributed_optimizer;
  pc.dp_replicate = me.dp_replicate.value_or(1);
  if (!me.offload.empty()) pc.offload = offload_flag(me.offload);
  if (!me.offload_modules.empty() && !parse_offload_modules(me.offload_modules, pc.offload_modules)) {
    throw InputError(fmt::format("--offload-modules: unknown, unmodelled or repeated module in '{}' (use {})",
                                 excerpt(me.offload_modules), kOffloadModuleChoices));
  }
  pc.overlap_dp_comm = !me.no_overlap_dp;
  pc.overlap_tp_comm = me.overlap_tp;
  pc.overlap_cp_comm = !me.no_overlap_cp;
  pc.overlap_p2p_comm = me.overlap_p2p;
  pc.post_validation = me.post_validation;
  pc.async_tp_backward = !me.no_async_tp;
  pc.tp_collective_copies = me.tp_collective_copies;
  pc.micropipeline_tp = me.micropipeline_tp;
  pc.p2p_scatter_gather = !me.no_p2p_scatter_gather;
  pc.first_stage_layers = me.first_stage_layers.value_or(0);
  pc.last_stage_layers = me.last_stage_layers.value_or(0);
  if (me.stage_layers) pc.stage_layout = parse_stage_layout(*me.stage_layers, "--stage-layers");
  pc.etp = me.etp.value_or(0);
  pc.moe_dispatcher = me.moe_dispatcher.empty()
                          ? MoeDispatcher::alltoall
                          : enum_flag<MoeDispatcher>(me.moe_dispatcher, "--moe-dispatcher", "alltoall, deepep");
  pc.overlap_ep_comm = me.overlap_ep;
  pc.embedding_in_pipeline_split = me.embedding_in_split;
  pc.loss_in_pipeline_split = me.loss_in_split;
}


// The training settings from the flags: precision, attention kernel, gradient accumulation and the DP bucket size.
void set_training(Plan& plan, const ModelOptions& mo, const MeshOptions& me) {
  TrainingSpec& tr = plan.training;
  set_precision(tr, mo);
  tr.attention = enum_flag<AttentionKernel>(mo.attention, "--attention", "flash, flash2, unfused");
  tr.fused_grad_accumulation = !me.no_fused_grad_accumulation;
  tr.fused_cross_entropy = !me.eager_cross_entropy;
  tr.compiled_elementwise = !me.eager_elementwise;
  tr.seq_len = plan.model.seq_len;
  if (me.bucket_mb) {
    // CLI::Range lets NaN through (every comparison is false); the cast below would be undefined.
    if (!std::isfinite(*me.bucket_mb)) throw InputError("--bucket-mb: must be a finite number of MB");
    tr.dp_bucket_bytes = static_cast<int64_t>(*me.bucket_mb * 1e6);
  }
}

// The global batch (--global-batch, from --microbatches, --tokens-per-step or the default for the GPU count) and the
// microbatches per step it divides into. Returns a line saying how the batch was rounded, if it was.
std::string set_batch(Plan& plan, const MeshOptions& me) {
  ParallelConfig& pc = plan.parallel;
  TrainingSpec& tr = plan.training;
  const int64_t unit = saturating_product({pc.dp, pc.micro_batch});
  std::string note;
  if (me.microbatches && me.tokens_per_step) throw InputError("--microbatches and --tokens-per-step: give one, not both");
  if (me.microbatches && !me.global_batch) {
    tr.global_batch = saturating_product({unit, *me.microbatches});
    if (tr.global_batch > kMaxGlobalBatch) {
      throw InputError(fmt::format("--microbatches: dp {} x micro-batch {} x {} microbatches exceeds {} sequences per step",
                                   pc.dp, pc.micro_batch, *me.microbatches, kMaxGlobalBatch));
    }
  } else {
    const BatchRequest b = requested_batch(me.global_batch, me.tokens_per_step, tr.seq_len, plan.num_gpus);
    // Rounded up to whole dp x micro-batch units (a unit past the batch, however large, is one unit: no overflow).
    tr.global_batch = b.exact ? b.sequences : unit >= b.sequences ? unit : (b.sequences + unit - 1) / unit * unit;
    if (tr.global_batch != b.sequences) {
      note = fmt::format("global batch {}: {} ({} sequences of {}) rounded up to a multiple of dp {} x micro-batch {}",
                         tr.global_batch, b.what, b.sequences, tr.seq_len, pc.dp, pc.micro_batch);
    } else if (b.source != b.what) {
      note = fmt::format("global batch {}: {}", tr.global_batch, b.source);
    }
  }
  pc.num_microbatches = microbatches_per_step(tr.global_batch, pc.dp, pc.micro_batch);
  if (pc.num_microbatches == 0) {
    throw InputError(fmt::format("--global-batch: {} is not divisible by dp x micro-batch = {}", tr.global_batch, unit));
  }
  if (me.microbatches && *me.microbatches != pc.num_microbatches) {
    throw InputError(fmt::format("--microbatches: {} disagrees with global batch {} / (dp {} x micro-batch {}) = {}",
                                 *me.microbatches, tr.global_batch, pc.dp, pc.micro_batch, pc.num_microbatches));
  }
  return note;
}

// Throws the first validity rule the plan breaks, naming the flag that sets it.
void refuse_invalid(const Plan& plan, const ModelOptions& mo) {
  ValidateOptions vo;
  vo.allow_tp_across_nodes = mo.allow_tp_across_nodes;
  const Validity v = validate(plan, vo);
  if (!v.ok()) {
    for (int i = 0; i < kNumRejects; ++i) {
      const auto r = static_cast<Reject>(i);
      if (!v.has(r)) continue;
      const std::string what = describe(r, plan);
      const std::string_view flag = reject_flag(r, plan);
      throw InputError(flag.empty() || what.starts_with("--") ? what : fmt::format("{}: {}", flag, what));
    }
  }
}

}  // namespace

namespace {
void set_fp8_recipe(TrainingSpec& tr, const ModelOptions& o) {
  if (o.fp8_recipe.empty()) return;
  if (tr.precision != Precision::fp8) {
    throw InputError(fmt::format("--fp8-recipe: {} needs --precision fp8 (the precision is {})", excerpt(o.fp8_recipe),
                                 to_string(tr.precision)));
  }
  tr.fp8_recipe = enum_flag<Fp8Recipe>(o.fp8_recipe, "--fp8-recipe", "delayed, tensorwise, rowwise, blockwise, mxfp8");
}
}  // namespace

void set_precision(TrainingSpec& tr, const ModelOptions& o) {
  tr.precision = enum_flag<Precision>(o.precision, "--precision", "bf16, fp16, fp8");
  set_fp8_recipe(tr, o);
  // Gradients: fp32 by default (Megatron's main_grad for bf16 and fp8), fp16 for fp16 training; or the 16-bit dtype
  // the plan trains in (model_states.hpp).
  const std::string_view sixteen = tr.precision == Precision::fp16 ? "fp16" : "bf16";
  const std::string& g = o.grad_reduce_dtype;
  if (!g.empty() && g != "fp32" && g != sixteen) {
    throw InputError(fmt::format("--grad-reduce-dtype: '{}' (use fp32 or {}, the 16-bit dtype of --precision {})",
                                 excerpt(g), sixteen, to_string(tr.precision)));
  }
  tr.grad_fp32 = g.empty() ? tr.precision != Precision::fp16 : g == "fp32";
  if (o.fp8_param_gather && tr.precision != Precision::fp8) {
    throw InputError(fmt::format("--fp8-param-gather: fp8 parameter gather needs --precision fp8 (the precision is {})",
                                 to_string(tr.precision)));
  }
  tr.fp8_param_gather = o.fp8_param_gather;
  if (o.fp8_tp_gather && tr.precision != Precision::fp8) {
    throw InputError(fmt::format("--fp8-tp-gather: fp8 TP all-gathers need --precision fp8 (the precision is {})",
                                 to_string(tr.precision)));
  }
  tr.fp8_tp_gather = o.fp8_tp_gather;
  if (o.fp8_16bit_saved_inputs && tr.precision != Precision::fp8) {
    throw InputError(fmt::format("--fp8-16bit-saved-inputs: needs --precision fp8 (the precision is {})",
                                 to_string(tr.precision)));
  }
  tr.fp8_saved_inputs = !o.fp8_16bit_saved_inputs;
  if (o.fp8_activation_cache && tr.precision != Precision::fp8) {
    throw InputError(fmt::format("--fp8-activation-cache: needs --precision fp8 (the precision is {})",
                                 to_string(tr.precision)));
  }
  tr.fp8_activation_cache = o.fp8_activation_cache;
  if (!o.adam_moments_dtype.empty()) {
    tr.adam_moments = enum_flag<DType>(o.adam_moments_dtype, "--adam-moments-dtype", "fp32, bf16, fp16, fp8");
    if (tr.adam_moments == DType::tf32) {
      throw InputError("--adam-moments-dtype: tf32 is a compute mode, not a storage dtype (use fp32, bf16, fp16, fp8)");
    }
  }
}

OffloadSet offload_flag(const std::string& value) {
  OffloadSet o;
  if (!parse_offload(value, o)) {
    throw InputError(fmt::format("--offload: unknown value '{}' (use {})", excerpt(value), kOffloadChoices));
  }
  return o;
}

void add_model_options(CLI::App& app, ModelOptions& o) {
  const size_t before = app.get_options().size();
  app.add_option("--model", o.model,
                 "Model profile name or JSON file (see `parplan profiles list`), or a Hugging Face config.json "
                 "(docs/interop.md)");
  app.add_option("--params", o.params, "Parameter count (175e9, 175B, 1.3T): infers a GPT-style shape");
  app.add_option("--gpu", o.gpu, "GPU profile name or JSON file (default: the cluster's GPU)");
  app.add_option("--cluster", o.cluster, "Cluster profile name or JSON file (default: dgx-h100)");
  app.add_option("--profile", o.profile_files, "User profile JSON file overriding embedded ones (repeatable)");
  app.add_option("--gpus", o.gpus, "Number of GPUs")->check(CLI::Range(int64_t{1}, kMaxMeshGpus));
  app.add_option("--seq", o.seq, "Sequence length in tokens (default: the model's)")->check(CLI::Range(int64_t{1}, int64_t{100'000'000}));
  o.options = options_since(app, before);
  add_knob_options(app, o);
}

void add_knob_options(CLI::App& app, ModelOptions& o) {
  const size_t before = app.get_options().size();
  app.add_option("--precision", o.precision, "bf16 | fp16 | fp8 (fp8: GEMMs in fp8)");
  app.add_option("--fp8-recipe", o.fp8_recipe,
                 "delayed | tensorwise | rowwise | blockwise | mxfp8: how fp8 operands are scaled (default tensorwise; "
                 "with --precision fp8)");
  app.add_flag("--fp8-parameter-gather,--fp8-param-gather", o.fp8_param_gather,
               "fp8: hold and all-gather the weights in fp8 (Megatron-Core --fp8-param-gather; torchao's FSDP float8 "
               "all-gather); needs the distributed optimizer or ZeRO");
  app.add_flag("--fp8-tp-gather", o.fp8_tp_gather,
               "fp8 with sequence-parallel TP: the TP all-gathers move fp8, the reduce-scatters 16 bits (torchtitan's "
               "float8 tensorwise TP); needs --precision fp8, --tp > 1 and --sequence-parallel");
  app.add_option("--grad-reduce-dtype", o.grad_reduce_dtype,
                 "fp32 | bf16 | fp16: dtype the gradients are accumulated and reduced in (default fp32, fp16 for fp16 "
                 "training; Megatron-LM --grad-reduce-in-bf16 = bf16)");
  app.add_flag("--fp8-16bit-saved-inputs", o.fp8_16bit_saved_inputs,
               "fp8: the GEMMs keep their 16-bit inputs for the backward (torchao's float8, torchtitan) instead of "
               "their fp8 ones (Transformer Engine: Megatron-Core, NeMo; the default)");
  app.add_flag("--fp8-activation-cache", o.fp8_activation_cache,
               "fp8: DeepSeek-V3's activation storage (arXiv:2412.19437 Sec. 3.3.3): the MoE experts' SwiGLU inputs "
               "kept in fp8 and the SwiGLU output recomputed in the backward; the attention output kept once, in "
               "E5M6, for the attention backward and the out-projection's weight gradient");
  app.add_option("--adam-moments-dtype", o.adam_moments_dtype,
                 "fp32 | bf16 | fp16 | fp8: dtype of Adam's two moments (Megatron-Core --use-precision-aware-optimizer "
                 "--exp-avg-dtype / --exp-avg-sq-dtype; default fp32)");
  app.add_option("--attention", o.attention, "flash | flash2 | unfused attention kernel (flash: the GPU profile's fused kernel; flash2: FlashAttention-2, PyTorch SDPA's flash backend)");
  app.add_flag("--allow-tp-across-nodes", o.allow_tp_across_nodes, "Allow tensor parallel groups to span nodes");
  app.add_option("--moe-capacity-factor", o.moe_capacity_factor,
                 "none (dropless) | F >= 1: each expert takes at most F x tokens x top_k / experts tokens, padded to "
                 "that (Megatron-Core --moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity)");
  app.add_option("--moe-imbalance", o.moe_imbalance,
                 "Dropless MoE: the most-loaded expert's tokens over the mean (default: the model's, 1 = balanced)");
  app.add_option("--moe-router-groups", o.moe_router_groups,
                 "Group-limited routing: the routed experts in N equal groups, each token choosing its experts from "
                 "--moe-router-group-top-k of them (DeepSeek-V3: 8 groups, 4 chosen: at most 4 nodes a token; "
                 "Megatron-Core --moe-router-num-groups; 0 = none; default: the model's)")
      ->check(CLI::Range(int64_t{0}, int64_t{65'536}));
  app.add_option("--moe-router-group-top-k", o.moe_router_group_top_k,
                 "Group-limited routing: the groups each token chooses (Megatron-Core --moe-router-group-topk)")
      ->check(CLI::Range(int64_t{1}, int64_t{65'536}));
  app.add_option("--mtp-layers", o.mtp_layers,
                 "Multi-token prediction modules on the last stage (DeepSeek-V3: 1; default: the model's)")
      ->check(CLI::Range(int64_t{0}, int64_t{100}));
  app.add_option("--sliding-window", o.sliding_window,
                 "Sliding-window attention: each query attends its N most recent keys, itself included (0 = full "
                 "attention; default: the model's)")
      ->check(CLI::Range(int64_t{0}, int64_t{100'000'000}));
  app.add_option("--sliding-window-pattern", o.sliding_window_pattern,
                 "0 = the window in every layer; P >= 2 = layer i full attention when (i + 1) % P == 0 (gpt-oss: 2; "
                 "default: the model's)")
      ->check(CLI::Range(int64_t{0}, int64_t{100'000}));
  const auto added = options_since(app, before);
  o.options.insert(o.options.end(), added.begin(), added.end());
}

void add_mesh_options(CLI::App& app, MeshOptions& o) {
  const size_t before = app.get_options().size();
  const auto pos = CLI::Range(int64_t{1}, kMaxMeshGpus);
  app.add_option("--dp", o.dp, "Data-parallel size (default: gpus / (tp pp cp))")->check(pos);
  app.add_option("--tp", o.tp, "Tensor-parallel size")->check(pos);
  app.add_option("--pp", o.pp, "Pipeline-parallel stages")->check(pos);
  app.add_option("--cp", o.cp, "Context-parallel size")->check(pos);
  app.add_option("--ep", o.ep, "Expert-parallel size (MoE)")->check(pos);
  app.add_option("--vpp", o.vpp, "Virtual pipeline chunks per stage (interleaved)")->check(CLI::Range(int64_t{1}, int64_t{1024}));
  app.add_option("--micro-batch", o.micro_batch, "Sequences per microbatch")->check(pos);
  app.add_option("--microbatches", o.microbatches, "Microbatches per step (default: global batch / (dp micro-batch))")->check(pos);
  add_batch_options(app, o.global_batch, o.tokens_per_step);
  app.add_option("--schedule", o.schedule,
                 "gpipe | 1f1b | interleaved | zb-h1 | zb-2p | zb-v | dualpipe-v (default 1f1b; interleaved when --vpp > 1)");
  app.add_option("--recompute", o.recompute, "none | selective (Megatron: attention core) | selective-op (torchtitan per-op SAC) | full");
  app.add_option("--recompute-modules", o.recompute_modules,
                 "with --recompute selective: what it rebuilds (Megatron-Core --recompute-modules), comma-separated: "
                 "core_attn (default), layernorm, moe_act, mla_up_proj, mlp, moe, shared_experts");
  app.add_option("--recompute-layers", o.recompute_layers,
                 "with --recompute full: fully recompute only the first K layers of each model chunk (each pipeline "
                 "stage's; interleaved: each virtual chunk's), the rest keep all activations (Megatron-Core "
                 "--recompute-method block --recompute-num-layers K); 0 = every layer (default)");
  app.add_flag("--sequence-parallel,--sp", o.sequence_parallel, "Megatron sequence parallelism (needs tp > 1)");
  app.add_option("--zero", o.zero, "ZeRO stage 0..3 (3 = FSDP)")->check(CLI::Range(0, 3));
  app.add_option("--zero3-gather-unit", o.zero3_gather_unit,
                 "layer | linear: ZeRO-3 gathers and prefetches one layer (PyTorch FSDP, default) or one linear "
                 "(DeepSpeed ZeRO-3) at a time");
  app.add_flag("--fsdp2", o.fsdp2,
               "ZeRO-3 as PyTorch FSDP2 runs it (fully_shard, torchtitan): each all-gather copies out into every "
               "parameter and each reduce-scatter copies the gradients in, cast to the reduction dtype (needs --zero 3)");
  app.add_flag("--distributed-optimizer", o.distributed_optimizer, "Shard optimizer state over dp (Megatron)");
  app.add_option("--dp-replicate", o.dp_replicate,
                 "HSDP: dp as N replicas of dp/N ranks; the sharded states (--zero 1-3 or --distributed-optimizer) "
                 "split within a replica's dp/N x cp ranks, each gradient shard all-reduced across the N replicas "
                 "(FSDP2 / torchtitan data_parallel_replicate_degree, Megatron-Core "
                 "--num-distributed-optimizer-instances; default 1)")
      ->check(pos);
  app.add_option("--offload", o.offload,
                 "none, or a list of optimizer, params, activations: keep the optimizer states (ZeRO-Offload, with "
                 "ZeRO 1-3 or --distributed-optimizer), the ZeRO-3 parameters (ZeRO-Infinity) and each layer's stored "
                 "activations (TransformerEngine CPU offload) in host memory");
  app.add_option("--offload-modules", o.offload_modules,
                 "Megatron-Core fine-grained activation offloading (--fine-grained-activation-offloading "
                 "--offload-modules): the MoE modules whose saved inputs go to host memory, comma-separated: expert_fc1 "
                 "(the experts' permuted input), moe_act (the experts' activation input)");
  app.add_flag("--no-overlap-dp", o.no_overlap_dp, "Do not overlap DP gradient reduction with backward");
  app.add_flag("--overlap-tp", o.overlap_tp, "Overlap TP collectives with GEMMs");
  app.add_flag("--no-overlap-cp", o.no_overlap_cp, "Do not overlap the CP ring exchange with attention");
  app.add_flag("--overlap-p2p", o.overlap_p2p,
               "Overlap pipeline sends with compute (Megatron-Core --overlap-p2p-communication; default: the sender waits)");
  app.add_flag("--post-validation", o.post_validation,
               "Zero Bubble's optimizer post-validation (zb-h1, zb-2p, zb-v): no optimizer sync across stages, the next "
               "iteration's forwards fill the pipeline (Qi et al. 2023 Sec. 4)");
  app.add_flag("--no-async-tp", o.no_async_tp,
               "Backward TP collectives block (Megatron-LM before its asynchronous all-reduce, Megatron-DeepSpeed)");
  app.add_flag("--tp-collective-copies", o.tp_collective_copies,
               "Each sequence-parallel TP all-gather / reduce-scatter also copies the whole tensor (PyTorch functional "
               "collectives on a dim other than 0: torchtitan's DTensor TP on [batch, seq, hidden]); needs --tp > 1 "
               "and --sequence-parallel");
  app.add_flag("--micropipeline-tp", o.micropipeline_tp,
               "Micro-pipelined (async) TP, as torchtitan's enable_async_tensor_parallel runs it: each sequence-parallel "
               "all-gather / reduce-scatter split into tp transfers beside the pieces of its GEMM; needs --tp > 1 and "
               "--sequence-parallel, a dense model, not --overlap-tp");
  app.add_flag("--no-p2p-scatter-gather", o.no_p2p_scatter_gather,
               "Each TP rank sends the whole activation between pipeline stages (DeepSpeed PipelineEngine)");
  app.add_flag("--no-fused-grad-accumulation", o.no_fused_grad_accumulation,
               "Weight gradients are added to the gradient buffer by a separate pass each microbatch (Megatron-LM 2021)");
  app.add_flag("--eager-cross-entropy", o.eager_cross_entropy,
               "The loss is PyTorch's F.cross_entropy on fp32 logits (torchtitan): its backward holds two more fp32 "
               "tokens x vocab tensors than a fused cross entropy");
  app.add_flag("--eager-elementwise", o.eager_elementwise,
               "The layers' norms, rotary embedding, SwiGLU and residual adds run uncompiled (PyTorch eager, "
               "torchtitan without torch.compile): one kernel per tensor op, with fp32 upcasts");
  app.add_option("--bucket-mb", o.bucket_mb, "DP gradient bucket size in MB (default 40)")->check(CLI::Range(0.001, 1e6));
  app.add_option("--first-stage-layers", o.first_stage_layers, "Layers on the first pipeline stage (uneven split)")->check(pos);
  app.add_option("--last-stage-layers", o.last_stage_layers, "Layers on the last pipeline stage (uneven split)")->check(pos);
  app.add_option("--stage-layers", o.stage_layers,
                 "Layers per pipeline stage, e.g. 3,4,4,3, or per chunk when interleaved, e.g. 0/1/1,1/1/1,1/1/0");
  app.add_option("--etp", o.etp,
                 "Expert tensor parallel size (MoE): the experts' tp under Megatron-Core's parallel folding, ep x etp "
                 "dividing tp x cp x dp (default: the experts split over tp, ep groups within dp)")->check(pos);
  app.add_option("--moe-dispatcher", o.moe_dispatcher,
                 "alltoall | deepep: MoE tokens by NCCL all-to-all (default) or DeepEP's node-deduplicating kernels");
  app.add_flag("--overlap-ep", o.overlap_ep,
               "Overlap MoE all-to-alls with another microbatch's compute (Megatron-Core "
               "--overlap-moe-expert-parallel-comm)");
  app.add_flag("--account-for-embedding-in-pipeline-split", o.embedding_in_split,
               "Count the embedding as a layer of the first stage (and chunk) when splitting (Megatron-Core)");
  app.add_flag("--account-for-loss-in-pipeline-split", o.loss_in_split,
               "Count the loss as a layer of the last stage (and chunk) when splitting (Megatron-Core)");
  o.options = options_since(app, before);
}

void add_batch_options(CLI::App& app, std::optional<int64_t>& global_batch, std::optional<int64_t>& tokens_per_step) {
  app.add_option("--global-batch", global_batch,
                 "Sequences per step (default: 4 Mi tokens up to 2,048 GPUs, twice that per 4x GPUs; "
                 "docs/cost-model.md)")
      ->check(CLI::Range(int64_t{1}, kMaxMeshGpus));
  app.add_option("--tokens-per-step", tokens_per_step,
                 "Tokens per step, rounded up to whole sequences (instead of --global-batch)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 50));
}

void forbid_with_plan_file(const ModelOptions& mo, const MeshOptions& me, std::initializer_list<std::string_view> allowed) {
  for (const auto* set : {&mo.options, &me.options}) {
    for (const CLI::Option* op : *set) {
      const std::string name = op->get_name();
      if (op->count() == 0 || std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
      throw InputError(fmt::format("{}: cannot be combined with --plan (the Plan document fixes the plan: edit it, or "
                                   "give the whole plan as flags)",
                                   name));
    }
  }
}

bool names_a_file(const std::string& s) {
  return s.find('/') != std::string::npos || (s.size() > 5 && s.ends_with(".json"));
}

ProfileSet load_profiles(const std::vector<std::string>& profile_files) {
  ProfileSet set = ProfileSet::embedded();
  for (const auto& f : profile_files) {
    add_profile_file(set, f, "--profile");
    // An earlier --profile file (another file) answering to one of this one's names or aliases (its own, or those it
    // took over) is a clash: the order of the flags would decide which one a name means.
    const ProfileSet::Entry& added = set.entries().back();
    const ProfileSet::Entry* clash = nullptr;
    std::string name;
    for (const auto& [i, k] : added.replaced) {
      const ProfileSet::Entry& e = set.entries()[i];
      if (e.embedded || same_file(e.where, added.where) || (clash && clash <= &e)) continue;
      clash = &e;
      name = k;
    }
    if (!clash) continue;
    if (same_name(clash->name, added.name)) {
      throw InputError(fmt::format("--profile: '{}' and '{}' both define {} '{}' (give one)", clash->where, added.where,
                                   added.kind, added.name));
    }
    throw InputError(fmt::format("--profile: {} '{}' in '{}' and {} '{}' in '{}' both answer to '{}' (give one)",
                                 clash->kind, clash->name, clash->where, added.kind, added.name, added.where, name));
  }
  return set;
}

ProfileSet load_profiles(const ModelOptions& o) { return load_profiles(o.profile_files); }

namespace {
// --sliding-window and --sliding-window-pattern over the model's fields, checked as the model JSON's are
// (sliding_window_error; with --sliding-window 0 the model's pattern goes too).
void set_sliding_window(ModelSpec& m, const ModelOptions& o) {
  if (o.sliding_window) {
    m.sliding_window = *o.sliding_window;
    if (*o.sliding_window == 0 && !o.sliding_window_pattern) m.sliding_window_pattern = 0;
  }
  if (o.sliding_window_pattern) m.sliding_window_pattern = *o.sliding_window_pattern;
  if (const SlidingWindowError e = sliding_window_error(m); e.field != SlidingWindowError::Field::none) {
    throw InputError(fmt::format("{}: {}", e.field == SlidingWindowError::Field::window ? "--sliding-window"
                                                                                          : "--sliding-window-pattern",
                                 e.message));
  }
}

// The flag a MoE routing error is about: the one given for the field it names (imbalance: --moe-imbalance when given,
// else the capacity flag that makes it conflict), or for a dense model the first routing flag given.
const char* moe_routing_flag(MoeRoutingError::Field f, const ModelOptions& o) {
  using Field = MoeRoutingError::Field;
  if (f == Field::not_moe) {
    f = !o.moe_capacity_factor.empty() ? Field::capacity_factor
        : o.moe_imbalance              ? Field::imbalance
        : o.moe_router_groups          ? Field::router_groups
                                       : Field::router_group_top_k;
  }
  switch (f) {
    case Field::capacity_factor: return "--moe-capacity-factor";
    case Field::imbalance: return o.moe_imbalance ? "--moe-imbalance" : "--moe-capacity-factor";
    case Field::router_groups: return "--moe-router-groups";
    default: return o.moe_router_group_top_k ? "--moe-router-group-top-k" : "--moe-router-groups";
  }
}

// --moe-capacity-factor, --moe-imbalance, the routing groups and --mtp-layers over the model's fields, checked as the
// model JSON's are.
void set_moe_routing(ModelSpec& m, const ModelOptions& o) {
  if (!o.moe_capacity_factor.empty()) {
    const std::string& text = o.moe_capacity_factor;
    double factor = 0;
    if (text != "none") {
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), factor);
      if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(factor)) {
        throw InputError(fmt::format("--moe-capacity-factor: '{}' is not none or a number", printable(text)));
      }
    }
    m.capacity_factor = factor;
    if (factor != 0 && !o.moe_imbalance) m.imbalance = 1.0;  // a capacity pads every expert: no imbalance
  }
  if (o.moe_imbalance) m.imbalance = *o.moe_imbalance;
  if (o.moe_router_groups) {
    m.router_groups = *o.moe_router_groups;
    if (*o.moe_router_groups == 0 && !o.moe_router_group_top_k) m.router_group_top_k = 0;  // no groups to choose
  }
  if (o.moe_router_group_top_k) m.router_group_top_k = *o.moe_router_group_top_k;
  if (const MoeRoutingError e = moe_routing_error(m); e.field != MoeRoutingError::Field::none) {
    throw InputError(fmt::format("{}: {}", moe_routing_flag(e.field, o), e.message));
  }
  if (o.mtp_layers) m.mtp_layers = *o.mtp_layers;
  set_sliding_window(m, o);
}
}  // namespace

Target resolve_target(const ModelOptions& o, const ProfileSet& base) {
  ProfileSet profiles = base;
  Target t;
  if (!o.model.empty() && !o.params.empty()) throw InputError("--model and --params: give one, not both");
  if (!o.model.empty()) {
    std::optional<HfModel> hf;
    if (names_a_file(o.model)) {
      const std::string text = read_file(o.model, "--model");
      if (const nlohmann::json j = parse_json_text(text, o.model); is_hf_config(j)) {
        hf = model_from_hf_config(j, o.model);
        t.model = hf->model;
      } else if (profiles.add(text, o.model) != "model") {
        throw InputError(fmt::format("--model: '{}' is not a model profile", o.model));
      } else {
        t.model = *profiles.find_model(profiles.entries().back().name);
      }
    } else {
      t.model = profiles.model(o.model, "--model");
    }
    t.model_note = fmt::format("model {} ({})", t.model.name, t.model.source.empty() ? "profile" : t.model.source);
    if (hf) {
      if (!o.seq) t.model_note += fmt::format("; assumed: {}", fmt::join(hf->assumed, "; "));
      if (!hf->ignored.empty()) t.model_note += fmt::format("; not priced: {}", fmt::join(hf->ignored, "; "));
    } else if (o.seq && *o.seq != t.model.seq_len) {
      t.model_note += fmt::format("; seq {} (--seq; the profile's is {})", *o.seq, t.model.seq_len);
    }
  } else if (!o.params.empty()) {
    t.model = infer_gpt_shape(parse_count(o.params, "--params"));
    if (o.seq) t.model.seq_len = *o.seq;  // the shape keeps its layers and widths; learned positions follow the seq
    t.model_note = fmt::format(
        "model inferred from --params {}: GPT-style, {} layers, hidden {}, {} heads, ffn {}, vocab {}, seq {}{} "
        "({:.4g}B parameters; rule in docs/cost-model.md)",
        o.params, t.model.layers, t.model.hidden, t.model.heads, t.model.ffn_hidden, t.model.vocab, t.model.seq_len,
        o.seq ? " (--seq)" : "", static_cast<double>(total_params(t.model)) / 1e9);
  } else if (o.model_spec) {
    t.model = *o.model_spec;
    t.model_note = fmt::format("model {} ({})", t.model.name, t.model.source);
  } else {
    throw InputError("--model or --params is required");
  }
  if (o.seq) t.model.seq_len = *o.seq;
  set_moe_routing(t.model, o);

  std::string gpu_name;
  if (!o.gpu.empty()) {
    if (names_a_file(o.gpu)) {
      if (add_profile_file(profiles, o.gpu, "--gpu") != "gpu") throw InputError(fmt::format("--gpu: '{}' is not a GPU profile", o.gpu));
      gpu_name = profiles.entries().back().name;
    } else {
      gpu_name = o.gpu;
    }
    t.gpu = profiles.gpu(gpu_name, "--gpu");
  }
  if (!o.cluster.empty()) {
    std::string name = o.cluster;
    if (names_a_file(o.cluster)) {
      if (add_profile_file(profiles, o.cluster, "--cluster") != "cluster") {
        throw InputError(fmt::format("--cluster: '{}' is not a cluster profile", o.cluster));
      }
      name = profiles.entries().back().name;
    }
    t.cluster = profiles.cluster(name, "--cluster");
    if (o.gpu.empty()) t.gpu = profiles.gpu(t.cluster.gpu, "--cluster (its gpu)");
  } else if (!o.gpu.empty()) {
    // A cluster built around the chosen GPU: the first preset with that GPU, else the default fabric.
    const ClusterSpec* match = nullptr;
    for (const auto& e : profiles.entries()) {
      if (e.kind != "cluster") continue;
      const ClusterSpec* c = profiles.find_cluster(e.name);
      if (c && profiles.find_gpu(c->gpu) && profiles.find_gpu(c->gpu)->name == t.gpu.name) {
        match = c;
        break;
      }
    }
    t.cluster = match ? *match : profiles.cluster("dgx-h100", "--cluster");
    t.cluster.gpu = t.gpu.name;
  } else {
    t.cluster = profiles.cluster("dgx-h100", "--cluster");
    t.gpu = profiles.gpu(t.cluster.gpu, "--cluster (its gpu)");
  }
  if (t.gpu.memory_bytes <= 0) throw InputError("--gpu: the GPU profile has no memory");
  return t;
}

int64_t default_tokens_per_step(int64_t gpus) {
  int64_t tokens = int64_t{1} << 22;
  for (int64_t n = 2048; n < gpus; n *= 4) tokens *= 2;
  return tokens;
}

BatchRequest requested_batch(std::optional<int64_t> global_batch, std::optional<int64_t> tokens_per_step, int64_t seq,
                             int64_t gpus) {
  if (global_batch && tokens_per_step) throw InputError("--global-batch and --tokens-per-step: give one, not both");
  BatchRequest b;
  if (global_batch) {
    b.sequences = *global_batch;
    b.exact = true;
    b.what = b.source = "--global-batch";
  } else if (tokens_per_step) {
    b.sequences = (*tokens_per_step + seq - 1) / seq;
    b.what = b.source = fmt::format("--tokens-per-step {}", *tokens_per_step);
    if (*tokens_per_step % seq != 0) b.source += fmt::format(" rounded up to whole sequences of {}", seq);
    if (b.sequences > kMaxGlobalBatch) {
      throw InputError(fmt::format("--tokens-per-step: {} tokens are {} sequences of {}, more than a plan's {} per step",
                                   *tokens_per_step, b.sequences, seq, kMaxGlobalBatch));
    }
  } else {
    const int64_t tokens = default_tokens_per_step(gpus);
    b.sequences = std::max<int64_t>(1, tokens / seq);
    b.what = b.source = fmt::format("the default for {}, {} Mi tokens", count_of(gpus, "GPU"), tokens >> 20);
  }
  return b;
}

// The MoE token-exchange flags where the plan has no all-to-all: a dense model, or ep 1. A usage error naming the
// flag, rather than a plan priced as if it were not given.
void refuse_idle_moe_flags(const Plan& plan, const MeshOptions& me) {
  const char* flag = me.overlap_ep ? "--overlap-ep" : !me.moe_dispatcher.empty() ? "--moe-dispatcher" : nullptr;
  if (!flag) return;
  if (!plan.model.is_moe()) {
    throw InputError(fmt::format("{}: the model has no experts (the flag is for MoE models' all-to-alls)", flag));
  }
  const bool idle = me.overlap_ep || plan.parallel.moe_dispatcher == MoeDispatcher::deepep;
  if (plan.parallel.ep == 1 && idle) {
    throw InputError(fmt::format("{}: ep 1 has no all-to-all to {} (give --ep N)", flag,
                                 me.overlap_ep ? "overlap" : "dispatch"));
  }
}

Plan build_plan(const ModelOptions& mo, const MeshOptions& me, const ProfileSet& profiles, std::string* model_note,
                std::string* batch_note) {
  Target t = resolve_target(mo, profiles);
  if (model_note) *model_note = t.model_note;
  Plan plan;
  plan.model = t.model;
  plan.gpu = t.gpu;
  plan.cluster = t.cluster;
  size_mesh(plan, mo, me);
  set_knobs(plan.parallel, me);
  refuse_idle_moe_flags(plan, me);
  set_training(plan, mo, me);
  const std::string note = set_batch(plan, me);
  if (batch_note) *batch_note = note;
  check_plan_inputs(plan, "flags");
  refuse_invalid(plan, mo);
  return plan;
}

int64_t recompute_layers_arg(int64_t k) {
  if (k < 0) {
    throw InputError(fmt::format("--recompute-layers: {} is negative (0 = every layer, K = the first K of each model "
                                 "chunk)",
                                 k));
  }
  return k;
}

std::string post_validation_note(const Plan& plan, std::string_view what) {
  if (!plan.parallel.post_validation || plan.parallel.schedule != Schedule::zb_2p) return "";
  return fmt::format("post-validation: {} runs one iteration with its warm-up forwards, which a continuous run overlaps "
                     "with the previous iteration; the closed form prices that continuous-run step",
                     what);
}

Plan load_plan_file(const std::string& path, const ProfileSet& profiles) {
  const std::string text = read_file(path, "--plan");
  Plan plan = plan_from_text(text, profiles, path);
  const Validity v = validate(plan, {true});
  if (!v.ok()) {
    for (int i = 0; i < kNumRejects; ++i) {
      if (v.has(static_cast<Reject>(i))) {
        throw InputError(fmt::format("{}: /parallel: {}", path, describe(static_cast<Reject>(i), plan)));
      }
    }
  }
  return plan;
}

}  // namespace parplan::cli
