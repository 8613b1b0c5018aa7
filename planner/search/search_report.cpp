// Rank reasons and the model-state floor (see search_report.hpp).
#include "planner/search/search_report.hpp"

#include <cmath>
#include <fmt/core.h>

#include "planner/cost/model_shape.hpp"
#include "planner/cost/model_states.hpp"

namespace parplan {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct Term {
  const char* name;
  double s;
};

// The step-time terms of a breakdown, in a fixed order.
std::array<Term, 10> terms(const TimeBreakdown& t) {
  return {{{"compute", t.compute_s},
           {"pipeline bubble", t.bubble_s},
           {"TP comm", t.tp_comm_s},
           {"CP comm", t.cp_comm_s},
           {"EP all-to-all", t.ep_comm_s},
           {"PP send/recv", t.pp_comm_s},
           {"DP comm", t.dp_comm_exposed_s},
           {"ZeRO-3 gathers", t.zero3_exposed_s},
           {"host copies", t.offload_exposed_s},
           {"optimizer", t.optimizer_s}}};
}

// The term that grew most against the winner, e.g. "more pipeline bubble (+1.2 s)", and the one that shrank most
// where it offsets a quarter of that or more ("more compute (+0.606 s), less EP all-to-all (-0.6 s)"): the step's
// change is their sum, not the first alone.
std::string biggest_cost(const TimeBreakdown& a, const TimeBreakdown& w) {
  const auto ta = terms(a), tw = terms(w);
  size_t best = 0, least = 0;
  double grow = -1e300, shrink = 1e300;
  for (size_t i = 0; i < ta.size(); ++i) {
    const double change = ta[i].s - tw[i].s;
    if (change > grow) {
      grow = change;
      best = i;
    }
    if (change < shrink) {
      shrink = change;
      least = i;
    }
  }
  if (grow <= 0) return "no single term larger";
  std::string s = fmt::format("more {} (+{:.3g} s)", ta[best].name, grow);
  if (-shrink >= 0.25 * grow) s += fmt::format(", less {} ({:.3g} s)", ta[least].name, shrink);
  return s;
}

std::string memory_delta(const Candidate& c, const Candidate& w) {
  const double d = (w.peak_bytes - c.peak_bytes) / kGiB;
  if (std::fabs(d) < 0.05) return "same memory";
  return d > 0 ? fmt::format("{:.1f} GiB less memory", d) : fmt::format("{:.1f} GiB more memory", -d);
}

}  // namespace

std::string rank_reason(const Candidate& c, const Candidate& w, int64_t rank, Objective o) {
  if (rank == 1) {
    switch (o) {
      case Objective::fastest:
        return "fastest step that fits";
      case Objective::fewest_gpus:
        return fmt::format("fewest GPUs ({}) reaching the throughput, fastest among them", c.num_gpus);
      case Objective::headroom:
        return "most memory headroom";
    }
  }
  const double slower = w.time.step_s > 0 ? c.time.step_s / w.time.step_s - 1.0 : 0.0;
  const std::string speed = slower == 0 ? "same step time"
                                        : fmt::format("{:+.1f}% step time", slower * 100.0);
  switch (o) {
    case Objective::fastest:
      if (slower == 0) return fmt::format("same step time as #1, {}", memory_delta(c, w));
      return fmt::format("{}: {}; {}", speed, biggest_cost(c.time, w.time), memory_delta(c, w));
    case Objective::fewest_gpus:
      if (c.num_gpus != w.num_gpus) return fmt::format("{} GPU{} vs {}", c.num_gpus, c.num_gpus == 1 ? "" : "s", w.num_gpus);
      return fmt::format("{}: {}", speed, biggest_cost(c.time, w.time));
    case Objective::headroom:
      return fmt::format("{:.1f} GiB less headroom; {}", (c.peak_bytes - w.peak_bytes) / kGiB,
                         slower < 0 ? fmt::format("{:.1f}% faster", -slower * 100.0) : speed);
  }
  return "";
}

std::string simulated_rank_reason(const Candidate& c, const Candidate& w, int64_t rank, double sim_c, double sim_w) {
  if (rank == 1) return "fastest simulated step that fits";
  if (!(sim_c > 0) || !(sim_w > 0) || !std::isfinite(sim_c)) return "the simulator could not order its schedule";
  const double slower = sim_c / sim_w - 1.0;
  const double analytical = w.time.step_s > 0 ? c.time.step_s / w.time.step_s - 1.0 : 0.0;
  return fmt::format("{:+.1f}% simulated step ({:+.1f}% analytical); {}", slower * 100.0, analytical * 100.0,
                     memory_delta(c, w));
}

StateFloor state_floor(const SearchRequest& req, int64_t gpus) {
  Plan p;
  p.model = req.model;
  p.gpu = req.gpu;
  p.training = req.training;
  p.parallel.zero_stage = 3;
  // fp8 weights as the search gives a fully sharded candidate (one fp8 copy gathered, none cached beside the bf16).
  p.training.fp8_param_gather = candidate_fp8_weights(req, p.parallel);
  StateFloor f;
  f.params = static_cast<double>(total_params(req.model));
  ModelStateOptions o = model_state_options(p);
  f.fp8_copy_bytes_per_param = static_cast<double>(o.extra_weight_bytes);
  const ModelStateBytes one = model_state_bytes(1.0, 1, o);
  f.bytes_per_param = one.total();
  f.total_bytes = f.params * f.bytes_per_param;
  f.per_gpu_bytes = model_state_bytes(f.params, gpus, o).total();
  f.fixed_bytes_per_gpu = static_cast<double>(req.gpu.cuda_context_bytes + req.gpu.workspace_bytes);
  f.capacity_bytes = static_cast<double>(req.gpu.memory_bytes);
  f.limit_bytes = memory_limit(f.capacity_bytes, req.memory_bytes, req.headroom).limit_bytes;
  f.fits = f.per_gpu_bytes + f.fixed_bytes_per_gpu <= f.limit_bytes;
  const double room = f.limit_bytes - f.fixed_bytes_per_gpu;
  f.min_gpus = room > 0 ? static_cast<int64_t>(std::ceil(f.total_bytes / room)) : 0;
  o.grad_bytes = 2;
  f.bytes_per_param_16bit_grads = model_state_bytes(1.0, 1, o).total();
  f.per_gpu_bytes_16bit_grads = model_state_bytes(f.params, gpus, o).total();
  return f;
}

}  // namespace parplan
