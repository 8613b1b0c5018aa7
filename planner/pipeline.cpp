// Pipeline closed forms (formulas and sources in pipeline.hpp).
#include "planner/pipeline.hpp"

#include <algorithm>

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

double one_f_one_b_step_s(int64_t m, std::span<const StageMicrobatchTime> stages) {
  const auto p = static_cast<int64_t>(stages.size());
  const double md = static_cast<double>(m);
  double down = 0;
  for (const StageMicrobatchTime& t : stages) down += t.total();
  double up = 0, step = 0;
  for (int64_t k = 0; k < p; ++k) {
    const StageMicrobatchTime& t = stages[static_cast<size_t>(k)];
    const double tk = t.total();
    down -= tk;
    const double n = static_cast<double>(p - 1 - k);
    const double f = t.forward_s + 0.5 * t.p2p_s, b = t.backward_input_s + t.backward_weight_s + 0.5 * t.p2p_s;
    step = std::max(step, up + md * tk + std::max(0.0, down - n * f) + std::max(0.0, down - n * b));
    up += tk;
  }
  return step;
}

double p2p_sends_per_microbatch(int64_t i, int64_t p, int64_t v) {
  if (p <= 1) return 0.0;
  return 2.0 * static_cast<double>(v) - (i == 0 ? 1.0 : 0.0) - (i == p - 1 ? 1.0 : 0.0);
}

double p2p_fill_drain_s(int64_t p, int64_t v, double p2p_s) { return 2.0 * static_cast<double>(p * v - 1) * p2p_s; }

PipelineTime pipeline_time(Schedule s, int64_t m, int64_t v, std::span<const StageMicrobatchTime> stages) {
  PipelineTime r;
  double t_max = 0, sum = 0, u_max = 0, u_sum = 0, fb_max = 0, fb_sum = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const double t = stages[i].total();
    sum += t;
    if (t > t_max) {
      t_max = t;
      r.slowest_stage = static_cast<int64_t>(i);
    }
    const double u = std::max(0.0, stages[i].forward_s + stages[i].backward_input_s - stages[i].backward_weight_s) +
                     stages[i].p2p_s;
    u_sum += u;
    u_max = std::max(u_max, u);
    const double fb = stages[i].forward_s + stages[i].backward_input_s + stages[i].p2p_s;
    fb_sum += fb;
    fb_max = std::max(fb_max, fb);
  }
  const auto p = static_cast<int64_t>(stages.size());
  const double md = static_cast<double>(m);
  r.busy_s = md * t_max;
  switch (s) {
    case Schedule::gpipe:
      r.step_s = r.busy_s + (sum - t_max);
      break;
    case Schedule::one_f_one_b:
      r.step_s = m >= p ? one_f_one_b_step_s(m, stages) : r.busy_s + (sum - t_max);
      break;
    case Schedule::interleaved:
      r.step_s = r.busy_s + (sum - t_max) / static_cast<double>(v);
      break;
    case Schedule::zero_bubble:
      // m < p: every W but the first stage's last fills an idle slot, so the step is 1F1B's over F + B, then one W.
      r.step_s = m >= p || stages.empty() ? r.busy_s + (u_sum - u_max)
                                          : md * fb_max + (fb_sum - fb_max) + stages[0].backward_weight_s;
      break;
  }
  r.bubble_s = r.step_s - r.busy_s;
  return r;
}

}  // namespace parplan
