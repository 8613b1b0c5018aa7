// `parplan simulate`: event-level timeline of one training step (bubble and comm fractions, per-stage breakdown,
// activation peaks); --trace (Chrome/Perfetto JSON), --svg, --ascii, --json.
#include <fmt/core.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/interop/from_file.hpp"
#include "cli/io.hpp"
#include "cli/plan_options.hpp"
#include "cli/render.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/spec/error.hpp"
#include "simulator/ascii.hpp"
#include "simulator/simulate.hpp"
#include "simulator/svg.hpp"
#include "simulator/trace.hpp"

namespace parplan::cli {
namespace {

struct SimulateOptions {
  ModelOptions model;
  MeshOptions mesh;
  std::string plan_file, trace, svg;
  FromOptions from;
  bool ascii = false, json = false, no_overlap = false, no_contention = false, wide = false;
};

std::string title_of(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  return fmt::format("{} on {} x {}: dp {}{} tp {} pp {} cp {}, {}{}, {}", plan.model.name, plan.num_gpus,
                     plan.gpu.name,
                     pc.dp, pc.dp_replicate > 1 ? fmt::format(" (dp_replicate {})", pc.dp_replicate) : "", pc.tp, pc.pp,
                     pc.cp, to_string(pc.schedule),
                     pc.schedule == Schedule::interleaved ? fmt::format(" (vpp {})", pc.vpp) : "",
                     count_of(pc.num_microbatches, "microbatch"));
}

std::string render_text(const Plan& plan, const sim::SimResult& r, const Estimate& est, const std::string& note) {
  const sim::SimSummary& s = r.summary;
  const TimeBreakdown& closed = est.time;
  std::string o;
  if (!note.empty()) o += note + "\n";
  o += title_of(plan) + "\n";
  if (!est.host_fits && est.peak_memory_bytes <= est.capacity_bytes) {
    o += fmt::format("DOES NOT FIT: the GPU peak {} fits {}, but the offloaded states need {} per node, above its {} "
                     "of host memory (`parplan estimate` gives the breakdown); the step is simulated as if it fit\n",
                     fmt_bytes(est.peak_memory_bytes), fmt_bytes(est.capacity_bytes), fmt_bytes(est.host_bytes_per_node),
                     fmt_bytes(static_cast<double>(plan.cluster.host_memory_bytes)));
  } else if (!est.fits) {
    o += fmt::format("DOES NOT FIT: peak {} on stage {} exceeds {} by {} (`parplan estimate` gives the breakdown); "
                     "the step is simulated as if it fit\n",
                     fmt_bytes(est.peak_memory_bytes), est.peak_stage, fmt_bytes(est.capacity_bytes),
                     fmt_bytes(est.peak_memory_bytes - est.capacity_bytes));
  }
  o += fmt::format("Simulated step {}  | closed form {} ({:+.2f}%)  | {} tasks, {} events\n\n", fmt_seconds(s.step_s),
                   fmt_seconds(closed.step_s), 100.0 * (s.step_s / closed.step_s - 1.0), s.tasks, s.events);
  o += fmt::format("Where the step goes (stage {}, the busiest)\n", s.critical_stage);
  Table t({"term", "simulated", "fraction", "closed form"});
  auto row = [&](const char* name, double frac, double cf) {
    t.add({name, fmt_seconds(frac * s.step_s), fmt_percent(frac), fmt_seconds(cf)});
  };
  row("compute", s.compute, closed.compute_s);
  row("pipeline bubble", s.bubble, closed.bubble_s);
  row("TP comm (exposed)", s.tp_comm, closed.tp_comm_s);
  row("CP comm (exposed)", s.cp_comm, closed.cp_comm_s);
  if (plan.model.is_moe()) row("EP all-to-all", s.ep_comm, closed.ep_comm_s);
  if (plan.parallel.step_zero_stage() >= 3) row("ZeRO-3 gathers (exposed)", s.zero3_comm, closed.zero3_exposed_s);
  if (plan.parallel.offloads_activations()) row("host copies (exposed)", s.offload_exposed, closed.offload_exposed_s);
  row("PP send/recv (exposed)", s.pp_comm, closed.pp_comm_s);
  row("DP comm (exposed)", s.dp_comm_exposed, closed.dp_comm_exposed_s);
  row("optimizer step", s.optimizer, closed.optimizer_s);
  o += t.render();
  o += fmt::format("  DP comm total {} ({}); p2p transfers off the compute stream are waited for inside the bubble\n\n",
                   fmt_seconds(s.dp_comm_total * s.step_s), fmt_percent(s.dp_comm_total));
  o += "Per stage\n";
  Table st({"stage", "busy", "bubble", "exposed comm", "DP exposed", "p2p total", "live (sim/model)", "activations"});
  for (const sim::StageSummary& x : s.stages) {
    st.add({std::to_string(x.stage), fmt_seconds(x.busy_s), fmt_seconds(x.bubble_s), fmt_seconds(x.exposed_comm_s),
            fmt_seconds(x.dp_exposed_s), fmt_seconds(x.pp_total_s),
            fmt::format("{}/{}", x.peak_live_until_weight_grad, x.planner_in_flight_chunks), fmt_bytes(x.peak_activation_bytes)});
  }
  o += st.render();
  return o;
}

nlohmann::json to_json(const Plan& plan, const sim::SimResult& r, const Estimate& est, const sim::SimOptions& opt) {
  const sim::SimSummary& s = r.summary;
  const TimeBreakdown& closed = est.time;
  nlohmann::json j;
  j["plan"] = title_of(plan);
  j["fits"] = est.fits;
  j["peak_memory_bytes"] = est.peak_memory_bytes;
  j["capacity_bytes"] = est.capacity_bytes;
  j["options"] = {{"overlap", opt.overlap}, {"contention", opt.contention}, {"bucket_bytes", plan.training.dp_bucket_bytes}};
  j["step_s"] = s.step_s;
  j["closed_form_step_s"] = closed.step_s;
  // ZB-2p with post_validation: the closed form prices a continuous run's step, the simulation one iteration.
  if (const std::string pv = post_validation_note(plan, "the simulation"); !pv.empty()) j["note"] = pv;
  j["critical_stage"] = s.critical_stage;
  j["fractions"] = {{"compute", s.compute},       {"bubble", s.bubble},
                    {"tp_comm", s.tp_comm},       {"cp_comm", s.cp_comm},
                    {"ep_comm", s.ep_comm},       {"zero3_comm", s.zero3_comm},
                    {"offload_exposed", s.offload_exposed},
                    {"pp_comm", s.pp_comm},       {"dp_comm_exposed", s.dp_comm_exposed},
                    {"dp_comm_total", s.dp_comm_total}, {"optimizer", s.optimizer}};
  nlohmann::json stages = nlohmann::json::array();
  for (const sim::StageSummary& x : s.stages) {
    stages.push_back({{"stage", x.stage},
                      {"busy_s", x.busy_s},
                      {"compute_s", x.compute_s},
                      {"bubble_s", x.bubble_s},
                      {"exposed_comm_s", x.exposed_comm_s},
                      {"tp_exposed_s", x.tp_exposed_s},
                      {"cp_exposed_s", x.cp_exposed_s},
                      {"ep_exposed_s", x.ep_exposed_s},
                      {"zero3_exposed_s", x.zero3_exposed_s},
                      {"offload_exposed_s", x.offload_exposed_s},
                      {"pp_exposed_s", x.pp_exposed_s},
                      {"pp_total_s", x.pp_total_s},
                      {"dp_exposed_s", x.dp_exposed_s},
                      {"dp_total_s", x.dp_total_s},
                      {"optimizer_s", x.optimizer_s},
                      {"peak_live_chunks", x.peak_live_chunks},
                      {"peak_live_until_weight_grad", x.peak_live_until_weight_grad},
                      {"memory_model_in_flight_chunks", x.planner_in_flight_chunks},
                      {"peak_activation_bytes", x.peak_activation_bytes},
                      {"memory_model_activation_bytes", x.planner_activation_bytes}});
  }
  j["stages"] = stages;
  j["tasks"] = s.tasks;
  j["events"] = s.events;
  return j;
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  add_model_options(app, o->model);
  add_mesh_options(app, o->mesh);
  app.add_option("--plan", o->plan_file, "Read the plan from a Plan document instead of flags");
  add_from_options(app, o->from, false);
  app.add_option("--trace", o->trace, "Write a Chrome trace event JSON (chrome://tracing, Perfetto)");
  app.add_option("--svg", o->svg, "Write an SVG picture of the schedule");
  app.add_flag("--ascii", o->ascii, "Print the schedule as text (small cases)");
  app.add_flag("--json", o->json, "Print the summary as JSON");
  app.add_flag("--wide", o->wide, kWideHelp);
  app.add_flag("--no-overlap", o->no_overlap,
               "Serialise TP/CP/DP communication and p2p sends with compute (ZeRO-3 parameter prefetch stays on)");
  app.add_flag("--no-contention", o->no_contention, "Give every transfer the full link bandwidth");
  return [o]() {
    require_writable(o->trace, "--trace");  // both outputs checked first: a bad --svg must not leave a lone trace
    require_writable(o->svg, "--svg");
    const std::vector<OutputFlag> outputs = {{"--trace", o->trace}, {"--svg", o->svg}, json_output(o->json)};
    refuse_shared_outputs(outputs);
    if (!o->plan_file.empty()) forbid_with_plan_file(o->model, o->mesh, {"--profile", "--bucket-mb"});
    const ProfileSet profiles = load_profiles(o->model);
    std::string note, batch_note;
    const Plan plan = load_plan_source("simulate", o->plan_file, o->from, o->model, o->mesh, profiles, &note, &batch_note);
    if (!batch_note.empty()) note += (note.empty() ? "" : "\n") + batch_note;
    const std::string pv_note = post_validation_note(plan, "the simulation");
    if (!pv_note.empty()) note += (note.empty() ? "" : "\n") + pv_note;
    refuse_replacing_input(o->trace, "--trace");  // before simulating, and both before either is written
    refuse_replacing_input(o->svg, "--svg");
    sim::SimOptions so;
    so.overlap = !o->no_overlap;
    so.contention = !o->no_contention;
    if (!o->plan_file.empty() && o->mesh.bucket_mb) {
      if (!std::isfinite(*o->mesh.bucket_mb)) throw InputError("--bucket-mb: must be a finite number of MB");
      so.bucket_bytes = static_cast<int64_t>(*o->mesh.bucket_mb * 1e6);
    }
    const Plan priced = sim::priced_plan(plan, so);  // what the simulation priced: the closed form is shown for the same knobs
    so.record_timeline = !o->trace.empty() || !o->svg.empty() || o->ascii;
    const sim::SimResult r = sim::simulate(plan, so);
    EstimateOptions eo;
    eo.link_sharing = so.contention;
    const Estimate closed = estimate(priced, eo);
    // The trace and the SVG are written as a pair: both or neither (an error or a signal leaves no lone trace).
    const std::string trace = o->trace.empty() ? "" : sim::chrome_trace_json(r.timeline);
    const std::string svg = o->svg.empty() ? "" : sim::render_svg(r.timeline, title_of(plan), {&r.summary});
    std::vector<OutputFile> files;
    if (!o->trace.empty()) files.push_back({o->trace, trace, "--trace"});
    if (!o->svg.empty()) files.push_back({o->svg, svg, "--svg"});
    write_files_atomic(files);
    if (o->json) {
      fmt::print("{}\n", to_json(priced, r, closed, so).dump(2));
    } else {
      std::FILE* report = report_stream(outputs);  // a trace or SVG on stdout: the report to stderr
      const std::string text = render_text(plan, r, closed, note);
      fmt::print(report, "{}", o->wide ? text : wrap_lines(text));
      if (o->ascii) fmt::print(report, "\n{}", sim::render_ascii(r.timeline, 100));
    }
    return closed.fits ? kOk : kCheckFailed;  // as estimate: the plan does not fit (its outputs written all the same)
  };
}

const RegisterCommand reg{{"simulate", "Simulate one training step event by event: timeline, bubble and comm fractions",
                           30, setup}};

}  // namespace
}  // namespace parplan::cli
