// Megatron-LM arguments -> plan flags and model shape (see framework.hpp); shared by the launch-script, YAML and NeMo
// readers. Argument names and defaults: Megatron-LM megatron/training/arguments.py (core_r0.9+).
#include <cctype>
#include <charconv>
#include <sstream>
#include <fmt/core.h>
#include <string>
#include <vector>

#include "cli/interop/framework.hpp"
#include "planner/spec/config.hpp"
#include "planner/spec/error.hpp"
#include "planner/spec/spec_json.hpp"

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
    {"num-distributed-optimizer-instances", "--dp-replicate"},  // Megatron-Core's partial distributed optimizer
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
    {"overlap-moe-expert-parallel-comm", "--overlap-ep"},  // Megatron-Core's 1F1B A2A overlap
    {"no-gradient-accumulation-fusion", "--no-fused-grad-accumulation"},
};

// (A value set only inside a conditional never reaches here: apply_one refuses it first.)
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
  // --moe-router-num-groups / --moe-router-group-topk: group-limited routing (parplan's --moe-router-groups /
  // --moe-router-group-top-k)
  std::string router_groups, router_groups_origin, router_group_topk, router_group_topk_origin;
  std::string fp8_recipe, fp8_recipe_origin;      // --fp8-recipe
  // --moe-token-dispatcher-type; DeepEP named by --moe-enable-deepep or --moe-flex-dispatcher-backend deepep/hybridep
  std::string dispatcher, dispatcher_origin, deepep_origin;
  std::string offload_flag_origin, offload_modules, offload_modules_origin;  // fine-grained activation offloading
  // --window-size (its words) and --window-attn-skip-freq, as "origin 'value'" for the lists and errors.
  std::optional<int64_t> window_left;  // --window-size's left side (-1: unbounded)
  std::string window_size, window_skip;
};

// A list argument's words, space-separated: Megatron-Core takes "a b c", a YAML flow list "[a, b]".
std::string word_list(const MegatronArg& a) {
  std::string words = a.value.value_or("");
  for (char& ch : words) ch = std::string_view("[],'\"\t").find(ch) != std::string_view::npos ? ' ' : ch;
  std::string list;
  std::istringstream in(words);
  for (std::string w; in >> w;) list += (list.empty() ? "" : " ") + w;
  return list;
}

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
  // A size given twice with two values is refused naming both, as Imported::set does for the plan flags.
  auto num = [&](std::optional<int64_t>& field, const char* key) {
    const int64_t v = int_arg(a, path);
    if (field && *field != v) {
      throw InputError(fmt::format("{}: {} says {} but {} says {}: give one", path, s.origins[key], *field, a.origin, v));
    }
    field = v;
    s.origins[key] = a.origin;
    return true;
  };
  if (n == "num-layers") return num(s.layers, "layers");
  if (n == "hidden-size") return num(s.hidden, "hidden");
  if (n == "ffn-hidden-size") return num(s.ffn, "ffn");
  if (n == "num-attention-heads") return num(s.heads, "heads");
  if (n == "num-query-groups") return num(s.kv_heads, "kv_heads");
  if (n == "num-experts") return num(s.experts, "experts");
  if (n == "moe-router-topk") return num(s.top_k, "top_k");
  if (n == "moe-ffn-hidden-size") return num(s.moe_ffn, "moe_ffn");
  if (n == "moe-shared-expert-intermediate-size") return s.shared_origin = a.origin, num(s.shared_size, "shared_size");
  if (n == "moe-layer-freq") {
    s.layer_freq = a.value.value_or("");
    s.layer_freq_origin = a.origin;
    return true;
  }
  if (n == "kv-channels") return num(s.kv_channels, "kv_channels");
  if (n == "multi-latent-attention") return s.mla_origin = a.origin, s.mla = true;
  if (n == "q-lora-rank") return num(s.q_lora, "q_lora");
  if (n == "kv-lora-rank") return num(s.kv_lora, "kv_lora");
  if (n == "qk-head-dim") return num(s.qk_head_dim, "qk_head_dim");
  if (n == "qk-pos-emb-head-dim") return num(s.qk_pos, "qk_pos");
  if (n == "v-head-dim") return num(s.v_head_dim, "v_head_dim");
  if (n == "vocab-size") return num(s.vocab, "vocab");
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

// Recompute and fine-grained activation offloading; false when `a` is neither.
bool recompute_arg(const MegatronArg& a, Collected& c, Imported& out, const std::string& path) {
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
  if (a.name == "recompute-modules") {
    const std::string list = word_list(a);
    RecomputeModules m;
    if (!parse_recompute_modules(list, m, ' ')) {
      throw InputError(fmt::format("{}: {} is '{}' (Megatron-Core takes core_attn, layernorm, moe_act, mla_up_proj, mlp, "
                                   "moe, shared_experts)", path, a.origin, excerpt(a.value.value_or(""))));
    }
    c.recompute_modules = to_string(m);
    c.recompute_modules_origin = a.origin;
    return true;
  }
  // Megatron-Core's fine-grained activation offloading (--fine-grained-activation-offloading --offload-modules a b):
  // the modules parplan prices (spec.hpp OffloadModules); others listed as ignored.
  if (a.name == "fine-grained-activation-offloading") return c.offload_flag_origin = a.origin, true;
  if (a.name == "offload-modules") {
    std::istringstream in(word_list(a));
    OffloadModules m;
    for (std::string w; in >> w;) {
      OffloadModule one{};
      if (parse_offload_module(w, one)) m.add(one);
      else out.ignored.push_back(fmt::format("{}: module '{}' not modelled (priced without it)", a.origin, excerpt(w)));
    }
    c.offload_modules = m.empty() ? "" : to_string(m);
    c.offload_modules_origin = a.origin;
    return true;
  }
  return false;
}

// Precision: 16-bit, fp8 and its recipe; 4-bit refused. False when `a` is none of them.
bool precision_arg(const MegatronArg& a, Collected& c, const std::string& path) {
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
  return false;
}

// MoE routing and token exchange; false when `a` is none of them.
bool moe_arg(const MegatronArg& a, Collected& c, const std::string& path) {
  // MoE routing (docs/cost-model.md): forced balance is parplan's default (imbalance 1); a capacity factor is priced
  // padded, as --moe-pad-expert-input-to-capacity runs it.
  if (a.name == "moe-router-force-load-balancing") return true;
  // The token dispatcher (docs/cost-model.md "MoE"): alltoall is parplan's default; flex with DeepEP (or its HybridEP
  // backend) is --moe-dispatcher deepep.
  if (a.name == "moe-token-dispatcher-type") {
    c.dispatcher = a.value.value_or("");
    c.dispatcher_origin = a.origin;
    return true;
  }
  if (a.name == "moe-enable-deepep") return c.deepep_origin = a.origin, true;
  if (a.name == "moe-flex-dispatcher-backend") {
    const std::string v = a.value.value_or("");
    if (v != "deepep" && v != "hybridep") {
      throw InputError(fmt::format("{}: {} is '{}' (parplan prices deepep and hybridep as DeepEP's dispatch)", path,
                                   a.origin, excerpt(v)));
    }
    return c.deepep_origin = a.origin, true;
  }
  if (a.name == "moe-pad-expert-input-to-capacity") return c.pad_to_capacity = true;
  if (a.name == "moe-router-num-groups") {
    c.router_groups = a.value.value_or("");
    c.router_groups_origin = a.origin;
    return true;
  }
  if (a.name == "moe-router-group-topk") {
    c.router_group_topk = a.value.value_or("");
    c.router_group_topk_origin = a.origin;
    return true;
  }
  if (a.name == "moe-expert-capacity-factor") {
    c.capacity_factor = a.value.value_or("");
    c.capacity_origin = a.origin;
    return true;
  }
  return false;
}

// Megatron-Core's sliding-window attention: --window-size L R (TransformerConfig.window_size, flash-attn's
// (left, right); -1 is unbounded) and --window-attn-skip-freq (which layers attend in full), taken apart here and
// resolved by resolve_window().
void window_arg(const MegatronArg& a, Collected& c, const std::string& path) {
  std::string words = word_list(a);
  for (char& ch : words) ch = ch == '(' || ch == ')' ? ' ' : ch;
  std::istringstream in(words);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  const std::string shown = fmt::format("{} '{}'", a.origin, excerpt(a.value.value_or("")));
  if (a.name == "window-attn-skip-freq") {
    c.window_skip = shown;
    return;
  }
  const auto side = [](const std::string& x) -> std::optional<int64_t> {
    if (x == "-1") return -1;
    return decimal(x);
  };
  const std::optional<int64_t> left = w.size() == 2 ? side(w[0]) : std::nullopt;
  if (!left || !side(w[1])) {
    throw InputError(fmt::format("{}: {} is '{}': the window is two integers, left and right (-1: unbounded)", path,
                                 a.origin, excerpt(a.value.value_or(""))));
  }
  c.window_left = left;
  c.window_size = shown;
}

// --window-size with a bounded left side states a window (Imported::window_options: plan_from_framework accepts it
// only with a --model that has one); an unbounded one (-1, any right side: full causal attention) and
// --window-attn-skip-freq without a window change nothing and are listed as ignored.
void resolve_window(const Collected& c, Imported& out) {
  const bool windowed = c.window_left && *c.window_left >= 0;
  if (windowed) {
    out.window_options.push_back(c.window_size);
    if (!c.window_skip.empty()) out.window_options.push_back(c.window_skip);
    return;
  }
  if (!c.window_size.empty()) {
    out.ignored.push_back(fmt::format("{}: no window (-1 on the left is unbounded: full attention)", c.window_size));
  }
  if (!c.window_skip.empty()) {
    out.ignored.push_back(fmt::format("{}: no window to skip (no bounded window size)", c.window_skip));
  }
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
  if (in_branch(a.placeholder)) {  // not a plan flag the command line can give: the script must say
    throw InputError(fmt::format("{}: {} is {}: flatten the script", path, a.origin, excerpt(a.placeholder, 2 * kExcerptBytes)));
  }
  for (const Direct& d : kDirect) {
    if (a.name == d.megatron) {
      const int64_t v = int_arg(a, path);
      out.set(std::string(d.flag), std::to_string(v), a.origin, path);
      // Megatron-DeepSpeed's --zero-stage 3 is DeepSpeed's ZeRO-3, which gathers per submodule (as the DeepSpeed
      // import sets it; the export warns for whole-layer gathers).
      if (a.name == "zero-stage" && v == 3) {
        out.set("--zero3-gather-unit", "linear", a.origin + " (Megatron-DeepSpeed gathers per submodule)", path);
      }
      return true;
    }
  }
  for (const Direct& d : kSwitch) {
    if (a.name == d.megatron) {
      out.set(std::string(d.flag), "", a.origin, path);
      return true;
    }
  }
  if (a.name == "window-size" || a.name == "window-attn-skip-freq") return window_arg(a, c, path), true;
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
  if (recompute_arg(a, c, out, path) || precision_arg(a, c, path) || moe_arg(a, c, path)) return true;
  if (a.name == "overlap-grad-reduce") return c.overlap_grad_reduce = true;
  // Gradient buffer and reduction dtype: fp32 by default for bf16 (accumulate_allreduce_grads_in_fp32), 16-bit with
  // --grad-reduce-in-bf16.
  if (a.name == "grad-reduce-in-bf16") return out.set("--grad-reduce-dtype", "bf16", a.origin, path), true;
  if (a.name == "accumulate-allreduce-grads-in-fp32") return out.set("--grad-reduce-dtype", "fp32", a.origin, path), true;
  return shape_arg(a, c, path);
}

// A Python list expression as Megatron-Core's --moe-layer-freq takes it ("([0]*3+[1]*58)", "[1,0,1,0]"): lists of
// 0 / 1, '+' concatenating, '*' repeating by a count, parentheses. nullopt on anything else or past 10^6 entries.
class LayerFreqParser {
 public:
  explicit LayerFreqParser(std::string_view t) : t_(t) {}
  std::optional<std::vector<int>> parse() {
    std::optional<std::vector<int>> v = sum();
    skip();
    return v && i_ == t_.size() ? v : std::nullopt;
  }

 private:
  static constexpr size_t kMax = 1'000'000;
  static constexpr int kMaxDepth = 64;  // nested parentheses: deeper is refused, not recursed into
  std::string_view t_;
  size_t i_ = 0;
  int depth_ = 0;
  void skip() {
    while (i_ < t_.size() && t_[i_] == ' ') ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < t_.size() && t_[i_] == c) return ++i_, true;
    return false;
  }
  std::optional<int64_t> count() {
    skip();
    const size_t b = i_;
    while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_])) && i_ - b < 7) ++i_;
    return i_ > b ? decimal(t_.substr(b, i_ - b)) : std::nullopt;
  }
  std::optional<std::vector<int>> sum() {
    std::optional<std::vector<int>> v = product();
    while (v && eat('+')) {
      const std::optional<std::vector<int>> w = product();
      if (!w || v->size() + w->size() > kMax) return std::nullopt;
      v->insert(v->end(), w->begin(), w->end());
    }
    return v;
  }
  std::optional<std::vector<int>> product() {
    std::optional<std::vector<int>> v = atom();
    while (v && eat('*')) {
      const std::optional<int64_t> n = count();
      if (!n || (!v->empty() && static_cast<size_t>(*n) > kMax / v->size())) return std::nullopt;
      std::vector<int> r;
      for (int64_t k = 0; k < *n; ++k) r.insert(r.end(), v->begin(), v->end());
      v = std::move(r);
    }
    return v;
  }
  std::optional<std::vector<int>> atom() {
    if (eat('(')) {
      if (++depth_ > kMaxDepth) return std::nullopt;
      std::optional<std::vector<int>> v = sum();
      --depth_;
      return v && eat(')') ? v : std::nullopt;
    }
    if (!eat('[')) return std::nullopt;
    std::vector<int> v;
    if (eat(']')) return v;
    do {
      const std::optional<int64_t> x = count();
      if (!x || *x > 1) return std::nullopt;
      v.push_back(static_cast<int>(*x));
    } while (eat(','));
    return eat(']') ? std::optional<std::vector<int>>(std::move(v)) : std::nullopt;
  }
};

// --moe-layer-freq as parplan's leading dense layers and MoE step (ModelSpec::dense_layers, moe_layer_step): an
// integer N is Megatron-Core's "layer i is MoE when i % N == 0", a list expression gives each layer (1 = MoE). The
// pattern must be what parplan prices: k dense layers, then every step-th layer MoE.
void apply_layer_freq(const ShapeArgs& s, ModelSpec& m, const std::string& path) {
  const std::string& t = s.layer_freq;
  std::vector<int> v;
  if (const std::optional<int64_t> n = decimal(t); n && *n >= 1) {
    for (int64_t i = 0; i < m.layers; ++i) v.push_back(i % *n == 0 ? 1 : 0);
  } else {
    std::string expr = t;
    if (expr.size() >= 2 && (expr.front() == '"' || expr.front() == '\'') && expr.back() == expr.front()) {
      expr = expr.substr(1, expr.size() - 2);
    }
    const std::optional<std::vector<int>> parsed = LayerFreqParser(expr).parse();
    if (!parsed) {
      throw InputError(fmt::format("{}: {} is '{}' (Megatron-Core takes an integer or a list expression of 0 and 1, "
                                   "e.g. ([0]*3+[1]*58))", path, s.layer_freq_origin, excerpt(t)));
    }
    v = *parsed;
  }
  if (static_cast<int64_t>(v.size()) != m.layers) {
    throw InputError(fmt::format("{}: {} gives {} layers, the model has {}", path, s.layer_freq_origin, v.size(), m.layers));
  }
  std::vector<size_t> ones;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == 1) ones.push_back(i);
  }
  const int64_t step = ones.size() >= 2 ? static_cast<int64_t>(ones[1] - ones[0]) : 1;
  const int64_t first = ones.empty() ? m.layers : static_cast<int64_t>(ones[0]);
  ModelSpec want = m;
  want.dense_layers = first - (step - 1);
  want.moe_layer_step = step;
  bool same = !ones.empty() && want.dense_layers >= 0;
  for (int64_t i = 0; same && i < m.layers; ++i) {
    const bool dense = want.dense_layers_before(i + 1) > want.dense_layers_before(i);
    same = dense == (v[static_cast<size_t>(i)] == 0);
  }
  if (!same) {
    throw InputError(fmt::format("{}: {} is '{}': parplan prices leading dense layers, then every N-th layer MoE (and "
                                 "at least one)", path, s.layer_freq_origin, excerpt(t)));
  }
  m.dense_layers = want.dense_layers;
  m.moe_layer_step = step;
}

// Megatron-Core's MoE and MLA widths onto `m` (a MoE model's --ffn-hidden-size is its dense layers' MLP).
void apply_moe_and_mla(const ShapeArgs& s, ModelSpec& m, Imported& out, const std::string& path) {
  if (m.is_moe()) {
    const int64_t dense_ffn = m.ffn_hidden;
    if (s.moe_ffn) m.ffn_hidden = *s.moe_ffn;  // Megatron-Core: moe_ffn_hidden_size defaults to ffn_hidden_size
    if (s.shared_size) {
      if (m.ffn_hidden <= 0 || *s.shared_size % m.ffn_hidden != 0) {
        throw InputError(fmt::format("{}: {} is {}, not a multiple of the expert width {} (parplan's shared experts "
                                     "are each an expert wide)", path, s.shared_origin, *s.shared_size, m.ffn_hidden));
      }
      m.shared_experts = *s.shared_size / m.ffn_hidden;
    }
    if (!s.layer_freq.empty()) apply_layer_freq(s, m, path);
    if (m.has_dense_layers()) m.dense_ffn_hidden = dense_ffn;
  }
  if (s.mla) {
    if (!s.kv_lora) throw InputError(fmt::format("{}: {} needs --kv-lora-rank in the file", path, s.mla_origin));
    m.kv_lora_rank = *s.kv_lora;
    m.q_lora_rank = s.q_lora.value_or(0);  // Megatron-Core: no --q-lora-rank, queries straight from the hidden state
    m.kv_heads = m.heads;
    auto dim = [&](const std::optional<int64_t>& v, int64_t def, const char* arg) {
      if (!v) out.assumed.push_back(fmt::format("{} {}: not in the file (Megatron-Core's default)", arg, def));
      return v.value_or(def);
    };
    m.head_dim_override = dim(s.qk_head_dim, 128, "--qk-head-dim");
    m.qk_rope_head_dim = dim(s.qk_pos, 64, "--qk-pos-emb-head-dim");
    m.v_head_dim_override = dim(s.v_head_dim, 128, "--v-head-dim");
  } else if (s.kv_channels && *s.kv_channels != m.hidden / m.heads) {
    m.head_dim_override = *s.kv_channels;
  }
}

// What the arguments give only together: the MoE dispatcher, fine-grained offloading's modules, the fp8 recipe.
void resolve_collected(const Collected& c, Imported& out, const std::string& path) {
  if (!c.dispatcher.empty() && c.dispatcher != "alltoall" && c.dispatcher != "flex") {
    out.ignored.push_back(fmt::format("{}: '{}' is not modelled (priced as alltoall)", c.dispatcher_origin, excerpt(c.dispatcher)));
  } else if (!c.deepep_origin.empty()) {
    out.set("--moe-dispatcher", "deepep", c.deepep_origin, path);
  } else if (c.dispatcher == "flex") {
    out.ignored.push_back(fmt::format("{}: flex without a DeepEP backend named (priced as alltoall)", c.dispatcher_origin));
  }
  if (!c.offload_flag_origin.empty() && !c.offload_modules.empty()) {
    out.set("--offload-modules", c.offload_modules, c.offload_flag_origin + " + " + c.offload_modules_origin, path);
  } else if (!c.offload_modules_origin.empty()) {
    out.ignored.push_back(fmt::format("{}: read only with --fine-grained-activation-offloading", c.offload_modules_origin));
  } else if (!c.offload_flag_origin.empty()) {
    out.ignored.push_back(fmt::format("{}: no --offload-modules parplan prices (nothing offloaded)", c.offload_flag_origin));
  }
  if (!c.fp8_recipe.empty() && c.precision == "fp8") {
    out.set("--fp8-recipe", c.fp8_recipe, c.fp8_recipe_origin, path);
  } else if (!c.fp8_recipe.empty()) {
    out.ignored.push_back(fmt::format("{}: read only with --fp8-format", c.fp8_recipe_origin));
  } else if (c.precision == "fp8") {
    out.assume("--fp8-recipe", "delayed", "no --fp8-recipe (Megatron-LM default: delayed scaling)");
  }
}

// The file's option that gave the field `key` of a Plan document's model (spec_json.cpp's names), or "".
std::string shape_origin(const ShapeArgs& s, const ModelSpec& m, const Imported& out, std::string_view key) {
  auto field = [&](const char* f) {
    const auto it = s.origins.find(f);
    return it == s.origins.end() ? std::string() : it->second;
  };
  if (key == "ffn_hidden") return m.is_moe() && s.moe_ffn ? field("moe_ffn") : field("ffn");
  if (key == "dense_ffn_hidden") return field("ffn");
  if (key == "head_dim") return s.mla ? field("qk_head_dim") : field("kv_channels");
  if (key == "kv_heads") return s.mla ? s.mla_origin : field("kv_heads");
  if (key == "shared_experts") return s.shared_origin;
  if (key == "dense_layers" || key == "interleave_moe_layer_step") return s.layer_freq_origin;
  if (key == "seq_len") return out.has("--seq") ? out.flags.at("--seq").origin : "";
  for (auto [plan, file] : {std::pair<std::string_view, const char*>{"q_lora_rank", "q_lora"}, {"kv_lora_rank", "kv_lora"},
                            {"qk_rope_head_dim", "qk_pos"}, {"v_head_dim", "v_head_dim"}}) {
    if (key == plan) return field(file);
  }
  return field(std::string(key).c_str());  // layers, hidden, heads, vocab, experts, top_k: the same names
}

// Sizes given as 0 (the divisions of the shape would fault on some): refused naming the option.
void refuse_zero_sizes(const ShapeArgs& s, const std::string& path) {
  const std::pair<const std::optional<int64_t>*, const char*> sizes[] = {
      {&s.layers, "layers"}, {&s.hidden, "hidden"}, {&s.heads, "heads"}, {&s.kv_heads, "kv_heads"}, {&s.ffn, "ffn"},
      {&s.vocab, "vocab"}, {&s.experts, "experts"}, {&s.top_k, "top_k"}, {&s.moe_ffn, "moe_ffn"},
      {&s.kv_channels, "kv_channels"}, {&s.q_lora, "q_lora"}, {&s.kv_lora, "kv_lora"}, {&s.qk_head_dim, "qk_head_dim"},
      {&s.qk_pos, "qk_pos"}, {&s.v_head_dim, "v_head_dim"}};
  for (const auto& [size, name] : sizes) {
    if (*size != 0) continue;
    const auto it = s.origins.find(name);
    throw InputError(fmt::format("{}: {} is 0 (a model size is at least 1)", path,
                                 it == s.origins.end() ? fmt::format("the model shape's {}", name) : it->second));
  }
}

// The checks a Plan document's model gets (spec_json.cpp's model_from_json: ranges, kv heads dividing the heads, the
// MoE and MLA fields together), each error naming the file's option that gave the field.
void check_shape(const ModelSpec& m, const ShapeArgs& s, const Imported& out, const std::string& path) {
  nlohmann::json j = to_json(m);
  if (m.seq_len == 0) j["seq_len"] = 1;  // none in the file: refused later, naming the flag that gives it
  constexpr std::string_view kWhere = "shape";
  try {
    JsonReader r(j, std::string(kWhere));
    static_cast<void>(model_from_json(r));
  } catch (const InputError& e) {
    const std::string msg = e.what();  // "shape: /key: what"
    const std::string rest = msg.substr(std::min(msg.size(), kWhere.size() + 3));
    const std::string key = rest.substr(0, rest.find(':'));
    const std::string what = rest.substr(std::min(rest.size(), key.size() + 2));
    const std::string origin = shape_origin(s, m, out, key);
    throw InputError(fmt::format("{}: {}: {}", path,
                                 !origin.empty() ? origin : key.empty() ? "the model shape" : "the model shape's " + key, what));
  }
}

}  // namespace

std::optional<ModelSpec> model_from_shape(const ShapeArgs& s, Imported& out, const std::string& path, std::string_view vocab_why) {
  if (!s.layers || !s.hidden || !s.heads) return std::nullopt;
  refuse_zero_sizes(s, path);
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
  apply_moe_and_mla(s, m, out, path);
  m.source = fmt::format("shape read from {}", path);
  check_shape(m, s, out, path);
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
  if (out.model && out.model->is_moe() && c.dispatcher.empty() && c.deepep_origin.empty()) {
    out.assume("--moe-dispatcher", "alltoall",
               "no --moe-token-dispatcher-type (Megatron-LM's default, allgather, is not modelled: priced as alltoall)");
  }
  if (c.layers_per_virtual_stage || !c.layout.empty()) {  // worked out with the command line's pp (from_file.cpp)
    // Assigned whole rather than emplace()d: clang 14 does not see the nested struct, with its member initializers,
    // as default-constructible inside std::optional.
    Imported::PipelineSplit ps;
    ps.layout = c.layout;
    ps.layout_origin = c.layout_origin;
    ps.layers_per_virtual_stage = c.layers_per_virtual_stage;
    ps.vstage_origin = c.vstage_origin;
    out.pipeline_split = std::move(ps);
  }
  if (c.layers_per_virtual_stage) {
    if (!out.model) throw InputError(fmt::format("{}: {} needs --num-layers in the file", path, c.vstage_origin));
    if (*c.layers_per_virtual_stage == 0) throw InputError(fmt::format("{}: {} is 0", path, c.vstage_origin));
    // Megatron-Core counts the embedding and the loss as a layer each under --account-for-{embedding,loss}-in-
    // pipeline-split (Qwen3-235B's recipes: (94 + 2) / (8 x 3) = 4 chunks).
    out.pipeline_split->layers = out.model->layers + (out.has("--account-for-embedding-in-pipeline-split") ? 1 : 0) +
                                 (out.has("--account-for-loss-in-pipeline-split") ? 1 : 0);
    out.pipeline_split->counts_extra = out.pipeline_split->layers != out.model->layers;
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
  if (!c.capacity_factor.empty() && c.pad_to_capacity) {
    out.set("--moe-capacity-factor", c.capacity_factor, c.capacity_origin, path);
  } else if (!c.capacity_factor.empty()) {
    out.ignored.push_back(fmt::format("{}: token dropping without --moe-pad-expert-input-to-capacity is not modelled "
                                      "(priced dropless)", c.capacity_origin));
  }
  if (!c.router_groups.empty()) out.set("--moe-router-groups", c.router_groups, c.router_groups_origin, path);
  if (!c.router_group_topk.empty()) {
    out.set("--moe-router-group-top-k", c.router_group_topk, c.router_group_topk_origin, path);
  }
  if (!c.precision.empty()) out.set("--precision", c.precision, c.precision_origin, path);
  resolve_window(c, out);
  resolve_collected(c, out, path);
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

void resolve_pipeline_split(Imported& im, const std::string& given_pp, bool given_vpp, bool model_given,
                            const std::string& where) {
  if (!im.pipeline_split) return;
  const Imported::PipelineSplit ps = *im.pipeline_split;
  const auto file_pp = im.flags.find("--pp");
  if (given_pp.empty() && file_pp != im.flags.end() && !file_pp->second.placeholder.empty()) {
    return;  // pp left to a variable the file does not set: plan_from_framework refuses it, naming the flag
  }
  const std::string pp_text = !given_pp.empty() ? given_pp : file_pp == im.flags.end() ? "1" : file_pp->second.value;
  int64_t pp = 0;
  std::from_chars(pp_text.data(), pp_text.data() + pp_text.size(), pp);
  if (pp < 1) return;  // refused by build_plan, naming --pp
  const std::string with_pp = given_pp.empty() ? "" : fmt::format(", with --pp {} from the command line", pp);
  if (ps.layers_per_virtual_stage) {
    const int64_t per = *ps.layers_per_virtual_stage;
    const bool splits = per <= ps.layers && pp <= ps.layers && ps.layers % (pp * per) == 0;
    if (model_given && !given_vpp) {
      throw InputError(fmt::format("{}: {} counts the file's {} layers, which --model replaces: give --vpp N", where,
                                   ps.vstage_origin, ps.layers));
    }
    if (!splits && !given_vpp) {
      throw InputError(fmt::format("{}: {}{}: {} layers{} do not split into pp {} stages of chunks of {}", where,
                                   ps.vstage_origin, with_pp, ps.layers, ps.counts_extra ? " (the embedding and loss counted as "
                                   "layers)" : "", pp, per));
    }
    if (splits && !model_given) im.set("--vpp", std::to_string(ps.layers / (pp * per)), ps.vstage_origin + with_pp, where);
  }
  if (!ps.layout.empty()) {  // Megatron-Core's layout string: the stage layers per chunk, and vpp
    const auto layout = parse_megatron_layout(ps.layout, pp, fmt::format("{}: {}{}", where, ps.layout_origin, with_pp));
    im.set("--stage-layers", format_stage_layout(layout), ps.layout_origin + with_pp, where);
    if (layout.front().size() > 1) im.set("--vpp", std::to_string(layout.front().size()), ps.layout_origin + with_pp, where);
  }
}

}  // namespace parplan::cli
