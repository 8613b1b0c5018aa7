// Enum names and small Plan helpers.
#include "planner/spec/spec.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/core.h>

namespace parplan {
namespace {

template <typename E, size_t N>
bool lookup(std::string_view s, E& out, const std::pair<std::string_view, E> (&table)[N]) {
  for (const auto& [name, value] : table) {
    if (name == s) {
      out = value;
      return true;
    }
  }
  return false;
}

constexpr std::pair<std::string_view, DType> kDTypes[] = {
    {"fp32", DType::fp32}, {"tf32", DType::tf32}, {"bf16", DType::bf16}, {"fp16", DType::fp16}, {"fp8", DType::fp8}};
constexpr std::pair<std::string_view, FfnType> kFfn[] = {{"gelu", FfnType::gelu}, {"swiglu", FfnType::swiglu}};
constexpr std::pair<std::string_view, NormType> kNorm[] = {{"layernorm", NormType::layernorm}, {"rmsnorm", NormType::rmsnorm}};
constexpr std::pair<std::string_view, PositionEmbedding> kPos[] = {
    {"learned", PositionEmbedding::learned}, {"rotary", PositionEmbedding::rotary}, {"alibi", PositionEmbedding::alibi}};
constexpr std::pair<std::string_view, Precision> kPrec[] = {
    {"bf16", Precision::bf16}, {"fp16", Precision::fp16}, {"fp8", Precision::fp8}};
constexpr std::pair<std::string_view, Recompute> kRec[] = {
    {"none", Recompute::none},
    {"selective", Recompute::selective},
    {"selective-op", Recompute::selective_op},
    {"full", Recompute::full}};
constexpr std::pair<std::string_view, Schedule> kSched[] = {{"gpipe", Schedule::gpipe},
                                                            {"1f1b", Schedule::one_f_one_b},
                                                            {"interleaved", Schedule::interleaved},
                                                            {"zb-h1", Schedule::zero_bubble},
                                                            {"zb-2p", Schedule::zb_2p},
                                                            {"zb-v", Schedule::zb_v},
                                                            {"dualpipe-v", Schedule::dualpipe_v}};
constexpr std::pair<std::string_view, AttentionKernel> kAttn[] = {
    {"flash", AttentionKernel::flash}, {"flash2", AttentionKernel::flash2}, {"unfused", AttentionKernel::unfused}};
constexpr std::pair<std::string_view, Fp8Recipe> kFp8Recipe[] = {{"delayed", Fp8Recipe::delayed},
                                                                  {"tensorwise", Fp8Recipe::tensorwise},
                                                                  {"rowwise", Fp8Recipe::rowwise},
                                                                  {"blockwise", Fp8Recipe::blockwise},
                                                                  {"mxfp8", Fp8Recipe::mxfp8}};
constexpr std::pair<std::string_view, Zero3GatherUnit> kZ3Unit[] = {{"layer", Zero3GatherUnit::layer},
                                                                    {"linear", Zero3GatherUnit::linear}};
constexpr std::pair<std::string_view, MoeDispatcher> kDispatcher[] = {{"alltoall", MoeDispatcher::alltoall},
                                                                       {"deepep", MoeDispatcher::deepep}};

template <typename E, size_t N>
std::string_view name_of(E e, const std::pair<std::string_view, E> (&table)[N]) {
  for (const auto& [name, value] : table) {
    if (value == e) return name;
  }
  return "?";
}

}  // namespace

std::string_view to_string(DType e) { return name_of(e, kDTypes); }
std::string_view to_string(FfnType e) { return name_of(e, kFfn); }
std::string_view to_string(NormType e) { return name_of(e, kNorm); }
std::string_view to_string(PositionEmbedding e) { return name_of(e, kPos); }
std::string_view to_string(Precision e) { return name_of(e, kPrec); }
std::string_view to_string(Recompute e) { return name_of(e, kRec); }
std::string_view to_string(Schedule e) { return name_of(e, kSched); }
std::string_view to_string(AttentionKernel e) { return name_of(e, kAttn); }
std::string_view to_string(Fp8Recipe e) { return name_of(e, kFp8Recipe); }
std::string_view to_string(Zero3GatherUnit e) { return name_of(e, kZ3Unit); }
std::string_view to_string(MoeDispatcher e) { return name_of(e, kDispatcher); }
bool parse_enum(std::string_view s, DType& out) { return lookup(s, out, kDTypes); }
bool parse_enum(std::string_view s, FfnType& out) { return lookup(s, out, kFfn); }
bool parse_enum(std::string_view s, NormType& out) { return lookup(s, out, kNorm); }
bool parse_enum(std::string_view s, PositionEmbedding& out) { return lookup(s, out, kPos); }
bool parse_enum(std::string_view s, Precision& out) { return lookup(s, out, kPrec); }
bool parse_enum(std::string_view s, Recompute& out) { return lookup(s, out, kRec); }
bool parse_enum(std::string_view s, Schedule& out) { return lookup(s, out, kSched); }
bool parse_enum(std::string_view s, AttentionKernel& out) { return lookup(s, out, kAttn); }
bool parse_enum(std::string_view s, Fp8Recipe& out) { return lookup(s, out, kFp8Recipe); }
bool parse_enum(std::string_view s, Zero3GatherUnit& out) { return lookup(s, out, kZ3Unit); }
bool parse_enum(std::string_view s, MoeDispatcher& out) { return lookup(s, out, kDispatcher); }

std::string to_string(OffloadSet o) {
  if (!o.any()) return "none";
  std::string s = o.optimizer ? "optimizer" : "";
  if (o.params) s += s.empty() ? "params" : ",params";
  if (o.activations) s += s.empty() ? "activations" : ",activations";
  return s;
}

bool parse_offload(std::string_view s, OffloadSet& out) {
  out = {};
  if (s == "none") return true;
  for (size_t begin = 0;;) {
    const size_t end = std::min(s.find(',', begin), s.size());
    const std::string_view item = s.substr(begin, end - begin);
    bool* part = item == "optimizer"     ? &out.optimizer
                 : item == "params"      ? &out.params
                 : item == "activations" ? &out.activations
                                         : nullptr;
    if (part == nullptr || *part) return false;  // unknown, empty, "none" in a list, or given twice
    *part = true;
    if (end == s.size()) return true;
    begin = end + 1;
  }
}

namespace {
constexpr std::array<std::string_view, kNumRecomputeModules> kRecomputeModuleNames = {
    "core_attn", "layernorm", "moe_act", "mla_up_proj", "mlp", "moe", "shared_experts"};
constexpr std::array<std::string_view, kNumOffloadModules> kOffloadModuleNames = {"expert_fc1", "moe_act"};

// A set of modules (RecomputeModules, OffloadModules: a bit per Module) and the names of its modules, in order.
template <typename Set, typename Module, size_t N>
std::string module_set_string(Set set, const std::array<std::string_view, N>& names, std::string_view sep) {
  std::string s;
  for (size_t i = 0; i < N; ++i) {
    if (!set.has(static_cast<Module>(i))) continue;
    if (!s.empty()) s += sep;
    s += names[i];
  }
  return s;
}

template <typename Module, size_t N>
bool parse_module_name(std::string_view s, const std::array<std::string_view, N>& names, Module& out) {
  for (size_t i = 0; i < N; ++i) {
    if (s == names[i]) {
      out = static_cast<Module>(i);
      return true;
    }
  }
  return false;
}

// Names separated by `sep`, each at most once, at least one; false on an unknown, empty or repeated name.
template <typename Set, typename Module, size_t N>
bool parse_module_set(std::string_view s, const std::array<std::string_view, N>& names, Set& out, char sep) {
  out.bits = 0;
  for (size_t begin = 0;;) {
    const size_t end = std::min(s.find(sep, begin), s.size());
    Module m{};
    if (!parse_module_name(s.substr(begin, end - begin), names, m) || out.has(m)) return false;
    out.add(m);
    if (end == s.size()) return true;
    begin = end + 1;
  }
}
}  // namespace

std::string to_string(RecomputeModules r, std::string_view sep) {
  return module_set_string<RecomputeModules, RecomputeModule>(r, kRecomputeModuleNames, sep);
}
bool parse_recompute_module(std::string_view s, RecomputeModule& out) {
  return parse_module_name(s, kRecomputeModuleNames, out);
}
bool parse_recompute_modules(std::string_view s, RecomputeModules& out, char sep) {
  return parse_module_set<RecomputeModules, RecomputeModule>(s, kRecomputeModuleNames, out, sep);
}

std::string to_string(OffloadModules r, std::string_view sep) {
  return module_set_string<OffloadModules, OffloadModule>(r, kOffloadModuleNames, sep);
}
bool parse_offload_module(std::string_view s, OffloadModule& out) { return parse_module_name(s, kOffloadModuleNames, out); }
bool parse_offload_modules(std::string_view s, OffloadModules& out, char sep) {
  return parse_module_set<OffloadModules, OffloadModule>(s, kOffloadModuleNames, out, sep);
}

bool is_unpriced_offload_module(std::string_view s) {
  for (std::string_view n : {"attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm"}) {
    if (s == n) return true;
  }
  return false;
}

int64_t dtype_bytes(DType d) {
  switch (d) {
    case DType::fp32:
    case DType::tf32:
      return 4;
    case DType::bf16:
    case DType::fp16:
      return 2;
    case DType::fp8:
      return 1;
  }
  return 4;
}

ModelSpec dense_layer_model(const ModelSpec& m) {
  ModelSpec d = m;
  d.experts = 1;
  d.top_k = 1;
  d.shared_experts = 0;
  d.dense_layers = 0;
  d.dense_ffn_hidden = 0;
  d.moe_layer_step = 1;
  d.mtp_layers = 0;
  d.capacity_factor = 0;
  d.imbalance = 1.0;
  d.router_groups = 0;
  d.router_group_top_k = 0;
  d.ffn_hidden = m.dense_ffn_hidden;
  d.layers = m.dense_layer_count();
  return d;
}

namespace {
// moe_routing_error's rules for the routing groups (ModelSpec::router_groups), on a MoE model.
MoeRoutingError router_group_error(const ModelSpec& m) {
  using Field = MoeRoutingError::Field;
  const int64_t groups = m.router_groups, chosen = m.router_group_top_k;
  if (groups == 0 && chosen == 0) return {};
  if (groups == 0) {
    return {Field::router_group_top_k, fmt::format("{} needs router_groups (the groups it chooses from)", chosen)};
  }
  if (groups < 2 || groups > m.experts || m.experts % groups != 0) {
    return {Field::router_groups, fmt::format("{} does not divide the {} experts into 2 or more equal groups", groups,
                                              m.experts)};
  }
  if (chosen == 0) {
    return {Field::router_group_top_k, fmt::format("{} groups need router_group_top_k, the number each token chooses",
                                                   groups)};
  }
  if (chosen < 1 || chosen > groups) {
    return {Field::router_group_top_k, fmt::format("{} is outside 1 .. router_groups = {} (the groups each token "
                                                   "chooses)", chosen, groups)};
  }
  if (chosen * (m.experts / groups) < m.top_k) {
    return {Field::router_group_top_k, fmt::format("{} groups of {} experts hold fewer than top_k = {} experts",
                                                   chosen, m.experts / groups, m.top_k)};
  }
  return {};
}
}  // namespace

MoeRoutingError moe_routing_error(const ModelSpec& m) {
  using Field = MoeRoutingError::Field;
  if (m.capacity_factor == 0 && m.imbalance == 1.0 && m.router_groups == 0 && m.router_group_top_k == 0) return {};
  if (!m.is_moe()) return {Field::not_moe, "MoE routing settings are for MoE models; this one has experts 1"};
  const double most = static_cast<double>(m.experts) / static_cast<double>(m.top_k);
  if (m.capacity_factor != 0 && !(m.capacity_factor >= 1.0 && m.capacity_factor <= most)) {
    return {Field::capacity_factor,
            fmt::format("capacity factor {} is outside 1 .. experts / top_k = {:g}", m.capacity_factor, most)};
  }
  if (!(m.imbalance >= 1.0 && m.imbalance <= most)) {
    return {Field::imbalance, fmt::format("imbalance {} is outside 1 .. experts / top_k = {:g} (the most-loaded "
                                          "expert's tokens over the mean)",
                                          m.imbalance, most)};
  }
  if (m.capacity_factor != 0 && m.imbalance != 1.0) {
    return {Field::imbalance,
            "imbalance is for dropless routing: with a capacity factor every expert is padded to its capacity"};
  }
  return router_group_error(m);
}

SlidingWindowError sliding_window_error(const ModelSpec& m) {
  using Field = SlidingWindowError::Field;
  const int64_t p = m.sliding_window_pattern;
  if (p > 0 && m.sliding_window <= 0) {
    return {Field::pattern, fmt::format("{} needs a window (sliding_window, its size in tokens)", p)};
  }
  if (p == 1) {
    return {Field::pattern, "1 makes every layer full attention; use 0 (every layer windowed), P >= 2 (every P-th "
                            "layer full) or no window"};
  }
  if (p > m.layers && m.layers > 0) {
    return {Field::pattern, fmt::format("{} is above the model's {} layers (no layer would attend in full); use 0 "
                                        "(every layer windowed) or P <= layers",
                                        p, m.layers)};
  }
  if (m.sliding_window > 0 && !m.causal) {
    return {Field::window, "a window over a model without the causal mask (a two-sided band) is not modelled"};
  }
  return {};
}

ModelSpec attention_layer_model(const ModelSpec& m, bool full) {
  ModelSpec a = m;
  a.sliding_window_pattern = 0;
  if (full) a.sliding_window = 0;
  return a;
}

Plan attention_layer_plan(const Plan& plan, bool full) {
  Plan a = plan;
  a.model = attention_layer_model(plan.model, full);
  return a;
}

Plan dense_layer_plan(const Plan& plan) {
  Plan d = plan;
  d.model = dense_layer_model(plan.model);
  d.parallel.ep = 1;
  d.parallel.etp = 0;
  return d;
}

double GemmEfficiency::attention_efficiency(AttentionKernel kernel, bool backward) const {
  const double fused_backward = attention_backward_fraction > 0 ? attention_backward_fraction : attention_fraction;
  if (kernel == AttentionKernel::flash2 && flash2_fraction > 0) {
    if (!backward) return flash2_fraction;
    return flash2_backward_fraction > 0 ? flash2_backward_fraction : flash2_fraction;
  }
  return backward ? fused_backward : attention_fraction;
}

DType Plan::gemm_dtype() const {
  switch (training.precision) {
    case Precision::bf16:
      return DType::bf16;
    case Precision::fp16:
      return DType::fp16;
    case Precision::fp8:
      return DType::fp8;
  }
  return DType::bf16;
}

DType Plan::activation_dtype() const { return training.precision == Precision::fp16 ? DType::fp16 : DType::bf16; }

}  // namespace parplan
