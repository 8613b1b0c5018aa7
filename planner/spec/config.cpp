// Configuration validity checks and per-stage layer assignment.
#include "planner/spec/config.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>
#include <vector>

#include "planner/spec/error.hpp"

namespace parplan {

int64_t stage_layers(const Plan& plan, int64_t stage) {
  const ParallelConfig& pc = plan.parallel;
  const int64_t p = pc.pp, L = plan.model.layers;
  if (!pc.stage_layout.empty()) {
    if (stage < 0 || stage >= static_cast<int64_t>(pc.stage_layout.size())) return 0;  // validate() rejects the size
    int64_t n = 0;
    for (int64_t x : pc.stage_layout[static_cast<size_t>(stage)]) n += x;
    return n;
  }
  if (p == 1) return L;
  if (pc.split_extra_layers() > 0) {  // Megatron's accounting: (L + e + l) / p per stage, less e first and l last
    const int64_t per = (L + pc.split_extra_layers()) / p;
    return per - (stage == 0 && pc.embedding_in_pipeline_split ? 1 : 0) -
           (stage == p - 1 && pc.loss_in_pipeline_split ? 1 : 0);
  }
  const int64_t first = pc.first_stage_layers, last = pc.last_stage_layers;
  if (first == 0 && last == 0) {
    const int64_t base = L / p, rem = L % p;
    // Remainder to the middle stages first (stage 1, 2, ...), then to the last and first stages.
    if (p == 2) return base + (stage < rem ? 1 : 0);
    int64_t order;  // position of `stage` in the order stages receive an extra layer
    if (stage == 0) {
      order = p - 1;
    } else if (stage == p - 1) {
      order = p - 2;
    } else {
      order = stage - 1;
    }
    return base + (order < rem ? 1 : 0);
  }
  const int64_t f = first > 0 ? first : -1, l = last > 0 ? last : -1;
  const int64_t fixed = (f > 0 ? f : 0) + (l > 0 ? l : 0);
  const int64_t free_stages = p - (f > 0 ? 1 : 0) - (l > 0 ? 1 : 0);
  if (stage == 0 && f > 0) return f;
  if (stage == p - 1 && l > 0) return l;
  if (free_stages <= 0) return 0;
  const int64_t rest = L - fixed;
  // Remainder to the middle stages first, then to a free last stage, then to a free first stage (as above: the
  // first and last stages carry the embedding and the output layer, stage 0 also the most in-flight microbatches).
  const int64_t middles = std::max<int64_t>(0, p - 2);
  int64_t order;  // position of `stage` among the free stages in the order they receive an extra layer
  if (stage == 0) {
    order = middles + (l > 0 ? 0 : 1);
  } else if (stage == p - 1) {
    order = middles;
  } else {
    order = stage - 1;
  }
  return rest / free_stages + (order < rest % free_stages ? 1 : 0);
}

std::vector<std::vector<int64_t>> parse_stage_layout(std::string_view text, std::string_view what) {
  std::vector<std::vector<int64_t>> out(1);
  const char* at = text.data();
  const char* const end = text.data() + text.size();
  while (true) {
    int64_t n = -1;
    const auto [next, ec] = std::from_chars(at, end, n);
    if (ec != std::errc() || n < 0 || n > 100'000'000 || out.size() > 1'000'000 || out.back().size() >= 1024) {
      throw InputError(fmt::format("{}: '{}' is not a list of layer counts per stage (e.g. 3,4,4,3) or per chunk "
                                   "(e.g. 0/1/1,1/1/1,1/1/0)",
                                   what, text.substr(0, 80)));
    }
    out.back().push_back(n);
    at = next;
    if (at == end) return out;
    if (*at == ',') {
      out.emplace_back();
    } else if (*at != '/') {
      throw InputError(fmt::format("{}: '{}': counts are separated by ',' (stages) and '/' (chunks)", what,
                                   text.substr(0, 80)));
    }
    ++at;
  }
}

namespace {
// Megatron's repeats expanded: "(...)*N" and "X*N" (a single letter), innermost group first, with a cap on the size.
std::string expand_layout_repeats(std::string s, std::string_view what) {
  auto fail = [&](std::string_view why) {
    throw InputError(fmt::format("{}: '{}': {}", what, excerpt(s), why));
  };
  for (int guard = 0;; ++guard) {
    const size_t star = s.find('*');
    if (star == std::string::npos) return s;
    if (guard > 256 || star == 0) fail("a '*' repeats a letter or a (group)");
    size_t digits = star + 1;
    while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
    int64_t n = -1;
    std::from_chars(s.data() + star + 1, s.data() + digits, n);
    if (digits == star + 1 || n < 0 || n > 100'000) fail("a '*' takes a count from 0 to 100000");
    size_t begin = star - 1;
    if (s[star - 1] == ')') {
      const size_t open = s.rfind('(', star - 1);
      if (open == std::string::npos) fail("a ')' without its '('");
      begin = open;
    }
    const std::string unit = s[star - 1] == ')' ? s.substr(begin + 1, star - 2 - begin) : s.substr(begin, 1);
    if (unit.size() * static_cast<size_t>(n) + s.size() > 1'000'000) fail("the layout expands past a million letters");
    std::string repeated;
    for (int64_t i = 0; i < n; ++i) repeated += unit;
    s = s.substr(0, begin) + repeated + s.substr(digits);
  }
}
}  // namespace

std::vector<std::vector<int64_t>> parse_megatron_layout(std::string_view text, int64_t pp, std::string_view what) {
  // Layouts are a few dozen characters; the cap bounds the expansion's work (each repeat rewrites the string).
  if (text.size() > 4096 || std::count(text.begin(), text.end(), '*') > 256) {
    throw InputError(fmt::format("{}: '{}': longer than 4096 characters or 256 repeats", what, excerpt(text)));
  }
  std::string compact;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) compact += c;
  }
  const std::string s = expand_layout_repeats(compact, what);
  std::vector<std::string> stages(1);
  for (char c : s) {
    if (c == '|') {
      stages.emplace_back();
    } else if (c == 'E' || c == 't' || c == 'm' || c == 'L') {
      stages.back() += c;
    } else {
      throw InputError(fmt::format("{}: '{}': '{}' is not E, t, m, L, '|' or a repeat", what, excerpt(text),
                                   std::string(1, c)));
    }
  }
  const int64_t V = static_cast<int64_t>(stages.size());
  if (pp < 1 || V % pp != 0) {
    throw InputError(fmt::format("{}: '{}': {} virtual stages do not split over pp {}", what, excerpt(text), V, pp));
  }
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(pp), std::vector<int64_t>(static_cast<size_t>(V / pp), 0));
  for (int64_t v = 0; v < V; ++v) {
    const std::string& st = stages[static_cast<size_t>(v)];
    for (char c : st) {
      if ((c == 'E' && v != 0) || ((c == 'm' || c == 'L') && v != V - 1)) {
        throw InputError(fmt::format("{}: '{}': {} in virtual stage {} (parplan places the embedding in the first and "
                                     "the MTP and loss in the last)",
                                     what, excerpt(text), std::string(1, c), v));
      }
    }
    out[static_cast<size_t>(v % pp)][static_cast<size_t>(v / pp)] = std::count(st.begin(), st.end(), 't');
  }
  return out;
}

std::string format_stage_layout(const std::vector<std::vector<int64_t>>& layout) {
  std::string out;
  for (size_t i = 0; i < layout.size(); ++i) {
    if (i > 0) out += ',';
    for (size_t c = 0; c < layout[i].size(); ++c) out += fmt::format("{}{}", c > 0 ? "/" : "", layout[i][c]);
  }
  return out;
}

int64_t chunk_layers(const Plan& plan, int64_t stage, int64_t chunk) {
  const ParallelConfig& pc = plan.parallel;
  const int64_t v = pc.chunks_per_stage();
  if (stage >= 0 && stage < static_cast<int64_t>(pc.stage_layout.size())) {
    const std::vector<int64_t>& chunks = pc.stage_layout[static_cast<size_t>(stage)];
    if (static_cast<int64_t>(chunks.size()) == v && v > 1) return chunk < v ? chunks[static_cast<size_t>(chunk)] : 0;
  }
  const int64_t n = stage_layers(plan, stage);
  return chunk < v - 1 ? n / v : n - (v - 1) * (n / v);
}

bool uneven_chunks(const Plan& plan, int64_t stage) {
  const ParallelConfig& pc = plan.parallel;
  const int64_t v = pc.chunks_per_stage();
  if (v < 2 || stage < 0 || stage >= static_cast<int64_t>(pc.stage_layout.size()) ||
      static_cast<int64_t>(pc.stage_layout[static_cast<size_t>(stage)].size()) != v) {
    return false;  // derived chunks: priced at their average (as the closed form's stage times)
  }
  for (int64_t c = 1; c < v; ++c) {
    if (chunk_layers(plan, stage, c) != chunk_layers(plan, stage, 0)) return true;
  }
  return false;
}

namespace {
// The model index of chunk `chunk` of stage `stage`'s first layer. Model order: chunk 0 of stages 0 .. p-1, then
// chunk 1 of each (ZB-V's V: of stages p-1 .. 0), ...
int64_t chunk_start(const Plan& plan, int64_t stage, int64_t chunk) {
  const int64_t p = plan.parallel.pp, v = plan.parallel.chunks_per_stage();
  const bool v_shape = v_shaped(plan.parallel.schedule);
  int64_t start = 0;
  for (int64_t c = 0; c < v; ++c) {
    for (int64_t k = 0; k < p; ++k) {
      const int64_t j = v_shape && c % 2 == 1 ? p - 1 - k : k;
      if (j == stage && c == chunk) return start;
      start += chunk_layers(plan, j, c);
    }
  }
  return start;
}
}  // namespace

int64_t chunk_dense_layers(const Plan& plan, int64_t stage, int64_t chunk) {
  const ModelSpec& m = plan.model;
  if (!m.has_dense_layers()) return 0;
  // The chunk's dense layers are those of its range of the model's layers (the leading ones, then the interleaved
  // ones: ModelSpec::dense_layers_before).
  const int64_t start = chunk_start(plan, stage, chunk);
  return m.dense_layers_before(start + chunk_layers(plan, stage, chunk)) - m.dense_layers_before(start);
}

int64_t chunk_recomputed_layers(const Plan& plan, int64_t stage, int64_t chunk) {
  const ParallelConfig& pc = plan.parallel;
  if (pc.recompute != Recompute::full) return 0;
  const int64_t n = chunk_layers(plan, stage, chunk);
  return pc.recompute_layers > 0 ? std::min(pc.recompute_layers, n) : n;
}

namespace {
// The full-attention layers of model layers start .. start + n - 1 (ModelSpec::layer_full_attention), and of those a
// MoE model's dense ones (ModelSpec::dense_layers_before; none in a dense model, whose every layer is priced as
// LayerCosts::layer or full, as stage_dense_layers counts none); zeros unless the model mixes windowed and full
// attention.
FullAttentionLayers full_attention_in(const ModelSpec& m, int64_t start, int64_t n) {
  FullAttentionLayers f;
  if (!m.mixes_attention()) return f;
  f.layers = m.full_attention_layers_before(start + n) - m.full_attention_layers_before(start);
  if (!m.has_dense_layers()) return f;
  for (int64_t i = start; i < start + n; ++i) {
    if (m.layer_full_attention(i)) f.dense += m.dense_layers_before(i + 1) - m.dense_layers_before(i);
  }
  return f;
}
}  // namespace

RecomputedLayers chunk_recomputed(const Plan& plan, int64_t stage, int64_t chunk) {
  RecomputedLayers r;
  r.layers = chunk_recomputed_layers(plan, stage, chunk);
  const ModelSpec& m = plan.model;
  if ((m.has_dense_layers() || m.mixes_attention()) && r.layers > 0) {  // the chunk's first layers, in model order
    const int64_t start = chunk_start(plan, stage, chunk);
    if (m.has_dense_layers()) r.dense = m.dense_layers_before(start + r.layers) - m.dense_layers_before(start);
    r.full = full_attention_in(m, start, r.layers);
  }
  return r;
}

FullAttentionLayers stage_full_attention_layers(const Plan& plan, int64_t stage) {
  FullAttentionLayers f;
  if (!plan.model.mixes_attention()) return f;
  for (int64_t c = 0; c < plan.parallel.chunks_per_stage(); ++c) {
    const FullAttentionLayers k = full_attention_in(plan.model, chunk_start(plan, stage, c), chunk_layers(plan, stage, c));
    f.layers += k.layers;
    f.dense += k.dense;
  }
  return f;
}

int64_t every_nth_block_layers(const Plan& plan, int64_t n) { return n > 0 ? chunk_layers(plan, 0, 0) / n : 0; }

RecomputedLayers stage_recomputed_layers(const Plan& plan, int64_t stage) {
  RecomputedLayers r;
  for (int64_t c = 0; c < plan.parallel.chunks_per_stage(); ++c) {
    const RecomputedLayers k = chunk_recomputed(plan, stage, c);
    r.layers += k.layers;
    r.dense += k.dense;
    r.full.layers += k.full.layers;
    r.full.dense += k.full.dense;
  }
  return r;
}

int64_t stage_dense_layers(const Plan& plan, int64_t stage) {
  if (!plan.model.has_dense_layers()) return 0;
  int64_t held = 0;
  for (int64_t c = 0; c < plan.parallel.chunks_per_stage(); ++c) held += chunk_dense_layers(plan, stage, c);
  return held;
}

bool stage_layers_divisible(const Plan& plan, int64_t v) {
  const ParallelConfig& pc = plan.parallel;
  if (v <= 0) return false;
  if (!pc.stage_layout.empty()) {  // a stage given by its chunks is divided; one given by its count must divide by v
    for (const std::vector<int64_t>& st : pc.stage_layout) {
      int64_t n = 0;
      for (int64_t x : st) n += x;
      // (a stage of no layers: stage_layout_valid() decides)
      if (static_cast<int64_t>(st.size()) != v && (n <= 0 || n % v != 0)) return false;
    }
    return true;
  }
  // Megatron's accounting splits L + e + l layers into pp x v equal chunks; the embedding and the loss take a
  // layer's place in the first and the last chunk.
  if (pc.split_extra_layers() > 0) return (plan.model.layers + pc.split_extra_layers()) % (pc.pp * v) == 0;
  if (pc.first_stage_layers == 0 && pc.last_stage_layers == 0 && plan.model.layers % pc.pp == 0) {
    return plan.model.layers / pc.pp % v == 0;  // an even split: one layer count
  }
  for (int64_t i = 0; i < pc.pp; ++i) {
    const int64_t n = stage_layers(plan, i);
    if (n <= 0 || n % v != 0) return false;
  }
  return true;
}

int64_t interleaved_last_stage_layers(int64_t layers, int64_t pp, int64_t v) {
  if (pp < 2 || v < 1 || layers % (pp * v) == 0) return 0;
  int64_t best = 0;
  for (int64_t l = v; l <= layers / pp; l += v) {
    const int64_t rest = layers - l;
    if (rest % (pp - 1) == 0 && rest / (pp - 1) % v == 0 && rest / (pp - 1) > l) best = l;
  }
  return best;
}

namespace {
// The explicit layout: an entry per stage, each one count or one per chunk (chunks_per_stage(), more than one), no
// chunk negative, every stage at least one layer, the model's layers in all; not with the other split settings.
bool stage_layout_valid(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  if (static_cast<int64_t>(pc.stage_layout.size()) != pc.pp || pc.first_stage_layers > 0 || pc.last_stage_layers > 0 ||
      pc.split_extra_layers() > 0) {
    return false;
  }
  const int64_t v = pc.chunks_per_stage();
  int64_t total = 0;
  for (const std::vector<int64_t>& st : pc.stage_layout) {
    if (st.size() != 1 && (v <= 1 || static_cast<int64_t>(st.size()) != v)) return false;
    int64_t n = 0;
    for (int64_t x : st) {
      if (x < 0 || x > plan.model.layers) return false;
      n += x;
    }
    // ZB-V's first stage may hold none: its chunks carry the embedding and the output layer (config.hpp).
    if (n < 1 && !(v_shaped(pc.schedule) && &st == &pc.stage_layout.front() && st.size() > 1)) return false;
    total += n;
  }
  return total == plan.model.layers;
}
// What keeps the plan's offload set from running as asked: ZeRO-Offload and Megatron-Core's optimizer CPU offload
// update the optimizer shard a rank owns (ZeRO >= 1 or the distributed optimizer; DeepSpeed's offload_optimizer needs
// ZeRO 1-3); parameter offload (ZeRO-Infinity offload_param) needs ZeRO-3's sharded parameters and updates them where
// they live, on the host (FSDP's CPUOffload(offload_params=True) runs the optimizer on the CPU); either needs the
// cluster's host link. Allocation-free: validate() runs it for every candidate of the search.
enum class OffloadProblem : uint8_t { none, params_without_zero3, params_without_optimizer, no_sharding, no_host_link };
OffloadProblem offload_problem_of(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  // The stage within the step: with pipelining ZeRO-3 keeps its parameters gathered (step_zero_stage), so there is
  // no shard at rest to offload.
  if (!sharding_admits_offload(pc.step_zero_stage(), pc.distributed_optimizer, pc.offload)) {
    return pc.offload.params && pc.step_zero_stage() < 3 ? OffloadProblem::params_without_zero3
           : pc.offload.params                    ? OffloadProblem::params_without_optimizer
                                                  : OffloadProblem::no_sharding;
  }
  if (pc.offload.any() && !(plan.cluster.host_link.bandwidth_Bps > 0)) return OffloadProblem::no_host_link;
  return OffloadProblem::none;
}

std::string offload_problem(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  const std::string what = to_string(pc.offload);
  switch (offload_problem_of(plan)) {
    case OffloadProblem::params_without_zero3:
      return fmt::format("offload {} with ZeRO stage {}: parameter offload needs ZeRO-3 (--zero 3) without pipelining",
                         what, pc.zero_stage);
    case OffloadProblem::params_without_optimizer:
      return "offload params: the offloaded parameters are updated on the host, so the optimizer is offloaded too "
             "(use optimizer,params)";
    case OffloadProblem::no_sharding:
      return fmt::format("offload {}: the host updates each rank's optimizer shard, which needs ZeRO 1-3 or the "
                         "distributed optimizer",
                         what);
    case OffloadProblem::no_host_link:
      return fmt::format("offload {}: cluster {} has no host_link (GPU <-> host bandwidth) in its profile", what,
                         plan.cluster.name);
    case OffloadProblem::none:
      break;
  }
  return "offload " + what;
}
}  // namespace

bool offload_supported(const Plan& plan) { return offload_problem_of(plan) == OffloadProblem::none; }

// Fine-grained activation offloading (spec.hpp OffloadModules). Megatron-Core refuses it together with the whole-layer
// CPU offload (transformer_config.py __post_init__ asserts not cpu_offloading; cited from memory, not checked against
// a pinned revision); a plan with full recompute keeps only each layer's input, so the modules save nothing to offload;
// expert_fc1 and moe_act are the experts' modules, absent from a dense model; the copies need the host link.
namespace {
enum class ModulesProblem : uint8_t { none, with_layer_offload, full_recompute, no_experts, no_host_link };
ModulesProblem modules_problem_of(const Plan& plan) {  // allocation-free: validate() runs it for every candidate
  const ParallelConfig& pc = plan.parallel;
  if (pc.offload_modules.empty()) return ModulesProblem::none;
  if (pc.offload.activations) return ModulesProblem::with_layer_offload;
  if (pc.recompute == Recompute::full) return ModulesProblem::full_recompute;
  if (!plan.model.is_moe()) return ModulesProblem::no_experts;
  if (!(plan.cluster.host_link.bandwidth_Bps > 0)) return ModulesProblem::no_host_link;
  return ModulesProblem::none;
}
}  // namespace

std::string offload_modules_problem(const Plan& plan) {
  const std::string what = to_string(plan.parallel.offload_modules);
  switch (modules_problem_of(plan)) {
    case ModulesProblem::with_layer_offload:
      return fmt::format("offload modules {}: fine-grained activation offloading and whole-layer activation offload "
                         "(offload activations) exclude each other",
                         what);
    case ModulesProblem::full_recompute:
      return fmt::format("offload modules {}: full recompute keeps only each layer's input, so the modules save "
                         "nothing to offload",
                         what);
    case ModulesProblem::no_experts:
      return fmt::format("offload modules {}: model {} has no MoE experts (expert_fc1 and moe_act are the experts' "
                         "modules)",
                         what, plan.model.name);
    case ModulesProblem::no_host_link:
      return fmt::format("offload modules {}: cluster {} has no host_link (GPU <-> host bandwidth) in its profile",
                         what, plan.cluster.name);
    case ModulesProblem::none:
      break;
  }
  return "";
}

bool sharding_admits_offload(int zero_stage, bool distributed_optimizer, OffloadSet offload) {
  if (offload.params) return offload.optimizer && zero_stage >= 3;
  return !offload.optimizer || zero_stage >= 1 || distributed_optimizer;
}

int64_t largest_chunk_layers(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  int64_t largest = 0;
  for (int64_t i = 0; i < pc.pp; ++i) {
    for (int64_t c = 0; c < pc.chunks_per_stage(); ++c) largest = std::max(largest, chunk_layers(plan, i, c));
  }
  return largest;
}

namespace {
// ParallelConfig::recompute_layers k > 0 is refused without full recompute, above the layers of the largest chunk
// (no chunk would keep any layer; 0 says "all"), negative, or with activation offload (whole-layer offload of a partly
// recomputed stage is not modelled).
bool recompute_layers_problem(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  if (pc.recompute_layers < 0 || pc.recompute != Recompute::full || pc.offload.activations) return true;
  return pc.recompute_layers > largest_chunk_layers(plan);
}
}  // namespace

namespace {
// ParallelConfig::dp_replicate (HSDP) is refused below 1 or not dividing dp; at dp with cp 1 (each shard group one
// rank: nothing sharded, which is plain data parallelism, dp_replicate 1; with cp > 1 the shard group is the cp
// ranks, as torchtitan's dp_shard_cp mesh and Megatron's instances over dp x cp shard it); without a sharded
// optimizer (ZeRO >= 1 or the distributed optimizer: replicas of unsharded states are plain data parallelism); and
// with split experts (ep > 1 or etp set), whose expert-data-parallel groups the replica split is not modelled for;
// and with ZeRO-3 gathered per linear (DeepSpeed's ZeRO-3, whose hierarchical partitioning, ZeRO++ hpZ, is another
// scheme).
enum class ReplicateProblem : uint8_t { none, not_dividing, no_shard, unsharded, split_experts, per_linear };
// What keeps HSDP from the plan's sharding, whatever dp_replicate is (hsdp_applies).
ReplicateProblem sharding_problem_of(const ParallelConfig& pc) {
  if (!pc.shards_optimizer()) return ReplicateProblem::unsharded;
  if (pc.ep > 1 || pc.etp > 0) return ReplicateProblem::split_experts;
  if (pc.zero_stage == 3 && pc.zero3_gather_unit == Zero3GatherUnit::linear) return ReplicateProblem::per_linear;
  return ReplicateProblem::none;
}
ReplicateProblem replicate_problem_of(const ParallelConfig& pc) {
  if (pc.dp_replicate < 1 || pc.dp % pc.dp_replicate != 0) return ReplicateProblem::not_dividing;
  if (pc.dp_replicate == 1) return ReplicateProblem::none;
  if (pc.dp_replicate == pc.dp && pc.cp == 1) return ReplicateProblem::no_shard;
  return sharding_problem_of(pc);
}
bool dp_replicate_problem(const ParallelConfig& pc) { return replicate_problem_of(pc) != ReplicateProblem::none; }

std::string dp_replicate_problem_text(const ParallelConfig& pc) {
  switch (replicate_problem_of(pc)) {
    case ReplicateProblem::not_dividing:
      return fmt::format("dp_replicate {} must be at least 1 and divide dp {}", pc.dp_replicate, pc.dp);
    case ReplicateProblem::no_shard:
      return fmt::format("dp_replicate {} = dp with cp 1 leaves one rank per shard group, nothing sharded: that is "
                         "plain data parallelism (dp_replicate 1, ZeRO 0)",
                         pc.dp_replicate);
    case ReplicateProblem::unsharded:
      return fmt::format("dp_replicate {} (HSDP) replicates sharded model states and needs ZeRO 1-3 or the "
                         "distributed optimizer; the plan has ZeRO 0",
                         pc.dp_replicate);
    case ReplicateProblem::split_experts:
      return fmt::format("dp_replicate {} (HSDP) with {}: replicas of expert-data-parallel groups are not modelled "
                         "(HSDP needs ep 1 and no --etp)",
                         pc.dp_replicate,
                         pc.etp > 0 ? fmt::format("ep {} / etp {}", pc.ep, pc.etp) : fmt::format("ep {}", pc.ep));
    case ReplicateProblem::per_linear:
      return fmt::format("dp_replicate {} (HSDP) is modelled for ZeRO-3 gathered one layer at a time (FSDP); the plan "
                         "gathers one linear at a time (DeepSpeed ZeRO-3)",
                         pc.dp_replicate);
    case ReplicateProblem::none:
      break;
  }
  return "";
}
}  // namespace

bool hsdp_applies(const ParallelConfig& pc) { return sharding_problem_of(pc) == ReplicateProblem::none; }

bool mxfp8_unsupported(const Plan& plan) {
  return plan.training.precision == Precision::fp8 && plan.training.fp8_recipe == Fp8Recipe::mxfp8 &&
         !plan.gpu.mx_block_scaling;
}

std::string mxfp8_unsupported_reason(const GpuSpec& gpu) {
  return fmt::format("{} has no tensor cores that scale fp8 per 32-element block (MXFP8 is Blackwell's; its profile "
                     "says mx_block_scaling)",
                     gpu.name);
}

Validity validate(const Plan& plan, const ValidateOptions& opt) {
  Validity v;
  const ParallelConfig& pc = plan.parallel;
  const ModelSpec& m = plan.model;
  if (pc.gpus() != plan.num_gpus) v.add(Reject::gpu_count_mismatch);
  // tp groups are blocks of tp consecutive ranks (layout.hpp): rejected where a domain boundary splits one.
  if (pc.tp > 1 && plan.cluster.domain_splits_blocks(pc.tp, pc.gpus()) && !opt.allow_tp_across_nodes) {
    v.add(Reject::tp_crosses_node);
  }
  if (m.heads % pc.tp != 0 || m.kv_heads % pc.tp != 0) v.add(Reject::tp_not_dividing_heads);
  if (m.ffn_hidden % pc.tp != 0 || m.dense_ffn_hidden % pc.tp != 0) v.add(Reject::tp_not_dividing_ffn);
  if (pc.pp > m.layers) v.add(Reject::pp_exceeds_layers);
  if (!pc.stage_layout.empty()) {
    if (!stage_layout_valid(plan)) v.add(Reject::uneven_stages_invalid);
  } else if (pc.split_extra_layers() > 0) {  // an even split of L + e + l, every stage keeping a layer; not first/last
    const int64_t total = m.layers + pc.split_extra_layers();
    if (pc.pp < 2 || total % pc.pp != 0 || total / pc.pp < 2 || pc.first_stage_layers > 0 || pc.last_stage_layers > 0) {
      v.add(Reject::uneven_stages_invalid);
    }
  } else if (pc.first_stage_layers > 0 || pc.last_stage_layers > 0) {
    const int64_t fixed = pc.first_stage_layers + pc.last_stage_layers;
    const int64_t free_stages = pc.pp - (pc.first_stage_layers > 0) - (pc.last_stage_layers > 0);
    const bool bad = pc.pp < 2 || fixed > m.layers || (free_stages == 0 && fixed != m.layers) ||
                     (free_stages > 0 && m.layers - fixed < free_stages);
    if (bad) v.add(Reject::uneven_stages_invalid);
  }
  if (pc.schedule == Schedule::interleaved) {
    if (pc.vpp < 2 || pc.pp < 2 || pc.num_microbatches % pc.pp != 0 || !stage_layers_divisible(plan, pc.vpp)) {
      v.add(Reject::vpp_invalid);
    }
  } else if (v_shaped(pc.schedule)) {  // vpp 1 or 2: the V's 2 chunks, implied or stated
    if (pc.vpp > 2 || pc.pp < 2 || !stage_layers_divisible(plan, 2)) v.add(Reject::vpp_invalid);
    // DualPipeV's order runs m - 2p + 1 overlapped pairs on the first stage: m >= 2p (dualpipe_v_order).
    if (pc.schedule == Schedule::dualpipe_v && pc.num_microbatches < 2 * pc.pp) v.add(Reject::vpp_invalid);
  } else if (pc.vpp != 1) {
    v.add(Reject::vpp_invalid);
  }
  if (pc.cp > 1 && plan.seq_len() % (2 * pc.cp) != 0) v.add(Reject::cp_not_dividing_seq);
  if (pc.cp > 1 && m.sliding_window > 0) v.add(Reject::cp_with_sliding_window);
  if (m.is_moe() && pc.etp > 0) {  // folding: ep x etp divide tp cp dp; etp divides the FFN; tp > 1 needs SP (MCore)
    const int64_t ranks = pc.tp * pc.cp * pc.dp;
    if (m.experts % pc.ep != 0 || ranks % (pc.ep * pc.etp) != 0 || m.ffn_hidden % pc.etp != 0 ||
        (pc.tp > 1 && !pc.sequence_parallel)) {
      v.add(Reject::ep_invalid);
    }
  } else if (m.is_moe()) {
    if (m.experts % pc.ep != 0 || pc.dp % pc.ep != 0) v.add(Reject::ep_invalid);
  } else if (pc.ep != 1 || pc.etp != 0) {  // a dense model has no experts to split
    v.add(Reject::ep_invalid);
  }
  if (plan.training.global_batch != pc.dp * pc.micro_batch * pc.num_microbatches) v.add(Reject::batch_not_divisible);
  if (pc.sequence_parallel && pc.tp == 1) v.add(Reject::sp_without_tp);
  const bool cp_splits = pc.cp == 1 || plan.seq_len() % (2 * pc.cp) == 0;  // else cp_not_dividing_seq alone
  if (pc.sequence_parallel && pc.tp > 1 && cp_splits && (plan.seq_len() / pc.cp) % pc.tp != 0) {
    v.add(Reject::sp_not_dividing_seq);  // Megatron-LM: seq_length % tensor_model_parallel_size with SP
  }
  if (!(plan.gpu.peak(plan.gemm_dtype()) > 0) || mxfp8_unsupported(plan)) v.add(Reject::precision_unsupported);
  if (splits_backward(pc.schedule) && pc.recompute == Recompute::full) v.add(Reject::zb_full_recompute);
  if (pc.overlap_p2p_comm && pc.schedule != Schedule::interleaved) v.add(Reject::overlap_p2p_not_interleaved);
  if (pc.overlap_ep_comm && pc.ep > 1 && !pairs_passes(pc.schedule, pc.pp, pc.num_microbatches)) {
    v.add(Reject::overlap_ep_unpaired);
  }
  if (!offload_supported(plan)) v.add(Reject::offload_invalid);
  if (modules_problem_of(plan) != ModulesProblem::none) v.add(Reject::offload_modules_invalid);
  if (pc.recompute == Recompute::selective_op &&
      (plan.model.is_moe() || plan.model.is_mla() || plan.training.attention == AttentionKernel::unfused)) {
    v.add(Reject::selective_op_unsupported);
  }
  if (pc.recompute_layers != 0 && recompute_layers_problem(plan)) v.add(Reject::recompute_layers_invalid);
  if (pc.post_validation && (!splits_backward(pc.schedule) || pc.schedule == Schedule::dualpipe_v)) {
    v.add(Reject::post_validation_invalid);  // Zero Bubble's (Qi et al. 2023 Sec. 4), not DualPipeV's
  }
  if (pc.fsdp2 && (pc.zero_stage != 3 || pc.zero3_gather_unit != Zero3GatherUnit::layer)) v.add(Reject::fsdp2_invalid);
  if (pc.zero3_gather_unit != Zero3GatherUnit::layer && pc.zero_stage != 3) v.add(Reject::zero3_gather_unit_invalid);
  if (pc.tp_collective_copies && !tp_collective_copies_apply(pc)) v.add(Reject::tp_collective_copies_invalid);
  if (pc.micropipeline_tp && !micropipeline_tp_applies(pc, plan.model.is_moe())) {
    v.add(Reject::micropipeline_tp_invalid);
  }
  if (plan.training.fp8_tp_gather &&
      !(plan.training.precision == Precision::fp8 && pc.tp > 1 && pc.sequence_parallel)) {
    v.add(Reject::fp8_tp_gather_invalid);
  }
  if (plan.training.fp8_activation_cache && plan.training.precision != Precision::fp8) {
    v.add(Reject::fp8_activation_cache_invalid);
  }
  if (plan.training.fp8_param_gather &&
      (plan.training.precision != Precision::fp8 || !pc.shards_optimizer())) {
    v.add(Reject::fp8_param_gather_invalid);
  }
  if (pc.dp_replicate != 1 && dp_replicate_problem(pc)) v.add(Reject::dp_replicate_invalid);
  return v;
}

bool tp_collective_copies_apply(const ParallelConfig& pc) { return pc.tp > 1 && pc.sequence_parallel; }

bool micropipeline_tp_applies(const ParallelConfig& pc, bool moe_model) {
  return pc.tp > 1 && pc.sequence_parallel && !pc.overlap_tp_comm && !moe_model;
}

std::string_view reject_name(Reject r) {
  switch (r) {
    case Reject::gpu_count_mismatch:
      return "gpu_count_mismatch";
    case Reject::tp_crosses_node:
      return "tp_crosses_node";
    case Reject::tp_not_dividing_heads:
      return "tp_not_dividing_heads";
    case Reject::tp_not_dividing_ffn:
      return "tp_not_dividing_ffn";
    case Reject::pp_exceeds_layers:
      return "pp_exceeds_layers";
    case Reject::uneven_stages_invalid:
      return "uneven_stages_invalid";
    case Reject::vpp_invalid:
      return "vpp_invalid";
    case Reject::cp_not_dividing_seq:
      return "cp_not_dividing_seq";
    case Reject::ep_invalid:
      return "ep_invalid";
    case Reject::batch_not_divisible:
      return "batch_not_divisible";
    case Reject::sp_without_tp:
      return "sp_without_tp";
    case Reject::sp_not_dividing_seq:
      return "sp_not_dividing_seq";
    case Reject::precision_unsupported:
      return "precision_unsupported";
    case Reject::selective_op_unsupported:
      return "selective_op_unsupported";
    case Reject::cp_with_sliding_window:
      return "cp_with_sliding_window";
    case Reject::fp8_param_gather_invalid:
      return "fp8_param_gather_invalid";
    case Reject::recompute_layers_invalid:
      return "recompute_layers_invalid";
    case Reject::post_validation_invalid:
      return "post_validation_invalid";
    case Reject::fsdp2_invalid:
      return "fsdp2_invalid";
    case Reject::zero3_gather_unit_invalid:
      return "zero3_gather_unit_invalid";
    case Reject::dp_replicate_invalid:
      return "dp_replicate_invalid";
    case Reject::tp_collective_copies_invalid:
      return "tp_collective_copies_invalid";
    case Reject::micropipeline_tp_invalid:
      return "micropipeline_tp_invalid";
    case Reject::fp8_tp_gather_invalid:
      return "fp8_tp_gather_invalid";
    case Reject::fp8_activation_cache_invalid:
      return "fp8_activation_cache_invalid";
    case Reject::zb_full_recompute:
      return "zb_full_recompute";
    case Reject::overlap_p2p_not_interleaved:
      return "overlap_p2p_not_interleaved";
    case Reject::overlap_ep_unpaired:
      return "overlap_ep_unpaired";
    case Reject::offload_invalid:
      return "offload_invalid";
    case Reject::offload_modules_invalid:
      return "offload_modules_invalid";
    case Reject::out_of_memory:
      return "out_of_memory";
    case Reject::host_out_of_memory:
      return "host_out_of_memory";
    case Reject::count:
      break;
  }
  return "?";
}

namespace {
// Why vpp does not fit the schedule, the stages' layers or the microbatches, with the splits that would do.
std::string vpp_problem(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  const ModelSpec& m = plan.model;
  int64_t lo = m.layers, hi = 0;
  for (int64_t i = 0; i < pc.pp; ++i) {
    const int64_t n = stage_layers(plan, i);
    lo = std::min(lo, n);
    hi = std::max(hi, n);
  }
  const std::string held = lo == hi ? fmt::format("{}", lo) : fmt::format("{}..{}", lo, hi);
  const std::string stages = pc.pp == 1 ? "the 1 stage holds" : fmt::format("the {} stages hold", pc.pp);
  // The uneven split only helps when the layers are the problem: with microbatches % pp != 0 it still fails.
  const int64_t last = pc.schedule == Schedule::interleaved && pc.stage_layout.empty() &&
                               pc.first_stage_layers == 0 && pc.last_stage_layers == 0 && pc.pp > 1 && pc.vpp > 1 &&
                               pc.num_microbatches % pc.pp == 0
                           ? interleaved_last_stage_layers(m.layers, pc.pp, pc.vpp)
                           : 0;
  // Megatron's accounting (the embedding and the loss as layers) interleaves L + 2 layers in pp x vpp chunks.
  const bool megatron = pc.schedule == Schedule::interleaved && pc.stage_layout.empty() &&
                        pc.split_extra_layers() == 0 && pc.first_stage_layers == 0 && pc.last_stage_layers == 0 &&
                        pc.pp > 1 && pc.vpp > 1 && pc.num_microbatches % pc.pp == 0 &&
                        (m.layers + 2) % (pc.pp * pc.vpp) == 0;
  std::vector<std::string> ways;
  if (last > 0) ways.push_back(fmt::format("a last stage of {} layers would do: --last-stage-layers {}", last, last));
  if (megatron) {
    ways.push_back("Megatron's split would do: --account-for-embedding-in-pipeline-split "
                   "--account-for-loss-in-pipeline-split");
  }
  const std::string hint = ways.empty() ? "" : " (" + fmt::format("{}", fmt::join(ways, "; ")) + ")";
  if (v_shaped(pc.schedule)) {  // each cause on its own: vpp, then pp, then the stages' layers, then microbatches
    const std::string_view name = to_string(pc.schedule);
    if (pc.vpp > 2) {
      return fmt::format("schedule {} with vpp {}: its V places 2 chunks on every stage, so vpp is 2 (or 1: implied)",
                         name, pc.vpp);
    }
    if (pc.pp < 2) {
      return fmt::format("schedule {} with pp {}: its V runs down the stages and back (2 chunks on every stage), so it "
                         "needs pp >= 2",
                         name, pc.pp);
    }
    if (!stage_layers_divisible(plan, 2)) {
      // An odd layer count leaves some stage odd whatever the split: only chunks of their own sizes place it.
      const char* ways = m.layers % 2 != 0 ? "an odd count, so only a per-chunk --stage-layers can place them"
                                           : "a pp that splits them so, or a per-chunk --stage-layers";
      return fmt::format("schedule {} places 2 chunks on every stage (its V), so every stage's layers must be even: "
                         "{} {} of {} layers; {}",
                         name, stages, held, m.layers, ways);
    }
    return fmt::format("schedule dualpipe-v on {} stages needs at least 2 pp = {} microbatches (its order's overlapped "
                       "pairs), the plan has {}: a larger global batch or a smaller micro-batch",
                       pc.pp, 2 * pc.pp, pc.num_microbatches);
  }
  return fmt::format("schedule {} with vpp {}: interleaving needs vpp >= 2, pp >= 2, every stage's layers divisible "
                     "by vpp ({} {} of {} layers) and microbatches ({}) divisible by pp; other "
                     "schedules need vpp 1 (zb-v and dualpipe-v: 1 or 2){}",
                     to_string(pc.schedule), pc.vpp, stages, held, m.layers, pc.num_microbatches, hint);
}
}  // namespace

std::string describe(Reject r, const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  const ModelSpec& m = plan.model;
  switch (r) {
    case Reject::gpu_count_mismatch:
      return fmt::format("dp*tp*pp*cp = {}*{}*{}*{} = {} but there are {} GPUs", pc.dp, pc.tp, pc.pp, pc.cp, pc.gpus(),
                         plan.num_gpus);
    case Reject::tp_crosses_node:
      return fmt::format("tp {} {} an NVLink domain of {} GPUs (allow with --allow-tp-across-nodes)", pc.tp,
                         pc.tp > plan.cluster.placed_domain(pc.gpus()) ? "is larger than" : "groups straddle the edge of",
                         plan.cluster.placed_domain(pc.gpus()));
    case Reject::tp_not_dividing_heads:
      return fmt::format("tp {} does not divide the {} attention heads / {} kv heads", pc.tp, m.heads, m.kv_heads);
    case Reject::tp_not_dividing_ffn:
      if (m.dense_ffn_hidden % pc.tp != 0) {
        return fmt::format("tp {} does not divide the dense layers' ffn width {}", pc.tp, m.dense_ffn_hidden);
      }
      return fmt::format("tp {} does not divide the ffn width {}", pc.tp, m.ffn_hidden);
    case Reject::pp_exceeds_layers:
      return fmt::format("pp {} exceeds the {} layers", pc.pp, m.layers);
    case Reject::uneven_stages_invalid:
      if (pc.split_extra_layers() > 0) {
        return fmt::format("{} layers + {} for the embedding / loss do not split evenly over {} stages of 2 or more "
                           "(Megatron's accounting; not with first/last stage layers)",
                           m.layers, pc.split_extra_layers(), pc.pp);
      }
      if (!pc.stage_layout.empty()) {
        return fmt::format("stage layers: {} entries for pp {}, each a stage's layer count or its {} chunks' counts "
                           "(at least one layer per stage, {} in all, not with first/last stage layers or Megatron's "
                           "accounting)",
                           pc.stage_layout.size(), pc.pp, pc.chunks_per_stage(), m.layers);
      }
      return fmt::format("first/last stage layers {}/{} cannot be placed on {} stages of {} layers",
                         pc.first_stage_layers, pc.last_stage_layers, pc.pp, m.layers);
    case Reject::vpp_invalid:
      return vpp_problem(plan);
    case Reject::cp_not_dividing_seq:
      return fmt::format("cp {} does not divide the sequence {} into 2*cp balanced chunks", pc.cp, plan.seq_len());
    case Reject::ep_invalid:
      if (!m.is_moe()) return fmt::format("ep {} / etp {}: the model has no experts (ep 1, etp unset)", pc.ep, pc.etp);
      if (pc.etp > 0) {
        const int64_t ranks = pc.tp * pc.cp * pc.dp;
        // The folding rules this mesh breaks (Megatron-Core MoE parallel folding), not all of them.
        std::vector<std::string> broken;
        if (ranks % (pc.ep * pc.etp) != 0) broken.push_back(fmt::format("ep x etp must divide tp x cp x dp ({})", ranks));
        if (m.experts % pc.ep != 0) broken.push_back(fmt::format("ep must divide the experts ({})", m.experts));
        if (m.ffn_hidden % pc.etp != 0) broken.push_back(fmt::format("etp must divide the FFN ({})", m.ffn_hidden));
        if (pc.tp > 1 && !pc.sequence_parallel) broken.push_back(fmt::format("tp {} needs sequence parallelism", pc.tp));
        return fmt::format("ep {} x etp {}: {} (Megatron-Core MoE parallel folding)", pc.ep, pc.etp,
                           fmt::join(broken, "; "));
      }
      return fmt::format("ep {} must divide the experts ({}) and dp ({})", pc.ep, m.experts, pc.dp);
    case Reject::batch_not_divisible:
      return fmt::format("global batch {} != dp {} x micro-batch {} x microbatches {}", plan.training.global_batch, pc.dp,
                         pc.micro_batch, pc.num_microbatches);
    case Reject::sp_without_tp:
      return "sequence parallelism needs tp > 1";
    case Reject::sp_not_dividing_seq:
      return fmt::format("sequence parallelism splits each rank's {} tokens (seq {}{}) over tp {}, which does not "
                         "divide them",
                         plan.seq_len() / pc.cp, plan.seq_len(), pc.cp > 1 ? fmt::format(" / cp {}", pc.cp) : "", pc.tp);
    case Reject::precision_unsupported:
      if (mxfp8_unsupported(plan) && plan.gpu.peak(plan.gemm_dtype()) > 0) {
        return "fp8 recipe mxfp8: " + mxfp8_unsupported_reason(plan.gpu);
      }
      return fmt::format("{} has no {} tensor-core peak", plan.gpu.name, to_string(plan.training.precision));
    case Reject::cp_with_sliding_window:
      return fmt::format("context parallelism (cp {}) over sliding-window attention (window {} tokens) is not "
                         "modelled: the ring's chunks outside the window and its rounds are not priced; use cp 1",
                         pc.cp, m.sliding_window);
    case Reject::selective_op_unsupported:
      return "recompute selective-op (torchtitan's per-op policy) is modelled for dense layers with standard attention "
             "and a fused attention kernel; this plan has MoE layers, latent attention or unfused attention";
    case Reject::fp8_param_gather_invalid:
      return fmt::format("fp8 parameter gather needs --precision fp8 and a sharded parameter gather (the distributed "
                         "optimizer or ZeRO 1-3); the plan has precision {}, ZeRO {}{}",
                         to_string(plan.training.precision), pc.zero_stage,
                         pc.distributed_optimizer ? " and the distributed optimizer" : ", no distributed optimizer");
    case Reject::recompute_layers_invalid:
      return fmt::format("recompute_layers {} needs recompute full, at most the layers of a model chunk (the largest "
                         "holds {}) and no activation offload; the plan has recompute {}{}",
                         pc.recompute_layers, largest_chunk_layers(plan), to_string(pc.recompute),
                         pc.offload.activations ? " and offloads activations" : "");
    case Reject::post_validation_invalid:
      return fmt::format("optimizer post-validation is Zero Bubble's (zb-h1, zb-2p, zb-v); the schedule is {}",
                         to_string(pc.schedule));
    case Reject::fsdp2_invalid:
      return fmt::format("FSDP2 is ZeRO 3 gathered one layer at a time (zero3_gather_unit layer); the plan has ZeRO {}{}",
                         pc.zero_stage, pc.zero_stage == 3 ? " gathered one linear at a time" : "");
    case Reject::zero3_gather_unit_invalid:
      return fmt::format("the gather unit {} is how ZeRO 3 gathers its sharded weights; the plan has ZeRO {}, whose "
                         "weights are not sharded, so it would have no effect",
                         to_string(pc.zero3_gather_unit), pc.zero_stage);
    case Reject::dp_replicate_invalid:
      return dp_replicate_problem_text(pc);
    case Reject::tp_collective_copies_invalid:
      return fmt::format("the copies around TP collectives on the sequence dim need tp > 1 with sequence parallelism; "
                         "the plan has tp {}{}", pc.tp, pc.sequence_parallel ? "" : " without sequence parallelism");
    case Reject::micropipeline_tp_invalid:
      return pc.overlap_tp_comm ? std::string("micro-pipelined TP and TP comm overlap are two ways to run the same "
                                              "collectives: give one")
             : plan.model.is_moe()
                 ? std::string("micro-pipelined TP is modelled for dense layers (a MoE layer's experts run no "
                               "TP-split GEMM beside the collectives)")
                 : fmt::format("micro-pipelined TP splits sequence-parallel collectives: it needs tp > 1 with "
                               "sequence parallelism; the plan has tp {}{}", pc.tp,
                               pc.sequence_parallel ? "" : " without sequence parallelism");
    case Reject::fp8_tp_gather_invalid:
      return fmt::format("fp8 TP all-gathers need --precision fp8, tp > 1 and sequence parallelism; the plan has "
                         "precision {}, tp {}{}", to_string(plan.training.precision), pc.tp,
                         pc.sequence_parallel ? "" : " without sequence parallelism");
    case Reject::fp8_activation_cache_invalid:
      return fmt::format("the fp8 activation cache (DeepSeek-V3's) needs --precision fp8; the plan has precision {}",
                         to_string(plan.training.precision));
    case Reject::zb_full_recompute:
      return fmt::format("schedule {} with full recompute: a weight-gradient pass (W) runs after its input-gradient "
                         "pass and needs the layer activations that full recompute rebuilds only for that pass "
                         "(keeping or rebuilding them again is not modelled); use selective recompute or another "
                         "schedule",
                         to_string(pc.schedule));
    case Reject::overlap_p2p_not_interleaved:
      return fmt::format("schedule {} waits for its pipeline sends; only the interleaved schedule overlaps them (give "
                         "--vpp 2 or more)",
                         to_string(pc.schedule));
    case Reject::overlap_ep_unpaired:
      if (pc.num_microbatches < 2) {
        return "one microbatch per step: no other microbatch's pass to run beside, so no all-to-all hides (the "
               "overlap pairs two microbatches' passes)";
      }
      if (pc.pp == 1) {
        return fmt::format("schedule {} runs every forward before any backward, so no all-to-all hides: without a "
                           "pipeline Megatron-Core's 1F1B A2A overlap pairs them under 1f1b",
                           to_string(pc.schedule));
      }
      return fmt::format("schedule {} at pp {} runs no microbatch's forward beside another's backward, so no "
                         "all-to-all hides: Megatron-Core's 1F1B A2A overlap needs pp 1 or the interleaved schedule "
                         "(--vpp 2 or more), and DualPipeV pairs its own",
                         to_string(pc.schedule), pc.pp);
    case Reject::offload_invalid:
      return offload_problem(plan);
    case Reject::offload_modules_invalid:
      return offload_modules_problem(plan);
    case Reject::out_of_memory:
      return "does not fit in GPU memory";
    case Reject::host_out_of_memory:
      return "the offloaded states do not fit in the node's host memory";
    case Reject::count:
      break;
  }
  return "?";
}

}  // namespace parplan
