// Plan -> framework config (see export.hpp). Option names: Megatron-LM megatron/training/arguments.py (core_r0.9+),
// NeMo megatron_gpt_config.yaml, torchtitan torchtitan/config/job_config.py, DeepSpeed docs/_pages/config-json.md.
#include "cli/interop/export.hpp"

#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "planner/spec/config.hpp"
#include "planner/spec/error.hpp"

namespace parplan::cli {
namespace {

struct Writer {
  Exported out;
  std::string comment = "#";
  void cannot(const std::string& what) { out.warnings.push_back(what); }
  void not_written(const std::string& what) { out.not_written.push_back(what); }
  std::string comments() const {
    std::string s;
    for (const std::string& w : out.warnings) s += fmt::format("{} parplan: not expressible: {}\n", comment, w);
    for (const std::string& w : out.not_written) s += fmt::format("{} parplan: not written: {}\n", comment, w);
    return s;
  }
};

// The knobs no framework config here carries (parplan's own modelling choices), as warnings when not the default.
// torchtitan names the V schedules (ZBVZeroBubble, DualPipeV: to_torchtitan).
void common_cannot(const Plan& plan, Writer& w, Framework to) {
  const ParallelConfig& pc = plan.parallel;
  if (plan.model.imbalance != 1.0) w.cannot(fmt::format("--moe-imbalance {:g} (a property of the routing)", plan.model.imbalance));
  if (splits_backward(pc.schedule) && !(to == Framework::torchtitan && v_shaped(pc.schedule) && !pc.post_validation)) {
    w.cannot(fmt::format("schedule {}{}", to_string(pc.schedule), pc.post_validation ? " with optimizer post-validation" : ""));
  }
  if (!pc.p2p_scatter_gather) w.cannot("--no-p2p-scatter-gather");
  if (!pc.overlap_cp_comm) w.cannot("--no-overlap-cp");
  // The targets' own window options (Megatron-Core's window_size, window_attn_skip_freq) are not written: import reads
  // them back only beside a --model with a window, so the export does not claim a mapping it does not check.
  if (plan.model.sliding_window > 0) {
    const int64_t p = plan.model.sliding_window_pattern;
    w.not_written(fmt::format("sliding-window attention (sliding_window {}{}): set the framework's window option by "
                              "hand",
                              plan.model.sliding_window, p > 0 ? fmt::format(", sliding_window_pattern {}", p) : ""));
  }
}

// Megatron-Core's pipeline layout string for an explicit per-chunk split (ParallelConfig::stage_layout): virtual
// stage v (stage v % pp, chunk v / pp) as 't' per layer, the embedding 'E' first, the MTP blocks 'm' and the loss 'L'
// last, stages separated by '|' (what import reads back, parse_megatron_layout).
std::string megatron_layout(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  const int64_t chunks = static_cast<int64_t>(pc.stage_layout.front().size()), V = pc.pp * chunks;
  std::string s;
  for (int64_t v = 0; v < V; ++v) {
    if (v > 0) s += '|';
    if (v == 0) s += 'E';
    s += std::string(static_cast<size_t>(pc.stage_layout[static_cast<size_t>(v % pc.pp)][static_cast<size_t>(v / pc.pp)]), 't');
    if (v == V - 1) s += std::string(static_cast<size_t>(plan.model.mtp_layers), 'm') + "L";
  }
  return s;
}

// A pipeline split other than the even one, where the target has no key for it.
void uneven_split_cannot(const Plan& plan, Writer& w) {
  const ParallelConfig& pc = plan.parallel;
  if (!pc.stage_layout.empty()) w.cannot(fmt::format("--stage-layers {}", format_stage_layout(pc.stage_layout)));
  if (pc.first_stage_layers > 0) w.cannot(fmt::format("--first-stage-layers {}", pc.first_stage_layers));
  if (pc.last_stage_layers > 0) w.cannot(fmt::format("--last-stage-layers {}", pc.last_stage_layers));
  if (pc.embedding_in_pipeline_split) w.cannot("--account-for-embedding-in-pipeline-split");
  if (pc.loss_in_pipeline_split) w.cannot("--account-for-loss-in-pipeline-split");
}

// Offloaded states and activations (ZeRO-Offload, ZeRO-Infinity, CPU activation offload), where the target's config
// does not carry them (DeepSpeed's carries the first two).
void offload_cannot(const Plan& plan, Writer& w) {
  if (plan.parallel.offload.any()) w.cannot(fmt::format("--offload {}", to_string(plan.parallel.offload)));
}

// torchrun starts the same number of processes on every node: a GPU count that is not whole nodes of the cluster is
// written as one node of all the GPUs.
int64_t gpus_per_launch_node(const Plan& plan, Writer& w) {
  const int64_t g = plan.cluster.gpus_per_node;
  if (g > 0 && plan.num_gpus % g == 0) return g;
  if (g > 0 && plan.num_gpus > g) {
    w.cannot(fmt::format("{} GPUs on {}-GPU nodes (not whole nodes): written as one node of {}", plan.num_gpus, g,
                         plan.num_gpus));
  }
  return plan.num_gpus;
}

std::string megatron_recompute(Recompute r) { return r == Recompute::full ? "full" : "selective"; }

// Megatron-LM and NeMo have no per-op policy: selective-op is written as their selective (attention core).
void megatron_recompute_cannot(const Plan& plan, Writer& w) {
  if (plan.parallel.recompute == Recompute::selective_op) {
    w.cannot("recompute selective-op (torchtitan's per-op policy): written as Megatron's selective");
  }
}

// Megatron-Core's --moe-layer-freq for a MoE model's dense layers: k leading ones, then every step-th layer MoE
// (ModelSpec::dense_layers_before), as a list expression; empty when every layer is MoE.
std::string megatron_layer_freq(const ModelSpec& m) {
  if (!m.has_dense_layers()) return "";
  const int64_t step = std::max<int64_t>(1, m.moe_layer_step), after = m.layers - m.dense_layers;
  std::string e = fmt::format("[0]*{}", m.dense_layers);
  if (step == 1) return fmt::format("({}+[1]*{})", e, after);
  e += fmt::format("+([0]*{}+[1])*{}", step - 1, after / step);
  if (after % step > 0) e += fmt::format("+[0]*{}", after % step);
  return fmt::format("({})", e);
}

// Megatron-Core's configuration names (with '_') and values beyond the dense shape, for Megatron-LM (as --names) and
// NeMo (as model keys) alike: MLA's ranks and head widths, or the head width; the experts' FFN (a MoE model's
// --ffn-hidden-size is its dense layers' MLP), shared experts, dense layers and routing groups; the token dispatcher,
// written always (Megatron-LM's default, allgather, is not parplan's), and the 1F1B A2A overlap. An empty value is a
// switch.
using ConfigArgs = std::vector<std::pair<std::string, std::string>>;
ConfigArgs moe_mla_config(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& pc = plan.parallel;
  ConfigArgs a;
  auto num = [&](const char* name, int64_t v) { a.emplace_back(name, std::to_string(v)); };
  if (m.is_mla()) {
    a.emplace_back("multi_latent_attention", "");
    num("kv_lora_rank", m.kv_lora_rank);
    if (m.q_lora_rank > 0) num("q_lora_rank", m.q_lora_rank);
    num("qk_head_dim", m.head_dim());
    num("qk_pos_emb_head_dim", m.qk_rope_head_dim);
    num("v_head_dim", m.v_head_dim());
  } else if (m.head_dim_override > 0) {
    num("kv_channels", m.head_dim());
  }
  if (!m.is_moe()) return a;
  num("num_experts", m.experts);
  num("moe_router_topk", m.top_k);
  num("moe_ffn_hidden_size", m.ffn_hidden);
  if (m.shared_experts > 0) num("moe_shared_expert_intermediate_size", m.shared_experts * m.ffn_hidden);
  if (const std::string f = megatron_layer_freq(m); !f.empty()) a.emplace_back("moe_layer_freq", f);
  if (m.router_groups > 0) {
    num("moe_router_num_groups", m.router_groups);
    num("moe_router_group_topk", m.router_group_top_k);
  }
  const bool deepep = pc.moe_dispatcher == MoeDispatcher::deepep;
  a.emplace_back("moe_token_dispatcher_type", deepep ? "flex" : "alltoall");
  if (deepep) a.emplace_back("moe_enable_deepep", "");
  if (pc.overlap_ep_comm) a.emplace_back("overlap_moe_expert_parallel_comm", "");
  return a;
}

// A list expression ("([0]*3+[1]*58)") quoted as the target's syntax needs it: `quote` around it, anything else bare.
std::string config_value(const std::string& v, char quote) {
  return v.find('(') != std::string::npos ? fmt::format("{}{}{}", quote, v, quote) : v;
}

// Megatron-LM's model-shape arguments for `m`.
std::vector<std::string> megatron_shape(const ModelSpec& m) {
  const int64_t ffn = m.has_dense_layers() ? m.dense_ffn_hidden : m.ffn_hidden;  // Megatron's dense MLP width
  std::vector<std::string> a = {fmt::format("--num-layers {}", m.layers), fmt::format("--hidden-size {}", m.hidden),
                                fmt::format("--ffn-hidden-size {}", ffn),
                                fmt::format("--num-attention-heads {}", m.heads)};
  if (m.kv_heads != m.heads && !m.is_mla()) {
    a.push_back(fmt::format("--group-query-attention --num-query-groups {}", m.kv_heads));
  }
  if (m.ffn_type == FfnType::swiglu) a.push_back("--swiglu");
  if (m.norm == NormType::rmsnorm) a.push_back("--normalization RMSNorm");
  if (m.position == PositionEmbedding::rotary) a.push_back("--position-embedding-type rope");
  if (!m.bias) a.push_back("--disable-bias-linear");
  if (!m.tied_embeddings) a.push_back("--untie-embeddings-and-output-weights");
  if (!m.dropout) a.push_back("--attention-dropout 0.0 --hidden-dropout 0.0");
  if (m.capacity_factor > 0) {
    a.push_back(fmt::format("--moe-expert-capacity-factor {:g} --moe-pad-expert-input-to-capacity", m.capacity_factor));
  }
  if (m.mtp_layers > 0) a.push_back(fmt::format("--mtp-num-layers {}", m.mtp_layers));
  a.push_back(fmt::format("--vocab-size {}", m.vocab));
  return a;
}

// Megatron-Core's --fp8-recipe (NeMo's fp8_recipe) for the plan's recipe: delayed, tensorwise, mxfp8 and blockwise
// are its own; torchao's rowwise is none of them.
std::string_view megatron_fp8_recipe(const Plan& plan, Writer& w) {
  const Fp8Recipe r = plan.training.fp8_recipe;
  if (r == Fp8Recipe::rowwise) {
    w.cannot("fp8 recipe rowwise (Megatron-Core runs delayed, tensorwise, mxfp8 or blockwise): written as tensorwise");
    return "tensorwise";
  }
  return to_string(r);
}

Exported to_megatron(const Plan& plan, Writer& w) {
  const ParallelConfig& pc = plan.parallel;
  if (pc.schedule == Schedule::gpipe) w.cannot("schedule gpipe (Megatron-LM runs 1F1B or interleaved 1F1B)");
  megatron_recompute_cannot(plan, w);
  if (pc.zero_stage >= 3 && pc.zero3_gather_unit == Zero3GatherUnit::layer) {
    w.cannot("ZeRO-3 gathering whole layers (Megatron-DeepSpeed --zero-stage 3 gathers per submodule)");
  }
  if (pc.overlap_p2p_comm) w.cannot("--overlap-p2p (give --overlap-p2p-communication where your Megatron-LM has it)");
  if (pc.dp_replicate > 1 && !pc.distributed_optimizer) {
    w.cannot(fmt::format("--dp-replicate {} without --distributed-optimizer (Megatron-Core's HSDP is "
                         "--num-distributed-optimizer-instances with --use-distributed-optimizer)",
                         pc.dp_replicate));
  }
  offload_cannot(plan, w);
  const bool layout = !pc.stage_layout.empty();
  std::vector<std::string> a = {fmt::format("--tensor-model-parallel-size {}", pc.tp),
                                fmt::format("--pipeline-model-parallel-size {}", pc.pp),
                                fmt::format("--context-parallel-size {}", pc.cp)};
  if (pc.ep > 1) a.push_back(fmt::format("--expert-model-parallel-size {}", pc.ep));
  if (pc.etp > 0) a.push_back(fmt::format("--expert-tensor-parallel-size {}", pc.etp));
  // An explicit per-chunk split is Megatron-Core's layout, which also gives the chunks per stage.
  if (layout) a.push_back(fmt::format("--pipeline-model-parallel-layout '{}'", megatron_layout(plan)));
  if (pc.schedule == Schedule::interleaved && !layout) {
    a.push_back(fmt::format("--virtual-pipeline-model-parallel-size {}", pc.vpp));
  }
  if (pc.sequence_parallel) a.push_back("--sequence-parallel");
  if (pc.first_stage_layers > 0 && !layout) a.push_back(fmt::format("--decoder-first-pipeline-num-layers {}", pc.first_stage_layers));
  if (pc.last_stage_layers > 0 && !layout) a.push_back(fmt::format("--decoder-last-pipeline-num-layers {}", pc.last_stage_layers));
  if (pc.embedding_in_pipeline_split) a.push_back("--account-for-embedding-in-pipeline-split");
  if (pc.loss_in_pipeline_split) a.push_back("--account-for-loss-in-pipeline-split");
  a.push_back(fmt::format("--micro-batch-size {}", pc.micro_batch));
  a.push_back(fmt::format("--global-batch-size {}", plan.training.global_batch));
  a.push_back(fmt::format("--seq-length {}", plan.seq_len()));
  a.push_back(fmt::format("--max-position-embeddings {}", plan.seq_len()));
  for (std::string& s : megatron_shape(plan.model)) a.push_back(std::move(s));
  for (const auto& [name, v] : moe_mla_config(plan)) {
    a.push_back(fmt::format("--{}{}{}", dashed(name), v.empty() ? "" : " ", config_value(v, '\'')));
  }
  if (pc.recompute != Recompute::none) a.push_back("--recompute-granularity " + megatron_recompute(pc.recompute));
  if (pc.recompute == Recompute::full) {  // every layer: uniform groups of 1; recompute_layers k: the block method
    a.push_back(pc.recompute_layers > 0 ? fmt::format("--recompute-method block --recompute-num-layers {}", pc.recompute_layers)
                                        : "--recompute-method uniform --recompute-num-layers 1");
  }
  if (pc.recompute == Recompute::selective && !pc.recompute_modules.is_default()) {
    a.push_back("--recompute-modules " + to_string(pc.recompute_modules, " "));
  }
  if (!pc.offload_modules.empty()) {  // Megatron-Core's fine-grained activation offloading (spec.hpp OffloadModules)
    a.push_back("--fine-grained-activation-offloading --offload-modules " + to_string(pc.offload_modules, " "));
  }
  const Precision p = plan.training.precision;
  a.push_back(p == Precision::fp16 ? "--fp16" : "--bf16");
  if (p == Precision::fp8) {  // the recipe always: Megatron-Core's default (delayed) is not parplan's (tensorwise)
    const std::string_view r = megatron_fp8_recipe(plan, w);
    a.push_back(fmt::format("--fp8-format {} --fp8-recipe {}", r == "mxfp8" || r == "blockwise" ? "e4m3" : "hybrid", r));
  }
  if (plan.training.fp8_param_gather) a.push_back("--fp8-param-gather");
  if (p != Precision::fp16 && !plan.training.grad_fp32) a.push_back("--grad-reduce-in-bf16");
  if (p == Precision::fp16 && plan.training.grad_fp32) a.push_back("--accumulate-allreduce-grads-in-fp32");
  if (plan.training.adam_moments != DType::fp32) {
    const std::string_view d = to_string(plan.training.adam_moments);
    a.push_back(fmt::format("--use-precision-aware-optimizer --exp-avg-dtype {} --exp-avg-sq-dtype {}", d, d));
  }
  if (pc.distributed_optimizer) a.push_back("--use-distributed-optimizer");
  // HSDP: Megatron-Core's partial distributed optimizer, one instance per replica.
  if (pc.dp_replicate > 1 && pc.distributed_optimizer) {
    a.push_back(fmt::format("--num-distributed-optimizer-instances {}", pc.dp_replicate));
  }
  if (pc.overlap_dp_comm) a.push_back("--overlap-grad-reduce");
  if (pc.overlap_tp_comm) a.push_back("--tp-comm-overlap");
  if (!plan.training.fused_grad_accumulation) a.push_back("--no-gradient-accumulation-fusion");
  if (pc.zero_stage > 0) a.push_back(fmt::format("--zero-stage {}", pc.zero_stage));  // Megatron-DeepSpeed
  const int64_t per_node = gpus_per_launch_node(plan, w);
  std::string s = w.comments();
  if (pc.zero_stage > 0) {
    s += "# --zero-stage is Megatron-DeepSpeed's argument (Megatron-LM has none; its ZeRO-1 is --use-distributed-optimizer)\n";
  }
  s += fmt::format("torchrun --nproc_per_node {} --nnodes {} pretrain_gpt.py \\\n", per_node, plan.num_gpus / per_node);
  for (size_t i = 0; i < a.size(); ++i) s += fmt::format("    {}{}\n", a[i], i + 1 == a.size() ? "" : " \\");
  w.out.text += s;
  return w.out;
}

// NeMo's model keys for moe_mla_config()'s arguments (NeMo names the expert count num_moe_experts), the MTP depth and
// fine-grained activation offloading.
std::string nemo_moe_mla(const Plan& plan) {
  std::string s;
  for (const auto& [name, v] : moe_mla_config(plan)) {
    s += fmt::format("  {}: {}\n", name == "num_experts" ? "num_moe_experts" : name, v.empty() ? "true" : config_value(v, '"'));
  }
  if (plan.model.mtp_layers > 0) s += fmt::format("  mtp_num_layers: {}\n", plan.model.mtp_layers);
  if (!plan.parallel.offload_modules.empty()) {
    s += fmt::format("  fine_grained_activation_offloading: true\n  offload_modules: [{}]\n",
                     to_string(plan.parallel.offload_modules, ", "));
  }
  return s;
}

Exported to_nemo(const Plan& plan, Writer& w) {
  const ParallelConfig& pc = plan.parallel;
  const ModelSpec& m = plan.model;
  if (pc.zero_stage > 0) w.cannot(fmt::format("ZeRO stage {} (NeMo shards the optimizer with distributed_fused_adam)", pc.zero_stage));
  if (pc.schedule == Schedule::gpipe) w.cannot("schedule gpipe");
  if (pc.dp_replicate > 1) w.cannot(fmt::format("--dp-replicate {} (HSDP replicas)", pc.dp_replicate));
  megatron_recompute_cannot(plan, w);
  if (pc.distributed_optimizer != pc.overlap_dp_comm) {
    w.cannot(pc.overlap_dp_comm ? "overlapped gradient reduction without the distributed optimizer"
                                : "the distributed optimizer without overlapped gradient reduction");
  }
  if (plan.training.grad_fp32 != (plan.training.precision != Precision::fp16)) {
    w.cannot(fmt::format("gradients reduced in {} (NeMo reduces {} training's in {})", plan.training.grad_fp32 ? "fp32" : "16 bits",
                         to_string(plan.training.precision), plan.training.grad_fp32 ? "16 bits" : "fp32"));
  }
  offload_cannot(plan, w);
  if (!pc.stage_layout.empty()) w.cannot(fmt::format("--stage-layers {}", format_stage_layout(pc.stage_layout)));
  const int64_t per_node = gpus_per_launch_node(plan, w);
  w.not_written(fmt::format("vocabulary {}: NeMo takes it from model.tokenizer (import assumes GPT-2's 50257)", m.vocab));
  std::string s = w.comments();
  s += fmt::format("trainer:\n  devices: {}\n  num_nodes: {}\n  precision: {}\n", per_node, plan.num_gpus / per_node,
                   plan.training.precision == Precision::fp16 ? "16-mixed" : "bf16-mixed");
  s += "model:\n";
  s += fmt::format("  micro_batch_size: {}\n  global_batch_size: {}\n", pc.micro_batch, plan.training.global_batch);
  s += fmt::format("  tensor_model_parallel_size: {}\n  pipeline_model_parallel_size: {}\n", pc.tp, pc.pp);
  s += fmt::format("  virtual_pipeline_model_parallel_size: {}\n", pc.schedule == Schedule::interleaved ? std::to_string(pc.vpp) : "null");
  s += fmt::format("  context_parallel_size: {}\n  expert_model_parallel_size: {}\n", pc.cp, pc.ep);
  if (pc.etp > 0) s += fmt::format("  expert_tensor_parallel_size: {}\n", pc.etp);
  s += fmt::format("  sequence_parallel: {}\n", pc.sequence_parallel);
  // Megatron-Core's uneven first and last stages and the embedding and loss counted as layers in the split.
  if (pc.first_stage_layers > 0) s += fmt::format("  num_layers_in_first_pipeline_stage: {}\n", pc.first_stage_layers);
  if (pc.last_stage_layers > 0) s += fmt::format("  num_layers_in_last_pipeline_stage: {}\n", pc.last_stage_layers);
  if (pc.embedding_in_pipeline_split) s += "  account_for_embedding_in_pipeline_split: true\n";
  if (pc.loss_in_pipeline_split) s += "  account_for_loss_in_pipeline_split: true\n";
  if (!plan.training.fused_grad_accumulation) s += "  gradient_accumulation_fusion: false\n";
  s += fmt::format("  encoder_seq_length: {}\n  max_position_embeddings: {}\n", plan.seq_len(), plan.seq_len());
  s += fmt::format("  num_layers: {}\n  hidden_size: {}\n  ffn_hidden_size: {}\n  num_attention_heads: {}\n", m.layers,
                   m.hidden, m.has_dense_layers() ? m.dense_ffn_hidden : m.ffn_hidden, m.heads);
  s += fmt::format("  num_query_groups: {}\n", m.kv_heads);
  s += nemo_moe_mla(plan);
  s += fmt::format("  activation: {}\n  normalization: {}\n", m.ffn_type == FfnType::swiglu ? "fast-swiglu" : "gelu",
                   m.norm == NormType::rmsnorm ? "rmsnorm" : "layernorm");
  s += fmt::format("  position_embedding_type: {}\n  bias: {}\n  share_embeddings_and_output_weights: {}\n",
                   m.position == PositionEmbedding::rotary ? "rope" : "learned_absolute", m.bias, m.tied_embeddings);
  if (!m.dropout) s += "  hidden_dropout: 0.0\n  attention_dropout: 0.0\n";

  s += fmt::format("  activations_checkpoint_granularity: {}\n",
                   pc.recompute == Recompute::none ? "null" : megatron_recompute(pc.recompute));
  if (pc.recompute == Recompute::full) {
    s += pc.recompute_layers > 0 ? fmt::format("  activations_checkpoint_method: block\n  activations_checkpoint_num_layers: {}\n",
                                               pc.recompute_layers)
                                 : "  activations_checkpoint_method: uniform\n  activations_checkpoint_num_layers: 1\n";
  }
  if (pc.recompute == Recompute::selective && !pc.recompute_modules.is_default()) {
    s += fmt::format("  recompute_modules: [{}]\n", to_string(pc.recompute_modules, ", "));
  }
  s += fmt::format("  fp8: {}\n", plan.training.precision == Precision::fp8);
  if (plan.training.precision == Precision::fp8) s += fmt::format("  fp8_recipe: {}\n", megatron_fp8_recipe(plan, w));
  if (plan.training.fp8_param_gather) s += "  fp8_params: true\n";
  s += fmt::format("  optim:\n    name: {}\n", pc.distributed_optimizer ? "distributed_fused_adam" : "fused_adam");
  w.out.text = s;
  return w.out;
}

// torchtitan's model name and flavor for a parplan model profile, when it has one ("llama3-8b" -> llama3, 8B).
std::pair<std::string, std::string> titan_model(const std::string& name) {
  for (const char* f : {"8b", "70b", "405b"}) {
    if (name == std::string("llama3-") + f) {
      std::string flavor = f;
      flavor.back() = 'B';
      return {"llama3", flavor};
    }
  }
  // torchtitan's MoE flavors (the profiles' aliases: deepseek_v3-671b, llama4-17bx16e, llama4-17bx128e).
  if (name == "deepseek-v3") return {"deepseek_v3", "671B"};
  if (name == "llama4-scout") return {"llama4", "17bx16e"};
  if (name == "llama4-maverick") return {"llama4", "17bx128e"};
  return {"", ""};
}

// torchtitan's [float8] section: the torchao recipe (tensorwise, rowwise) and FSDP float8 all-gather; MXFP8 is the
// mx converter's, with no section here.
std::string titan_float8(const Plan& plan, Writer& w) {
  const Fp8Recipe r = plan.training.fp8_recipe;
  if (r == Fp8Recipe::mxfp8) {
    if (plan.training.fp8_param_gather) w.cannot("fp8 weights gathered in fp8 with MXFP8 (torchtitan's mx converter gathers them in bf16)");
    return "";
  }
  if (r != Fp8Recipe::tensorwise && r != Fp8Recipe::rowwise) {
    w.cannot(fmt::format("fp8 recipe {} (torchtitan's float8 converter runs tensorwise or rowwise): written as tensorwise",
                         to_string(r)));
  }
  std::string s = fmt::format("\n[float8]\nrecipe_name = \"{}\"\n", r == Fp8Recipe::rowwise ? "rowwise" : "tensorwise");
  if (plan.training.fp8_param_gather) s += "enable_fsdp_float8_all_gather = true\n";
  return s;
}

// N for torchtitan's selective_ac_option when the plan's full recompute of K layers per chunk is one block in N of
// every chunk (all chunks L layers, K dividing L); 0 otherwise.
int64_t torchtitan_every_nth(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  if (pc.recompute != Recompute::full || pc.recompute_layers <= 0) return 0;
  const int64_t layers = chunk_layers(plan, 0, 0);
  for (int64_t stage = 0; stage < pc.pp; ++stage) {
    for (int64_t chunk = 0; chunk < pc.chunks_per_stage(); ++chunk) {
      if (chunk_layers(plan, stage, chunk) != layers) return 0;
    }
  }
  return layers % pc.recompute_layers == 0 ? layers / pc.recompute_layers : 0;
}

Exported to_torchtitan(const Plan& plan, Writer& w) {
  const ParallelConfig& pc = plan.parallel;
  const bool pipelined = pc.pp > 1;
  // torchtitan shards with FSDP2: ZeRO-3 (under pipelining ZeRO-1 in memory and time, which a ZeRO-1 plan also says).
  const bool fsdp = pc.zero_stage == 3 || (pipelined && pc.zero_stage == 1);
  if (pc.zero_stage != 0 && !fsdp) w.cannot(fmt::format("ZeRO stage {} with pp {} (torchtitan shards with FSDP: ZeRO-3, or ZeRO-1 under pipelining)", pc.zero_stage, pc.pp));
  if (pc.zero_stage == 3 && !pc.fsdp2) w.cannot("ZeRO-3 without FSDP2's copies (torchtitan's FSDP is FSDP2: --fsdp2)");
  if (pipelined && pc.zero_stage == 1) {
    w.cannot("ZeRO-1 with pp > 1 (torchtitan shards with FSDP2: --zero 3 --fsdp2, whose copies run once a step)");
  }
  if (pc.schedule == Schedule::interleaved) w.cannot(fmt::format("interleaved vpp {} (set pipeline_parallel_layers_per_stage = layers / (pp x vpp))", pc.vpp));
  if (pc.tp > 1 && !pc.sequence_parallel) w.cannot("tp without sequence parallelism (torchtitan's TP shards the norms over the sequence)");
  if (pc.tp > 1 && pc.async_tp_backward) {
    w.cannot("asynchronous backward TP collectives (torchtitan's DTensor TP blocks on each: --no-async-tp)");
  }
  if (plan.training.precision == Precision::fp8 && pc.tp > 1 && pc.sequence_parallel &&
      plan.training.fp8_tp_gather != plan.training.torchtitan_fp8_tp_gather(pc)) {
    w.cannot(plan.training.fp8_tp_gather ? "fp8 TP all-gathers with a rowwise recipe (torchtitan gathers in fp8 only with tensorwise)"
                                         : "16-bit TP all-gathers with the tensorwise recipe (torchtitan gathers them in fp8: --fp8-tp-gather)");
  }
  if (pc.tp > 1 && pc.sequence_parallel && !pc.tp_collective_copies) {
    w.cannot("TP collectives without DTensor's copies on the sequence dim (torchtitan pays them: --tp-collective-copies)");
  }
  if (plan.training.precision == Precision::fp16) w.cannot("fp16 (torchtitan trains in bfloat16)");
  if (pc.distributed_optimizer) w.cannot("the Megatron distributed optimizer");
  // Unsharded data parallelism is torchtitan's DDP (data_parallel_replicate_degree), which runs on a 1-D mesh only.
  if (!fsdp && pc.dp > 1 && (pc.tp > 1 || pc.pp > 1 || pc.cp > 1)) {
    w.cannot("data parallelism without sharding beside tp, pp or cp (torchtitan's DDP runs on a 1-D mesh only; "
             "--zero 3 --fsdp2 is its FSDP)");
  }
  // torchtitan's FSDP is on whenever cp > 1 (it shards over the dp_shard x cp ranks), so an unsharded plan with cp
  // is not what it runs; and it replicates only FSDP (HSDP), so the replicas of another sharding are lost.
  if (!fsdp && pc.dp == 1 && pc.cp > 1) {
    w.cannot(fmt::format("ZeRO 0 with cp {} (torchtitan's FSDP shards over the cp ranks whenever cp > 1)", pc.cp));
  }
  if (!fsdp && pc.dp_replicate > 1) {
    w.cannot(fmt::format("--dp-replicate {} (HSDP replicas of a plan that does not shard with FSDP; written as DDP "
                         "over dp {}: torchtitan's replicas are HSDP's only with --zero 3 --fsdp2)",
                         pc.dp_replicate, pc.dp));
  }
  uneven_split_cannot(plan, w);
  offload_cannot(plan, w);
  if (!plan.training.fused_grad_accumulation) w.cannot("--no-fused-grad-accumulation");
  const auto [name, flavor] = titan_model(plan.model.name);
  if (name.empty()) w.cannot(fmt::format("model '{}' (no torchtitan flavor; give [model] name / flavor)", plan.model.name));
  const std::string float8 = plan.training.precision == Precision::fp8 ? titan_float8(plan, w) : "";
  std::string s = "[model]\n";
  if (!name.empty()) s += fmt::format("name = \"{}\"\nflavor = \"{}\"\n", name, flavor);
  if (plan.training.precision == Precision::fp8) {
    s += plan.training.fp8_recipe == Fp8Recipe::mxfp8 ? "converters = [\"mx\"]\n" : "converters = [\"float8\"]\n";
  }
  s += "\n[training]\n";
  s += fmt::format("local_batch_size = {}\n", pipelined ? pc.micro_batch * pc.num_microbatches : pc.micro_batch);
  s += fmt::format("global_batch_size = {}\nseq_len = {}\nmixed_precision_param = \"bfloat16\"\n", plan.training.global_batch, plan.seq_len());
  s += fmt::format("mixed_precision_reduce = \"{}\"\n", plan.training.grad_fp32 ? "float32" : "bfloat16");
  s += float8;
  // torch.compile: the model's fused element-wise ops and the loss (import reads the section back, torchtitan_deepspeed.cpp).
  const bool compile_model = plan.training.compiled_elementwise, compile_loss = plan.training.fused_cross_entropy;
  s += fmt::format("\n[compile]\nenable = {}\n", compile_model || compile_loss ? "true" : "false");
  if (compile_model || compile_loss) {
    s += fmt::format("components = [{}]\n", compile_model && compile_loss ? "\"model\", \"loss\""
                                              : compile_model              ? "\"model\""
                                                                           : "\"loss\"");
  }
  s += "\n[parallelism]\n";
  // FSDP: the replicas (HSDP, 1 without) and the shard degree within each; DDP: every dp rank a replica.
  s += fmt::format("data_parallel_replicate_degree = {}\ndata_parallel_shard_degree = {}\n",
                   fsdp ? pc.dp_replicate : pc.dp, fsdp ? pc.dp_shard() : 1);
  s += fmt::format("tensor_parallel_degree = {}\npipeline_parallel_degree = {}\ncontext_parallel_degree = {}\n", pc.tp, pc.pp, pc.cp);
  s += fmt::format("expert_parallel_degree = {}\n", pc.ep);
  if (pc.etp > 0) s += fmt::format("expert_tensor_parallel_degree = {}\n", pc.etp);
  if (pc.micropipeline_tp) {
    s += "enable_async_tensor_parallel = true\n";
    if (!plan.training.compiled_elementwise) w.cannot("--micropipeline-tp with --eager-elementwise (torchtitan's async TP needs a compiled model)");
  }
  if (pipelined) {
    s += fmt::format("pipeline_parallel_microbatch_size = {}\npipeline_parallel_schedule = \"{}\"\n", pc.micro_batch,
                     pc.schedule == Schedule::gpipe        ? "GPipe"
                     : pc.schedule == Schedule::zb_v       ? "ZBVZeroBubble"
                     : pc.schedule == Schedule::dualpipe_v ? "DualPipeV"
                                                           : "1F1B");
  }
  // torchtitan's selective mode with option "op" is its per-op policy; Megatron's attention-core recompute has no
  // torchtitan form. Where parplan does not model the per-op policy (MoE or latent-attention layers, unfused
  // attention: selective_op_unsupported) the config would not read back, so it is written as full.
  const bool op_modelled = !plan.model.is_moe() && !plan.model.is_mla() &&
                           plan.training.attention != AttentionKernel::unfused;
  if (pc.recompute == Recompute::selective) {
    const std::string what = pc.recompute_modules.is_default()
                                 ? "recompute selective (Megatron's attention-core recompute)"
                                 : fmt::format("recompute selective of {} (Megatron-Core's module recompute)",
                                               to_string(pc.recompute_modules));
    w.cannot(what + (op_modelled ? ": written as torchtitan's per-op selective"
                                 : ": written as full (torchtitan's per-op selective is not modelled for MoE or "
                                   "latent-attention layers or unfused attention)"));
  }
  // torchtitan's layer AC checkpoints one block in N: where every chunk holds the same L layers and K divides L, that
  // is K of each chunk (what import reads back: floor(L / N)), the same count as the first K of a chunk.
  const int64_t every_nth = torchtitan_every_nth(plan);
  if (pc.recompute_layers > 0 && every_nth == 0) {
    w.cannot(fmt::format("recompute_layers {} (the first {} layers of each chunk): written as full (every layer)",
                         pc.recompute_layers, pc.recompute_layers));
  }
  const bool selective = (pc.recompute == Recompute::selective && op_modelled) || pc.recompute == Recompute::selective_op;
  s += fmt::format("\n[activation_checkpoint]\nmode = \"{}\"\n",
                   selective || every_nth > 0              ? "selective"
                   : pc.recompute == Recompute::selective ? "full"
                                                          : to_string(pc.recompute));
  if (selective) s += "selective_ac_option = \"op\"\n";
  if (every_nth > 0) s += fmt::format("selective_ac_option = \"{}\"\n", every_nth);
  w.out.text = w.comments() + s;  // every warning above, the recompute ones included
  return w.out;
}

Exported to_deepspeed(const Plan& plan, Writer& w) {
  const ParallelConfig& pc = plan.parallel;
  if (pc.tp > 1 || pc.pp > 1 || pc.cp > 1 || pc.ep > 1) {
    w.cannot(fmt::format("tp {} x pp {} x cp {} x ep {} (a DeepSpeed config holds data parallelism only; the model code sets the rest)", pc.tp, pc.pp, pc.cp, pc.ep));
  }
  if (pc.sequence_parallel) w.cannot("sequence parallelism");
  if (pc.recompute != Recompute::none) w.cannot(fmt::format("recompute {} (activation checkpointing is set in the model code)", to_string(pc.recompute)));
  if (plan.training.precision == Precision::fp8) w.cannot("fp8");
  if (pc.distributed_optimizer) w.cannot("the Megatron distributed optimizer (ZeRO-1 is DeepSpeed's)");
  if (pc.fsdp2) w.cannot("FSDP2's copies (DeepSpeed's ZeRO-3 is not PyTorch FSDP2)");
  if (pc.dp_replicate > 1) {
    w.cannot(fmt::format("--dp-replicate {} (HSDP; DeepSpeed's zero_hpz_partition_size is ZeRO++'s secondary weight "
                         "copy, not HSDP)",
                         pc.dp_replicate));
  }
  if (pc.zero_stage >= 3 && pc.zero3_gather_unit == Zero3GatherUnit::layer) {
    w.cannot("ZeRO-3 gathering whole layers (DeepSpeed's ZeRO-3 gathers per submodule: --zero3-gather-unit linear)");
  }
  if (pc.offload.activations) w.cannot("--offload activations (set in the model code's activation checkpointing)");
  uneven_split_cannot(plan, w);
  if (!plan.training.fused_grad_accumulation) w.cannot("--no-fused-grad-accumulation");
  nlohmann::ordered_json j;
  if (!w.out.warnings.empty()) j["comment"] = nlohmann::json(w.out.warnings);
  j["train_batch_size"] = plan.training.global_batch;
  j["train_micro_batch_size_per_gpu"] = pc.micro_batch;
  j["gradient_accumulation_steps"] = pc.num_microbatches;
  j["bf16"] = {{"enabled", plan.training.precision != Precision::fp16}};
  j["fp16"] = {{"enabled", plan.training.precision == Precision::fp16}};
  j["zero_optimization"] = {{"stage", pc.zero_stage}, {"overlap_comm", pc.overlap_dp_comm}};
  // ZeRO-Offload and ZeRO-Infinity to CPU memory (what import reads back as --offload optimizer / params).
  if (pc.offload.optimizer) j["zero_optimization"]["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  if (pc.offload.params) j["zero_optimization"]["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};
  w.out.text = j.dump(2) + "\n";
  return w.out;
}

}  // namespace

Framework written_framework(const std::string& value, std::string_view flag) {
  constexpr std::string_view kUse = "use megatron, nemo, torchtitan, deepspeed";
  if (value == framework_name(Framework::nanotron)) {
    throw InputError(fmt::format("{}: nanotron is read (import) but not written ({})", flag, kUse));
  }
  for (Framework f : {Framework::megatron, Framework::nemo, Framework::torchtitan, Framework::deepspeed}) {
    if (value == framework_name(f)) return f;
  }
  throw InputError(fmt::format("{}: unknown format '{}' ({})", flag, excerpt(value), kUse));
}

Exported export_plan(const Plan& plan, Framework to, const std::string& source) {
  Writer w;
  common_cannot(plan, w, to);
  if (to != Framework::megatron && to != Framework::nemo) {  // Megatron-Core's MoE options, which both write
    const ParallelConfig& pc = plan.parallel;
    if (!pc.offload_modules.empty()) w.cannot("--offload-modules " + to_string(pc.offload_modules));
    if (pc.ep > 1 && pc.moe_dispatcher == MoeDispatcher::deepep) w.cannot("--moe-dispatcher deepep");
    if (pc.ep > 1 && pc.overlap_ep_comm) w.cannot("--overlap-ep");
  }
  if (to != Framework::megatron) {  // Megatron-LM writes them (megatron_shape; NeMo mtp_num_layers too); the others cannot
    if (plan.model.capacity_factor > 0) w.cannot(fmt::format("--moe-capacity-factor {:g}", plan.model.capacity_factor));
    if (plan.model.router_groups > 0 && to != Framework::nemo) {  // moe_mla_config writes them for both
      w.cannot(fmt::format("--moe-router-groups {} --moe-router-group-top-k {}", plan.model.router_groups,
                           plan.model.router_group_top_k));
    }
    if (plan.model.mtp_layers > 0 && to != Framework::nemo) w.cannot(fmt::format("--mtp-layers {}", plan.model.mtp_layers));
    if (plan.training.adam_moments != DType::fp32) {
      w.cannot(fmt::format("--adam-moments-dtype {} (Megatron-Core's precision-aware optimizer)",
                           to_string(plan.training.adam_moments)));
    }
  }
  // What fp8 GEMMs keep for the backward is the framework's: fp8 in Transformer Engine (Megatron-LM, NeMo), 16-bit
  // in torchao (torchtitan).
  if (plan.training.precision == Precision::fp8 && (to == Framework::megatron || to == Framework::nemo) &&
      !plan.training.fp8_saved_inputs) {
    w.cannot("fp8 GEMM inputs kept in 16 bits for the backward (Transformer Engine keeps them in fp8)");
  }
  if (plan.training.precision == Precision::fp8 && to == Framework::torchtitan && plan.training.fp8_saved_inputs) {
    w.cannot("fp8 GEMM inputs kept in fp8 for the backward (torchao's float8 keeps them in 16 bits)");
  }
  // DeepSeek-V3's fp8 activation storage (its own training stack) is a flag of none of the frameworks written.
  if (plan.training.fp8_activation_cache) w.cannot("--fp8-activation-cache (DeepSeek-V3's fp8 activation storage)");
  // Megatron-LM and NeMo compute the loss with the fused vocab-parallel cross entropy; PyTorch's F.cross_entropy on
  // fp32 logits (torchtitan's loss_fn) is not an option there.
  if (!plan.training.fused_cross_entropy && (to == Framework::megatron || to == Framework::nemo)) {
    w.cannot("--eager-cross-entropy (Megatron's cross entropy is the fused vocab-parallel one)");
  }
  // Megatron-LM and NeMo run the norms, rotary embedding, SwiGLU and residual adds as fused kernels (Transformer
  // Engine, Megatron's fused kernels); uncompiled PyTorch element-wise ops are not an option there.
  if (!plan.training.compiled_elementwise && (to == Framework::megatron || to == Framework::nemo)) {
    w.cannot("--eager-elementwise (Megatron's norms, rotary embedding and activation are fused kernels)");
  }
  // Blocking backward TP collectives and copies around them are torchtitan's DTensor TP (to_torchtitan asks for both);
  // Megatron-LM, NeMo and DeepSpeed's Megatron run the asynchronous backward on [seq, batch, hidden] tensors.
  if (to != Framework::torchtitan && plan.parallel.tp > 1 && !plan.parallel.async_tp_backward) {
    w.cannot("--no-async-tp (blocking backward TP collectives)");
  }
  if (to != Framework::torchtitan && plan.training.fp8_tp_gather) {
    w.cannot("--fp8-tp-gather (torchtitan's float8 tensorwise TP)");
  }
  if (to != Framework::torchtitan && plan.parallel.micropipeline_tp) {
    w.cannot("--micropipeline-tp (torchtitan's async tensor parallelism)");
  }
  if (to != Framework::torchtitan && plan.parallel.tp_collective_copies) {
    w.cannot("--tp-collective-copies (torchtitan's DTensor copies around each TP collective)");
  }
  Exported out;
  switch (to) {
    case Framework::megatron: out = to_megatron(plan, w); break;
    case Framework::nemo: out = to_nemo(plan, w); break;
    case Framework::torchtitan: out = to_torchtitan(plan, w); break;
    case Framework::deepspeed: out = to_deepspeed(plan, w); break;
    case Framework::nanotron: throw std::logic_error("export_plan: nanotron is not written (written_framework refuses it)");
  }
  if (to != Framework::deepspeed) {
    out.text = fmt::format("# parplan export --to {}: {} ({} on {} GPUs)\n", framework_name(to), source, plan.model.name,
                           plan.num_gpus) + out.text;
  }
  return out;
}

}  // namespace parplan::cli
