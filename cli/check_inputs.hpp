// Inputs of `parplan check`: its options (also readable from a TOML config file that lists plans), plan-file
// discovery (files and directories) and plan loading from JSON (the Plan document) or TOML (the plan flags).
#pragma once
#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cli/toml.hpp"
#include "planner/spec/profiles.hpp"
#include "planner/spec/spec.hpp"

namespace parplan::cli {

// Every value is kept as text and parsed once, after the command line and the config file are merged.
struct CheckOptions {
  std::vector<std::string> plans;     // files or directories
  std::string config;                 // TOML file with any of the options below (`plan = [...]` lists plans)
  std::vector<std::string> profiles;  // --profile FILE: user profiles for plans that name profiles
  std::string headroom, memory, max_bubble, max_dp_comm, min_mfu, max_step_time;
  std::string baseline, max_memory_regression, max_time_regression;
  bool update_baseline = false;
  bool require_baseline = false;  // a plan without a baseline entry fails (exit 1)
  std::string junit;
  bool json = false;
  // Where a value taken from the config file was given: option long name ("headroom") -> "<config>:<line>".
  std::map<std::string, std::string> config_origin;
};

// How an error names the value of option `name`: "--headroom" on the command line, "c.toml:2: headroom" from --config.
std::string value_label(const CheckOptions& o, const std::string& name);

// Adds the check options to `app`; `with_config` adds --config (left out for the config file's own parser).
void add_check_options(CLI::App& app, CheckOptions& o, bool with_config);

// Reads o.config (when set) and merges it into `o`: command-line values win; plans are appended; relative paths in
// the config file (plan, profile, baseline, junit) are relative to the config file's directory.
void merge_check_config(CheckOptions& o);

// Assigns the keys of a TOML document (cli/toml.hpp) to `app`'s options. Every key must be an option's long name
// without "--", once (two spellings of one option, sp and sequence-parallel, are refused naming both), with a value
// of the option's kind; errors are InputError "<path>:<line>: ..." naming the key. Returns the items read.
std::vector<TomlItem> parse_toml_options(CLI::App& app, std::string_view text, const std::string& path);

// Expands directories into their *.json and *.toml files (sorted, not recursive); keeps files as given (normalised).
// A file reached twice (listed twice, or also through its directory) is kept once, where it was first reached.
std::vector<std::string> expand_plan_paths(const std::vector<std::string>& paths);

// A plan to check and its baseline key: the plan's name (the Plan document's "name", `name = "..."` in a TOML plan)
// or else "content:<hash>" of its document (JSON: key order and spacing do not count; TOML: its items, sorted by
// key, comments and spacing do not count), so the key does not depend on the path the plan was found under.
struct CheckPlanFile {
  Plan plan;
  std::string key;
};

// A plan read some other way (--from): keyed by its name, else by the content of its Plan document.
CheckPlanFile check_plan_of(Plan plan);

// Loads one plan: *.toml through the plan flags of cli/plan_options.hpp (paths inside relative to the file) and an
// optional `name`, anything else as a Plan document. Every error is one line naming the file.
CheckPlanFile load_check_plan(const std::string& path, const ProfileSet& profiles,
                              const std::vector<std::string>& profile_files);

}  // namespace parplan::cli
