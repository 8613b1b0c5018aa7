// `parplan estimate`: one plan, full memory and time breakdown; -o writes the Plan document.
#include <algorithm>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "cli/accuracy_note.hpp"
#include "cli/command.hpp"
#include "cli/interop/from_file.hpp"
#include "cli/io.hpp"
#include "cli/plan_options.hpp"
#include "cli/render.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/estimate_json.hpp"
#include "planner/cost/expert_comm.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/spec/config.hpp"
#include "planner/spec/plan_json.hpp"

namespace parplan::cli {
namespace {

struct EstimateOptions {
  ModelOptions model;
  MeshOptions mesh;
  std::string plan_file;
  FromOptions from;
  bool json = false, wide = false;
  std::string out;
};

// An fp8 plan that does not fit with 16-bit weights beside their fp8 copies, but shards them: what holding the
// weights in fp8 (--fp8-param-gather, model_states.hpp) would take. Empty otherwise.
std::string fp8_weights_hint(const Plan& plan, const Estimate& e) {
  Plan g = plan;
  g.training.fp8_param_gather = true;
  if (plan.training.fp8_param_gather || !validate(g).ok()) return "";
  const Estimate f = estimate(g);
  return fmt::format("  with fp8 weights (--fp8-param-gather): peak {} on stage {}, {}\n", fmt_bytes(f.peak_memory_bytes),
                     f.peak_stage,
                     f.fits ? fmt::format("fits with {} headroom", fmt_bytes(f.capacity_bytes - f.peak_memory_bytes))
                            : fmt::format("still over by {}", fmt_bytes(f.peak_memory_bytes - e.capacity_bytes)));
}

// " (ep N[, etp E][, DeepEP dispatch][, A2A overlapped])": the expert mesh and how its tokens move.
std::string expert_mesh_text(const ParallelConfig& pc) {
  std::string s = fmt::format(" (ep {}", pc.ep);
  if (pc.etp > 0) s += fmt::format(", etp {}", pc.etp);
  if (pc.ep > 1 && pc.moe_dispatcher == MoeDispatcher::deepep) s += ", DeepEP dispatch";
  if (pc.ep > 1 && pc.overlap_ep_comm) s += ", A2A overlapped";
  return s + ")";
}

// The plan: model, GPUs, mesh, batch, MoE routing, schedule and knobs. `batch_note`: how the flags' global batch was
// rounded, if it was (build_plan).
std::string render_plan_header(const Plan& plan, const std::string& note, const std::string& batch_note) {
  const ParallelConfig& pc = plan.parallel;
  std::string s;
  if (!note.empty()) s += note + "\n";
  s += fmt::format("{} ({} params) on {} x {} ({}, {})\n", plan.model.name,
                   fmt_count(static_cast<double>(total_params(plan.model))), plan.num_gpus, plan.gpu.name,
                   plan.cluster.name, node_shape(plan.cluster));
  s += fmt::format(
      "mesh dp {}{} x tp {} x pp {} x cp {}{}  | micro-batch {} x {} = global batch {} x seq {}\n", pc.dp,
      pc.dp_replicate > 1 ? fmt::format(" (dp_replicate {} x shard {})", pc.dp_replicate, pc.dp_shard()) : "", pc.tp,
      pc.pp, pc.cp, plan.model.is_moe() ? expert_mesh_text(pc) : "", pc.micro_batch,
      count_of(pc.num_microbatches, "microbatch"), plan.training.global_batch, plan.seq_len());
  if (!batch_note.empty()) s += batch_note + "\n";
  const ModelSpec& m = plan.model;
  // What the MoE / MTP fields set.
  if (m.capacity_factor > 0 || m.imbalance != 1.0 || m.router_groups > 0 || m.mtp_layers > 0) {
    std::string parts;
    if (m.capacity_factor > 0) parts = fmt::format("capacity factor {:g} (padded)", m.capacity_factor);
    if (m.capacity_factor == 0 && m.imbalance != 1.0) parts = fmt::format("dropless, imbalance {:g}", m.imbalance);
    if (!parts.empty()) parts = fmt::format("MoE routing: {}, most-loaded EP rank at {:g}x the mean", parts,
                                            moe_rank_load(m, pc.ep));
    if (m.router_groups > 0) {
      parts += fmt::format("{}group-limited routing: {} of {} expert groups a token", parts.empty() ? "" : "  | ",
                           m.router_group_top_k, m.router_groups);
    }
    if (m.mtp_layers > 0) parts += fmt::format("{}MTP: {} on the last stage", parts.empty() ? "" : "  | ",
                                               count_of(m.mtp_layers, "module"));
    s += parts + "\n";
  }
  if (m.sliding_window > 0) {  // what the window fields set
    const int64_t full = m.full_attention_layers_before(m.layers);
    s += fmt::format("sliding-window attention: {} tokens in {} of {} layers{}\n", m.sliding_window, m.layers - full,
                     m.layers, full > 0 ? fmt::format(" ({} full)", full) : std::string());
  }
  const char* sharding_note = pc.step_zero_stage() != pc.zero_stage
                                  ? " (with pp: ZeRO-1 within the step, as FSDP with PP runs)"
                              : pc.distributed_optimizer ? " + distributed optimizer"
                              : pc.zero_stage >= 3 && pc.zero3_gather_unit == Zero3GatherUnit::linear
                                  ? " (per-linear gathers)"
                              : pc.fsdp2 ? " (FSDP2)"
                                         : "";
  s += fmt::format("schedule {}{}  | recompute {}  | sequence parallel {}  | ZeRO {}{}{}{}  | {} ({} attention)\n",
                   to_string(pc.schedule),
                   pc.schedule == Schedule::interleaved ? fmt::format(" (vpp {})", pc.vpp)
                   : pc.post_validation                 ? std::string(" (optimizer post-validation)")
                                                        : std::string(),
                   pc.recompute == Recompute::selective && !pc.recompute_modules.is_default()
                       ? fmt::format("selective ({})", to_string(pc.recompute_modules))
                   : pc.recompute_layers > 0 ? fmt::format("full (first {} layers of each chunk)", pc.recompute_layers)
                                             : std::string(to_string(pc.recompute)),
                   pc.sequence_parallel ? "on" : "off", pc.zero_stage, sharding_note,
                   pc.offload.any() ? fmt::format("  | offload {}", to_string(pc.offload)) : "",
                   !pc.offload_modules.empty() ? fmt::format("  | offload modules {}", to_string(pc.offload_modules)) : "",
                   to_string(plan.training.precision), to_string(plan.training.attention));
  if (!pc.stage_layout.empty()) s += fmt::format("stage layers {}\n", format_stage_layout(pc.stage_layout));
  // TP collectives run otherwise than Megatron-LM's (torchtitan's DTensor TP): say how.
  std::vector<std::string> how;
  if (!pc.async_tp_backward) how.push_back("backward ones blocking");
  if (pc.tp_collective_copies) how.push_back("a copy of the tensor around each");
  if (pc.micropipeline_tp) how.push_back("micro-pipelined with their GEMMs (async TP)");
  if (plan.training.fp8_tp_gather) how.push_back("all-gathers in fp8");
  if (pc.tp > 1 && !how.empty()) s += fmt::format("TP collectives: {}\n", fmt::join(how, ", "));
  s += "\n";

  return s;
}

// Memory per stage, the peak stage's other bytes, host memory under offload, and the verdict.
std::string render_memory(const Plan& plan, const Estimate& e) {
  const ParallelConfig& pc = plan.parallel;
  std::string s;
  s += "Memory per GPU by pipeline stage (* = peak)\n";
  Table mt({"stage", "layers", "in-flight", "weights", "grads", "optimizer", "activations", "other", "total"});
  for (const StageMemory& m : e.memory) {
    const double other = m.recompute_working_set + m.zero3_buffers + m.workspace + m.comm_buffers + m.cuda_context +
                         m.fragmentation;
    mt.add({fmt::format("{}{}", m.stage, m.stage == e.peak_stage ? "*" : ""), std::to_string(m.layers),
            std::to_string(m.in_flight_chunks), fmt_bytes(m.weights), fmt_bytes(m.grads), fmt_bytes(m.optimizer),
            fmt_bytes(m.activations), fmt_bytes(other), fmt_bytes(m.total)});
  }
  s += mt.render();
  const StageMemory& pk = e.memory[static_cast<size_t>(e.peak_stage)];
  s += fmt::format("  other on stage {}: recompute working set {}, ZeRO-3 buffers {}, workspace {}, comm buffers {}, "
                   "CUDA context {}, fragmentation {}\n",
                   pk.stage, fmt_bytes(pk.recompute_working_set), fmt_bytes(pk.zero3_buffers), fmt_bytes(pk.workspace),
                   fmt_bytes(pk.comm_buffers), fmt_bytes(pk.cuda_context), fmt_bytes(pk.fragmentation));
  if (pc.offloads_any()) {
    const StageMemory& hm = *std::max_element(e.memory.begin(), e.memory.end(),
                                              [](const StageMemory& a, const StageMemory& b) { return a.host < b.host; });
    s += fmt::format("  host memory: {} offloaded per GPU on stage {}{}, {} per node{}\n", fmt_bytes(hm.host), hm.stage,
                     pc.offloads_activations()
                         ? fmt::format(" ({} of it activations; the GPU keeps {:g} layers' of what is offloaded)",
                                       fmt_bytes(hm.offloaded_activations), kActivationOffloadWindowLayers)
                         : "",
                     fmt_bytes(e.host_bytes_per_node),
                     plan.cluster.host_memory_bytes > 0
                         ? fmt::format(" of {}{}", fmt_bytes(static_cast<double>(plan.cluster.host_memory_bytes)),
                                       e.host_fits ? "" : ": DOES NOT FIT")
                         : " (the cluster profile gives no host memory: not checked)");
  }
  const double headroom = e.capacity_bytes - e.peak_memory_bytes;
  if (!e.host_fits && e.peak_memory_bytes <= e.capacity_bytes) {
    s += fmt::format("DOES NOT FIT: the GPU peak {} fits {}, but the offloaded states need {} per node, above its {} of "
                     "host memory\n\n",
                     fmt_bytes(e.peak_memory_bytes), fmt_bytes(e.capacity_bytes), fmt_bytes(e.host_bytes_per_node),
                     fmt_bytes(static_cast<double>(plan.cluster.host_memory_bytes)));
  } else if (e.fits) {
    s += fmt::format("FITS: peak {} on stage {} of {} ({} headroom, {} used)\n\n", fmt_bytes(e.peak_memory_bytes),
                     e.peak_stage, fmt_bytes(e.capacity_bytes), fmt_bytes(headroom),
                     fmt_percent(e.peak_memory_bytes / e.capacity_bytes));
  } else {
    s += fmt::format("DOES NOT FIT: peak {} on stage {} exceeds {} by {}\n", fmt_bytes(e.peak_memory_bytes),
                     e.peak_stage, fmt_bytes(e.capacity_bytes), fmt_bytes(-headroom));
    s += fp8_weights_hint(plan, e) + "\n";
  }

  return s;
}

// The step time, its error family, its terms, and the offload copies.
std::string render_time(const Plan& plan, const Estimate& e) {
  const ParallelConfig& pc = plan.parallel;
  std::string s;
  const TimeBreakdown& t = e.time;
  s += fmt::format("Step time {}  | {:.0f} tokens/s ({:.0f} per GPU)  | MFU {}, HFU {} of {}\n", fmt_seconds(t.step_s),
                   t.tokens_per_s, t.tokens_per_s / static_cast<double>(plan.num_gpus), fmt_percent(t.mfu),
                   fmt_percent(t.hfu), mfu_basis(plan));
  s += accuracy_sentence(plan, t.step_s);
  Table tt({"term", "time", "fraction"});
  auto row = [&](const char* name, double v) { tt.add({name, fmt_seconds(v), fmt_percent(t.step_s > 0 ? v / t.step_s : 0)}); };
  row("compute", t.compute_s);
  row("pipeline bubble", t.bubble_s);
  row("TP comm (exposed)", t.tp_comm_s);
  row("CP comm (exposed)", t.cp_comm_s);
  if (plan.model.is_moe()) row("EP all-to-all", t.ep_comm_s);
  row("PP send/recv", t.pp_comm_s);
  if (pc.step_zero_stage() >= 3) row("ZeRO-3 gathers (exposed)", t.zero3_exposed_s);
  if (pc.offloads_activations()) row("host copies (exposed)", t.offload_exposed_s);
  row("DP comm (exposed)", t.dp_comm_exposed_s);
  row("optimizer step", t.optimizer_s);
  s += tt.render();
  s += fmt::format("  DP comm total {} ({} hidden behind backward); slowest stage {}\n", fmt_seconds(t.dp_comm_total_s),
                   fmt_seconds(t.dp_comm_total_s - t.dp_comm_exposed_s), t.slowest_stage);
  if (e.dp.replica_group > 1) {
    s += fmt::format("  HSDP: gradients reduce-scattered over the shard group of {} ranks, each shard ({} per rank) "
                     "then all-reduced across the {} replicas: {} per reduction{}\n",
                     e.dp.group, fmt_bytes(e.dp.replica_bytes), e.dp.replica_group, fmt_seconds(e.dp.replica_reduce_s),
                     e.dp.per_microbatch ? " (every microbatch)" : " (once a step)");
  }
  if (pc.offload.optimizer) {
    const OffloadStepTime& o = t.offload;
    s += fmt::format("  optimizer step on the host: gradients to host {} ({}), CPU Adam {}, parameters to GPU {} ({})\n",
                     fmt_seconds(o.grad_d2h_s), fmt_bytes(o.grad_bytes), fmt_seconds(o.cpu_optimizer_s),
                     fmt_seconds(o.param_h2d_s), fmt_bytes(o.param_bytes));
  }
  if (pc.offloads_activations()) {
    s += fmt::format("  activations to the host and back: {} each way per layer and microbatch beside the next layer's "
                     "forward / backward ({} forward); exposed {} per layer, {} per microbatch on stage {}\n",
                     fmt_seconds(e.layer.activation_copy_s), fmt_seconds(e.layer.forward_s),
                     fmt_seconds(e.layer.exposed_offload_s),
                     fmt_seconds(e.stages[static_cast<size_t>(t.slowest_stage)].offload_s), t.slowest_stage);
  }
  if (pc.offload.params) {
    s += fmt::format("  ZeRO-3 gathers include the copy of each offloaded shard to the GPU ({} per layer)\n",
                     fmt_seconds(e.layer.offload_fetch_s));
  }
  return s;
}

std::string render_estimate(const Plan& plan, const Estimate& e, const std::string& note, const std::string& batch_note) {
  return render_plan_header(plan, note, batch_note) + render_memory(plan, e) + render_time(plan, e);
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<EstimateOptions>();
  add_model_options(app, o->model);
  add_mesh_options(app, o->mesh);
  app.add_option("--plan", o->plan_file, "Read the plan from a Plan document instead of flags");
  add_from_options(app, o->from, false);
  app.add_flag("--json", o->json, "Print the estimate as JSON (schema: docs/json-schema.md)");
  app.add_flag("--wide", o->wide, kWideHelp);
  app.add_option("-o,--out", o->out, "Write the Plan document (JSON) for simulate, check and run");
  return [o]() {
    refuse_shared_outputs({{"-o", o->out}, json_output(o->json)});
    if (!o->plan_file.empty()) forbid_with_plan_file(o->model, o->mesh, {"--profile"});
    const ProfileSet profiles = load_profiles(o->model);
    std::string note, batch_note;
    const Plan plan = load_plan_source("estimate", o->plan_file, o->from, o->model, o->mesh, profiles, &note, &batch_note);
    const Estimate e = estimate(plan);
    if (!o->out.empty()) write_file_atomic(o->out, plan_to_json(plan).dump(2) + "\n", "-o");
    if (o->json) {
      nlohmann::json j = estimate_to_json(plan, e);
      j["accuracy"] = accuracy_json(plan, e.time.step_s);
      if (!batch_note.empty()) j["global_batch_note"] = batch_note;
      fmt::print("{}\n", j.dump(2));
    } else {
      const std::string text = render_estimate(plan, e, note, batch_note);
      fmt::print(is_stdout(o->out) ? stderr : stdout, "{}", o->wide ? text : wrap_lines(text));  // plan on stdout: report to stderr
    }
    return e.fits ? kOk : kCheckFailed;
  };
}

const RegisterCommand reg{{"estimate", "Estimate memory and step time of one plan, term by term", 20, setup}};

}  // namespace
}  // namespace parplan::cli
