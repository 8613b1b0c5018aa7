// `parplan profiles list|show NAME|validate FILE`: the embedded (and user) GPU, cluster and model profiles.
#include <algorithm>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/io.hpp"
#include "cli/plan_options.hpp"
#include "cli/render.hpp"
#include "planner/spec/error.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/spec/profiles.hpp"
#include "planner/spec/spec_json.hpp"

namespace parplan::cli {
namespace {

// One line: size, layers, attention and experts.
std::string model_summary(const ModelSpec& m) {
  std::string s = fmt::format("{} params", fmt_count(static_cast<double>(total_params(m))));
  if (m.is_moe()) s += fmt::format(" ({} active)", fmt_count(static_cast<double>(active_params(m))));
  s += fmt::format(", {} layers", m.layers);
  if (m.has_dense_layers()) s += fmt::format(" ({} dense)", m.dense_layer_count());
  s += fmt::format(", hidden {}, {} heads{}", m.hidden, m.heads, m.is_mla() ? " MLA" : "");
  if (m.is_moe()) {
    s += fmt::format(", {} experts{} top-{}", m.experts,
                     m.shared_experts > 0 ? fmt::format(" + {} shared", m.shared_experts) : "", m.top_k);
  }
  return s;
}


struct ProfilesOptions {
  std::vector<std::string> user;
  std::string show_name, validate_file, kind;
};

ProfileSet load(const ProfilesOptions& o) { return load_profiles(o.user); }

Runner setup(CLI::App& app) {
  auto o = std::make_shared<ProfilesOptions>();
  app.add_option("--profile", o->user, "User profile JSON file (repeatable)");
  app.require_subcommand(1);
  CLI::App* list = app.add_subcommand("list", "List GPU, cluster and model profiles");
  list->add_option("--kind", o->kind, "gpu | cluster | model");
  CLI::App* show = app.add_subcommand("show", "Print one profile as JSON");
  show->add_option("name", o->show_name, "Profile name or alias")->required();
  CLI::App* val = app.add_subcommand("validate", "Check a profile file (strict: unknown keys are errors)");
  val->add_option("file", o->validate_file, "Profile JSON file")->required();
  return [o, show, val]() {
    if (val->parsed()) {
      const std::string kind = validate_profile(read_file(o->validate_file, "validate"), o->validate_file);
      fmt::print("{}: valid {} profile\n", o->validate_file, kind);
      return kOk;
    }
    const ProfileSet set = load(*o);
    // A --profile file sharing a name or alias with a profile replaces it whole (ProfileSet::add): an entry is listed
    // while its names still resolve to it, with the aliases it holds (its own and those it took over).
    if (show->parsed()) {
      nlohmann::json doc;
      const ProfileSet::Entry* owner = nullptr;
      for (const ProfileSet::Entry& e : set.entries()) {
        for (const std::string& k : set.live_keys(e)) owner = same_name(k, o->show_name) ? &e : owner;
      }
      if (!owner) throw InputError(fmt::format("show: unknown profile '{}' (see `parplan profiles list`)", excerpt(o->show_name)));
      doc = owner->kind == "gpu"       ? to_json(set.gpu_of(*owner))
            : owner->kind == "cluster" ? to_json(set.cluster_of(*owner))
                                       : to_json(set.model_of(*owner));
      std::vector<std::string> aliases = set.live_keys(*owner);
      std::erase_if(aliases, [&](const std::string& k) { return same_name(k, owner->name); });
      if (!aliases.empty()) doc["aliases"] = aliases;
      fmt::print("{}\n", doc.dump(2));
      return kOk;
    }
    if (!o->kind.empty() && o->kind != "gpu" && o->kind != "cluster" && o->kind != "model") {
      throw InputError(fmt::format("--kind: unknown kind '{}' (use gpu, cluster or model)", excerpt(o->kind)));
    }
    Table t({"kind", "name", "aliases", "summary"}, 4);
    for (const ProfileSet::Entry& e : set.entries()) {
      if (!o->kind.empty() && e.kind != o->kind) continue;
      const std::vector<std::string> live = set.live_keys(e);
      if (live.empty()) continue;  // replaced by a later file
      std::string aliases;
      for (const auto& a : live) {
        if (!same_name(a, e.name)) aliases += (aliases.empty() ? "" : ",") + a;
      }
      std::string summary;
      if (e.kind == "gpu") {
        const GpuSpec& g = set.gpu_of(e);
        summary = fmt::format("{} HBM, {:.0f} GB/s, bf16 {:.0f} TFLOP/s", fmt_bytes(static_cast<double>(g.memory_bytes)),
                              g.hbm_bandwidth_Bps / 1e9, g.peak(DType::bf16) / 1e12);
      } else if (e.kind == "cluster") {
        const ClusterSpec& c = set.cluster_of(e);
        summary = fmt::format("{} x {} ({}), intra {:.0f} GB/s, inter {:.0f} GB/s per GPU", c.gpus_per_node, c.gpu,
                              node_shape(c), c.intra_node.bandwidth_Bps / 1e9, c.inter_node.bandwidth_Bps / 1e9);
      } else {
        summary = model_summary(set.model_of(e));
      }
      if (!e.embedded) summary += fmt::format(" (from {})", e.where);
      t.add({e.kind, e.name, aliases, summary});
    }
    fmt::print("{}", t.render());
    return kOk;
  };
}

const RegisterCommand reg{{"profiles", "List, show and validate GPU, cluster and model profiles", 90, setup}};

}  // namespace
}  // namespace parplan::cli
