// The plan search: enumerates every mesh (dp x tp x pp x cp x ep) and knob of a GPU count, rejects by validate()
// reason and by memory (cheap stage bound first), estimates the step time of what fits, ranks deterministically.
// Multi-threaded over meshes; results are identical for any thread count. Never prints, never throws in the loop.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "planner/spec/config.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/spec/memory_budget.hpp"
#include "planner/spec/spec.hpp"

namespace parplan {

enum class Objective : uint8_t { fastest, fewest_gpus, headroom };
std::string_view to_string(Objective o);
bool parse_enum(std::string_view s, Objective& out);

// Optimizer-state sharding choice: ZeRO stage and Megatron's distributed optimizer.
struct Sharding {
  int zero_stage = 0;
  bool distributed_optimizer = false;
};

// The knobs the search tries. An empty list means "every value the constraints admit" for mesh sizes, and the
// default set below for the rest. A one-element list pins the dimension.
struct SearchSpace {
  std::vector<int64_t> dp, tp, pp, cp, ep, micro_batch;
  // MoE expert tensor parallel sizes tried: 0 = unset (the experts split over tp, ep groups within dp), N = MoE
  // parallel folding with expert tp N (ParallelConfig::etp). Megatron-Core's MoE recipes fold with etp 1.
  std::vector<int64_t> etp{0, 1};
  int64_t max_micro_batch = 16;  // micro-batch sizes tried: divisors of global_batch / dp up to this
  // Not ZB-V or DualPipeV unless asked for (--schedule zb-v / dualpipe-v): their steps time their orders, O(p m) per
  // candidate (pipeline.hpp); ZB-V's took suggest --model megatron-1t --gpus 16384 --threads 1 from 35.5 ms to 10.8 s.
  std::vector<Schedule> schedules{Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved, Schedule::zero_bubble,
                                  Schedule::zb_2p};
  std::vector<int64_t> vpp{2, 3, 4, 6, 8};  // chunks per stage tried with the interleaved schedule
  std::vector<Recompute> recompute{Recompute::none, Recompute::selective, Recompute::full};
  // Full recompute of only the first K layers of each chunk (ParallelConfig::recompute_layers). Unset: every full
  // recompute candidate is tried with every layer recomputed (K = 0) and, where that fits, again with the smallest K
  // in [1, the largest chunk's layers) that fits (memory falls as K grows and the step time rises, so the smallest
  // fitting K is the fastest; found by bisection with the memory bound). Not where the same plan fits with recompute
  // none in the space (it is faster than any K), nor with activation offload (recompute_layers_invalid). Set: every
  // full recompute candidate uses this K (0 = every layer).
  std::optional<int64_t> recompute_layers;
  std::vector<bool> sequence_parallel{false, true};  // on only where tp > 1
  // ZeRO-1 costs exactly what the distributed optimizer costs in the model, so the default tries it once.
  std::vector<Sharding> sharding{{0, false}, {0, true}, {2, false}, {3, false}};
  // HSDP replica counts (ParallelConfig::dp_replicate). Empty: 1, and with a sharding that shards (ZeRO >= 1 or the
  // distributed optimizer) where HSDP is modelled (no split experts, ZeRO-3 gathered per layer), every r whose shard
  // group's block of tp cp dp / r consecutive ranks is 2^k whole NVLink domains or a divisor of the NVLink domain (or
  // one node, where the node does not divide the domain) and leaves a shard group (dp / r >= 2): the shard group's
  // gathers and reduce-scatters within those domains, only the replica all-reduce across them (docs/suggest.md).
  // One value pins it (rejected as dp_replicate_invalid where it does not apply).
  std::vector<int64_t> dp_replicate;
  // Offload sets tried with each sharding that admits them (offload_supported(), config.hpp); the default, none,
  // keeps every state on the GPU. suggest adds the offload sets when no plan fits without them (docs/suggest.md).
  std::vector<OffloadSet> offload{OffloadSet{}};
  bool uneven_stages = true;  // besides the even split, try a last stage one layer lighter (non-interleaved, pp > 1)
  bool allow_tp_across_nodes = false;
  // How ZeRO-3 candidates gather their parameters: a property of the user's framework (PyTorch FSDP: layer,
  // DeepSpeed: linear), not a knob the search tries.
  Zero3GatherUnit zero3_gather_unit = Zero3GatherUnit::layer;
  // ZeRO-3 candidates gathered per layer run as PyTorch FSDP2 (ParallelConfig::fsdp2, its copies): likewise the
  // framework's (torchtitan).
  bool fsdp2 = false;
  // Interleaved candidates overlap their pipeline sends (Megatron-Core --overlap-p2p-communication): likewise the
  // framework's, and only the interleaved schedule offers it.
  bool overlap_p2p = false;
  // fp8 weights (TrainingSpec::fp8_param_gather: Megatron-Core --fp8-param-gather, torchao's float8 all-gather).
  // Unset: every fp8 candidate that shards its optimizer or parameters holds them (the gather they need; there they
  // take less memory and no more time, model_states.hpp and fp8.hpp, so the plain copy is never the better plan);
  // true / false pins them (true rejects the unsharded candidates, fp8_param_gather_invalid).
  std::optional<bool> fp8_param_gather;
  // Tensor parallelism as the framework runs it, for every candidate with tp > 1: Megatron's asynchronous backward
  // collectives (default) or blocking ones (ParallelConfig::async_tp_backward false: torchtitan's DTensor); and, with
  // sequence parallelism, DTensor's copies around each collective (tp_collective_copies) and, in fp8, all-gathers in
  // fp8 (TrainingSpec::fp8_tp_gather: torchtitan's float8 tensorwise TP).
  bool async_tp_backward = true;
  bool tp_collective_copies = false;
  // Micro-pipelined TP (ParallelConfig::micropipeline_tp) for the sequence-parallel candidates of a dense model.
  bool micropipeline_tp = false;
  bool fp8_tp_gather = false;
  // MoE token exchange as the framework runs it, for every candidate with ep > 1: NCCL all-to-all or DeepEP's
  // dispatcher (ParallelConfig::moe_dispatcher), and the 1F1B A2A overlap (overlap_ep_comm, given to the schedules
  // that pair passes: pairs_passes).
  MoeDispatcher moe_dispatcher = MoeDispatcher::alltoall;
  bool overlap_ep = false;
};

struct SearchRequest {
  ModelSpec model;
  GpuSpec gpu;
  ClusterSpec cluster;
  TrainingSpec training;  // global_batch (sequences) is fixed for the whole search; seq_len 0 = the model's
  int64_t gpus = 0;       // the GPU count (fewest_gpus: the largest count tried)
  SearchSpace space;
  // A plan fits when its peak is at most min(memory_bytes, the GPU's capacity) less the headroom (memory_limit()).
  std::optional<int64_t> memory_bytes;
  Headroom headroom;
  Objective objective = Objective::fastest;
  double min_tokens_per_s = 0;  // fewest_gpus: the throughput a plan must reach
  int top_k = 5;
  int threads = 1;
  bool explain = false;  // also keep the best candidate rejected for each single reason
  // Called on the calling thread between work items with (items done, items total); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

// One configuration the search looked at.
struct Candidate {
  ParallelConfig parallel;
  int64_t num_gpus = 0;
  uint32_t reasons = 0;     // Validity mask (out_of_memory included); 0 for a plan that fits
  bool has_memory = false;  // peak_bytes computed
  bool has_time = false;    // time computed (the plan fits; or, for --explain, as if the constraint were lifted)
  double peak_bytes = 0;
  int64_t peak_stage = 0;
  double capacity_bytes = 0;  // the GPU's memory
  double limit_bytes = 0;     // the most the plan may use: capacity, or the budget, less the headroom
  TimeBreakdown time;
  double headroom_bytes() const { return capacity_bytes - peak_bytes; }
};

struct RejectStats {
  int64_t count = 0;               // candidates with this reason (a candidate may have several reasons)
  std::optional<Candidate> best;   // --explain: the best candidate rejected for this reason only
};

struct SearchResult {
  std::vector<Candidate> top;  // ranked, best first
  int64_t candidates = 0;      // configurations enumerated
  int64_t rejected = 0;        // configurations rejected (any reason, memory included)
  int64_t evaluated = 0;       // full step-time estimates of plans that fit (== plans that fit)
  int64_t below_throughput = 0;  // fewest_gpus: fitting plans slower than min_tokens_per_s
  std::array<RejectStats, kNumRejects> by_reason{};
  std::optional<Candidate> closest;  // over the memory limit by the least (the closest miss)
  std::vector<int64_t> gpu_counts;   // counts searched (one entry unless fewest_gpus)
};

// Runs the search (fewest_gpus: over the counts of fewest_gpus_counts(), smallest first, until top_k plans reach
// the throughput). The request must have a positive global batch and GPU count.
SearchResult search(const SearchRequest& req);

// The GPU counts the fewest_gpus objective tries: powers of two up to a node, then whole nodes (every count up to
// 16 nodes, then {4,5,6,7} x 2^k nodes), the same counts of whole NVLink domains where a domain holds several nodes
// (GB200 NVL72: 72, 144, ... beside the 4-GPU trays), and `max_gpus` itself.
std::vector<int64_t> fewest_gpus_counts(int64_t max_gpus, const ClusterSpec& cluster);

// The meshes (dp x tp x pp x cp x ep) search() tries for `gpus`, counted without listing them: a search's work is
// about this many times the knob combinations of a mesh.
int64_t mesh_count(const SearchRequest& req, int64_t gpus);

// The full Plan of a candidate.
Plan candidate_plan(const SearchRequest& req, const Candidate& c);
// Whether a candidate with parallel config `pc` holds its weights in fp8 (SearchSpace::fp8_param_gather).
bool candidate_fp8_weights(const SearchRequest& req, const ParallelConfig& pc);
// Whether it all-gathers its TP activations in fp8 (SearchSpace::fp8_tp_gather; fp8, tp > 1 and SP).
bool candidate_fp8_tp_gather(const SearchRequest& req, const ParallelConfig& pc);

// Strict total order used for ranking under an objective (true when a ranks before b).
bool ranks_before(const Candidate& a, const Candidate& b, Objective o);

// A step time rounded to 21 significant bits for ranking (the 20 stored mantissa bits kept, half up): steps that
// round to the same value tie (no model is exact to a part in a million) and fall to the next criterion (peak memory
// for `fastest`). It is a rounding, not a tolerance: two steps 1e-14 apart can straddle a boundary and two up to
// about 1e-6 apart can tie. A function of the value alone, so comparisons on it stay a strict weak order.
double step_rank_key(double step_s);

}  // namespace parplan
