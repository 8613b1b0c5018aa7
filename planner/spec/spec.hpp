// Specs: model, GPU, cluster, training and the parallel configuration; the Plan ties them together.
// Units live in names (bytes, _s, flops, _Bps); conversion from JSON units happens once, in spec_json.cpp.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace parplan {

// A product of mesh sizes that saturates at INT64_MAX instead of wrapping (a wrapped product can be 0 or a small
// number that passes the GPU-count check: tp = pp = 2^26, cp = 2^12 is 2^64).
inline int64_t saturating_product(std::initializer_list<int64_t> factors) {
  int64_t out = 1;
  for (int64_t x : factors) {
    if (__builtin_mul_overflow(out, x, &out)) return INT64_MAX;
  }
  return out;
}
// Microbatches per pipeline per step: the global batch over dp x micro-batch sequences when that is a whole number
// of at least one, else 0. The one derivation the flags, plan documents, validate's run mapping and the search share;
// each names its own mismatch (or, in the search, leaves it to validate()'s batch check).
inline int64_t microbatches_per_step(int64_t global_batch, int64_t dp, int64_t micro_batch) {
  const int64_t unit = saturating_product({dp, micro_batch});
  if (unit <= 0 || global_batch < unit || global_batch % unit != 0) return 0;
  return global_batch / unit;
}
// The most GPUs a mesh may span: the --gpus flag's and the plan document's limit.
inline constexpr int64_t kMaxMeshGpus = 100'000'000;
// The most sequences one step may hold: the plan document's limit on training.global_batch.
inline constexpr int64_t kMaxGlobalBatch = 1'000'000'000;

enum class DType : uint8_t { fp32, tf32, bf16, fp16, fp8 };
inline constexpr int kNumDTypes = 5;
enum class FfnType : uint8_t { gelu, swiglu };
enum class NormType : uint8_t { layernorm, rmsnorm };
enum class PositionEmbedding : uint8_t { learned, rotary, alibi };
enum class Precision : uint8_t { bf16, fp16, fp8 };  // fp8: GEMMs in fp8, everything else in bf16
// selective: Megatron's, the attention core recomputed (Korthikanti et al. 2022); selective_op: torchtitan's per-op
// selective activation checkpointing (the outputs of every other matmul and of attention kept, the rest recomputed);
// full: the whole layer recomputed from its input.
enum class Recompute : uint8_t { none, selective, full, selective_op };
// Megatron-Core's --recompute-modules (megatron/core/transformer/transformer_config.py, recompute_modules): what
// --recompute-granularity selective rebuilds in the backward. core_attn: the attention core (the default); layernorm:
// the outputs of the input and pre-MLP norms; moe_act: the experts' activation function; mla_up_proj: MLA's
// up-projections (and rotary embedding); mlp: a dense layer's MLP; moe: the MoE layer; shared_experts: its shared
// experts. A module that does not apply to a layer does nothing there, as in Megatron-Core (activations.hpp).
enum class RecomputeModule : uint8_t { core_attn, layernorm, moe_act, mla_up_proj, mlp, moe, shared_experts };
inline constexpr int kNumRecomputeModules = 7;
struct RecomputeModules {
  uint8_t bits = 1;  // {core_attn}, Megatron-Core's default
  bool has(RecomputeModule r) const { return ((bits >> static_cast<int>(r)) & 1u) != 0; }
  void add(RecomputeModule r) { bits = static_cast<uint8_t>(bits | (1u << static_cast<int>(r))); }
  bool is_default() const { return bits == 1; }
  bool operator==(const RecomputeModules&) const = default;
};
// The module names in the fixed order above, separated by `sep` ("core_attn,layernorm"; Megatron-LM's arguments
// " ", a NeMo YAML list ", ").
std::string to_string(RecomputeModules r, std::string_view sep = ",");
// One module name ("core_attn", ...); false on anything else.
bool parse_recompute_module(std::string_view s, RecomputeModule& out);
// A list of module names separated by `sep`, each at most once, at least one; false on anything else.
bool parse_recompute_modules(std::string_view s, RecomputeModules& out, char sep = ',');
inline constexpr std::string_view kRecomputeModuleChoices =
    "a comma-separated list of core_attn, layernorm, moe_act, mla_up_proj, mlp, moe, shared_experts";
// zero_bubble = ZB-H1; zb_v = ZB-V (Qi et al. 2023/2024: two chunks per stage placed in a V, stage i holding model
// chunks i and 2p - 1 - i, so the first stage holds the first and the last chunk); dualpipe_v = DualPipeV
// (DeepSeek-AI's DualPipe repository: the same V, its own fixed order with overlapped forward-and-backward pairs,
// planner/cost/pipeline.hpp dualpipe_v_order).
enum class Schedule : uint8_t { gpipe, one_f_one_b, interleaved, zero_bubble, zb_2p, zb_v, dualpipe_v };
// The schedules that split each backward into B (input gradient) and W (weight gradient): the Zero Bubble ones
// (ZB-H1, ZB-2p, ZB-V) and DualPipeV.
constexpr bool splits_backward(Schedule s) {
  return s == Schedule::zero_bubble || s == Schedule::zb_2p || s == Schedule::zb_v || s == Schedule::dualpipe_v;
}
// The schedules that place 2 chunks per stage in a V (ZB-V, DualPipeV): stage i holds virtual stages i and 2p - 1 - i.
constexpr bool v_shaped(Schedule s) { return s == Schedule::zb_v || s == Schedule::dualpipe_v; }
// The orders that run one microbatch's forward beside another's backward, where the MoE all-to-alls can hide
// (ParallelConfig::overlap_ep_comm): Megatron-Core's combined 1F1B without a pipeline (pp 1) or with the interleaved
// schedule (its --overlap-moe-expert-parallel-comm needs a virtual pipeline when pp > 1: megatron/training/
// arguments.py as recalled, not checked against a pinned revision), and DualPipeV's F & B pairs;
// each with two microbatches at least (one has no other to pair with).
constexpr bool pairs_passes(Schedule s, int64_t pp, int64_t microbatches) {
  return microbatches >= 2 &&
         (s == Schedule::interleaved || s == Schedule::dualpipe_v || (pp == 1 && s == Schedule::one_f_one_b));
}
// flash: the fused attention kernel the GPU profile's attention fractions describe (Transformer Engine's cuDNN
// attention on Hopper); flash2: FlashAttention-2, PyTorch SDPA's flash backend (gemm.flash2_* fractions); unfused:
// score matrix materialised.
enum class AttentionKernel : uint8_t { flash, flash2, unfused };
// How fp8 GEMM operands are scaled (planner/cost/fp8.hpp): delayed (amax from the history of earlier steps,
// Transformer Engine's DelayedScaling), tensorwise / rowwise (current scaling: an amax pass over the tensor or each
// row before the cast; torchao float8's recipes), blockwise (1x128 / 128x128 tiles, DeepSeek-V3) and mxfp8 (32-element
// blocks with e8m0 scales, Blackwell), whose scales come out of the cast kernel itself.
enum class Fp8Recipe : uint8_t { delayed, tensorwise, rowwise, blockwise, mxfp8 };
// What ZeRO-3 all-gathers at a time (and prefetches one ahead): one transformer layer (PyTorch FSDP wrapping each
// block) or one linear layer (DeepSpeed ZeRO-3's per-submodule fetch): see planner/cost/zero3.hpp.
enum class Zero3GatherUnit : uint8_t { layer, linear };
// How MoE tokens reach their experts' ranks (planner/cost/expert_comm.hpp): NCCL all-to-all of every routed copy
// (Megatron-Core --moe-token-dispatcher-type alltoall), or DeepEP's dispatch and combine kernels, which send a token
// over InfiniBand once per destination node and forward it over NVLink inside the node (flex + DeepEP).
enum class MoeDispatcher : uint8_t { alltoall, deepep };

std::string_view to_string(DType);
std::string_view to_string(FfnType);
std::string_view to_string(NormType);
std::string_view to_string(PositionEmbedding);
std::string_view to_string(Precision);
std::string_view to_string(Recompute);
std::string_view to_string(Schedule);
std::string_view to_string(AttentionKernel);
std::string_view to_string(Fp8Recipe);
std::string_view to_string(Zero3GatherUnit);
std::string_view to_string(MoeDispatcher);
// Parsers return false on an unknown name (callers build the error message with the flag or JSON path).
bool parse_enum(std::string_view s, DType& out);
bool parse_enum(std::string_view s, FfnType& out);
bool parse_enum(std::string_view s, NormType& out);
bool parse_enum(std::string_view s, PositionEmbedding& out);
bool parse_enum(std::string_view s, Precision& out);
bool parse_enum(std::string_view s, Recompute& out);
bool parse_enum(std::string_view s, Schedule& out);
bool parse_enum(std::string_view s, AttentionKernel& out);
bool parse_enum(std::string_view s, Fp8Recipe& out);
bool parse_enum(std::string_view s, Zero3GatherUnit& out);
bool parse_enum(std::string_view s, MoeDispatcher& out);

// What lives in host memory instead of GPU memory (planner/cost/offload.hpp). optimizer: the fp32 master weights and
// Adam moments, updated by the host CPU (ZeRO-Offload, DeepSpeed offload_optimizer, Megatron-Core
// --optimizer-cpu-offload); with ZeRO-2/3 also the gradient shard. params: the 16-bit parameter shard of ZeRO-3
// (ZeRO-Infinity offload_param, FSDP CPUOffload(offload_params=True)), fetched to the GPU for each gather.
// activations: each layer's stored activations, copied to the host during the forward and back before the layer's
// backward (TransformerEngine's CPU offload, Megatron-Core --cpu-offloading; activation_offload_window(),
// planner/cost/offload.hpp).
struct OffloadSet {
  bool optimizer = false;
  bool params = false;
  bool activations = false;
  bool any() const { return optimizer || params || activations; }
  // The model states part (optimizer, params): what needs a sharded optimizer and the CPU's Adam step.
  bool states() const { return optimizer || params; }
  bool operator==(const OffloadSet&) const = default;
};
// "none", or the offloaded parts in a fixed order, comma-separated ("optimizer,params,activations").
std::string to_string(OffloadSet o);
// "none" or a comma-separated list of optimizer, params, activations (each at most once, none alone); false on
// anything else.
bool parse_offload(std::string_view s, OffloadSet& out);
inline constexpr std::string_view kOffloadChoices = "none, or a comma-separated list of optimizer, params, activations";
// Megatron-Core's fine-grained activation offloading (--fine-grained-activation-offloading --offload-modules;
// megatron/core/transformer/transformer_config.py, fine_grained_activation_offloading / offload_modules, whose
// docstring lists attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm, expert_fc1, moe_act: "offload the input of"
// each; cited from memory, not checked against a pinned revision): the tensors a module saves for its backward go to
// host memory after its forward and come back before its backward. parplan prices the two MoE expert modules: expert_fc1 (the experts' first grouped linear's saved input,
// the permuted routed token copies) and moe_act (the experts' activation function's saved input, the fc1 output);
// planner/cost/activations.hpp offloaded_module_bytes(). The other names are refused as not modelled.
enum class OffloadModule : uint8_t { expert_fc1, moe_act };
inline constexpr int kNumOffloadModules = 2;
struct OffloadModules {
  uint8_t bits = 0;  // none: no fine-grained offloading
  bool has(OffloadModule r) const { return ((bits >> static_cast<int>(r)) & 1u) != 0; }
  void add(OffloadModule r) { bits = static_cast<uint8_t>(bits | (1u << static_cast<int>(r))); }
  bool empty() const { return bits == 0; }
  bool operator==(const OffloadModules&) const = default;
};
// The module names in the fixed order above, separated by `sep` ("expert_fc1,moe_act").
std::string to_string(OffloadModules r, std::string_view sep = ",");
// One module name parplan prices ("expert_fc1", "moe_act"); false on anything else.
bool parse_offload_module(std::string_view s, OffloadModule& out);
// A list of module names separated by `sep`, each at most once, at least one; false on anything else.
bool parse_offload_modules(std::string_view s, OffloadModules& out, char sep = ',');
// Megatron-Core's other offload_modules names (attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm): a known module
// parplan does not price, for the error message.
bool is_unpriced_offload_module(std::string_view s);
inline constexpr std::string_view kOffloadModuleChoices =
    "a comma-separated list of expert_fc1, moe_act (Megatron-Core's attn_norm, qkv_linear, core_attn, attn_proj and "
    "mlp_norm are not modelled)";

// A decoder-only transformer.
struct ModelSpec {
  std::string name;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;    // == heads for multi-head attention; fewer for GQA/MQA
  int64_t ffn_hidden = 0;  // MLP inner width (per expert for MoE)
  FfnType ffn_type = FfnType::gelu;
  int64_t vocab = 0;
  int64_t seq_len = 0;  // default training sequence length
  bool tied_embeddings = true;
  bool bias = true;     // linear-layer biases (GPT-3 yes, Llama no)
  bool dropout = true;  // dropout layers (adds masks to activation memory)
  NormType norm = NormType::layernorm;
  PositionEmbedding position = PositionEmbedding::learned;
  int64_t experts = 1;  // MoE routed experts per layer; 1 = dense
  int64_t top_k = 1;    // routed experts each token goes to
  // MoE only: experts every token goes to (DeepSeekMoE's shared experts, Dai et al. 2024), each ffn_hidden wide; they
  // run as a dense MLP split over tp, beside the routed experts.
  int64_t shared_experts = 0;
  // MoE only: the first dense_layers layers have a dense MLP dense_ffn_hidden wide instead of experts (DeepSeek-V3's
  // first_k_dense_replace = 3, 18432 wide).
  int64_t dense_layers = 0;
  int64_t dense_ffn_hidden = 0;
  // MoE only: after the leading dense layers, every moe_layer_step-th layer is MoE and the others dense, with the
  // dense_ffn_hidden MLP (Hugging Face Llama 4 interleave_moe_layer_step: Maverick's 2 makes layers 1, 3, 5, .. MoE;
  // moe_layers = range(step - 1, layers, step)). 1 = every layer after the leading dense ones is MoE.
  int64_t moe_layer_step = 1;
  // Multi-token prediction modules on the last pipeline stage (DeepSeek-V3 technical report, arXiv:2412.19437,
  // Sec. 2.2): each one a projection of [norm(h); norm(embedding)] from 2 hidden to hidden and one transformer block
  // of the model's last layer kind, sharing the embedding and output head with the main model, with its own logits
  // and cross entropy. DeepSeek-V3 trains with 1.
  int64_t mtp_layers = 0;
  // MoE routing (planner/cost/expert_comm.hpp moe_rank_load). capacity_factor: 0 = dropless; else each expert takes
  // at most capacity_factor x (tokens x top_k / experts) tokens, padded to that (Megatron-Core
  // --moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity; Fedus et al. 2021, Switch Transformer
  // Sec. 2.2). imbalance: the most-loaded expert's tokens over the mean, dropless only; 1 = balanced, as Megatron-Core's
  // benchmarks force it (--moe-router-force-load-balancing).
  double capacity_factor = 0;
  double imbalance = 1.0;
  // Group-limited routing (DeepSeek-V2, arXiv:2405.04434 Sec. 2.2.3 "device-limited routing"; DeepSeek-V3,
  // arXiv:2412.19437 Sec. 2.1.2 "node-limited routing": each token on at most M = 4 nodes; Megatron-Core
  // --moe-router-num-groups / --moe-router-group-topk; Hugging Face n_group / topk_group): the routed experts fall
  // into router_groups equal groups of consecutive experts, each token picks router_group_top_k of them (by the sum
  // of each group's top-2 scores) and its top_k experts among their experts. 0 = no groups (every expert eligible).
  // Only DeepEP's dispatch, which sends a token once per node, prices it (expert_comm.hpp routed_node_share).
  int64_t router_groups = 0;
  int64_t router_group_top_k = 0;
  // Attention head width when it is not hidden / heads (Qwen3: hidden 4096, 64 heads of 128); 0 = hidden / heads.
  // With MLA: the query/key head's part without rotary position (qk_nope_head_dim).
  int64_t head_dim_override = 0;
  // Multi-head latent attention (DeepSeek-AI 2024, DeepSeek-V2, arXiv:2405.04434 Sec. 2.1; V3 arXiv:2412.19437
  // Sec. 2.1): keys and values come up from a kv_lora_rank-wide latent, queries from a q_lora_rank-wide one (0 =
  // straight from the hidden state); each query/key head adds a qk_rope_head_dim rotary part (the key's shared by all
  // heads, projected from the hidden state). kv_lora_rank 0 = standard (GQA/MHA) attention.
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim_override = 0;  // value head width when not head_dim() (0)
  bool causal = true;
  // Sliding-window (banded, local) attention (Jiang et al. 2023, Mistral 7B, arXiv:2310.06825, Sec. 2): a query at
  // position q attends the keys k with q - sliding_window < k <= q, sliding_window keys with itself (Hugging Face's
  // and Mistral's convention). 0 = full causal attention in every layer.
  int64_t sliding_window = 0;
  // Which layers the window applies to (Hugging Face Gemma 3's sliding_window_pattern): 0 = every layer; P >= 2 =
  // layer i (0-based) attends in full when (i + 1) % P == 0 and through the window otherwise (gpt-oss's alternation
  // is P = 2: layer 0 windowed, layer 1 full, as its layer_types list them). Needs sliding_window.
  int64_t sliding_window_pattern = 0;
  std::string source;

  // Layer i attends in full (no window, or the pattern's every P-th layer).
  bool layer_full_attention(int64_t i) const {
    if (sliding_window <= 0) return true;
    return sliding_window_pattern > 0 && (i + 1) % sliding_window_pattern == 0;
  }
  // Full-attention layers among the first n: n without a window, none with every layer windowed, else n / P.
  int64_t full_attention_layers_before(int64_t n) const {
    if (sliding_window <= 0) return n;
    return sliding_window_pattern > 0 ? n / sliding_window_pattern : 0;
  }
  // Every layer windowed: the whole model, or one layer kind of attention_layer_model(m, false).
  bool every_layer_windowed() const { return sliding_window > 0 && sliding_window_pattern == 0; }
  // Windowed and full-attention layers both: priced as layers of attention_layer_model() below, kind by kind.
  bool mixes_attention() const { return sliding_window > 0 && sliding_window_pattern > 0; }

  int64_t head_dim() const { return head_dim_override > 0 ? head_dim_override : hidden / heads; }
  bool is_mla() const { return kv_lora_rank > 0; }
  int64_t qk_head_dim() const { return head_dim() + qk_rope_head_dim; }  // query/key width per head
  int64_t v_head_dim() const { return v_head_dim_override > 0 ? v_head_dim_override : head_dim(); }
  int64_t q_dim() const { return heads * qk_head_dim(); }            // queries per token
  int64_t kv_dim() const { return kv_heads * head_dim(); }           // keys (= values) per token, standard attention
  int64_t k_width() const { return kv_heads * qk_head_dim(); }        // keys per token as attention reads them
  int64_t v_width() const { return kv_heads * v_head_dim(); }         // values per token
  int64_t context_dim() const { return heads * v_head_dim(); }       // attention output (out-projection input)
  bool is_moe() const { return experts > 1; }
  // MLPs each token runs in a layer: 1 in a dense model; in a MoE layer its routed top_k, at `load` (the most-loaded
  // rank's, planner/cost/expert_comm.hpp moe_rank_load; 1 = the mean), and the shared experts.
  double mlp_copies_per_token(double load = 1.0) const {
    return is_moe() ? static_cast<double>(top_k) * load + static_cast<double>(shared_experts) : 1.0;
  }
  // Dense layers among the first n: the leading dense_layers, then all but every moe_layer_step-th.
  int64_t dense_layers_before(int64_t n) const {
    if (!is_moe()) return n;
    if (n <= dense_layers) return n;
    const int64_t after = n - dense_layers;
    return dense_layers + after - after / (moe_layer_step > 0 ? moe_layer_step : 1);
  }
  int64_t dense_layer_count() const { return is_moe() ? dense_layers_before(layers) : 0; }
  int64_t moe_layers() const { return layers - dense_layer_count(); }
  // A MoE model with dense layers (leading or interleaved): priced as layers of dense_layer_model() below.
  bool has_dense_layers() const { return is_moe() && dense_layer_count() > 0; }
};

// GEMM efficiency model (named calibration fields): achieved = peak * peak_fraction * wave_efficiency,
// bounded below by the HBM roofline, plus a fixed launch overhead per kernel.
struct GemmEfficiency {
  double peak_fraction = 0.8;  // best fraction of peak on large, well-shaped GEMMs
  int64_t sm_count = 108;      // streaming multiprocessors (wave quantization)
  int64_t tile_m = 128;        // output tile rows per CTA
  int64_t tile_n = 256;        // output tile columns per CTA
  double kernel_overhead_s = 4e-6;
  double attention_fraction = 0.5;  // fraction of peak a fused (flash) attention kernel achieves, forward
  // The fused kernel's backward (2.5x the forward FLOPs); 0: attention_fraction.
  double attention_backward_fraction = 0;
  // FlashAttention-2 forward and backward; 0: the fused kernel's fractions (a profile measured with no FA2 figure).
  double flash2_fraction = 0, flash2_backward_fraction = 0;
  // fp8 GEMMs' fraction of the fp8 peak, as a multiple of peak_fraction (1: the bf16 fraction).
  double fp8_efficiency = 1.0;
  // A grouped GEMM's (MoE experts') fixed time per wave of tiles, on top of the tiles' mainloop: the prologue that
  // fills a tile's pipeline and the epilogue that writes it (gemm.hpp grouped_gemm_time_s); 0: none (unmeasured).
  double grouped_tile_overhead_s = 0;
  // A fused attention kernel's fixed cost per thread block, in 128 x 128 tiles of its main loop: its time then
  // depends on the call's shape, and the fractions above are those of the reference shape (gemm.hpp
  // attention_shape_factor); 0: the flat fractions for every shape (unmeasured).
  double attention_tile_overhead = 0;

  // The fraction of peak `kernel` (not unfused) achieves in the forward or the backward pass.
  double attention_efficiency(AttentionKernel kernel, bool backward) const;
};

struct GpuSpec {
  std::string name;
  // The chip generation the GPU shares its kernels' efficiency with (e.g. "Hopper" for the H100 variants, H800 and
  // H200): validate fits calibration fields per architecture (docs/accuracy.md). Empty: the GPU is its own.
  std::string architecture;
  std::array<double, kNumDTypes> peak_flops{};  // dense FLOP/s per DType; 0 = unsupported
  int64_t memory_bytes = 0;
  double hbm_bandwidth_Bps = 0;
  double hbm_efficiency = 0.8;  // achieved fraction of HBM bandwidth for memory-bound ops
  // Tensor cores that scale fp8 operands per 32-element block (the OCP MX formats: Blackwell's fifth-generation tensor
  // cores); without them the mxfp8 recipe has no kernel to run on (validate: precision_unsupported).
  bool mx_block_scaling = false;
  GemmEfficiency gemm;
  int64_t cuda_context_bytes = 0;      // CUDA context + cuBLAS/cuDNN handles
  int64_t workspace_bytes = 0;         // GEMM / attention workspaces
  int64_t comm_buffer_bytes_per_group = 0;  // NCCL buffers per communicator
  double fragmentation_fraction = 0.0;     // allocator fragmentation allowance (fraction of tensor bytes)
  std::string source;

  double peak(DType d) const { return peak_flops[static_cast<size_t>(d)]; }
  const std::string& architecture_or_name() const { return architecture.empty() ? name : architecture; }
};

// One network tier as seen by one GPU: bandwidth per direction, latency per message, achieved fraction.
struct LinkSpec {
  double bandwidth_Bps = 0;
  double latency_s = 0;
  double efficiency = 1.0;
  // NVLink SHARP (NVLS) all-reduce through the switch, as a fraction of bandwidth_Bps; 0 = the fabric has none
  // (collective_time_s, collectives.hpp).
  double nvls_efficiency = 0;
  double effective_Bps() const { return bandwidth_Bps * efficiency; }
};

// ZeRO-Offload's CPU-Adam (Ren et al. 2021, "ZeRO-Offload: Democratizing Billion-Scale Model Training", USENIX ATC,
// arXiv:2101.06840, Table 3): one optimizer step over 10 billion parameters in 2.57 s on the host CPUs of the
// paper's GPU server, 3.89e9 parameters/s: the default ClusterSpec::host_adam_params_per_s.
inline constexpr double kCpuAdamParamsPerS = 10e9 / 2.57;

struct ClusterSpec {
  std::string name;
  std::string gpu;  // GPU profile name
  // GPUs per node (server, or compute tray of a rack): what the host side is per (host memory, host link, CPU Adam)
  // and the launcher's processes per node.
  int64_t gpus_per_node = 8;
  // GPUs that share one NVLink switch fabric: ranks r and s share NVLink when r / D == s / D (D this, layout.hpp).
  // 0 = gpus_per_node (an NVLink domain per node, as in DGX/HGX servers); a GB200/GB300 NVL72 rack has 72 GPUs in
  // compute trays of 4. A multiple of gpus_per_node.
  int64_t nvlink_domain_gpus = 0;
  int64_t nvlink_domain() const { return nvlink_domain_gpus > 0 ? nvlink_domain_gpus : gpus_per_node; }
  // The ranks of a `world`-rank job placed in one NVLink domain: spread evenly, in whole nodes, over the fewest domains
  // that hold them (a multi-rack job is scheduled as equal segments of its racks: 128 GPUs on NVL72 racks are two
  // racks of 64, 144 two of 72, 200 three of 68). One domain when the job fits in one; the domain itself when it is
  // a node (DGX/HGX servers).
  int64_t placed_domain(int64_t world) const {
    const int64_t D = nvlink_domain();
    if (world <= D || D == gpus_per_node || gpus_per_node < 1) return D;
    const int64_t domains = (world + D - 1) / D, per = (world + domains - 1) / domains;
    return (per + gpus_per_node - 1) / gpus_per_node * gpus_per_node;
  }
  // Groups tiling `world` ranks in aligned blocks of `block` consecutive ranks (a rank-layout group kind, layout.hpp):
  // whether an NVLink-domain boundary falls inside a block, i.e. there is more than one domain and the placed domain
  // is not a multiple of the block.
  bool domain_splits_blocks(int64_t block, int64_t world) const {
    return world > placed_domain(world) && placed_domain(world) % block != 0;
  }
  LinkSpec intra_node;  // NVLink / NVSwitch: within an NVLink domain
  LinkSpec inter_node;  // per-GPU NIC: between NVLink domains
  // The GPU <-> host-memory link of one GPU (PCIe, or NVLink-C2C on Grace superchips), per direction: what offloaded
  // states cross (planner/cost/offload.hpp). 0 = unknown: offload plans are refused on this cluster.
  LinkSpec host_link;
  // Parameters per second one node's CPUs update with Adam (the offloaded optimizer step; its GPUs' shards share
  // them). Default: ZeRO-Offload's CPU-Adam (offload.hpp, kCpuAdamParamsPerS).
  double host_adam_params_per_s = kCpuAdamParamsPerS;
  // Host memory of one node, what the offloaded states of its GPUs must fit in. 0 = unknown (not checked).
  int64_t host_memory_bytes = 0;
  std::string source;
};

// How one step is executed: the mesh and every knob.
struct ParallelConfig {
  int64_t dp = 1, tp = 1, pp = 1, cp = 1, ep = 1;
  // Expert tensor parallelism (Megatron-Core --expert-tensor-parallel-size). 0 = unset: the experts split over tp and
  // ep groups are carved from dp (the layout before parallel folding). Set: MoE parallel folding (Liu et al. 2025,
  // arXiv:2504.14960): each pipeline stage's tp x cp x dp ranks are refolded as etp x ep x edp for the expert layers,
  // etp innermost, so ep groups are etp-strided runs of ranks and the expert-data-parallel group has
  // tp cp dp / (ep etp) ranks (layout.hpp).
  int64_t etp = 0;
  int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  int64_t vpp = 1;               // virtual pipeline chunks per stage (interleaved schedule)
  int64_t micro_batch = 1;       // sequences per microbatch
  int64_t num_microbatches = 1;  // microbatches per pipeline per step (gradient accumulation)
  Schedule schedule = Schedule::one_f_one_b;
  Recompute recompute = Recompute::none;
  RecomputeModules recompute_modules;  // recompute == selective only
  // recompute == full only: 0 = every layer fully recomputed; k > 0 = Megatron-Core's --recompute-method block
  // --recompute-num-layers k: the first k layers of each model chunk (each pipeline stage's chunk; with interleaving
  // each virtual chunk, k x chunks per stage) are fully recomputed, min(k, the chunk's layers) where a chunk holds
  // fewer; the rest keep all their activations, as recompute none (config.hpp chunk_recomputed_layers).
  int64_t recompute_layers = 0;
  bool sequence_parallel = false;
  int zero_stage = 0;               // 0..3 (3 = FSDP)
  Zero3GatherUnit zero3_gather_unit = Zero3GatherUnit::layer;  // ZeRO-3 only
  // ZeRO-3 as PyTorch FSDP2 runs it (fully_shard, torchtitan): per-parameter shards, so every all-gather copies the
  // gathered buffer out into each parameter and every reduce-scatter copies the gradients in, cast to the reduction
  // dtype (zero3.hpp fsdp2_copy_bytes). ZeRO-3 with the layer unit only (Reject::fsdp2_invalid).
  bool fsdp2 = false;
  bool distributed_optimizer = false;  // Megatron distributed optimizer: optimizer state sharded over dp
  // Hybrid sharded data parallelism (HSDP): the dp ranks form dp_replicate replicas of dp / dp_replicate ranks each.
  // The model states ZeRO shards are sharded within a replica's shard group (shard_group(): its dp / dp_replicate
  // ranks x cp) and replicated across the dp_replicate replicas; each gradient is reduce-scattered within the shard
  // group and its shard all-reduced across the replica group (Zhao et al. 2023, "PyTorch FSDP: Experiences on Scaling
  // Fully Sharded Data Parallel", arXiv:2304.11277, Sec. 3.2.2, hybrid sharding). PyTorch FSDP2 / torchtitan
  // (data_parallel_replicate_degree) and Megatron-Core's partial distributed optimizer
  // (--num-distributed-optimizer-instances). 1: plain ZeRO / FSDP over dp x cp. > 1 needs a sharded optimizer, at
  // least 2 ranks per shard group, and no split experts (Reject::dp_replicate_invalid). Layout: layout.hpp.
  int64_t dp_replicate = 1;
  int64_t dp_shard() const { return dp_replicate > 1 ? dp / dp_replicate : dp; }
  // The ranks the sharded model states are split over and the gradients reduce-scattered in: dp x cp without HSDP.
  int64_t shard_group() const { return dp_shard() * cp; }
  OffloadSet offload;                  // states kept in host memory (config.cpp: which sharding each needs)
  // Megatron-Core fine-grained activation offloading: the modules whose saved inputs go to the host (activations.hpp
  // offloaded_module_bytes; config.cpp: what it needs).
  OffloadModules offload_modules;
  // Anything in host memory: offloaded states, whole layers' or modules' activations.
  // The optimizer state is sharded over dp x cp (ZeRO 1-3 or Megatron's distributed optimizer), so every step
  // gathers the updated parameters: the gather fp8 weights need (TrainingSpec::fp8_param_gather).
  bool shards_optimizer() const { return zero_stage >= 1 || distributed_optimizer; }
  bool offloads_any() const { return offload.any() || !offload_modules.empty(); }
  // Activations copied to the host and back each microbatch (whole layers or modules).
  bool offloads_activations() const { return offload.activations || !offload_modules.empty(); }
  bool overlap_dp_comm = true;      // gradient reduction overlapped with backward
  bool overlap_tp_comm = false;     // TP collectives overlapped with GEMMs
  // Megatron-LM's asynchronous backward TP collectives (--async-tensor-model-parallel-allreduce): the input-gradient
  // all-reduce / reduce-scatter of the column-parallel GEMMs runs beside their weight-gradient GEMMs and the SP
  // re-gather beside the input-gradient GEMMs. false = the autograd f operator's blocking all-reduce (Megatron-LM 2021).
  bool async_tp_backward = true;
  // Each sequence-parallel TP all-gather / reduce-scatter also copies the whole gathered tensor once (read and
  // write), as PyTorch's functional collectives do for a gather / scatter dim other than 0: torch.cat of the ranks'
  // chunks after all_gather_into_tensor, before reduce_scatter_tensor (torch/distributed/_functional_collectives.py
  // all_gather_tensor / reduce_scatter_tensor). torchtitan's DTensor TP shards [batch, seq, hidden] on dim 1, so every
  // one of its TP collectives pays it; Megatron's [seq, batch, hidden] gathers dim 0 and pays none. Needs tp > 1 with
  // sequence parallelism (Reject::tp_collective_copies_invalid); cost_model.cpp tp_copy_bytes.
  bool tp_collective_copies = false;
  // PyTorch's micro-pipelined ("async") tensor parallelism, as torchtitan runs it (enable_async_tensor_parallel with
  // torch.compile): each sequence-parallel all-gather + column-parallel GEMM and row-parallel GEMM + reduce-scatter is
  // split into tp steps, each step's transfer (symmetric memory, the copy engines) beside one GEMM piece
  // (cost_model.cpp micropipelined_exposed_s). Needs tp > 1, sequence parallelism, no overlap_tp_comm and a dense
  // model (Reject::micropipeline_tp_invalid).
  bool micropipeline_tp = false;
  bool p2p_scatter_gather = true;   // pipeline sends split over the TP ranks (Narayanan et al. 2021 Sec. 4.1)
  bool overlap_cp_comm = true;      // CP ring exchange overlapped with attention
  // Pipeline sends overlapped with compute (Megatron-Core's --overlap-p2p-communication, interleaved schedule).
  // false = the sender waits for its send before its next op: Megatron-LM's batched, waited p2p (1F1B and GPipe
  // always; interleaved without the option).
  bool overlap_p2p_comm = false;
  // Zero Bubble's optimizer post-validation (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", arXiv:2401.10241,
  // Sec. 4; the ZB fork's --enable-optimizer-post-validation): each stage steps its optimizer without waiting for the
  // global gradient-norm / NaN check, which is validated in the next iteration, so the next iteration's forwards start
  // while later stages still finish: a step in a continuous run (pipeline.hpp, zb_2p_step_s). Zero-bubble schedules
  // only (Reject::post_validation_invalid).
  bool post_validation = false;
  MoeDispatcher moe_dispatcher = MoeDispatcher::alltoall;
  // MoE all-to-alls overlapped with another microbatch's compute (Megatron-Core --overlap-moe-expert-parallel-comm,
  // the "1F1B A2A overlap"; DeepSeek-V3's DualPipe overlaps the same way): see expert_comm.hpp.
  bool overlap_ep_comm = false;
  int64_t first_stage_layers = 0;   // 0 = even split; else layers on the first stage (uneven pipelines)
  int64_t last_stage_layers = 0;    // 0 = even split; else layers on the last stage
  // Megatron-Core's --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split: the split
  // counts the input embedding (the loss) as one layer of the first (last) stage, so L + e + l layers split evenly
  // over pp (x vpp chunks) and the first (last) stage holds one transformer layer fewer (stage_layers, config.hpp).
  bool embedding_in_pipeline_split = false;
  bool loss_in_pipeline_split = false;
  // An explicit layer layout (plan field stage_layers, --stage-layers): one entry per pipeline stage, each either
  // {n} (the stage's n layers; interleaved: split into chunks_per_stage() equal chunks) or {n_0, .., n_{v-1}} (the
  // transformer layers of each of its v chunks, in chunk order; a chunk may hold none, e.g. the first stage's chunk 0
  // with only the embedding). Empty: the split above (stage_layers(), config.hpp).
  std::vector<std::vector<int64_t>> stage_layout;
  int64_t split_extra_layers() const { return (embedding_in_pipeline_split ? 1 : 0) + (loss_in_pipeline_split ? 1 : 0); }

  int64_t gpus() const { return saturating_product({dp, tp, pp, cp}); }  // INT64_MAX on overflow
  // The ZeRO stage within a step. A ZeRO-2/3 (FSDP) plan with pipelining runs as the framework that combines them
  // does (torchtitan's FSDP2 with PP, Llama 3's 4D parallelism; torch.distributed.pipelining defers FSDP's gradient
  // sync and reshard to the last microbatch, and torchtitan turns reshard_after_forward off with PP): parameters
  // gathered once and kept through the step, gradients accumulated unsharded and reduce-scattered after the last
  // microbatch, optimizer states sharded: ZeRO-1 for memory and time. Without pipelining, the stage as given.
  int step_zero_stage() const { return pp > 1 && zero_stage >= 2 ? 1 : zero_stage; }
  // Model chunks per stage: vpp when interleaved, 2 for ZB-V and DualPipeV (their V; vpp 1 or 2), else 1 (the others
  // need vpp 1).
  int64_t chunks_per_stage() const {
    return schedule == Schedule::interleaved ? vpp : v_shaped(schedule) ? 2 : 1;
  }
  // The stage holding the model's last chunk (the output layer, the loss, MoE MTP): the last stage, the first with
  // a V placement (ZB-V, DualPipeV). Its last chunk (chunks_per_stage() - 1) is that chunk.
  int64_t output_stage() const { return v_shaped(schedule) ? 0 : pp - 1; }
  // Pipeline sends overlap compute: asked for, and the schedule is the interleaved one that offers it.
  bool overlaps_p2p() const { return overlap_p2p_comm && schedule == Schedule::interleaved; }
};

struct TrainingSpec {
  Precision precision = Precision::bf16;
  int64_t global_batch = 0;  // sequences per step
  int64_t seq_len = 0;       // tokens per sequence (0 = the model's)
  AttentionKernel attention = AttentionKernel::flash;
  Fp8Recipe fp8_recipe = Fp8Recipe::tensorwise;  // precision fp8 only
  bool grad_fp32 = true;     // gradients accumulated/reduced in fp32 (Megatron default for bf16)
  // fp8 training: the weights are held and gathered in fp8 (Megatron-Core --fp8-param-gather, NeMo fp8_param_gather;
  // torchao's FSDP float8 all-gather, torchtitan enable_fsdp_float8_all_gather): model_states.hpp.
  bool fp8_param_gather = false;
  // fp8 training with sequence-parallel TP: the TP all-gathers move fp8 (1 byte per element), the reduce-scatters stay
  // 16-bit. torchtitan's float8 tensorwise TP (parallelize_llama.py apply_tp, enable_float8_tensorwise_tp: torchao's
  // Float8ColwiseParallel / PrepareFloat8ModuleInput cast the column-parallel input to float8 before its all-gather,
  // Float8RowwiseParallel casts its output gradient to float8 e5m2 before the backward all-gather; torchao
  // float8/float8_tensor_parallel.py). Needs fp8, tp > 1 and sequence parallelism (Reject::fp8_tp_gather_invalid).
  bool fp8_tp_gather = false;
  // Whether torchtitan runs a plan's TP all-gathers in fp8: float8 TP with the tensorwise recipe only, and only for
  // sequence-parallel TP (enable_float8_tensorwise_tp); the rule validate and the torchtitan export both apply.
  bool torchtitan_fp8_tp_gather(const ParallelConfig& pc) const {
    return precision == Precision::fp8 && fp8_recipe == Fp8Recipe::tensorwise && pc.tp > 1 && pc.sequence_parallel;
  }
  // Adam's two moments (exp_avg, exp_avg_sq) in fp32, or in 16 or 8 bits (Megatron-Core --use-precision-aware-optimizer
  // with --exp-avg-dtype / --exp-avg-sq-dtype; the fp32 master weights stay): model_states.hpp.
  DType adam_moments = DType::fp32;
  // fp8: the GEMMs keep their quantized (fp8) inputs for the backward, as Transformer Engine does (Megatron-Core,
  // NeMo); false: the 16-bit inputs, as torchao's float8 does (torchtitan). activations.hpp.
  bool fp8_saved_inputs = true;
  // DeepSeek-V3's low-precision activation storage (DeepSeek-AI 2024, arXiv:2412.19437, Sec. 3.3.3): the MoE experts'
  // SwiGLU inputs are cached in fp8 and the SwiGLU output is recomputed in the backward; the out-projection's input
  // (the attention output) is cached once, in E5M6 (a 16-bit container here), for both the attention backward and the
  // out-projection's weight gradient. activations.hpp. Needs fp8 training (Reject::fp8_activation_cache_invalid).
  bool fp8_activation_cache = false;
  // Weight-gradient GEMMs accumulate straight into the gradient buffer (Megatron-LM --gradient-accumulation-fusion).
  // false = each microbatch's weight gradient is written, then added to the buffer by a separate pass (Megatron-LM
  // 2021 local DDP's main_grad hook, DeepSpeed's pipeline engine): see grad_accumulation_bytes().
  bool fused_grad_accumulation = true;
  // The loss is a fused vocab-parallel cross entropy that writes its gradient over the softmax it saved (Megatron's
  // vocab_parallel_cross_entropy). false = PyTorch's F.cross_entropy on the fp32 logits (log_softmax + nll_loss,
  // torchtitan's loss_fn): its backward holds two more fp32 [tokens, vocab] tensors, loss_backward_working_set_bytes().
  bool fused_cross_entropy = true;
  // The transformer layer's element-wise ops run as fused kernels, one pass each (Megatron-Core / Transformer Engine,
  // torch.compile). false = uncompiled PyTorch: each tensor op of the model code is its own kernel, with fp32 upcasts
  // (torchtitan's Llama without torch.compile): eager_elementwise.hpp.
  bool compiled_elementwise = true;
  int64_t dp_bucket_bytes = 40'000'000;  // gradient bucket size for overlapped DP reduction

  int64_t grad_bytes() const { return grad_fp32 ? 4 : 2; }  // bytes per gradient element
};

struct Plan {
  // Optional label (the Plan document's "name"): `check` keys its baseline entries by it (docs/ci.md).
  std::string name;
  ModelSpec model;
  GpuSpec gpu;
  ClusterSpec cluster;
  int64_t num_gpus = 0;
  ParallelConfig parallel;
  TrainingSpec training;

  int64_t seq_len() const { return training.seq_len > 0 ? training.seq_len : model.seq_len; }
  DType gemm_dtype() const;
  DType activation_dtype() const;
};

int64_t dtype_bytes(DType d);

// The leading dense layers of a MoE model as a dense model of their own (experts 1, ffn_hidden = dense_ffn_hidden,
// layers = dense_layers); the cost model prices those layers with it, and with the plan below (ep 1, etp unset).
ModelSpec dense_layer_model(const ModelSpec& m);
// One of a model's attention layer kinds (ModelSpec::mixes_attention): its full-attention layers (full: no window) or
// its windowed ones (every layer windowed); everything else as m.
ModelSpec attention_layer_model(const ModelSpec& m, bool full);
// What is wrong with a model's MoE routing fields (capacity_factor, imbalance, router_groups, router_group_top_k),
// or "" when nothing: they are for MoE models; capacity_factor and imbalance are each at least 1 and at most
// experts / top_k (an expert cannot take more than every token); imbalance is for dropless routing (with a capacity,
// each expert pads to it); router_groups (2 or more) divides the experts and comes with router_group_top_k (1 ..
// router_groups), whose groups hold at least top_k experts. The model JSON and the flags name their path from
// `field`: the value out of range (imbalance also when it is set beside a capacity; router_group_top_k also when
// the groups are missing), or not_moe when a dense model has any set.
struct MoeRoutingError {
  enum class Field : uint8_t { none, not_moe, capacity_factor, imbalance, router_groups, router_group_top_k };
  Field field = Field::none;
  std::string message;  // "" when field is none
};
MoeRoutingError moe_routing_error(const ModelSpec& m);
// What is wrong with a model's sliding-window fields, or "" when nothing: a pattern needs a window, 1 would make
// every layer full attention, a pattern above the layer count leaves no layer full, and a window needs the causal
// mask (a two-sided band is not modelled). The model JSON and the flags name their path from `field`.
struct SlidingWindowError {
  enum class Field : uint8_t { none, window, pattern };
  Field field = Field::none;
  std::string message;  // "" when field is none
};
SlidingWindowError sliding_window_error(const ModelSpec& m);
Plan dense_layer_plan(const Plan& plan);
Plan attention_layer_plan(const Plan& plan, bool full);  // the plan with attention_layer_model()

}  // namespace parplan
