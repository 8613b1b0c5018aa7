// Validity of a parallel configuration for a model and cluster: reasons as enums, counted by the search.
// validate() never throws and never allocates; describe() builds the human sentence only when asked.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "planner/spec/spec.hpp"

namespace parplan {

enum class Reject : uint8_t {
  gpu_count_mismatch,     // dp * tp * pp * cp != num_gpus
  tp_crosses_node,        // a tp group crosses an NVLink domain (allowed only with allow_tp_across_nodes)
  tp_not_dividing_heads,  // heads % tp or kv_heads % tp
  tp_not_dividing_ffn,    // ffn_hidden % tp or vocab split
  pp_exceeds_layers,      // pp > layers
  uneven_stages_invalid,  // first/last stage layer counts impossible
  vpp_invalid,            // interleaved needs v >= 2, layers % (pp v) == 0, m % pp == 0; ZB-V vpp <= 2, pp >= 2, even stages
  cp_not_dividing_seq,    // seq % (2 cp) (load-balanced causal ring attention)
  ep_invalid,             // ep must divide experts and dp; dense models need ep == 1
  batch_not_divisible,    // global batch != dp * micro_batch * num_microbatches
  sp_without_tp,          // sequence parallel needs tp > 1
  sp_not_dividing_seq,    // sequence parallel splits each rank's seq / cp tokens over tp: (seq / cp) % tp
  precision_unsupported,  // the GPU has no peak for the precision (e.g. fp8 on A100)
  zb_full_recompute,      // ZB-H1's / ZB-2p's / ZB-V's deferred W needs the activations full recompute discards (not modelled)
  overlap_p2p_not_interleaved,  // overlapped pipeline sends: only the interleaved schedule offers them (Megatron-Core)
  overlap_ep_unpaired,    // overlapped MoE all-to-alls on a schedule that pairs no passes (pairs_passes)
  offload_invalid,        // offload without the sharding it needs, or on a cluster without a host link
  offload_modules_invalid,  // fine-grained activation offload with nothing to offload or beside whole-layer offload
  selective_op_unsupported,  // torchtitan's per-op recompute is modelled for dense layers with fused attention only
  fp8_param_gather_invalid,  // fp8 weights gathered in fp8 need fp8 training and a sharded parameter gather
  recompute_layers_invalid,  // recompute_layers without full recompute, above every chunk's layers, or with offload
  post_validation_invalid,   // Zero Bubble's optimizer post-validation on a schedule that is not zero-bubble
  fsdp2_invalid,             // FSDP2's copies without ZeRO-3 gathered one layer at a time
  zero3_gather_unit_invalid, // a ZeRO-3 gather unit other than the layer (DeepSpeed's per linear) without ZeRO-3
  tp_collective_copies_invalid,  // DTensor's copies around TP collectives without tp > 1 and sequence parallelism
  micropipeline_tp_invalid,  // micro-pipelined TP without tp > 1 and SP, beside overlap_tp_comm, or on a MoE model
  fp8_tp_gather_invalid,     // fp8 TP all-gathers without fp8 training, tp > 1 and sequence parallelism
  fp8_activation_cache_invalid,  // DeepSeek-V3's fp8 activation storage without fp8 training
  cp_with_sliding_window,    // context parallelism over a model with sliding-window attention (not modelled)
  dp_replicate_invalid,      // HSDP replicas not dividing dp, leaving no sharding, without ZeRO, or with split experts
  out_of_memory,          // set by the memory model, not by validate()
  host_out_of_memory,     // offloaded states exceed the node's host memory (set by the search, not by validate())
  count
};
inline constexpr int kNumRejects = static_cast<int>(Reject::count);

struct Validity {
  uint32_t mask = 0;
  bool ok() const { return mask == 0; }
  bool has(Reject r) const { return (mask >> static_cast<int>(r)) & 1u; }
  void add(Reject r) { mask |= 1u << static_cast<int>(r); }
};

struct ValidateOptions {
  bool allow_tp_across_nodes = false;
};

Validity validate(const Plan& plan, const ValidateOptions& opt = {});
// The plan's offload set has the sharding and the host link it needs (validate()'s offload_invalid rule).
bool offload_supported(const Plan& plan);
// HSDP (ParallelConfig::dp_replicate > 1) is modelled for this sharding: a sharded optimizer (ZeRO >= 1 or the
// distributed optimizer), no split experts (ep 1, etp unset) and ZeRO-3 gathered one layer at a time (validate()'s
// dp_replicate_invalid rule, less its divisibility part; the search's replica counts).
bool hsdp_applies(const ParallelConfig& pc);
// DTensor's copies around TP collectives (ParallelConfig::tp_collective_copies) apply: tp > 1 with sequence
// parallelism (validate()'s tp_collective_copies_invalid rule; the search's candidates).
bool tp_collective_copies_apply(const ParallelConfig& pc);
// Micro-pipelined TP (ParallelConfig::micropipeline_tp) applies: tp > 1 with sequence parallelism, not beside
// overlap_tp_comm, on a dense model (validate()'s micropipeline_tp_invalid rule; the search's candidates; validate's
// mapping of a published row's async TP).
bool micropipeline_tp_applies(const ParallelConfig& pc, bool moe_model);
// An fp8 plan with the MXFP8 recipe on a GPU without block-scaled fp8 tensor cores (GpuSpec::mx_block_scaling).
bool mxfp8_unsupported(const Plan& plan);
// Why: "<GPU> has no tensor cores that scale fp8 per 32-element block (...)".
std::string mxfp8_unsupported_reason(const GpuSpec& gpu);
// The plan's offload_modules (fine-grained activation offloading) can run as asked: "" when they can (or there are
// none), else why not (validate()'s offload_modules_invalid rule).
std::string offload_modules_problem(const Plan& plan);
// The sharding part of that rule: optimizer offload needs a sharded optimizer (ZeRO >= 1 or the distributed
// optimizer); parameter offload needs ZeRO-3 and the optimizer offloaded too. True for no offload.
bool sharding_admits_offload(int zero_stage, bool distributed_optimizer, OffloadSet offload);
std::string_view reject_name(Reject r);          // short key, e.g. "tp_not_dividing_heads"
std::string describe(Reject r, const Plan& plan);  // one sentence with the numbers

// Layers held by pipeline stage `stage`: the explicit layout's (ParallelConfig::stage_layout) when given, else an even
// split (the first/last stage counts when set; any remainder goes to the middle stages, which carry no embedding or
// output layer).
int64_t stage_layers(const Plan& plan, int64_t stage);
// Transformer layers in chunk `chunk` of stage `stage` (chunks_per_stage() chunks): the explicit layout's count when
// it gives the stage's chunks, else the stage's layers split evenly (the last chunk takes what an uneven count
// leaves). One chunk per stage: stage_layers().
int64_t chunk_layers(const Plan& plan, int64_t stage, int64_t chunk);
// The most layers any chunk of any stage holds: the largest ParallelConfig::recompute_layers validate() admits (the
// value recomputes every layer of that chunk, as 0 does).
int64_t largest_chunk_layers(const Plan& plan);
// Stage `stage`'s chunks, as an explicit per-chunk layout gives them, hold different layer counts: the chunks are
// priced apart. A derived split (an uneven count's remainder in the last chunk) is priced at the chunks' average.
bool uneven_chunks(const Plan& plan, int64_t stage);
// The layout as text: stages separated by ',', each a layer count or its chunks' counts separated by '/'
// ("3,4,4,3"; "0/1/1,1/1/1,1/1/0"). Throws InputError("<what>: ...") on anything else.
std::vector<std::vector<int64_t>> parse_stage_layout(std::string_view text, std::string_view what);
std::string format_stage_layout(const std::vector<std::vector<int64_t>>& layout);  // parse_stage_layout's text
// Megatron-Core's pipeline layout string (--pipeline-model-parallel-layout; PipelineParallelLayerLayout): virtual
// stages separated by '|', each a run of E (embedding), t (transformer layer), m (multi-token prediction) and L (loss),
// with repeats "t*4" and "(tttt|)*14"; virtual stage v is chunk v / pp of stage v % pp. Returns the transformer
// layers per stage and chunk (stage_layout's form; its chunk count is the virtual stages / pp). E only in the first
// virtual stage, m and L only in the last (where parplan places them); anything else throws InputError("<what>: ...").
std::vector<std::vector<int64_t>> parse_megatron_layout(std::string_view text, int64_t pp, std::string_view what);
// Of those, the MoE model's leading dense layers (ModelSpec::dense_layers) the stage holds, in model order over the
// stages' chunks (interleaved: chunk 0 of every stage, then chunk 1, ...). 0 for a dense model.
int64_t stage_dense_layers(const Plan& plan, int64_t stage);
// The dense layers chunk `chunk` of stage `stage` holds (the same model order); stage_dense_layers sums them.
int64_t chunk_dense_layers(const Plan& plan, int64_t stage, int64_t chunk);
// Full recompute (Recompute::full) of only some layers, ParallelConfig::recompute_layers k: Megatron-Core's block
// method (--recompute-granularity full --recompute-method block --recompute-num-layers k; transformer_block.py
// _checkpointed_forward checkpoints layer l of the block when l < recompute_num_layers, and each virtual pipeline
// chunk is its own TransformerBlock; cited from memory, not checked against a pinned revision): the first min(k, n)
// of the chunk's n layers; all n when k is 0; none without full recompute.
int64_t chunk_recomputed_layers(const Plan& plan, int64_t stage, int64_t chunk);
// The full-attention layers (ModelSpec::layer_full_attention) of a model that mixes them with windowed ones
// (ModelSpec::mixes_attention) among some layers, and of those the MoE model's dense ones; zeros for any other model.
struct FullAttentionLayers {
  int64_t layers = 0;
  int64_t dense = 0;
};
struct RecomputedLayers {
  int64_t layers = 0;  // of stage_layers()
  int64_t dense = 0;   // of those, a MoE model's dense layers (of stage_dense_layers())
  FullAttentionLayers full;  // of those, the full-attention layers (mixed attention only)
};
// Stage `stage`'s full-attention layers, in model order over its chunks (as stage_dense_layers()).
FullAttentionLayers stage_full_attention_layers(const Plan& plan, int64_t stage);
RecomputedLayers chunk_recomputed(const Plan& plan, int64_t stage, int64_t chunk);
// torchtitan's layer-wise selective AC, activation_checkpoint.selective_ac_option N (_apply_ac_to_transformer_block
// wraps a block in full checkpointing when its running block count % N == 0; from memory): every N-th block fully
// recomputed, the rest keep everything. As recompute_layers: floor(the first chunk's layers / N), the same count of
// each chunk as the block method's first K (positions matter to neither memory nor time). 0 when a chunk holds fewer
// than N layers (no block to recompute, which K >= 1 cannot say). validate's torchtitan rows and the torchtitan
// importer both take it.
int64_t every_nth_block_layers(const Plan& plan, int64_t n);
RecomputedLayers stage_recomputed_layers(const Plan& plan, int64_t stage);  // summed over the stage's chunks
// Every stage holds a multiple of `v` layers (interleaving: each stage's layers split into v equal chunks).
bool stage_layers_divisible(const Plan& plan, int64_t v);
// Layers that no even split interleaves (layers % (pp v) != 0): the largest last-stage layer count, a multiple of v,
// that leaves the other pp - 1 stages an equal multiple of v layers, each more than the last stage's. 0 when an even
// split interleaves or there is no such count. 126 layers, pp 16, v 2: 6 (15 x 8 + 6); 96, pp 8, v 2: 0 (12 each).
int64_t interleaved_last_stage_layers(int64_t layers, int64_t pp, int64_t v);

}  // namespace parplan
