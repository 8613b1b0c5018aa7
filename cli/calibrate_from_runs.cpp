// `parplan calibrate --from-runs FILE`: profile fitting to measured runs (planner/validation/fit.hpp), hooked into calibrate.
#include "cli/calibrate_from_runs.hpp"

#include <fmt/core.h>
#include <algorithm>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/io.hpp"
#include "cli/plan_options.hpp"
#include "cli/render.hpp"
#include "cli/runs_files.hpp"
#include "planner/spec/error.hpp"
#include "planner/validation/fit.hpp"
#include "planner/spec/spec_json.hpp"

namespace parplan::cli {

using CalibrateHook = std::function<std::function<std::optional<int>()>(CLI::App&)>;
std::vector<CalibrateHook>& calibrate_hooks();  // defined in cli/calibrate.cpp

namespace {

nlohmann::json summary_json(const ErrorSummary& s) {
  return {{"count", s.count}, {"mean_abs_error", s.mean_abs}, {"median_abs_error", s.median_abs},
          {"worst_abs_error", s.worst_abs}, {"worst_id", s.worst_id}};
}

std::string line(const char* what, const ErrorSummary& s) {
  return fmt::format("  {:<28} {:>3} runs  mean |err| {:>6}  median {:>6}  worst {:>6} ({})\n", what, s.count,
                     fmt_percent(s.mean_abs), fmt_percent(s.median_abs), fmt_percent(s.worst_abs), s.worst_id);
}

// The cluster profile of the scored runs on `gpu`, as loaded (not a row's plan, whose link bandwidth the row's
// hardware text may have set). `--cluster`, when given, must name that cluster: the runs' cluster is what is fitted.
std::optional<ClusterSpec> runs_cluster(const std::vector<MappedRun>& runs, const std::string& gpu,
                                        const std::string& cluster_flag, const ProfileSet& profiles) {
  const auto row = std::find_if(runs.begin(), runs.end(), [&](const MappedRun& r) { return r.scored() && r.gpu_type == gpu; });
  const ClusterSpec* named = cluster_flag.empty() ? nullptr : &profiles.cluster(cluster_flag, "--cluster");
  if (row == runs.end()) return std::nullopt;  // fit_profiles says there are too few runs
  const ClusterSpec& own = profiles.cluster(row->plan->cluster.name, "--from-runs");
  if (named != nullptr && named->name != own.name) {
    throw InputError(fmt::format("--cluster: the {} runs are on {}, not {}; --from-runs fits the runs' cluster", gpu,
                                 own.name, named->name));
  }
  return own;
}

// The source text of a fitted profile: the base profile's, with any earlier fit's note replaced by this one's.
std::string fitted_source(const std::string& base, const std::string& note) {
  const size_t at = base.find(" -- ");
  const bool earlier_fit = at != std::string::npos && base.find("fitted by parplan calibrate --from-runs", at) != std::string::npos;
  return (earlier_fit ? base.substr(0, at) : base) + " -- " + note;
}

}  // namespace

std::vector<OutputFlag> check_calibrate_outputs(const std::string& out, const std::string& cluster_out, bool json) {
  if (out.empty()) throw InputError("--out: required (the profile file to write)");
  require_writable(out, "--out");  // both outputs checked before the work: no half-written pair
  require_writable(cluster_out, "--cluster-out");
  std::vector<OutputFlag> outputs = {{"--out", out}, {"--cluster-out", cluster_out}, json_output(json)};
  refuse_shared_outputs(outputs);
  return outputs;
}

void write_profile_pair(const std::string& out, const nlohmann::json& gpu, const std::string& cluster_out,
                        const nlohmann::json& cluster) {
  const std::string g = gpu.dump(2) + "\n";
  const std::string c = cluster_out.empty() ? "" : cluster.dump(2) + "\n";
  std::vector<OutputFile> files = {{out, g, "--out"}};
  if (!cluster_out.empty()) files.push_back({cluster_out, c, "--cluster-out"});
  write_files_atomic(files);
}

int calibrate_from_runs(const CalibrateFromRunsOptions& o) {
  const std::vector<OutputFlag> outputs = check_calibrate_outputs(o.out, o.cluster_out, o.json);
  for (const auto& f : o.fields) {
    if (o.cluster_out.empty() && (f.starts_with("intra_node.") || f.starts_with("inter_node."))) {
      throw InputError(fmt::format("--fit-fields: {} is a cluster field; give --cluster-out to write it", f));
    }
  }
  const ProfileSet profiles = load_profiles(o.profiles);
  const std::vector<MappedRun> runs = load_runs_files(o.runs, profiles, parse_unstated(o.unstated), "--from-runs");
  std::string files;
  for (const std::string& f : o.runs) files += (files.empty() ? "" : " ") + f;
  refuse_replacing_input(o.out, "--out");  // both before fitting
  refuse_replacing_input(o.cluster_out, "--cluster-out");
  std::string gpu = o.gpu.empty() ? "" : profiles.gpu(o.gpu, "--gpu").name;
  if (gpu.empty()) {
    std::vector<std::string> types;
    for (const MappedRun& r : runs) {
      if (r.scored() && std::find(types.begin(), types.end(), r.gpu_type) == types.end()) types.push_back(r.gpu_type);
    }
    if (types.size() != 1) {
      std::string list;
      for (const auto& t : types) list += (list.empty() ? "" : ", ") + t;
      throw InputError(fmt::format("--gpu: the runs have {} scored GPU types ({}); name the one to fit", types.size(),
                                   list.empty() ? "none" : list));
    }
    gpu = types.front();
  }
  FitOptions opt;
  opt.cluster_profile = runs_cluster(runs, gpu, o.cluster, profiles);
  if (!o.fields.empty()) {
    opt.fields.clear();
    for (const auto& f : o.fields) opt.fields.push_back(fit_field(f, "--fit-fields"));
  }
  const GpuSpec& base = profiles.gpu(gpu, "--gpu");
  const FitResult r = fit_profiles(runs, base, opt);

  GpuSpec g = r.gpu;
  if (!o.name.empty()) g.name = o.name;
  g.source = fitted_source(r.gpu.source, fmt::format("efficiency fields fitted by parplan calibrate --from-runs {} ({} runs{})",
                                                      files, r.error_after.count, base.architecture.empty() ? "" :
                                                      " on " + base.architecture + " GPUs"));
  nlohmann::json gj = to_json(g);
  gj["kind"] = "gpu";
  nlohmann::json cj;
  if (!o.cluster_out.empty()) {
    ClusterSpec c = r.cluster;
    c.gpu = g.name;
    c.source = fitted_source(r.cluster.source, fmt::format("link efficiencies fitted by parplan calibrate --from-runs {}", files));
    cj = to_json(c);
    cj["kind"] = "cluster";
  }
  write_profile_pair(o.out, gj, o.cluster_out, cj);

  if (o.json) {
    nlohmann::json fields = nlohmann::json::array();
    for (size_t i = 0; i < r.before.size(); ++i) {
      fields.push_back({{"field", r.before[i].first}, {"before", r.before[i].second}, {"after", r.after[i].second}});
    }
    const nlohmann::json j = {{"gpu", gpu},
                              {"architecture", base.architecture_or_name()},
                              {"cluster", r.cluster.name},
                              {"fields", fields},
                              {"error_before", summary_json(r.error_before)},
                              {"error_after", summary_json(r.error_after)},
                              {"heldout", {{"fit_ids", r.fit_ids}, {"heldout_ids", r.heldout_ids},
                                           {"error_before", summary_json(r.heldout_before)},
                                           {"error_after", summary_json(r.heldout_after)}}}};
    fmt::print("{}\n", j.dump(2));
    return kOk;
  }
  std::string s = fmt::format("parplan calibrate --from-runs {}: {} ({} cluster), {} scored runs{}; profile written to {}\n\n",
                              files, gpu, r.cluster.name, r.error_after.count,
                              base.architecture.empty() ? "" : " on " + base.architecture + " GPUs", o.out);
  Table t({"field", "before", "after"}, 1);
  for (size_t i = 0; i < r.before.size(); ++i) {
    t.add({r.before[i].first, fmt::format("{:.4g}", r.before[i].second), fmt::format("{:.4g}", r.after[i].second)});
  }
  s += t.render() + "\nStep-time error\n";
  s += line("all runs, before", r.error_before);
  s += line("all runs, after", r.error_after);
  s += line("held-out half, before", r.heldout_before);
  s += line("held-out half, fit on other", r.heldout_after);
  s += fmt::format("  (held-out split: runs sorted by id, even positions fitted, odd positions held out)\n");
  fmt::print(report_stream(outputs), "{}", s);
  return kOk;
}

namespace {

// The hook: adds --from-runs and --fit-fields to `parplan calibrate`, and handles the command when --from-runs is
// given, reading calibrate's own --out, --cluster-out, --gpu, --name and --json.
std::function<std::optional<int>()> hook(CLI::App& app) {
  auto runs = std::make_shared<std::vector<std::string>>();
  auto fields = std::make_shared<std::vector<std::string>>();
  auto profiles = std::make_shared<std::vector<std::string>>();
  app.add_option("--from-runs", *runs, "Fit the GPU / cluster efficiency fields to measured runs (published-runs schema; one or more files), "
                 "over every GPU of --gpu's architecture");
  app.add_option("--fit-fields", *fields, "With --from-runs: the fields to fit (default: all efficiency fields)");
  app.add_option("--profile", *profiles, "With --from-runs: user GPU / cluster profile JSON file (repeatable)");
  auto unstated = std::make_shared<std::string>();
  app.add_option("--unstated", *unstated, "With --from-runs: strict (default) | search, as validate --unstated");
  CLI::App* a = &app;
  return [a, runs, fields, profiles, unstated]() -> std::optional<int> {
    if (runs->empty()) {
      if (!fields->empty()) throw InputError("--fit-fields: only with --from-runs");
      if (!unstated->empty()) throw InputError("--unstated: only with --from-runs");
      return std::nullopt;
    }
    for (const char* flag : {"--backend", "--ranks"}) {  // they set up a measurement, which --from-runs does not make
      const CLI::Option* opt = a->get_option_no_throw(flag);
      if (opt && opt->count() > 0) throw InputError(fmt::format("{}: not used with --from-runs (nothing is measured)", flag));
    }
    auto str = [&](const char* name) {
      const CLI::Option* opt = a->get_option_no_throw(name);
      return opt && opt->count() > 0 ? opt->as<std::string>() : std::string();
    };
    CalibrateFromRunsOptions o;
    o.runs = *runs;
    o.fields = *fields;
    o.unstated = unstated->empty() ? "strict" : *unstated;
    o.profiles = *profiles;
    o.gpu = str("--gpu");
    o.cluster = str("--cluster");
    o.out = str("--out");
    o.cluster_out = str("--cluster-out");
    o.name = str("--name");
    const CLI::Option* json = a->get_option_no_throw("--json");
    o.json = json && json->count() > 0;
    return calibrate_from_runs(o);
  };
}

const bool registered = [] {
  calibrate_hooks().push_back(hook);
  return true;
}();

}  // namespace
}  // namespace parplan::cli
