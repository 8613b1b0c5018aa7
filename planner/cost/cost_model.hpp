// The cost model: per-GPU memory per pipeline stage and the time of one training step, term by term.
// It composes the formula modules (flops, activations, model_states, collectives, gemm, pipeline); the simulator
// and runtime take their op durations and sizes from LayerCost / DpCost here, never from a second copy.
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include <span>

#include "planner/cost/activations.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/cost/model_states.hpp"
#include "planner/cost/offload.hpp"
#include "planner/cost/pipeline.hpp"
#include "planner/spec/spec.hpp"

namespace parplan {

struct RecomputedLayers;  // planner/spec/config.hpp

// Costs of one transformer layer for one microbatch on one GPU (all layers of a model are alike).
struct LayerCost {
  double forward_s = 0;          // GEMMs + attention + memory-bound ops
  double backward_input_s = 0;   // input-gradient GEMMs + attention backward + memory-bound backward
  double backward_weight_s = 0;  // weight-gradient GEMMs (+ grad_accumulation_s)
  double grad_accumulation_s = 0;  // unfused gradient accumulation pass (part of backward_weight_s; 0 when fused)
  double recompute_s = 0;        // recomputed forward work (selective: attention core; full: whole forward)
  double tp_comm_forward_s = 0;  // TP/SP collectives in the forward (2 all-reduce, or 2 all-gather + 2 reduce-scatter)
  double tp_comm_backward_s = 0;
  double tp_comm_recompute_s = 0;  // full recompute repeats the forward collectives
  double cp_comm_forward_s = 0;    // ring-attention K/V exchange
  double cp_comm_backward_s = 0;
  double ep_comm_forward_s = 0;  // MoE all-to-all dispatch + combine
  double ep_comm_backward_s = 0;
  double zero3_gather_s = 0;     // ZeRO-3 all-gather of the layer's parameters (once per pass)
  double offload_fetch_s = 0;    // parameter offload: the copy of the shard to the GPU, part of zero3_gather_s
  double activation_copy_s = 0;  // activation offload: the layer's stored activations over the host link, each way
  double exposed_offload_s = 0;  // what of those copies outlasts the layer's compute (in the exposed_*_comm_s)
  double exposed_offload_forward_s = 0;  // the forward pass's part of it (the rest is the backward's)
  double tp_bytes = 0;           // bytes of one TP collective (nccl-tests size convention)
  double tp_gather_bytes = 0;    // bytes of one TP all-gather: tp_bytes, or in fp8 (TrainingSpec::fp8_tp_gather)
  double cp_bytes = 0;           // bytes of one CP ring step
  double ep_bytes = 0;           // bytes of one all-to-all
  double params = 0;             // parameters of the layer on this GPU
  double gemm_forward_s = 0;     // the GEMM part of forward_s (what TP overlap can hide behind)
  double attention_forward_s = 0;  // the attention-core part of forward_s
  // Exposed (critical-path) communication after the configured overlaps, per pass and per kind.
  double exposed_forward_comm_s = 0;
  double exposed_backward_comm_s = 0;
  double exposed_recompute_comm_s = 0;
  double exposed_tp_s = 0, exposed_cp_s = 0, exposed_ep_s = 0, exposed_zero3_s = 0;  // all passes of one microbatch
};

// The per-layer costs a step scales: the model's layer and, for a MoE model with leading dense layers
// (ModelSpec::has_dense_layers), one of those, priced as a layer of dense_layer_plan() (spec.hpp); zeros otherwise.
// With full recompute of only some layers (ParallelConfig::recompute_layers > 0), kept and dense_kept price the layers
// it leaves out, as recompute none (zeros otherwise).
// A model mixing windowed and full-attention layers (ModelSpec::mixes_attention): the four above price its windowed
// layers (attention_layer_plan(plan, false)), the four *_full its full-attention ones (zeros otherwise).
struct LayerCosts {
  LayerCost layer, dense;
  LayerCost kept, dense_kept;
  LayerCost full, dense_full, kept_full, dense_kept_full;
};
// The mean per-layer cost over `layers` layers of which `dense` cost dense_lc and the rest lc: what a stage's layer
// terms scale by (the simulator spreads it evenly over the stage's chunks).
LayerCost mean_layer_cost(const LayerCost& lc, const LayerCost& dense_lc, int64_t layers, int64_t dense);
// Stage `stage`'s mean per-layer cost: mean_layer_cost() over its dense and other layers, and with recompute_layers
// over its recomputed layers (c.layer, c.dense) and the rest (c.kept, c.dense_kept; stage_recomputed_layers); a model
// mixing windowed and full-attention layers counts its full-attention ones apart (the *_full costs;
// stage_full_attention_layers), layer by layer.
LayerCost stage_layer_cost(const Plan& plan, int64_t stage, const LayerCosts& c);

// The local experts' grouped GEMMs of one MoE layer on one GPU for one microbatch (layer_gemms() prices them, the
// runtime issues them): `local_experts` batched GEMMs of tokens_per_expert rows each, up [tokens, up_width, hidden]
// (x2 width for SwiGLU) and down [tokens, hidden, down_k]. Routing taken as balanced (expert_comm.hpp): a rank's
// tokens x top_k copies spread evenly over the experts of its ep group (at the most-loaded rank's load). The shared
// experts run as one dense MLP over the microbatch's tokens, split over tp: up [T, shared_up_width, hidden], down
// [T, hidden, shared_down_k] (0 without shared experts). All zeros for a dense model.
struct ExpertGemms {
  int64_t local_experts = 0, tokens_per_expert = 0, up_width = 0, down_k = 0;
  int64_t shared_up_width = 0, shared_down_k = 0;
};
ExpertGemms expert_gemms(const Plan& plan);

// Bytes of the first and last stage's own work for one microbatch on one GPU: edge_cost() prices them, the runtime
// issues them (T tokens of the microbatch, Tn = T / tp with sequence parallelism, A the activation bytes).
struct EdgeBytes {
  double embedding_forward = 0;   // gather the rows: read + write, 2 Tn h A
  double embedding_backward = 0;  // scatter-add into the fp32 gradient, 2 Tn h 4
  double final_norm = 0;          // forward 2 Tn h A; backward twice that
  // The loss over the T x V/tp logits of the vocab shard, per pass. Fused (Megatron's vocab-parallel cross entropy):
  // fp32 write, read, write grad, 12 bytes per logit each pass. PyTorch's F.cross_entropy on pred.float()
  // (fused_cross_entropy false, torchtitan): forward the bf16 -> fp32 cast (read 2, write 4) and log_softmax (three
  // reads of its input: max, sum of exponentials, output; one write), 22 bytes; backward nll_loss's zero-filled
  // gradient (4), log_softmax's backward (reads the gradient twice and the output once, writes 4: 16) and the cast
  // back (read 4, write 2), 26 bytes. ATen's cunn_SoftMaxForward / cunn_SoftMaxBackward for rows of 128256 logits;
  // measured by bench/gpu/step.py's profile on an H200: 3.95 / 4.26 ms for 8192 x 128256 logits, 14.5 / 15.6 bytes
  // per logit at the H200 profile's HBM rate (bench/gpu/results/h200-2026-11-26c).
  double cross_entropy = 0, cross_entropy_backward = 0;
  double ce_all_reduce = 0;       // each of the vocab-parallel cross entropy's 3 all-reduces (tp > 1): T fp32 values
  double sp_gather = 0;           // SP (tp > 1): hidden states gathered before the logits GEMM (A T h), forward,
                                  // and their gradient reduce-scattered in backward
};
EdgeBytes edge_bytes(const Plan& plan);

// Costs that belong to the first / last stage only, per microbatch.
struct EdgeCost {
  double embedding_forward_s = 0, embedding_backward_s = 0;
  double output_forward_s = 0, output_backward_s = 0;  // final norm, logits GEMM, cross entropy (+ the MTP modules)
  // Of the output layer's times, the multi-token prediction modules (mtp_cost in cost_model.cpp): per module the
  // shifted tokens' embedding, the two input norms, the projection, one block (its exposed communication included)
  // and a second output head with its cross entropy.
  double mtp_forward_s = 0, mtp_backward_s = 0;
  // The output layer's TP collectives (edge_bytes), where the runtime issues them: in forward the vocab-parallel cross
  // entropy's 3 all-reduces and, with SP, the gather of the hidden states; in backward, with SP, the reduce-scatter
  // of their gradient.
  double output_tp_comm_s = 0;
  double output_tp_comm_backward_s = 0;
};

// Data-parallel gradient and parameter synchronisation of one stage.
struct DpCost {
  double grad_bytes = 0;         // gradient bytes reduced per step (or per microbatch for ZeRO-2/3)
  double grad_reduce_s = 0;      // all-reduce, or reduce-scatter when sharded (+ HSDP's replica all-reduce)
  double param_gather_s = 0;     // all-gather of updated parameters (distributed optimizer / ZeRO-1/2)
  double bucket_s = 0;           // time of one bucket (the last one cannot be hidden)
  int64_t buckets = 0;
  bool per_microbatch = false;   // ZeRO-2/3 reduce-scatter every microbatch
  int64_t group = 1;             // dp * cp ranks (the shard group, dp / dp_replicate * cp, with HSDP)
  // HSDP (dp_replicate > 1): the reduced gradient shards all-reduced across the replica group of replica_group ranks,
  // their bytes per rank and time (a part of grad_reduce_s).
  int64_t replica_group = 1;
  double replica_bytes = 0, replica_reduce_s = 0;
  // MoE: the part of grad_bytes that is the local experts' gradients, reduced over the expert-data-parallel group of
  // expert_group ranks (layout.hpp); the rest over the dp * cp ranks. 0 and 1 for a dense model.
  double expert_grad_bytes = 0;
  int64_t expert_group = 1;
};

// One stage's DP gradient reduction in the step (step_time): the DpCost, its total time, the part exposed after the
// stage's last pipeline op, and the exposed parameter gather after the optimizer step.
struct StageDpTail {
  DpCost dc;
  double total = 0, exposed = 0, gather = 0;
};

struct StageMemory {
  int64_t stage = 0;
  int64_t layers = 0;
  int64_t in_flight_chunks = 0;  // chunk-microbatches held at peak (a chunk = layers / vpp)
  double params = 0;
  double weights = 0, optimizer = 0;
  double grads = 0;  // ZeRO-2: the shard plus one unit's unsharded gradient (zero_unsharded_grad_bytes, zero3.hpp)
  double activations = 0;           // stored activations at peak (layers + embedding / output layer)
  double offloaded_activations = 0; // activation offload (layers or modules): stored activations on the host (in `host`)
  double recompute_working_set = 0;
  double zero3_buffers = 0;  // gathered parameters + one unit's unsharded gradient (zero3_buffer_bytes, zero3.hpp)
  double workspace = 0, comm_buffers = 0, cuda_context = 0, fragmentation = 0;
  double total = 0;
  double host = 0;  // offloaded states in host memory (ModelStateBytes::host), not in `total`
};

struct StageTime {
  int64_t stage = 0;
  int64_t layers = 0;
  double forward_s = 0, backward_input_s = 0, backward_weight_s = 0, recompute_s = 0;  // compute, per microbatch
  double tp_comm_s = 0, cp_comm_s = 0, ep_comm_s = 0, zero3_comm_s = 0;  // exposed, per microbatch
  double offload_s = 0;  // activation offload copies outlasting the compute, per microbatch
  double p2p_s = 0;                                    // per microbatch
  double per_microbatch_s = 0;
};

struct TimeBreakdown {
  double step_s = 0;
  double pipeline_s = 0;  // forward/backward phase incl. bubble
  double compute_s = 0, bubble_s = 0, tp_comm_s = 0, cp_comm_s = 0, ep_comm_s = 0, pp_comm_s = 0;
  double dp_comm_total_s = 0, dp_comm_exposed_s = 0, optimizer_s = 0, zero3_exposed_s = 0;
  double offload_exposed_s = 0;  // activation offload: host copies outlasting the layer compute they hide behind
  double tokens_per_s = 0;
  double model_flops = 0, hardware_flops = 0;  // per step, whole job
  double mfu = 0, hfu = 0;
  int64_t slowest_stage = 0;
  OffloadStepTime offload;  // the deciding stage's offloaded optimizer step: its parts add up to optimizer_s
  double bubble_fraction() const { return step_s > 0 ? bubble_s / step_s : 0; }
};

// The terms of TimeBreakdown that add up to step_s, in one order, with their names in the Estimate JSON
// ("seconds" / "fractions"), the check baseline and validate --json.
inline constexpr int kNumTimeTerms = 10;
inline constexpr std::array<std::string_view, kNumTimeTerms> kTimeTerms = {
    "compute", "bubble", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "zero3_comm_exposed", "offload_exposed",
    "dp_comm_exposed", "optimizer"};
inline std::array<double, kNumTimeTerms> time_terms(const TimeBreakdown& t) {
  return {t.compute_s,       t.bubble_s,          t.tp_comm_s,          t.cp_comm_s,         t.ep_comm_s,
          t.pp_comm_s,       t.zero3_exposed_s,   t.offload_exposed_s,  t.dp_comm_exposed_s, t.optimizer_s};
}

struct Estimate {
  std::vector<StageMemory> memory;  // per pipeline stage
  std::vector<StageTime> stages;    // per pipeline stage
  LayerCost layer;
  LayerCost dense_layer;  // a MoE model's leading dense layers (LayerCosts::dense); zeros otherwise
  LayerCost kept_layer, kept_dense_layer;  // LayerCosts::kept, dense_kept (recompute_layers); zeros otherwise
  LayerCost full_layer, full_dense_layer, full_kept_layer, full_kept_dense_layer;  // LayerCosts::*_full; zeros otherwise
  LayerCosts layer_costs() const {
    return {layer, dense_layer, kept_layer, kept_dense_layer, full_layer, full_dense_layer, full_kept_layer,
            full_kept_dense_layer};
  }
  EdgeCost edge;
  DpCost dp;
  double p2p_bytes = 0, p2p_s = 0;  // one activation transfer between stages
  int64_t peak_stage = 0;
  double peak_memory_bytes = 0;
  double capacity_bytes = 0;
  double host_bytes_per_node = 0;  // offloaded states of a node's GPUs (the most any stage's GPU holds)
  bool host_fits = true;           // those fit the node's host memory (host_memory_fits, offload.hpp)
  bool fits = false;               // GPU memory and host memory
  TimeBreakdown time;
};

// What the closed form models beyond the plan's own knobs.
struct EstimateOptions {
  // A stage's last gradient send shares its link with the stage's DP reduction (step_time); off, as for the
  // simulator's --no-contention, every transfer has the whole link.
  bool link_sharing = true;
  // The search's bound (search.cpp): a step known to exceed it is not finished. Where a schedule is timed by a list
  // schedule (ZB-V, zb_v_step_s) that stops as soon as its step must exceed the cutoff, step_time() returns step_s =
  // +infinity and no other term. Infinity (the default) times every plan in full.
  double step_cutoff_s = std::numeric_limits<double>::infinity();
};

// Full estimate. The plan must pass validate() (config.hpp).
Estimate estimate(const Plan& plan, const EstimateOptions& options = {});

// Cheap per-stage memory (the search's feasibility bound) and the peak over stages, without allocating.
StageMemory stage_memory(const Plan& plan, int64_t stage);
double peak_memory_bytes(const Plan& plan, int64_t* peak_stage = nullptr);

// Per-plan constants shared by every stage's formulas (computed once per plan; the search computes them once per
// mesh / micro-batch / knob group and evaluates many stages and schedules with them). Same numbers as the
// one-argument functions, which call these.
struct PlanParamCounts {
  ParamCounts counts;
  double layer_params = 0;  // parameters of one layer on one GPU
  double dense_layer_params = 0;  // of one of a MoE model's leading dense layers (0 when it has none)
};
PlanParamCounts plan_param_counts(const Plan& plan);
double stage_params(const Plan& plan, int64_t stage, const PlanParamCounts& pc);
// The last stage's multi-token prediction modules on one GPU (DeepSeek-V3 Sec. 2.2): per module one block of the
// model's last layer kind and the projection (split by tp) with its norms; 0 without MTP.
double mtp_stage_params(const Plan& plan, const PlanParamCounts& pc);
// Of stage_params: the parameters outside the transformer layers (the embedding on the first stage; the final norm
// and the output layer on the output stage), which fp8 training keeps in 16 bits only (model_states.hpp).
double stage_non_layer_params(const Plan& plan, int64_t stage, const PlanParamCounts& pc);

struct StageMemoryInputs {
  PlanParamCounts params;
  ModelStateOptions states;
  double layer_activation_bytes = 0;      // stored per layer per microbatch
  double dense_layer_activation_bytes = 0;  // per leading dense layer of a MoE model (0 when it has none)
  // Full recompute of only some layers (ParallelConfig::recompute_layers > 0): the two above for a layer that is not
  // recomputed, as with recompute none (0 otherwise).
  double kept_layer_activation_bytes = 0, kept_dense_layer_activation_bytes = 0;
  double layer_offloaded_bytes = 0;  // of layer_activation_bytes: the offload_modules' (offloaded_module_bytes)
  double embedding_activation_bytes = 0;  // first stage, per microbatch
  double output_activation_bytes = 0;     // last stage, per microbatch
  double loss_working_set_bytes = 0;      // last stage, once: loss_backward_working_set_bytes()
  // What recompute rebuilds at once for one layer (recompute_working_set_bytes): a MoE (or only) layer's, and a MoE
  // model's leading dense layer's; a stage holds the larger of those of the layers it has.
  double recompute_working_set_bytes = 0, dense_recompute_working_set_bytes = 0;
};
StageMemoryInputs stage_memory_inputs(const Plan& plan);
StageMemory stage_memory(const Plan& plan, int64_t stage, const StageMemoryInputs& in);
// The stored activations of `layers` layers (`dense` of them a MoE model's dense layers) per microbatch, `layer_bytes`
// per MoE (or only) layer; with full recompute of only some layers (`partial`: recompute_layers > 0), the `r`
// recomputed ones at those bytes and the rest at recompute none's (kept_*_activation_bytes). StageMemory sums these
// over a stage's (or, laid out explicitly, each chunk's) layers; the runtime sizes each chunk's stash with them.
double layers_activation_bytes(const StageMemoryInputs& in, int64_t layers, int64_t dense, const RecomputedLayers& r,
                               bool partial, double layer_bytes);

// Per-stage working space of step_time(), kept by callers that evaluate many plans.
struct StepScratch {
  std::vector<StageMicrobatchTime> microbatch;  // per stage
  std::vector<double> lead;                     // per stage: pipeline_time()'s
  std::vector<StageDpTail> dp;                  // per stage, where dp_ready
  std::vector<uint8_t> dp_ready;
  // Per stage and chunk (stage-major): the chunks' last gradient-completing passes where pipeline_time times an
  // order (a V schedule, interleaved chunks of their own sizes); `windows_ready` once this step's are in.
  std::vector<ChunkWindow> windows;
  bool windows_ready = false;
  void resize(size_t stages) {
    if (microbatch.size() < stages) {
      microbatch.resize(stages);
      lead.resize(stages);
      dp.resize(stages);
      dp_ready.resize(stages);
    }
  }
};

// The step-time composition of estimate() from its per-plan parts (layer, edge and p2p costs). `scratch` is resized
// to pp stages; `stages` (optional) receives the per-stage times; `dp` (optional) the deciding stage's DpCost.
TimeBreakdown step_time(const Plan& plan, const LayerCosts& lc, const EdgeCost& edge, double p2p_s,
                        const PlanParamCounts& params, StepScratch& scratch,
                        std::vector<StageTime>* stages = nullptr, DpCost* dp = nullptr,
                        const EstimateOptions& options = {});

// Bytes of memory-bound traffic of one layer for one microbatch on one GPU, counted pass by pass (cost_model.cpp):
// element-wise ops (norms, residual adds, dropout, activation function, rotary) and, with the unfused attention
// kernel, the softmax and dropout passes over the score matrix. The runtime issues exactly these bytes.
struct LayerMemoryBytes {
  double elementwise_forward = 0;
  double elementwise_backward = 0;
  double scores_forward = 0;   // 0 with flash attention
  double scores_backward = 0;
  double fp8_cast_forward = 0;  // fp8 training: the operand casts (fp8.hpp), part of elementwise_*
  double fp8_cast_backward = 0;
  double moe_routing_forward = 0;  // MoE: router and token permutation (moe_routing_bytes), part of elementwise_*
  double moe_routing_backward = 0;
  // Uncompiled element-wise ops (TrainingSpec::compiled_elementwise false): the kernel launches they add over the
  // fused count, per pass (eager_elementwise.hpp).
  double eager_extra_forward_launches = 0;
  double eager_extra_backward_launches = 0;
  double forward() const { return elementwise_forward + scores_forward; }
  double backward() const { return elementwise_backward + scores_backward; }
};
LayerMemoryBytes layer_memory_bound_bytes(const Plan& plan);
// The activation shape of one layer and microbatch on one GPU (activations.hpp), MoE routing counts included.
ActivationShape activation_shape(const Plan& plan);

LayerCost layer_cost(const Plan& plan);
LayerCosts layer_costs(const Plan& plan);  // layer_cost() of the model and of its dense layers
EdgeCost edge_cost(const Plan& plan);
// The DP gradient reduction (and, with sharded optimizer states below ZeRO-3, the parameter all-gather) of a stage
// whose GPUs hold `stage_params` parameters, `expert_params` of them MoE experts: those are reduced over the
// expert-data-parallel group (layout.hpp), the rest over dp cp, one after the other on the link. Pass 0 for a dense
// model.
DpCost dp_cost(const Plan& plan, double stage_params, double expert_params = 0);
// dp_cost() of stage `stage`, with its experts counted when the model is MoE.
DpCost stage_dp_cost(const Plan& plan, int64_t stage, const PlanParamCounts& counts);
double p2p_bytes(const Plan& plan);
double p2p_time_s(const Plan& plan);
// Tied embeddings with pp > 1: the first and the last stage each hold the word embedding, and after the backward the
// two copies' gradients are all-reduced between them before the optimizer (Megatron-LM training.py train_step
// "All-reduce word_embeddings' grad across first and last stages", Megatron-Core finalize_model_grads; DeepSpeed
// PipelineEngine ReduceTiedGrads). 0 for other stages and plans.
double embedding_grad_sync_s(const Plan& plan, int64_t stage);

// Unfused gradient accumulation (TrainingSpec::fused_grad_accumulation false): bytes moved by the separate pass
// that adds one microbatch's weight gradients of `params` parameters to the gradient buffer (cost_model.cpp).
// 0 when the weight-gradient GEMMs accumulate in place.
double grad_accumulation_bytes(const Plan& plan, double params);

// Parameters of the output layer's own weight on the last stage, per GPU: the untied head / tp, Megatron's copy of
// the tied embedding / tp when pp > 1, 0 for a tied weight with pp = 1 (it is the embedding's parameter).
double output_weight_params(const Plan& plan, const ParamCounts& counts);

// Parameters held by one GPU of stage `stage` (after tp / pp / ep splits).
double stage_params(const Plan& plan, int64_t stage);

// Exposed time of a stage's overlapped DP gradient reduction (`buckets` buckets of `bucket_s` on its link) after its
// last backward, which takes `backward_s` for one microbatch over all of the stage's `chunks`. One chunk: the buckets
// leave as that backward produces them, so max(bucket, reduce - backward) stays exposed. Interleaved (chunks v > 1):
// each chunk's buckets (the simulator's split of whole buckets) are final after that chunk's own last backward,
// which Megatron's order runs (c p + 1) backward/v before the end for chunk c (pp = p), so they queue on the link from
// there (Megatron-Core gives every model chunk its own gradient buffer and bucket hooks). Never above the
// unoverlapped buckets x bucket_s.
double dp_reduction_tail_s(double bucket_s, int64_t buckets, double backward_s, int64_t chunks, int64_t pp);
// Chunk c's share of a stage's `buckets` DP gradient buckets over its `chunks` model chunks: buckets / chunks each,
// the first buckets % chunks one more (the closed form's and the simulator's split).
int64_t chunk_buckets(int64_t buckets, int64_t chunks, int64_t c);
// The same over chunks whose last backward windows are given (from a timed order, pipeline.hpp ChunkWindow: a V
// schedule's last W, interleaved chunks of their own sizes' last B; one per chunk): chunk c's buckets (the same
// split) leave during its window and queue on the link in the order the windows start.
double dp_reduction_tail_s(double bucket_s, int64_t buckets, std::span<const ChunkWindow> windows);

// Parameters of a stage's local experts on one GPU (their MLPs; with a dense model, experts = 1, its MLP). Their
// states are sharded over the dp cp / ep ranks that hold the same experts, the rest of the stage's over dp cp.
double stage_expert_params(const Plan& plan, int64_t stage, const ParamCounts& c);
// The same for an MoE model, 0 for a dense one: what dp_cost() and the optimizer step take as `expert_params`.
double moe_expert_params(const Plan& plan, int64_t stage, const ParamCounts& c);

// Adam traffic of one stage's optimizer step on one GPU, for `stage_params` parameters of which `expert_params` are
// MoE experts: optimizer_step_bytes() (model_states.hpp) over the shard this GPU updates, the experts' over their
// own group (as stage_memory() shards their states).
OptimizerStepBytes stage_optimizer_step_bytes(const Plan& plan, double stage_params, double expert_params = 0);

// That traffic's time at achieved HBM bandwidth; with the optimizer offloaded, the host step instead
// (stage_offload_step().total()); plus FSDP2's copies once a step under pipelining (fsdp2_step_copies_s). The
// estimate's optimizer_s is the deciding stage's; the simulator and the runtime take every stage's from here.
double optimizer_step_s(const Plan& plan, double stage_params, double expert_params = 0);

// FSDP2 with pipelining gathers a stage's parameters once a step and reduce-scatters its gradients once, after the
// last microbatch (ParallelConfig::step_zero_stage): its copies once a step, counted with the optimizer step. 0
// without pipelining, where they run with each layer (layer_cost) and the root parameters (edge_cost).
double fsdp2_step_copies_s(const Plan& plan, double stage_params, double expert_params = 0);

// Parameters whose optimizer state one GPU of the stage owns and updates: its dense parameters / (dp cp) and its
// experts / the expert-data-parallel group when the optimizer is sharded (ZeRO >= 1, distributed optimizer), else all.
double stage_owned_params(const Plan& plan, double stage_params, double expert_params = 0);
// The offloaded optimizer step (offload.hpp) of a GPU of the stage; zero without optimizer offload.
OffloadStepTime stage_offload_step(const Plan& plan, double stage_params, double expert_params = 0);

// Micro-pipelined TP (ParallelConfig::micropipeline_tp): what a collective of time `comm` over n ranks leaves exposed
// when split into n - 1 transfers beside the n pieces of the GEMM (`gemm`) it feeds or is fed by: each transfer past
// its piece, and the n - 1 extra launches (`kernel_overhead_s` each). n = 1: `comm`.
double micropipelined_exposed_s(double comm, double gemm, int64_t n, double kernel_overhead_s);

}  // namespace parplan
