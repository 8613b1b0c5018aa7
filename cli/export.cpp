// `parplan export --plan plan.json --to megatron|nemo|torchtitan|deepspeed`: the framework config that runs the
// plan; what the framework cannot express is a comment in it and a warning on stderr (docs/interop.md).
#include <algorithm>
#include <fmt/core.h>

#include "cli/command.hpp"
#include "cli/interop/export.hpp"
#include "cli/interop/from_file.hpp"
#include "cli/io.hpp"
#include "cli/text.hpp"
#include "planner/spec/error.hpp"

namespace parplan::cli {
namespace {

struct ExportOptions {
  std::string plan_file, to, out;
  FromOptions from;
};

Runner setup(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  app.add_option("--plan", o->plan_file, "The Plan document (from estimate -o, suggest -o or import -o)");
  add_from_options(app, o->from, true);
  app.add_option("--to", o->to, "megatron (the torchrun ... pretrain_gpt.py command), nemo (YAML), torchtitan (TOML), deepspeed (JSON)")->required();
  app.add_option("--profile", o->from.model.profile_files, "User profile JSON file (repeatable)");
  app.add_option("-o,--out", o->out, "Write the config to FILE (default: stdout)");
  return [o]() {
    const Framework to = written_framework(o->to, "--to");
    if (o->plan_file.empty() && o->from.file.empty()) throw InputError("--plan is required (or --from FILE)");
    const ProfileSet profiles = load_profiles(o->from.model);
    const Plan plan = load_plan_source("export", o->plan_file, o->from, o->from.model, o->from.mesh, profiles);
    const Exported e = export_plan(plan, to, o->plan_file.empty() ? o->from.file : o->plan_file);
    if (o->out.empty() || is_stdout(o->out)) {
      fmt::print("{}", e.text);
    } else {
      write_file_atomic(o->out, e.text, "-o");
    }
    for (const std::string& w : e.warnings) {
      fmt::print(stderr, "parplan export: warning: {} cannot express {}\n", framework_name(to), printable(w));
    }
    for (const std::string& w : e.not_written) {
      fmt::print(stderr, "parplan export: warning: not written to the {} config: {}\n", framework_name(to),
                 printable(w));
    }
    return kOk;
  };
}

const RegisterCommand reg{{"export", "Write a plan as a Megatron-LM, NeMo, torchtitan or DeepSpeed config", 26, setup}};

}  // namespace
}  // namespace parplan::cli
