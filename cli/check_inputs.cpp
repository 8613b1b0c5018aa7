// Inputs of `parplan check` (see check_inputs.hpp): options, TOML config and plan files, plan discovery.
#include "cli/check_inputs.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fmt/core.h>
#include <set>
#include <sstream>

#include "cli/command.hpp"
#include "cli/io.hpp"
#include "cli/plan_options.hpp"
#include "planner/spec/error.hpp"

namespace parplan::cli {
namespace fs = std::filesystem;
namespace {

// `p` relative to `base_dir` unless it is absolute or empty.
std::string relative_to(const std::string& p, const fs::path& base_dir) {
  if (p.empty() || p == "-" || fs::path(p).is_absolute()) return p;
  return (base_dir / p).lexically_normal().generic_string();
}

bool has_extension(const fs::path& p, std::string_view ext) { return p.extension().string() == ext; }

std::string_view trim(std::string_view v) {
  const size_t a = v.find_first_not_of(" \t\r");
  if (a == std::string_view::npos) return {};
  return v.substr(a, v.find_last_not_of(" \t\r") - a + 1);
}

// The TOML text's lines, trimmed of blanks, one at a time (the checks below read the raw text: the reader loses what
// they look for).
template <class F>
void for_each_trimmed_line(std::string_view text, F&& f) {
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    f(trim(text.substr(at, end - at)));
    at = end + 1;
  }
}

// CLI11's TOML reader strips quotes and reads any word, so `tp = "2"` read as 2 and `sp = "yes"` or
// `recompute = full` passed. Each top-level `key = value` line's raw value must be of the option's kind: a TOML
// number for a numeric option, true / false for a flag, a quoted string (or a number, for values such as
// max-bubble = 0.2) for a text option, a string or an array for a repeatable one.
void check_toml_value_kinds(const CLI::App& app, std::string_view text, const std::string& path) {
  auto is_number = [](std::string_view v) {  // TOML's digit separators (1_000) are not read
    const std::string t(v);
    char* end = nullptr;
    std::strtod(t.c_str(), &end);
    return !t.empty() && end == t.c_str() + t.size();
  };
  for_each_trimmed_line(text, [&](std::string_view line) {
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) return;
    std::string_view key = trim(line.substr(0, eq));
    if (key.size() >= 2 && (key.front() == '"' || key.front() == '\'') && key.back() == key.front()) {
      key = key.substr(1, key.size() - 2);  // a quoted key ("tp" = 2) names the same option
    }
    if (key.empty() || key.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                           std::string_view::npos) {
      return;  // a comment, or a line inside a multi-line array
    }
    const CLI::Option* op = app.get_option_no_throw("--" + std::string(key));
    if (op == nullptr) return;  // reported by the caller
    std::string_view value = trim(line.substr(eq + 1));
    const bool quoted = !value.empty() && (value.front() == '"' || value.front() == '\'');
    if (!quoted) value = trim(value.substr(0, value.find('#')));
    const bool array = !value.empty() && value.front() == '[';
    const bool boolean = value == "true" || value == "false";
    const std::string type = op->get_type_name();
    std::string_view want;
    if (op->get_expected_max() == 0) {
      if (!boolean) want = "true or false";
    } else if (is_integer_option(*op)) {
      if (quoted || !is_decimal_integer(value)) want = "a decimal integer";
    } else if (type.starts_with("FLOAT")) {
      if (quoted || !is_number(value)) want = "a number";
    } else if (op->get_expected_max() > 1) {
      if (!quoted && !array) want = "a quoted string or an array of them";
    } else if (!quoted && (array || boolean || !is_number(value))) {
      want = "a quoted string";
    }
    if (!want.empty()) {
      throw InputError(fmt::format("{}: key '{}' takes {}, not {}", path, key, want, value.empty() ? "nothing" : value));
    }
  });
}

}  // namespace

void add_check_options(CLI::App& app, CheckOptions& o, bool with_config) {
  app.add_option("--plan", o.plans,
                 "Plan file (JSON Plan document or TOML of the plan flags) or a directory of them (repeatable)");
  if (with_config) {
    app.add_option("--config", o.config, "TOML file with check options; `plan = [\"a.json\", ...]` lists plans");
  }
  app.add_option("--profile", o.profiles, "User profile JSON file for plans that name profiles (repeatable)");
  app.add_option("--headroom", o.headroom, "Memory to keep free per GPU: 10% (of the budget) or 8GiB (default 0)");
  app.add_option("--memory", o.memory, "Per-GPU memory budget, e.g. 72GiB (default: the GPU's capacity)");
  app.add_option("--max-bubble", o.max_bubble, "Fail when the pipeline bubble exceeds this fraction of the step");
  app.add_option("--max-dp-comm", o.max_dp_comm, "Fail when exposed DP communication exceeds this fraction of the step");
  app.add_option("--min-mfu", o.min_mfu, "Fail when the model FLOPs utilisation is below this (0.35 or 35%)");
  app.add_option("--max-step-time", o.max_step_time, "Fail when the step time exceeds this (12s, 850ms)");
  app.add_option("--baseline", o.baseline, "Baseline JSON: fail when memory or step time regressed (docs/ci.md)");
  app.add_flag("--update-baseline", o.update_baseline, "Write the current results to --baseline instead of comparing");
  app.add_option("--max-memory-regression", o.max_memory_regression,
                 "Allowed peak-memory growth over the baseline (default 5%)");
  app.add_option("--max-time-regression", o.max_time_regression,
                 "Allowed step-time growth over the baseline (default 5%)");
  app.add_option("--junit", o.junit, "Write a JUnit XML report (one test case per plan)");
  app.add_flag("--json", o.json, "Print the results as JSON");
}

void parse_toml_options(CLI::App& app, std::string_view text, const std::string& path) {
  // Section headers are refused from the text itself: the TOML reader maps [default] (any case) to the top level and
  // skips a bare [], so neither would reach the check on its items below.
  for_each_trimmed_line(text, [&](std::string_view line) {
    if (line.starts_with('[')) {
      const size_t close = line.find(']');
      throw InputError(fmt::format("{}: section {} (sections are not supported; use top-level keys)", path,
                                   line.substr(0, close == std::string_view::npos ? line.size() : close + 1)));
    }
  });
  std::vector<CLI::ConfigItem> items;
  try {
    std::istringstream in{std::string(text)};
    items = CLI::ConfigTOML().from_config(in);
  } catch (const CLI::Error& e) {
    throw InputError(fmt::format("{}: malformed TOML: {}", path, e.what()));
  }
  std::set<std::string> seen;
  for (const CLI::ConfigItem& item : items) {
    const std::string key = item.fullname();
    if (!item.parents.empty()) {
      if (item.name == "--") continue;  // leaving a section
      if (item.name == "++") {           // entering one (even an empty one, which has no key to report)
        std::string section;
        for (const std::string& p : item.parents) section += (section.empty() ? "" : ".") + p;
        throw InputError(fmt::format("{}: section [{}] (sections are not supported; use top-level keys)", path, section));
      }
      throw InputError(fmt::format("{}: unknown key '{}' (sections are not supported; use top-level keys)", path, key));
    }
    const CLI::Option* op = item.name.empty() ? nullptr : app.get_option_no_throw("--" + item.name);
    if (op == nullptr) throw InputError(fmt::format("{}: unknown key '{}'", path, key));
    // CLI11 folds a repeated key on consecutive lines into one item with several values.
    if (!seen.insert(item.name).second || (op->get_items_expected_max() <= 1 && item.inputs.size() > 1)) {
      throw InputError(fmt::format("{}: key '{}' is given more than once (or as a list)", path, key));
    }
  }
  check_toml_value_kinds(app, text, path);
  try {
    std::istringstream in{std::string(text)};
    app.parse_from_stream(in);
  } catch (const CLI::Error& e) {
    throw InputError(fmt::format("{}: {}", path, e.what()));
  }
}

void merge_check_config(CheckOptions& o) {
  if (o.config.empty()) return;
  const std::string text = read_file(o.config, "--config");
  CheckOptions c;
  CLI::App app{"parplan check config"};
  app.set_help_flag();
  add_check_options(app, c, false);
  parse_toml_options(app, text, o.config);
  const fs::path dir = fs::path(o.config).parent_path();
  for (const std::string& p : c.plans) o.plans.push_back(relative_to(p, dir));
  for (const std::string& p : c.profiles) o.profiles.push_back(relative_to(p, dir));
  auto take = [](std::string& mine, const std::string& theirs) {
    if (mine.empty()) mine = theirs;
  };
  take(o.headroom, c.headroom);
  take(o.memory, c.memory);
  take(o.max_bubble, c.max_bubble);
  take(o.max_dp_comm, c.max_dp_comm);
  take(o.min_mfu, c.min_mfu);
  take(o.max_step_time, c.max_step_time);
  take(o.baseline, relative_to(c.baseline, dir));
  take(o.max_memory_regression, c.max_memory_regression);
  take(o.max_time_regression, c.max_time_regression);
  take(o.junit, relative_to(c.junit, dir));
  o.update_baseline = o.update_baseline || c.update_baseline;
  o.json = o.json || c.json;
}

std::vector<std::string> expand_plan_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) {
      out.push_back(fs::path(p).lexically_normal().generic_string());
      continue;
    }
    std::vector<std::string> found;
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path& f = it->path();
      std::error_code fec;
      if (fs::is_regular_file(f, fec) && (has_extension(f, ".json") || has_extension(f, ".toml"))) {
        found.push_back(f.lexically_normal().generic_string());
      }
    }
    if (ec) throw InputError(fmt::format("--plan: cannot list directory '{}': {}", p, ec.message()));
    if (found.empty()) throw InputError(fmt::format("--plan: directory '{}' holds no .json or .toml plan files", p));
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

Plan load_check_plan(const std::string& path, const ProfileSet& profiles,
                     const std::vector<std::string>& profile_files) {
  if (!has_extension(path, ".toml")) return load_plan_file(path, profiles);
  const std::string text = read_file(path, "--plan");
  CLI::App app{"parplan plan (TOML)"};
  app.set_help_flag();
  ModelOptions mo;
  MeshOptions me;
  add_model_options(app, mo);
  add_mesh_options(app, me);
  parse_toml_options(app, text, path);
  // File references inside the TOML plan are relative to the plan file.
  const fs::path dir = fs::path(path).parent_path();
  for (std::string* v : {&mo.model, &mo.gpu, &mo.cluster}) {
    if (names_a_file(*v)) *v = relative_to(*v, dir);
  }
  for (std::string& f : mo.profile_files) f = relative_to(f, dir);
  mo.profile_files.insert(mo.profile_files.begin(), profile_files.begin(), profile_files.end());
  try {
    const ProfileSet set = load_profiles(mo);
    return build_plan(mo, me, set);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace parplan::cli
