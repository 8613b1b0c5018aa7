// Published-run validation: reads files in the validation/published-runs.json schema (validation/README.md), maps each row onto a
// Plan (documented rules in docs/accuracy.md), predicts its step time and memory, and scores the cost model.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/cost/cost_model.hpp"
#include "planner/spec/profiles.hpp"
#include "planner/spec/spec.hpp"

namespace parplan {

// One row of the file, mapped onto a plan (or not, with the reasons).
struct MappedRun {
  std::string id;
  std::string source;      // the row's full source text
  std::string source_key;  // short group key: the source text up to its first ',' or '(' ("Narayanan et al. 2021")
  std::string gpu_text;    // hardware.gpu as written
  std::string gpu_type;    // GPU profile the text maps to ("" when unknown)
  std::optional<Plan> plan;                // set when every field mapped and the plan is valid
  std::vector<std::string> skip_reasons;   // why the row is not scored (empty = scored)
  std::vector<std::string> notes;          // mapping decisions taken by a documented rule
  std::vector<std::string> assumed;        // values taken for what the row does not state (Unstated::search)
  std::optional<double> measured_step_time_s;  // measured.iter_time_s, else derived.iter_time_s
  bool step_time_derived = false;              // true when taken from derived.iter_time_s
  std::optional<double> measured_memory_bytes; // measured.memory_per_gpu_GB (GB = 1e9 bytes), else
                                               // measured.other.peak_memory_GiB (torchtitan's log, 2^30 bytes)

  bool scored() const { return plan.has_value() && measured_step_time_s.has_value() && skip_reasons.empty(); }
  std::string skip_reason() const;  // the reasons joined with "; "
};

// What to do with a value a row does not state (docs/accuracy.md "Unstated values"):
// - strict: the row is skipped ("X not stated"); the score rests on stated values only. The default.
// - search: the knobs a row leaves open (recompute, micro-batch) are searched, and the fastest plan that fits is
//   taken (published runs are tuned for speed); an unstated shape or precision takes the documented assumption
//   (MHA, a 4h GeLU MLP, vocab 51200, fp16). Every value taken is listed in MappedRun::assumed.
enum class Unstated : uint8_t { strict, search };

// Parses `text` (a JSON array of runs) and maps every row. Schema violations (wrong types, unknown keys in the
// structured objects, duplicate ids) throw InputError naming `where` and the JSON path; rows that are valid but
// cannot be mapped come back with skip_reasons.
std::vector<MappedRun> load_published_runs(std::string_view text, const std::string& where, const ProfileSet& profiles,
                                           Unstated unstated = Unstated::strict);

// Mapping rules for the free-text fields, exposed for tests. Each returns false (and leaves `out` alone) when the
// text does not determine the value.
bool map_ffn_type(std::string_view text, FfnType& out);
// Whether a precision text names a GEMM format narrower than fp8 (NVFP4, MXFP4, MXFP6, FP4, FP6, INT4): parplan
// prices none of them, so map_precision() refuses such a text rather than read its "BF16" or "FP8" remainder.
bool names_sub_fp8(std::string_view text);
bool map_precision(std::string_view text, Precision& out, std::string* note = nullptr);
// The fp8 scaling recipe a precision text names (tensorwise when it names none, with a note).
// The fp8 recipe a precision text names; unnamed, the stack's default: delayed for Megatron-Core / NeMo / Transformer
// Engine (`transformer_engine`), else torchao's tensorwise (noted).
Fp8Recipe map_fp8_recipe(std::string_view text, std::vector<std::string>* notes = nullptr, bool transformer_engine = false);
// True when a row's precision or parallel text says the weights are gathered in fp8 (TrainingSpec::fp8_param_gather).
bool map_fp8_param_gather(std::string_view text);
// True when the text says the weights are gathered in 16 bits (torchao "bf16 all-gather"): not an open knob.
bool denies_fp8_param_gather(std::string_view text);
// Adam's moments' dtype when a row's precision text names one ("BF16 Adam moments"); nullopt: fp32 (the default).
std::optional<DType> map_adam_moments(std::string_view text);
// "selective layer AC" (torchtitan's layer-wise selective activation checkpointing, activation_checkpoint.mode
// "selective" with selective_ac_option a number N: every N-th transformer block wrapped in full checkpointing) maps
// to full with recompute_layers set by the caller (validation.cpp: N = 2, torchtitan's preset option "2", half of
// each chunk's layers); names_layer_ac() tells such a text.
bool names_layer_ac(std::string_view text);
bool map_recompute(std::string_view text, Recompute& out);
// Megatron-Core's --recompute-modules a selective text lists after "selective:" up to the first ';' ("norm" or
// "layernorm", "act" or "moe_act", mla_up_proj, mlp, moe, shared_expert(s), core_attn); the default {core_attn}
// when it lists none. What it states beyond them (after ';', or words that name no module) goes to *notes as not
// modelled.
RecomputeModules map_recompute_modules(std::string_view text, std::vector<std::string>* notes = nullptr);
// Megatron-Core's fine-grained activation offloading a recompute text states as "fine-grained activation offloading
// (expert_fc1, moe_act)" (--fine-grained-activation-offloading --offload-modules): the modules listed in the
// parentheses that parplan prices (spec.hpp OffloadModules); none when the text states none. Listed modules parplan
// does not price go to *notes.
OffloadModules map_offload_modules(std::string_view text, std::vector<std::string>* notes = nullptr);
// Whether `text` states that the optimizer states live on the host and its CPUs run the Adam step: Megatron-Core's
// --optimizer-cpu-offload ("optimizer-state offload", "optimizer CPU offload"), DeepSpeed's offload_optimizer.
bool map_optimizer_offload(std::string_view text);
// Whether `text` (a row's source, or all its texts) names torchtitan or the torchao benchmarks run through it: the
// stack whose defaults (SDPA's flash backend, torchao float8's 16-bit saved inputs, FSDP2's fp32 reduce) apply.
bool names_torchtitan_stack(std::string_view text);
// GPU profile name for a hardware.gpu text ("H100 (SXM, 80GB)", "A100-80GB", "H100-SXM 80GB"...); "" when unknown,
// with the reason in *why.
std::string map_gpu(std::string_view text, const ProfileSet& profiles, std::string* why = nullptr);
// Per-GPU inter-node bandwidth (bytes/s) stated by a hardware.inter_node_per_node text, 0 when it states none.
double inter_node_Bps_per_gpu(std::string_view text, int64_t gpus_per_node);
// Attention kernel from the row's texts (source, notes): see docs/accuracy.md "Attention kernel rule".
AttentionKernel map_attention(std::string_view source, std::string_view other_text, std::string* note = nullptr);
// Whether the row's software runs the backward TP collectives asynchronously (ParallelConfig::async_tp_backward):
// blocking for sources dated 2021, for Megatron-DeepSpeed and for torchtitan's DTensor TP, asynchronous otherwise.
bool map_async_tp_backward(std::string_view source, std::string_view other_text, std::string* note = nullptr);
// Whether the row's TP collectives go through PyTorch's functional collectives on the sequence dim of [batch, seq,
// hidden] tensors (ParallelConfig::tp_collective_copies): torchtitan's DTensor TP (a torchtitan or pytorch/ao source).
bool map_tp_collective_copies(std::string_view source, std::string_view other_text, std::string* note = nullptr);
// Whether the row's weight-gradient GEMMs accumulate in place (TrainingSpec::fused_grad_accumulation): the same
// vintage rule (a separate accumulation pass for sources dated 2021 and for Megatron-DeepSpeed).
bool map_grad_accumulation_fusion(std::string_view source, std::string_view other_text, std::string* note = nullptr);
// Whether the row's element-wise ops ran compiled (TrainingSpec::compiled_elementwise): false where the row states
// it ran without torch.compile ("(eager)" in measured.other.technique, "torch.compile not used", "without
// torch.compile", "compile=false") and for torchtitan's 2024 sources that state no compile; true otherwise.
// `other_text`: the row's notes and source_locator; *note is set when false.
bool map_compiled_elementwise(std::string_view source, std::string_view technique, std::string_view other_text,
                              std::string* note = nullptr);
// Whether the row's loss is a fused cross entropy (TrainingSpec::fused_cross_entropy): false for torchtitan's 2024
// sources, whose loss_fn runs PyTorch's F.cross_entropy on the fp32 logits outside torch.compile.
bool map_fused_cross_entropy(std::string_view source, std::string* note = nullptr);
// Communication overlap stated in the row's notes: "DDP impl=local" / "all-reduce not overlapped" -> DP reduction
// after the backward; Megatron-DeepSpeed with pp > 1 -> DP reduction after the flush and whole-tensor pipeline sends
// (tp > 1); "--tp-comm-overlap" -> TP overlap; "async TP" -> micro-pipelined TP (with SP, on a dense model: `moe`
// false). Each applied rule appends a note to *out. `technique` (the row's measured.other.technique) and `notes` are
// the row's own texts: async TP is read from them only.
void map_comm_overlap(std::string_view parallel_notes, std::string_view notes, ParallelConfig& pc,
                      std::vector<std::string>* out, std::string_view technique = {}, bool moe = false);
std::string source_key(std::string_view source);

// One scored or skipped row.
struct RunResult {
  const MappedRun* run = nullptr;
  double predicted_step_time_s = 0;
  double predicted_peak_memory_bytes = 0;
  double error = 0;  // signed relative error of the step time, (predicted - measured) / measured
  bool fits = true;
  TimeBreakdown time;  // the predicted step term by term (which terms a miss can come from)
};

struct ErrorSummary {
  int64_t count = 0;
  double mean_abs = 0, median_abs = 0, worst_abs = 0, mean_signed = 0;
  std::string worst_id;
};

// Predicted peak memory over the measured one, over the scored rows that publish a peak.
struct RatioSummary {
  int64_t count = 0;
  double min = 0, mean = 0, max = 0;
};

struct ValidationReport {
  std::vector<RunResult> rows;  // every row, in file order (skipped rows have no prediction)
  ErrorSummary overall;
  std::vector<std::pair<std::string, ErrorSummary>> by_source, by_gpu;  // sorted by key
  std::vector<std::pair<std::string, RatioSummary>> memory_by_source;   // sorted by key; sources with a peak only
  int64_t skipped = 0;
};

// Predicts every scored row (with its own plan) and summarises the errors.
ValidationReport score_runs(const std::vector<MappedRun>& runs);
ErrorSummary summarize(const std::vector<double>& signed_errors, const std::vector<std::string>& ids);
// The q-quantile (0..1) of ascending values, interpolated linearly between the two nearest order statistics
// (position q (n - 1)); 0 for none. q = 0.5 is the median (of two middle values, their mean).
double quantile_sorted(const std::vector<double>& sorted, double q);
RatioSummary summarize_ratios(const std::vector<double>& ratios);

}  // namespace parplan
