// The flags shared by estimate, simulate, check and run that describe one plan (model, cluster, mesh, knobs),
// and their translation into a validated Plan.
#pragma once
#include <CLI/CLI.hpp>
#include <algorithm>
#include <fmt/core.h>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/spec/error.hpp"
#include "planner/spec/profiles.hpp"
#include "planner/spec/spec.hpp"

namespace parplan::cli {

// The enum value a flag names (parse_enum), or an InputError naming the flag, the value and the choices.
template <typename E>
E enum_flag(const std::string& value, std::string_view flag, std::string_view choices) {
  E out{};
  if (!parse_enum(value, out)) throw InputError(fmt::format("{}: unknown value '{}' (use {})", flag, excerpt(value), choices));
  return out;
}

// The enum values a comma-separated flag names ("1f1b,interleaved"), each once, in the order given; an InputError
// naming the flag for an unknown or empty entry.
template <typename E>
std::vector<E> enum_list(const std::string& value, std::string_view flag, std::string_view choices) {
  std::vector<E> out;
  for (size_t begin = 0;;) {
    const size_t end = std::min(value.find(',', begin), value.size());
    const std::string item = value.substr(begin, end - begin);
    if (item.empty()) {
      throw InputError(fmt::format("{}: '{}' has an empty entry (use {}, separated by commas)", flag, value, choices));
    }
    const E e = enum_flag<E>(item, flag, choices);
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
    if (end == value.size()) return out;
    begin = end + 1;
  }
}

struct ModelOptions {
  std::string model;              // profile name or JSON file
  std::string params;             // "175e9", "175B", ...
  std::string gpu, cluster;       // profile names or JSON files
  std::vector<std::string> profile_files;  // --profile FILE (repeatable): user profiles overriding embedded ones
  std::optional<int64_t> gpus;
  std::optional<int64_t> seq;
  std::string precision = "bf16";
  std::string fp8_recipe;  // with --precision fp8 only (default tensorwise)
  bool fp8_param_gather = false;  // --fp8-param-gather
  bool fp8_tp_gather = false;     // --fp8-tp-gather
  std::string grad_reduce_dtype;  // --grad-reduce-dtype fp32 | bf16 | fp16 (default: fp32, fp16 for fp16 training)
  std::string adam_moments_dtype;  // --adam-moments-dtype fp32 | bf16 | fp16 | fp8 (default fp32)
  bool fp8_16bit_saved_inputs = false;  // --fp8-16bit-saved-inputs
  bool fp8_activation_cache = false;     // --fp8-activation-cache
  std::string attention = "flash";
  bool allow_tp_across_nodes = false;
  // MoE routing and multi-token prediction, over the model's own (--moe-capacity-factor none|F, --moe-imbalance,
  // --moe-router-groups, --moe-router-group-top-k, --mtp-layers).
  std::string moe_capacity_factor;
  std::optional<double> moe_imbalance;
  std::optional<int64_t> moe_router_groups, moe_router_group_top_k;
  std::optional<int64_t> mtp_layers;
  // Sliding-window attention over the model's own (--sliding-window N, 0 = none; --sliding-window-pattern P).
  std::optional<int64_t> sliding_window, sliding_window_pattern;
  std::optional<ModelSpec> model_spec;  // a model shape read from a framework config (--from), when no --model / --params
  std::vector<const CLI::Option*> options;  // the flags above, as added by add_model_options
};

struct MeshOptions {
  std::optional<int64_t> dp, tp, pp, cp, ep, vpp, micro_batch, microbatches, global_batch, tokens_per_step;
  std::optional<int64_t> first_stage_layers, last_stage_layers, etp;
  std::optional<int64_t> dp_replicate;  // --dp-replicate (HSDP replicas)
  std::optional<std::string> stage_layers;  // --stage-layers: parse_stage_layout()'s text
  std::string schedule, recompute, zero3_gather_unit, moe_dispatcher, offload;
  std::string recompute_modules;  // --recompute-modules (with --recompute selective)
  std::optional<int64_t> recompute_layers;  // --recompute-layers (with --recompute full)
  std::string offload_modules;    // --offload-modules (Megatron-Core fine-grained activation offloading)
  bool overlap_ep = false;
  bool sequence_parallel = false, distributed_optimizer = false, fsdp2 = false;
  int zero = 0;
  bool embedding_in_split = false, loss_in_split = false;
  bool no_overlap_dp = false, overlap_tp = false, no_overlap_cp = false, no_async_tp = false, no_p2p_scatter_gather = false,
       tp_collective_copies = false, micropipeline_tp = false,
       no_fused_grad_accumulation = false, overlap_p2p = false, post_validation = false, eager_cross_entropy = false,
       eager_elementwise = false;
  std::optional<double> bucket_mb;
  std::vector<const CLI::Option*> options;  // the flags above, as added by add_mesh_options
};

// Adds --model --params --gpu --cluster --profile --gpus --seq and add_knob_options' flags.
void add_model_options(CLI::App& app, ModelOptions& o);
// Adds the flags that are neither the model, the hardware nor the mesh, appending them to o.options: --precision and
// the fp8 knobs, --grad-reduce-dtype, --adam-moments-dtype, --attention, --allow-tp-across-nodes, the MoE routing
// (--moe-capacity-factor, --moe-imbalance), --mtp-layers and the sliding window.
void add_knob_options(CLI::App& app, ModelOptions& o);
// --precision and --fp8-recipe into tr (a recipe without fp8 is an error naming the flag).
void set_precision(TrainingSpec& tr, const ModelOptions& o);
// Adds --dp --tp --pp --cp --ep --vpp --micro-batch --microbatches --global-batch --tokens-per-step --schedule --recompute
// --sequence-parallel --zero --zero3-gather-unit --distributed-optimizer --dp-replicate --offload --no-overlap-dp
// --overlap-tp --no-overlap-cp --overlap-p2p --bucket-mb
// --first-stage-layers --last-stage-layers --stage-layers --etp --moe-dispatcher --overlap-ep --account-for-*-in-pipeline-split.
void add_mesh_options(CLI::App& app, MeshOptions& o);

// The --offload set (parse_offload), or an InputError naming the flag.
OffloadSet offload_flag(const std::string& value);
// Adds --global-batch and --tokens-per-step: the two ways to give the batch (requested_batch()).
void add_batch_options(CLI::App& app, std::optional<int64_t>& global_batch, std::optional<int64_t>& tokens_per_step);

// With --plan FILE the plan comes from the document: any model or mesh flag given beside it (other than `allowed`)
// is an InputError naming it, not silently ignored.
void forbid_with_plan_file(const ModelOptions& mo, const MeshOptions& me, std::initializer_list<std::string_view> allowed);

// How --model / --gpu / --cluster (and run's --gpu, a TOML plan's references) tell a file from a profile name: a value
// with a '/' or a .json suffix is a file.
bool names_a_file(const std::string& s);

// Embedded profiles plus the user's --profile files, in order (a file sharing a name or alias with an embedded
// profile replaces it).
// Two different files defining the same GPU, cluster or model name (or alias) are an InputError naming both.
ProfileSet load_profiles(const std::vector<std::string>& profile_files);
ProfileSet load_profiles(const ModelOptions& o);

// Resolved model / GPU / cluster (no mesh yet). `model_note` says where the model came from.
struct Target {
  ModelSpec model;
  GpuSpec gpu;
  ClusterSpec cluster;
  std::string model_note;
};
Target resolve_target(const ModelOptions& o, const ProfileSet& profiles);

// The documented default tokens per step for a GPU count (docs/cost-model.md#default-global-batch): 4 Mi up to 2,048
// GPUs, twice as many each time the count quadruples past that (8 Mi up to 8,192 GPUs, 16 Mi up to 32,768, ...).
int64_t default_tokens_per_step(int64_t gpus);

// The global batch the flags ask for, before a mesh rounds it: --global-batch sequences, --tokens-per-step in whole
// sequences (rounded up), or the default tokens for the GPU count in whole sequences (at least one).
struct BatchRequest {
  int64_t sequences = 0;
  bool exact = false;  // --global-batch: a mesh it does not divide is an error, not a reason to round it
  std::string what;    // "--global-batch", "--tokens-per-step 1000000", "the default for 64 GPUs, 4 Mi tokens"
  std::string source;  // `what`, and "rounded up to whole sequences of 2048" when the tokens were
};
BatchRequest requested_batch(std::optional<int64_t> global_batch, std::optional<int64_t> tokens_per_step, int64_t seq,
                             int64_t gpus);

// A complete, validated plan from the flags (InputError naming the flag on any inconsistency). `batch_note` (may be
// null) is set to one line when the flags' batch was rounded (to whole sequences, or up to a multiple of dp x
// micro-batch), else cleared.
Plan build_plan(const ModelOptions& mo, const MeshOptions& me, const ProfileSet& profiles, std::string* model_note = nullptr,
                std::string* batch_note = nullptr);

// Loads a Plan document; --plan FILE.
Plan load_plan_file(const std::string& path, const ProfileSet& profiles);

// A ZB-2p plan with Zero Bubble's optimizer post-validation is priced as a step of a continuous run (pipeline.hpp,
// zb_2p_step_s), while `simulate` and `run` time one iteration with its warm-up fill: the line that says so, naming
// `what` ("the simulation", "each measured step"); empty for every other plan.
std::string post_validation_note(const Plan& plan, std::string_view what);

// --recompute-layers K as given to estimate-like commands and to suggest: K itself, refused when negative (0 = every
// layer, K = the first K of each model chunk).
int64_t recompute_layers_arg(int64_t k);

}  // namespace parplan::cli
