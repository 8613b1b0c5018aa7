// Plan document JSON (see plan_json.hpp and docs/json-schema.md).
#include "planner/spec/plan_json.hpp"

#include <fmt/core.h>

#include "planner/spec/json_reader.hpp"
#include "planner/spec/spec_json.hpp"

namespace parplan {
namespace {

template <typename T, typename FromJson, typename Lookup>
T inline_or_named(JsonReader& r, std::string_view key, std::string_view kind, FromJson from_json, Lookup lookup) {
  const nlohmann::json& v = r.raw(key);
  if (v.is_string()) return lookup(v.get<std::string>(), fmt::format("{}: {}", r.where(), r.path_of(key)));
  JsonReader sub(v, r.where(), r.path_of(key));
  if (sub.has("kind") && sub.get_string("kind") != kind) sub.fail("kind", fmt::format("expected '{}'", kind));
  if (sub.has("aliases")) sub.raw("aliases");
  T spec = from_json(sub);
  sub.finish();
  return spec;
}

}  // namespace

Plan plan_from_json(const nlohmann::json& j, const ProfileSet& profiles, const std::string& where) {
  JsonReader r(j, where);
  r.get_int("parplan_plan", kPlanFormatVersion, kPlanFormatVersion, kPlanFormatVersion);
  Plan plan;
  if (r.has("name")) {
    plan.name = r.get_string("name");
    if (plan.name.empty()) r.fail("name", "must not be empty (leave it out for an unnamed plan)");
  }
  plan.model = inline_or_named<ModelSpec>(r, "model", "model", model_from_json,
                                         [&](const std::string& n, const std::string& f) { return profiles.model(n, f); });
  plan.cluster = inline_or_named<ClusterSpec>(
      r, "cluster", "cluster", cluster_from_json,
      [&](const std::string& n, const std::string& f) { return profiles.cluster(n, f); });
  if (r.has("gpu")) {
    plan.gpu = inline_or_named<GpuSpec>(r, "gpu", "gpu", gpu_from_json,
                                       [&](const std::string& n, const std::string& f) { return profiles.gpu(n, f); });
  } else {
    plan.gpu = profiles.gpu(plan.cluster.gpu, fmt::format("{}: /cluster/gpu", where));
  }
  plan.num_gpus = r.get_int("num_gpus", 1, kMaxMeshGpus);
  JsonReader par = r.object("parallel");
  const bool microbatches_given = par.has("num_microbatches");
  plan.parallel = parallel_from_json(par);
  par.finish();
  JsonReader tr = r.object("training");
  plan.training = training_from_json(tr);
  tr.finish();
  // Without num_microbatches: the global batch over dp x micro_batch, as the flags derive it (when that divides;
  // otherwise the batch check names the mismatch).
  const int64_t m = microbatches_per_step(plan.training.global_batch, plan.parallel.dp, plan.parallel.micro_batch);
  if (!microbatches_given && m > 0) plan.parallel.num_microbatches = m;
  r.finish();
  check_plan_inputs(plan, where);
  return plan;
}

Plan plan_from_text(std::string_view text, const ProfileSet& profiles, const std::string& where) {
  return plan_from_json(parse_json_text(text, where), profiles, where);
}

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json j = {{"parplan_plan", kPlanFormatVersion},
                      {"model", to_json(plan.model)},
                      {"gpu", to_json(plan.gpu)},
                      {"cluster", to_json(plan.cluster)},
                      {"num_gpus", plan.num_gpus},
                      {"parallel", to_json(plan.parallel)},
                      {"training", to_json(plan.training)}};
  if (!plan.name.empty()) j["name"] = plan.name;
  return j;
}

void check_plan_inputs(const Plan& plan, const std::string& where) {
  auto bad = [&](std::string_view path, std::string_view what) {
    throw InputError(fmt::format("{}: {}: {}", where, path, what));
  };
  if (plan.gpu.memory_bytes <= 0) bad("/gpu/memory_GiB", "the GPU has no memory");
  if (!(plan.gpu.hbm_bandwidth_Bps > 0)) bad("/gpu/hbm_bandwidth_GBps", "must be positive");
  if (plan.training.seq_len == 0 && plan.model.seq_len <= 0) bad("/training/seq_len", "must be positive");
  if (plan.parallel.gpus() > kMaxMeshGpus) {
    bad("/parallel", fmt::format("dp*tp*pp*cp exceeds {} GPUs", kMaxMeshGpus));
  }
  // Tokens per microbatch bound the cost model's 64-bit token counts (x top_k x ep for MoE routing).
  const double tokens = static_cast<double>(plan.parallel.micro_batch) * static_cast<double>(plan.seq_len());
  if (tokens > 2147483648.0) {
    bad("/parallel/micro_batch", fmt::format("micro_batch {} x seq {} = {:.3g} tokens per microbatch is absurd "
                                             "(limit 2^31)", plan.parallel.micro_batch, plan.seq_len(), tokens));
  }
}

}  // namespace parplan
