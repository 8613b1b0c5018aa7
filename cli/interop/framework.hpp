// Training-framework configs (Megatron-LM launch scripts and YAML args, NeMo YAML, torchtitan TOML, DeepSpeed JSON,
// nanotron YAML) read into parplan's plan flags: each value the file gives becomes the plan flag that means it
// (--tensor-model-parallel-size 8 -> --tp 8), remembering where it came from; what the file leaves out and parplan
// needs is filled with the framework's default and listed as assumed; what parplan does not model is listed as
// ignored. Mapping tables: docs/interop.md.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/spec/spec.hpp"

namespace parplan::cli {

enum class Framework { megatron, nemo, torchtitan, deepspeed, nanotron };
inline constexpr std::string_view kFrameworkChoices = "auto, megatron, nemo, torchtitan, deepspeed, nanotron";
std::string_view framework_name(Framework f);           // "megatron"
std::string_view framework_document(Framework f);       // "a Megatron-LM launch script or YAML args"
// The framework a --format value names (`flag` in the error), or nullopt for "auto".
std::optional<Framework> parse_framework(const std::string& value, std::string_view flag);

// The end of a placeholder for a value the file sets only in a conditional ("$TP (set only inside the `if` on line 3,
// which may not run)"): the messages about it ask to flatten the script rather than to set the value.
inline constexpr std::string_view kMayNotRun = ", which may not run)";
inline bool in_branch(std::string_view placeholder) { return placeholder.find(kMayNotRun) != std::string_view::npos; }

// One plan flag's value from the file.
struct Setting {
  std::string value;        // as the plan flag takes it ("8", "selective"; "" for a flag without a value)
  std::string origin;       // the file's option and line: "--tensor-model-parallel-size (line 12)"
  std::string placeholder;  // set when the value is an unresolved ${VAR} / $(cmd) / ${oc.env:...}: the text
};

struct Imported {
  Framework format = Framework::megatron;
  std::map<std::string, Setting> flags;  // plan flag ("--tp") -> value
  std::optional<ModelSpec> model;        // the model's shape, when the file gives one
  std::string model_name;                // a parplan model profile the file names (torchtitan name + flavor)
  std::string model_origin;              // where model / model_name came from
  std::string gpus_hint;                 // the file's options that give the GPU count (for the error without it)
  std::vector<std::string> assumed;      // "--tp 1: ... (Megatron-LM default)"
  std::vector<std::string> ignored;      // "--lr 3e-4 (line 20): not modelled"
  // torchtitan's layer-wise selective AC (activation_checkpoint.selective_ac_option N): every N-th block fully
  // recomputed, with --recompute full from `origin`. A chunk's layers are known only once the model and mesh are, so
  // plan_from_framework turns it into --recompute-layers floor(chunk layers / N) after building the plan.
  struct EveryNthLayer {
    int64_t n = 0;
    std::string origin;
  };
  std::optional<EveryNthLayer> every_nth_layer;
  // Megatron-LM's vpp from --num-layers-per-virtual-pipeline-stage, and the stage layers from
  // --pipeline-model-parallel-layout, follow from pp, which the command line may replace: plan_from_framework works
  // them out (resolve_pipeline_split) once the command line's --pp is known.
  struct PipelineSplit {
    std::optional<int64_t> layers_per_virtual_stage;
    int64_t layers = 0;            // the model's layers, with the embedding and the loss where they count as layers
    bool counts_extra = false;     // under --account-for-{embedding,loss}-in-pipeline-split
    std::string vstage_origin, layout, layout_origin;
  };
  std::optional<PipelineSplit> pipeline_split;
  // torchtitan with pp > 1: each gradient-accumulation step is its own pipeline schedule of `microbatches`
  // (local_batch_size / pipeline_parallel_microbatch_size, from `local_origin`), its bubble paid each time.
  // plan_from_framework refuses a plan with more microbatches a step, which parplan would price as one schedule.
  struct OneSchedule {
    int64_t microbatches = 0;
    std::string local_origin;
  };
  std::optional<OneSchedule> one_schedule;
  // Megatron-Core's sliding window (--window-size with a bounded left side, and --window-attn-skip-freq; NeMo's
  // model.window_size, model.window_attn_skip_freq), as "origin 'value'": not read into the model shape.
  // plan_from_framework refuses them unless the command line's --model gives a model with a window (which then
  // prices it) and lists them as ignored. Empty without a window.
  std::vector<std::string> window_options;
  // torchtitan's data_parallel_shard_degree -1 (the rest) with replicas and cp 1, from `titan_shard_rest` (the two
  // keys): where the GPU count leaves a rest of 1 (dp = the replicas), torchtitan runs DDP, so plan_from_framework
  // drops the HSDP replicas and ZeRO-3 it was imported with. Empty otherwise.
  std::string titan_shard_rest;
  // A torchtitan file: float8 tensorwise TP gathers in fp8 (Float8ColwiseParallel / Float8RowwiseParallel), which
  // depends on the precision, recipe, tp and SP the plan ends with, so plan_from_framework assumes --fp8-tp-gather
  // once the command line's values are in (where they make it fp8 tensorwise with SP over tp > 1).
  bool titan_float8_tp = false;

  // Sets `flag`; a second, different value for it is an InputError naming both origins.
  void set(const std::string& flag, const std::string& value, const std::string& origin, const std::string& where);
  // Sets `flag` to the framework default `value` unless the file gave it, and lists it as assumed (`why`).
  void assume(const std::string& flag, const std::string& value, const std::string& why);
  bool has(const std::string& flag) const { return flags.count(flag) != 0; }
};

// `s` as a non-negative decimal integer below 10^18 (no sign, no leading zero), or nullopt.
std::optional<int64_t> decimal(std::string_view s);

// `s` with every '_' written '-' (Megatron-DeepSpeed's --num_gpus, YAML keys as Megatron arguments).
std::string dashed(std::string s);

// The format `text` reads as: from its content (a shebang or pretrain_*.py command, a JSON object, TOML table headers,
// YAML with trainer:/parallelism: ...), else from the extension. nullopt when neither says.
std::optional<Framework> guess_framework(std::string_view text, const std::string& path);

// Reads `text` (the file `path`) as `format` (nullopt: guess_framework). A file that reads as another format than
// the one asked for is an InputError saying which it looks like; syntax errors name the line.
Imported import_framework(std::string_view text, const std::string& path, std::optional<Framework> format);

// The readers, one per framework (cli/interop/<framework>.cpp).
Imported import_megatron_script(std::string_view text, const std::string& path);
Imported import_megatron_yaml(std::string_view text, const std::string& path);
Imported import_nemo(std::string_view text, const std::string& path);
Imported import_torchtitan(std::string_view text, const std::string& path);
Imported import_deepspeed(std::string_view text, const std::string& path);
Imported import_nanotron(std::string_view text, const std::string& path);

// Megatron-LM's arguments (shared by the launch-script, YAML and NeMo readers): `args` are (name without "--",
// value or nullopt for a flag given alone, origin); each known one becomes a plan flag or part of the model shape,
// unknown ones are listed as ignored. Fills the Megatron-LM defaults for what is left out.
struct MegatronArg {
  std::string name;
  std::optional<std::string> value;
  std::string origin;
  std::string placeholder;  // unresolved text in the value
};
void apply_megatron_args(const std::vector<MegatronArg>& args, Imported& out, const std::string& path);
// Imported::pipeline_split into the file's --vpp / --stage-layers, with pp the command line's `given_pp` ("" when it
// gives none) or else the file's. `model_given`: the command line's --model replaces the file's layers.
void resolve_pipeline_split(Imported& im, const std::string& given_pp, bool given_vpp, bool model_given,
                            const std::string& where);

// The model shape from Megatron-style sizes (layers, hidden, heads, ...), Megatron-LM's defaults for the rest.
struct ShapeArgs {
  std::optional<int64_t> layers, hidden, heads, kv_heads, ffn, vocab, seq, experts, top_k;
  bool swiglu = false, rmsnorm = false, rotary = false, bias = true, tied = true, dropout = true;
  // Megatron-Core MoE and attention widths: --moe-ffn-hidden-size, --moe-shared-expert-intermediate-size,
  // --moe-layer-freq (its text), --kv-channels; MLA: --multi-latent-attention, --q-lora-rank, --kv-lora-rank,
  // --qk-head-dim, --qk-pos-emb-head-dim, --v-head-dim. Origins for the errors that name them.
  std::optional<int64_t> moe_ffn, shared_size, kv_channels, q_lora, kv_lora, qk_head_dim, qk_pos, v_head_dim;
  std::string shared_origin, layer_freq, layer_freq_origin, mla_origin;
  bool mla = false;
  // The file's option and line of each size given, by the field's name above ("heads", "kv_lora"): the errors about
  // an impossible shape name them.
  std::map<std::string, std::string> origins;
};
// nullopt without layers, hidden and heads; a vocabulary the file does not give is 50257, assumed for `vocab_why`.
// A shape a Plan document could not hold (a size 0, kv heads not dividing the heads, ...) is an InputError naming
// the file's option (ShapeArgs::origins) that gave the value.
std::optional<ModelSpec> model_from_shape(const ShapeArgs& s, Imported& out, const std::string& path,
                                          std::string_view vocab_why);

}  // namespace parplan::cli
