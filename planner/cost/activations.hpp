// Activation memory of one transformer layer for one microbatch on one GPU.
// Source: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", Sec. 4 / Table 2
// (16-bit activations, 1-byte dropout masks): per layer
//   no parallelism           s b h (34 + 5 a s / h)
//   tensor parallel (t)      s b h (10 + 24/t + 5 a s / (h t))
//   tensor + sequence par.   s b h / t (34 + 5 a s / h)
//   + selective recompute    drops the 5 a s^2 b attention-core term;   full recompute: 2 s b h (/t with SP).
// Generalised term by term: 34 = 10 (norm inputs 4, QKV input 2, MLP input 2, dropout masks 2; sharded only by SP)
//   + 24 (Q 2, K 2 kv/a, V 2 kv/a, out-proj input 2, MLP: GeLU in+out 2x2f/h, SwiGLU 3x2f/h, x top_k for MoE
//   at the most-loaded rank's load, + the shared experts; /t).
// Q, K, V and the out-projection input at their own widths (heads x head_dim when it is not h; MLA: query/key heads
// with their rotary part, value heads at v_head_dim, DeepSeek-V2 Sec. 2.1); MoE: x (top_k + shared experts). MLA also
// keeps its two latents (the up-projections' inputs and their norms' inputs), 2 (q_lora + kv_lora) s b, on every tp rank.
// A MoE model's leading dense layers are counted with their own model (dense_layer_model, spec.hpp).
// fp8 with Transformer Engine (Megatron-Core, NeMo): each fp8 GEMM keeps its quantized input for the weight gradient,
// 1 byte per element instead of the 16-bit input (transformer_engine/pytorch/module/linear.py, layernorm_linear.py,
// grouped_linear.py: the saved input is the fp8 (MXFP8: its column-wise copy) tensor). That is the QKV input, a dense
// MLP's input, the experts' permuted copies, each MLP's down-projection input (its activation's output), and the
// out-projection's input, which TE keeps in fp8 beside the 16-bit attention output the fused attention's backward
// reads (+1 byte per element there). torchao's float8 (torchtitan) keeps the 16-bit inputs: unchanged.
// Attention core: unfused 5 a s^2 b (softmax out 2, dropout mask 1, dropout out 2; 2 without dropout), /t;
//   flash attention keeps only the fp32 log-sum-exp, 4 a s b / t. Context parallel: s -> s/cp for queries.
// torchtitan's per-op selective activation checkpointing (selective_op; torchtitan parallelize_llama.py,
// _apply_ac_to_transformer_block: "saves output of all compute ops, except every second mm"): the layer input, the
// outputs of the 1st, 3rd, ... matmul in forward order (wq, wv, w1 for a SwiGLU layer; wq, wv, up for GeLU; the last
// matmul's output excepted) and of the attention kernel (its output and log-sum-exp). Measured on an H200 for Llama 3
// 8B / 70B layers at 8192 tokens under torch.compile: 386.9 / 757.1 MB beside the input, exactly this count
// (bench/gpu/results/h200-2026-11-26/layers.json; eager PyTorch also keeps the w2 output: 454.0 / 891.3 MB, the
// eager terms below).
// Uncompiled element-wise ops (TrainingSpec::compiled_elementwise false: torchtitan's Llama code without
// torch.compile, ops as eager_elementwise.hpp lists them) keep more for the backward than the fused count above. Per
// token and layer, beside it (A = the activation dtype's bytes, T = per tp rank where the fused term is split):
//   RMSNorm, each of two: its fp32 input copy (pow and x * r save it) and its normalized output before the weight
//             (`* weight` saves it), where the fused kernel keeps the A-byte input: 4h (both norms 8h; / t with SP);
//   rotary:   the complex64 q and k the complex multiply saves, 4 (q + k) / t;
//   SwiGLU:   the silu output the gate multiply saves, A f / t per MLP copy;
//   GQA:      SDPA's K and V after repeat_kv, expanded to the query heads: A (2 q - k - v) / t more than K and V;
//   and one more hidden-width A-byte tensor (2h at bf16): under torchtitan's per-op AC, which reruns the element-wise
//             ops so that only this term stays, the last matmul's output, which the policy saves though no backward
//             reads it (torch.compile drops it: selective_op_matmuls); without AC one the measurement shows and this
//             count does not identify. Full recompute keeps none of it.
// Measured (bench/gpu/results/h200-2026-11-26/layers.json, saved_activation_bytes, 8192 tokens, eager minus
// torch.compile): Llama 3 8B 838.9 MB (no AC) and 67.1 MB (per-op AC), 70B 1677.7 MB and 134.2 MB, i.e. exactly
// 25h and 2h bytes per token: 8h + 5h + 7h + 3h + 2h (8B), 8h + 4.5h + 7h + 3.5h + 2h (70B).
#pragma once
#include <cstdint>
#include <vector>

#include "planner/spec/spec.hpp"

namespace parplan {

struct ActivationShape {
  int64_t micro_batch = 1;
  int64_t seq = 1;  // full sequence length s
  int64_t tp = 1;
  int64_t cp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::none;
  RecomputeModules modules;  // recompute == selective: what it rebuilds (Megatron-Core --recompute-modules)
  OffloadModules offload_modules;  // fine-grained activation offloading (offloaded_module_bytes below)
  AttentionKernel attention = AttentionKernel::unfused;
  int64_t bytes_per_element = 2;  // activation dtype
  // fp8 GEMMs keep their quantized inputs, 1 byte per element, for the weight gradients (Transformer Engine,
  // TrainingSpec::fp8_saved_inputs; see below); false: the inputs in the activation dtype.
  bool fp8_saved_inputs = false;
  // DeepSeek-V3's low-precision activation storage (TrainingSpec::fp8_activation_cache; DeepSeek-AI 2024,
  // arXiv:2412.19437, Sec. 3.3.3), fp8 training only. In a MoE layer each expert copy keeps its activation's input
  // (SwiGLU: the gate and up halves, 2 f) in fp8, 1 byte per element, and no down-projection input: the activation's
  // output is recomputed from it in the backward (2 f x 1 against 2 f x A + f x G without; DeepSeek-V3 at A = 2,
  // G = 1: 2 against 5 bytes per FFN element and copy). Every layer keeps the attention output once, as E5M6 (12 bits,
  // taken at a 16-bit container: A bytes), for the attention backward and the out-projection's weight gradient, not
  // beside a separate fp8 copy (A against A + 1 bytes per element).
  bool fp8_activation_cache = false;
  bool fused_cross_entropy = true;  // TrainingSpec::fused_cross_entropy
  bool eager_elementwise = false;   // !TrainingSpec::compiled_elementwise: eager_saved_bytes below
  // MoE layers only (moe_token_copies, expert_comm.hpp): the most-loaded rank's load, and per microbatch on one rank
  // the tokens it routes, their top_k copies and the copies its experts run.
  double moe_load = 1.0;
  double moe_tokens = 0, moe_dispatched = 0, moe_expert_copies = 0;
};

struct LayerActivationBytes {
  double replicated = 0;      // the "10 sbh" part (sharded by SP only)
  double tp_sharded = 0;      // the "24 sbh / t" part
  double attention_core = 0;  // the "5 a s^2 b / t" part (or flash LSE)
  // MoE routing buffers Megatron-Core keeps for the backward: the permuted copies the experts' first (grouped) GEMM
  // saves for its weight gradient (expert copies x h, at the most-loaded rank's load), the router's fp32 scores
  // (tokens x E) and top-k probabilities and indices (12 bytes per copy). Dropped by full recompute. (Where the
  // probabilities are applied in unpermute rather than in the experts' activation, as older Megatron-Core versions
  // do, the expert outputs are kept as well; not counted.)
  double moe_routing = 0;
  double eager = 0;           // uncompiled element-wise ops' extra saved tensors (above), after recompute choices
  double total = 0;           // what stays stored until backward, after recompute choices
};

LayerActivationBytes layer_activation_bytes(const ModelSpec& m, const ActivationShape& a);

// Extra stored activations of the first stage per microbatch (embedding dropout mask) and of the last stage
// (final norm input, output-layer input and fp32 logits for the cross entropy: 4sbh/t + 4 s b V / t, Korthikanti 2022).
double embedding_activation_bytes(const ModelSpec& m, const ActivationShape& a);
double output_layer_activation_bytes(const ModelSpec& m, const ActivationShape& a);
// What the loss's backward holds beside those fp32 logits, once per stage, when the cross entropy is PyTorch's
// F.cross_entropy on logits.float() (TrainingSpec::fused_cross_entropy false; torchtitan train.py@9dec370 loss_fn,
// uncompiled, and `del pred` before loss.backward()): cross_entropy is log_softmax + nll_loss (ATen LossNLL.cpp), the
// log-probabilities are saved (log_softmax's backward reads its result, derivatives.yaml), nll_loss's backward writes
// a zeroed fp32 gradient of the input's size and log_softmax's backward a new fp32 one while both are alive: two fp32
// [s b / cp, V / t] tensors, 8 s b V / t bytes. 0 for a fused cross entropy (Megatron's vocab_parallel_cross_entropy
// writes the gradient over its saved softmax). Llama 3 8B at 2 x 8192 tokens: 16.81 GB.
double loss_backward_working_set_bytes(const ModelSpec& m, const ActivationShape& a);

// Megatron-Core's selective recompute modules (--recompute-modules; transformer_config.py recompute_modules): the
// stored bytes of one layer each module rebuilds in the backward instead, 0 where it does not apply to the layer.
// The norms: in Megatron-Core's Transformer Engine layer specs (gpt_layer_specs.py) a dense layer's norms are fused
// into the following GEMMs (TELayerNormColumnParallelLinear, which keeps its normalised input), so "layernorm" rebuilds
// only the separate ones: MLA's input norm (the down-projections' input) and a MoE layer's pre-MLP norm (the router's
// and experts' input), one norm output of A s b h (/t with SP) each. moe_act: the experts' fc2 input (the activation's
// output, f per routed copy at the most-loaded rank's load and per shared expert, /t), rebuilt from the fc1 output.
// Each term at the bytes it is stored in (fp8 with Transformer Engine: the GEMM inputs' 1-byte copies, taken as the
// ones rebuilt; assumed, not checked against Megatron-Core's fp8 path). mla_up_proj: Q, K, V at their widths (/t),
// rebuilt from the stored latents. mlp (a dense layer only, as Megatron-Core
// applies it): the MLP's input (the fused norm's output) and its stored terms; moe (a MoE layer only): the routed and
// shared experts' terms and the routing buffers, its input kept; shared_experts: the shared experts' terms.
// layernorm, moe_act and mla_up_proj discard their outputs and rebuild them just before the backward needs them;
// core_attn, mlp, moe and shared_experts are checkpointed modules (transformer_config.py's docstring).
struct RecomputeModuleBytes {
  double core_attn = 0;
  double norm_qkv = 0, norm_mlp = 0;  // layernorm: MLA's input norm output; a MoE layer's pre-MLP norm output
  double act_routed = 0, act_shared = 0;  // moe_act (MoE layers; the routed, the shared experts)
  double mla_up_proj = 0;
  double mlp = 0;  // dense layers: mlp_input + the MLP's terms, act_dense among them
  double mlp_input = 0, act_dense = 0;
  double moe_routed = 0, moe_shared = 0, moe_routing = 0;  // moe (shared_experts: moe_shared)
};
RecomputeModuleBytes recompute_module_bytes(const ModelSpec& m, const ActivationShape& a);

// Megatron-Core fine-grained activation offloading (--offload-modules; spec.hpp OffloadModules): the stored bytes of
// one layer for one microbatch that the offloaded modules' saved inputs take, which go to host memory (the memory and
// time rules live in cost_model.cpp stage_memory / charge_activation_offload, the window and the copy time in
// offload.hpp). Terms, as layer_activation_bytes() counts them (MoE layers only; 0 in a dense layer):
//   expert_fc1: the experts' first grouped linear's saved input, the permuted routed token copies at the most-loaded
//     rank's load: moe_expert_copies x h x G (G = 1 for Transformer Engine's fp8 copy, else A) - the first term of
//     LayerActivationBytes::moe_routing;
//   moe_act: the activation function's saved input, the fc1 output: per routed copy 2 f (SwiGLU, its gate and up
//     halves; 1 f for GeLU) x A, i.e. s b / cp x top_k x load x 2 f / t x A - the fc1-output part of mlp_copy_bytes.
//   The shared experts' modules are not offloaded (Megatron-Core applies these two names in the routed experts'
//   GroupedMLP; recalled from megatron/core/transformer/moe/experts.py, not checked against a pinned revision).
// With selective recompute: moe_act rebuilds the activation's output (the fc2 input) from its input, which its
// checkpoint (tensor_parallel.CheckpointWithoutOutput, recalled, as above) keeps - that kept input is what moe_act
// offloading moves (the offload wraps the checkpointed call in Megatron-Core's experts.py), so the two add up
// (recompute drops the output, offload moves the input); the moe module checkpoints the whole MoE layer, whose
// experts then store nothing: 0. Full recompute: 0 (validate() refuses the combination, config.cpp).
double offloaded_module_bytes(const ModelSpec& m, const ActivationShape& a);

// Peak working set of recomputing one layer during backward (full: one layer without recompute; selective: the
// largest module it rebuilds, recompute_module_bytes; selective_op: everything it rebuilds), which stays live on top
// of the stored activations.
double recompute_working_set_bytes(const ModelSpec& m, const ActivationShape& a);

// A dense layer's matmuls in torchtitan's forward order: wq, wk, wv, wo, then w1, w3, w2 (SwiGLU) or up, down.
// out[tokens, n] = in[tokens, k]; column-parallel ones split n over tp, row-parallel ones k.
struct LayerMatmul {
  int64_t n = 0, k = 0;
  bool column_parallel = true;
};
std::vector<LayerMatmul> layer_matmuls(const ModelSpec& m);

// selective_op's policy over layer_matmuls(): the matmuls whose outputs are kept (1st, 3rd, ...) and those the
// backward reruns (2nd, 4th, ...), the last matmul in neither. Its one home: memory here, time in recompute_s
// (cost_model.cpp), FLOPs in hardware_flops_per_step (flops.cpp).
struct SelectiveOpMatmuls {
  std::vector<LayerMatmul> kept, rerun;
};
SelectiveOpMatmuls selective_op_matmuls(const ModelSpec& m);

// selective_op: the width (in elements per token, before tensor parallelism) of the matmul and attention outputs
// kept per layer, beside the layer input. Dense layers with standard attention (validate() refuses the rest).
double selective_op_saved_width(const ModelSpec& m);

}  // namespace parplan
