// Pipeline op orders and their dependencies (see schedule.hpp for the definitions and sources).
#include "simulator/schedule.hpp"

#include <algorithm>
#include <limits>
#include <fmt/core.h>

#include "planner/spec/error.hpp"
#include "planner/cost/pipeline.hpp"

namespace parplan::sim {
namespace {

using Order = std::vector<PipeOp>;

PipeOp op(OpKind k, int64_t mb, int64_t chunk) {
  return {k, static_cast<int32_t>(mb), static_cast<int32_t>(chunk)};
}

Order gpipe(int64_t m) {
  Order o;
  o.reserve(static_cast<size_t>(2 * m));
  for (int64_t j = 0; j < m; ++j) o.push_back(op(OpKind::forward, j, 0));
  for (int64_t j = 0; j < m; ++j) o.push_back(op(OpKind::backward, j, 0));
  return o;
}

Order one_f_one_b(int64_t p, int64_t m, int64_t i) {
  Order o;
  o.reserve(static_cast<size_t>(2 * m));
  const int64_t warm = std::min(p - i - 1, m);
  int64_t b = 0;
  for (int64_t f = 0; f < warm; ++f) o.push_back(op(OpKind::forward, f, 0));
  for (int64_t f = warm; f < m; ++f) {
    o.push_back(op(OpKind::forward, f, 0));
    o.push_back(op(OpKind::backward, b++, 0));
  }
  while (b < m) o.push_back(op(OpKind::backward, b++, 0));
  return o;
}

Order zb_h1(int64_t p, int64_t m, int64_t i) {
  Order o;
  o.reserve(static_cast<size_t>(3 * m));
  const int64_t warm = std::min(p - i - 1, m);
  const int64_t defer = i;  // W passes stage i keeps pending before it runs one
  int64_t b = 0, w = 0;
  auto backward = [&] {
    o.push_back(op(OpKind::backward_input, b++, 0));
    if (b - w > defer) o.push_back(op(OpKind::backward_weight, w++, 0));
  };
  for (int64_t f = 0; f < warm; ++f) o.push_back(op(OpKind::forward, f, 0));
  for (int64_t f = warm; f < m; ++f) {
    o.push_back(op(OpKind::forward, f, 0));
    backward();
  }
  while (b < m) backward();
  while (w < m) o.push_back(op(OpKind::backward_weight, w++, 0));
  return o;
}

// ZB-2p: every stage's order at once, from a list schedule with unit op times (the paper's handcrafted schedules take
// T_F = T_B = T_W): at each tick a free stage runs its next B_input if its gradient has arrived, else its next F if its
// input has arrived and fewer than 2p - 1 microbatches await their W, else a pending W. Ties cannot arise: a stage runs
// one op per tick and an op finished at tick t is seen from t + 1 on. With T_F = T_B = T_W every stage is then busy
// from its first op to its last (for m >= 2p - 1: ZB-H2's parallelogram, Qi et al. 2023 Fig. 3).
std::vector<Order> zb_2p(int64_t p, int64_t m) {
  const auto ps = static_cast<size_t>(p);
  const int64_t limit = 2 * p - 1;
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  // Tick at which stage i's F / B_input of microbatch j is done (kNever: not yet run), next op counts per stage.
  std::vector<std::vector<int64_t>> f_done(ps, std::vector<int64_t>(static_cast<size_t>(m), kNever));
  std::vector<std::vector<int64_t>> b_done = f_done;
  std::vector<int64_t> nf(ps, 0), nb(ps, 0), nw(ps, 0);
  std::vector<Order> orders(ps);
  for (Order& o : orders) o.reserve(static_cast<size_t>(3 * m));
  int64_t left = 3 * p * m;
  for (int64_t tick = 0; left > 0; ++tick) {
    for (size_t i = 0; i < ps; ++i) {
      const auto j_b = static_cast<size_t>(nb[i]), j_f = static_cast<size_t>(nf[i]);
      if (nb[i] < m && (i + 1 < ps ? b_done[i + 1][j_b] : f_done[i][j_b]) < tick + 1) {
        b_done[i][j_b] = tick + 1;
        orders[i].push_back(op(OpKind::backward_input, nb[i]++, 0));
      } else if (nf[i] < m && nf[i] - nw[i] < limit && (i == 0 || f_done[i - 1][j_f] < tick + 1)) {
        f_done[i][j_f] = tick + 1;
        orders[i].push_back(op(OpKind::forward, nf[i]++, 0));
      } else if (nw[i] < nb[i]) {
        orders[i].push_back(op(OpKind::backward_weight, nw[i]++, 0));
      } else {
        continue;
      }
      --left;
    }
  }
  return orders;
}

// One stage's planner chunk ops (planner/cost/pipeline.hpp) as PipeOps.
Order stage_ops(const std::vector<ChunkOp>& stage) {
  Order o;
  o.reserve(stage.size());
  for (const ChunkOp& x : stage) {
    const OpKind k = x.kind == ChunkOp::Kind::forward          ? OpKind::forward
                     : x.kind == ChunkOp::Kind::backward_input ? OpKind::backward_input
                     : x.kind == ChunkOp::Kind::backward       ? OpKind::backward
                                                               : OpKind::backward_weight;
    o.push_back(op(k, x.microbatch, x.chunk));
  }
  return o;
}

// The planner's chunk ops as PipeOps, stage by stage.
std::vector<Order> pipe_ops(const std::vector<std::vector<ChunkOp>>& stages) {
  std::vector<Order> orders;
  orders.reserve(stages.size());
  for (const std::vector<ChunkOp>& stage : stages) orders.push_back(stage_ops(stage));
  return orders;
}

// ZB-V: planner/cost/pipeline.hpp's order (its one definition, which the closed form times) over the stages' op
// times (unit times where none are given).
std::vector<Order> zb_v(int64_t p, int64_t m, std::span<const ZbVOpTimes> times) {
  const std::vector<ZbVOpTimes> unit(times.empty() ? static_cast<size_t>(p) : 0);
  return pipe_ops(zb_v_order(m, times.empty() ? unit : times).order);
}

// DualPipeV: planner/cost/pipeline.hpp's order (its one definition, which the estimate times).
std::vector<Order> dualpipe_v(int64_t p, int64_t m) { return pipe_ops(dualpipe_v_order(p, m)); }

// Megatron-LM's interleaved 1F1B: planner/cost/pipeline.hpp's order (its one definition, which the estimate times
// for chunks of their own sizes).
Order interleaved(int64_t p, int64_t m, int64_t v, int64_t i) { return stage_ops(interleaved_order(p, m, v, i)); }

}  // namespace

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::forward: return "F";
    case OpKind::backward: return "B";
    case OpKind::backward_input: return "B";
    case OpKind::backward_weight: return "W";
  }
  return "?";
}

PipelineSchedule make_schedule(Schedule s, int64_t p, int64_t m, int64_t v, std::span<const ZbVOpTimes> zb_v_times) {
  if (p < 1 || m < 1 || v < 1) {
    throw InputError(fmt::format("schedule: stages ({}), microbatches ({}) and chunks ({}) must be >= 1", p, m, v));
  }
  if (p > (int64_t{1} << 20) || m > (int64_t{1} << 24) || v > 1024 || p * m * v > (int64_t{1} << 28)) {
    throw InputError(fmt::format("schedule: {} stages x {} microbatches x {} chunks is too large to simulate", p, m, v));
  }
  if (v_shaped(s) && v != 2) {
    throw InputError(fmt::format("schedule: {} has 2 chunks per stage (its V), not {}", to_string(s), v));
  }
  if (s == Schedule::dualpipe_v && m < 2 * p) {
    throw InputError(fmt::format("schedule: dualpipe-v needs at least 2 x {} stages = {} microbatches, not {}", p,
                                 2 * p, m));
  }
  if (s != Schedule::interleaved && !v_shaped(s) && v != 1) {
    throw InputError(fmt::format("schedule: {} has one chunk per stage (got {} chunks); use interleaved", to_string(s), v));
  }
  if (s == Schedule::interleaved && m % p != 0) {
    throw InputError(fmt::format("schedule: interleaved 1F1B needs the microbatch count ({}) to be a multiple of the "
                                 "pipeline stages ({})", m, p));
  }
  if (!zb_v_times.empty() && (s != Schedule::zb_v || static_cast<int64_t>(zb_v_times.size()) != p)) {
    throw InputError(fmt::format("schedule: ZB-V op times for {} stages given to {} with {} stages", zb_v_times.size(),
                                 to_string(s), p));
  }
  PipelineSchedule r;
  r.schedule = s;
  r.stages = p;
  r.microbatches = m;
  r.chunks = v;
  r.order.resize(static_cast<size_t>(p));
  if (s == Schedule::zb_2p || v_shaped(s)) {
    r.order = s == Schedule::zb_2p ? zb_2p(p, m) : s == Schedule::zb_v ? zb_v(p, m, zb_v_times) : dualpipe_v(p, m);
    return r;
  }
  for (int64_t i = 0; i < p; ++i) {
    Order& o = r.order[static_cast<size_t>(i)];
    switch (s) {
      case Schedule::gpipe: o = gpipe(m); break;
      case Schedule::one_f_one_b: o = one_f_one_b(p, m, i); break;
      case Schedule::interleaved: o = interleaved(p, m, v, i); break;
      case Schedule::zero_bubble: o = zb_h1(p, m, i); break;
      case Schedule::zb_2p:
      case Schedule::zb_v:
      case Schedule::dualpipe_v: break;  // all stages at once, above
    }
  }
  return r;
}

PipelineSchedule make_schedule(const Plan& plan, std::span<const ZbVOpTimes> zb_v_times) {
  const ParallelConfig& pc = plan.parallel;
  return make_schedule(pc.schedule, pc.pp, pc.num_microbatches, pc.chunks_per_stage(), zb_v_times);
}

CrossDep cross_stage_dependency(const PipelineSchedule& s, int64_t stage, const PipeOp& o) {
  CrossDep d;
  const int64_t vs = s.virtual_stage(stage, o.chunk), last = s.virtual_stages() - 1;
  auto at = [&](int64_t v, OpKind k) {
    d.exists = true;
    d.stage = s.stage_of(v);
    d.op = op(k, o.microbatch, s.chunk_of(v));
  };
  switch (o.kind) {
    case OpKind::forward:
      if (vs > 0) at(vs - 1, OpKind::forward);
      break;
    case OpKind::backward:
    case OpKind::backward_input:
      if (vs < last) at(vs + 1, o.kind);
      else at(vs, OpKind::forward);
      break;
    case OpKind::backward_weight:
      at(vs, OpKind::backward_input);
      break;
  }
  return d;
}

LiveActivations live_activations(const PipelineSchedule& s) {
  LiveActivations r;
  r.live.resize(static_cast<size_t>(s.stages));
  r.peak.assign(static_cast<size_t>(s.stages), 0);
  r.peak_until_weight_grad.assign(static_cast<size_t>(s.stages), 0);
  for (size_t i = 0; i < r.live.size(); ++i) {
    int32_t live = 0, pending = 0;
    auto& out = r.live[i];
    out.reserve(s.order[i].size());
    for (const PipeOp& o : s.order[i]) {
      switch (o.kind) {
        case OpKind::forward: ++live; ++pending; break;
        case OpKind::backward: --live; --pending; break;
        case OpKind::backward_input: --live; break;
        case OpKind::backward_weight: --pending; break;
      }
      r.peak[i] = std::max<int64_t>(r.peak[i], live);
      r.peak_until_weight_grad[i] = std::max<int64_t>(r.peak_until_weight_grad[i], pending);
      out.push_back(live);
    }
  }
  return r;
}

}  // namespace parplan::sim
