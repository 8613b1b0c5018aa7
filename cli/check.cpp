// `parplan check`: memory-fit and performance gates for CI over one or more plan files; exit 1 when any fails.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/core.h>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/check_inputs.hpp"
#include "cli/check_report.hpp"
#include "cli/command.hpp"
#include "cli/interop/from_file.hpp"
#include "cli/io.hpp"
#include "cli/plan_options.hpp"
#include "cli/text.hpp"
#include "planner/check/check.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/spec/error.hpp"
#include "planner/spec/units.hpp"

namespace parplan::cli {
namespace {

namespace fs = std::filesystem;

// Limits from their text; an error names the flag, or the config file and line the value came from.
CheckLimits parse_limits(const CheckOptions& o) {
  CheckLimits lim;
  auto label = [&](const std::string& name) { return value_label(o, name); };
  if (!o.headroom.empty()) lim.headroom = parse_headroom(o.headroom, label("headroom"));
  if (!o.memory.empty()) lim.memory_bytes = parse_bytes(o.memory, label("memory"));
  if (!o.max_bubble.empty()) lim.max_bubble_fraction = parse_fraction(o.max_bubble, label("max-bubble"));
  if (!o.max_dp_comm.empty()) lim.max_dp_comm_fraction = parse_fraction(o.max_dp_comm, label("max-dp-comm"));
  if (!o.min_mfu.empty()) lim.min_mfu = parse_fraction(o.min_mfu, label("min-mfu"));
  if (!o.max_step_time.empty()) lim.max_step_s = parse_seconds(o.max_step_time, label("max-step-time"));
  if (!o.max_memory_regression.empty()) {
    lim.max_memory_regression = parse_fraction(o.max_memory_regression, label("max-memory-regression"));
  }
  if (!o.max_time_regression.empty()) {
    lim.max_time_regression = parse_fraction(o.max_time_regression, label("max-time-regression"));
  }
  return lim;
}

// Appends the job summary to $GITHUB_STEP_SUMMARY. Anything but a regular file or a character device is refused
// (opening a FIFO without a reader blocked for ever); a failed write (/dev/full) is reported. False, after a warning
// on stderr, when the summary was not written.
bool append_step_summary(const std::string& path, std::string_view text) {
  auto warn = [&](std::string_view why) {
    fmt::print(stderr, "parplan: warning: cannot append to GITHUB_STEP_SUMMARY '{}': {}\n", printable(path), why);
    return false;
  };
  auto special = [](const struct stat& st) { return !S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode); };
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && special(st)) return warn("not a regular file");
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0666);
  if (fd < 0) return warn(std::strerror(errno));
  bool ok = ::fstat(fd, &st) == 0 && !special(st) && ::fcntl(fd, F_SETFL, O_APPEND) == 0;
  int err = ok ? 0 : EINVAL;
  for (size_t at = 0; ok && at < text.size();) {
    const ssize_t n = ::write(fd, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    err = n < 0 ? errno : EIO;
    at += ok ? static_cast<size_t>(n) : 0;
  }
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  return ok || warn(std::strerror(err));
}

// A plan path that is not UTF-8 (a Latin-1 file name) is written with U+FFFD in JSON (nlohmann threw).
constexpr auto kReplaceBadUtf8 = nlohmann::json::error_handler_t::replace;

std::string normal_path(const std::string& p) { return fs::path(p).lexically_normal().generic_string(); }

// The keys under which baselines written before plans had keys hold a plan: its path in any spelling (normalised,
// `a/./b` = `a/b`); content keys are never paths.
std::vector<std::string> path_keys(const Baseline& b, const std::string& path) {
  std::vector<std::string> keys;
  const std::string want = normal_path(path);
  for (const auto& [key, snap] : b) {
    if (!key.starts_with("content:") && normal_path(key) == want) keys.push_back(key);
  }
  return keys;
}

// The baseline entry of a plan: under its key (name or content hash); else under its path (docs/ci.md).
const PlanSnapshot* find_entry(const Baseline& b, const std::string& key, const std::string& path) {
  if (auto it = b.find(key); it != b.end()) return &it->second;
  const std::vector<std::string> old = path_keys(b, path);
  return old.empty() ? nullptr : &b.at(old.front());
}

// Two plans with one name would share one baseline entry: refused, naming both. So would two unnamed plans with the
// same text (their keys hash the text, not the files it refers to): refused when a baseline is used.
void refuse_shared_keys(const std::vector<std::string>& paths, const std::vector<CheckPlanFile>& plans,
                        bool with_baseline) {
  for (size_t i = 0; i < plans.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (plans[i].key != plans[j].key) continue;
      if (!plans[i].plan.name.empty()) {
        throw InputError(fmt::format("--plan: {} and {} are both named '{}'; a baseline entry needs a name of its own",
                                     printable(paths[j]), printable(paths[i]), printable(plans[i].plan.name)));
      }
      if (!with_baseline) continue;
      throw InputError(fmt::format("--plan: {} and {} have the same text, so they share the baseline key '{}'; give "
                                   "them names (name = \"...\") so each has an entry of its own",
                                   printable(paths[j]), printable(paths[i]), plans[i].key));
    }
  }
}

bool env_is(const char* name, std::string_view value) {
  const char* v = std::getenv(name);
  return v && std::string_view(v) == value;
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<CheckOptions>();
  add_check_options(app, *o, true);
  auto from = std::make_shared<FromOptions>();
  add_from_options(app, *from, true);
  return [o, from]() {
    merge_check_config(*o);
    const CheckLimits limits = parse_limits(*o);
    if (o->update_baseline && o->baseline.empty()) throw InputError("--update-baseline: needs --baseline FILE");
    if (o->require_baseline && o->baseline.empty()) throw InputError("--require-baseline: needs --baseline FILE");
    for (const auto& [name, value] : {std::pair{"max-memory-regression", &o->max_memory_regression},
                                      std::pair{"max-time-regression", &o->max_time_regression}}) {
      if (!value->empty() && o->baseline.empty()) throw InputError(value_label(*o, name) + ": needs --baseline FILE");
    }
    require_writable(o->junit, "--junit");
    if (o->update_baseline) require_writable(o->baseline, "--baseline");
    // A document on stdout is all of stdout: the text report then goes to stderr, and a second document is refused.
    const std::vector<OutputFlag> outputs = {
        {"--junit", o->junit}, {"--baseline", o->update_baseline ? o->baseline : ""}, json_output(o->json)};
    refuse_shared_outputs(outputs);
    std::FILE* report = report_stream(outputs);
    std::vector<std::string> paths = expand_plan_paths(o->plans);
    if (paths.empty() && from->file.empty()) throw InputError("--plan: no plan files given (--plan FILE|DIR, or plan = [...] in --config)");

    // Read every input before evaluating or writing anything: bad input exits 2 with no output files.
    const ProfileSet profiles = load_profiles(o->profiles);
    std::vector<CheckPlanFile> plans;
    plans.reserve(paths.size());
    for (const std::string& p : paths) plans.push_back(load_check_plan(p, profiles, o->profiles));
    refuse_without_from(*from);
    if (!from->file.empty()) {  // --from FILE: one more plan, named by the file
      plans.push_back(check_plan_of(load_plan_source("check", "", *from, from->model, from->mesh, profiles)));
      paths.push_back(from->file);
    }
    refuse_shared_keys(paths, plans, !o->baseline.empty());
    Baseline baseline;
    std::optional<FileLock> lock;
    const bool compare = !o->baseline.empty() && !o->update_baseline;
    if (compare) {
      baseline = baseline_from_text(read_file(o->baseline, "--baseline"), o->baseline);
    } else if (o->update_baseline) {
      // Held until the new baseline is in place: concurrent updates of one baseline each add their plans to what
      // the one before wrote (without it, one's entries were lost).
      lock.emplace(o->baseline, "--baseline");
      std::error_code ec;
      if (fs::exists(o->baseline, ec)) baseline = baseline_from_text(read_file(o->baseline, "--baseline"), o->baseline);
    }

    std::vector<PlanCheck> checks;
    for (size_t i = 0; i < plans.size(); ++i) {
      const Estimate e = estimate(plans[i].plan);
      PlanCheck c;
      c.path = paths[i];
      c.key = plans[i].key;
      const PlanSnapshot* base = compare ? find_entry(baseline, c.key, c.path) : nullptr;
      c.baseline_missing = compare && base == nullptr;
      c.result = check_plan(plans[i].plan, e, limits, base);
      if (c.baseline_missing && o->require_baseline) {
        c.result.gates.push_back({Gate::baseline, false, 0, 0,
                                  fmt::format("no entry '{}' in the baseline {} (--require-baseline); record it with "
                                              "--update-baseline",
                                              printable(c.key), printable(o->baseline))});
        c.result.pass = false;
      }
      checks.push_back(std::move(c));
    }
    bool all_pass = true;
    for (const PlanCheck& c : checks) all_pass = all_pass && c.result.pass;
    // A budget above a plan's GPU is capped at the GPU (docs/ci.md): said once per plan, on stderr.
    for (const PlanCheck& c : checks) {
      if (limits.memory_bytes && static_cast<double>(*limits.memory_bytes) > c.result.capacity_bytes) {
        fmt::print(stderr,
                   "parplan check: warning: --memory {:.2f} GiB is above {}'s GPU ({:.2f} GiB); its capacity is the "
                   "budget\n",
                   static_cast<double>(*limits.memory_bytes) / (1 << 30), printable(c.path),
                   c.result.capacity_bytes / (1 << 30));
      }
    }

    // The JUnit report and the baseline are written as a pair: both or neither.
    const std::string junit = o->junit.empty() ? "" : render_junit(checks);
    std::string new_baseline;
    if (o->update_baseline) {
      for (size_t i = 0; i < checks.size(); ++i) {
        // An entry keyed by path (written before keys were names), in any spelling, moves to its key.
        for (const std::string& old : path_keys(baseline, checks[i].path)) {
          if (old != plans[i].key) baseline.erase(old);
        }
        baseline[plans[i].key] = checks[i].result.now;
      }
      new_baseline = baseline_to_json(baseline).dump(2, ' ', false, kReplaceBadUtf8) + "\n";
    }
    std::vector<OutputFile> files;
    if (!o->junit.empty()) files.push_back({o->junit, junit, "--junit"});
    if (o->update_baseline) files.push_back({o->baseline, new_baseline, "--baseline"});
    write_files_atomic(files);
    lock.reset();
    bool summary_written = true;  // else exit 3 once every other output is written
    if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY"); summary && *summary) {
      summary_written = append_step_summary(summary, render_markdown_summary(checks));
    }
    // Workflow commands on stdout; with --json on stderr, so stdout stays one JSON document (the runner reads both).
    if (env_is("GITHUB_ACTIONS", "true")) {
      fmt::print(o->json ? stderr : report, "{}", render_github_annotations(checks));
    }
    if (o->json) {
      fmt::print("{}\n", check_to_json(checks).dump(2, ' ', false, kReplaceBadUtf8));
    } else {
      fmt::print(report, "{}", render_check_text(checks));
      if (o->update_baseline) {
        // One entry per plan: plans that would share a key were refused above.
        fmt::print(report, "baseline written to {} ({} plan{})\n", printable(o->baseline), checks.size(),
                   checks.size() == 1 ? "" : "s");
      }
    }
    if (!summary_written) return kBackendFailure;
    return all_pass ? kOk : kCheckFailed;
  };
}

const RegisterCommand reg{{"check", "CI gate: memory fit with headroom, performance floors, baseline regression", 40, setup}};

}  // namespace
}  // namespace parplan::cli
