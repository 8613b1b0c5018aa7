// `parplan run`: lower a plan to per-rank programs, execute them on a backend and print predicted vs measured.
#include <fmt/core.h>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/io.hpp"
#include "cli/plan_options.hpp"
#include "cli/render.hpp"
#include "planner/cost_model.hpp"
#include "planner/error.hpp"
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
  std::vector<std::string> profile_files;
  std::string backend = "cuda";
  int64_t rank = -1;
  int steps = 5, warmup = 2;
  bool json = false;
  std::string trace;
};

std::string fmt_value(const runtime::TermRow& row, double v) { return row.is_bytes ? fmt_bytes(v) : fmt_seconds(v); }

Runner setup(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  app.add_option("--plan", o->plan_file, "The Plan document to run (from estimate -o / suggest -o)")->required();
  app.add_option("--profile", o->profile_files, "User profile files overriding embedded ones");
  app.add_option("--backend", o->backend, "cuda (cuBLAS + NCCL, one thread per GPU or one process per GPU under mpirun) or host (CPU threads)")
      ->check(CLI::IsMember({"cuda", "host"}));
  app.add_option("--rank", o->rank, "Rank-local mode: run only this rank's program on one device; communication is predicted, not measured")
      ->check(CLI::Range(int64_t{0}, int64_t{100'000'000}));
  app.add_option("--steps", o->steps, "Measured steps (the median is reported)")->check(CLI::Range(1, 1000));
  app.add_option("--warmup", o->warmup, "Warm-up steps before measuring")->check(CLI::Range(0, 1000));
  app.add_flag("--json", o->json, "Print predicted vs measured as JSON");
  app.add_option("--trace", o->trace, "Write the measured timeline (median step) as a Chrome/Perfetto trace, laid out like simulate's");
  return [o]() {
    require_writable(o->trace, "--trace");  // before the run, not after it
    ModelOptions mo;
    mo.profile_files = o->profile_files;
    const ProfileSet profiles = load_profiles(mo);
    const Plan plan = load_plan_file(o->plan_file, profiles);
    const int64_t ranks = plan.parallel.gpus();
    const bool local = o->rank >= 0;
    if (local && o->rank >= ranks) throw InputError(fmt::format("--rank: {} is outside the plan's {} ranks", o->rank, ranks));
    const int64_t per_stage = plan.parallel.tp * plan.parallel.cp * plan.parallel.dp;
    std::vector<runtime::Program> programs;
    for (int64_t r = local ? o->rank : 0; r < (local ? o->rank + 1 : ranks); ++r) {
      programs.push_back(runtime::lower(plan, r, runtime::stage_schedule(plan, r / per_stage)));
    }
    const int world_ranks = local ? 1 : static_cast<int>(ranks);
    std::unique_ptr<runtime::World> world =
        o->backend == "host" ? runtime::make_host_world(world_ranks) : runtime::make_cuda_world(world_ranks);
    const runtime::RunResult result = runtime::execute(*world, programs, {o->warmup, o->steps, local});
    const Estimate e = estimate(plan);
    const auto rows = runtime::compare(e, result, programs, local);
    if (!o->trace.empty()) write_file_atomic(o->trace, sim::chrome_trace_json(runtime::measured_timeline(result, programs, local)), "--trace");
    if (o->json) {
      nlohmann::json j = {{"backend", o->backend}, {"rank_local", local}, {"rank", o->rank}, {"steps", o->steps},
                          {"warmup", o->warmup}, {"step_s", result.step_s}, {"terms", nlohmann::json::array()}};
      for (const auto& row : rows) {
        j["terms"].push_back({{"term", row.term}, {"unit", row.is_bytes ? "bytes" : "s"}, {"predicted", row.predicted},
                              {"measured", row.measured}, {"measured_valid", row.measured_valid}, {"error", row.error()},
                              {"note", row.note}});
      }
      fmt::print("{}\n", j.dump(2));
      return kOk;
    }
    fmt::print("parplan run: {} on {} backend, {}; median of {} steps after {} warm-up\n", plan.model.name, o->backend,
               local ? fmt::format("rank {} only (rank-local)", o->rank) : fmt::format("{} ranks", ranks), o->steps, o->warmup);
    Table t({"term", "predicted", "measured", "error", "note"}, 1);
    for (const auto& row : rows) {
      t.add({row.term, fmt_value(row, row.predicted), row.measured_valid ? fmt_value(row, row.measured) : "-",
             row.measured_valid && row.predicted != 0 ? fmt::format("{:+.1f}%", 100.0 * row.error()) : "-", row.note});
    }
    fmt::print("{}", t.render());
    return kOk;
  };
}

const RegisterCommand reg{{"run", "Execute a plan (cuda or host backend) and compare predicted with measured", 60, setup}};

}  // namespace
}  // namespace parplan::cli
