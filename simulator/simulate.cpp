// simulate(): plan -> costs -> task graph -> engine -> timeline and summary (see simulate.hpp).
#include "simulator/simulate.hpp"

#include <algorithm>
#include <fmt/core.h>
#include <utility>

#include "planner/cost/cost_model.hpp"
#include "planner/spec/error.hpp"
#include "simulator/costs.hpp"

namespace parplan::sim {
namespace {

struct MemoryModel {
  std::vector<int64_t> in_flight;  // planner count per stage
  std::vector<double> bytes;       // planner activation bytes per stage
};

// The task graph takes about 230 bytes per task (measured: 175B, pp 96, 100,000 microbatches: 6.4 GB). Above this
// many tasks a step is refused before anything is built, rather than exhausting memory.
constexpr int64_t kMaxTasks = int64_t{1} << 24;
// A recorded timeline (trace, SVG, ASCII chart) is kept to about a million tasks: its Chrome trace takes some 260
// bytes per task (measured: gpt3-1.3b pp 4, 20,000 microbatches, 280,292 tasks, 74 MB), so at most ~280 MB here;
// 200,000 microbatches wrote 1.8 GB, past what a trace viewer loads.
constexpr int64_t kMaxTimelineTasks = int64_t{1} << 20;

// Counted from the costs (count_step_tasks), so a step too large is refused before its schedule is built (that
// alone took 6 GB and 26 s for pp 16 x 16,000,000 microbatches).
void check_graph_size(Schedule kind, int64_t p, int64_t m, int64_t v, const StepCosts& costs, bool timeline) {
  const int64_t limit = timeline ? kMaxTimelineTasks : kMaxTasks;
  if (count_step_tasks(p, m, v, splits_backward(kind), costs, limit) > limit) {
    int64_t buckets = 0;  // the most DP gradient buckets of a stage, for the advice
    for (const StageCosts& sc : costs.stages) buckets = std::max(buckets, sc.dp_buckets);
    throw InputError(fmt::format(
        "simulate: more than {} tasks ({} stages x {} microbatches x {} chunks{}) is too large to {}", limit, p, m, v,
        buckets > 0 ? fmt::format(", {} gradient buckets per stage: a larger --bucket-mb makes fewer", buckets) : "",
        timeline ? "record as a timeline (--trace, --svg, --ascii); without them the summary is computed"
                 : "simulate; estimate gives the closed form"));
  }
}

// Per-stage time by category summed over the stage's tasks (simulated durations), and per stage when its pipeline
// work on the compute stream ends (everything but the optimizer).
struct StageTimes {
  std::vector<StageSummary> stages;
  std::vector<double> pipeline_end;
};
StageTimes sum_task_times(const StepGraph& sg, const TaskTimes& tt, int64_t p) {
  StageTimes out;
  out.stages.resize(static_cast<size_t>(p));
  out.pipeline_end.assign(static_cast<size_t>(p), 0.0);
  for (size_t t = 0; t < sg.info.size(); ++t) {
    const TaskInfo& ti = sg.info[t];
    StageSummary& st = out.stages[static_cast<size_t>(ti.stage)];
    const double dur = tt.end_s[t] - tt.start_s[t];
    const bool on_compute = ti.stream == StreamKind::compute;
    switch (ti.category) {
      case EventCategory::forward:
        if (ti.costs) {
          st.tp_exposed_s += ti.costs->exposed_tp_s;
          st.cp_exposed_s += ti.costs->exposed_cp_s;
          st.ep_exposed_s += ti.costs->exposed_ep_s;
          st.zero3_exposed_s += ti.costs->exposed_zero3_s;
          st.offload_exposed_s += ti.costs->exposed_offload_s;
        }
        [[fallthrough]];
      case EventCategory::backward:
      case EventCategory::backward_input:
      case EventCategory::backward_weight:
      case EventCategory::recompute:
        st.compute_s += dur;
        st.busy_s += dur;
        break;
      case EventCategory::layer_comm:
        st.busy_s += dur;
        break;
      case EventCategory::host_copy:
        if (!on_compute) break;  // activation offload's copies beside the compute
        if (ti.costs) {          // a pass's wait for its activation copies (offload_exposed_s): pipeline work
          st.busy_s += dur;
        } else {  // the offloaded optimizer step's copies: the closed form's optimizer term
          st.optimizer_s += dur;
        }
        break;
      case EventCategory::pp_comm:
        st.pp_total_s += dur;  // as simulated (sharing links), as the trace draws it
        if (on_compute) {
          st.pp_exposed_s += dur;
          st.busy_s += dur;
        }
        break;
      case EventCategory::dp_comm:
        st.dp_total_s += dur;
        break;
      case EventCategory::optimizer:
        if (on_compute) st.optimizer_s += dur;
        break;
      case EventCategory::tp_comm:
      case EventCategory::cp_comm:
      case EventCategory::ep_comm:
      case EventCategory::zero3_gather:  // link occupancy; the exposed part is in the compute ops' layer_comm
        break;
    }
    const bool step_tail =
        ti.category == EventCategory::optimizer || (ti.category == EventCategory::host_copy && !ti.costs);
    if (on_compute && !step_tail) {
      double& end = out.pipeline_end[static_cast<size_t>(ti.stage)];
      end = std::max(end, tt.end_s[t]);
    }
  }
  return out;
}

// When stage `iz`'s step ends (its optimizer, or the exposed part of the parameter all-gather after it), and that
// exposed gather time.
struct StageEnd {
  double end_s = 0, gather_exposed_s = 0;
};
StageEnd stage_end(const StepGraph& sg, const TaskTimes& tt, const StepCosts& costs, size_t iz) {
  const double opt_end = tt.end_s[static_cast<size_t>(sg.optimizer_end_task[iz])];
  double end = opt_end;
  double gather_exposed = 0;
  if (sg.first_gather_task[iz] >= 0) {
    const double first = tt.end_s[static_cast<size_t>(sg.first_gather_task[iz])];
    const double last = tt.end_s[static_cast<size_t>(sg.last_gather_task[iz])];
    if (costs.dp_overlap) {
      // The all-gather of updated parameters overlaps the next step's first forward on this stage.
      double window = 0;
      for (const ChunkCosts& cc : costs.stages[iz].chunks) window += cc.forward_s + cc.forward_comm_s;
      end = std::max(first, last - window);
    } else {
      end = last;
    }
    gather_exposed = end - opt_end;
  }
  return {end, gather_exposed};
}

// Waiting for the other side of the tied-embedding all-reduce is idle time (bubble), not DP communication.
double embedding_wait_s(const StepGraph& sg, const TaskTimes& tt, double pipeline_end, size_t iz) {
  double embedding_wait = 0;
  if (const int32_t emb = sg.embedding_task[iz]; emb >= 0) {
    double ready = pipeline_end;
    if (const int32_t b = sg.embedding_after_bucket[iz]; b >= 0) {
      ready = std::max(ready, tt.end_s[static_cast<size_t>(b)]);
    }
    embedding_wait = std::max(0.0, tt.start_s[static_cast<size_t>(emb)] - ready);
  }
  return embedding_wait;
}

// Stage `iz`'s activation counts (simulated live chunk-microbatches) and bytes (the memory model's per chunk).
void fill_stage_memory(StageSummary& st, const LiveActivations& live, const MemoryModel& mem, size_t iz) {
  st.peak_live_chunks = live.peak[iz];
  st.peak_live_until_weight_grad = live.peak_until_weight_grad[iz];
  // Memory holds a stash until its W (ZB-H1) or full backward: the until-W count is what the model charges.
  st.planner_in_flight_chunks = mem.in_flight.empty() ? live.peak_until_weight_grad[iz] : mem.in_flight[iz];
  const double per_chunk = mem.bytes.empty() ? 1.0
                           : st.planner_in_flight_chunks > 0
                               ? mem.bytes[iz] / static_cast<double>(st.planner_in_flight_chunks)
                               : 0.0;
  st.planner_activation_bytes = mem.bytes.empty() ? static_cast<double>(st.planner_in_flight_chunks) : mem.bytes[iz];
  st.peak_activation_bytes = per_chunk * static_cast<double>(st.peak_live_until_weight_grad);
}

// The step time (the last stage end), each stage's end, exposed DP time and memory, then its exposed comm and bubble.
void close_stages(SimSummary& sum, const PipelineSchedule& s, const StepGraph& sg, const TaskTimes& tt,
                  const StepCosts& costs, const std::vector<double>& pipeline_end, const MemoryModel& mem) {
  const LiveActivations live = live_activations(s);
  for (int64_t i = 0; i < s.stages; ++i) {
    const auto iz = static_cast<size_t>(i);
    StageSummary& st = sum.stages[iz];
    st.stage = i;
    const int32_t opt_task = sg.optimizer_task[iz];
    const StageEnd se = stage_end(sg, tt, costs, iz);
    st.end_s = se.end_s;
    const double embedding_wait = embedding_wait_s(sg, tt, pipeline_end[iz], iz);
    st.dp_exposed_s =
        (tt.start_s[static_cast<size_t>(opt_task)] - pipeline_end[iz]) - embedding_wait + se.gather_exposed_s;
    fill_stage_memory(st, live, mem, iz);
    sum.step_s = std::max(sum.step_s, se.end_s);
  }
  for (StageSummary& st : sum.stages) {
    st.exposed_comm_s = (st.busy_s - st.compute_s) + st.dp_exposed_s;
    st.bubble_s = sum.step_s - st.busy_s - st.dp_exposed_s - st.optimizer_s;
  }
}

// Whole-step fractions: those of the busiest stage (the one the closed form calls slowest). Stages that tie (equal
// layers) differ in the last bits of their summed durations; like the closed form, the first of them is taken.
void critical_stage_fractions(SimSummary& sum) {
  size_t crit = 0;
  for (size_t i = 1; i < sum.stages.size(); ++i) {
    if (sum.stages[i].busy_s > sum.stages[crit].busy_s * (1 + 1e-9)) crit = i;
  }
  sum.critical_stage = static_cast<int64_t>(crit);
  const StageSummary& c = sum.stages[crit];
  const double T = sum.step_s > 0 ? sum.step_s : 1.0;
  sum.compute = c.compute_s / T;
  sum.bubble = c.bubble_s / T;
  sum.tp_comm = c.tp_exposed_s / T;
  sum.cp_comm = c.cp_exposed_s / T;
  sum.ep_comm = c.ep_exposed_s / T;
  sum.zero3_comm = c.zero3_exposed_s / T;
  sum.offload_exposed = c.offload_exposed_s / T;
  sum.pp_comm = c.pp_exposed_s / T;
  sum.dp_comm_exposed = c.dp_exposed_s / T;
  sum.dp_comm_total = c.dp_total_s / T;
  sum.optimizer = c.optimizer_s / T;
}

// Every task as an event on its stage's stream, each stream sorted by start.
Timeline timeline_events(const StepGraph& sg, const TaskTimes& tt, int64_t p, double step_s) {
  Timeline tl;
  tl.source = "simulated";
  tl.step_s = step_s;
  tl.tracks.resize(static_cast<size_t>(p));
  for (int64_t i = 0; i < p; ++i) {
    TimelineTrack& tr = tl.tracks[static_cast<size_t>(i)];
    tr.stage = i;
    tr.rank = i;  // filled with the world rank by simulate(plan) below
    tr.streams.resize(kNumStreamKinds);
    for (int k = 0; k < kNumStreamKinds; ++k) tr.streams[static_cast<size_t>(k)].name = to_string(static_cast<StreamKind>(k));
  }
  for (size_t t = 0; t < sg.info.size(); ++t) {
    const TaskInfo& ti = sg.info[t];
    TimelineEvent ev;
    ev.category = ti.category;
    ev.microbatch = ti.microbatch;
    ev.chunk = ti.chunk;
    ev.start_s = tt.start_s[t];
    ev.end_s = tt.end_s[t];
    ev.bytes = ti.bytes;
    ev.flow = ti.flow;
    ev.peer_stage = ti.peer_stage;
    tl.tracks[static_cast<size_t>(ti.stage)].streams[static_cast<size_t>(ti.stream)].events.push_back(ev);
  }
  for (TimelineTrack& tr : tl.tracks) {
    for (TimelineStream& st : tr.streams) {
      std::stable_sort(st.events.begin(), st.events.end(),
                       [](const TimelineEvent& a, const TimelineEvent& b) { return a.start_s < b.start_s; });
    }
    // The host and ep streams (the last kinds) only where activation offload or a MoE plan's all-to-alls put events
    // on them: other traces keep their streams.
    for (const StreamKind k : {StreamKind::ep, StreamKind::host}) {
      const auto at = tr.streams.begin() + static_cast<int>(k);
      if (at->events.empty()) tr.streams.erase(at);
    }
  }
  return tl;
}

// Stored activations: a chunk-microbatch is allocated when its forward starts and freed when its backward ends;
// with split schedules (ZB-H1) the W pass still reads what the forward stored, so it is freed when W ends, as the
// memory model counts it. Bytes per chunk-microbatch are the memory model's (peak_activation_bytes is the
// until-W peak count times them).
void add_memory_curve(TimelineTrack& tr, const PipelineSchedule& s, const StageSummary& st) {
  const double per_chunk = st.peak_live_until_weight_grad > 0
                               ? st.peak_activation_bytes / static_cast<double>(st.peak_live_until_weight_grad)
                               : 0.0;
  const EventCategory frees =
      splits_backward(s.schedule) ? EventCategory::backward_weight : EventCategory::backward;
  std::vector<std::pair<double, int>> deltas;
  std::vector<double> freed(static_cast<size_t>(s.microbatches * s.chunks), -1.0);  // an op split into
  for (const TimelineEvent& ev : tr.streams[0].events) {                               // pieces frees at its end
    if (ev.microbatch < 0) continue;
    const auto key = static_cast<size_t>(ev.microbatch * s.chunks + ev.chunk);
    if (ev.category == EventCategory::forward) deltas.emplace_back(ev.start_s, +1);
    if (ev.category == frees) freed[key] = std::max(freed[key], ev.end_s);
  }
  for (double t : freed) {
    if (t >= 0) deltas.emplace_back(t, -1);
  }
  std::stable_sort(deltas.begin(), deltas.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;
  });
  double live_n = 0;
  tr.memory.push_back({0.0, 0.0});
  for (const auto& [t, dlt] : deltas) {
    live_n += dlt;
    if (!tr.memory.empty() && tr.memory.back().t_s == t) tr.memory.back().activation_bytes = live_n * per_chunk;
    else tr.memory.push_back({t, live_n * per_chunk});
  }
}

// The graph's size is checked by the callers: simulate() before it builds the schedule, simulate_costs() here.
// Builds and runs the step's task graph, then sums it per stage and, if asked, records it as a timeline.
SimResult run_graph(const PipelineSchedule& s, const StepCosts& costs, const SimOptions& opt, const MemoryModel& mem) {
  const StepGraph sg = build_step_graph(s, costs);
  EngineOptions eo;
  eo.contention = opt.contention;
  const TaskTimes tt = run(sg.graph, eo);
  SimResult r;
  SimSummary& sum = r.summary;
  sum.tasks = static_cast<int64_t>(sg.info.size());
  sum.events = tt.events;
  StageTimes times = sum_task_times(sg, tt, s.stages);
  sum.stages = std::move(times.stages);
  close_stages(sum, s, sg, tt, costs, times.pipeline_end, mem);
  critical_stage_fractions(sum);

  if (!opt.record_timeline) return r;
  r.timeline = timeline_events(sg, tt, s.stages, sum.step_s);
  for (TimelineTrack& tr : r.timeline.tracks) add_memory_curve(tr, s, sum.stages[static_cast<size_t>(tr.stage)]);
  return r;
}

}  // namespace

SimResult simulate_costs(const PipelineSchedule& s, const StepCosts& costs, const SimOptions& opt) {
  check_graph_size(s.schedule, s.stages, s.microbatches, s.chunks, costs, opt.record_timeline);
  return run_graph(s, costs, opt, {});
}

Plan priced_plan(const Plan& input, const SimOptions& opt) {
  Plan plan = input;
  if (opt.bucket_bytes > 0) plan.training.dp_bucket_bytes = opt.bucket_bytes;
  if (!opt.overlap) {
    plan.parallel.overlap_dp_comm = false;
    plan.parallel.overlap_tp_comm = false;
    plan.parallel.micropipeline_tp = false;
    plan.parallel.overlap_cp_comm = false;
    plan.parallel.overlap_p2p_comm = false;
  }
  return plan;
}

namespace {
// The plan as simulate() prices it under `opt`, and its step costs.
struct Priced {
  Plan plan;
  StepCosts costs;
};
Priced priced(const Plan& input, const SimOptions& opt) {
  Priced p{priced_plan(input, opt), {}};
  CostOptions co;
  co.edges_in_owning_chunk = opt.edges_in_owning_chunk;
  co.blocking_p2p = !opt.overlap;
  p.costs = step_costs(p.plan, co);
  return p;
}
}  // namespace

int64_t step_graph_tasks(const Plan& plan, const SimOptions& opt, int64_t limit) {
  const Priced p = priced(plan, opt);
  const ParallelConfig& pc = p.plan.parallel;
  return count_step_tasks(pc.pp, pc.num_microbatches, pc.chunks_per_stage(), splits_backward(pc.schedule),
                          p.costs, limit);
}

SimResult simulate(const Plan& input, const SimOptions& opt) {
  const Priced pr = priced(input, opt);
  const Plan& plan = pr.plan;
  const StepCosts& costs = pr.costs;
  const ParallelConfig& pc = plan.parallel;
  check_graph_size(pc.schedule, pc.pp, pc.num_microbatches, pc.chunks_per_stage(), costs, opt.record_timeline);
  const PipelineSchedule s =
      make_schedule(plan, pc.schedule == Schedule::zb_v ? zb_v_op_times(costs) : std::vector<ZbVOpTimes>{});
  MemoryModel mem;
  const StageMemoryInputs in = stage_memory_inputs(plan);
  for (int64_t i = 0; i < plan.parallel.pp; ++i) {
    const StageMemory sm = stage_memory(plan, i, in);
    mem.in_flight.push_back(sm.in_flight_chunks);
    mem.bytes.push_back(sm.activations);
  }
  SimResult r = run_graph(s, costs, opt, mem);
  const int64_t stride = plan.parallel.tp * plan.parallel.cp * plan.parallel.dp;  // rank of (tp, cp, dp) = 0 per stage
  for (TimelineTrack& tr : r.timeline.tracks) tr.rank = tr.stage * stride;
  return r;
}

}  // namespace parplan::sim
