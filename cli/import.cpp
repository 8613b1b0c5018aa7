// `parplan import FILE`: the plan a training framework's config describes, what it assumed and what it ignored;
// -o writes the Plan document (docs/interop.md).
#include <fmt/core.h>

#include "cli/command.hpp"
#include "cli/interop/from_file.hpp"
#include "cli/io.hpp"
#include "cli/render.hpp"
#include "cli/text.hpp"
#include "planner/spec/plan_json.hpp"

namespace parplan::cli {
namespace {

struct ImportOptions {
  FromOptions from;
  bool json = false;
  std::string out;
};

std::string render_import(const std::string& file, const FromResult& r) {
  const Plan& plan = r.plan;
  const ParallelConfig& pc = plan.parallel;
  std::string s = fmt::format("{} read as {} ({})\n", printable(file), framework_name(r.imported.format),
                              framework_document(r.imported.format));
  s += fmt::format("plan: {} on {} x {} ({})\n", plan.model.name, plan.num_gpus, plan.gpu.name, plan.cluster.name);
  s += fmt::format("  dp {}{} x tp {} x pp {} x cp {}, ep {}{}, vpp {}  | micro-batch {} x {} = global batch {} x "
                   "seq {}\n",
                   pc.dp, pc.dp_replicate > 1 ? fmt::format(" (dp_replicate {})", pc.dp_replicate) : "", pc.tp, pc.pp,
                   pc.cp, pc.ep, pc.etp > 0 ? fmt::format(" (etp {})", pc.etp) : "", pc.vpp,
                   pc.micro_batch, count_of(pc.num_microbatches, "microbatch"), plan.training.global_batch, plan.seq_len());
  s += fmt::format("  schedule {}  | recompute {}{}  | sequence parallel {}  | ZeRO {}{}  | {}\n", to_string(pc.schedule),
                   to_string(pc.recompute),
                   pc.recompute_layers > 0 ? fmt::format(" (first {} layers of each chunk)", pc.recompute_layers) : "",
                   pc.sequence_parallel ? "on" : "off", pc.zero_stage,
                   pc.distributed_optimizer ? " + distributed optimizer" : "", to_string(plan.training.precision));
  s += "from the file:\n";
  for (const auto& [flag, st] : r.imported.flags) {
    if (st.origin.starts_with("assumed")) continue;
    s += fmt::format("  {}{}{}  <- {}\n", flag, st.value.empty() ? "" : " ", printable(st.value), printable(st.origin));
  }
  if (r.imported.model && !r.model_replaced) s += fmt::format("  model shape  <- {}\n", r.imported.model_origin);
  if (!r.imported.model_name.empty() && !r.model_replaced) s += fmt::format("  --model {}  <- {}\n", printable(r.imported.model_name), r.imported.model_origin);
  auto list = [&](const char* title, const std::vector<std::string>& lines) {
    s += fmt::format("{} ({}):\n", title, lines.size());
    for (const std::string& l : lines) s += "  " + printable(l) + "\n";
  };
  list("assumed", r.imported.assumed);
  list("ignored", r.imported.ignored);
  if (!r.overridden.empty()) list("replaced by the command line", r.overridden);
  if (!r.added.empty()) list("set by the command line", r.added);
  return s;
}

nlohmann::json import_json(const FromResult& r) {
  nlohmann::json j;
  j["format"] = framework_name(r.imported.format);
  nlohmann::json from = nlohmann::json::object();
  for (const auto& [flag, st] : r.imported.flags) {
    if (!st.origin.starts_with("assumed")) from[flag] = {{"value", st.value}, {"origin", st.origin}};
  }
  j["from_file"] = from;
  j["assumed"] = r.imported.assumed;
  j["ignored"] = r.imported.ignored;
  j["replaced"] = r.overridden;
  j["set"] = r.added;
  j["plan"] = plan_to_json(r.plan);
  return j;
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<ImportOptions>();
  app.add_option("file", o->from.file, "The framework config: a Megatron-LM launch script or YAML args, a NeMo YAML, a "
                                       "torchtitan TOML, a DeepSpeed JSON or a nanotron YAML")->required();
  app.add_option("--format", o->from.format, "auto (default: from the content and extension), megatron, nemo, torchtitan, deepspeed, nanotron");
  add_target_options(app, o->from.model, o->from.mesh, "the file");
  app.add_option("--profile", o->from.model.profile_files, "User profile JSON file (repeatable)");
  app.add_flag("--json", o->json, "Print the plan, the values read, assumed and ignored as JSON");
  app.add_option("-o,--out", o->out, "Write the Plan document (for estimate, simulate, check and run --plan)");
  return [o]() {
    refuse_shared_outputs({{"-o", o->out}, json_output(o->json)});
    const ProfileSet profiles = load_profiles(o->from.model);
    const FromResult r = plan_from_framework(o->from.file, o->from.format, o->from.model, o->from.mesh, profiles, "import");
    if (!o->out.empty()) write_file_atomic(o->out, plan_to_json(r.plan).dump(2) + "\n", "-o");
    if (o->json) {
      fmt::print("{}\n", import_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      fmt::print(is_stdout(o->out) ? stderr : stdout, "{}", render_import(o->from.file, r));
    }
    for (const std::string& l : r.imported.ignored) {
      if (o->json) fmt::print(stderr, "parplan import: warning: ignored {}\n", printable(l));
    }
    return kOk;
  };
}

const RegisterCommand reg{{"import", "Read a Megatron-LM, NeMo, torchtitan, DeepSpeed or nanotron config as a plan", 25, setup}};

}  // namespace
}  // namespace parplan::cli
