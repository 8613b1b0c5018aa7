// Published-run validation: the free-text mapping rules (ffn type, precision, recompute, GPU, links, attention).
#include <algorithm>
#include <cctype>
#include <fmt/core.h>
#include <string>

#include "planner/spec/config.hpp"
#include "planner/spec/error.hpp"
#include "planner/validation/validation.hpp"
#include "planner/validation/text_match.hpp"

#include "planner/spec/units.hpp"

namespace parplan {
namespace {
using validation_text::denies;
using validation_text::has;
using validation_text::states;

// The first stand-alone 20xx year in the text, 0 if none.
int first_year(std::string_view text) {
  for (size_t i = 0; i + 4 <= text.size(); ++i) {
    auto digit = [&](size_t k) { return std::isdigit(static_cast<unsigned char>(text[k])) != 0; };
    if (text.compare(i, 2, "20") != 0 || !digit(i + 2) || !digit(i + 3)) continue;
    if ((i > 0 && std::isalnum(static_cast<unsigned char>(text[i - 1]))) ||
        (i + 4 < text.size() && std::isalnum(static_cast<unsigned char>(text[i + 4]))))
      continue;
    // A count, not a year: "on 2048 GPUs", "2016 MI300X", "2048 x H800" (a count word or a GPU after it).
    std::string after(text.substr(i + 4, std::min<size_t>(16, text.size() - i - 4)));
    for (char& c : after) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t w = after.find_first_not_of(" ");
    if (w != std::string::npos) {
      const std::string_view next = std::string_view(after).substr(w);
      bool count = next.starts_with("x ") || next.starts_with("\xc3\x97");
      for (std::string_view unit : {"gpu", "node", "device", "accelerator", "chip", "h100", "h800", "h200", "a100",
                                    "b200", "b300", "gb200", "gb300", "mi300", "mi325", "mi355", "rank", "way"}) {
        count = count || next.starts_with(unit);
      }
      if (count) continue;
    }
    return (text[i + 2] - '0') * 10 + (text[i + 3] - '0') + 2000;
  }
  return 0;
}

// The multiplier written just before position `pos` of a lower-cased text ("8 x 200 Gb/s", "4 x Omni-Path"): the
// digit run before an 'x' or '*', spaces allowed around it; 1 when there is none.
double multiplier_before(const std::string& t, size_t pos) {
  size_t b = pos;
  while (b > 0 && t[b - 1] == ' ') --b;
  if (b == 0 || (t[b - 1] != 'x' && t[b - 1] != '*')) return 1;
  size_t e = b - 1;
  while (e > 0 && t[e - 1] == ' ') --e;
  size_t s = e;
  while (s > 0 && std::isdigit(static_cast<unsigned char>(t[s - 1]))) --s;
  if (s == e) return 1;
  return e - s <= 9 ? std::stod(t.substr(s, e - s)) : 1e9;  // stod throws past the double range
}
}  // namespace

std::string source_key(std::string_view source) {
  // A repository path as the first word ("mosaicml/llm-foundry scripts/...") is the key on its own.
  const std::string_view first = source.substr(0, source.find(' '));
  if (first.find('/') != std::string_view::npos) return std::string(first);
  const size_t cut = std::min(source.find(','), source.find('('));
  std::string_view k = source.substr(0, cut);
  while (!k.empty() && std::isspace(static_cast<unsigned char>(k.back()))) k.remove_suffix(1);
  return k.empty() ? std::string(source) : std::string(k);
}

bool map_ffn_type(std::string_view text, FfnType& out) {
  const std::string t = ascii_lower(text);
  // Gated MLPs, three matrices: SwiGLU, GeGLU, and a SiLU / Swish written as gated ("SiLU gated MLP", "gated SiLU").
  const bool gated_silu = (has(t, "silu") || has(t, "swish")) && (has(t, "gated") || has(t, "gate"));
  // Any GLU (SwiGLU, GeGLU, ReGLU, "Swish-GLU", a bare "GLU") gates with a third matrix: the same cost.
  if (has(t, "glu") || gated_silu) {
    out = FfnType::swiglu;
    return true;
  }
  if (has(t, "gelu") || has(t, "relu") || has(t, "mlp")) {
    out = FfnType::gelu;  // two-matrix MLP; ReLU and GeLU cost the same here
    return true;
  }
  return false;
}

bool names_sub_fp8(std::string_view text) {
  const std::string t = ascii_lower(text);
  // NVFP4 (Transformer Engine's NVFP4BlockScaling), MXFP4, MXFP6, plain FP4 / FP6 / INT4 GEMMs.
  // Not followed by a digit: "fp64" names no fp6 format.
  for (std::string_view name : {"fp4", "fp6", "float4", "int4", "e2m1"}) {
    for (size_t at = t.find(name); at != std::string::npos; at = t.find(name, at + 1)) {
      const size_t end = at + name.size();
      if (end == t.size() || !std::isdigit(static_cast<unsigned char>(t[end]))) return true;
    }
  }
  return false;
}

bool map_precision(std::string_view text, Precision& out, std::string* note) {
  std::string t = ascii_lower(text);
  // PyTorch's dtype names: bfloat16 / float16 (torch.bfloat16, "bf16-mixed" already holds bf16).
  for (const auto& [from, to] : {std::pair<std::string_view, std::string_view>{"bfloat16", "bf16"}, {"float16", "fp16"}}) {
    for (size_t at = t.find(from); at != std::string::npos; at = t.find(from, at + to.size())) t.replace(at, from.size(), to);
  }
  if (has(t, "not stated") || names_sub_fp8(t)) return false;  // a 4/6-bit GEMM format is none of parplan's precisions
  const bool both = has(t, "bf16") && has(t, "fp16");  // "paper does not say FP16 vs BF16"
  if (states(t, "fp8") || states(t, "float8")) {  // "FP8", "MXFP8", torchao "Float8"; not "BF16 (FP8 disabled)"
    out = Precision::fp8;
  } else if (both || ((has(t, "16-bit") || has(t, "mixed")) && !has(t, "bf16") && !has(t, "fp16"))) {
    // "16-bit", "mixed precision" without its dtype
    out = Precision::fp16;  // rule: unspecified 16-bit mixed precision is Megatron-LM's --fp16
    if (note) *note = "16-bit precision not named: fp16 (Megatron-LM --fp16; same peak as bf16 on A100/H100)";
  } else if (has(t, "bf16")) {
    out = Precision::bf16;
  } else if (has(t, "fp16")) {
    out = Precision::fp16;
  } else {
    return false;
  }
  return true;
}

Fp8Recipe map_fp8_recipe(std::string_view text, std::vector<std::string>* notes, bool transformer_engine) {
  std::string t = ascii_lower(text);
  for (char& c : t) c = c == '_' ? '-' : c;  // "FP8_DS", "MX_FP8"
  // "MXFP8", "FP8 blockwise" / DeepSeek-V3's "1x128 / 128x128" tiles, "rowwise", "delayed"; torchao's Float8Linear
  // and "tensorwise" name its default, dynamic tensorwise scaling.
  // NVIDIA's performance tables abbreviate the Transformer Engine recipes: FP8-DS (delayed scaling), FP8-CS
  // (current scaling), FP8-MX (MXFP8).
  if (has(t, "mxfp8") || has(t, "fp8-mx") || has(t, "mx-fp8") || has(t, "fp8 mx") || has(t, "microscal")) {
    return Fp8Recipe::mxfp8;
  }
  if (has(t, "blockwise") || has(t, "block-wise") || has(t, "1x128") || has(t, "128x128") || has(t, "block scaling") ||
      has(t, "blockscaling") || has(t, "subchannel") || has(t, "sub-channel")) {
    return Fp8Recipe::blockwise;  // TE Float8BlockScaling, DeepSeek-V3's tiles (MXFP8BlockScaling is caught above)
  }
  if (has(t, "rowwise") || has(t, "row-wise")) return Fp8Recipe::rowwise;
  if (has(t, "delayed") || has(t, "fp8-ds") || has(t, "fp8 ds")) return Fp8Recipe::delayed;
  if (has(t, "fp8-cs") || has(t, "fp8 cs")) return Fp8Recipe::tensorwise;
  // Transformer Engine's Float8CurrentScaling ("current scaling"): one scale per tensor from its own amax, the
  // tensorwise recipe.
  if (has(t, "current scaling") || has(t, "currentscaling") || has(t, "current-scaling")) return Fp8Recipe::tensorwise;
  if (has(t, "tensorwise") || has(t, "tensor-wise")) return Fp8Recipe::tensorwise;
  // Unnamed: the stack's own default, Megatron-Core's --fp8-recipe delayed (Transformer Engine's DelayedScaling), or
  // torchao's dynamic tensorwise scaling.
  if (transformer_engine) {
    if (notes) notes->push_back("fp8 recipe not named: delayed (Megatron-Core / Transformer Engine's default)");
    return Fp8Recipe::delayed;
  }
  if (notes) notes->push_back("fp8 recipe not named: tensorwise (torchao's default)");
  return Fp8Recipe::tensorwise;
}

bool map_fp8_param_gather(std::string_view text) {
  const std::string t = ascii_lower(text);
  // torchao / torchtitan "float8 all-gather" ("f8 all-gather"; "bf16 all-gather" names the opposite), Megatron-Core
  // --fp8-param-gather, NeMo fp8_params.
  for (const char* name : {"float8 all-gather", "f8 all-gather", "fp8 all-gather", "fp8-param-gather", "fp8_param_gather",
                           "fp8 param gather", "fp8_params"}) {
    if (has(t, name)) return true;
  }
  return false;
}

bool denies_fp8_param_gather(std::string_view text) {
  const std::string t = ascii_lower(text);
  // torchao's "bf16 all-gather", torchtitan's "FSDP2 bf16 params", "no fp8 param gather".
  for (const char* name : {"bf16 all-gather", "bf16 params", "no fp8 param", "without fp8 param"}) {
    if (has(t, name)) return true;
  }
  return false;
}

std::optional<DType> map_adam_moments(std::string_view text) {
  const std::string t = ascii_lower(text);
  // "BF16 Adam moments" (Megatron-Core's precision-aware optimizer), "BF16 AdamW moments" (DeepSeek-V3 report).
  for (const auto& [name, d] : {std::pair<const char*, DType>{"bf16 adam moments", DType::bf16},
                                {"bf16 adamw moments", DType::bf16}, {"fp16 adam moments", DType::fp16},
                                {"fp8 adam moments", DType::fp8}}) {
    if (has(t, name)) return d;
  }
  return std::nullopt;
}

bool names_layer_ac(std::string_view text) {
  const std::string t = ascii_lower(text);
  return has(t, "layer ac") || has(t, "layer-wise ac") || has(t, "layerwise ac") || has(t, "ac_freq");
}

namespace {
// The Megatron-Core recompute modules a prose text names as recomputed ("RMSNorm and MLA up-projection recomputed
// in backward", the DeepSeek-V3 report Sec. 3.2.3): none unless it says "recompute".
RecomputeModules prose_recompute_modules(const std::string& t) {
  RecomputeModules out;
  out.bits = 0;
  if (!has(t, "recompute")) return out;
  if (has(t, "rmsnorm") || has(t, "layernorm") || has(t, "layer norm")) out.add(RecomputeModule::layernorm);
  if (has(t, "up-projection") || has(t, "up projection") || has(t, "mla_up_proj")) out.add(RecomputeModule::mla_up_proj);
  if (has(t, "core attention") || has(t, "attention core") || has(t, "core_attn")) out.add(RecomputeModule::core_attn);
  return out;
}
}  // namespace

bool map_recompute(std::string_view text, Recompute& out) {
  const std::string t = ascii_lower(text);
  if (t.empty() || has(t, "partial")) return false;
  if (!has(t, "selective") && !has(t, "full") && prose_recompute_modules(t).bits != 0) {
    out = Recompute::selective;  // named modules recomputed: Megatron-Core's selective granularity
    return true;
  }
  if (names_layer_ac(t)) {
    out = Recompute::full;  // torchtitan's layer-wise selective AC: every N-th block fully checkpointed (recompute_layers)
  } else if (has(t, "per-op") || has(t, "selective op") || has(t, "'op'") || has(t, "\"op\"") || has(t, "=op") ||
             has(t, "= op") || has(t, ": op")) {
    out = Recompute::selective_op;  // torchtitan's per-op selective activation checkpointing
  } else if (states(t, "selective")) {
    out = Recompute::selective;
  } else if (states(t, "full") || states(t, "checkpoint")) {
    out = Recompute::full;  // "full", "activation checkpointing", "--checkpoint-activations"
  } else if (t.rfind("none", 0) == 0 || t.rfind("no ", 0) == 0 || t == "no" || t == "off" || t == "disabled" || t == "n/a" ||
             t.ends_with(": none") || t.ends_with(": off") ||
             denies(t, "recompute") || denies(t, "checkpoint") || denies(t, "full")) {
    out = Recompute::none;  // "no activation checkpointing", "activation checkpointing: none", "recompute disabled"
  } else {
    return false;
  }
  return true;
}

namespace {
constexpr std::string_view kFineGrainedOffload = "fine-grained activation offloading";
constexpr std::string_view kOptimizerOffloadNames[] = {"optimizer-state offload", "optimizer state offload",
                                                       "optimizer-cpu-offload", "optimizer cpu offload",
                                                       "offload_optimizer"};

// `text` without the optimizer offload phrase (found in `lower`) and the "; " around it: map_optimizer_offload's.
std::string without_optimizer_offload(std::string text, const std::string& lower) {
  for (std::string_view name : kOptimizerOffloadNames) {
    size_t at = lower.find(name);
    if (at == std::string::npos) continue;
    size_t end = at + name.size();
    while (at > 0 && (text[at - 1] == ' ' || text[at - 1] == ';')) --at;
    if (at == 0) {
      while (end < text.size() && (text[end] == ';' || text[end] == ' ')) ++end;
    }
    return text.erase(at, end - at);
  }
  return text;
}

// `text` without its "fine-grained activation offloading (...)" clause and the "; " after it (found in `lower`, the
// text in lowercase): the clause is map_offload_modules()'s, not a recompute module list nor a note of what is not
// modelled.
std::string without_offload_clause(std::string text, const std::string& lower) {
  text = without_optimizer_offload(std::move(text), lower);
  const std::string low = without_optimizer_offload(lower, lower);
  const size_t at = low.find(kFineGrainedOffload);
  if (at == std::string::npos) return text;
  size_t end = low.find(')', at);
  end = end == std::string::npos ? low.size() : end + 1;
  while (end < low.size() && (low[end] == ';' || low[end] == ' ')) ++end;
  text.erase(at, end - at);
  while (!text.empty() && (text.back() == ' ' || text.back() == ';')) text.pop_back();
  return text;
}
}  // namespace

OffloadModules map_offload_modules(std::string_view text, std::vector<std::string>* notes) {
  const std::string t = ascii_lower(text);
  OffloadModules out;
  const size_t at = t.find(kFineGrainedOffload);
  if (at == std::string::npos) return out;
  const size_t open = t.find('(', at), close = open == std::string::npos ? open : t.find(')', open);
  std::string unpriced;
  for (size_t i = open == std::string::npos ? t.size() : open + 1; i < std::min(close, t.size());) {
    const size_t j = std::min(t.find_first_not_of("abcdefghijklmnopqrstuvwxyz_0123456789", i), close);
    const std::string word = t.substr(i, j - i);
    OffloadModule m{};
    if (parse_offload_module(word, m)) {
      out.add(m);
    } else if (!word.empty()) {
      unpriced += (unpriced.empty() ? "" : " ") + word;
    }
    i = word.empty() ? j + 1 : j;
  }
  if (notes != nullptr) {
    notes->push_back(out.empty() ? "fine-grained activation offloading: no module parplan prices listed"
                                 : fmt::format("offload modules {} (fine-grained activation offloading)", to_string(out)));
    if (!unpriced.empty()) {
      notes->push_back(fmt::format("offload modules: '{}' not modelled (priced without it)", excerpt(unpriced)));
    }
  }
  return out;
}

bool names_torchtitan_stack(std::string_view text) { return has(text, "torchtitan") || has(text, "pytorch/ao"); }

bool map_optimizer_offload(std::string_view text) {
  const std::string t = ascii_lower(text);
  for (std::string_view name : kOptimizerOffloadNames) {
    if (has(t, name)) return true;
  }
  return false;
}

RecomputeModules map_recompute_modules(std::string_view text, std::vector<std::string>* notes) {
  const std::string lower = ascii_lower(text);
  const std::string kept = without_offload_clause(std::string(text), lower);
  const std::string t = without_offload_clause(lower, lower);
  const size_t colon = t.find("selective:");
  RecomputeModules out;
  if (colon == std::string::npos) {
    if (const RecomputeModules prose = prose_recompute_modules(t); prose.bits != 0 && !has(t, "selective")) {
      if (notes != nullptr) notes->push_back(fmt::format("recompute modules {} (named in the text)", to_string(prose)));
      return prose;
    }
    return out;
  }
  const size_t begin = colon + std::string_view("selective:").size(), end = std::min(t.find(';', begin), t.size());
  RecomputeModules listed;
  listed.bits = 0;
  std::string ignored;
  for (size_t i = begin; i < end;) {  // the words of the list: letters and '_'
    const size_t j = std::min(t.find_first_not_of("abcdefghijklmnopqrstuvwxyz_", i), end);
    const std::string word = t.substr(i, j - i);
    RecomputeModule m{};
    if (word == "norm") {
      listed.add(RecomputeModule::layernorm);
    } else if (word == "act") {
      listed.add(RecomputeModule::moe_act);
    } else if (word == "shared_expert") {
      listed.add(RecomputeModule::shared_experts);
    } else if (parse_recompute_module(word, m)) {
      listed.add(m);
    } else if (!word.empty()) {
      ignored += (ignored.empty() ? "" : " ") + word;
    }
    i = word.empty() ? j + 1 : j;
  }
  if (listed.bits != 0) out = listed;
  if (notes != nullptr) {
    notes->push_back(fmt::format("recompute modules {}{}", to_string(out), listed.bits != 0 ? "" : " (none listed: Megatron-Core's default)"));
    if (!ignored.empty()) notes->push_back(fmt::format("recompute: '{}' names no recompute module, ignored", excerpt(ignored)));
    const size_t rest = t.find_first_not_of(' ', std::min(end + 1, t.size()));
    if (rest != std::string::npos) {
      notes->push_back(fmt::format("recompute: '{}' not modelled (priced without it)", excerpt(std::string_view(kept).substr(rest))));
    }
  }
  return out;
}

namespace {
// Whether lower-case `t` gives a power in watts: a number followed by "w" (optionally after a space) and no further
// letter ("500 W", "700w"; not "400 Gb/s" nor "8 way").
// The first wattage in `t` ("500 W", "750w"); 0 when none.
int64_t stated_watts(const std::string& t) {
  for (size_t i = 0; i < t.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(t[i]))) continue;
    size_t j = i;
    int64_t v = 0;
    while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) v = std::min<int64_t>(v * 10 + (t[j++] - '0'), 1'000'000);
    if (j < t.size() && t[j] == ' ') ++j;
    if (j < t.size() && t[j] == 'w' && (j + 1 == t.size() || !std::isalpha(static_cast<unsigned char>(t[j + 1])))) return v;
    i = j;
  }
  return 0;
}
bool states_watts(const std::string& t) { return stated_watts(t) > 0; }

// The board power the datasheet peaks of the SXM profiles hold (hardware-reference.json): a power limit at or above
// it leaves the profile's clocks; below it, no profile describes the GPU. 0: not one of these.
int64_t datasheet_watts(const std::string& t) {
  if (has(t, "h100") || has(t, "h200") || has(t, "h800")) return 700;
  if (has(t, "b300")) return 1100;
  if (has(t, "b200")) return 1000;
  if (has(t, "mi300x")) return 750;
  return 0;
}
}  // namespace

std::string map_gpu(std::string_view text, const ProfileSet& profiles, std::string* why) {
  auto known = [&](std::string_view name) -> std::string {
    const GpuSpec* g = profiles.find_gpu(name);
    return g ? g->name : "";
  };
  auto unknown = [&](std::string reason) -> std::string {
    if (why) *why = std::move(reason);
    return "";
  };
  if (text.empty()) return unknown("GPU not stated");
  if (std::string exact = known(text); !exact.empty()) return exact;  // a profile name or alias
  const std::string t = ascii_lower(text);
  // Memory size written in the text ("80GB", "80 GB", "40G").
  int64_t gb = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(t[i])) || (i > 0 && std::isdigit(static_cast<unsigned char>(t[i - 1])))) continue;
    size_t j = i;
    int64_t v = 0;
    while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) v = std::min<int64_t>(v * 10 + (t[j++] - '0'), 1'000'000'000);
    while (j < t.size() && t[j] == ' ') ++j;
    if (t.compare(j, 1, "g") == 0 && v >= 16 && v <= 1024) gb = v;
  }
  // A GPU run under a power limit the row does not give in watts ("power limited; limit not stated") runs at clocks,
  // and so at a peak, that nothing states: no profile describes it. A limit with its wattage ("500 W power limit",
  // the Grand Teton H100s) is a known variant.
  const bool power_limited =
      has(t, "power limit") || has(t, "power-limit") || has(t, "power cap") || has(t, "power-cap");
  if (power_limited && !states_watts(t)) {
    return unknown(fmt::format("GPU '{}' runs under a power limit it does not state in watts (its clocks and peak are "
                               "unknown)", excerpt(text)));
  }
  // Grace-Hopper superchips (GH200: an H100-class GPU with 96 or 144 GB of HBM3/HBM3e and its own power budget) have
  // no profile; "gh200" also holds "h200".
  if (has(t, "gh200")) return unknown(fmt::format("no profile for '{}' (GH200 Grace Hopper)", excerpt(text)));
  // Grace-Blackwell superchips (NVL72 racks: "GB200 NVL72" holds "b200" and "nvl"), checked before both.
  const bool grace = has(t, "gb200") || has(t, "gb300");
  // The 96 GB HBM2e, 500 W H100 SXM (Meta Grand Teton, torchtitan's H100s): its texts name SXM and HBM2e, and NVL
  // only as the bound of its unpublished peak ("between SXM and NVL").
  const bool h100_hbm2e = has(t, "h100") && has(t, "sxm") && has(t, "hbm2e");
  // "NVLink" names a link, not the NVL variant; nor does the HGX boards' NVLink domain size after a Blackwell name
  // ("HGX B200 NVL8", "HGX B300 NVL16": the SXM boards, not a PCIe card).
  const bool blackwell_board = has(t, "b200") || has(t, "b300");
  auto board_domain = [&](size_t at) {
    return blackwell_board && (t.compare(at, 4, "nvl8") == 0 || t.compare(at, 5, "nvl16") == 0);
  };
  size_t nvl = t.find("nvl");
  while (nvl != std::string::npos && (t.compare(nvl, 6, "nvlink") == 0 || board_domain(nvl))) nvl = t.find("nvl", nvl + 1);
  if (!grace && !h100_hbm2e && (has(t, "pcie") || nvl != std::string::npos)) {
    return unknown(fmt::format("no profile for '{}' (PCIe/NVL variant)", excerpt(text)));
  }
  // A power limit in watts names a known variant only where a profile describes it: the 500 W H100 SXM 96 GB HBM2e,
  // or the SXM board's own power.
  if (power_limited && !h100_hbm2e && !grace && stated_watts(t) < datasheet_watts(t)) {
    return unknown(fmt::format("GPU '{}' runs under a power limit no profile describes (its clocks and peak are "
                               "unknown)", excerpt(text)));
  }
  // An H100 of 94 or 96 GB other than that HBM2e SXM (H100 NVL's 94 GB, the 96 GB HBM3 SKUs) has no profile.
  if (has(t, "h100") && !h100_hbm2e && (gb == 94 || gb == 96)) {
    return unknown(fmt::format("no profile for '{}' (an H100 with {} GB other than the 500 W SXM HBM2e)", excerpt(text), gb));
  }
  std::string name;
  if (grace) {
    name = has(t, "gb200") ? "GB200" : "GB300";
  } else if (h100_hbm2e) {
    name = "H100-SXM5-96GB-HBM2e";
  } else if (has(t, "h100")) {
    name = "H100-SXM5-80GB";  // every other H100 training system in the schema is SXM 80 GB
  } else if (has(t, "h200")) {
    name = "H200-141GB";
  } else if (has(t, "b200")) {
    name = "B200";
  } else if (has(t, "b300")) {
    name = "B300";
  } else if (has(t, "h800")) {
    name = "H800";
  } else if (has(t, "mi300x")) {
    name = "MI300X";
  } else if (has(t, "a100")) {
    if (gb == 40) {
      name = "A100-SXM4-40GB";
    } else if (gb == 80) {
      name = "A100-SXM4-80GB";
    } else {
      return unknown(fmt::format("GPU '{}' does not say 40 or 80 GB", excerpt(text)));
    }
  } else {
    return unknown(fmt::format("unknown GPU '{}'", excerpt(text)));
  }
  std::string found = known(name);
  if (found.empty()) return unknown(fmt::format("GPU '{}' maps to {}, which has no profile", excerpt(text), name));
  return found;
}

namespace {
bool clause_mark(char c) { return c == ',' || c == ';' || c == '(' || c == ')' || c == '='; }

// A count written before a figure in its clause, with words between ("8x ConnectX-7 400 Gb/s"): the digits of the
// nearest "N x" / "Nx " in the 24 characters before `pos`; 1 when none.
double count_in_clause_before(const std::string& t, size_t pos) {
  const size_t from = pos > 24 ? pos - 24 : 0;
  for (size_t i = pos; i-- > from;) {
    if (clause_mark(t[i])) return 1;
    if (t[i] != 'x' || i == 0) continue;
    size_t e = i;
    while (e > from && t[e - 1] == ' ') --e;
    size_t s = e;
    while (s > from && std::isdigit(static_cast<unsigned char>(t[s - 1]))) --s;
    const bool word_start = s == 0 || t[s - 1] == ' ';
    const bool word_end = i + 1 == t.size() || t[i + 1] == ' ';
    if (s < e && e - s <= 4 && word_start && word_end) return std::stod(t.substr(s, e - s));
  }
  return 1;
}

// A count written after a figure's unit in its clause ("400 Gb/s x 8"): 1 when none.
double count_after(const std::string& t, size_t pos) {
  size_t i = pos;
  while (i < t.size() && t[i] == ' ') ++i;
  if (i >= t.size() || t[i] != 'x') return 1;
  ++i;
  while (i < t.size() && t[i] == ' ') ++i;
  size_t e = i;
  while (e < t.size() && std::isdigit(static_cast<unsigned char>(t[e]))) ++e;
  return e > i && e - i <= 4 ? std::stod(t.substr(i, e - i)) : 1;
}

// Whether the clause after a figure's unit says the figure is per GPU ("400 Gb/s NDR per GPU", "400 Gb/s/GPU").
bool per_gpu_after(const std::string& t, size_t pos) {
  size_t e = pos;
  while (e < t.size() && !clause_mark(t[e]) && e < pos + 24) ++e;
  const std::string_view clause(t.data() + pos, e - pos);
  return has(clause, "per gpu") || has(clause, "/gpu") || has(clause, "per-gpu");
}

// Whether a figure is an NVLink bandwidth (scale-up, not the inter-node network): "NVLink 5 (1.8 TB/s per GPU)".
bool names_nvlink_near(const std::string& t, size_t start, size_t end) {
  const size_t from = start > 24 ? start - 24 : 0;
  const std::string_view around(t.data() + from, std::min(t.size(), end + 12) - from);
  return has(around, "nvlink") || has(around, "nvswitch");
}
}  // namespace

double inter_node_Bps_per_gpu(std::string_view text, int64_t gpus_per_node) {
  // Numbers followed by Gb/s or Tb/s (bits), or GB/s or TB/s (bytes: the capital B, as written); "N x M Gb/s"
  // multiplies, also with words between ("8x ConnectX-7 400 Gb/s") or after ("400 Gb/s x 8"); "per GPU" or "/GPU"
  // after the figure in its clause makes it per GPU, otherwise the figure is per node (the field is
  // inter_node_per_node). NVLink figures are not the inter-node network and are passed over. The first figure left wins.
  // The multiplication sign (U+00D7, two bytes) as " x", in the text as written (whose capital B says bytes) and in
  // its lower case, which keep the same positions.
  std::string raw(text);
  for (size_t at = raw.find("\xc3\x97"); at != std::string::npos; at = raw.find("\xc3\x97", at + 1)) raw.replace(at, 2, " x");
  const std::string t = ascii_lower(raw);
  for (size_t i = 0; i < t.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(t[i])) || (i > 0 && (std::isdigit(static_cast<unsigned char>(t[i - 1])) || t[i - 1] == '.'))) continue;
    size_t j = i;
    double v = 0;
    while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) v = v * 10 + (t[j++] - '0');
    if (j < t.size() && t[j] == '.') {
      double scale = 0.1;
      for (++j; j < t.size() && std::isdigit(static_cast<unsigned char>(t[j])); ++j, scale /= 10) v += (t[j] - '0') * scale;
    }
    size_t k = j;
    while (k < t.size() && t[k] == ' ') ++k;
    double unit = 0;
    size_t end = k + 4;
    if (t.compare(k, 4, "gb/s") == 0 || t.compare(k, 4, "gbps") == 0) unit = 1e9 / 8;
    if (t.compare(k, 4, "tb/s") == 0 || t.compare(k, 4, "tbps") == 0) unit = 1e12 / 8;
    // A port speed written as "400G" / "800G" (a G ending the word, no "B"): Gb/s, as network ports are named.
    if (unit == 0 && v >= 10 && k == j && t.compare(k, 1, "g") == 0 &&
        (k + 1 == t.size() || !std::isalpha(static_cast<unsigned char>(t[k + 1])))) {
      unit = 1e9 / 8;
      end = k + 1;
    }
    if (unit == 0) continue;
    if (end == k + 4 && raw.compare(k + 1, 3, "B/s") == 0) unit *= 8;  // "50 GB/s": bytes
    if (names_nvlink_near(t, i, end)) continue;
    const double before = multiplier_before(t, i);
    const double count = before != 1 ? before : count_in_clause_before(t, i);
    const double total = count * count_after(t, end) * v * unit;
    return per_gpu_after(t, end) ? total : total / static_cast<double>(std::max<int64_t>(1, gpus_per_node));
  }
  // No figure, but Intel Omni-Path named: every Omni-Path adapter and switch shipped runs 100 Gb/s per port
  // (the OPA 100 series; the 200 series was cancelled), so "<n> x Omni-Path" is n x 100 Gb/s per node.
  if (const size_t opa = t.find("omni-path"); opa != std::string::npos) {
    return multiplier_before(t, opa) * 100e9 / 8 / static_cast<double>(std::max<int64_t>(1, gpus_per_node));
  }
  return 0;
}

AttentionKernel map_attention(std::string_view source, std::string_view other_text, std::string* note) {
  const std::string all = ascii_lower(std::string(source) + " " + std::string(other_text));
  auto say = [&](std::string s) {
    if (note) *note = std::move(s);
  };
  if (has(all, "unfused")) {
    say("attention: unfused (stated)");
    return AttentionKernel::unfused;
  }
  if (has(all, "flash")) {
    say("attention: flash (stated)");
    return AttentionKernel::flash;
  }
  // torchtitan (and the torchao benchmarks run through it) call torch.nn.functional.scaled_dot_product_attention,
  // whose default backend on Ampere and Hopper is the flash backend, FlashAttention-2 (docs/cost-model.md).
  if (names_torchtitan_stack(all)) {
    say("attention: flash2 (torchtitan: PyTorch SDPA's flash backend)");
    return AttentionKernel::flash2;
  }
  // The Zero Bubble rows' stack, sail-sg/zero-bubble-pipeline-parallelism (Qi et al. 2023), is a 2023 Megatron-LM
  // fork: Megatron-LM's GPT model of that year runs FlashAttention only under --use-flash-attn (a store_true flag of
  // megatron/arguments.py, off by default), otherwise its CoreAttention (QK^T, fused scale-mask-softmax, dropout),
  // and the paper does not state the flag. Those rows' measured memory grows per microbatch in flight by Korthikanti
  // et al.'s unfused sbh(34 + 5as/h) per layer, not by flash's 34 sbh (docs/accuracy.md).
  if (has(all, "zero-bubble-pipeline-parallelism")) {
    say("attention: unfused (sail-sg/zero-bubble-pipeline-parallelism: Megatron-LM 2023 without --use-flash-attn)");
    return AttentionKernel::unfused;
  }
  // The first 20xx year in the source text: FlashAttention (2022-05) entered Megatron-LM and the other frameworks
  // in 2023; the 2021-2022 publications ran the unfused (softmax-fused) attention path.
  if (const int year = first_year(source); year > 0) {
    if (year <= 2022) {
      say(fmt::format("attention: unfused (source year {} <= 2022)", year));
      return AttentionKernel::unfused;
    }
    say(fmt::format("attention: flash (source year {} >= 2023)", year));
    return AttentionKernel::flash;
  }
  if (has(all, "megatron-deepspeed")) {
    say("attention: unfused (Megatron-DeepSpeed, 2021-2022 fork without flash attention)");
    return AttentionKernel::unfused;
  }
  say("attention: flash (no year or kernel stated)");
  return AttentionKernel::flash;
}

namespace {
// Whether the row ran the 2022+ Megatron-LM backward (LinearWithGradAccumulationAndAsyncCommunication): the first year
// in the source >= 2022, or no year and not Megatron-DeepSpeed. *why says which.
bool modern_backward(std::string_view source, std::string_view other_text, std::string* why) {
  if (const int year = first_year(source); year > 0) {
    *why = fmt::format("source year {}", year);
    return year >= 2022;
  }
  if (has(ascii_lower(std::string(source) + " " + std::string(other_text)), "megatron-deepspeed")) {
    *why = "Megatron-DeepSpeed, forked from the 2021 Megatron-LM";
    return false;
  }
  *why = "no year stated";
  return true;
}
// Whether the row's TP is torchtitan's DTensor TP: a torchtitan or pytorch/ao source or note.
bool runs_dtensor_tp(std::string_view source, std::string_view other_text) {
  return names_torchtitan_stack(ascii_lower(std::string(source) + " " + std::string(other_text)));
}
}  // namespace

bool map_async_tp_backward(std::string_view source, std::string_view other_text, std::string* note) {
  // Megatron-LM as Narayanan et al. 2021 describe it (Sec. 2.3, Fig. 5) all-reduces the input gradient of the
  // column-parallel GEMMs in the backward of the autograd f operator, before the next GEMM starts; the asynchronous
  // all-reduce beside the weight-gradient GEMM (--async-tensor-model-parallel-allreduce) came later, and the 2022+
  // publications run it.
  // torchtitan (and the torchao benchmarks run through it) shards with DTensor (torch.distributed.tensor.parallel):
  // each TP collective is a redistribution in the autograd graph, issued after the node that produces its input (the
  // linear's backward computes the input and the weight gradient together) and waited on by the node that reads it.
  // Nothing runs the input-gradient reduce-scatter beside the weight-gradient GEMM; that is what its async TP adds.
  std::string why;
  const bool torchtitan = runs_dtensor_tp(source, other_text);
  const bool async = !torchtitan && modern_backward(source, other_text, &why);
  if (torchtitan) why = "torchtitan: DTensor tensor parallelism, each collective an autograd node";
  if (note) *note = fmt::format("TP backward collectives: {} ({})", async ? "asynchronous" : "blocking", why);
  return async;
}

bool map_tp_collective_copies(std::string_view source, std::string_view other_text, std::string* note) {
  // torchtitan's TP shards [batch, seq, hidden] activations on dim 1 (SequenceParallel / PrepareModuleInput
  // Shard(1)); DTensor redistributes them with funcol.all_gather_tensor / reduce_scatter_tensor on that dim, which copy
  // the whole tensor (ParallelConfig::tp_collective_copies).
  const bool copies = runs_dtensor_tp(source, other_text);
  if (note && copies) {
    *note = "TP collectives: each copies the whole tensor once (torchtitan: DTensor on the sequence dim 1 of [batch, "
            "seq, hidden])";
  }
  return copies;
}

bool map_grad_accumulation_fusion(std::string_view source, std::string_view other_text, std::string* note) {
  // Megatron-LM 2021 (local DDP) adds each microbatch's weight gradient to main_grad in a hook; the fused
  // weight-gradient GEMM that accumulates in place (--gradient-accumulation-fusion) arrived with the asynchronous
  // all-reduce's autograd function in 2022. Megatron-DeepSpeed's pipeline engine with BF16Optimizer also accumulates
  // the fp32 gradients in a separate pass after every micro-step (DeepSpeed pipe/engine.py update_hp_grads).
  std::string why;
  const bool fused = modern_backward(source, other_text, &why);
  if (note) *note = fmt::format("gradient accumulation: {} ({})", fused ? "fused into the weight-gradient GEMM" : "separate pass", why);
  return fused;
}

bool map_fused_cross_entropy(std::string_view source, std::string* note) {
  // torchtitan through Dec 2024 (train.py@9dec370, the commit its Dec 2024 benchmarks name) computes the loss as
  // F.cross_entropy(pred.flatten(0, 1).float(), labels) outside torch.compile (its compile line is commented out:
  // "compiling loss function causes CUDA errors"); from 2025 it compiles the loss with the model (components/loss.py
  // build_cross_entropy_loss). Other stacks and later torchtitan keep the fused count.
  const bool eager = has(source, "torchtitan") && has(source, "2024") && !has(source, "pytorch/ao");
  if (note && eager) *note = "loss: PyTorch F.cross_entropy on fp32 logits, uncompiled (torchtitan 2024 train.py loss_fn)";
  return !eager;
}

bool map_compiled_elementwise(std::string_view source, std::string_view technique, std::string_view other_text,
                              std::string* note) {
  // Whether the element-wise ops ran compiled (fused, one pass each) or as uncompiled PyTorch (eager_elementwise.hpp).
  // A row that states it ran without torch.compile is eager; one that states torch.compile is compiled; torchtitan's
  // 2024 presets set compile = false (train_configs/*.toml [training] compile), so its 2024 rows that state nothing
  // are eager. Every other stack fuses them itself (Megatron-Core / Transformer Engine, DeepSpeed's Megatron,
  // llm-foundry's LPLayerNorm and GeLU, single kernels each) or compiles (torchtitan from 2025, torchao's benchmarks).
  const std::string t = ascii_lower(technique), all = t + " " + ascii_lower(other_text);
  const std::string why = has(t, "(eager)")                   ? "'(eager)' in the technique"
                          : has(all, "torch.compile not used") ? "'torch.compile not used'"
                          : has(all, "without torch.compile")  ? "'without torch.compile'"
                          : has(all, "compile=false")          ? "'compile=false'"
                                                               : "";
  bool compiled = why.empty();
  std::string because = why.empty() ? "" : why + " stated";
  if (compiled && !has(all, "torch.compile") && !has(all, "compile=true") && has(source, "torchtitan") &&
      has(source, "2024") && !has(source, "pytorch/ao")) {
    compiled = false;
    because = "torchtitan 2024, compile not stated: its presets' compile = false";
  }
  if (note && !compiled) *note = fmt::format("element-wise ops: uncompiled PyTorch, one kernel per op ({})", because);
  return compiled;
}

namespace {
// Whether lowercase `pn` states Transformer Engine's userbuffers TP overlap: Megatron-LM's --tp-comm-overlap, plain
// words, or NeMo's tp_comm_overlap key unless its value is false ("tp_comm_overlap: false").
bool states_tp_comm_overlap(const std::string& pn) {
  if (states(pn, "--tp-comm-overlap") || states(pn, "tp comm overlap")) return true;
  for (size_t at = pn.find("tp_comm_overlap"); at != std::string::npos; at = pn.find("tp_comm_overlap", at + 1)) {
    size_t v = at + std::string_view("tp_comm_overlap").size();
    while (v < pn.size() && (pn[v] == ':' || pn[v] == '=' || pn[v] == ' ')) ++v;
    if (pn.compare(v, 5, "false") != 0) return true;
  }
  return false;
}
}  // namespace

void map_comm_overlap(std::string_view parallel_notes, std::string_view notes, ParallelConfig& pc,
                      std::vector<std::string>* out, std::string_view technique, bool moe) {
  const std::string pn = ascii_lower(parallel_notes), all = pn + " " + ascii_lower(notes);
  auto say = [&](std::string s) {
    if (out) out->push_back(std::move(s));
  };
  // Megatron-LM's --DDP-impl local all-reduces the gradient buffer after the last backward (no bucket hooks);
  // rows that state the gradient all-reduce is not overlapped say the same.
  if (has(pn, "ddp impl=local") || has(pn, "ddp-impl local") || has(all, "all-reduce not overlapped") ||
      has(all, "no dp grad all-reduce overlap")) {
    pc.overlap_dp_comm = false;
    say("DP gradient reduction: after the backward, not overlapped (stated)");
  }
  if (pc.pp > 1 && has(all, "megatron-deepspeed")) {
    // DeepSpeed's PipelineEngine reduces the gradients after the pipeline flush (pipe/schedule.py TrainSchedule:
    // ReduceTiedGrads, ReduceGrads, OptimizerStep at the last step), so nothing overlaps them ...
    if (pc.overlap_dp_comm) {
      pc.overlap_dp_comm = false;
      say("DP gradient reduction: after the pipeline flush (Megatron-DeepSpeed PipelineEngine)");
    }
    // ... and it sends each TP rank's whole activation to the next stage (no scatter-gather).
    if (pc.tp > 1) {
      pc.p2p_scatter_gather = false;
      say("pipeline sends: the whole activation per TP rank (DeepSpeed PipelineEngine, no scatter-gather)");
    }
  }
  // DeepSpeed's ZeRO-3 fetches parameters per submodule from its module hooks (one linear at a time, the next one
  // prefetched); FSDP (PyTorch's, FairScale's) gathers the wrapped transformer block (planner/cost/zero3.hpp). "ZeRO-3"
  // is DeepSpeed's name for the stage: a row that names it and no FSDP ran DeepSpeed.
  const bool names_fsdp = has(all, "fsdp") || has(all, "fully sharded");
  if (pc.zero_stage >= 3 && !names_fsdp && (has(all, "deepspeed") || has(pn, "zero-3"))) {
    pc.zero3_gather_unit = Zero3GatherUnit::linear;
    say("ZeRO-3 gathers: one linear at a time, the next prefetched (DeepSpeed ZeRO-3 per-submodule fetch)");
  }
  // Megatron-LM's --tp-comm-overlap, NeMo's tp_comm_overlap: Transformer Engine's userbuffers overlap.
  // Async TP is a per-row technique (measured.other.technique, or the row's own notes): parallel notes shared by a
  // table's rows name it for some of them only ("async TP only in the third row").
  const std::string row = ascii_lower(technique) + " " + ascii_lower(notes);
  if (states_tp_comm_overlap(pn)) {
    pc.overlap_tp_comm = true;
    say("TP collectives: overlapped with the GEMMs (TP comm overlap stated)");
  } else if (pc.tp > 1 && (has(row, "async tp") || has(row, "asynctp") || has(row, "async-tp"))) {
    // torchtitan's async TP splits each TP GEMM into tp pieces behind symmetric-memory transfers (micropipeline_tp);
    // it is not overlap_tp_comm, which hides every collective behind the layer's GEMMs.
    if (micropipeline_tp_applies(pc, moe)) {
      pc.micropipeline_tp = true;
      say("TP collectives: micro-pipelined with their GEMMs (async TP stated)");
    } else {
      say("TP collectives: async TP stated, not modelled here (priced as blocking TP collectives)");
    }
  }
  // Megatron-Core MoE recipes name their token dispatcher ("dispatcher DeepEP", "dispatcher A2A") and the 1F1B
  // all-to-all overlap ("1F1B EP A2A overlap"): planner/cost/expert_comm.hpp.
  if (pc.ep > 1 && states(pn, "deepep")) {
    pc.moe_dispatcher = MoeDispatcher::deepep;
    say("MoE tokens: DeepEP's dispatch and combine (stated)");
  } else if (pc.ep > 1 && states(pn, "hybridep")) {
    pc.moe_dispatcher = MoeDispatcher::deepep;
    say("MoE tokens: HybridEP, priced as DeepEP's dispatch and combine (stated)");
  }
  // CUDA graphs (Transformer Engine's partial graphs of attention / router / preprocess, Megatron-Core's full-iteration
  // graph) remove host launch overhead, which parplan does not price: stated, so the row says so.
  if (has(all, "cuda graph")) say("CUDA graphs: stated, not modelled (host launch overhead is not priced)");
  if (pc.ep > 1 && states(pn, "a2a overlap")) {  // not "no EP A2A overlap", "A2A overlap disabled"
    pc.overlap_ep_comm = true;
    say("MoE all-to-alls: overlapped with another microbatch's compute (1F1B A2A overlap stated)");
  }
}

}  // namespace parplan

