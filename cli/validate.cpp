// `parplan validate --runs FILE [--json] [--profile FILE...]`: the cost model scored against published runs.
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/io.hpp"
#include "cli/plan_options.hpp"
#include "cli/render.hpp"
#include "cli/runs_files.hpp"
#include "planner/spec/error.hpp"
#include "planner/spec/plan_json.hpp"
#include "planner/validation/accuracy.hpp"
#include "planner/validation/cross_validate.hpp"
#include "planner/validation/validation.hpp"

namespace parplan::cli {
namespace {

struct ValidateOptions {
  std::vector<std::string> runs;
  std::vector<std::string> fit_fields;
  std::string accuracy_out;
  bool cross_validate = false;
  std::vector<std::string> profiles;
  std::string plans_dir;
  std::string unstated = "strict";
  bool json = false;
  bool breakdown = false;
};

nlohmann::json summary_json(const ErrorSummary& s) {
  return {{"count", s.count},           {"mean_abs_error", s.mean_abs}, {"median_abs_error", s.median_abs},
          {"worst_abs_error", s.worst_abs}, {"worst_id", s.worst_id},   {"mean_signed_error", s.mean_signed}};
}

nlohmann::json report_json(const ValidationReport& rep) {
  nlohmann::json rows = nlohmann::json::array();
  for (const RunResult& r : rep.rows) {
    const MappedRun& m = *r.run;
    nlohmann::json j = {{"id", m.id}, {"source", m.source_key}, {"gpu", m.gpu_type}};
    j["predicted_step_time_s"] = m.plan ? nlohmann::json(r.predicted_step_time_s) : nlohmann::json(nullptr);
    j["measured_step_time_s"] = m.measured_step_time_s ? nlohmann::json(*m.measured_step_time_s) : nlohmann::json(nullptr);
    j["error"] = m.scored() ? nlohmann::json(r.error) : nlohmann::json(nullptr);
    j["predicted_peak_memory_bytes"] = m.plan ? nlohmann::json(r.predicted_peak_memory_bytes) : nlohmann::json(nullptr);
    if (m.plan) {
      nlohmann::json terms = nlohmann::json::object();
      const auto t = time_terms(r.time);
      for (size_t k = 0; k < t.size(); ++k) terms[std::string(kTimeTerms[k])] = t[k];
      j["predicted_time_s"] = terms;
      j["predicted_mfu"] = r.time.mfu;
    } else {
      j["predicted_time_s"] = nullptr;
      j["predicted_mfu"] = nullptr;
    }
    j["measured_memory_bytes"] = m.measured_memory_bytes ? nlohmann::json(*m.measured_memory_bytes) : nlohmann::json(nullptr);
    j["skipped_reason"] = m.scored() ? nlohmann::json(nullptr) : nlohmann::json(m.skip_reason());
    j["notes"] = m.notes;
    j["assumed"] = m.assumed;
    rows.push_back(std::move(j));
  }
  nlohmann::json by_source = nlohmann::json::object(), by_gpu = nlohmann::json::object();
  for (const auto& [k, s] : rep.by_source) by_source[k] = summary_json(s);
  for (const auto& [k, s] : rep.by_gpu) by_gpu[k] = summary_json(s);
  nlohmann::json memory = nlohmann::json::object();
  for (const auto& [k, m] : rep.memory_by_source) {
    memory[k] = {{"count", m.count}, {"min", m.min}, {"mean", m.mean}, {"max", m.max}};
  }
  nlohmann::json summary = summary_json(rep.overall);
  summary["skipped"] = rep.skipped;
  summary["by_source"] = by_source;
  summary["by_gpu"] = by_gpu;
  summary["memory_ratio_by_source"] = memory;  // predicted peak / measured peak
  return {{"rows", rows}, {"summary", summary}};
}

std::string fmt_err(double e) { return fmt::format("{:+.1f}%", e * 100.0); }

// Where each scored row's predicted step goes, as shares of the predicted step (the terms add up to it), beside its
// error: a miss on a row whose step is mostly one term points at that term's profile fields.
std::string render_breakdown(const ValidationReport& rep) {
  static constexpr std::array<const char*, kNumTimeTerms> kHeads = {"compute", "bubble", "TP", "CP", "EP", "PP",
                                                                      "ZeRO-3",  "host",   "DP", "optim."};
  // The host-copy column (activation offload) only when a row has such copies: published runs offload none.
  const auto host = static_cast<size_t>(
      std::find(kTimeTerms.begin(), kTimeTerms.end(), std::string_view("offload_exposed")) - kTimeTerms.begin());
  const bool any_host = std::any_of(rep.rows.begin(), rep.rows.end(),
                                    [host](const RunResult& r) { return time_terms(r.time)[host] > 0; });
  std::vector<std::string> heads = {"id", "error", "pred. MFU"};
  for (size_t k = 0; k < kHeads.size(); ++k) {
    if (k != host || any_host) heads.emplace_back(kHeads[k]);
  }
  Table t(heads, 3);
  for (const RunResult& r : rep.rows) {
    if (!r.run->scored()) continue;
    std::vector<std::string> row = {r.run->id, fmt_err(r.error), fmt_percent(r.time.mfu)};
    const auto terms = time_terms(r.time);
    for (size_t k = 0; k < terms.size(); ++k) {
      if (k != host || any_host) row.push_back(r.time.step_s > 0 ? fmt_percent(terms[k] / r.time.step_s) : "-");
    }
    t.add(row);
  }
  return "Where the predicted step goes (share of the predicted step per term; exposed communication only)\n" +
         t.render() + "\n";
}

// The values taken for what scored rows leave unstated (--unstated search), one line per row.
std::string render_assumed(const ValidationReport& rep) {
  std::string s;
  int64_t rows = 0;
  for (const RunResult& r : rep.rows) {
    const MappedRun& m = *r.run;
    if (!m.scored() || m.assumed.empty()) continue;
    ++rows;
    s += fmt::format("  {}:", m.id);
    for (size_t i = 0; i < m.assumed.size(); ++i) s += fmt::format("{} {}", i ? ";" : "", m.assumed[i]);
    s += "\n";
  }
  if (rows == 0) return "";
  return fmt::format("Assumed values ({} scored rows state less than a plan needs; --unstated search)\n", rows) + s +
         "\n";
}

std::string render(const ValidationReport& rep, const std::string& file, bool breakdown) {
  std::string s = fmt::format("parplan validate: {} runs from {} ({} scored, {} skipped)\n\n", rep.rows.size(), file,
                              rep.overall.count, rep.skipped);
  Table t({"id", "gpu", "predicted", "measured", "error", "pred. peak mem", "meas. mem"}, 2);
  for (const RunResult& r : rep.rows) {
    const MappedRun& m = *r.run;
    if (!m.scored()) continue;
    t.add({m.id, m.gpu_type, fmt_seconds(r.predicted_step_time_s),
           fmt::format("{}{}", fmt_seconds(*m.measured_step_time_s), m.step_time_derived ? " (d)" : ""),
           fmt_err(r.error), fmt::format("{}{}", fmt_bytes(r.predicted_peak_memory_bytes), r.fits ? "" : " !"),
           m.measured_memory_bytes ? fmt_bytes(*m.measured_memory_bytes) : "-"});
  }
  s += t.render();
  s += "  (d) = derived.iter_time_s (from the printed throughput);  ! = predicted not to fit in GPU memory\n\n";
  s += render_assumed(rep);
  if (breakdown) s += render_breakdown(rep);
  if (rep.skipped > 0) {
    s += fmt::format("Skipped ({})\n", rep.skipped);
    for (const RunResult& r : rep.rows) {
      const MappedRun& m = *r.run;
      if (m.scored()) continue;
      std::string mem;
      if (m.plan) {
        mem = fmt::format(" [predicted step {}, peak memory {}{}]", fmt_seconds(r.predicted_step_time_s),
                          fmt_bytes(r.predicted_peak_memory_bytes),
                          m.measured_memory_bytes ? fmt::format(" vs measured {}", fmt_bytes(*m.measured_memory_bytes)) : "");
      }
      s += fmt::format("  {}: {}{}\n", m.id, m.skip_reason(), mem);
    }
    s += "\n";
  }
  Table st({"group", "runs", "mean |err|", "median |err|", "worst |err|", "worst run", "mean signed"}, 1);
  auto add = [&](const std::string& name, const ErrorSummary& e) {
    st.add({name, std::to_string(e.count), fmt_percent(e.mean_abs), fmt_percent(e.median_abs), fmt_percent(e.worst_abs),
            e.worst_id, fmt_err(e.mean_signed)});
  };
  add("all", rep.overall);
  for (const auto& [k, e] : rep.by_source) add("source: " + k, e);
  for (const auto& [k, e] : rep.by_gpu) add("gpu: " + k, e);
  s += "Summary (step-time error, predicted vs measured)\n" + st.render();
  if (!rep.memory_by_source.empty()) {
    Table mt({"source", "runs", "min", "mean", "max"}, 1);
    for (const auto& [k, m] : rep.memory_by_source) {
      mt.add({k, std::to_string(m.count), fmt::format("{:.2f}", m.min), fmt::format("{:.2f}", m.mean),
              fmt::format("{:.2f}", m.max)});
    }
    s += "\nPeak memory, predicted / measured (scored rows that publish a peak)\n" + mt.render();
  }
  return s;
}

// The validate command that reproduces an accuracy table (recorded in it).
std::string accuracy_command(const ValidateOptions& o) {
  std::string s = "parplan validate --runs";
  for (const auto& f : o.runs) s += " " + f;
  s += " --unstated " + o.unstated + " --cross-validate";
  if (!o.fit_fields.empty()) {
    s += " --fit-fields";
    for (const auto& f : o.fit_fields) s += " " + f;
  }
  return s;
}

nlohmann::json cross_validation_json(const CrossValidation& cv) {
  nlohmann::json families = nlohmann::json::array();
  for (const FamilyScore& f : cv.families) {
    families.push_back({{"family", f.family},
                        {"out_of_sample", summary_json(f.out_of_sample)},
                        {"shipped_profiles", summary_json(f.shipped)},
                        {"fits", f.fits}});
  }
  return {{"fitted_fields", cv.fields},
          {"overall", summary_json(cv.overall)},
          {"overall_shipped_profiles", summary_json(cv.overall_shipped)},
          {"families", families}};
}

// Leave one source out: each family scored with the fields fitted on the others, beside the shipped profiles.
std::string render_cross_validation(const CrossValidation& cv) {
  std::string fields;
  for (const auto& f : cv.fields) fields += (fields.empty() ? "" : ", ") + f;
  std::string s = fmt::format("\nLeave one source out (fitted per GPU type on the other sources' rows: {})\n", fields);
  Table t({"left-out source", "runs", "mean |err|", "worst |err|", "worst run", "shipped mean |err|"}, 1);
  auto add = [&](const std::string& name, const ErrorSummary& e, const ErrorSummary& shipped) {
    t.add({name, std::to_string(e.count), fmt_percent(e.mean_abs), fmt_percent(e.worst_abs), e.worst_id,
           fmt_percent(shipped.mean_abs)});
  };
  add("all (each row out of its own source)", cv.overall, cv.overall_shipped);
  for (const FamilyScore& f : cv.families) add(f.family, f.out_of_sample, f.shipped);
  s += t.render();
  for (const FamilyScore& f : cv.families) {
    for (const auto& note : f.fits) s += fmt::format("  {}: {}\n", f.family, note);
  }
  return s;
}

// The file name of a run's Plan under --plans: the id with anything but letters, digits, '.', '-' and '_' replaced
// by '_' (an id is input: "../x" or "a/b" must not leave the directory), and a leading '.' prefixed with '_'. An id
// too long for a file name (255 bytes) keeps its first 100 characters and gets a hash of the whole id.
std::string plan_file_name(const std::string& id) {
  constexpr size_t kMaxStem = 200, kKept = 100;
  std::string name = id.size() > kMaxStem ? id.substr(0, kKept) : id;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  if (name.empty() || name[0] == '.') name.insert(0, "_");
  if (id.size() > kMaxStem) name += "-" + short_hash(id);
  return name + ".json";
}

// validate --plans DIR: each mapped row's Plan document, all or none (a full disk or a name that cannot be written
// leaves the directory as it was). Every target is checked before the first is written.
void write_plans(const std::string& dir, const std::vector<MappedRun>& runs) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw InputError(fmt::format("--plans: '{}' is not a directory", dir));
  std::vector<std::string> paths, texts;
  std::set<std::string> names;
  for (const MappedRun& m : runs) {
    if (!m.plan) continue;
    const std::string name = plan_file_name(m.id);
    if (!names.insert(name).second) throw InputError(fmt::format("--plans: two runs map to the same file name '{}'", name));
    paths.push_back(dir + "/" + name);
    texts.push_back(plan_to_json(*m.plan).dump(2) + "\n");
  }
  std::vector<OutputFile> files;
  for (size_t i = 0; i < paths.size(); ++i) files.push_back({paths[i], texts[i], "--plans"});
  write_files_atomic(files);
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<ValidateOptions>();
  app.add_option("--runs", o->runs, "Published-runs file (schema: validation/README.md); repeatable: the files are "
                                    "scored together");
  app.add_option("--profile", o->profiles, "User GPU / cluster profile JSON file (repeatable; overrides embedded ones)");
  app.add_flag("--json", o->json, "Print rows and summary as JSON");
  app.add_flag("--breakdown", o->breakdown, "Also print where each row's predicted step goes, term by term");
  app.add_option("--unstated", o->unstated,
                 "strict (default): skip rows that leave a value unstated | search: take the fastest plan that fits "
                 "over unstated recompute / micro-batch and the documented assumptions for an unstated shape or "
                 "precision, listing every value taken (docs/accuracy.md)");
  app.add_flag("--cross-validate", o->cross_validate,
               "Also score each source family with the calibration fields fitted on every other family (leave one "
               "source out)");
  app.add_option("--fit-fields", o->fit_fields,
                 "With --cross-validate: the fields to fit (default: the GPU efficiency fields, as calibrate)");
  app.add_option("--accuracy-out", o->accuracy_out,
                 "With --cross-validate: write the out-of-sample error per GPU and precision family as JSON (the "
                 "table parplan ships as validation/accuracy.json)");
  app.add_option("--plans", o->plans_dir, "Write each mapped row's Plan document to DIR/<id>.json (for estimate --plan; characters other than letters, digits, . - _ in the id become _; an id over 200 characters keeps its first 100 and a hash); all files or none");
  return [o]() {
    if (o->runs.empty()) {
      throw InputError("--runs: required (a published-runs file, e.g. validation/published-runs.json)");
    }
    const ProfileSet profiles = load_profiles(o->profiles);
    const Unstated unstated = parse_unstated(o->unstated);
    if (!o->fit_fields.empty() && !o->cross_validate) throw InputError("--fit-fields: only with --cross-validate");
    if (!o->accuracy_out.empty() && !o->cross_validate) {
      throw InputError("--accuracy-out: only with --cross-validate");
    }
    require_writable(o->accuracy_out, "--accuracy-out");
    refuse_shared_outputs({{"--accuracy-out", o->accuracy_out}, json_output(o->json)});
    FitOptions fit;
    if (!o->fit_fields.empty()) {
      fit.fields.clear();
      for (const auto& f : o->fit_fields) fit.fields.push_back(fit_field(f, "--fit-fields"));
    }
    const std::vector<MappedRun> runs = load_runs_files(o->runs, profiles, unstated, "--runs");
    const ValidationReport rep = score_runs(runs);
    std::optional<CrossValidation> cv;
    if (o->cross_validate) cv = cross_validate(runs, fit);
    if (!o->accuracy_out.empty()) {
      refuse_replacing_input(o->accuracy_out, "--accuracy-out");
      write_file_atomic(o->accuracy_out, accuracy_to_json(accuracy_table(*cv), accuracy_command(*o)).dump(2) + "\n",
                        "--accuracy-out");
    }
    if (!o->plans_dir.empty()) write_plans(o->plans_dir, runs);
    std::string files;
    for (const auto& f : o->runs) files += (files.empty() ? "" : ", ") + f;
    if (o->json) {
      nlohmann::json j = report_json(rep);
      if (cv) j["cross_validation"] = cross_validation_json(*cv);
      fmt::print("{}\n", j.dump(2));
    } else {
      fmt::print("{}{}", render(rep, files, o->breakdown), cv ? render_cross_validation(*cv) : "");
    }
    // Nothing scored (every row skipped, the reasons listed): no accuracy figure came out, which a CI job must see.
    if (rep.overall.count == 0) {
      fmt::print(stderr, "parplan validate: no row of {} was scored ({} skipped, each with its reason)\n", files,
                 rep.skipped);
      return kCheckFailed;
    }
    return kOk;
  };
}

const RegisterCommand reg{{"validate", "Score the cost model against published training runs", 80, setup}};

}  // namespace
}  // namespace parplan::cli
