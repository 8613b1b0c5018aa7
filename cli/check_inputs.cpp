// Inputs of `parplan check` (see check_inputs.hpp): options, TOML config and plan files, plan discovery.
#include "cli/check_inputs.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fmt/core.h>
#include <map>
#include <set>

#include "cli/command.hpp"
#include "cli/io.hpp"
#include "cli/plan_options.hpp"
#include "cli/toml.hpp"
#include "planner/spec/error.hpp"
#include "planner/spec/json_reader.hpp"
#include "planner/spec/plan_json.hpp"

namespace parplan::cli {
namespace fs = std::filesystem;
namespace {

// `p` relative to `base_dir` unless it is absolute or empty.
std::string relative_to(const std::string& p, const fs::path& base_dir) {
  if (p.empty() || p == "-" || fs::path(p).is_absolute()) return p;
  return (base_dir / p).lexically_normal().generic_string();
}

bool has_extension(const fs::path& p, std::string_view ext) { return p.extension().string() == ext; }

std::string content_key(std::string_view canonical) { return "content:" + short_hash(canonical); }

// A TOML value without its spelling (quotes, spacing, comments inside an array): its text, arrays item by item.
std::string toml_canonical(const TomlValue& v) {
  if (v.kind != TomlValue::Kind::array) return v.text;
  std::string s = "[";
  for (const TomlValue& x : v.items) s += x.text + "\x1f";
  return s + "]";
}

// What a TOML value must be for `op`, or empty when it is that: a TOML integer for an integer option, a number for
// a numeric one, true / false for a flag, a string or an array of strings for a repeatable one, a string (or a number,
// for values such as max-bubble = 0.2) for a text option.
std::string_view wrong_kind(const CLI::Option& op, const TomlValue& v) {
  using K = TomlValue::Kind;
  if (op.get_expected_max() == 0) return v.kind == K::boolean ? "" : "true or false";
  if (is_integer_option(op)) return v.kind == K::integer ? "" : "a decimal integer";
  if (is_number_option(op)) return v.kind == K::integer || v.kind == K::number ? "" : "a number";
  if (op.get_expected_max() > 1) {
    const bool strings = std::all_of(v.items.begin(), v.items.end(), [](const TomlValue& x) { return x.kind == K::string; });
    return v.kind == K::string || (v.kind == K::array && strings) ? "" : "a quoted string or an array of them";
  }
  return v.kind == K::string || v.kind == K::integer || v.kind == K::number ? "" : "a quoted string";
}

// The command-line words that give `item` to its option (--key=value, once per array element; a flag set to false
// is left out: false is every flag's default).
void append_words(const TomlItem& item, std::vector<std::string>& words) {
  const std::string flag = "--" + item.key;
  if (item.value.kind == TomlValue::Kind::boolean) {
    if (item.value.text == "true") words.push_back(flag);
    return;
  }
  if (item.value.kind == TomlValue::Kind::array) {
    for (const TomlValue& x : item.value.items) words.push_back(flag + "=" + x.text);
    return;
  }
  words.push_back(flag + "=" + item.value.text);
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
  app.add_flag("--require-baseline", o.require_baseline, "Fail a plan that has no entry in --baseline");
  app.add_option("--max-memory-regression", o.max_memory_regression,
                 "Allowed peak-memory growth over the baseline (default 5%)");
  app.add_option("--max-time-regression", o.max_time_regression,
                 "Allowed growth of time per token (step time / tokens per step) over the baseline (default 5%)");
  app.add_option("--junit", o.junit, "Write a JUnit XML report (one test case per plan)");
  app.add_flag("--json", o.json, "Print the results as JSON");
}

std::vector<TomlItem> parse_toml_options(CLI::App& app, std::string_view text, const std::string& path) {
  std::map<const CLI::Option*, const TomlItem*> given;
  std::vector<std::string> words;
  std::vector<TomlItem> items = read_toml(text, path);
  for (const TomlItem& item : items) {
    auto fail = [&](std::string_view what) { throw InputError(fmt::format("{}:{}: {}", path, item.line, what)); };
    const std::string key = excerpt(item.key);
    const CLI::Option* op = item.key.empty() ? nullptr : app.get_option_no_throw("--" + item.key);
    if (op == nullptr) fail(fmt::format("unknown key '{}'", key));
    if (const auto [it, fresh] = given.emplace(op, &item); !fresh) {
      const TomlItem& first = *it->second;
      if (first.key == item.key) {
        fail(fmt::format("key '{}' is given more than once (first on line {})", key, first.line));
      }
      fail(fmt::format("keys '{}' (line {}) and '{}' name the same option {}; give one", excerpt(first.key), first.line,
                       key, op->get_name()));
    }
    if (const std::string_view want = wrong_kind(*op, item.value); !want.empty()) {
      fail(fmt::format("key '{}' takes {}, not {}", key, want, item.value.raw.empty() ? "nothing" : excerpt(item.value.raw)));
    }
    // An empty value would make CLI11 take the next word (the next line's key) as the value.
    const auto empty = [](const TomlValue& x) { return x.kind == TomlValue::Kind::string && x.text.empty(); };
    if (empty(item.value) || std::any_of(item.value.items.begin(), item.value.items.end(), empty)) {
      fail(fmt::format("key '{}' must not be empty", key));
    }
    append_words(item, words);
  }
  std::reverse(words.begin(), words.end());  // CLI11 takes the words last first
  try {
    app.parse(words);
  } catch (const CLI::Error& e) {  // CLI11's message quotes the value
    throw InputError(fmt::format("{}: {}", path, excerpt(e.what(), 2 * kExcerptBytes)));
  }
  return items;
}

void merge_check_config(CheckOptions& o) {
  if (o.config.empty()) return;
  const std::string text = read_file(o.config, "--config");
  CheckOptions c;
  CLI::App app{"parplan check config"};
  app.set_help_flag();
  add_check_options(app, c, false);
  std::map<std::string, int> line_of;
  for (const TomlItem& item : parse_toml_options(app, text, o.config)) line_of[item.key] = item.line;
  const fs::path dir = fs::path(o.config).parent_path();
  for (const std::string& p : c.plans) o.plans.push_back(relative_to(p, dir));
  for (const std::string& p : c.profiles) o.profiles.push_back(relative_to(p, dir));
  auto take = [&](std::string& mine, const std::string& theirs, const std::string& name) {
    if (!mine.empty() || theirs.empty()) return;
    mine = theirs;
    o.config_origin[name] = fmt::format("{}:{}", o.config, line_of[name]);
  };
  take(o.headroom, c.headroom, "headroom");
  take(o.memory, c.memory, "memory");
  take(o.max_bubble, c.max_bubble, "max-bubble");
  take(o.max_dp_comm, c.max_dp_comm, "max-dp-comm");
  take(o.min_mfu, c.min_mfu, "min-mfu");
  take(o.max_step_time, c.max_step_time, "max-step-time");
  take(o.baseline, relative_to(c.baseline, dir), "baseline");
  take(o.max_memory_regression, c.max_memory_regression, "max-memory-regression");
  take(o.max_time_regression, c.max_time_regression, "max-time-regression");
  take(o.junit, relative_to(c.junit, dir), "junit");
  o.update_baseline = o.update_baseline || c.update_baseline;
  o.require_baseline = o.require_baseline || c.require_baseline;
  o.json = o.json || c.json;
}

std::string value_label(const CheckOptions& o, const std::string& name) {
  const auto it = o.config_origin.find(name);
  return it == o.config_origin.end() ? "--" + name : fmt::format("{}: {}", it->second, name);
}

namespace {

// Directory `p`'s *.json and *.toml files, sorted.
std::vector<std::string> plan_files_in(const std::string& p) {
  std::error_code ec;
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
  return found;
}

}  // namespace

std::vector<std::string> expand_plan_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  std::set<std::string> seen;  // a file reached twice (listed twice, or also through its directory) is one plan
  auto add = [&](const std::string& f) {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(f, ec);
    if (seen.insert(ec ? f : canonical.generic_string()).second) out.push_back(f);
  };
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) {
      add(fs::path(p).lexically_normal().generic_string());
      continue;
    }
    for (const std::string& f : plan_files_in(p)) add(f);
  }
  return out;
}

CheckPlanFile check_plan_of(Plan plan) {
  CheckPlanFile f{std::move(plan), ""};
  f.key = f.plan.name.empty() ? content_key(plan_to_json(f.plan).dump()) : f.plan.name;
  return f;
}

CheckPlanFile load_check_plan(const std::string& path, const ProfileSet& profiles,
                              const std::vector<std::string>& profile_files) {
  if (!has_extension(path, ".toml")) {
    CheckPlanFile f{load_plan_file(path, profiles), ""};
    f.key = f.plan.name.empty() ? content_key(parse_json_text(read_file(path, "--plan"), path).dump()) : f.plan.name;
    return f;
  }
  const std::string text = read_file(path, "--plan");
  CLI::App app{"parplan plan (TOML)"};
  app.set_help_flag();
  ModelOptions mo;
  MeshOptions me;
  std::string name;
  add_model_options(app, mo);
  add_mesh_options(app, me);
  app.add_option("--name", name, "The plan's name: its key in a check baseline");
  std::vector<TomlItem> items = parse_toml_options(app, text, path);
  // File references inside the TOML plan are relative to the plan file.
  const fs::path dir = fs::path(path).parent_path();
  for (std::string* v : {&mo.model, &mo.gpu, &mo.cluster}) {
    if (names_a_file(*v)) *v = relative_to(*v, dir);
  }
  for (std::string& f : mo.profile_files) f = relative_to(f, dir);
  mo.profile_files.insert(mo.profile_files.begin(), profile_files.begin(), profile_files.end());
  try {
    const ProfileSet set = load_profiles(mo);
    CheckPlanFile f{build_plan(mo, me, set), name};
    f.plan.name = name;
    if (f.key.empty()) {
      std::sort(items.begin(), items.end(), [](const TomlItem& a, const TomlItem& b) { return a.key < b.key; });
      std::string canonical;
      for (const TomlItem& item : items) canonical += item.key + "=" + toml_canonical(item.value) + "\n";
      f.key = content_key(canonical);
    }
    return f;
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace parplan::cli
