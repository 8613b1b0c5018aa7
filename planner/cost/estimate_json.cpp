// Estimate JSON (see estimate_json.hpp and docs/json-schema.md).
#include "planner/cost/estimate_json.hpp"

#include <algorithm>
#include <string>

#include "planner/spec/plan_json.hpp"

namespace parplan {

nlohmann::json estimate_to_json(const Plan& plan, const Estimate& e) {
  nlohmann::json stages = nlohmann::json::array();
  for (size_t i = 0; i < e.memory.size(); ++i) {
    const StageMemory& m = e.memory[i];
    const StageTime& t = e.stages[i];
    stages.push_back({{"stage", m.stage},
                      {"layers", m.layers},
                      {"in_flight_chunks", m.in_flight_chunks},
                      {"params", m.params},
                      {"memory_bytes",
                       {{"weights", m.weights},
                        {"gradients", m.grads},
                        {"optimizer", m.optimizer},
                        {"activations", m.activations},
                        {"recompute_working_set", m.recompute_working_set},
                        {"zero3_buffers", m.zero3_buffers},
                        {"workspace", m.workspace},
                        {"comm_buffers", m.comm_buffers},
                        {"cuda_context", m.cuda_context},
                        {"fragmentation", m.fragmentation},
                        {"total", m.total}}},
                      {"time_per_microbatch_s",
                       {{"forward", t.forward_s},
                        {"backward_input", t.backward_input_s},
                        {"backward_weight", t.backward_weight_s},
                        {"recompute", t.recompute_s},
                        {"tp_comm", t.tp_comm_s},
                        {"cp_comm", t.cp_comm_s},
                        {"ep_comm", t.ep_comm_s},
                        {"zero3_comm", t.zero3_comm_s},
                        {"offload", t.offload_s},
                        {"pp_comm", t.p2p_s},
                        {"total", t.per_microbatch_s}}}});
  }
  const TimeBreakdown& tb = e.time;
  nlohmann::json seconds = nlohmann::json::object(), fractions = nlohmann::json::object();
  const auto terms = time_terms(tb);
  for (size_t k = 0; k < terms.size(); ++k) {
    seconds[std::string(kTimeTerms[k])] = terms[k];
    fractions[std::string(kTimeTerms[k])] = tb.step_s > 0 ? terms[k] / tb.step_s : 0.0;
  }
  seconds["dp_comm_total"] = tb.dp_comm_total_s;  // exposed + hidden: not a term of the step
  nlohmann::json j = {{"parplan_estimate", kPlanFormatVersion},
          {"plan", plan_to_json(plan)},
          {"memory",
           {{"peak_bytes", e.peak_memory_bytes},
            {"peak_stage", e.peak_stage},
            {"capacity_bytes", e.capacity_bytes},
            {"headroom_bytes", e.capacity_bytes - e.peak_memory_bytes},
            {"fits", e.fits}}},
          {"time",
           {{"step_s", tb.step_s},
            {"tokens_per_s", tb.tokens_per_s},
            {"mfu", tb.mfu},
            {"hfu", tb.hfu},
            {"model_flops_per_step", tb.model_flops},
            {"hardware_flops_per_step", tb.hardware_flops},
            {"slowest_stage", tb.slowest_stage},
            {"seconds", seconds},
            {"fractions", fractions}}},
          {"stages", stages}};
  if (e.dp.replica_group > 1) {  // HSDP: the deciding stage's replica all-reduce, a part of seconds.dp_comm_total
    j["time"]["hsdp"] = {{"shard_group", e.dp.group},
                         {"replica_group", e.dp.replica_group},
                         {"replica_all_reduce_bytes", e.dp.replica_bytes},
                         {"replica_all_reduce_s", e.dp.replica_reduce_s},
                         {"per_microbatch", e.dp.per_microbatch}};
  }
  if (plan.parallel.offloads_any()) {
    // The offloaded states in host memory and the optimizer step's parts (they add up to seconds.optimizer).
    for (size_t i = 0; i < e.memory.size(); ++i) {
      j["stages"][i]["host_memory_bytes"] = e.memory[i].host;
      if (plan.parallel.offloads_activations()) {
        j["stages"][i]["offloaded_activation_bytes"] = e.memory[i].offloaded_activations;  // part of host_memory_bytes
      }
    }
    double host = 0;
    for (const StageMemory& m : e.memory) host = std::max(host, m.host);
    j["memory"]["host_bytes_per_gpu"] = host;  // the most any stage's GPU offloads
    j["memory"]["host_bytes_per_node"] = e.host_bytes_per_node;
    j["memory"]["host_capacity_bytes"] = static_cast<double>(plan.cluster.host_memory_bytes);
    j["memory"]["host_fits"] = e.host_fits;
    const OffloadStepTime& o = tb.offload;
    j["time"]["offload"] = {{"gradient_to_host_bytes", o.grad_bytes},
                            {"params_to_gpu_bytes", o.param_bytes},
                            {"gradient_to_host_s", o.grad_d2h_s},
                            {"cpu_optimizer_s", o.cpu_optimizer_s},
                            {"params_to_gpu_s", o.param_h2d_s}};
  }
  return j;
}

}  // namespace parplan
