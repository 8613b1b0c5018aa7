// The torchtitan TOML and DeepSpeed JSON readers (see framework.hpp). Key names: torchtitan
// torchtitan/config/job_config.py (2025: [parallelism], [training] local_batch_size); DeepSpeed
// docs/_pages/config-json.md (0.16).
#include <algorithm>
#include <cctype>
#include <fmt/core.h>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli/interop/framework.hpp"
#include "cli/text.hpp"
#include "cli/toml.hpp"
#include "planner/spec/error.hpp"
#include "planner/spec/json_reader.hpp"
#include "planner/spec/units.hpp"

namespace parplan::cli {
namespace {

std::string origin(const TomlItem& it) { return fmt::format("{} (line {})", it.key, it.line); }

int64_t toml_int(const TomlItem& it, const std::string& path) {
  const std::string& t = it.value.text;
  const std::optional<int64_t> v = t == "-1" ? std::optional<int64_t>(-1) : decimal(t);
  if (it.value.kind != TomlValue::Kind::integer || !v) {
    throw InputError(fmt::format("{}: {} takes -1 or a non-negative integer below 10^18, not {}", path, origin(it), excerpt(it.value.raw)));
  }
  return *v;
}

struct Titan {
  std::map<std::string, const TomlItem*> items;
  int64_t get(const std::string& key, int64_t fallback, const std::string& path) const {
    const auto it = items.find(key);
    return it == items.end() ? fallback : toml_int(*it->second, path);
  }
  std::string where(const std::string& key, const std::string& fallback) const {
    const auto it = items.find(key);
    return it == items.end() ? fallback : origin(*it->second);
  }
  // A true / false key: unset when absent, exit 2 naming the key for any other value.
  std::optional<bool> boolean(const std::string& key, const std::string& path) const {
    const auto it = items.find(key);
    if (it == items.end()) return std::nullopt;
    const TomlItem& item = *it->second;
    if (item.value.kind != TomlValue::Kind::boolean) {
      throw InputError(fmt::format("{}: {} takes true or false, not {}", path, origin(item), excerpt(item.value.raw)));
    }
    return item.value.text == "true";
  }
};

constexpr std::string_view kTitanRead[] = {
    "model.name", "model.flavor", "model.converters", "parallelism.data_parallel_shard_degree",
    "parallelism.data_parallel_replicate_degree", "parallelism.tensor_parallel_degree",
    "parallelism.pipeline_parallel_degree", "parallelism.context_parallel_degree", "parallelism.expert_parallel_degree",
    "parallelism.expert_tensor_parallel_degree", "parallelism.pipeline_parallel_schedule",
    "parallelism.enable_async_tensor_parallel",
    "parallelism.pipeline_parallel_microbatch_size", "training.local_batch_size", "training.batch_size",
    "training.global_batch_size", "training.seq_len", "training.mixed_precision_param",
    "training.mixed_precision_reduce", "activation_checkpoint.mode", "activation_checkpoint.selective_ac_option",
    "float8.recipe_name", "float8.enable_fsdp_float8_all_gather", "mx.recipe_name", "compile.enable",
    "compile.components", "training.compile"};

// pipeline_parallel_schedule: no effect without a pipeline (listed as ignored); with pp > 1 GPipe, 1F1B, or
// Interleaved1F1B, whose stages per rank torchtitan sets to 2 for a multi-stage schedule when
// pipeline_parallel_layers_per_stage does not give them, or the V schedules of torch.distributed.pipelining,
// ZBVZeroBubble and DualPipeV (2 stages per rank in a V: parplan's zb-v and dualpipe-v) (from memory, not checked
// against a pinned revision).
void titan_schedule(const Titan& t, int64_t pp, Imported& out, const std::string& path) {
  const auto found = t.items.find("parallelism.pipeline_parallel_schedule");
  if (found == t.items.end()) return;
  const TomlItem& it = *found->second;
  if (pp == 1) {
    out.ignored.push_back(fmt::format("{}: no effect with pipeline_parallel_degree 1 (torchtitan builds no pipeline)", origin(it)));
    return;
  }
  const std::string s = ascii_lower(it.value.text);
  const std::string sched = s == "gpipe"             ? "gpipe"
                            : s == "1f1b"            ? "1f1b"
                            : s == "interleaved1f1b" ? "interleaved"
                            : s == "zbvzerobubble"   ? "zb-v"
                            : s == "dualpipev"       ? "dualpipe-v"
                                                     : "";
  if (sched.empty()) {
    throw InputError(fmt::format("{}: {}: '{}' is not modelled (GPipe, 1F1B, Interleaved1F1B, ZBVZeroBubble, DualPipeV "
                                 "are)",
                                 path, origin(it), excerpt(it.value.text)));
  }
  out.set("--schedule", sched, origin(it), path);
  if (sched == "zb-v" || sched == "dualpipe-v") {
    if (t.items.count("parallelism.pipeline_parallel_layers_per_stage")) {
      throw InputError(fmt::format("{}: {} with {}: the stages per rank it sets are not read (a V holds 2 per rank)",
                                   path, t.where("parallelism.pipeline_parallel_layers_per_stage", ""), origin(it)));
    }
    return;
  }
  if (sched != "interleaved") return;
  if (t.items.count("parallelism.pipeline_parallel_layers_per_stage")) {
    throw InputError(fmt::format("{}: {} with {}: the stages per rank it sets are not read (remove it to run "
                                 "torchtitan's 2 stages per rank)",
                                 path, t.where("parallelism.pipeline_parallel_layers_per_stage", ""), origin(it)));
  }
  out.set("--vpp", "2", origin(it) + " (torchtitan: 2 stages per rank for a multi-stage schedule)", path);
}

// The mesh: dp_shard (-1: what the GPUs leave) x dp_replicate x tp x pp x cp; FSDP (dp_shard > 1) is ZeRO-3.
void titan_mesh(const Titan& t, Imported& out, const std::string& path) {
  auto deg = [&](const std::string& key, const std::string& flag) {
    const int64_t v = t.get("parallelism." + key, 1, path);
    if (v < 1) throw InputError(fmt::format("{}: {} must be at least 1", path, t.where("parallelism." + key, key)));
    if (t.items.count("parallelism." + key)) out.set(flag, std::to_string(v), t.where("parallelism." + key, ""), path);
    else out.assume(flag, "1", fmt::format("parallelism.{} not given (torchtitan default 1)", key));
    return v;
  };
  const int64_t tp = deg("tensor_parallel_degree", "--tp"), pp = deg("pipeline_parallel_degree", "--pp");
  const int64_t cp = deg("context_parallel_degree", "--cp");
  deg("expert_parallel_degree", "--ep");
  if (t.items.count("parallelism.expert_tensor_parallel_degree")) deg("expert_tensor_parallel_degree", "--etp");
  if (t.boolean("parallelism.enable_async_tensor_parallel", path).value_or(false)) {
    const std::string where = t.where("parallelism.enable_async_tensor_parallel", "");
    if (tp > 1) out.set("--micropipeline-tp", "", where, path);
    else out.ignored.push_back(fmt::format("{}: no effect with tensor_parallel_degree 1", where));
  }
  if (tp > 1) {
    out.assume("--sequence-parallel", "", "torchtitan's tensor parallelism shards the norms over the sequence");
    out.assume("--no-async-tp", "", "torchtitan's DTensor TP: each backward collective an autograd node that blocks");
    out.assume("--tp-collective-copies", "",
               "DTensor gathers and scatters the sequence dim 1 of [batch, seq, hidden]: one copy of the tensor each");
  }
  const int64_t shard = t.get("parallelism.data_parallel_shard_degree", -1, path);
  const int64_t rep = t.get("parallelism.data_parallel_replicate_degree", 1, path);
  if (shard == 0 || shard < -1) {
    throw InputError(fmt::format("{}: {} must be -1 (the GPUs left) or at least 1", path,
                                 t.where("parallelism.data_parallel_shard_degree", "data_parallel_shard_degree")));
  }
  if (rep < 1) {  // -1 (the rest) is the shard degree's only
    throw InputError(fmt::format("{}: {} must be at least 1", path,
                                 t.where("parallelism.data_parallel_replicate_degree", "data_parallel_replicate_degree")));
  }
  // torchtitan's parallel_dims.py: fsdp_enabled = dp_shard > 1 or cp > 1 (FSDP over the dp_shard x cp ranks, the
  // "dp_shard_cp" mesh); with replicas too, HSDP over the ("dp_replicate", "dp_shard_cp") mesh; replicas without it
  // are DDP. So shard 1 with cp > 1 still shards, over the cp ranks (ParallelConfig::dp_replicate = dp, shard group
  // cp).
  // shard -1 (the rest) with replicas and cp 1 is resolved once the GPU count is known (Imported::titan_shard_rest):
  // a rest of 1 is DDP, as shard 1 is.
  const bool fsdp = shard != 1 || cp > 1;
  if (rep > 1 && fsdp) {
    out.set("--dp-replicate", std::to_string(rep), t.where("parallelism.data_parallel_replicate_degree", ""), path);
  }
  const std::string dp_origin = t.where("parallelism.data_parallel_shard_degree", "data_parallel_shard_degree -1 (default)") + " x " +
                                t.where("parallelism.data_parallel_replicate_degree", "data_parallel_replicate_degree 1 (default)");
  if (shard > 0) out.set("--dp", std::to_string(shard * rep), dp_origin, path);
  else out.assumed.push_back("--dp: data_parallel_shard_degree -1: the GPUs left after tp, pp, cp and replication");
  if (shard == -1 && rep > 1 && cp == 1) out.titan_shard_rest = dp_origin;
  if (fsdp) {
    out.set("--zero", "3", shard == 1 ? dp_origin + fmt::format(" with context_parallel_degree {} (torchtitan's FSDP "
                                                                 "shards over the cp ranks)", cp)
                                      : dp_origin, path);
    out.assume("--fsdp2", "", "torchtitan shards with FSDP2 (fully_shard): copies around each all-gather and reduce-scatter");
    if (pp > 1) {
      out.assumed.push_back("--zero 3 with pp > 1: FSDP2 under pipelining keeps the parameters gathered across "
                            "microbatches and reduce-scatters after the last, ZeRO-1 in memory and time, its copies "
                            "once a step");
    }
  }
  titan_schedule(t, pp, out, path);
}

// local batch (split into microbatches of pipeline_parallel_microbatch_size with pp > 1), global batch, seq.
void titan_batch(const Titan& t, Imported& out, const std::string& path) {
  const std::string lkey = t.items.count("training.local_batch_size") ? "training.local_batch_size" : "training.batch_size";
  const int64_t local = t.get(lkey, 8, path);
  if (!t.items.count(lkey)) out.assumed.push_back("local batch 8: training.local_batch_size not given (torchtitan default 8)");
  const bool pipelined = out.flags.count("--pp") && out.flags.at("--pp").value != "1";
  const int64_t mb = pipelined ? t.get("parallelism.pipeline_parallel_microbatch_size", 1, path) : local;
  if (mb < 1 || local < 1 || local % mb != 0) {
    throw InputError(fmt::format("{}: {} {} is not a multiple of the pipeline microbatch {}", path, t.where(lkey, lkey), local, mb));
  }
  out.set("--micro-batch", std::to_string(mb), pipelined ? t.where("parallelism.pipeline_parallel_microbatch_size", "pipeline_parallel_microbatch_size 1 (default)") : t.where(lkey, lkey), path);
  const int64_t global = t.get("training.global_batch_size", -1, path);
  if (pipelined) out.one_schedule = Imported::OneSchedule{local / mb, t.where(lkey, lkey + " 8 (default)")};
  if (global > 0) out.set("--global-batch", std::to_string(global), t.where("training.global_batch_size", ""), path);
  else out.set("--microbatches", std::to_string(local / mb), t.where(lkey, lkey) + " (global_batch_size -1: local x dp)", path);
  const int64_t seq = t.get("training.seq_len", 2048, path);
  if (t.items.count("training.seq_len")) out.set("--seq", std::to_string(seq), t.where("training.seq_len", ""), path);
  else out.assume("--seq", "2048", "training.seq_len not given (torchtitan default 2048)");
}

// The mx converter (torchao.prototype.mx_formats, MX training): MXFP8 GEMMs; an [mx] recipe_name naming a 4-bit
// format (mxfp4, nvfp4) is refused, since parplan prices no 4-bit GEMM.
void titan_mx(const Titan& t, Imported& out, const std::string& path) {
  const std::string conv = t.where("model.converters", "");
  if (t.items.count("mx.recipe_name")) {
    const TomlItem& it = *t.items.at("mx.recipe_name");
    const std::string& v = it.value.text;
    if (v.starts_with("mxfp4") || v.starts_with("nvfp4")) {
      throw InputError(fmt::format("{}: {}: '{}': 4-bit GEMMs (NVFP4, MXFP4) are not modelled (parplan prices bf16, "
                                   "fp16 and fp8)", path, origin(it), excerpt(v)));
    }
    if (!v.starts_with("mxfp8")) {
      throw InputError(fmt::format("{}: {}: '{}' is not modelled (the mxfp8 recipes are)", path, origin(it), excerpt(v)));
    }
    out.set("--fp8-recipe", "mxfp8", origin(it), path);
    return;
  }
  out.set("--fp8-recipe", "mxfp8", conv + " (mx: MXFP8 training)", path);
}

// The float8 converter's recipe and FSDP float8 all-gather (torchao.float8 as torchtitan configures it:
// torchtitan/components/quantization/float8.py), and the FSDP2 gradient reduce dtype (MixedPrecisionPolicy
// reduce_dtype, default float32).
void titan_float8(const Titan& t, bool fp8, Imported& out, const std::string& path) {
  // A string key's value as a parplan flag's, through `names` (torchtitan's value, parplan's); unknown ones refused.
  auto choice = [&](const char* key, const char* flag, std::initializer_list<std::pair<const char*, const char*>> names,
                    const char* modelled, bool use) {
    if (!t.items.count(key)) return;
    const std::string& v = t.items.at(key)->value.text;
    const auto it = std::find_if(names.begin(), names.end(), [&](const auto& n) { return v == n.first; });
    if (it == names.end()) {
      throw InputError(fmt::format("{}: {}: '{}' is not modelled ({} are)", path, t.where(key, ""), excerpt(v), modelled));
    }
    if (use) out.set(flag, it->second, t.where(key, ""), path);
  };
  choice("float8.recipe_name", "--fp8-recipe", {{"tensorwise", "tensorwise"}, {"rowwise", "rowwise"}},
         "tensorwise and rowwise", fp8);
  out.titan_float8_tp = true;  // the fp8 TP all-gathers: resolved with the command line's values (from_file.cpp)
  if (t.boolean("float8.enable_fsdp_float8_all_gather", path).value_or(false) && fp8) {
    out.set("--fp8-param-gather", "", t.where("float8.enable_fsdp_float8_all_gather", ""), path);
  }
  choice("training.mixed_precision_reduce", "--grad-reduce-dtype", {{"float32", "fp32"}, {"bfloat16", "bf16"}},
         "float32 and bfloat16", true);
}

// torchtitan's layer-wise selective AC, selective_ac_option N (torchtitan's default "2" when not given):
// _apply_ac_to_transformer_block wraps a block in full checkpointing when its running block count % N == 0 (from
// memory, not checked against a pinned revision), so every N-th block is fully recomputed and the others keep their
// activations. parplan prices it as full recompute of floor(chunk layers / N) layers of each chunk
// (Imported::every_nth_layer, resolved by plan_from_framework): Megatron-Core's block method, which recomputes the
// first K layers of a chunk rather than every N-th one: the same count, so the same time and the same saved-activation
// total. (The running count spans a rank's chunks: with N not dividing a chunk's layers, torchtitan's count per stage,
// floor(stage layers / N), can exceed the chunks x floor(chunk layers / N) priced.)
void titan_layer_ac(const TomlItem* opt, const TomlItem& mode, Imported& out, const std::string& path) {
  int64_t n = 2;
  if (opt) {
    const std::optional<int64_t> v = decimal(opt->value.text);
    if (!v || *v < 1 || (opt->value.kind != TomlValue::Kind::string && opt->value.kind != TomlValue::Kind::integer)) {
      throw InputError(fmt::format("{}: {}: takes \"op\" or a positive integer N (every N-th block fully "
                                   "checkpointed), not {}",
                                   path, origin(*opt), excerpt(opt->value.raw)));
    }
    n = *v;
  } else {
    out.assumed.push_back("activation_checkpoint.selective_ac_option 2: not given (torchtitan default \"2\": every 2nd "
                          "block fully checkpointed)");
  }
  const std::string from = opt ? origin(*opt) : origin(mode);
  out.set("--recompute", "full", from, path);
  out.every_nth_layer = Imported::EveryNthLayer{n, from};
}

// torch.compile (torchtitan's [compile] enable / components, default off with components model and loss; before
// mid-2025 [training] compile, which compiled both): the model's element-wise ops run fused only when the model is
// compiled (else --eager-elementwise: one kernel per PyTorch op, eager_elementwise.hpp), the loss only when it is
// (else --eager-cross-entropy: F.cross_entropy on fp32 logits). torchtitan refuses async TP without a compiled model.
void titan_compile(const Titan& t, Imported& out, const std::string& path) {
  const std::optional<bool> now = t.boolean("compile.enable", path), before = t.boolean("training.compile", path);
  if (now && before) {
    throw InputError(fmt::format("{}: {} and {}: one setting under torchtitan's newer and older key; give one", path,
                                 t.where("compile.enable", ""), t.where("training.compile", "")));
  }
  const bool on = now.value_or(before.value_or(false));
  const std::string where = now ? t.where("compile.enable", "") : t.where("training.compile", "");
  bool model = on, loss = on;
  std::string parts = where;
  if (t.items.count("compile.components")) {
    const TomlItem& it = *t.items.at("compile.components");
    if (it.value.kind != TomlValue::Kind::array) {
      throw InputError(fmt::format("{}: {} takes a list of \"model\" and \"loss\", not {}", path, origin(it), excerpt(it.value.raw)));
    }
    bool has_model = false, has_loss = false;
    for (const TomlValue& v : it.value.items) {
      if (v.kind != TomlValue::Kind::string || (v.text != "model" && v.text != "loss")) {
        throw InputError(fmt::format("{}: {}: '{}' (torchtitan compiles \"model\" and \"loss\")", path, origin(it), excerpt(v.raw)));
      }
      (v.text == "model" ? has_model : has_loss) = true;
    }
    if (!on) out.ignored.push_back(fmt::format("{}: no effect with compile off", origin(it)));
    model = on && has_model;
    loss = on && has_loss;
    if (on) parts = where + " / " + origin(it);
  }
  const auto eager = [&](const char* flag, const char* what) {
    if (!now && !before) {
      out.assume(flag, "", fmt::format("compile.enable not given (torchtitan default false): {} uncompiled", what));
    } else {
      out.set(flag, "", parts, path);
    }
  };
  if (!model) eager("--eager-elementwise", "the model's element-wise ops run");
  if (!loss) eager("--eager-cross-entropy", "the loss runs");
  const auto async = t.items.find("parallelism.enable_async_tensor_parallel");
  if (!model && out.has("--micropipeline-tp") && async != t.items.end()) {
    throw InputError(fmt::format("{}: {}: torchtitan's async TP needs a compiled model (compile.enable = true with "
                                 "\"model\" in compile.components)",
                                 path, origin(*async->second)));
  }
}

}  // namespace

Imported import_torchtitan(std::string_view text, const std::string& path) {
  Imported out;
  out.format = Framework::torchtitan;
  out.gpus_hint = "torchrun's world size (NGPU): not in the TOML";
  Titan t;
  const std::vector<TomlItem> items = read_toml(text, path, true);
  for (const TomlItem& it : items) {
    if (!t.items.emplace(it.key, &it).second) {
      throw InputError(fmt::format("{}:{}: key '{}' is given more than once", path, it.line, excerpt(it.key)));
    }
    if (std::find(std::begin(kTitanRead), std::end(kTitanRead), std::string_view(it.key)) == std::end(kTitanRead)) {
      out.ignored.push_back(fmt::format("{}: not modelled", origin(it)));
    }
  }
  if (t.items.count("model.name")) {
    const std::string flavor = t.items.count("model.flavor") ? t.items.at("model.flavor")->value.text : "";
    out.model_name = ascii_lower(t.items.at("model.name")->value.text + (flavor.empty() ? "" : "-" + flavor));
    out.model_origin = t.where("model.name", "") + " / " + t.where("model.flavor", "model.flavor");
  }
  titan_mesh(t, out, path);
  titan_batch(t, out, path);
  // Quantization converters: float8 (torchao.float8: tensorwise or rowwise, [float8]) and mx (torchao's MX training,
  // MXFP8 on Blackwell, [mx]); both keep the 16-bit inputs for the backward. Any other converter is listed as not
  // modelled.
  bool fp8 = false, mx = false;
  const std::string conv = t.where("model.converters", "");
  if (t.items.count("model.converters")) {
    for (const TomlValue& v : t.items.at("model.converters")->value.items) {
      if (v.text.starts_with("float8")) fp8 = true;
      else if (v.text == "mx") mx = true;
      else out.ignored.push_back(fmt::format("{}: converter '{}' is not modelled", conv, excerpt(v.text)));
    }
  }
  if (fp8 && mx) throw InputError(fmt::format("{}: {}: float8 and mx together are not modelled (one is)", path, conv));
  if (mx) {
    titan_mx(t, out, path);
  } else if (t.items.count("mx.recipe_name")) {
    out.ignored.push_back(fmt::format("{}: read only with the mx converter", t.where("mx.recipe_name", "")));
  }
  if (fp8 || mx) {
    out.set("--precision", "fp8", conv, path);
    out.set("--fp8-16bit-saved-inputs", "", conv + " (torchao's float8 and MX training keep 16-bit inputs)", path);
  }
  const std::string mp = t.items.count("training.mixed_precision_param") ? t.items.at("training.mixed_precision_param")->value.text : "bfloat16";
  if (mp != "bfloat16") {
    throw InputError(fmt::format("{}: {}: '{}' is not modelled (bfloat16 is)", path, t.where("training.mixed_precision_param", ""), excerpt(mp)));
  }
  if (!t.items.count("training.mixed_precision_param")) {
    out.assume("--precision", "bf16", "training.mixed_precision_param not given (torchtitan default bfloat16)");
  } else if (!out.has("--precision")) {  // with float8 / MX the GEMMs' precision is fp8, from the converter
    out.set("--precision", "bf16", t.where("training.mixed_precision_param", ""), path);
  }
  titan_float8(t, fp8, out, path);
  titan_compile(t, out, path);
  if (t.items.count("activation_checkpoint.mode")) {
    const TomlItem& it = *t.items.at("activation_checkpoint.mode");
    const std::string m = it.value.text;
    if (m != "none" && m != "selective" && m != "full") {
      throw InputError(fmt::format("{}: {}: '{}' (torchtitan takes none, selective, full)", path, origin(it), excerpt(m)));
    }
    if (m == "selective") {
      // selective_ac_option "op": the per-op policy; a number N: every N-th layer fully recomputed.
      const auto opt = t.items.find("activation_checkpoint.selective_ac_option");
      if (opt != t.items.end() && opt->second->value.text == "op") {
        out.set("--recompute", "selective-op", origin(*opt->second), path);
      } else {
        titan_layer_ac(opt == t.items.end() ? nullptr : opt->second, it, out, path);
      }
    } else {
      out.set("--recompute", m, origin(it), path);
    }
  }
  if (!out.has("--recompute")) {  // torchtitan's ActivationCheckpoint defaults: mode "selective", option "2"
    const std::string why = "activation_checkpoint.mode not given (torchtitan default: selective with "
                            "selective_ac_option \"2\", every 2nd block fully checkpointed)";
    out.assume("--recompute", "full", why);
    out.every_nth_layer = Imported::EveryNthLayer{2, "assumed: " + why};
  }
  return out;
}

namespace {

void ds_key(const nlohmann::json& v, const std::string& key, const std::string& flag, Imported& out, const std::string& path) {
  if (!v.is_number_integer() || v.get<int64_t>() < 1) {
    throw InputError(fmt::format("{}: /{}: must be a positive integer, not {}", path, key, excerpt(v.dump())));
  }
  out.set(flag, std::to_string(v.get<int64_t>()), "/" + key, path);
}

// "bf16" / "fp16": {"enabled": true | false, ...}: enabled true is --precision of that name; its other keys (loss
// scaling) are listed as ignored. Anything else, e.g. the Hugging Face Trainer's "auto" (resolved by the Trainer from
// its own arguments, not in the file), is refused naming the path rather than read as absent.
void ds_precision(const nlohmann::json& v, const std::string& key, Imported& out, const std::string& path) {
  if (!v.is_object()) {
    throw InputError(fmt::format("{}: /{}: must be an object such as {{\"enabled\": true}}, not {}", path, key,
                                 excerpt(v.dump())));
  }
  for (const auto& [k, x] : v.items()) {
    if (k != "enabled") {
      out.ignored.push_back(fmt::format("/{}/{}: not modelled", key, printable(excerpt(k))));
    } else if (!x.is_boolean()) {
      throw InputError(fmt::format("{}: /{}/enabled: must be true or false, not {}{}", path, key, excerpt(x.dump()),
                                   x == "auto" ? " ('auto' is the Hugging Face Trainer's, resolved from its own "
                                                 "arguments: write true or false)"
                                               : ""));
    } else if (x.get<bool>()) {
      out.set("--precision", key, "/" + key + "/enabled", path);
    }
  }
}

// offload_optimizer / offload_param: device "cpu" is parplan's --offload optimizer / params (ZeRO-Offload,
// ZeRO-Infinity to host memory); "none" (DeepSpeed's default) nothing; "nvme" refused. Returns whether it offloads.
bool ds_offload(const nlohmann::json& v, const std::string& key, Imported& out, const std::string& path) {
  const std::string at = "/zero_optimization/" + key;
  if (!v.is_object()) throw InputError(fmt::format("{}: {}: must be an object", path, at));
  bool cpu = false;
  for (const auto& [k, x] : v.items()) {
    if (k == "device") {
      const std::string d = x.is_string() ? x.get<std::string>() : x.dump();
      if (d == "nvme") {
        throw InputError(fmt::format("{}: {}/device: 'nvme': offload to NVMe is not modelled (device cpu, to host "
                                     "memory, is: --offload)", path, at));
      }
      if (d != "cpu" && d != "none") throw InputError(fmt::format("{}: {}/device: must be cpu, nvme or none, not {}", path, at, excerpt(x.dump())));
      cpu = d == "cpu";
    } else if (k == "ratio" && !(x.is_number() && x.get<double>() >= 1.0)) {
      throw InputError(fmt::format("{}: {}/ratio: {}: offloading part of the optimizer is not modelled (ratio 1 is)", path, at, excerpt(x.dump())));
    } else {
      out.ignored.push_back(fmt::format("{}/{}: not modelled", at, printable(excerpt(k))));
    }
  }
  return cpu;
}

// zero_optimization: the stage (3: per-submodule gathers), overlap_comm (false: --no-overlap-dp), the offloads.
void ds_zero(const nlohmann::json& v, Imported& out, const std::string& path) {
  if (!v.is_object()) throw InputError(fmt::format("{}: /zero_optimization: must be an object", path));
  std::string offload, offload_origin;  // "optimizer,params", their origins
  for (const auto& [zk, zv] : v.items()) {
    if (zk == "stage") {
      if (!zv.is_number_integer() || zv.get<int64_t>() < 0 || zv.get<int64_t>() > 3) {
        throw InputError(fmt::format("{}: /zero_optimization/stage: must be 0, 1, 2 or 3, not {}", path, excerpt(zv.dump())));
      }
      out.set("--zero", std::to_string(zv.get<int64_t>()), "/zero_optimization/stage", path);
      if (zv.get<int64_t>() == 3) out.set("--zero3-gather-unit", "linear", "/zero_optimization/stage 3 (DeepSpeed gathers per submodule)", path);
    } else if (zk == "overlap_comm") {
      if (!zv.is_boolean()) throw InputError(fmt::format("{}: /zero_optimization/overlap_comm: must be true or false, not {}", path, excerpt(zv.dump())));
      if (!zv.get<bool>()) out.set("--no-overlap-dp", "", "/zero_optimization/overlap_comm", path);
    } else if (zk == "zero_hpz_partition_size" && !(zv.is_number_integer() && zv.get<int64_t>() == 1)) {
      // ZeRO++ hpZ keeps a second, 16-bit copy of the weights partitioned within groups of N ranks for the backward's
      // gathers (Wang et al. 2023, "ZeRO++", arXiv:2306.10209, Sec. 3.2): more memory, not priced; nor is it HSDP
      // (--dp-replicate), which shards every state within the group.
      throw InputError(fmt::format("{}: /zero_optimization/zero_hpz_partition_size: {}: ZeRO++ hierarchical "
                                   "partitioning (a secondary weight copy within groups of N ranks) is not modelled, "
                                   "and is not HSDP (--dp-replicate); remove the key (1) to price ZeRO-3 without it",
                                   path, excerpt(zv.dump())));
    } else if (zk == "mics_shard_size" && !(zv.is_number_integer() && zv.get<int64_t>() == -1)) {
      // MiCS (DeepSpeed's MiCS_Init; Zhang et al. 2022, arXiv:2205.00119): ZeRO-3 sharded within groups of N ranks
      // and replicated across them, gathered per submodule, the gradients all-reduced across the groups once per
      // accumulation boundary (its 2-hop synchronisation). parplan's HSDP gathers one layer at a time and, with ZeRO-3,
      // all-reduces every microbatch: not the same pattern, so refused rather than priced as ZeRO-3 over all ranks.
      throw InputError(fmt::format("{}: /zero_optimization/mics_shard_size: {}: MiCS (ZeRO-3 sharded within groups of "
                                   "N ranks, replicated across them) is not modelled: parplan's HSDP (--dp-replicate) "
                                   "is ZeRO-3 gathered one layer at a time; remove the key (-1) to price ZeRO-3 over "
                                   "all ranks",
                                   path, excerpt(zv.dump())));
    } else if (zk == "mics_hierarchical_params_gather") {
      if (!zv.is_boolean()) {
        throw InputError(fmt::format("{}: /zero_optimization/mics_hierarchical_params_gather: must be true or false, "
                                     "not {}",
                                     path, excerpt(zv.dump())));
      }
      out.ignored.push_back(fmt::format("/zero_optimization/mics_hierarchical_params_gather {}: no effect without "
                                        "MiCS (mics_shard_size)",
                                        zv.get<bool>()));
    } else if (zk == "offload_optimizer" || zk == "offload_param") {
      if (ds_offload(zv, zk, out, path)) {
        offload += (offload.empty() ? "" : ",") + std::string(zk == "offload_optimizer" ? "optimizer" : "params");
        offload_origin += (offload_origin.empty() ? "/zero_optimization/" : " and /zero_optimization/") + zk + "/device";
      }
    } else {
      out.ignored.push_back(fmt::format("/zero_optimization/{}: not modelled", printable(excerpt(zk))));
    }
  }
  if (!offload.empty()) out.set("--offload", offload, offload_origin, path);
}

}  // namespace

Imported import_deepspeed(std::string_view text, const std::string& path) {
  Imported out;
  out.format = Framework::deepspeed;
  out.gpus_hint = "the deepspeed launcher's --num_gpus x --num_nodes: not in the JSON";
  // The planner's strict reader: syntax errors, numbers out of range, duplicate keys and deep nesting are InputError.
  const nlohmann::json j = parse_json_text(text, path);
  if (!j.is_object()) throw InputError(fmt::format("{}: a DeepSpeed config is a JSON object", path));
  for (const auto& [key, v] : j.items()) {
    if (key == "train_micro_batch_size_per_gpu") ds_key(v, key, "--micro-batch", out, path);
    else if (key == "gradient_accumulation_steps") ds_key(v, key, "--microbatches", out, path);
    else if (key == "train_batch_size") ds_key(v, key, "--global-batch", out, path);
    else if (key == "bf16" || key == "fp16") {
      ds_precision(v, key, out, path);
    } else if (key == "zero_optimization") {
      ds_zero(v, out, path);
    } else {
      out.ignored.push_back(fmt::format("/{}: not modelled", printable(excerpt(key))));
    }
  }
  out.assume("--precision", "bf16", "neither /bf16/enabled nor /fp16/enabled (DeepSpeed's default is fp32, which parplan does not model)");
  out.assume("--micro-batch", "1", "no /train_micro_batch_size_per_gpu (DeepSpeed default 1)");
  if (!out.has("--global-batch")) out.assume("--microbatches", "1", "no /gradient_accumulation_steps (DeepSpeed default 1)");
  out.assume("--zero", "0", "no /zero_optimization/stage (DeepSpeed default 0)");
  if (!j.contains("zero_optimization") || !j["zero_optimization"].contains("overlap_comm")) {
    // DeepSpeed's DeepSpeedZeroConfig: overlap_comm unset is true at stage 3, false below.
    if (out.flags.at("--zero").value == "3") {
      out.assumed.push_back("overlapped gradient reduction: no /zero_optimization/overlap_comm (DeepSpeed default true at stage 3)");
    } else {
      out.assume("--no-overlap-dp", "", "no /zero_optimization/overlap_comm (DeepSpeed default false below stage 3)");
    }
  }
  return out;
}

}  // namespace parplan::cli
