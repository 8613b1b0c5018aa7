// --from FILE [--format F]: a plan read from a training framework's config (cli/interop/framework.hpp), with the
// plan flags given beside it on the command line taking precedence over the file's values. Used by `import` and by
// every plan-taking command (estimate, simulate, check, run).
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/interop/framework.hpp"
#include "cli/plan_options.hpp"

namespace parplan::cli {

struct FromOptions {
  std::string file;
  std::string format = "auto";
  ModelOptions model;  // import, check, run, export: add_target_options' flags (they have no plan flags of their own)
  MeshOptions mesh;
};

// Adds --from and --format; with `with_target` also add_target_options (into o.model, o.mesh; `with_gpu` as there).
void add_from_options(CLI::App& app, FromOptions& o, bool with_target, bool with_gpu = true);

// Adds --gpus, --model, --params, --cluster, --seq, --gpu (with `with_gpu`; run has a --gpu of its own) and the knob
// flags (add_knob_options: precision, fp8, MoE routing, ...) into `mo`, and the mesh flags into `me` (for commands
// without the plan flags: import, check, run, export), each replacing the file's value.
// `source`: how the help names the config ("--from"; import's positional file: "the file").
void add_target_options(CLI::App& app, ModelOptions& mo, MeshOptions& me, std::string_view source = "--from",
                        bool with_gpu = true);
// Without --from, any of those flags (or --format) is an InputError: nothing would read it.
void refuse_without_from(const FromOptions& from);

struct FromResult {
  Plan plan;
  Imported imported;
  std::vector<std::string> overridden;  // "--tp 8 (command line) replaces the file's 4 from --tensor-... (line 3)"
  std::vector<std::string> added;       // command-line values the file did not give ("--fp8-recipe rowwise")
  bool model_replaced = false;          // the command line's --model replaces the file's model (listed in overridden)
};

// The plan `file` describes: its values, the command line's plan flags given in `mo` / `me` over them, then
// build_plan. A placeholder, a missing GPU count or model, or a value build_plan refuses is an InputError naming the
// file and the option that gave it (or the flag to give). `file_flag` names the file in a read error ("--from", or
// "import" for its positional file).
FromResult plan_from_framework(const std::string& file, const std::string& format, const ModelOptions& mo,
                               const MeshOptions& me, const ProfileSet& profiles, std::string_view file_flag = "--from");

// The plan of a plan-taking command: --from FILE (the summary line on stderr), --plan FILE, or the plan flags
// (`note` / `batch_note` as build_plan sets them). --from with --plan, or --format without --from, is an InputError.
Plan load_plan_source(std::string_view command, const std::string& plan_file, const FromOptions& from,
                      const ModelOptions& mo, const MeshOptions& me, const ProfileSet& profiles,
                      std::string* note = nullptr, std::string* batch_note = nullptr);

// One stderr line: how many values the file left to defaults and how many of its options parplan ignored.
void print_from_summary(std::FILE* to, std::string_view command, const std::string& file, const FromResult& r);

}  // namespace parplan::cli
