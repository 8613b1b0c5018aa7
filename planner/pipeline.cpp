// Pipeline closed forms (formulas and sources in pipeline.hpp).
#include "planner/pipeline.hpp"

#include <algorithm>
#include <vector>

namespace parplan {

int64_t in_flight_chunks(Schedule s, int64_t p, int64_t m, int64_t v, int64_t stage) {
  switch (s) {
    case Schedule::gpipe:
      return m * v;
    case Schedule::one_f_one_b:
      return std::min(p - stage, m) * v;
    case Schedule::zero_bubble:
      return std::min(p, m) * v;  // p - i awaiting B, up to i more awaiting W (stage i defers its W by i)
    case Schedule::interleaved:
      return std::min(2 * (p - stage - 1) + (v - 1) * p + 1, v * m);
  }
  return m * v;
}

int64_t in_flight_first_chunks(Schedule s, int64_t p, int64_t m, int64_t v, int64_t stage) {
  if (s != Schedule::interleaved || v <= 1) return in_flight_chunks(s, p, m, v, stage) / std::max<int64_t>(v, 1);
  const int64_t total = m * v, group = p * v;
  const int64_t warm = std::min(2 * (p - stage - 1) + (v - 1) * p, total);
  if (warm >= total) return m;  // every forward runs before the first backward
  // Chunk-0 forwards among the first n, chunk-0 backwards (chunk v - 1 - (k mod pv) / p == 0) among the first n.
  const auto fwd0 = [&](int64_t n) { return (n / group) * p + std::min(n % group, p); };
  const auto bwd0 = [&](int64_t n) { return (n / group) * p + std::max<int64_t>(0, n % group - (v - 1) * p); };
  // Steady state j: forward warm + j, then backward j; held after that forward: fwd0(warm + j + 1) - bwd0(j). The
  // backwards run chunk 0 only at j mod pv >= (v - 1) p, so the count cannot fall before j = (v - 1) p, and from there
  // each step frees one and runs at most one more; both counts advance by p per period of pv steps. The maximum is at
  // j = (v - 1) p, or at the last steady step when the schedule ends first.
  const int64_t j = std::min((v - 1) * p, total - warm - 1);
  return fwd0(warm + j + 1) - bwd0(j);
}

namespace {
// Idle time of a stage busy from its first forward to its last backward, waiting for its microbatches' round trip
// `down` through the stages after it (one_f_one_b_step_s's derivation): `warm` forwards before the first backward
// (p-1-k), f and b the per-microbatch forward and backward slots.
double round_trip_stall(double down, int64_t warm, int64_t m, double f, double b) {
  const double n = static_cast<double>(std::min(warm, m - 1));
  // warm >= m - 1: the last forward precedes the first backward, so both waits fall into one gap.
  return warm >= m - 1 ? std::max(0.0, down - n * std::min(f, b))
                       : std::max(0.0, down - n * f) + std::max(0.0, down - n * b);
}
}  // namespace

double one_f_one_b_step_s(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths) {
  const auto p = static_cast<int64_t>(stages.size());
  const double md = static_cast<double>(m);
  double down = 0;
  for (const StageMicrobatchTime& t : stages) down += t.total();
  double up = 0, step = 0;
  for (int64_t k = 0; k < p; ++k) {
    const StageMicrobatchTime& t = stages[static_cast<size_t>(k)];
    const double tk = t.total();
    down -= tk;
    const double f = t.forward_s + 0.5 * t.p2p_s, b = t.backward_input_s + t.backward_weight_s + 0.5 * t.p2p_s;
    const double path = up + md * tk + round_trip_stall(down, p - 1 - k, m, f, b);
    if (!paths.empty()) paths[static_cast<size_t>(k)] = path;
    step = std::max(step, path);
    up += tk;
  }
  return step;
}

double zero_bubble_step_s(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths) {
  const auto p = static_cast<int64_t>(stages.size());
  const double md = static_cast<double>(m);
  const auto round = [](const StageMicrobatchTime& t) { return t.forward_s + t.backward_input_s + t.p2p_s; };
  double down = 0;
  for (const StageMicrobatchTime& t : stages) down += round(t);
  double up = 0, step = 0;
  const double w0 = stages.empty() ? 0.0 : stages[0].backward_weight_s;
  for (int64_t k = 0; k < p; ++k) {
    const StageMicrobatchTime& t = stages[static_cast<size_t>(k)];
    down -= round(t);
    const double f = t.forward_s + 0.5 * t.p2p_s, b = t.backward_input_s + t.backward_weight_s + 0.5 * t.p2p_s;
    // Stage 0's last W against stage k's trailing ones, as one difference: exactly 0 at k = 0 (so ZB-H1 at pp 1 is
    // exactly m t, as 1F1B).
    const double trailing = w0 - static_cast<double>(std::min(k + 1, m)) * t.backward_weight_s;
    const double path = up + md * t.total() + trailing + round_trip_stall(down, p - 1 - k, m, f, b);
    if (!paths.empty()) paths[static_cast<size_t>(k)] = path;
    step = std::max(step, path);
    up += round(t);
  }
  return step;
}

double interleaved_step_s(int64_t m, int64_t v, std::span<const StageMicrobatchTime> stages, std::span<double> paths) {
  const auto p = static_cast<int64_t>(stages.size());
  const double md = static_cast<double>(m), w = static_cast<double>(v);
  // Forward chunks after F(0, v-1) until B(0, v-1) (Megatron-LM's warm-up 2 (p-k-1) + (v-1) p, less the (v-1) p
  // before it); the chunk-op count round_trip_stall's "m" stands for: m v less those same (v-1) p.
  const int64_t chunk_ops = std::max<int64_t>(1, m * v - (v - 1) * p);
  double down = 0;
  for (const StageMicrobatchTime& t : stages) down += t.total() / w;
  double up = 0, step = 0;
  for (int64_t k = 0; k < p; ++k) {
    const StageMicrobatchTime& t = stages[static_cast<size_t>(k)];
    down -= t.total() / w;
    const double f = (t.forward_s + 0.5 * t.p2p_s) / w, b = (t.total() - t.forward_s - 0.5 * t.p2p_s) / w;
    const double path = up + md * t.total() + round_trip_stall(down, 2 * (p - 1 - k), chunk_ops, f, b);
    if (!paths.empty()) paths[static_cast<size_t>(k)] = path;
    step = std::max(step, path);
    up += t.total() / w;
  }
  return step;
}

double p2p_sends_per_microbatch(int64_t i, int64_t p, int64_t v) {
  if (p <= 1) return 0.0;
  return 2.0 * static_cast<double>(v) - (i == 0 ? 1.0 : 0.0) - (i == p - 1 ? 1.0 : 0.0);
}

double p2p_fill_drain_s(int64_t p, int64_t v, double p2p_s) { return 2.0 * static_cast<double>(p * v - 1) * p2p_s; }

PipelineTime pipeline_time(Schedule s, int64_t m, int64_t v, std::span<const StageMicrobatchTime> stages,
                           std::span<double> lead) {
  PipelineTime r;
  const size_t p = stages.size();
  if (p == 0) return r;
  std::vector<double> own;  // callers that want no leads (tests) still need the paths
  if (lead.empty()) {
    own.resize(p);
    lead = own;
  }
  const double md = static_cast<double>(m);
  const bool zb = s == Schedule::zero_bubble;
  const double w0 = stages[0].backward_weight_s;
  // Forward slot of a stage (F and half its sends) and its op on the backward chain (B, ZB-H1: B_input, and the
  // other half).
  const auto fwd = [](const StageMicrobatchTime& t) { return t.forward_s + 0.5 * t.p2p_s; };
  const auto chain_op = [zb, fwd](const StageMicrobatchTime& t) {
    return t.total() - fwd(t) - (zb ? t.backward_weight_s : 0.0);
  };
  double t_max = 0, round_total = 0;
  for (size_t i = 0; i < p; ++i) {
    if (stages[i].total() > t_max) {
      t_max = stages[i].total();
      r.slowest_stage = static_cast<int64_t>(i);
    }
    round_total += fwd(stages[i]) + chain_op(stages[i]);
  }
  r.busy_s = md * t_max;
  // Each path's end at stage 0 into lead.
  if (s == Schedule::one_f_one_b) {
    one_f_one_b_step_s(m, stages, lead);
  } else if (zb) {
    zero_bubble_step_s(m, stages, lead);
  } else if (s == Schedule::gpipe) {
    // Two flow shops: every forward, then every backward (stage p-1's first backward waits for its last forward).
    double f_sum = 0, f_max = 0, b_sum = 0;
    for (const StageMicrobatchTime& t : stages) {
      f_sum += fwd(t);
      f_max = std::max(f_max, fwd(t));
      b_sum += chain_op(t);
    }
    const double forwards = md * f_max + (f_sum - f_max);
    for (size_t k = 0; k < p; ++k) lead[k] = forwards + md * chain_op(stages[k]) + (b_sum - chain_op(stages[k]));
  } else {
    interleaved_step_s(m, v, stages, lead);
  }
  // Stage j's end: the latest path through a stage k >= j, less the chain from j to 0, plus (ZB-H1) its trailing W
  // passes against stage 0's one (a difference, exactly 0 at j = 0).
  // 1F1B, ZB-H1: and no earlier than the last microbatch's forward reaching stage j, its round trip through the
  // stages after j, stage j's own chain op and trailing W passes: the forward leaves a stage k <= j once k has run all
  // its forwards and the backwards its order puts before the last one. (One stage: its path is exact already.)
  // Interleaved: a floor for every stage's end (its paths only pass stage j through the chain of chunk 0): stage k's
  // m v forward chunks and the backward chunks its order runs before its last forward (Megatron-LM's warm-up 2 (p-k-1) + (v-1) p), after the first
  // microbatch's forwards reach it; then the last microbatch's last chunk forward through the stages after k and its
  // backward through all p v virtual stages to stage 0. Uniform stages: m t + (p-1) t / v, the form itself.
  double end_floor = 0;
  if (s == Schedule::interleaved) {
    const double w = static_cast<double>(v);
    double f_sum = 0, b_sum = 0;
    for (const StageMicrobatchTime& t : stages) {
      f_sum += fwd(t);
      b_sum += chain_op(t);
    }
    const int64_t chunk_ops = m * v;
    for (size_t k = 0; k < p; ++k) {
      const int64_t warm = 2 * static_cast<int64_t>(p - k - 1) + (v - 1) * static_cast<int64_t>(p);
      const int64_t before = chunk_ops - 1 - std::min(warm, chunk_ops - 1);
      const double f = fwd(stages[k]), b = chain_op(stages[k]);
      end_floor = std::max(end_floor, (f_sum - f) / w + md * f + static_cast<double>(before) * b / w + b_sum);
    }
  }
  for (size_t k = p - 1; k-- > 0;) lead[k] = std::max(lead[k], lead[k + 1]);
  const double chunks = static_cast<double>(s == Schedule::interleaved ? v : 1);
  const bool forward_bound = (s == Schedule::one_f_one_b || zb) && p > 1;
  double chain = 0, round = round_total, fill = 0, arrive = 0;  // S_j, the round trip after j, forwards before j
  for (size_t j = 0; j < p; ++j) {
    const StageMicrobatchTime& t = stages[j];
    const double f = fwd(t), b = chain_op(t);
    const double weights =  // ZB-H1: the W passes after its last B_input
        zb ? static_cast<double>(std::min<int64_t>(static_cast<int64_t>(j) + 1, m)) * t.backward_weight_s : 0.0;
    double end = std::max(lead[j] - chain + (weights - (zb ? w0 : 0.0)), end_floor - chain);
    chain += b / chunks;
    round -= f + b;
    if (forward_bound) {
      // Stage j's forwards, then (the warm-up ends before its last forward) the backwards before it (ZB-H1: B_input,
      // and the W passes past its defer of j) and the first backward's wait.
      const int64_t warm = static_cast<int64_t>(p - 1 - j), before = m - 1 - std::min(warm, m - 1);
      double done = fill + md * f;
      if (before > 0) {
        const int64_t deferred = zb ? std::max<int64_t>(0, before - static_cast<int64_t>(j)) : 0;
        done += static_cast<double>(before) * b + static_cast<double>(deferred) * t.backward_weight_s +
                std::max(0.0, round - static_cast<double>(warm) * f);
      }
      arrive = j == 0 ? done : std::max(done, arrive + f);
      end = std::max(end, arrive + round + b + weights);
      fill += f;
    }
    lead[j] = end;
    r.step_s = std::max(r.step_s, end);
  }
  for (size_t j = 0; j < p; ++j) lead[j] = r.step_s - lead[j];
  r.bubble_s = r.step_s - r.busy_s;
  return r;
}

}  // namespace parplan
