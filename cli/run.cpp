// `parplan run`: lower a plan to per-rank programs, execute them on a backend and print predicted vs measured.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fmt/core.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <unistd.h>

#include "cli/command.hpp"
#include "cli/interop/from_file.hpp"
#include "cli/io.hpp"
#include "cli/plan_options.hpp"
#include "cli/render.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/spec/error.hpp"
#include "runtime/calibrate.hpp"
#include "runtime/executor.hpp"
#include "runtime/lower.hpp"
#include "runtime/measured_timeline.hpp"
#include "runtime/report.hpp"
#include "runtime/schedule_source.hpp"
#include "simulator/trace.hpp"

namespace parplan::cli {
namespace {

struct RunOptions {
  std::string plan_file;
  FromOptions from;
  std::vector<std::string> profile_files;
  std::string gpu;
  std::string backend = "cuda";
  int64_t rank = -1;
  int steps = 5, warmup = 2;
  bool json = false;
  std::string trace;
};

// The GPU profile the prediction uses, and where it came from. A written plan carries its GPU inline, so a measured
// profile (calibrate --out, named <gpu>-measured-<date>) or a --profile file overriding the plan's GPU is only used
// when chosen here:
//   --gpu NAME|FILE                   that profile (NAME: embedded or from a --profile file; the plan's own GPU name
//                                     keeps the plan's inline spec when no profile has that name);
//   else a --profile GPU profile named like the plan's GPU: it (user files override, as everywhere);
//   else exactly one --profile GPU profile: it (announced on stderr: the plan names another GPU);
//   else several --profile GPU profiles: an error asking for --gpu;
//   else the plan's inline GPU.
struct GpuChoice {
  GpuSpec gpu;
  std::string from;
};

GpuChoice choose_gpu(const Plan& plan, const ProfileSet& profiles, const std::vector<std::string>& files, const std::string& flag) {
  if (!flag.empty()) {
    if (names_a_file(flag)) {
      ProfileSet one;
      if (one.add(read_file(flag, "--gpu"), flag) != "gpu") throw InputError(fmt::format("--gpu: '{}' is not a GPU profile", flag));
      return {*one.find_gpu(one.entries().back().name), "--gpu " + flag};
    }
    if (const GpuSpec* g = profiles.find_gpu(flag)) return {*g, "--gpu"};
    if (same_name(flag, plan.gpu.name)) return {plan.gpu, "the plan"};
    (void)profiles.gpu(flag, "--gpu");  // throws: unknown GPU, with the known names
  }
  std::vector<const ProfileSet::Entry*> user;  // GPU profiles from --profile files, last definition of a name wins
  for (const auto& e : profiles.entries()) {
    if (e.kind != "gpu" || std::find(files.begin(), files.end(), e.where) == files.end()) continue;
    std::erase_if(user, [&](const ProfileSet::Entry* u) { return same_name(u->name, e.name); });
    user.push_back(&e);
  }
  for (const ProfileSet::Entry* e : user) {
    bool match = same_name(e->name, plan.gpu.name);
    for (const auto& a : e->aliases) match = match || same_name(a, plan.gpu.name);
    if (match) return {*profiles.find_gpu(e->name), "--profile " + e->where};
  }
  if (user.size() == 1) return {*profiles.find_gpu(user[0]->name), "--profile " + user[0]->where};
  if (user.size() > 1) {
    std::string names;
    for (const ProfileSet::Entry* e : user) names += (names.empty() ? "" : ", ") + e->name;
    throw InputError(fmt::format("--gpu: the --profile files hold {} GPU profiles ({}), none named like the plan's GPU '{}'; "
                                 "choose one with --gpu NAME", user.size(), names, plan.gpu.name));
  }
  return {plan.gpu, "the plan"};
}

// --backend host predicting with the plan's GPU (a datasheet this CPU is not): the host's own profile, measured now
// with the plan's ranks as threads sharing this machine's CPU threads (runtime/calibrate.hpp, calibrate --backend
// host), and from 2 ranks its collective sweep as the cluster's links (both tiers: every rank is in this process).
GpuChoice calibrate_host(Plan& plan, int ranks) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<runtime::World> world = runtime::make_host_world(ranks);
  const runtime::CalibrationResult r = runtime::calibrate(*world, runtime::default_calibrate_options(false));
  const std::string name = "host-measured";
  GpuChoice c{runtime::measured_gpu(plan.gpu, r, true, name), ""};
  if (ranks >= 2) {
    plan.cluster = runtime::measured_cluster(plan.cluster, r, name, c.gpu.name);
    plan.cluster.inter_node = plan.cluster.intra_node;
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  c.from = fmt::format("calibrating this host: {} on {} in {:.1f} s; --gpu names another profile",
                       count_of(ranks, "rank thread"), count_of(std::max(1U, std::thread::hardware_concurrency()), "CPU thread"), took);
  return c;
}

std::string fmt_value(const runtime::TermRow& row, double v) { return row.is_bytes ? fmt_bytes(v) : fmt_seconds(v); }

// The host backend allocates every rank's tensors in this process and runs their GEMMs on the CPU: refuse a plan
// that cannot fit in RAM (it would be killed for memory) or would run for hours, before allocating anything.
void refuse_oversized_host_run(const Estimate& e, const RunOptions& o, int64_t ranks, int64_t per_stage) {
  const bool local = o.rank >= 0;
  // The model's per-stage bytes, less what only a GPU holds.
  double need = 0;
  for (int64_t r = local ? o.rank : 0; r < (local ? o.rank + 1 : ranks); ++r) {
    const StageMemory& sm = e.memory[static_cast<size_t>(r / per_stage)];
    need += sm.total - sm.cuda_context - sm.fragmentation;
  }
  const double ram = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (ram > 0 && need > 0.8 * ram) {
    throw InputError(fmt::format("--backend host: the plan's {} ranks need about {} of tensors, more than 80% of "
                                 "this machine's {} (the host backend is for small plans; --rank R runs one rank)",
                                 local ? 1 : ranks, fmt_bytes(need), fmt_bytes(ram)));
  }
  // And what would run for hours: the host GEMM runs at tens of GFLOP/s (docs/runtime.md), so a plan whose
  // ranks execute more than kMaxHostFlop in all (warm-up and measured steps) is refused before it starts.
  constexpr double kMaxHostFlop = 1e14;
  const double per_step = e.time.hardware_flops / static_cast<double>(local ? ranks : 1);
  const double total = per_step * static_cast<double>(o.steps + o.warmup);
  if (total > kMaxHostFlop) {
    throw InputError(fmt::format("--backend host: {} step(s) of this plan execute about {:.1f} TFLOP on the CPU "
                                 "(limit {:.0f}; hours at host speed): lower --steps/--warmup, the plan's batch or "
                                 "sequence, or use --backend cuda",
                                 o.steps + o.warmup, total / 1e12, kMaxHostFlop / 1e12));
  }
}

// What the runtime executes otherwise than the prediction prices, said beside the comparison.
std::string run_note(const Plan& plan) {
  std::string s = post_validation_note(plan, "each measured step");
  if (plan.parallel.overlap_ep_comm && plan.parallel.ep > 1) {
    s += std::string(s.empty() ? "" : "; ") +
         "EP all-to-all overlap: the prediction hides part of each all-to-all behind another microbatch's compute "
         "(overlap_ep_comm); the runtime runs them blocking, so the measured EP term and step include what the "
         "prediction hides";
  }
  return s;
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  app.add_option("--plan", o->plan_file, "The Plan document to run (from estimate -o / suggest -o)");
  add_from_options(app, o->from, true, false);  // run's --gpu is the measured profile
  app.add_option("--profile", o->profile_files, "User profile files overriding embedded ones");
  app.add_option("--gpu", o->gpu,
                 "GPU profile (name or JSON file) the prediction uses instead of the plan's, e.g. calibrate's measured "
                 "profile (default: a --profile GPU profile if one is given, else the plan's GPU; --backend host: "
                 "this host, calibrated first)");
  app.add_option("--backend", o->backend, "cuda (cuBLAS + NCCL, one thread per GPU or one process per GPU under mpirun) or host (CPU threads)")
      ->check(CLI::IsMember({"cuda", "host"}))
      ->capture_default_str();
  app.add_option("--rank", o->rank, "Rank-local mode: run only this rank's program on one device; communication is predicted, not measured")
      ->check(CLI::Range(int64_t{0}, int64_t{100'000'000}));
  app.add_option("--steps", o->steps, "Measured steps (the median is reported)")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--warmup", o->warmup, "Warm-up steps before measuring")->check(CLI::Range(0, 1000))->capture_default_str();
  app.add_flag("--json", o->json, "Print predicted vs measured as JSON");
  app.add_option("--trace", o->trace, "Write the measured timeline (median step) as a Chrome/Perfetto trace, laid out like simulate's");
  return [o]() {
    require_writable(o->trace, "--trace");  // before the run, not after it
    const std::vector<OutputFlag> outputs = {{"--trace", o->trace}, json_output(o->json)};
    refuse_shared_outputs(outputs);
    std::FILE* report = report_stream(outputs);  // a trace on stdout: the report to stderr
    ModelOptions mo;
    mo.profile_files = o->profile_files;
    const ProfileSet profiles = load_profiles(mo);
    if (o->plan_file.empty() && o->from.file.empty()) throw InputError("--plan is required (or --from FILE)");
    Plan plan = load_plan_source("run", o->plan_file, o->from, o->from.model, o->from.mesh, profiles);
    const GpuChoice choice = choose_gpu(plan, profiles, o->profile_files, o->gpu);
    if (choice.from.starts_with("--profile")) {
      fmt::print(stderr, "parplan run: predicting with GPU profile '{}' from {} (the plan names '{}'; --gpu chooses another)\n",
                 choice.gpu.name, choice.from.substr(10), plan.gpu.name);
    }
    plan.gpu = choice.gpu;
    refuse_replacing_input(o->trace, "--trace");  // onto the plan or a profile: refused before the run, not after it
    if (v_shaped(plan.parallel.schedule)) {  // the lowering places chunk c of stage i at c pp + i
      throw InputError(fmt::format("{}: run does not lower {} (its V places the last chunk on stage 0); estimate "
                                   "and simulate price it",
                                   o->plan_file.empty() ? "--schedule" : "/parallel/schedule",
                                   to_string(plan.parallel.schedule)));
    }
    if (plan.gpu.peak(plan.gemm_dtype()) <= 0) {
      throw InputError(fmt::format("--gpu: '{}' has no {} peak, the plan's GEMM precision", plan.gpu.name, to_string(plan.gemm_dtype())));
    }
    const int64_t ranks = plan.parallel.gpus();
    const bool local = o->rank >= 0;
    if (local && o->rank >= ranks) throw InputError(fmt::format("--rank: {} is outside the plan's {} ranks", o->rank, ranks));
    const int64_t per_stage = plan.parallel.tp * plan.parallel.cp * plan.parallel.dp;
    Estimate e = estimate(plan);  // the prediction (redone below with a host profile), also sizing the host guard
    if (o->backend == "host") refuse_oversized_host_run(e, *o, ranks, per_stage);
    GpuChoice used = choice;
    if (o->backend == "host" && o->gpu.empty() && choice.from == "the plan") {
      used = calibrate_host(plan, local ? 1 : static_cast<int>(ranks));
      plan.gpu = used.gpu;
      e = estimate(plan);
    }
    std::vector<runtime::Program> programs;
    for (int64_t r = local ? o->rank : 0; r < (local ? o->rank + 1 : ranks); ++r) {
      programs.push_back(runtime::lower(plan, r, runtime::stage_schedule(plan, r / per_stage)));
    }
    const int world_ranks = local ? 1 : static_cast<int>(ranks);
    std::unique_ptr<runtime::World> world =
        o->backend == "host" ? runtime::make_host_world(world_ranks) : runtime::make_cuda_world(world_ranks);
    runtime::ExecOptions xo{o->warmup, o->steps, local, {}};
    xo.on_step = [](int done, int total, bool warmup, double step_s) {
      fmt::print(stderr, "parplan run: step {}/{}{} {}\n", done, total, warmup ? " (warm-up)" : "", fmt_seconds(step_s));
      std::fflush(stderr);
    };
    const runtime::RunResult result = runtime::execute(*world, programs, xo);
    const auto rows = runtime::compare(e, result, programs, local);
    if (!o->trace.empty()) write_file_atomic(o->trace, sim::chrome_trace_json(runtime::measured_timeline(result, programs, local)), "--trace");
    if (o->json) {
      nlohmann::json j = {{"backend", o->backend}, {"gpu_profile", {{"name", plan.gpu.name}, {"from", used.from}}}, {"rank_local", local}, {"rank", o->rank}, {"steps", o->steps},
                          {"warmup", o->warmup}, {"step_s", result.step_s}, {"terms", nlohmann::json::array()}};
      const std::string note = run_note(plan);
      if (!note.empty()) j["note"] = note;
      for (const auto& row : rows) {
        j["terms"].push_back({{"term", row.term}, {"unit", row.is_bytes ? "bytes" : "s"}, {"predicted", row.predicted},
                              {"measured", row.measured}, {"measured_valid", row.measured_valid}, {"error", row.error()},
                              {"note", row.note}});
      }
      fmt::print("{}\n", j.dump(2));
      return kOk;
    }
    fmt::print(report, "parplan run: {} on {} backend, {}; median of {} after {} warm-up\n", plan.model.name, o->backend,
               local ? fmt::format("rank {} only (rank-local)", o->rank) : count_of(ranks, "rank"),
               count_of(o->steps, "step"), o->warmup);
    fmt::print(report, "predicted with GPU profile {} (from {})\n", plan.gpu.name, used.from);
    const std::string note = run_note(plan);
    if (!note.empty()) fmt::print(report, "{}\n", wrap_lines(note));
    Table t({"term", "predicted", "measured", "error", "note"}, 1);
    for (const auto& row : rows) {
      t.add({row.term, fmt_value(row, row.predicted), row.measured_valid ? fmt_value(row, row.measured) : "-",
             row.measured_valid && row.predicted != 0 ? fmt::format("{:+.1f}%", 100.0 * row.error()) : "-", row.note});
    }
    fmt::print(report, "{}", t.render());
    return kOk;
  };
}

const RegisterCommand reg{{"run", "Execute a plan (cuda or host backend) and compare predicted with measured", 60, setup}};

}  // namespace
}  // namespace parplan::cli
