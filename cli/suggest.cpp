// `parplan suggest`: search every mesh and knob for a model on N GPUs, rank the plans that fit, explain rejections.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>
#include <cstdio>
#include <fmt/core.h>
#include <limits>
#include <thread>
#include <unistd.h>

#include "cli/accuracy_note.hpp"
#include "cli/command.hpp"
#include "cli/interop/export.hpp"
#include "cli/io.hpp"
#include "cli/plan_options.hpp"
#include "cli/render.hpp"
#include "planner/check/check.hpp"
#include "planner/spec/error.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/spec/plan_json.hpp"
#include "planner/search/search.hpp"
#include "planner/search/search_report.hpp"
#include "planner/spec/spec_json.hpp"
#include "planner/spec/units.hpp"
#include "simulator/simulate.hpp"

namespace parplan::cli {
namespace {

// The memory suggest keeps free on each GPU unless --headroom says otherwise (docs/suggest.md#memory-headroom).
constexpr const char* kDefaultHeadroom = "5%";

struct SuggestOptions {
  ModelOptions model;
  std::optional<int64_t> dp, tp, pp, cp, ep, etp, vpp, micro_batch, global_batch, tokens_per_step, zero;
  std::optional<int64_t> recompute_layers;  // --recompute-layers: pins SearchSpace::recompute_layers
  std::optional<int64_t> dp_replicate;      // --dp-replicate: pins SearchSpace::dp_replicate
  std::string schedule, recompute, objective = "fastest", zero3_gather_unit, moe_dispatcher;
  bool sp = false, no_sp = false, distributed_optimizer = false, no_distributed_optimizer = false, even_stages = false,
       overlap_p2p = false, fsdp2 = false, no_fp8_param_gather = false, no_async_tp = false, tp_collective_copies = false,
       micropipeline_tp = false, overlap_ep = false;
  std::optional<int64_t> max_micro_batch;  // default 16
  int top = 5;
  int simulate = 0;
  std::optional<int> threads;
  std::optional<double> min_tokens_per_s;
  std::string headroom = kDefaultHeadroom, memory;
  std::string offload = "auto";  // auto: offload sets searched only when nothing fits without them
  bool explain = false, json = false, wide = false;
  std::string out, emit;
};

MemoryLimit request_limit(const SearchRequest& r) {
  return memory_limit(static_cast<double>(r.gpu.memory_bytes), r.memory_bytes, r.headroom);
}

// A plan of `gpu` with the training settings `tr`, for the checks that need only those.
Plan gpu_training_plan(const GpuSpec& gpu, const TrainingSpec& tr) {
  Plan p;
  p.gpu = gpu;
  p.training = tr;
  return p;
}

bool precision_supported(const GpuSpec& gpu, const TrainingSpec& tr) {
  const Plan p = gpu_training_plan(gpu, tr);
  return gpu.peak(p.gemm_dtype()) > 0;
}

// --memory and --headroom (check's parsers and meaning): the limit a plan's peak must stay under.
void set_memory_limit(SearchRequest& r, const SuggestOptions& o) {
  if (!o.memory.empty()) r.memory_bytes = parse_bytes(o.memory, "--memory");
  r.headroom = parse_headroom(o.headroom, "--headroom");
  refuse_empty_limit(request_limit(r), r.gpu.name);
}

// The search space from the pins: mesh sizes, micro-batch, schedules, recompute, sequence parallelism, sharding.
void pin_space(const SuggestOptions& o, SearchSpace& s) {
  auto pin = [](const std::optional<int64_t>& v, std::vector<int64_t>& dst) {
    if (v) dst = {*v};
  };
  pin(o.dp, s.dp);
  pin(o.tp, s.tp);
  pin(o.pp, s.pp);
  pin(o.cp, s.cp);
  pin(o.ep, s.ep);
  pin(o.etp, s.etp);
  pin(o.micro_batch, s.micro_batch);
  pin(o.dp_replicate, s.dp_replicate);
  if (o.max_micro_batch && o.micro_batch) {
    throw InputError(fmt::format("--max-micro-batch: has no effect with --micro-batch {} pinned: give one",
                                 *o.micro_batch));
  }
  s.max_micro_batch = o.max_micro_batch.value_or(16);
  if (o.vpp) {
    s.vpp = {*o.vpp};
    if (o.schedule.empty()) s.schedules = {Schedule::interleaved};
  }
  if (!o.schedule.empty()) {
    s.schedules = enum_list<Schedule>(o.schedule, "--schedule", "gpipe, 1f1b, interleaved, zb-h1, zb-2p, zb-v, dualpipe-v");
  }
  if (o.vpp && std::find(s.schedules.begin(), s.schedules.end(), Schedule::interleaved) == s.schedules.end()) {
    throw InputError(fmt::format("--vpp: {} chunks per stage need --schedule interleaved, not {} (zb-v and dualpipe-v "
                                 "place their V's 2 without --vpp)",
                                 *o.vpp, o.schedule));
  }
  if (!o.recompute.empty()) s.recompute = enum_list<Recompute>(o.recompute, "--recompute", "none, selective, selective-op, full");
  if (o.recompute_layers) {
    if (std::find(s.recompute.begin(), s.recompute.end(), Recompute::full) == s.recompute.end()) {
      throw InputError(fmt::format("--recompute-layers: needs full among the searched --recompute modes (not {})", o.recompute));
    }
    s.recompute_layers = recompute_layers_arg(*o.recompute_layers);
  }
  if (o.sp && o.no_sp) throw InputError("--sp and --no-sp: give one, not both");
  if (o.sp) s.sequence_parallel = {true};
  if (o.no_sp) s.sequence_parallel = {false};
  if (o.distributed_optimizer && o.no_distributed_optimizer) {
    throw InputError("--distributed-optimizer and --no-distributed-optimizer: give one, not both");
  }
  if (o.zero) {
    s.sharding = {{static_cast<int>(*o.zero), o.distributed_optimizer}};
    // --zero 0 pins ZeRO off; the distributed optimizer is a knob of its own, still tried unless pinned off.
    if (*o.zero == 0 && !o.distributed_optimizer && !o.no_distributed_optimizer) s.sharding.push_back({0, true});
  } else if (o.distributed_optimizer) {
    s.sharding = {{0, true}};
  } else if (o.no_distributed_optimizer) {
    std::erase_if(s.sharding, [](const auto& sh) { return sh.distributed_optimizer; });
  }
  if (o.overlap_p2p && std::find(s.schedules.begin(), s.schedules.end(), Schedule::interleaved) == s.schedules.end()) {
    throw InputError(fmt::format("--overlap-p2p: only the interleaved schedule overlaps its pipeline sends, and "
                                 "--schedule {} lists no interleaved",
                                 o.schedule));
  }
  s.overlap_p2p = o.overlap_p2p;
  if (!o.zero3_gather_unit.empty()) {
    s.zero3_gather_unit = enum_flag<Zero3GatherUnit>(o.zero3_gather_unit, "--zero3-gather-unit", "layer, linear");
    if (o.zero && *o.zero != 3) {  // the unit is ZeRO-3's: with another stage pinned it would change nothing
      throw InputError(fmt::format("--zero3-gather-unit: is how ZeRO 3 gathers its sharded weights; --zero {} leaves "
                                   "no ZeRO-3 candidate",
                                   *o.zero));
    }
  }
  if (o.fsdp2 && s.zero3_gather_unit != Zero3GatherUnit::layer) {
    throw InputError("--fsdp2: FSDP2 gathers one layer at a time; --zero3-gather-unit linear is DeepSpeed's");
  }
  if (o.fsdp2 && o.zero && *o.zero != 3) {
    throw InputError(fmt::format("--fsdp2: prices ZeRO-3 candidates; --zero {} leaves none", *o.zero));
  }
  s.fsdp2 = o.fsdp2;
  s.async_tp_backward = !o.no_async_tp;
  s.tp_collective_copies = o.tp_collective_copies;
  s.micropipeline_tp = o.micropipeline_tp;
  if (!o.moe_dispatcher.empty()) {
    s.moe_dispatcher = enum_flag<MoeDispatcher>(o.moe_dispatcher, "--moe-dispatcher", "alltoall, deepep");
  }
  s.overlap_ep = o.overlap_ep;
  if (o.tp_collective_copies && o.no_sp) {
    throw InputError("--tp-collective-copies: the copies are around sequence-parallel collectives; --no-sp leaves none");
  }
  if (o.micropipeline_tp && o.no_sp) {
    throw InputError("--micropipeline-tp: it splits sequence-parallel collectives; --no-sp leaves none");
  }
  if (o.no_fp8_param_gather) {
    if (o.model.fp8_param_gather) throw InputError("--fp8-param-gather and --no-fp8-param-gather: give one, not both");
    if (o.model.precision != "fp8") {
      throw InputError(fmt::format("--no-fp8-param-gather: fp8 weights need --precision fp8 (the precision is {})",
                                   excerpt(o.model.precision)));
    }
    s.fp8_param_gather = false;
  } else if (o.model.fp8_param_gather) {
    s.fp8_param_gather = true;
  }
  if (o.offload != "auto") {
    const OffloadSet off = offload_flag(o.offload);
    s.offload = {off};
    // A pinned set no sharding in the space can run would leave nothing to search: say which knob it needs.
    const bool runnable = std::any_of(s.sharding.begin(), s.sharding.end(), [&off](const Sharding& sh) {
      return sharding_admits_offload(sh.zero_stage, sh.distributed_optimizer, off);
    });
    if (off.params && !off.optimizer) {
      throw InputError("--offload: params are updated on the host, so the optimizer is offloaded too (use optimizer,params)");
    }
    if (!runnable) {
      throw InputError(fmt::format("--offload {}: needs {} among the searched sharding (--zero / --distributed-optimizer)",
                                   o.offload, off.params ? "ZeRO-3" : "ZeRO 1-3 or the distributed optimizer"));
    }
  }
  s.uneven_stages = !o.even_stages;
  s.allow_tp_across_nodes = o.model.allow_tp_across_nodes;
}

// --dp-replicate R > 1 beside pins that leave no sharding HSDP applies to (docs/cost-model.md, HSDP): a usage error
// naming both flags, decided from the flags alone. --zero 0 still searches the distributed optimizer (pin_space), so
// only --no-distributed-optimizer with it leaves nothing to replicate.
void refuse_replicate_pins(const SuggestOptions& o, const SearchSpace& s) {
  if (!o.dp_replicate || *o.dp_replicate == 1) return;
  const int64_t r = *o.dp_replicate;
  const bool shards = std::any_of(s.sharding.begin(), s.sharding.end(),
                                  [](const Sharding& sh) { return sh.zero_stage >= 1 || sh.distributed_optimizer; });
  if (!shards) {
    throw InputError(fmt::format("--dp-replicate {}: HSDP replicates sharded states; --zero 0 with "
                                 "--no-distributed-optimizer leaves none",
                                 r));
  }
  if (o.ep && *o.ep > 1) {
    throw InputError(fmt::format("--dp-replicate {} with --ep {}: replicas of expert-data-parallel groups are not "
                                 "modelled (HSDP needs ep 1)",
                                 r, *o.ep));
  }
  if (o.etp) {
    throw InputError(fmt::format("--dp-replicate {} with --etp {}: replicas of expert-data-parallel groups are not "
                                 "modelled (HSDP needs etp unset)",
                                 r, *o.etp));
  }
  const bool per_layer = std::any_of(s.sharding.begin(), s.sharding.end(), [&s](const Sharding& sh) {
    return (sh.zero_stage >= 1 || sh.distributed_optimizer) &&
           (sh.zero_stage < 3 || s.zero3_gather_unit == Zero3GatherUnit::layer);
  });
  if (!per_layer) {
    throw InputError(fmt::format("--dp-replicate {} with --zero3-gather-unit linear: HSDP is modelled for ZeRO-3 "
                                 "gathered one layer at a time (FSDP), and the pinned sharding gathers per linear",
                                 r));
  }
}

// A pinned --dp-replicate R that every searched configuration breaks (no dp that R divides leaving a shard group: R
// not dividing any dp the other pins allow, or R = dp with cp 1): a usage error naming it and the other pins, as
// refuse_pins_without_mesh does for the mesh sizes.
void refuse_replicate_without_mesh(const SuggestOptions& o, const SearchResult& res, int64_t gpus) {
  if (!o.dp_replicate || *o.dp_replicate == 1 || res.candidates == 0) return;
  if (res.by_reason[static_cast<size_t>(Reject::dp_replicate_invalid)].count != res.candidates) return;
  std::string pins;
  auto add = [&pins](const char* flag, const std::optional<int64_t>& v) {
    if (v) pins += fmt::format(", {} {}", flag, *v);
  };
  add("--dp", o.dp);
  add("--tp", o.tp);
  add("--pp", o.pp);
  add("--cp", o.cp);
  throw InputError(fmt::format("--dp-replicate {}: no configuration of {} GPUs{} has a dp it divides with a shard "
                               "group left (dp a multiple of {}, and dp / {} >= 2 or cp > 1)",
                               *o.dp_replicate, gpus, pins.empty() ? "" : " with" + pins.substr(1),
                               *o.dp_replicate, *o.dp_replicate));
}

// Expert flags on a dense model: a usage error naming the flag (estimate's too), not a search that ignores them.
void refuse_expert_flags_without_experts(const SuggestOptions& o, const ModelSpec& m) {
  if (m.is_moe()) return;
  const char* flag = o.ep && *o.ep != 1 ? "--ep"
                     : o.etp            ? "--etp"
                     : o.overlap_ep     ? "--overlap-ep"
                     : !o.moe_dispatcher.empty() ? "--moe-dispatcher"
                                                 : nullptr;
  if (flag) throw InputError(fmt::format("{}: the model '{}' has no experts (experts 1)", flag, m.name));
}

// The search request from the flags: target, global batch and the pinned knobs.
SearchRequest build_request(const SuggestOptions& o, const Target& t, std::string& batch_note) {
  refuse_expert_flags_without_experts(o, t.model);
  SearchRequest r;
  r.model = t.model;
  r.gpu = t.gpu;
  r.cluster = t.cluster;
  if (!o.model.gpus) throw InputError("--gpus is required");
  r.gpus = *o.model.gpus;
  TrainingSpec& tr = r.training;
  set_precision(tr, o.model);
  tr.attention = enum_flag<AttentionKernel>(o.model.attention, "--attention", "flash, flash2, unfused");
  tr.seq_len = t.model.seq_len;
  const BatchRequest b = requested_batch(o.global_batch, o.tokens_per_step, tr.seq_len, r.gpus);
  tr.global_batch = b.sequences;
  batch_note = b.source;
  pin_space(o, r.space);
  refuse_replicate_pins(o, r.space);
  // fp8 TP all-gathers are the framework's, for the candidates that can run them (tp > 1, SP).
  r.space.fp8_tp_gather = tr.fp8_tp_gather;
  tr.fp8_tp_gather = false;
  // No chunk holds more than the model's layers, so a larger K would reject every full recompute plan as
  // recompute_layers_invalid and leave the pin without effect (CLI11 also saturates an out-of-range number to it).
  if (r.space.recompute_layers && *r.space.recompute_layers > t.model.layers) {
    throw InputError(fmt::format("--recompute-layers: {} is above the model's {} layers (K = the first K of each chunk)",
                                 *r.space.recompute_layers, t.model.layers));
  }
  r.objective = enum_flag<Objective>(o.objective, "--objective", "fastest, fewest-gpus, headroom");
  if (r.objective == Objective::fewest_gpus) {
    if (!o.min_tokens_per_s) throw InputError("--objective fewest-gpus needs --min-tokens-per-s");
    // CLI::Range lets NaN through (every comparison is false).
    if (!std::isfinite(*o.min_tokens_per_s)) throw InputError("--min-tokens-per-s: must be a finite number");
    r.min_tokens_per_s = *o.min_tokens_per_s;
  } else if (o.min_tokens_per_s) {
    throw InputError("--min-tokens-per-s: only used with --objective fewest-gpus");
  }
  r.top_k = o.top;
  r.threads = o.threads ? *o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  r.explain = o.explain;
  if (!precision_supported(r.gpu, tr)) {
    throw InputError(fmt::format("--precision: {} has no {} tensor-core peak", r.gpu.name, to_string(tr.precision)));
  }
  if (mxfp8_unsupported(gpu_training_plan(r.gpu, tr))) {
    throw InputError("--fp8-recipe: mxfp8: " + mxfp8_unsupported_reason(r.gpu));
  }
  set_memory_limit(r, o);
  return r;
}

// " ep 8", with the expert tp under parallel folding: " ep 8 etp 1" (sep "" gives " ep8 etp1").
std::string expert_text(const ParallelConfig& p, std::string_view sep) {
  return fmt::format(" ep{}{}{}", sep, p.ep, p.etp > 0 ? fmt::format(" etp{}{}", sep, p.etp) : "");
}

std::string mesh_text(const Candidate& c, bool moe) {
  const ParallelConfig& p = c.parallel;
  return fmt::format("{}x{}x{}x{}{}", p.dp, p.tp, p.pp, p.cp, moe ? expert_text(p, "") : "");
}

std::string knobs_text(const SearchRequest& req, const ParallelConfig& p) {
  std::string s = fmt::format("mb {}x{} {}", p.micro_batch, p.num_microbatches, to_string(p.schedule));
  if (p.schedule == Schedule::interleaved) s += fmt::format(" v{}", p.vpp);
  if (p.overlaps_p2p()) s += " p2p-overlap";
  if (p.last_stage_layers > 0) s += fmt::format(" last{}L", p.last_stage_layers);
  if (p.recompute != Recompute::none) s += fmt::format(" rc-{}", to_string(p.recompute));
  if (p.recompute_layers > 0) s += fmt::format("-first{}", p.recompute_layers);  // of each chunk's layers
  if (p.sequence_parallel) s += " sp";
  if (p.zero_stage > 0) s += fmt::format(" zero{}", p.zero_stage);
  if (p.zero_stage >= 3 && p.zero3_gather_unit == Zero3GatherUnit::linear) s += "/linear";
  if (p.fsdp2) s += "/fsdp2";
  if (p.distributed_optimizer) s += " dist-opt";
  if (p.dp_replicate > 1) s += fmt::format(" dp-replicate{}", p.dp_replicate);
  if (p.offload.states()) s += p.offload.params ? " off-opt+par" : " off-opt";
  if (p.offload.activations) s += " off-act";
  if (!p.offload_modules.empty()) s += " off-" + to_string(p.offload_modules, "+");
  if (candidate_fp8_weights(req, p)) s += " fp8-gather";
  if (p.ep > 1 && p.moe_dispatcher == MoeDispatcher::deepep) s += " deepep";
  if (p.ep > 1 && p.overlap_ep_comm) s += " a2a-overlap";
  return s;
}

double comm_fraction(const TimeBreakdown& t) {
  const double comm = t.tp_comm_s + t.cp_comm_s + t.ep_comm_s + t.pp_comm_s + t.dp_comm_exposed_s + t.zero3_exposed_s +
                      t.offload_exposed_s;
  return t.step_s > 0 ? comm / t.step_s : 0.0;
}

std::string config_line(const SearchRequest& req, const Candidate& c) {
  return fmt::format("dp {} tp {} pp {} cp {}{} | {}", c.parallel.dp, c.parallel.tp, c.parallel.pp, c.parallel.cp,
                     req.model.is_moe() ? expert_text(c.parallel, " ") : "",
                     knobs_text(req, c.parallel));
}

nlohmann::json candidate_json(const SearchRequest& req, const Candidate& c) {
  nlohmann::json j = {{"num_gpus", c.num_gpus}, {"parallel", to_json(c.parallel)}};
  if (req.training.precision == Precision::fp8) {
    j["fp8_param_gather"] = candidate_fp8_weights(req, c.parallel);
    j["fp8_tp_gather"] = candidate_fp8_tp_gather(req, c.parallel);
  }
  if (c.has_memory) {
    j["peak_memory_bytes"] = c.peak_bytes;
    j["peak_stage"] = c.peak_stage;
    j["headroom_bytes"] = c.headroom_bytes();
  }
  if (c.has_time) {
    j["step_s"] = c.time.step_s;
    j["tokens_per_s"] = c.time.tokens_per_s;
    j["mfu"] = c.time.mfu;
    j["bubble_fraction"] = c.time.bubble_fraction();
    j["comm_fraction"] = comm_fraction(c.time);
  }
  nlohmann::json reasons = nlohmann::json::array();
  for (int r = 0; r < kNumRejects; ++r) {
    if ((c.reasons >> r) & 1u) reasons.push_back(reject_name(static_cast<Reject>(r)));
  }
  if (!reasons.empty()) j["rejected_for"] = reasons;
  (void)req;
  return j;
}

// What a plan that does not fit would need: the model-state floor, more GPUs (verified by searching), other GPUs.
// The searches it runs are bounded, whatever the profiles hold: GPU counts up to the --gpus maximum, at most
// kMaxAdviceMeshes meshes (or 4x the user's own search) each, at most kMaxOtherGpus other GPUs (the nearest
// upgrades in memory). Without the bounds, a cluster of 720,720 GPUs per node or 2,000 GPU profiles made it run for minutes.
constexpr int64_t kMaxGpus = 100'000'000;  // the --gpus range
constexpr int64_t kMaxAdviceMeshes = 100'000;
constexpr size_t kMaxOtherGpus = 6;

struct Advice {
  StateFloor floor;
  int64_t fits_at_gpus = 0;  // smallest count tried where a plan fits (0: none tried fits)
  struct GpuOption {
    std::string gpu, cluster;
    bool fits = false;
    double step_s = 0;
    std::string config;
    // The plan offloads on a cluster profile that gives no host memory: what a node would need, not checked.
    double unchecked_host_bytes = 0;
  };
  std::vector<GpuOption> other_gpus;
  size_t other_gpus_not_tried = 0;  // beyond kMaxOtherGpus
  bool unpinned_fits = false;  // a search without the user's knob pins finds a plan
};

// The GPU profiles (one per name, precision supported) other than the request's: at most kMaxOtherGpus, those with
// more memory than the request's, the least first.
std::vector<const GpuSpec*> other_gpus(const SearchRequest& req, const ProfileSet& profiles, size_t* not_tried) {
  std::vector<const GpuSpec*> gpus;
  for (const auto& e : profiles.entries()) {
    const GpuSpec* g = e.kind == "gpu" ? profiles.find_gpu(e.name) : nullptr;
    if (!g || g->name == req.gpu.name || !precision_supported(*g, req.training)) continue;
    if (std::find(gpus.begin(), gpus.end(), g) == gpus.end()) gpus.push_back(g);
  }
  // The upgrades: GPUs with more memory than the requested one, the nearest first (all of them when none has more).
  if (std::any_of(gpus.begin(), gpus.end(), [&](const GpuSpec* g) { return g->memory_bytes > req.gpu.memory_bytes; })) {
    std::erase_if(gpus, [&](const GpuSpec* g) { return g->memory_bytes <= req.gpu.memory_bytes; });
  }
  std::stable_sort(gpus.begin(), gpus.end(),
                   [](const GpuSpec* a, const GpuSpec* b) { return a->memory_bytes < b->memory_bytes; });
  *not_tried = gpus.size() > kMaxOtherGpus ? gpus.size() - kMaxOtherGpus : 0;
  if (*not_tried > 0) gpus.resize(kMaxOtherGpus);
  return gpus;
}

// The first cluster profile built around `g`, else `fallback`.
ClusterSpec cluster_for(const GpuSpec& g, const ProfileSet& profiles, const ClusterSpec& fallback) {
  for (const auto& ce : profiles.entries()) {
    const ClusterSpec* c = ce.kind == "cluster" ? profiles.find_cluster(ce.name) : nullptr;
    const GpuSpec* cg = c ? profiles.find_gpu(c->gpu) : nullptr;
    if (cg && cg->name == g.name) return *c;
  }
  return fallback;
}

Advice advise(const SearchRequest& req, const ProfileSet& profiles, bool pinned) {
  Advice a;
  a.floor = state_floor(req, req.gpus);
  SearchRequest q = req;
  q.explain = false;
  q.top_k = 1;
  q.progress = nullptr;
  q.objective = Objective::fastest;
  const int64_t budget = std::max(kMaxAdviceMeshes, 4 * mesh_count(req, req.gpus));
  if (pinned) {
    q.space = SearchSpace{};
    q.space.allow_tp_across_nodes = req.space.allow_tp_across_nodes;
    a.unpinned_fits = mesh_count(q, req.gpus) <= budget && !search(q).top.empty();
    q.space = req.space;
  }
  int tried = 0;
  const int64_t most = std::min(kMaxGpus, std::max<int64_t>(req.gpus, a.floor.min_gpus) * 4);
  for (int64_t n : fewest_gpus_counts(most, req.cluster)) {
    if (n <= req.gpus || n < a.floor.min_gpus || tried >= 6) continue;
    ++tried;
    if (mesh_count(q, n) > budget) continue;
    q.gpus = n;
    if (!search(q).top.empty()) {
      a.fits_at_gpus = n;
      break;
    }
  }
  q.gpus = req.gpus;
  for (const GpuSpec* g : other_gpus(req, profiles, &a.other_gpus_not_tried)) {
    q.gpu = *g;
    q.cluster = cluster_for(*g, profiles, req.cluster);
    const SearchResult r = search(q);
    Advice::GpuOption opt{g->name, q.cluster.name, !r.top.empty(), 0, ""};
    if (opt.fits) {
      opt.step_s = r.top[0].time.step_s;
      opt.config = config_line(q, r.top[0]);
      if (r.top[0].parallel.offloads_any() && q.cluster.host_memory_bytes <= 0) {
        opt.unchecked_host_bytes = estimate(candidate_plan(q, r.top[0])).host_bytes_per_node;
      }
    }
    a.other_gpus.push_back(opt);
  }
  return a;
}

// Whether some configuration failed the memory check ("NOTHING FITS"); else every one broke a mesh, batch or schedule
// rule first ("NOTHING VALID").
bool memory_decided(const SearchResult& res) {
  return res.by_reason[static_cast<size_t>(Reject::out_of_memory)].count > 0;
}

// The GPU's memory, and the limit under it when a budget or headroom lowered it: "79.65 GiB" or "79.65 GiB, limit
// 71.68 GiB".
std::string memory_text(const StateFloor& f) {
  if (f.limit_bytes >= f.capacity_bytes) return fmt_bytes(f.capacity_bytes);
  return fmt::format("{}, limit {}", fmt_bytes(f.capacity_bytes), fmt_bytes(f.limit_bytes));
}

// The advice's offload line: what offload was searched, or how to search it.
std::string offload_advice(const SearchRequest& req) {
  const auto& sets = req.space.offload;
  const bool tried = std::any_of(sets.begin(), sets.end(), [](const OffloadSet& o) { return o.any(); });
  if (tried) {
    std::string names;
    for (const OffloadSet& o : sets) {
      if (o.any()) names += (names.empty() ? "" : ", ") + to_string(o);
    }
    return fmt::format("  - offload to host memory: tried ({}); no plan fits with it either\n", names);
  }
  return "  - offload to host memory: --offload optimizer (ZeRO-Offload: fp32 master weights and Adam moments on the "
         "host, the CPU runs the optimizer), optimizer,params (ZeRO-3 parameters too) or activations (each layer's "
         "stored activations, copied back before its backward), or a list of them; --offload auto searches them when "
         "nothing fits\n";
}

std::string advice_text(const SearchRequest& req, const SearchResult& res, const Advice& a) {
  const StateFloor& f = a.floor;
  // When every configuration broke a mesh or batch rule, memory never came into it: say so, not "fits in memory".
  std::string s = memory_decided(res)
                      ? fmt::format("NOTHING FITS: no configuration of {} on {} x {} ({}) fits in memory.\n",
                                    req.model.name, req.gpus, req.gpu.name, memory_text(f))
                      : fmt::format("NOTHING VALID: every configuration of {} on {} x {} breaks a mesh, batch or "
                                    "schedule rule (reasons above); none reached the memory check.\n",
                                    req.model.name, req.gpus, req.gpu.name);
  if (!memory_decided(res)) {
    // Memory never came into it: the model-state floor and other GPUs' memory say nothing here.
    s += "  What it would need: sizes the rules admit (the rejection table names each rule; --explain shows the best "
         "candidate each one refused).\n";
    if (a.unpinned_fits) s += "  - fewer pinned knobs: without your --tp/--pp/--zero/... restrictions a plan fits\n";
    if (a.fits_at_gpus > 0) {
      s += fmt::format("  - another GPU count: a plan fits on {} (parplan suggest ... --gpus {})\n",
                       count_of(a.fits_at_gpus, "GPU"), a.fits_at_gpus);
    }
    // Only V schedules, an odd layer count: no even split places it, a per-chunk layout can (the search tries none).
    const auto& sch = req.space.schedules;
    if (req.model.layers % 2 != 0 && !sch.empty() && std::all_of(sch.begin(), sch.end(), v_shaped)) {
      s += fmt::format("  - a per-chunk layout: {} places 2 chunks on every stage, and {} layers split into none "
                       "evenly; price one with parplan estimate ... --schedule {} --stage-layers a/b,c/d,... (one "
                       "entry per stage, its two chunks' layers)\n",
                       to_string(sch.front()), req.model.layers, to_string(sch.front()));
    }
    return s;
  }
  s += fmt::format(
      "  Model states: {} params x {:.0f} bytes/param (16-bit weights{}, {}-byte gradients, 12 bytes Adam) = {:.3g} TB; "
      "fully sharded over {} (ZeRO-3 x tp x pp) = {:.2f} GB per GPU",
      fmt_count(f.params), f.bytes_per_param,
      f.fp8_copy_bytes_per_param > 0 ? fmt::format(", {:.0f}-byte fp8 weight copies", f.fp8_copy_bytes_per_param) : "",
      req.training.grad_bytes(), f.total_bytes / 1e12,
      count_of(req.gpus, "GPU"), f.per_gpu_bytes / 1e9);
  s += fmt::format(" (with 16-bit gradients, {:.0f} bytes/param: {:.3g} TB, {:.2f} GB per GPU)", f.bytes_per_param_16bit_grads,
                   f.params * f.bytes_per_param_16bit_grads / 1e12, f.per_gpu_bytes_16bit_grads / 1e9);
  s += f.limit_bytes < f.capacity_bytes
           ? fmt::format(" vs the {} limit ({:.2f} GB) of {} of HBM.\n", fmt_bytes(f.limit_bytes), f.limit_bytes / 1e9,
                         fmt_bytes(f.capacity_bytes))
           : fmt::format(" vs {} of HBM ({:.2f} GB).\n", fmt_bytes(f.capacity_bytes), f.capacity_bytes / 1e9);
  if (!f.fits) {
    s += "  The model states alone do not fit even fully sharded: no recompute, ZeRO stage or mesh can help on this count.\n";
  } else if (res.closest) {
    s += "  The model states fit when sharded, but activations and buffers do not: every ZeRO stage and recompute mode "
         "was tried.\n";
  }
  if (res.closest) {
    const Candidate& c = *res.closest;
    s += fmt::format("  Closest: {} needs {} on stage {}, over by {}.\n", config_line(req, c),
                     fmt_bytes(c.peak_bytes), c.peak_stage, fmt_bytes(c.peak_bytes - c.limit_bytes));
  }
  s += "  What it would need:\n";
  s += fmt::format("  - more GPUs: the sharded model states need at least {}", count_of(f.min_gpus, "GPU"));
  if (a.fits_at_gpus > 0) {
    s += fmt::format("; a plan fits on {} (parplan suggest ... --gpus {})\n", count_of(a.fits_at_gpus, "GPU"),
                     a.fits_at_gpus);
  } else if (f.min_gpus > kMaxGpus) {
    s += fmt::format(", more than the {} GPUs parplan plans for\n", kMaxGpus);
  } else {
    s += "; no plan found within 6 larger counts tried\n";
  }
  if (a.unpinned_fits) s += "  - fewer pinned knobs: without your --tp/--pp/--zero/... restrictions a plan fits\n";
  s += offload_advice(req);
  for (const auto& g : a.other_gpus) {
    if (g.fits && g.unchecked_host_bytes > 0) {
      s += fmt::format("  - a GPU with more memory: {} ({}) fits on {} if its nodes hold {} of host memory each (the "
                       "cluster profile gives none, so it is not checked): {} ({} per step)\n",
                       g.gpu, g.cluster, count_of(req.gpus, "GPU"), fmt_bytes(g.unchecked_host_bytes), g.config,
                       fmt_seconds(g.step_s));
    } else if (g.fits) {
      s += fmt::format("  - a GPU with more memory: {} ({}) fits on {}: {} ({} per step)\n", g.gpu, g.cluster,
                       count_of(req.gpus, "GPU"), g.config, fmt_seconds(g.step_s));
    } else {
      s += fmt::format("  - {} ({}): does not fit on {} either\n", g.gpu, g.cluster, count_of(req.gpus, "GPU"));
    }
  }
  if (a.other_gpus_not_tried > 0) {
    s += fmt::format("  ({} other GPU profiles with more memory not tried)\n", a.other_gpus_not_tried);
  }
  return s;
}

nlohmann::json advice_json(const Advice& a) {
  nlohmann::json other = nlohmann::json::array();
  for (const auto& g : a.other_gpus) {
    nlohmann::json j = {{"gpu", g.gpu}, {"cluster", g.cluster}, {"fits", g.fits}};
    if (g.fits) j["step_s"] = g.step_s;
    if (g.unchecked_host_bytes > 0) j["host_bytes_per_node_unchecked"] = g.unchecked_host_bytes;
    other.push_back(j);
  }
  const StateFloor& f = a.floor;
  return {{"model_state_bytes_per_param", f.bytes_per_param},
          {"model_state_bytes", f.total_bytes},
          {"model_state_bytes_per_gpu_fully_sharded", f.per_gpu_bytes},
          {"model_state_bytes_per_gpu_16bit_grads", f.per_gpu_bytes_16bit_grads},
          {"capacity_bytes", f.capacity_bytes},
          {"limit_bytes", f.limit_bytes},
          {"model_states_fit_sharded", f.fits},
          {"min_gpus_for_model_states", f.min_gpus},
          {"fits_at_gpus", a.fits_at_gpus},
          {"fits_without_pins", a.unpinned_fits},
          {"other_gpus", other}};
}

nlohmann::json limit_json(const MemoryLimit& m) {
  return {{"capacity_bytes", m.capacity_bytes}, {"budget_bytes", m.budget_bytes}, {"headroom_bytes", m.headroom_bytes},
          {"limit_bytes", m.limit_bytes}};
}

// "Memory limit 71.68 GiB per GPU = capacity 79.65 GiB - 7.96 GiB headroom (10%)", or "Memory limit 79.65 GiB per
// GPU: the capacity, no headroom".
std::string limit_text(const SearchRequest& req) {
  const MemoryLimit m = request_limit(req);
  std::string s;
  if (m.limit_bytes >= m.capacity_bytes) {
    s = fmt::format("Memory limit {} per GPU: the capacity, no headroom", fmt_bytes(m.capacity_bytes));
  } else {
    s = fmt::format("Memory limit {} per GPU = {} {}", fmt_bytes(m.limit_bytes),
                    m.budget_bytes < m.capacity_bytes ? "budget" : "capacity", fmt_bytes(m.budget_bytes));
    if (m.headroom_bytes > 0) {
      s += fmt::format(" - {} headroom", fmt_bytes(m.headroom_bytes));
      if (req.headroom.fraction > 0) s += fmt::format(" ({:g}%)", req.headroom.fraction * 100);
    }
    if (m.budget_bytes < m.capacity_bytes) s += fmt::format(" (of {})", fmt_bytes(m.capacity_bytes));
  }
  if (req.memory_bytes && static_cast<double>(*req.memory_bytes) > m.capacity_bytes) {
    s += fmt::format(" (--memory {} is more than the GPU has: the capacity is the budget)",
                     fmt_bytes(static_cast<double>(*req.memory_bytes)));
  }
  return s;
}

// Plan i (> 0) of a fastest-step ranking is a tie with the first when their predicted steps differ by less than the
// out-of-sample error of the GPU and precision family (cli/accuracy_note.hpp).
bool is_tie(const SearchRequest& req, const SearchResult& res, size_t i) {
  return i > 0 && req.objective == Objective::fastest &&
         within_model_error(req.gpu, req.training.precision, res.top[i].time.step_s, res.top[0].time.step_s);
}

nlohmann::json result_json(const SearchRequest& req, const SearchResult& res, const std::string& note,
                           const std::string& batch_note, const std::optional<Advice>& advice) {
  nlohmann::json plans = nlohmann::json::array();
  for (size_t i = 0; i < res.top.size(); ++i) {
    nlohmann::json j = candidate_json(req, res.top[i]);
    j["rank"] = i + 1;
    j["reason"] = rank_reason(res.top[i], res.top[0], static_cast<int64_t>(i + 1), req.objective);
    j["tie_with_first"] = is_tie(req, res, i);
    plans.push_back(j);
  }
  nlohmann::json rejections = nlohmann::json::array();
  for (int r = 0; r < kNumRejects; ++r) {
    const RejectStats& st = res.by_reason[static_cast<size_t>(r)];
    if (st.count == 0) continue;
    nlohmann::json j = {{"reason", reject_name(static_cast<Reject>(r))}, {"count", st.count}};
    if (st.best) j["best"] = candidate_json(req, *st.best);
    rejections.push_back(j);
  }
  nlohmann::json j = {
      {"parplan_suggest", 1},
      {"model", to_json(req.model)},
      {"model_note", note},
      {"gpu", req.gpu.name},
      {"cluster", req.cluster.name},
      {"gpus", req.gpus},
      {"objective", to_string(req.objective)},
      {"global_batch", req.training.global_batch},
      {"seq_len", req.training.seq_len},
      {"global_batch_source", batch_note},
      {"memory_limit", limit_json(request_limit(req))},
      {"search", {{"candidates", res.candidates}, {"rejected", res.rejected}, {"evaluated", res.evaluated},
                  {"fit", res.evaluated}, {"below_throughput", res.below_throughput}, {"gpu_counts", res.gpu_counts}}},
      {"fits", !res.top.empty()},
      {"plans", plans},
      {"rejections", rejections},
      {"closest", res.closest ? candidate_json(req, *res.closest) : nlohmann::json(nullptr)},
      {"accuracy", accuracy_json(req.gpu, req.training.precision)}};
  if (req.objective == Objective::fewest_gpus) j["min_tokens_per_s"] = req.min_tokens_per_s;
  if (advice) {
    j["advice"] = advice_json(*advice);
    j["advice"]["headline"] = memory_decided(res) ? "nothing_fits" : "nothing_valid";
  }
  return j;
}

// The model, the search setup and the memory limit.
std::string search_header(const SearchRequest& req, const std::string& note, const std::string& batch_note) {
  std::string s = note + "\n";
  s += fmt::format("Search: {} x {} ({}, {}), objective {}{}\n", req.gpus, req.gpu.name, req.cluster.name,
                   node_shape(req.cluster), to_string(req.objective),
                   req.objective == Objective::fewest_gpus ? fmt::format(" (>= {:.0f} tokens/s)", req.min_tokens_per_s) : "");
  s += fmt::format("Global batch {} x seq {} = {} tokens/step ({})\n", req.training.global_batch, req.training.seq_len,
                   fmt_count(static_cast<double>(req.training.global_batch * req.training.seq_len)), batch_note);
  return s + limit_text(req) + "\n\n";
}

// What the table's columns count: the mesh order, the GPUs tokens/s adds up, MFU's peak.
std::string table_legend(const SearchRequest& req, const SearchResult& res) {
  const Candidate& first = res.top[0];
  const std::string gpus = req.objective == Objective::fewest_gpus ? "each plan's GPUs"
                                                                   : "all " + count_of(first.num_gpus, "GPU");
  const bool partial = std::any_of(res.top.begin(), res.top.end(),
                                   [](const Candidate& c) { return c.parallel.recompute_layers > 0; });
  return fmt::format("mesh: dp x tp x pp x cp{}; tokens/s: {} (#1: {:.0f} per GPU); MFU: of {}\n{}",
                     req.model.is_moe() ? ", ep expert-parallel" : "", gpus,
                     first.time.tokens_per_s / static_cast<double>(first.num_gpus), mfu_basis(candidate_plan(req, first)),
                     partial ? "rc-full-firstK: full recompute of the first K layers of each model chunk only "
                               "(--recompute-layers K)\n"
                             : "");
}

// The ranked plans; `sim_step` (suggest --simulate): the simulated step of each (NaN past the simulated ones), which
// set their order; empty when nothing was simulated. `wide`: the reason as the last column, else on the line below.
std::string plans_table(const SearchRequest& req, const SearchResult& res, const std::vector<double>& sim_step, bool wide) {
  const bool sim = !sim_step.empty();
  std::vector<std::string> head = {"#", "mesh", "knobs", "peak mem", "headroom", "step"};
  if (sim) head.push_back("simulated");
  for (const char* h : {"tokens/s", "MFU", "bubble", "comm"}) head.push_back(h);
  if (wide) head.push_back("why");
  Table t(head, 3);
  for (size_t i = 0; i < res.top.size(); ++i) {
    const Candidate& c = res.top[i];
    const bool simulated = i < sim_step.size() && !std::isnan(sim_step[i]);
    std::vector<std::string> row = {
        std::to_string(i + 1),
        (req.objective == Objective::fewest_gpus ? count_of(c.num_gpus, "GPU") + ": " : "") + mesh_text(c, req.model.is_moe()),
        knobs_text(req, c.parallel), fmt_bytes(c.peak_bytes), fmt_bytes(c.headroom_bytes()), fmt_seconds(c.time.step_s)};
    if (sim) row.push_back(simulated && std::isfinite(sim_step[i]) ? fmt_seconds(sim_step[i]) : "-");
    for (std::string x : {fmt::format("{:.0f}", c.time.tokens_per_s), fmt_percent(c.time.mfu),
                          fmt_percent(c.time.bubble_fraction()), fmt_percent(comm_fraction(c.time))}) {
      row.push_back(std::move(x));
    }
    std::string why = (is_tie(req, res, i) ? "= #1 within model error; " : "") +
                      (simulated ? simulated_rank_reason(c, res.top[0], static_cast<int64_t>(i + 1), sim_step[i], sim_step[0])
                                 : rank_reason(c, res.top[0], static_cast<int64_t>(i + 1), req.objective));
    if (wide) row.push_back(std::exchange(why, ""));
    t.add(row, why);
  }
  return t.render(wide ? 0 : kTextWidth) + table_legend(req, res) +
         accuracy_sentence(req.gpu, req.training.precision, res.top.empty() ? 0.0 : res.top[0].time.step_s, "#1") +
         "\n";
}

// How many configurations were searched and why the others were rejected; --explain's best rejected ones.
std::string rejections_text(const SearchRequest& req, const SearchResult& res, double seconds, bool wide) {
  std::string s = fmt::format("Searched {} in {:.3f} s: {} fit and were estimated",
                              count_of(res.candidates, "configuration"), seconds, res.evaluated);
  if (req.objective == Objective::fewest_gpus) {
    s += fmt::format(" ({} below the throughput; GPU counts tried:", res.below_throughput);
    for (int64_t n : res.gpu_counts) s += fmt::format(" {}", n);
    s += ")";
  }
  s += fmt::format(", {} rejected:\n", res.rejected);
  Table rt(wide ? std::vector<std::string>{"reason", "count", "detail"} : std::vector<std::string>{"reason", "count"}, 1);
  rt.note_indent(2);
  std::string explained;
  for (int r = 0; r < kNumRejects; ++r) {
    const RejectStats& st = res.by_reason[static_cast<size_t>(r)];
    if (st.count == 0) continue;
    std::string detail;
    if (static_cast<Reject>(r) == Reject::out_of_memory && res.closest) {
      detail = fmt::format("closest over by {} ({})", fmt_bytes(res.closest->peak_bytes - res.closest->limit_bytes),
                           config_line(req, *res.closest));
    } else if (st.best) {
      const Candidate& b = *st.best;
      std::string line = fmt::format("  {}: {}", reject_name(static_cast<Reject>(r)), config_line(req, b));
      if (b.has_time) {
        line += fmt::format(" -> {} per step if allowed", fmt_seconds(b.time.step_s));
      } else if (b.has_memory) {
        line += fmt::format(" (would also need {})", fmt_bytes(b.peak_bytes));
      }
      explained += line + "\n      " + describe(static_cast<Reject>(r), candidate_plan(req, b)) + "\n";
    }
    std::vector<std::string> row = {std::string(reject_name(static_cast<Reject>(r))), std::to_string(st.count)};
    if (wide) row.push_back(std::exchange(detail, ""));
    rt.add(row, detail);
  }
  s += rt.render(wide ? 0 : kTextWidth);
  if (req.explain) {
    s += "\nBest candidate rejected for each single reason (estimated as if the constraint were lifted):\n";
    s += explained.empty() ? "  (no candidate was rejected for one reason only)\n" : explained;
  } else {
    s += "(--explain shows the best candidate rejected for each reason)\n";
  }
  return s;
}

std::string render(const SearchRequest& req, const SearchResult& res, const std::string& note, const std::string& batch_note,
                   double seconds, const std::vector<double>& sim_step, bool wide) {
  std::string s = search_header(req, note, batch_note);
  if (!res.top.empty()) s += plans_table(req, res, sim_step, wide);
  return s + rejections_text(req, res, seconds, wide);
}

// The simulated tasks --simulate may spend over all the plans it re-ranks: one largest simulation's worth (measured:
// 15.6 M tasks in 5.5 s and 1.2 GB), so a large batch cannot make K simulations run for minutes.
constexpr int64_t kSimulateTaskBudget = int64_t{1} << 24;

struct SimulatedTop {
  std::vector<double> step_s;  // per ranked plan: simulated step (inf: the schedules cannot order it), NaN: not simulated
  int64_t simulated = 0;       // plans simulated (or found unorderable)
  int64_t over_budget = 0;     // plans among the top K left unsimulated: their graphs passed the task budget
};

// --simulate K: re-rank the top K by the simulator's step time (stable: ties keep the analytical order). Plans whose
// task graphs no longer fit the budget are not simulated; they follow the simulated ones in analytical order.
SimulatedTop simulate_top(const SearchRequest& req, SearchResult& res, int k) {
  const size_t n = std::min(res.top.size(), static_cast<size_t>(k));
  std::vector<std::pair<double, size_t>> sims;
  std::vector<size_t> skipped;
  SimulatedTop out;
  int64_t budget = kSimulateTaskBudget;
  for (size_t i = 0; i < n; ++i) {
    sim::SimOptions so;
    so.record_timeline = false;
    const Plan plan = candidate_plan(req, res.top[i]);
    const int64_t tasks = sim::step_graph_tasks(plan, so, budget);
    if (tasks > budget) {
      skipped.push_back(i);
      ++out.over_budget;
      continue;
    }
    budget -= tasks;
    double t = std::numeric_limits<double>::infinity();
    try {
      t = sim::simulate(plan, so).summary.step_s;
    } catch (const InputError&) {
      // a plan the schedules cannot order ranks last among the simulated ones
    }
    sims.emplace_back(t, i);
  }
  out.simulated = static_cast<int64_t>(sims.size());
  // Simulated steps within step_rank_key's resolution keep the closed form's order (which breaks ties by memory).
  std::stable_sort(sims.begin(), sims.end(),
                   [](const auto& a, const auto& b) { return step_rank_key(a.first) < step_rank_key(b.first); });
  for (size_t i = n; i < res.top.size(); ++i) skipped.push_back(i);
  std::vector<Candidate> top;
  for (const auto& [t, i] : sims) {
    top.push_back(res.top[i]);
    out.step_s.push_back(t);
  }
  for (size_t i : skipped) {
    top.push_back(res.top[i]);
    out.step_s.push_back(std::numeric_limits<double>::quiet_NaN());
  }
  res.top = std::move(top);
  return out;
}

// Adds suggest's flags to `app`, in their --help order: the model flags, the pins, then the search and output flags.
void add_suggest_options(CLI::App& app, SuggestOptions& o) {
  add_model_options(app, o.model);
  const auto pos = CLI::Range(int64_t{1}, int64_t{100'000'000});
  app.add_option("--dp", o.dp, "Pin the data-parallel size")->check(pos);
  app.add_option("--tp", o.tp, "Pin the tensor-parallel size")->check(pos);
  app.add_option("--pp", o.pp, "Pin the pipeline stages")->check(pos);
  app.add_option("--cp", o.cp, "Pin the context-parallel size")->check(pos);
  app.add_option("--ep", o.ep, "Pin the expert-parallel size (MoE)")->check(pos);
  app.add_option("--etp", o.etp,
                 "Pin the expert tensor-parallel size (MoE; 0 = unset: experts split over tp, ep within dp; N = "
                 "Megatron-Core parallel folding; default: both 0 and 1 are tried)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  app.add_option("--vpp", o.vpp, "Pin interleaved chunks per stage (implies --schedule interleaved)")->check(CLI::Range(int64_t{2}, int64_t{1024}));
  app.add_option("--micro-batch", o.micro_batch, "Pin the micro-batch size")->check(pos);
  app.add_option("--max-micro-batch", o.max_micro_batch, "Largest micro-batch tried (default 16)")->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  add_batch_options(app, o.global_batch, o.tokens_per_step);
  app.add_option("--schedule", o.schedule, "Schedules to search, comma-separated: gpipe,1f1b,interleaved,zb-h1,zb-2p,zb-v,dualpipe-v (zb-v and dualpipe-v only when listed)");
  app.add_option("--recompute", o.recompute, "Recompute modes to search, comma-separated: none,selective,selective-op,full");
  app.add_option("--recompute-layers", o.recompute_layers,
                 "Pin full recompute to the first K layers of each model chunk (0 = every layer; default: every layer "
                 "and the smallest K that fits are both tried)");
  app.add_flag("--sp,--sequence-parallel", o.sp, "Pin sequence parallelism on");
  app.add_flag("--no-sp", o.no_sp, "Pin sequence parallelism off");
  app.add_option("--zero", o.zero, "Pin the ZeRO stage 0..3")->check(CLI::Range(int64_t{0}, int64_t{3}));
  app.add_flag("--distributed-optimizer", o.distributed_optimizer, "Pin the distributed optimizer on");
  app.add_option("--dp-replicate", o.dp_replicate,
                 "Pin the HSDP replicas (1 = none; default: 1 and, for sharded plans, the counts whose shard group "
                 "fills 2^k whole NVLink domains or divides one)")
      ->check(pos);
  app.add_flag("--no-distributed-optimizer", o.no_distributed_optimizer,
               "Pin the distributed optimizer off (with --zero 0: no optimizer sharding at all)");
  app.add_option("--zero3-gather-unit", o.zero3_gather_unit,
                 "How ZeRO-3 plans gather parameters: layer (PyTorch FSDP, default) | linear (DeepSpeed ZeRO-3)");
  app.add_flag("--fsdp2", o.fsdp2,
               "ZeRO-3 plans run as PyTorch FSDP2 (torchtitan): the copies around its all-gathers and reduce-scatters "
               "are priced");
  app.add_flag("--no-async-tp", o.no_async_tp,
               "TP plans' backward collectives block (torchtitan's DTensor TP, Megatron-LM before its asynchronous "
               "all-reduce)");
  app.add_flag("--tp-collective-copies", o.tp_collective_copies,
               "Sequence-parallel TP plans copy the whole tensor around each collective (torchtitan's DTensor TP on "
               "[batch, seq, hidden])");
  app.add_flag("--micropipeline-tp", o.micropipeline_tp,
               "Sequence-parallel TP plans of a dense model run micro-pipelined (async) TP: each collective in tp "
               "transfers beside the pieces of its GEMM (torchtitan's enable_async_tensor_parallel)");
  app.add_flag("--no-fp8-param-gather", o.no_fp8_param_gather,
               "fp8: pin 16-bit weights with their fp8 copies (default: candidates that shard the optimizer or the "
               "weights hold them in fp8, --fp8-param-gather pins that for every candidate)");
  app.add_flag("--overlap-p2p", o.overlap_p2p,
               "Interleaved plans overlap pipeline sends with compute (Megatron-Core --overlap-p2p-communication)");
  app.add_option("--moe-dispatcher", o.moe_dispatcher,
                 "alltoall | deepep: how expert-parallel candidates send their tokens (NCCL all-to-all, the default, or "
                 "DeepEP's node-deduplicating kernels)");
  app.add_flag("--overlap-ep", o.overlap_ep,
               "Expert-parallel candidates overlap their all-to-alls with another microbatch's compute (Megatron-Core "
               "--overlap-moe-expert-parallel-comm)");
  app.add_flag("--even-stages", o.even_stages, "Only even pipeline splits (no lighter last stage)");
  app.add_option("--offload", o.offload,
                 "auto (default: optimizer, ZeRO-3 parameter and activation offload searched only when no plan fits "
                 "without them) | none | a list of optimizer, params, activations (pin that set)");
  app.add_option("--headroom", o.headroom,
                 fmt::format("Memory to keep free per GPU: 10% (of the budget) or 8GiB (default {}; 0 for none)",
                             kDefaultHeadroom));
  app.add_option("--memory", o.memory, "Per-GPU memory budget, e.g. 70GiB (default: the GPU's capacity)");
  app.add_option("--objective", o.objective, "fastest (default) | fewest-gpus | headroom");
  app.add_option("--min-tokens-per-s", o.min_tokens_per_s, "Throughput the fewest-gpus objective must reach")->check(CLI::Range(0.0, 1e15));
  app.add_option("--top", o.top, "Plans to show (default 5)")->check(CLI::Range(1, 1000));
  app.add_option("--threads", o.threads, "Search threads (default: hardware concurrency)")->check(CLI::Range(1, 1024));
  app.add_option("--simulate", o.simulate, "Re-rank the top K plans by simulated step time (simulator/; at most 100)")->check(CLI::Range(1, 100));
  app.add_flag("--explain", o.explain, "Show the best rejected candidate for each reason");
  app.add_flag("--wide", o.wide, "Full-width tables, each plan's reason in a column; long lines whole (by default they "
                                 "wrap at 120 columns)");
  app.add_flag("--json", o.json, "Print the result as JSON (schema: docs/json-schema.md)");
  app.add_option("-o,--out", o.out, "Write the winner's Plan document (JSON) for simulate, check and run");
  app.add_option("--emit", o.emit, "With -o: write the winner as megatron | nemo | torchtitan | deepspeed config instead "
                                   "(parplan export; docs/interop.md)");
}

// The "meshes searched" meter on stderr: on a terminal only (a log file gets no progress meter), from the first
// second of the search on, redrawn at most every 0.1 s until the last mesh.
class ProgressMeter {
 public:
  explicit ProgressMeter(std::chrono::steady_clock::time_point start) : start_(start) {}

  // Redraws the meter at `done` of `total` meshes, when it is due.
  void show(int64_t done, int64_t total) {
    if (!terminal_) return;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (t < 1.0 || (done < total && t - last_shown_ < 0.1)) return;
    last_shown_ = t;
    fmt::print(stderr, "\rsuggest: {} / {} meshes searched ({:.1f} s)", done, total, t);
    shown_ = true;
  }

  // Ends the meter's line, when it drew one.
  void finish() const {
    if (shown_) fmt::print(stderr, "\n");
  }

 private:
  std::chrono::steady_clock::time_point start_;
  bool terminal_ = ::isatty(STDERR_FILENO) != 0;
  double last_shown_ = 0;
  bool shown_ = false;
};

// The pins admit no mesh at all (e.g. --tp 3 on 64 GPUs): a usage error naming the pinned sizes, not a memory verdict.
void refuse_pins_without_mesh(const SuggestOptions& o, int64_t gpus) {
  std::string pins;
  auto add = [&pins](const char* flag, const std::optional<int64_t>& v) {
    if (v) pins += fmt::format("{}{} {}", pins.empty() ? "" : ", ", flag, *v);
  };
  add("--dp", o.dp);
  add("--tp", o.tp);
  add("--pp", o.pp);
  add("--cp", o.cp);
  add("--ep", o.ep);
  add("--etp", o.etp);
  add("--micro-batch", o.micro_batch);
  if (!pins.empty()) {
    throw InputError(fmt::format("{}: no configuration of {} GPUs has these sizes (dp x tp x pp x cp must equal "
                                 "--gpus; tp divides the heads, pp the layers, the micro-batch the global batch per "
                                 "replica)",
                                 pins, gpus));
  }
}

// --offload auto: when no plan fits with every state on the GPU (and the objective is not fewest-gpus, whose counts
// each have their own answer), search again with optimizer, ZeRO-3 parameter and activation offload, alone and
// combined, added to the space; the
// result replaces the first (it covers the same plans and more). Returns the line the report opens with when the
// plans it found offload, else "".
std::string search_with_offload(const SuggestOptions& o, SearchRequest& req, SearchResult& res) {
  if (o.offload != "auto" || !res.top.empty() || req.objective == Objective::fewest_gpus) return "";
  if (!(req.cluster.host_link.bandwidth_Bps > 0)) return "";  // no host link: nothing to offload over
  req.space.offload = {OffloadSet{},           OffloadSet{true, false, false}, OffloadSet{true, true, false},
                       OffloadSet{false, false, true}, OffloadSet{true, false, true}, OffloadSet{true, true, true}};
  res = search(req);
  if (res.top.empty()) return "";
  return "No plan fits with every state on the GPU: these plans offload to host memory (off-opt: optimizer states, "
         "CPU Adam; off-opt+par: ZeRO-3 parameters too; off-act: activations; --offload none to turn off).";
}

// Whether any flag narrowed the search space (the advice then also searches without the pins).
bool any_knob_pinned(const SuggestOptions& o) {
  return o.dp || o.tp || o.pp || o.cp || o.ep || o.etp || o.vpp || o.micro_batch || o.zero || o.dp_replicate ||
         !o.schedule.empty() ||
         !o.recompute.empty() || o.recompute_layers || o.sp || o.no_sp || o.distributed_optimizer || o.no_distributed_optimizer;
}

// What a suggest run found, for its report: the ranked plans (re-ranked by --simulate), and the advice when none fits.
struct Outcome {
  const SuggestOptions& o;
  const SearchRequest& req;
  const SearchResult& res;
  const std::string& model_note;
  const std::string& batch_note;
  double seconds;
  const SimulatedTop& simulated;
  const std::optional<Advice>& advice;
  const std::string& offload_note;  // the plans offload because none fit without it (search_with_offload)
};

// The --json report: the search result, with each simulated plan's step and the reason for its simulated rank.
nlohmann::json outcome_json(const Outcome& r) {
  const std::vector<double>& sim_step = r.simulated.step_s;
  nlohmann::json j = result_json(r.req, r.res, r.model_note, r.batch_note, r.advice);
  if (!r.offload_note.empty()) j["offload_note"] = r.offload_note;
  for (size_t i = 0; i < sim_step.size() && i < j["plans"].size(); ++i) {
    if (std::isnan(sim_step[i])) continue;
    if (std::isfinite(sim_step[i])) j["plans"][i]["simulated_step_s"] = sim_step[i];
    j["plans"][i]["reason"] =
        simulated_rank_reason(r.res.top[i], r.res.top[0], static_cast<int64_t>(i + 1), sim_step[i], sim_step[0]);
  }
  if (r.o.simulate > 0) {
    j["simulated_top"] = r.o.simulate;
    j["simulated_plans"] = r.simulated.simulated;
    j["simulated_over_budget"] = r.simulated.over_budget;
  }
  return j;
}

// The text report's --simulate section: each simulated plan's step beside the closed form's.
std::string simulated_text(const Outcome& r) {
  const std::vector<double>& sim_step = r.simulated.step_s;
  std::string text =
      fmt::format("\nRe-ranked the top {} by simulated step time (event simulation of the schedule):\n", r.o.simulate);
  if (r.simulated.over_budget > 0) {
    text += fmt::format("  {} of them not simulated: with the ones before them their step graphs pass {} tasks; "
                        "they follow the simulated ones in analytical order\n",
                        r.simulated.over_budget, kSimulateTaskBudget);
  }
  for (size_t i = 0; i < sim_step.size() && i < r.res.top.size(); ++i) {
    if (std::isnan(sim_step[i])) continue;
    text += fmt::format("  #{} {}: simulated {} vs analytical {}\n", i + 1, config_line(r.req, r.res.top[i]),
                        std::isfinite(sim_step[i]) ? fmt_seconds(sim_step[i]) : "n/a", fmt_seconds(r.res.top[i].time.step_s));
  }
  return text;
}

// The text report: the ranked plans and rejections, the advice when nothing fits, the --simulate comparison, where -o
// wrote the winner.
std::string outcome_text(const Outcome& r) {
  std::string text = render(r.req, r.res, r.model_note, r.batch_note, r.seconds, r.simulated.step_s, r.o.wide);
  if (!r.offload_note.empty()) text = r.offload_note + "\n" + text;
  if (r.advice) text += "\n" + advice_text(r.req, r.res, *r.advice);
  if (r.o.simulate > 0 && !r.res.top.empty()) text += simulated_text(r);
  if (r.res.top.empty() && r.req.objective == Objective::fewest_gpus) {
    text += fmt::format("\nNO PLAN reaches {:.0f} tokens/s on up to {}.\n", r.req.min_tokens_per_s, count_of(r.req.gpus, "GPU"));
  }
  if (!r.o.out.empty() && !r.res.top.empty()) {
    text += is_stdout(r.o.out) ? "\nWrote the #1 plan to stdout\n" : fmt::format("\nWrote the #1 plan to {}\n", r.o.out);
  }
  return text;
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<SuggestOptions>();
  add_suggest_options(app, *o);
  return [o]() {
    const ProfileSet profiles = load_profiles(o->model);
    const Target target = resolve_target(o->model, profiles);
    std::string batch_note;
    SearchRequest req = build_request(*o, target, batch_note);
    const auto start = std::chrono::steady_clock::now();
    std::optional<Framework> emit;
    if (!o->emit.empty()) {
      emit = written_framework(o->emit, "--emit");
      if (o->out.empty()) throw InputError("--emit: needs -o FILE");
    }
    require_writable(o->out, "-o");  // before the search: a bad path is a usage error, whatever the search finds
    refuse_replacing_input(o->out, "-o");
    refuse_shared_outputs({{"-o", o->out}, json_output(o->json)});
    ProgressMeter meter(start);
    req.progress = [&meter](int64_t done, int64_t total) { meter.show(done, total); };
    if (o->simulate > 0 && req.objective != Objective::fastest) {
      throw InputError("--simulate: re-ranks by step time, so it goes with --objective fastest only");
    }
    if (o->simulate > req.top_k) req.top_k = o->simulate;
    SearchResult res = search(req);
    if (res.candidates == 0 && req.objective != Objective::fewest_gpus) refuse_pins_without_mesh(*o, req.gpus);
    if (req.objective != Objective::fewest_gpus) refuse_replicate_without_mesh(*o, res, req.gpus);
    const std::string offload_note = search_with_offload(*o, req, res);
    SimulatedTop simulated;
    if (o->simulate > 0) simulated = simulate_top(req, res, o->simulate);
    if (res.top.size() > static_cast<size_t>(o->top)) res.top.resize(static_cast<size_t>(o->top));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    meter.finish();
    std::optional<Advice> advice;
    if (res.top.empty() && req.objective != Objective::fewest_gpus) advice = advise(req, profiles, any_knob_pinned(*o));
    if (!o->out.empty() && !res.top.empty()) {
      const Plan best = candidate_plan(req, res.top[0]);
      Exported config;
      if (emit) config = export_plan(best, *emit, "parplan suggest");
      write_file_atomic(o->out, emit ? config.text : plan_to_json(best).dump(2) + "\n", "-o");
      for (const std::string& w : config.warnings) fmt::print(stderr, "parplan suggest: warning: {} cannot express {}\n", o->emit, w);
      for (const std::string& w : config.not_written) {
        fmt::print(stderr, "parplan suggest: warning: not written to the {} config: {}\n", o->emit, w);
      }
    }
    const Outcome outcome{*o, req, res, target.model_note, batch_note, seconds, simulated, advice, offload_note};
    if (o->json) {
      fmt::print("{}\n", outcome_json(outcome).dump(2));
    } else {
      // with the plan on stdout, the report goes to stderr
      const std::string text = outcome_text(outcome);
      fmt::print(is_stdout(o->out) ? stderr : stdout, "{}", o->wide ? text : wrap_lines(text));
    }
    return res.top.empty() ? kCheckFailed : kOk;
  };
}

const RegisterCommand reg{{"suggest", "Search every mesh and knob and rank the plans that fit, with reasons", 10, setup}};

}  // namespace
}  // namespace parplan::cli
