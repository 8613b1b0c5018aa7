// Megatron-LM arguments -> plan flags and model shape (see framework.hpp); shared by the launch-script, YAML and NeMo
// readers. Argument names and defaults: Megatron-LM megatron/training/arguments.py (core_r0.9+).
#include <sstream>
#include <fmt/core.h>
#include <string>

#include "cli/interop/framework.hpp"
#include "planner/spec/config.hpp"
#include "planner/spec/error.hpp"

namespace parplan::cli {
namespace {

// Megatron arguments that are one plan flag, value for value.
struct Direct {
  std::string_view megatron, flag;
};
constexpr Direct kDirect[] = {
    {"tensor-model-parallel-size", "--tp"},
    {"pipeline-model-parallel-size", "--pp"},
    {"context-parallel-size", "--cp"},
    {"expert-model-parallel-size", "--ep"},
    {"expert-tensor-parallel-size", "--etp"},
    {"virtual-pipeline-model-parallel-size", "--vpp"},
    {"micro-batch-size", "--micro-batch"},
    {"global-batch-size", "--global-batch"},
    {"zero-stage", "--zero"},
    {"decoder-first-pipeline-num-layers", "--first-stage-layers"},
    {"decoder-last-pipeline-num-layers", "--last-stage-layers"},
    {"mtp-num-layers", "--mtp-layers"},
};
// Megatron flags (no value) that are one plan flag.
constexpr Direct kSwitch[] = {
    {"sequence-parallel", "--sequence-parallel"},
    {"use-distributed-optimizer", "--distributed-optimizer"},
    {"account-for-embedding-in-pipeline-split", "--account-for-embedding-in-pipeline-split"},
    {"account-for-loss-in-pipeline-split", "--account-for-loss-in-pipeline-split"},
    {"tp-comm-overlap", "--overlap-tp"},
    {"fp8-param-gather", "--fp8-param-gather"},
};

int64_t int_arg(const MegatronArg& a, const std::string& path) {
  if (!a.placeholder.empty()) {
    throw InputError(fmt::format("{}: {} is {}, which the file does not set: give the value in the file", path, a.origin,
                                 excerpt(a.placeholder)));
  }
  const std::string& v = a.value.value_or("");
  const std::optional<int64_t> out = decimal(v);
  if (!out) throw InputError(fmt::format("{}: {} takes a non-negative decimal integer, not '{}'", path, a.origin, excerpt(v)));
  return *out;
}

struct Collected {
  ShapeArgs shape;
  std::optional<int64_t> layers_per_virtual_stage;
  std::string vstage_origin;
  std::string layout, layout_origin;  // --pipeline-model-parallel-layout
  std::string exp_avg, exp_avg_sq, moments_origin;  // --exp-avg-dtype / --exp-avg-sq-dtype
  std::string precision, precision_origin;
  bool overlap_grad_reduce = false;
  bool recompute_given = false;
  std::string recompute, recompute_modules, recompute_modules_origin;  // --recompute-modules (with selective)
  std::string recompute_method, recompute_method_origin;  // --recompute-method uniform | block (with full)
  std::optional<int64_t> recompute_num_layers;            // --recompute-num-layers
  std::string recompute_num_layers_origin;
  std::string capacity_factor, capacity_origin;  // --moe-expert-capacity-factor
  bool pad_to_capacity = false;                  // --moe-pad-expert-input-to-capacity
  std::string fp8_recipe, fp8_recipe_origin;      // --fp8-recipe
};

void set_precision(Collected& c, const std::string& p, const MegatronArg& a, const std::string& path) {
  if (p == "fp8" || c.precision == "fp8") {  // fp8 GEMMs run beside --bf16 (or --fp16)
    if (p == "fp8") {
      c.precision = "fp8";
      c.precision_origin = a.origin;
    }
    return;
  }
  if (!c.precision.empty() && c.precision != p) {
    throw InputError(fmt::format("{}: {} says {} but {} says {}: give one", path, c.precision_origin, c.precision, a.origin, p));
  }
  c.precision = p;
  c.precision_origin = a.origin;
}

// The shape arguments; false when `a` is not one.
bool shape_arg(const MegatronArg& a, Collected& c, const std::string& path) {
  ShapeArgs& s = c.shape;
  const std::string& n = a.name;
  auto num = [&](std::optional<int64_t>& field) {
    field = int_arg(a, path);
    return true;
  };
  if (n == "num-layers") return num(s.layers);
  if (n == "hidden-size") return num(s.hidden);
  if (n == "ffn-hidden-size") return num(s.ffn);
  if (n == "num-attention-heads") return num(s.heads);
  if (n == "num-query-groups") return num(s.kv_heads);
  if (n == "num-experts") return num(s.experts);
  if (n == "moe-router-topk") return num(s.top_k);
  if (n == "vocab-size") return num(s.vocab);
  if (n == "swiglu") return s.swiglu = true;
  if (n == "group-query-attention") return true;  // num-query-groups carries the count
  if (n == "disable-bias-linear") return !(s.bias = false);
  if (n == "untie-embeddings-and-output-weights") return !(s.tied = false);
  if (n == "normalization") return s.rmsnorm = a.value && *a.value == "RMSNorm", true;
  if (n == "position-embedding-type") return s.rotary = a.value && *a.value == "rope", true;
  if (n == "attention-dropout" || n == "hidden-dropout") {
    if (a.value && (*a.value == "0" || *a.value == "0.0" || *a.value == "0." || *a.value == ".0")) s.dropout = false;
    return true;
  }
  return false;
}

// One argument; false when parplan has no use for it.
bool apply_one(const MegatronArg& a, Collected& c, Imported& out, const std::string& path) {
  if (!a.placeholder.empty()) {
    for (const Direct& d : kDirect) {
      if (a.name == d.megatron) {
        out.flags[std::string(d.flag)] = Setting{"", a.origin, a.placeholder};
        return true;
      }
    }
  }
  for (const Direct& d : kDirect) {
    if (a.name == d.megatron) {
      out.set(std::string(d.flag), std::to_string(int_arg(a, path)), a.origin, path);
      return true;
    }
  }
  for (const Direct& d : kSwitch) {
    if (a.name == d.megatron) {
      out.set(std::string(d.flag), "", a.origin, path);
      return true;
    }
  }
  if (a.name == "seq-length") {
    c.shape.seq = int_arg(a, path);
    out.set("--seq", std::to_string(*c.shape.seq), a.origin, path);
    return true;
  }
  // The precision-aware optimizer's moments (the flag itself switches it on; the dtypes say what it keeps).
  if (a.name == "use-precision-aware-optimizer") return true;
  if (a.name == "exp-avg-dtype" || a.name == "exp-avg-sq-dtype") {
    (a.name == "exp-avg-dtype" ? c.exp_avg : c.exp_avg_sq) = a.value.value_or("");
    c.moments_origin = a.origin;
    return true;
  }
  if (a.name == "pipeline-model-parallel-layout") {
    c.layout = a.value.value_or("");
    c.layout_origin = a.origin;
    return true;
  }
  if (a.name == "num-layers-per-virtual-pipeline-stage") {
    c.layers_per_virtual_stage = int_arg(a, path);
    c.vstage_origin = a.origin;
    return true;
  }
  if (a.name == "recompute-granularity" || a.name == "recompute-activations") {
    const std::string v = a.name == "recompute-activations" ? "selective" : a.value.value_or("");
    if (v != "full" && v != "selective") {
      throw InputError(fmt::format("{}: {} is '{}' (Megatron-LM takes full or selective)", path, a.origin, excerpt(v)));
    }
    out.set("--recompute", v, a.origin, path);
    c.recompute_given = true;
    c.recompute = v;
    return true;
  }
  if (a.name == "recompute-method") {
    c.recompute_method = a.value.value_or("");
    c.recompute_method_origin = a.origin;
    return true;
  }
  if (a.name == "recompute-num-layers") {
    c.recompute_num_layers = int_arg(a, path);
    c.recompute_num_layers_origin = a.origin;
    return true;
  }
  if (a.name == "recompute-modules") {  // Megatron-Core: a space-separated list; YAML: a flow list [a, b]
    std::string words = a.value.value_or("");
    for (char& ch : words) ch = std::string_view("[],'\"\t").find(ch) != std::string_view::npos ? ' ' : ch;
    std::string list;
    std::istringstream in(words);
    for (std::string w; in >> w;) list += (list.empty() ? "" : " ") + w;
    RecomputeModules m;
    if (!parse_recompute_modules(list, m, ' ')) {
      throw InputError(fmt::format("{}: {} is '{}' (Megatron-Core takes core_attn, layernorm, moe_act, mla_up_proj, mlp, "
                                   "moe, shared_experts)", path, a.origin, excerpt(a.value.value_or(""))));
    }
    c.recompute_modules = to_string(m);
    c.recompute_modules_origin = a.origin;
    return true;
  }
  if (a.name == "bf16" || a.name == "fp16") return set_precision(c, a.name, a, path), true;
  if (a.name == "fp8-format") return set_precision(c, "fp8", a, path), true;
  // Megatron-Core --fp8-recipe {delayed, tensorwise, mxfp8, blockwise} (default delayed): parplan's recipes of the
  // same names; 'custom' (a user-supplied quantization factory) says nothing parplan can price.
  if (a.name == "fp8-recipe") {
    const std::string v = a.value.value_or("");
    if (v != "delayed" && v != "tensorwise" && v != "mxfp8" && v != "blockwise") {
      throw InputError(fmt::format("{}: {} is '{}' (parplan prices Megatron-Core's delayed, tensorwise, mxfp8 and "
                                   "blockwise recipes)", path, a.origin, excerpt(v)));
    }
    c.fp8_recipe = v;
    c.fp8_recipe_origin = a.origin;
    return true;
  }
  // 4-bit GEMMs (Megatron-Core --fp4-format e2m1, --fp4-recipe nvfp4 / mxfp4): priced as anything else they would be
  // off by the whole step, so the file is refused rather than read without them.
  if (a.name == "fp4-format" || a.name == "fp4-recipe" || a.name == "fp4") {
    throw InputError(fmt::format("{}: {}: 4-bit GEMMs (NVFP4, MXFP4) are not modelled (parplan prices bf16, fp16 and "
                                 "fp8)", path, a.origin));
  }
  if (a.name == "overlap-grad-reduce") return c.overlap_grad_reduce = true;
  // Gradient buffer and reduction dtype: fp32 by default for bf16 (accumulate_allreduce_grads_in_fp32), 16-bit with
  // --grad-reduce-in-bf16.
  if (a.name == "grad-reduce-in-bf16") return out.set("--grad-reduce-dtype", "bf16", a.origin, path), true;
  if (a.name == "accumulate-allreduce-grads-in-fp32") return out.set("--grad-reduce-dtype", "fp32", a.origin, path), true;
  // MoE routing (docs/cost-model.md): forced balance is parplan's default (imbalance 1); a capacity factor is priced
  // padded, as --moe-pad-expert-input-to-capacity runs it.
  if (a.name == "moe-router-force-load-balancing") return true;
  if (a.name == "moe-pad-expert-input-to-capacity") return c.pad_to_capacity = true;
  if (a.name == "moe-expert-capacity-factor") {
    c.capacity_factor = a.value.value_or("");
    c.capacity_origin = a.origin;
    return true;
  }
  return shape_arg(a, c, path);
}

}  // namespace

std::optional<ModelSpec> model_from_shape(const ShapeArgs& s, Imported& out, const std::string& path, std::string_view vocab_why) {
  if (!s.layers || !s.hidden || !s.heads) return std::nullopt;
  ModelSpec m;
  m.name = fmt::format("{} ({} layers, hidden {})", path, *s.layers, *s.hidden);
  m.layers = *s.layers;
  m.hidden = *s.hidden;
  m.heads = *s.heads;
  m.kv_heads = s.kv_heads.value_or(m.heads);
  m.ffn_type = s.swiglu ? FfnType::swiglu : FfnType::gelu;
  // Megatron-LM: ffn_hidden_size defaults to 4h, or int(4h * 2/3 / 64) * 64 with --swiglu.
  m.ffn_hidden = s.ffn.value_or(s.swiglu ? 4 * m.hidden * 2 / 3 / 64 * 64 : 4 * m.hidden);
  if (!s.vocab) out.assumed.push_back(fmt::format("vocabulary 50257: {}", vocab_why));
  m.vocab = s.vocab.value_or(50257);
  m.seq_len = s.seq.value_or(0);
  m.tied_embeddings = s.tied;
  m.bias = s.bias;
  m.dropout = s.dropout;
  m.norm = s.rmsnorm ? NormType::rmsnorm : NormType::layernorm;
  m.position = s.rotary ? PositionEmbedding::rotary : PositionEmbedding::learned;
  m.experts = s.experts.value_or(1);
  m.top_k = m.is_moe() ? s.top_k.value_or(2) : 1;
  m.source = fmt::format("shape read from {}", path);
  return m;
}

void apply_megatron_args(const std::vector<MegatronArg>& args, Imported& out, const std::string& path) {
  Collected c;
  for (const MegatronArg& a : args) {
    if (!apply_one(a, c, out, path)) out.ignored.push_back(fmt::format("{}: not modelled", a.origin));
  }
  out.model = model_from_shape(c.shape, out, path,
                               "no vocabulary size in the file (Megatron-LM and NeMo take it from the tokenizer; "
                               "GPT-2 BPE's assumed)");
  if (out.model) out.model_origin = "--num-layers / --hidden-size / --num-attention-heads";
  if (c.layers_per_virtual_stage) {
    const auto pp_it = out.flags.find("--pp");
    const int64_t pp = pp_it == out.flags.end() || pp_it->second.value.empty() ? 1 : decimal(pp_it->second.value).value_or(1);
    if (!out.model) throw InputError(fmt::format("{}: {} needs --num-layers in the file", path, c.vstage_origin));
    const int64_t per = *c.layers_per_virtual_stage;
    if (per == 0 || out.model->layers % (pp * per) != 0) {
      throw InputError(fmt::format("{}: {}: {} layers do not split into pp {} stages of chunks of {}", path,
                                   c.vstage_origin, out.model->layers, pp, per));
    }
    out.set("--vpp", std::to_string(out.model->layers / (pp * per)), c.vstage_origin, path);
  }
  if (!c.exp_avg.empty() || !c.exp_avg_sq.empty()) {
    const std::string m = c.exp_avg.empty() ? "fp32" : c.exp_avg, v = c.exp_avg_sq.empty() ? "fp32" : c.exp_avg_sq;
    if (m != v) {
      throw InputError(fmt::format("{}: --exp-avg-dtype {} and --exp-avg-sq-dtype {}: parplan keeps both moments in one "
                                   "dtype (give the same)",
                                   path, m, v));
    }
    out.set("--adam-moments-dtype", m, c.moments_origin, path);
  }
  if (!c.layout.empty()) {  // Megatron-Core's layout string: the stage layers per chunk, and vpp
    const auto pp_it = out.flags.find("--pp");
    const int64_t pp = pp_it == out.flags.end() || pp_it->second.value.empty() ? 1 : decimal(pp_it->second.value).value_or(1);
    const auto layout = parse_megatron_layout(c.layout, pp, fmt::format("{}: {}", path, c.layout_origin));
    out.set("--stage-layers", format_stage_layout(layout), c.layout_origin, path);
    if (layout.front().size() > 1) out.set("--vpp", std::to_string(layout.front().size()), c.layout_origin, path);
  }
  if (!c.capacity_factor.empty() && c.pad_to_capacity) {
    out.set("--moe-capacity-factor", c.capacity_factor, c.capacity_origin, path);
  } else if (!c.capacity_factor.empty()) {
    out.ignored.push_back(fmt::format("{}: token dropping without --moe-pad-expert-input-to-capacity is not modelled "
                                      "(priced dropless)", c.capacity_origin));
  }
  if (!c.precision.empty()) out.set("--precision", c.precision, c.precision_origin, path);
  if (!c.fp8_recipe.empty() && c.precision == "fp8") {
    out.set("--fp8-recipe", c.fp8_recipe, c.fp8_recipe_origin, path);
  } else if (!c.fp8_recipe.empty()) {
    out.ignored.push_back(fmt::format("{}: read only with --fp8-format", c.fp8_recipe_origin));
  } else if (c.precision == "fp8") {
    out.assume("--fp8-recipe", "delayed", "no --fp8-recipe (Megatron-LM default: delayed scaling)");
  }
  out.assume("--precision", "bf16", "no --bf16 / --fp16 (Megatron-LM's default is fp32, which parplan does not model)");
  if (!c.overlap_grad_reduce) {
    out.assume("--no-overlap-dp", "", "no --overlap-grad-reduce (Megatron-LM default: gradients reduced after the backward pass)");
  }
  out.assume("--tp", "1", "no --tensor-model-parallel-size (Megatron-LM default 1)");
  out.assume("--pp", "1", "no --pipeline-model-parallel-size (Megatron-LM default 1)");
  out.assume("--cp", "1", "no --context-parallel-size (Megatron-LM default 1)");
  out.assume("--micro-batch", "1", "no --micro-batch-size (1 assumed)");
  if (!out.has("--global-batch")) {
    out.assume("--microbatches", "1", "no --global-batch-size (Megatron-LM default: micro-batch x data-parallel size)");
  }
  if (!c.recompute_given) out.assume("--recompute", "none", "no --recompute-granularity (Megatron-LM default: none)");
  if (!c.recompute_modules.empty() && c.recompute == "selective") {
    out.set("--recompute-modules", c.recompute_modules, c.recompute_modules_origin, path);
  } else if (!c.recompute_modules.empty()) {
    out.ignored.push_back(fmt::format("{}: read only with --recompute-granularity selective", c.recompute_modules_origin));
  }
  // Full recompute: the block method recomputes the first N layers of each chunk (--recompute-layers N); uniform
  // checkpoints groups of N layers, priced as every layer recomputed (groups above 1 layer are not modelled).
  // Megatron-Core's TransformerConfig refuses another method and, with full granularity, N outside 1 .. a stage's
  // layers (from memory): so does parplan, rather than price N = 0 (no layer) as every layer.
  if (c.recompute == "full" && !c.recompute_method.empty() && c.recompute_method != "block" && c.recompute_method != "uniform") {
    throw InputError(fmt::format("{}: {} is '{}' (Megatron-LM takes uniform or block)", path, c.recompute_method_origin,
                                 excerpt(c.recompute_method)));
  }
  if (c.recompute == "full" && c.recompute_num_layers == 0) {
    throw InputError(fmt::format("{}: {} is 0 (with full recompute Megatron-LM takes 1 up to a pipeline stage's layers)",
                                 path, c.recompute_num_layers_origin));
  }
  if (c.recompute == "full" && c.recompute_method == "block" && !c.recompute_num_layers) {  // no N: which layers?
    throw InputError(fmt::format("{}: {} is block without a number of layers (Megatron-LM needs --recompute-num-layers "
                                 "N with full recompute: the first N layers of each chunk)",
                                 path, c.recompute_method_origin));
  }
  if (c.recompute == "full" && c.recompute_method == "block" && c.recompute_num_layers) {
    out.set("--recompute-layers", std::to_string(*c.recompute_num_layers),
            c.recompute_method_origin + " + " + c.recompute_num_layers_origin, path);
  } else if (c.recompute == "full" && c.recompute_method == "uniform" && c.recompute_num_layers.value_or(1) > 1) {
    out.ignored.push_back(fmt::format("{}: uniform groups of {} layers, priced as every layer recomputed on its own",
                                      c.recompute_method_origin, *c.recompute_num_layers));
  } else if (!c.recompute_method.empty() && c.recompute != "full") {
    out.ignored.push_back(fmt::format("{}: read only with --recompute-granularity full", c.recompute_method_origin));
  }
  if (c.recompute_num_layers && c.recompute != "full") {
    out.ignored.push_back(fmt::format("{}: read only with --recompute-granularity full", c.recompute_num_layers_origin));
  }
}

}  // namespace parplan::cli
