// The plan search (see search.hpp): enumeration, cheap memory bound, cached cost parts, deterministic ranking.
#include "planner/search/search.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <thread>
#include <utility>

namespace parplan {
namespace {

struct Mesh {
  int64_t dp, tp, pp, cp, ep;
  int64_t etp = 0;  // MoE: 0 = experts split over tp, ep within dp; N = parallel folding with expert tp N
};

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t i = 1; i * i <= n; ++i) {
    if (n % i != 0) continue;
    small.push_back(i);
    if (i != n / i) large.push_back(n / i);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

// The divisors of m, a divisor of n, from the sorted divisors of n: linear in their number where divisors(m) is
// linear in sqrt(m) (10^4 steps for each of thousands of sub-meshes of 10^8 GPUs).
std::vector<int64_t> divisors_of(int64_t m, const std::vector<int64_t>& of_n) {
  std::vector<int64_t> out;
  for (int64_t d : of_n) {
    if (d > m) break;
    if (m % d == 0) out.push_back(d);
  }
  return out;
}

bool allowed(const std::vector<int64_t>& list, int64_t v) {
  return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

// Calls f(mesh) for every expert split of a MoE mesh: ep within dp with the experts split over tp (etp 0), and for
// each expert tp N in the space, MoE parallel folding (Megatron-Core; ParallelConfig::etp): ep x N dividing the
// stage's tp x cp x dp ranks. Folding with N = tp is the unfolded layout again where cp = 1, and at any cp where ep
// is 1 (the experts' data-parallel group is then dp x cp ranks strided by tp either way): with etp 0 in the space
// these are not repeated; with etp pinned to N they are the layouts asked for.
template <class F>
void for_each_expert_split(const SearchSpace& s, const std::vector<int64_t>& all, Mesh m, F&& f) {
  const bool unfolded = std::find(s.etp.begin(), s.etp.end(), 0) != s.etp.end();
  for (int64_t etp : s.etp) {
    m.etp = etp;
    if (etp == 0) {
      for (int64_t ep : divisors_of(m.dp, all)) {
        m.ep = ep;
        if (allowed(s.ep, ep)) f(m);
      }
      continue;
    }
    const int64_t ranks = m.tp * m.cp * m.dp;
    if (ranks % etp != 0 || (etp == m.tp && m.cp == 1 && unfolded)) continue;
    for (int64_t ep : divisors_of(ranks / etp, all)) {
      m.ep = ep;
      if (ep == 1 && etp == m.tp && unfolded) continue;
      if (allowed(s.ep, ep)) f(m);
    }
  }
}

// Calls f(mesh) for every mesh of n GPUs the search space admits, in a fixed order.
template <class F>
void for_each_mesh(const SearchRequest& req, int64_t n, F&& f) {
  const SearchSpace& s = req.space;
  const std::vector<int64_t> all = divisors(n);
  for (int64_t tp : all) {
    if (!allowed(s.tp, tp)) continue;
    for (int64_t pp : divisors_of(n / tp, all)) {
      if (!allowed(s.pp, pp)) continue;
      for (int64_t cp : divisors_of(n / tp / pp, all)) {
        const int64_t dp = n / tp / pp / cp;
        if (!allowed(s.cp, cp) || !allowed(s.dp, dp)) continue;
        if (req.model.is_moe()) {
          for_each_expert_split(s, all, Mesh{dp, tp, pp, cp, 1}, f);
        } else if (allowed(s.ep, 1)) {
          f(Mesh{dp, tp, pp, cp, 1});
        }
      }
    }
  }
}

std::vector<Mesh> meshes(const SearchRequest& req, int64_t n) {
  std::vector<Mesh> out;
  for_each_mesh(req, n, [&](const Mesh& m) { out.push_back(m); });
  return out;
}

auto key(const Candidate& c) {
  const ParallelConfig& p = c.parallel;
  return std::make_tuple(c.num_gpus, p.dp, p.tp, p.pp, p.cp, p.ep, p.etp, p.micro_batch, static_cast<int>(p.schedule), p.vpp,
                         static_cast<int>(p.recompute), p.recompute_layers, p.sequence_parallel, p.zero_stage, p.distributed_optimizer,
                         p.offload.optimizer, p.offload.params, p.first_stage_layers, p.last_stage_layers,
                         p.dp_replicate);
}

// Order of rejected candidates kept as examples: estimated ones by the objective, then by memory, then by config.
bool rejected_before(const Candidate& a, const Candidate& b, Objective o) {
  if (a.has_time != b.has_time) return a.has_time;
  if (a.has_time) return ranks_before(a, b, o);
  if (a.has_memory != b.has_memory) return a.has_memory;
  if (a.has_memory && a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
  return key(a) < key(b);
}

bool closest_before(const Candidate& a, const Candidate& b) {
  if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
  return key(a) < key(b);
}

// Whether a mesh rejected for `r` alone can still be estimated "as if allowed" (for --explain's best rejected
// candidate). Not when the numbers would be meaningless, nor when the rejection leaves stages without layers or with
// impossible layer counts: the cost model divides by them; nor DualPipeV with fewer than 2 pp microbatches, which has
// no order to time (dualpipe_v_order).
bool estimable(Reject r, const ParallelConfig& pc) {
  if (r == Reject::vpp_invalid && pc.schedule == Schedule::dualpipe_v && pc.num_microbatches < 2 * pc.pp) return false;
  return r != Reject::batch_not_divisible && r != Reject::ep_invalid && r != Reject::precision_unsupported &&
         r != Reject::gpu_count_mismatch && r != Reject::pp_exceeds_layers && r != Reject::uneven_stages_invalid &&
         r != Reject::dp_replicate_invalid;
}

struct Accumulator {
  std::vector<Candidate> top;
  int64_t candidates = 0, rejected = 0, evaluated = 0, below_throughput = 0;
  std::array<RejectStats, kNumRejects> by_reason{};
  std::optional<Candidate> closest;
};

void offer_top(std::vector<Candidate>& top, const Candidate& c, size_t k, Objective o) {
  if (k == 0) return;
  if (top.size() == k && !ranks_before(c, top.back(), o)) return;
  auto it = std::upper_bound(top.begin(), top.end(), c,
                             [o](const Candidate& a, const Candidate& b) { return ranks_before(a, b, o); });
  top.insert(it, c);
  if (top.size() > k) top.pop_back();
}

// Evaluates every candidate of one mesh with the cost parts cached at the loop level they depend on.
class Evaluator {
 public:
  Evaluator(const SearchRequest& req, int64_t gpus, Objective rank_by)
      : req_(req),
        rank_by_(rank_by),
        capacity_(static_cast<double>(req.gpu.memory_bytes)),
        limit_(memory_limit(capacity_, req.memory_bytes, req.headroom).limit_bytes) {
    plan_.model = req.model;
    plan_.gpu = req.gpu;
    plan_.cluster = req.cluster;
    plan_.training = req.training;
    plan_.num_gpus = gpus;
    vo_.allow_tp_across_nodes = req.space.allow_tp_across_nodes;
  }

  void run(const Mesh& mesh) {
    ParallelConfig& pc = plan_.parallel;
    pc = ParallelConfig{};
    pc.dp = mesh.dp;
    pc.tp = mesh.tp;
    pc.pp = mesh.pp;
    pc.cp = mesh.cp;
    pc.ep = mesh.ep;
    pc.etp = mesh.etp;
    pc.moe_dispatcher = req_.space.moe_dispatcher;
    pc.overlap_ep_comm = false;  // per schedule: run_schedules()
    const int64_t B = plan_.training.global_batch;
    std::vector<int64_t> mbs = req_.space.micro_batch;
    if (mbs.empty()) {
      if (B % mesh.dp == 0) {
        for (int64_t d : divisors(B / mesh.dp)) {
          if (d <= req_.space.max_micro_batch) mbs.push_back(d);
        }
      } else {
        mbs.push_back(1);  // rejected as batch_not_divisible
      }
    }
    for (int64_t mb : mbs) {
      pc.micro_batch = mb;
      // A pinned micro-batch that does not divide the batch: 1, which validate() rejects as batch_not_divisible.
      pc.num_microbatches = std::max<int64_t>(1, microbatches_per_step(B, mesh.dp, mb));
      have_p2p_ = false;
      for (bool sp : req_.space.sequence_parallel) {
        pc.sequence_parallel = sp;
        pc.async_tp_backward = req_.space.async_tp_backward || pc.tp == 1;
        pc.tp_collective_copies = req_.space.tp_collective_copies && tp_collective_copies_apply(pc);
        pc.micropipeline_tp = req_.space.micropipeline_tp && micropipeline_tp_applies(pc, plan_.model.is_moe());
        plan_.training.fp8_tp_gather = candidate_fp8_tp_gather(req_, pc);
        for (Recompute rc : req_.space.recompute) {
          pc.recompute = rc;
          for (const Sharding& sh : req_.space.sharding) {
            pc.zero_stage = sh.zero_stage;
            pc.zero3_gather_unit = sh.zero_stage >= 3 ? req_.space.zero3_gather_unit : Zero3GatherUnit::layer;
            pc.fsdp2 = req_.space.fsdp2 && sh.zero_stage >= 3 && pc.zero3_gather_unit == Zero3GatherUnit::layer;
            pc.distributed_optimizer = sh.distributed_optimizer;
            plan_.training.fp8_param_gather = candidate_fp8_weights(req_, pc);
            for (const OffloadSet& off : req_.space.offload) {
              if (redundant(sh, off)) continue;
              pc.offload = off;
              // An offload set this sharding cannot run (params without ZeRO-3, optimizer without a sharded
              // optimizer): not a configuration, so neither counted nor rejected.
              if (off.any() && !offload_supported(plan_)) continue;
              replica_counts(replicas_);
              for (int64_t r : replicas_) {
                pc.dp_replicate = r;
                // The output stage's cost (edge_cost) depends on the recompute mode (an MTP block is recomputed with
                // the layers), FSDP2's copies and the fp8 weights this sharding gathers, and every state and
                // collective on the shard group: computed afresh for each.
                have_inputs_ = have_layer_ = have_none_inputs_ = have_edge_ = false;
                run_schedules();
              }
            }
          }
        }
      }
    }
  }

  Accumulator acc;

 private:
  // Whether the search space lists schedule s (dominated() asks it for 1F1B).
  bool in_space(Schedule s) const {
    return std::find(req_.space.schedules.begin(), req_.space.schedules.end(), s) != req_.space.schedules.end();
  }

  // With one data-parallel rank (dp x cp == 1) every sharding option costs what plain replication costs; it is
  // tried once, as {ZeRO 0, no distributed optimizer}, when that option is in the space. With an offload set, which
  // needs a sharded optimizer (and ZeRO-3 for parameters), once, as the first sharding in the space that admits it.
  // With pipelining ZeRO-2/3 run as ZeRO-1 within the step (ParallelConfig::step_zero_stage): tried as the
  // distributed optimizer (or ZeRO-1) when that is in the space.
  bool redundant(const Sharding& sh, const OffloadSet& off) const {
    if (plan_.parallel.pp > 1 && sh.zero_stage >= 2) {
      return std::any_of(req_.space.sharding.begin(), req_.space.sharding.end(), [](const Sharding& o) {
        return o.zero_stage == 1 || (o.zero_stage == 0 && o.distributed_optimizer);
      });
    }
    if (plan_.parallel.dp * plan_.parallel.cp != 1) return false;
    auto admits = [&off](const Sharding& s) {
      if (!off.any()) return s.zero_stage == 0 && !s.distributed_optimizer;
      return sharding_admits_offload(s.zero_stage, s.distributed_optimizer, off);
    };
    if (!off.any() && admits(sh)) return false;
    for (const Sharding& o : req_.space.sharding) {
      if (admits(o)) return &o != &sh;
    }
    return false;
  }

  // SearchSpace::dp_replicate for the current mesh and sharding: the pinned value, or 1 and each r whose shard block
  // (tp cp dp / r consecutive ranks) is a power-of-two number of whole NVLink domains, or divides the NVLink domain
  // (a sub-domain block such as 8, 18 or 36 of GB200 NVL72's 72 GPUs, or one node), where the plan shards and HSDP
  // applies. The whole-domain counts come first, then the sub-domain ones from the largest block down.
  void replica_counts(std::vector<int64_t>& out) const {
    out.clear();
    if (!req_.space.dp_replicate.empty()) {
      out = req_.space.dp_replicate;
      return;
    }
    out.push_back(1);
    const ParallelConfig& pc = plan_.parallel;
    if (!hsdp_applies(pc)) return;
    const int64_t domain = plan_.cluster.placed_domain(plan_.num_gpus), stage = pc.tp * pc.cp * pc.dp;
    const int64_t group = pc.tp * pc.cp;
    auto add = [&](int64_t block) {  // r = stage / block > 1, with at least 2 dp ranks in the shard group
      if (block >= stage || block % group != 0 || stage % block != 0 || block / group < 2) return;
      if (std::find(out.begin(), out.end(), stage / block) == out.end()) out.push_back(stage / block);
    };
    for (int64_t block = domain; block < stage; block *= 2) add(block);
    for (int64_t block = domain - 1; block >= 2 * group; --block) {
      if (domain % block == 0) add(block);
    }
    const int64_t node = plan_.cluster.gpus_per_node;
    if (node > 1 && domain % node != 0) add(node);
  }

  // GPipe has at least 1F1B's step (the same closed form; with ZeRO-2/3 its reduce-scatters have only the backward
  // phase to hide behind) and holds at least its activations on every stage (m microbatches against min(p - i, m)),
  // so it never ranks above 1F1B on any objective; with one stage ZB-H1 and ZB-2p have no bubble to fill (each
  // B_input is followed by its W: same memory) and hide the DP reduction behind W only, so they are never faster.
  // These are tried, as 1F1B, when 1F1B is in the space; pinned (the space without 1F1B) they are searched.
  bool dominated(Schedule s, int64_t pp) const {
    if (!in_space(Schedule::one_f_one_b)) return false;
    return s == Schedule::gpipe || (splits_backward(s) && pp == 1);
  }

  // interleaved_last_stage_layers() for this model (a search over split sizes), cached per (pp, v): run_schedules()
  // asks for it once per micro-batch, recompute and sequence-parallel choice.
  int64_t interleaved_last_stage(int64_t pp, int64_t v) {
    if (pp != last_stage_pp_) {
      last_stage_pp_ = pp;
      last_stage_cache_.clear();
    }
    for (const auto& [key_v, layers] : last_stage_cache_) {
      if (key_v == v) return layers;
    }
    const int64_t layers = interleaved_last_stage_layers(plan_.model.layers, pp, v);
    last_stage_cache_.emplace_back(v, layers);
    return layers;
  }

  void run_schedules() {
    ParallelConfig& pc = plan_.parallel;
    for (Schedule s : req_.space.schedules) {
      if (dominated(s, pc.pp)) continue;
      pc.schedule = s;
      pc.overlap_p2p_comm = s == Schedule::interleaved && req_.space.overlap_p2p;
      // Asked for, the all-to-all overlap goes to the schedules that pair passes; the others are priced without it.
      pc.overlap_ep_comm = req_.space.overlap_ep && pc.ep > 1 && pairs_passes(s, pc.pp, pc.num_microbatches);
      pc.first_stage_layers = pc.last_stage_layers = 0;
      if (s == Schedule::interleaved) {
        for (int64_t v : req_.space.vpp) {
          pc.vpp = v;
          pc.last_stage_layers = 0;
          consider();
          // Layers that no even split interleaves (Llama 3 405B: 126 on 16 stages): a lighter last stage (it also
          // holds the output layer) with v-divisible stages, e.g. 15 x 8 + 6 for v = 2.
          if (req_.space.uneven_stages) {
            pc.last_stage_layers = interleaved_last_stage(pc.pp, v);
            if (pc.last_stage_layers > 0) consider();
          }
        }
        pc.last_stage_layers = 0;  // as the other schedules leave it
        continue;
      }
      pc.vpp = 1;
      consider();
      const int64_t base = plan_.model.layers / pc.pp;
      // Not a V (ZB-V, DualPipeV): its output layer is on the first stage, and its stages split into 2 chunks (the
      // even split only).
      if (req_.space.uneven_stages && pc.pp > 1 && base >= 2 && !v_shaped(s)) {
        pc.last_stage_layers = base - 1;
        consider();
        pc.last_stage_layers = 0;
      }
    }
  }

  // stage_memory_inputs() of this recompute mode, sharding and offload set; its bytes of the layers recompute_layers
  // leaves out are computed only for a plan with recompute_layers > 0, so such a plan refreshes an entry without.
  const StageMemoryInputs& inputs() {
    const bool partial = plan_.parallel.recompute_layers > 0;
    if (!have_inputs_ || (partial && !inputs_partial_)) {
      inputs_ = stage_memory_inputs(plan_);
      have_inputs_ = true;
      inputs_partial_ = partial;
    }
    return inputs_;
  }

  // Calls f(stage) for each stage that can hold the most, each once, in stage order. Where every layer is alike, stage 1 holds at least as much as any other
  // middle stage (middle stages differ only in layer count and in-flight microbatches, both non-increasing with the
  // stage index for every schedule and split), so stages 0, 1 and p-1 decide; a MoE model with dense layers (leading
  // ones, or interleaved: DeepSeek-V3, Llama 4 Maverick) gives stages of one size different weights, so every stage
  // is checked. tests/planner/search/search_test.cpp checks both against peak_memory_bytes(). (peak() is on the
  // search's hot path: no list of stages is built.)
  template <class F>
  void for_each_peak_candidate(F&& f) const {
    const int64_t p = plan_.parallel.pp;
    const bool every = plan_.model.has_dense_layers();
    for (int64_t s = 0; s < p; ++s) {
      if (every || s <= 1 || s == p - 1) f(s);
    }
  }

  // Peak memory over stages (for_each_peak_candidate()).
  double peak(int64_t* at) { return peak(inputs(), at); }

  double peak(const StageMemoryInputs& in, int64_t* at) const {
    double best = -1;
    for_each_peak_candidate([&](int64_t s) {
      const double t = stage_memory(plan_, s, in).total;
      if (t > best) {
        best = t;
        *at = s;
      }
    });
    return best;
  }

  // The offloaded states fit the node's host memory (host_memory_fits) on the stages peak() checks (the host holds
  // only model states, which the other middle stages share with stage 1 where every layer is alike).
  bool host_fits() {
    const StageMemoryInputs& in = inputs();
    bool fits = true;
    for_each_peak_candidate([&](int64_t s) { fits = fits && host_memory_fits(plan_, stage_memory(plan_, s, in).host); });
    return fits;
  }

  TimeBreakdown time(const EstimateOptions& options = {}) {
    const bool partial = plan_.parallel.recompute_layers > 0;
    // With the EP all-to-alls overlapped, a layer's exposed share depends on the schedule's warm-up (ep_overlap).
    const ParallelConfig& pc = plan_.parallel;
    const bool schedule_changed = pc.overlap_ep_comm != layer_overlap_ ||
                                  (pc.overlap_ep_comm && (pc.schedule != layer_schedule_ || pc.vpp != layer_vpp_));
    if (!have_layer_ || (partial && !layer_partial_) || schedule_changed) {  // as inputs(): kept layers only with K > 0
      layer_ = layer_costs(plan_);
      have_layer_ = true;
      layer_partial_ = partial;
      layer_schedule_ = pc.schedule;
      layer_vpp_ = pc.vpp;
      layer_overlap_ = pc.overlap_ep_comm;
    }
    if (!have_edge_) {
      edge_ = edge_cost(plan_);
      have_edge_ = true;
    }
    if (!have_p2p_) {
      p2p_ = p2p_time_s(plan_);
      have_p2p_ = true;
    }
    return step_time(plan_, layer_, edge_, p2p_, inputs().params, scratch_, nullptr, nullptr, options);
  }

  // The step beyond which a plan cannot enter the full top list (step time its first key): a step above it rounds to
  // a later step_rank_key than the last entry's (the key keeps 20 of the 52 mantissa bits, a relative step of at
  // most 2^-20; 2^-18 leaves room for the rounding of the list schedule's sums). Infinity while the list has room,
  // when ranked by headroom, or when every timed plan is counted (fewest_gpus counts those below the throughput).
  double step_cutoff() const {
    if (acc.top.size() != static_cast<size_t>(req_.top_k) || rank_by_ == Objective::headroom ||
        req_.objective == Objective::fewest_gpus) {
      return std::numeric_limits<double>::infinity();
    }
    const double last = acc.top.back().time.step_s;
    return last + std::ldexp(last, -18);
  }

  Candidate make(uint32_t reasons) const {
    Candidate c;
    c.parallel = plan_.parallel;
    c.num_gpus = plan_.num_gpus;
    c.reasons = reasons;
    c.capacity_bytes = capacity_;
    c.limit_bytes = limit_;
    return c;
  }

  // The candidate at the current knobs; with full recompute, at the space's recompute_layers, or at every layer and
  // then at the smallest K that fits (SearchSpace::recompute_layers).
  void consider() {
    ParallelConfig& pc = plan_.parallel;
    const bool full = pc.recompute == Recompute::full;
    pc.recompute_layers = full ? req_.space.recompute_layers.value_or(0) : 0;
    const bool fits = consider_one();
    if (full && fits && !req_.space.recompute_layers && !pc.offload.activations && !none_fits()) {
      pc.recompute_layers = smallest_fitting_recompute_layers();
      if (pc.recompute_layers > 0) consider_one();
    }
    pc.recompute_layers = 0;
  }

  // The smallest K in [1, the largest chunk's layers) whose plan fits in GPU memory, or 0 where none does. A stage's
  // memory does not grow with K (a recomputed layer keeps only its input, a kept one all its activations), and K =
  // the largest chunk's layers recomputes every layer (the plan that fits), so the fitting Ks are a suffix of the
  // range: bisection. The host's share (model states, or activations when offloaded, which K excludes) does not
  // depend on K.
  int64_t smallest_fitting_recompute_layers() {
    ParallelConfig& pc = plan_.parallel;
    int64_t lo = 1, hi = largest_chunk_layers(plan_) - 1, found = 0;
    int64_t at = 0;
    while (lo <= hi) {
      const int64_t k = lo + (hi - lo) / 2;
      pc.recompute_layers = k;
      if (peak(&at) <= limit_) {
        found = k;
        hi = k - 1;
      } else {
        lo = k + 1;
      }
    }
    return found;
  }

  // Whether the plan fits in GPU memory with recompute none, when the space tries none: that candidate is then
  // faster than full recompute of any K (the same plan, without the recomputed forwards), so no K is searched.
  bool none_fits() {
    if (std::find(req_.space.recompute.begin(), req_.space.recompute.end(), Recompute::none) == req_.space.recompute.end()) {
      return false;
    }
    ParallelConfig& pc = plan_.parallel;
    const int64_t k = pc.recompute_layers;
    pc.recompute = Recompute::none;
    pc.recompute_layers = 0;
    if (!have_none_inputs_) {
      none_inputs_ = stage_memory_inputs(plan_);
      have_none_inputs_ = true;
    }
    int64_t at = 0;
    const bool fits = peak(none_inputs_, &at) <= limit_;
    pc.recompute = Recompute::full;
    pc.recompute_layers = k;
    return fits;
  }

  // Counts, validates, bounds the memory of and estimates the current plan; true when it fits in GPU and host memory.
  bool consider_one() {
    ++acc.candidates;
    const Validity v = validate(plan_, vo_);
    if (!v.ok()) {
      ++acc.rejected;
      for (int r = 0; r < kNumRejects; ++r) {
        if (v.has(static_cast<Reject>(r))) ++acc.by_reason[static_cast<size_t>(r)].count;
      }
      if (req_.explain && std::has_single_bit(v.mask)) explain_rejected(v);
      return false;
    }
    int64_t at = 0;
    const double pk = peak(&at);
    if (pk > limit_) {
      ++acc.rejected;
      ++acc.by_reason[static_cast<size_t>(Reject::out_of_memory)].count;
      Candidate c = make(1u << static_cast<int>(Reject::out_of_memory));
      c.has_memory = true;
      c.peak_bytes = pk;
      c.peak_stage = at;
      if (!acc.closest || closest_before(c, *acc.closest)) acc.closest = c;
      return false;
    }
    if (plan_.parallel.offloads_any() && !host_fits()) {
      ++acc.rejected;
      ++acc.by_reason[static_cast<size_t>(Reject::host_out_of_memory)].count;
      return false;
    }
    const TimeBreakdown tb = time({.step_cutoff_s = step_cutoff()});
    ++acc.evaluated;
    if (req_.objective == Objective::fewest_gpus && tb.tokens_per_s < req_.min_tokens_per_s) {
      ++acc.below_throughput;
      return true;
    }
    if (acc.top.size() == static_cast<size_t>(req_.top_k) && rank_by_ != Objective::headroom &&
        step_rank_key(tb.step_s) > step_rank_key(acc.top.back().time.step_s)) {
      return true;  // cannot enter the top list (step time is the first key)
    }
    Candidate c = make(0);
    c.has_memory = c.has_time = true;
    c.peak_bytes = pk;
    c.peak_stage = at;
    c.time = tb;
    offer_top(acc.top, c, static_cast<size_t>(req_.top_k), rank_by_);
    return true;
  }

  void explain_rejected(const Validity& v) {
    const Reject r = static_cast<Reject>(std::countr_zero(v.mask));
    Candidate c = make(v.mask);
    if (estimable(r, plan_.parallel)) {
      c.has_memory = true;
      c.peak_bytes = peak(&c.peak_stage);
      if (c.peak_bytes <= limit_) {
        // Its offloaded states over the node's host memory: it breaks another rule too, so it is not shown as "if
        // allowed" (the explanation is of candidates rejected for r alone).
        if (plan_.parallel.offloads_any() && !host_fits()) return;
        c.has_time = true;
        c.time = time();
      }
    }
    auto& best = acc.by_reason[static_cast<size_t>(r)].best;
    if (!best || rejected_before(c, *best, rank_by_)) best = c;
  }

  const SearchRequest& req_;
  Objective rank_by_;
  double capacity_, limit_;
  Plan plan_;
  ValidateOptions vo_;
  StepScratch scratch_;  // sized by step_time(), which only meshes that pass validate() (pp <= layers) reach
  bool have_inputs_ = false, have_layer_ = false, have_edge_ = false, have_p2p_ = false, have_none_inputs_ = false;
  bool inputs_partial_ = false, layer_partial_ = false;  // inputs_ / layer_ hold the kept layers' (recompute_layers)
  Schedule layer_schedule_ = Schedule::one_f_one_b;    // the schedule and vpp layer_ was priced at (ep_overlap)
  int64_t layer_vpp_ = 1;
  bool layer_overlap_ = false;  // whether layer_ was priced with the all-to-all overlap (only some schedules pair)
  int64_t last_stage_pp_ = -1;
  std::vector<std::pair<int64_t, int64_t>> last_stage_cache_;  // (v, layers) for pp last_stage_pp_
  StageMemoryInputs inputs_, none_inputs_;  // none_inputs_: the same plan's with recompute none (none_fits)
  std::vector<int64_t> replicas_;  // replica_counts() of the current mesh and sharding
  LayerCosts layer_;
  EdgeCost edge_;
  double p2p_ = 0;
};

void merge(Accumulator& into, const Accumulator& a, size_t k, Objective o) {
  into.candidates += a.candidates;
  into.rejected += a.rejected;
  into.evaluated += a.evaluated;
  into.below_throughput += a.below_throughput;
  for (const Candidate& c : a.top) offer_top(into.top, c, k, o);
  for (int r = 0; r < kNumRejects; ++r) {
    RejectStats& dst = into.by_reason[static_cast<size_t>(r)];
    const RejectStats& src = a.by_reason[static_cast<size_t>(r)];
    dst.count += src.count;
    if (src.best && (!dst.best || rejected_before(*src.best, *dst.best, o))) dst.best = src.best;
  }
  if (a.closest && (!into.closest || closest_before(*a.closest, *into.closest))) into.closest = a.closest;
}

// One GPU count; `rank_by` is the within-count order (fewest_gpus ranks by step time within a count).
Accumulator search_count(const SearchRequest& req, int64_t gpus, Objective rank_by) {
  const std::vector<Mesh> work = meshes(req, gpus);
  const int threads = std::max(1, std::min<int>(req.threads, static_cast<int>(work.size())));
  std::atomic<size_t> next{0};
  std::atomic<int64_t> done{0};
  std::vector<Evaluator> evals;
  evals.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) evals.emplace_back(req, gpus, rank_by);
  auto work_loop = [&](Evaluator& ev, bool report) {
    for (size_t i = next++; i < work.size(); i = next++) {
      ev.run(work[i]);
      ++done;
      if (report && req.progress) req.progress(done.load(), static_cast<int64_t>(work.size()));
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work_loop, std::ref(evals[static_cast<size_t>(t)]), false);
  work_loop(evals[0], true);
  for (auto& th : pool) th.join();
  Accumulator total;
  for (const Evaluator& ev : evals) merge(total, ev.acc, static_cast<size_t>(req.top_k), rank_by);
  return total;
}

}  // namespace

std::string_view to_string(Objective o) {
  switch (o) {
    case Objective::fastest:
      return "fastest";
    case Objective::fewest_gpus:
      return "fewest-gpus";
    case Objective::headroom:
      return "headroom";
  }
  return "?";
}

bool parse_enum(std::string_view s, Objective& out) {
  for (Objective o : {Objective::fastest, Objective::fewest_gpus, Objective::headroom}) {
    if (s == to_string(o)) {
      out = o;
      return true;
    }
  }
  return false;
}

double step_rank_key(double step_s) {
  // Round the 52 stored mantissa bits to their top 20, half up (a carry moves into the exponent, as rounding
  // should); the search calls this for every evaluated plan, where frexp / ldexp cost ~5% of the time.
  // inf stays inf, the largest finite values round to inf, a NaN whose payload is only in the low 32 bits becomes
  // inf (a step is never NaN); the order of magnitudes is kept.
  constexpr uint64_t kHalf = uint64_t{1} << 31, kLow = (uint64_t{1} << 32) - 1;
  return std::bit_cast<double>((std::bit_cast<uint64_t>(step_s) + kHalf) & ~kLow);
}

bool ranks_before(const Candidate& a, const Candidate& b, Objective o) {
  const double sa = step_rank_key(a.time.step_s), sb = step_rank_key(b.time.step_s);
  switch (o) {
    case Objective::fewest_gpus:
      if (a.num_gpus != b.num_gpus) return a.num_gpus < b.num_gpus;
      [[fallthrough]];
    case Objective::fastest:
      if (sa != sb) return sa < sb;
      if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
      break;
    case Objective::headroom:
      if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
      if (sa != sb) return sa < sb;
      break;
  }
  return key(a) < key(b);
}

std::vector<int64_t> fewest_gpus_counts(int64_t max_gpus, const ClusterSpec& cluster) {
  std::vector<int64_t> c;
  for (int64_t n = 1; n < cluster.gpus_per_node; n *= 2) c.push_back(n);
  for (const int64_t unit : {cluster.gpus_per_node, cluster.nvlink_domain()}) {
    for (int64_t k = 1; k <= 16; ++k) c.push_back(k * unit);
    for (int64_t j = 2; j < 40; ++j) {  // from 20, 24, 28 units (4 x 2^2 = 16 is already listed)
      for (int64_t f : {4, 5, 6, 7}) {
        const int64_t k = f << j;
        if (k > 16 && k * unit <= max_gpus) c.push_back(k * unit);
      }
    }
  }
  c.push_back(max_gpus);
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  c.erase(std::remove_if(c.begin(), c.end(), [&](int64_t n) { return n > max_gpus || n < 1; }), c.end());
  return c;
}

SearchResult search(const SearchRequest& req) {
  SearchResult r;
  std::vector<int64_t> counts{req.gpus};
  if (req.objective == Objective::fewest_gpus) counts = fewest_gpus_counts(req.gpus, req.cluster);
  const Objective within = req.objective == Objective::fewest_gpus ? Objective::fastest : req.objective;
  Accumulator total;
  for (int64_t n : counts) {
    const Accumulator a = search_count(req, n, within);
    r.gpu_counts.push_back(n);
    merge(total, a, static_cast<size_t>(req.top_k), req.objective);
    if (req.objective == Objective::fewest_gpus && total.top.size() >= static_cast<size_t>(req.top_k)) break;
  }
  r.top = std::move(total.top);
  r.candidates = total.candidates;
  r.rejected = total.rejected;
  r.evaluated = total.evaluated;
  r.below_throughput = total.below_throughput;
  r.by_reason = total.by_reason;
  r.closest = total.closest;
  if (req.explain && r.closest) r.by_reason[static_cast<size_t>(Reject::out_of_memory)].best = r.closest;
  return r;
}

int64_t mesh_count(const SearchRequest& req, int64_t gpus) {
  int64_t n = 0;
  for_each_mesh(req, gpus, [&](const Mesh&) { ++n; });
  return n;
}

Plan candidate_plan(const SearchRequest& req, const Candidate& c) {
  Plan p;
  p.model = req.model;
  p.gpu = req.gpu;
  p.cluster = req.cluster;
  p.num_gpus = c.num_gpus;
  p.parallel = c.parallel;
  p.training = req.training;
  p.training.fp8_param_gather = candidate_fp8_weights(req, c.parallel);
  p.training.fp8_tp_gather = candidate_fp8_tp_gather(req, c.parallel);
  return p;
}

bool candidate_fp8_tp_gather(const SearchRequest& req, const ParallelConfig& pc) {
  return req.space.fp8_tp_gather && req.training.precision == Precision::fp8 && pc.tp > 1 && pc.sequence_parallel;
}

bool candidate_fp8_weights(const SearchRequest& req, const ParallelConfig& pc) {
  if (req.training.precision != Precision::fp8) return req.space.fp8_param_gather.value_or(false);
  if (req.space.fp8_param_gather) return *req.space.fp8_param_gather;
  return pc.shards_optimizer();  // the gather fp8 weights need (validate: fp8_param_gather_invalid)
}

}  // namespace parplan
