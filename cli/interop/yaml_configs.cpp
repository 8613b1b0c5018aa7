// The YAML readers (see framework.hpp): Megatron-LM --yaml-cfg args, NeMo configs (model.* are Megatron arguments
// with '_' for '-'; trainer.* the launch), nanotron configs (parallelism, model.model_config, tokens, optimizer).
// Key names: NeMo examples/nlp/language_modeling/conf/megatron_gpt_config.yaml (NeMo 1.x YAML; a NeMo 2 serialized
// config's trainer.strategy, model.config and data keys are read as those: nemo1_path);
// nanotron examples/config_tiny_llama.yaml (nanotron 0.4).
#include <algorithm>
#include <fmt/core.h>

#include "cli/interop/framework.hpp"
#include "cli/interop/yaml.hpp"
#include "planner/spec/error.hpp"

namespace parplan::cli {
namespace {

std::string origin(const YamlLeaf& l) { return fmt::format("{} (line {})", l.path, l.line); }
bool is_null(const YamlLeaf& l) { return !l.quoted && (l.value.empty() || l.value == "null" || l.value == "~" || l.value == "None"); }
bool is_true(const YamlLeaf& l) { return !l.quoted && (l.value == "true" || l.value == "True"); }
bool is_false(const YamlLeaf& l) { return !l.quoted && (l.value == "false" || l.value == "False"); }
std::string last_key(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

// The Megatron argument a YAML leaf gives: `name` (with dashes); a boolean true is the flag alone, false or null is
// nothing (returns false).
bool megatron_arg(const YamlLeaf& l, const std::string& name, std::vector<MegatronArg>& args) {
  if (is_null(l) || is_false(l)) return false;
  MegatronArg a;
  a.name = name;
  a.origin = origin(l);
  if (!is_true(l)) a.value = l.value;
  if (l.value.find("${") != std::string::npos) a.placeholder = l.value;
  args.push_back(std::move(a));
  return true;
}

int64_t yaml_int(const YamlLeaf& l, const std::string& path) {
  if (l.value.find("${") != std::string::npos) {
    throw InputError(fmt::format("{}: {} is {}, which parplan does not resolve: give the value in the file", path, origin(l), excerpt(l.value)));
  }
  const std::optional<int64_t> v = l.quoted ? std::nullopt : decimal(l.value);
  if (!v) throw InputError(fmt::format("{}: {} takes a decimal integer, not '{}'", path, origin(l), excerpt(l.value)));
  return *v;
}

// Block lists of the window keys ("window_size:" then "- 128", "- 0") as the one-line flow list they mean ("[128, 0]"),
// so that the readers take them whole, as they take a flow list (a list's elements are otherwise passed over).
std::vector<YamlLeaf> join_window_lists(std::vector<YamlLeaf> leaves) {
  std::vector<YamlLeaf> out;
  for (YamlLeaf& l : leaves) {
    const size_t open = l.path.rfind('[');
    const std::string base = open == std::string::npos ? "" : l.path.substr(0, open);
    const std::string key = last_key(base);
    if (base.empty() || (key != "window_size" && key != "window_attn_skip_freq")) {
      out.push_back(std::move(l));
    } else if (l.path.ends_with("[0]") || out.empty() || out.back().path != base) {
      out.push_back(YamlLeaf{base, "[" + l.value + "]", l.line, false});
    } else {
      out.back().value.insert(out.back().value.size() - 1, ", " + l.value);
    }
  }
  return out;
}

}  // namespace

Imported import_megatron_yaml(std::string_view text, const std::string& path) {
  Imported out;
  out.format = Framework::megatron;
  out.gpus_hint = "the YAML args do not give the GPU count";
  std::vector<MegatronArg> args;
  for (const YamlLeaf& l : join_window_lists(read_yaml(text, path))) {
    if (l.path.find('[') != std::string::npos) continue;
    const std::string key = last_key(l.path);
    // TransformerConfig's fp8 (the format) is the dest of --fp8-format.
    megatron_arg(l, key == "fp8" ? "fp8-format" : dashed(key), args);
  }
  apply_megatron_args(args, out, path);
  return out;
}

namespace {

// NeMo's model.* keys whose Megatron argument has another name.
std::string nemo_to_megatron(const std::string& key) {
  if (key == "encoder_seq_length") return "seq-length";
  if (key == "activations_checkpoint_granularity") return "recompute-granularity";
  if (key == "activations_checkpoint_method") return "recompute-method";
  if (key == "activations_checkpoint_num_layers") return "recompute-num-layers";
  if (key == "num_moe_experts") return "num-experts";
  if (key == "fp8") return "fp8-format";
  // Megatron-Core's TransformerConfig names for Megatron-LM's uneven first and last stages.
  if (key == "num_layers_in_first_pipeline_stage") return "decoder-first-pipeline-num-layers";
  if (key == "num_layers_in_last_pipeline_stage") return "decoder-last-pipeline-num-layers";
  return dashed(key);
}

// The NeMo model.* keys that are not Megatron arguments but are read: false when `l` is none of them.
bool nemo_model_key(const YamlLeaf& l, const std::string& key, std::vector<MegatronArg>& args) {
  auto flag = [&](const std::string& name) {
    args.push_back(MegatronArg{name, std::nullopt, origin(l), ""});
    return true;
  };
  if (key == "activation") return l.value == "swiglu" || l.value == "fast-swiglu" ? flag("swiglu") : true;
  if (key == "normalization") return l.value == "rmsnorm" ? flag("normalization") && (args.back().value = "RMSNorm", true) : true;
  if (key == "position_embedding_type") return l.value == "rope" ? flag("position-embedding-type") && (args.back().value = "rope", true) : true;
  if (key == "bias") return is_false(l) ? flag("disable-bias-linear") : true;
  if (key == "share_embeddings_and_output_weights") return is_false(l) ? flag("untie-embeddings-and-output-weights") : true;
  if (key == "fp8_params" || key == "fp8_param_gather") return is_true(l) ? flag("fp8-param-gather") : true;
  if (key == "gradient_accumulation_fusion") return is_false(l) ? flag("no-gradient-accumulation-fusion") : true;
  if (key == "grad_reduce_in_fp32") {
    flag(is_false(l) ? "grad-reduce-in-bf16" : "accumulate-allreduce-grads-in-fp32");
    return true;
  }
  if (key == "name" && l.path == "model.optim.name") {
    if (l.value == "distributed_fused_adam") flag("use-distributed-optimizer"), flag("overlap-grad-reduce");
    return true;
  }
  return false;
}

constexpr std::string_view kNemoMegatronKeys[] = {
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
    "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size", "sequence_parallel",
    "micro_batch_size", "global_batch_size", "encoder_seq_length", "num_layers", "hidden_size", "ffn_hidden_size",
    "num_attention_heads", "num_query_groups", "num_moe_experts", "moe_router_topk", "activations_checkpoint_granularity",
    "activations_checkpoint_method", "activations_checkpoint_num_layers",
    "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "moe_layer_freq", "kv_channels",
    "multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim",
    "moe_router_num_groups", "moe_router_group_topk", "moe_token_dispatcher_type", "moe_enable_deepep", "overlap_moe_expert_parallel_comm", "mtp_num_layers",
    "fine_grained_activation_offloading", "offload_modules",
    "recompute_modules", "fp8", "fp8_recipe", "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split", "use_distributed_optimizer",
    "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
    "overlap_grad_reduce", "hidden_dropout", "attention_dropout", "window_size", "window_attn_skip_freq",
    "num_distributed_optimizer_instances"};

// A NeMo 2 serialized config's path as the NeMo 1.x key that means the same: the parallel sizes in trainer.strategy
// (its DDP config in trainer.strategy.ddp), the shape in model.config, the optimizer config in model.optim.config,
// the batch and sequence in data, the precision in trainer.plugins. Other paths are unchanged.
std::string nemo1_path(const std::string& path) {
  std::string p = path;
  for (const std::string_view from : {"trainer.strategy.ddp.", "trainer.strategy.", "model.config.", "model.optim.config."}) {
    if (p.starts_with(from)) {
      p = "model." + p.substr(from.size());
      break;
    }
  }
  if (p == "data.seq_length" || p == "model.seq_length") return "model.encoder_seq_length";
  if (p == "data.global_batch_size" || p == "data.micro_batch_size") return "model." + p.substr(5);
  if (p == "trainer.plugins.precision") return "trainer.precision";
  return p;
}

// model.optim.overlap_grad_sync (distributed_fused_adam's, default true): false is --no-overlap-dp, in place of the
// overlapped reduction the optimizer's name gave; without distributed_fused_adam it is listed as ignored.
void nemo_grad_sync(const YamlLeaf* sync, bool fused_adam, std::vector<MegatronArg>& args, Imported& out, const std::string& path) {
  if (!sync) return;
  if (!is_true(*sync) && !is_false(*sync)) {
    throw InputError(fmt::format("{}: {} takes true or false, not '{}'", path, origin(*sync), excerpt(sync->value)));
  }
  if (!fused_adam) {
    out.ignored.push_back(fmt::format("{}: read only with model.optim.name distributed_fused_adam", origin(*sync)));
    return;
  }
  if (is_true(*sync)) return;
  std::erase_if(args, [](const MegatronArg& a) { return a.name == "overlap-grad-reduce"; });
  out.set("--no-overlap-dp", "", origin(*sync), path);
}

}  // namespace

Imported import_nemo(std::string_view text, const std::string& path) {
  Imported out;
  out.format = Framework::nemo;
  out.gpus_hint = "trainer.devices x trainer.num_nodes";
  std::vector<MegatronArg> args;
  const YamlLeaf *devices = nullptr, *nodes = nullptr, *grad_sync = nullptr;
  bool fused_adam = false;
  const std::vector<YamlLeaf> leaves = join_window_lists(read_yaml(text, path));
  for (const YamlLeaf& l : leaves) {
    const std::string p = nemo1_path(l.path), key = last_key(p);
    if (p == "trainer.devices") devices = &l;
    else if (p == "trainer.num_nodes") nodes = &l;
    else if (p == "model.optim.overlap_grad_sync") grad_sync = &l;
    // Megatron-Core's DDP config (NeMo 2's trainer.strategy.ddp, read as model.*) or the optimizer's section: the
    // partial distributed optimizer's instances, read as Megatron-LM's flag (HSDP replicas).
    else if (p == "model.optim.num_distributed_optimizer_instances") {
      megatron_arg(l, "num-distributed-optimizer-instances", args);
    }
    else if (p == "trainer.precision") {
      const std::string& prec = l.value;
      // Lightning's "-true" forms keep the weights themselves in 16 bits, without fp32 master copies: not the
      // mixed precision parplan prices (refused below with the other values).
      const bool mixed = prec == "bf16" || prec == "16" || prec.ends_with("-mixed");
      const std::string arg = !mixed ? "" : prec.starts_with("bf16") ? "bf16" : prec.starts_with("16") ? "fp16" : "";
      if (!arg.empty()) args.push_back(MegatronArg{arg, std::nullopt, origin(l), ""});
      else {  // 32 / 32-true / 64 (fp32, fp64 training) or another value: not priced as bf16 (torchtitan and nanotron
              // refuse theirs likewise)
        throw InputError(fmt::format("{}: {}: precision '{}' is not modelled (bf16, 16 and their -mixed forms are; "
                                     "the -true forms hold 16-bit weights without fp32 master copies; fp8 is model.fp8)",
                                     path, origin(l), excerpt(prec)));
      }
    } else if (p.starts_with("model.") && p.find('[') == std::string::npos &&
               std::find(std::begin(kNemoMegatronKeys), std::end(kNemoMegatronKeys), std::string_view(key)) != std::end(kNemoMegatronKeys) &&
               p.find('.', 6) == std::string::npos) {
      if (key == "fp8" && is_true(l)) args.push_back(MegatronArg{"fp8-format", "hybrid", origin(l), ""});
      else if (key != "fp8") megatron_arg(l, nemo_to_megatron(key), args);
      // NeMo's num_query_groups alone is grouped-query attention (Megatron-LM's also needs --group-query-attention).
      if (key == "num_query_groups" && !is_null(l)) args.push_back(MegatronArg{"group-query-attention", std::nullopt, origin(l), ""});
    } else if (!(p.starts_with("model.") && nemo_model_key(l, key, args)) && !is_null(l)) {
      out.ignored.push_back(fmt::format("{}: not modelled", origin(l)));
    }
    if (p == "model.optim.name" && l.value == "distributed_fused_adam") fused_adam = true;
  }
  nemo_grad_sync(grad_sync, fused_adam, args, out, path);
  apply_megatron_args(args, out, path);
  if (devices && nodes) {
    out.set("--gpus", std::to_string(saturating_product({yaml_int(*devices, path), yaml_int(*nodes, path)})),
            origin(*devices) + " x " + origin(*nodes), path);
  } else if (devices) {
    out.set("--gpus", std::to_string(yaml_int(*devices, path)), origin(*devices), path);
  }
  return out;
}

Imported import_nanotron(std::string_view text, const std::string& path) {
  Imported out;
  out.format = Framework::nanotron;
  out.gpus_hint = "parallelism.dp x tp x pp";
  ShapeArgs shape;
  shape.swiglu = shape.rmsnorm = shape.rotary = true;  // nanotron's LlamaConfig
  shape.bias = shape.dropout = false;
  shape.tied = false;
  auto num = [&](const YamlLeaf& l, const std::string& flag) { out.set(flag, std::to_string(yaml_int(l, path)), origin(l), path); };
  for (const YamlLeaf& l : read_yaml(text, path)) {
    const std::string& p = l.path;
    const std::string mc = "model.model_config.";
    if (p == "parallelism.dp") num(l, "--dp");
    else if (p == "parallelism.tp") num(l, "--tp");
    else if (p == "parallelism.pp") num(l, "--pp");
    else if (p == "parallelism.pp_engine") {
      if (l.value != "1f1b" && l.value != "afab") throw InputError(fmt::format("{}: {}: '{}' is not 1f1b or afab", path, origin(l), excerpt(l.value)));
      out.set("--schedule", l.value == "afab" ? "gpipe" : "1f1b", origin(l), path);
    } else if (p == "parallelism.tp_mode") {
      if (l.value == "REDUCE_SCATTER") out.set("--sequence-parallel", "", origin(l), path);
    } else if (p == "parallelism.recompute_layer") {
      if (is_true(l)) out.set("--recompute", "full", origin(l), path);
    } else if (p == "tokens.micro_batch_size") num(l, "--micro-batch");
    else if (p == "tokens.batch_accumulation_per_replica") num(l, "--microbatches");
    else if (p == "tokens.sequence_length") {
      num(l, "--seq");
      shape.seq = yaml_int(l, path);
    } else if (p == "optimizer.zero_stage") num(l, "--zero");
    else if (p == "model.dtype") {
      if (l.value != "bfloat16") throw InputError(fmt::format("{}: {}: '{}' is not modelled (bfloat16 is)", path, origin(l), excerpt(l.value)));
      out.set("--precision", "bf16", origin(l), path);
    } else if (p == mc + "num_hidden_layers") shape.layers = yaml_int(l, path);
    else if (p == mc + "hidden_size") shape.hidden = yaml_int(l, path);
    else if (p == mc + "intermediate_size") shape.ffn = yaml_int(l, path);
    else if (p == mc + "num_attention_heads") shape.heads = yaml_int(l, path);
    else if (p == mc + "num_key_value_heads") { if (!is_null(l)) shape.kv_heads = yaml_int(l, path); }
    else if (p == mc + "vocab_size") shape.vocab = yaml_int(l, path);
    else if (p == mc + "tie_word_embeddings") shape.tied = is_true(l);
    else if (!is_null(l)) out.ignored.push_back(fmt::format("{}: not modelled", origin(l)));
  }
  out.model = model_from_shape(shape, out, path, "model.model_config.vocab_size not given");
  if (out.model) out.model_origin = "model.model_config";
  out.assume("--tp", "1", "parallelism.tp not given (nanotron requires it; 1 assumed)");
  out.assume("--pp", "1", "parallelism.pp not given (nanotron requires it; 1 assumed)");
  out.assume("--micro-batch", "1", "tokens.micro_batch_size not given (1 assumed)");
  out.assume("--microbatches", "1", "tokens.batch_accumulation_per_replica not given (nanotron default 1)");
  out.assume("--precision", "bf16", "model.dtype not given (nanotron default bfloat16)");
  out.assume("--recompute", "none", "parallelism.recompute_layer not given (nanotron default false)");
  return out;
}

}  // namespace parplan::cli
