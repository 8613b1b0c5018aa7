// Pipeline closed forms (formulas and sources in pipeline.hpp).
#include "planner/cost/pipeline.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>
#include <stdexcept>
#include <string>
#include <utility>
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
    case Schedule::zb_2p:
      return std::min(2 * p - 1, m) * v;  // the order's limit (simulator/schedule.cpp), reached on every stage
    case Schedule::zb_v:
      return std::min(p, m) * v;  // 2p chunk-microbatches of half a stage (the order's limit), reached on every stage
    case Schedule::dualpipe_v:
      return std::min(2 * p + 1, m * v);  // dualpipe_v_order: 2p - i of chunk 0 and i + 1 of chunk 1, every stage
    case Schedule::interleaved:
      return std::min(interleaved_warmup(p, v, stage) + 1, v * m);
  }
  return m * v;
}

int64_t in_flight_first_chunks(Schedule s, int64_t p, int64_t m, int64_t v, int64_t stage) {
  if (s == Schedule::dualpipe_v) return std::min(2 * p - stage, m);  // its chunk-0 microbatches at the peak
  if (s != Schedule::interleaved || v <= 1) return in_flight_chunks(s, p, m, v, stage) / std::max<int64_t>(v, 1);
  const int64_t total = m * v, group = p * v;
  const int64_t warm = std::min(interleaved_warmup(p, v, stage), total);
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

double interleaved_peak_bytes(int64_t p, int64_t m, int64_t v, int64_t stage, std::span<const double> chunk_bytes) {
  const int64_t total = m * v, group = p * v;
  if (v < 1 || p < 1 || static_cast<int64_t>(chunk_bytes.size()) != v) return 0.0;
  const int64_t warm = std::min(interleaved_warmup(p, v, stage), total);
  const auto bytes = [&](int64_t c) { return chunk_bytes[static_cast<size_t>(c)]; };
  double live = 0, peak = 0;
  for (int64_t k = 0; k < warm; ++k) peak = std::max(peak, live += bytes((k % group) / p));
  for (int64_t k = 0; k < total - warm; ++k) {  // one forward, one backward; the cool-down only frees
    peak = std::max(peak, live += bytes(((k + warm) % group) / p));
    live -= bytes(v - 1 - (k % group) / p);
  }
  return peak;
}

int64_t interleaved_warmup(int64_t p, int64_t v, int64_t stage) { return 2 * (p - stage - 1) + (v - 1) * p; }

int64_t first_stage_warmup(Schedule s, int64_t p, int64_t m, int64_t v) {
  switch (s) {
    case Schedule::gpipe:
      return m * v;
    case Schedule::one_f_one_b:
    case Schedule::zero_bubble:
      return std::min(p - 1, m);
    case Schedule::interleaved:
      return std::min(interleaved_warmup(p, v, 0), m * v);
    case Schedule::zb_2p:
      return std::min(2 * p - 2, m);
    case Schedule::zb_v:
      return std::min(2 * p - 1, m);
    case Schedule::dualpipe_v:  // the forwards not run in an F & B pair (dualpipe_v_paired_forwards)
      return m * v - dualpipe_v_paired_forwards(p, m, 0);
  }
  return m * v;
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
// ZB-H1: stage k defers its W passes by k microbatches, so its last min(k + 1, m) follow its last B_input.
double trailing_weights_s(int64_t k, int64_t m, const StageMicrobatchTime& t) {
  return static_cast<double>(std::min(k + 1, m)) * t.backward_weight_s;
}
// Interleaved: one chunk of stage i of p (v chunks) with the send after it, for the first chunk (0) and the last
// (v - 1) of a microbatch. A forward sends unless it is the last virtual stage, a backward unless it is the first;
// the per-microbatch slots spread the stage's sends over its chunks, these place them (x: one transfer).
struct ChunkOps {
  double forward_first = 0, backward_first = 0, forward_last = 0, backward_last = 0;
};
ChunkOps chunk_sends(const StageMicrobatchTime& t, int64_t i, int64_t p, int64_t v) {
  // Every stage but the last sends v activations per microbatch, the last v gradients (p2p_sends_per_microbatch).
  // Compute in the chunk's share (uneven chunks: their layer fractions), one transfer per chunk.
  const double inv = 1.0 / static_cast<double>(v);
  const double first = t.first_chunk_share >= 0 ? t.first_chunk_share : inv;
  const double last = t.last_chunk_share >= 0 ? t.last_chunk_share : inv;
  const double x = (i < p - 1 ? t.p2p_forward_s : t.p2p_backward_s) * inv;
  const double f = t.forward_s, b = t.backward_input_s + t.backward_weight_s;
  const int64_t last_vs = p * v - 1, vs_last_chunk = (v - 1) * p + i;
  return {first * f + (i < last_vs ? x : 0.0), first * b + (i > 0 ? x : 0.0),
          last * f + (vs_last_chunk < last_vs ? x : 0.0), last * b + (vs_last_chunk > 0 ? x : 0.0)};
}
}  // namespace

namespace {
// 1F1B's fill as a grid and its drain as a chain (pipeline.hpp), for each stage k with a steady phase (m > p - k),
// W_j = p - 1 - j, F(j) = sum_{r<=j} f_r:
// - fill: stage j's forwards before its first backward (F_0..F_{W_j}) end no earlier than T_F(j) = F(j) +
//   W_j max_{r<=j} f_r (the longest path through the grid of the first W_j + 1 microbatches' forwards on stages 0..j),
//   and microbatch 0's backward leaves stage j at E(j) = max(E(j+1), T_F(j)) + b_j: stage k's last forward ends at
//   X_k = max(T_F(k), E(k+1)) + (m - W_k - 1) t_k (its steady pairs after its first backward);
// - drain: from there the last microbatch's forward runs on through every later stage j, which then runs its last
//   W_j + 1 backwards before the last one returns, R_j = max(F(j) + (W_j + 1) b_j, R_{j+1} + b_j), so stage k ends no
//   earlier than X_k + max((W_k + 1) b_k, R_{k+1} - F(k) + b_k);
// plus the plain chain S_k = sum_{i<k} b_i down to stage 0, as busy_stage_paths' paths end. Each step is a dependency
// of the 1F1B order, so no path exceeds the schedule; with uniform stages it is (m + p - 1) t. Where the stage after
// a busy one is itself busy (a light last stage), the fill and drain wait for those stages' own warm-up forwards and
// cool-down backwards, which busy_stage_paths' round trip D_k leaves out. Raises paths[k] where longer.
void one_f_one_b_chain_paths(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths) {
  const auto p = static_cast<int64_t>(stages.size());
  if (p < 2 || paths.empty()) return;
  // One reverse pass carries E(k+1) and R_{k+1}; it needs F(k) and S_k, recovered from their totals, and the prefix
  // maximum of f, which is not: a forward pass keeps that in a buffer (on the stack for any realistic pipeline).
  double f_all = 0, b_before_all = 0, mf = 0;
  constexpr int64_t kStack = 256;
  std::array<double, kStack> stack_buf;
  std::vector<double> heap_buf;
  double* prefix_max = stack_buf.data();
  if (p > kStack) {
    heap_buf.resize(static_cast<size_t>(p));
    prefix_max = heap_buf.data();
  }
  for (int64_t j = 0; j < p; ++j) {
    const StageMicrobatchTime& t = stages[static_cast<size_t>(j)];
    f_all += t.forward_slot();
    mf = std::max(mf, t.forward_slot());
    prefix_max[j] = mf;
    b_before_all += t.backward_slot();
  }
  constexpr double kNone = -1e300;
  double e = kNone, r = kNone, f_upto = f_all, b_before = b_before_all;  // E(k+1), R_{k+1}, F(k), S_k
  for (int64_t k = p - 1; k >= 0; --k) {
    const StageMicrobatchTime& t = stages[static_cast<size_t>(k)];
    const double f = t.forward_slot(), b = t.backward_slot(), w = static_cast<double>(p - 1 - k);
    b_before -= b;  // S_k
    const double t_f = f_upto + w * prefix_max[k];
    const int64_t steady = m - (p - k);
    if (steady >= 1) {  // else the last forward precedes the first backward: busy_stage_paths' one gap
      const double x = std::max(t_f, e) + static_cast<double>(steady) * t.total();
      const double end = x + std::max((w + 1) * b, r - f_upto + b);
      double& path = paths[static_cast<size_t>(k)];
      path = std::max(path, end + b_before);
    }
    e = std::max(e, t_f) + b;
    r = std::max(f_upto + (w + 1) * b, r + b);
    f_upto -= f;
  }
}

// The 1F1B and ZB-H1 paths (pipeline.hpp): each stage k busy from its first forward to its last backward, the stages
// before it filling and draining with `round` each (1F1B: the whole t; ZB-H1: F + B_input and sends), the round trip
// through the stages after it stalling k, at least through those up to p - m, which run every forward first.
// ZB-H1 adds stage 0's last W against stage k's trailing ones, as one difference: exactly 0 at k = 0 (so ZB-H1 at
// pp 1 is exactly m t, as 1F1B).
double busy_stage_paths(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths, bool zb) {
  if (!zb && paths.empty() && stages.size() > 1) {  // 1F1B's chain paths raise the paths: callers without them too
    std::vector<double> own(stages.size());
    return busy_stage_paths(m, stages, own, zb);
  }
  const auto p = static_cast<int64_t>(stages.size());
  const double md = static_cast<double>(m);
  const auto round = [zb](const StageMicrobatchTime& t) { return zb ? t.total() - t.backward_weight_s : t.total(); };
  const int64_t all_forwards = p - m;  // the last stage whose warm-up runs every forward before its first backward
  double down = 0, upto = 0;
  for (int64_t i = 0; i < p; ++i) {
    const double u = round(stages[static_cast<size_t>(i)]);
    down += u;
    if (i <= all_forwards) upto += u;
  }
  double up = 0, step = 0;
  const double w0 = stages.empty() ? 0.0 : stages[0].backward_weight_s;
  for (int64_t k = 0; k < p; ++k) {
    const StageMicrobatchTime& t = stages[static_cast<size_t>(k)];
    const double u = round(t);
    down -= u;
    const double trailing = zb ? w0 - trailing_weights_s(k, m, t) : 0.0;
    const double stall = std::max(round_trip_stall(down, p - 1 - k, m, t.forward_slot(), t.backward_slot()),
                                  k < all_forwards ? upto - up - u : 0.0);
    const double path = up + md * t.total() + trailing + stall;
    if (!paths.empty()) paths[static_cast<size_t>(k)] = path;
    step = std::max(step, path);
    up += u;
  }
  if (!zb) {
    one_f_one_b_chain_paths(m, stages, paths);
    for (double x : paths) step = std::max(step, x);
  }
  return step;
}
}  // namespace

double one_f_one_b_step_s(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths) {
  return busy_stage_paths(m, stages, paths, false);
}

double zero_bubble_step_s(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths) {
  return busy_stage_paths(m, stages, paths, true);
}

double zb_2p_step_s(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths,
                    bool post_validation) {
  const auto p = static_cast<int64_t>(stages.size());
  const double md = static_cast<double>(m);
  // F, B and W of a stage with the sends after them: F with the activation's, B (input gradient) with the gradient's.
  const auto b_of = [](const StageMicrobatchTime& t) { return t.backward_input_s + t.p2p_backward_s; };
  // x_i = F_i + B_i - 2 W_i, summed over the stages after k (`after`); the forwards before k (`before`).
  double after = 0, chain = 0, u_max = 0;
  for (const StageMicrobatchTime& t : stages) {
    after += t.forward_slot() + b_of(t) - 2.0 * t.backward_weight_s;
    chain += t.forward_slot() + b_of(t);
    u_max = std::max(u_max, t.forward_slot() + b_of(t));
  }
  double before = 0, step = 0;
  for (int64_t k = 0; k < p; ++k) {
    const StageMicrobatchTime& t = stages[static_cast<size_t>(k)];
    after -= t.forward_slot() + b_of(t) - 2.0 * t.backward_weight_s;
    double path = (post_validation ? 0.0 : before) + md * t.total() + after;
    // Few microbatches: the forward and input-gradient chain, every stage's F + B once and the slowest m - 1 more
    // times, then stage 0's last W.
    if (k == 0) path = std::max(path, chain + (md - 1.0) * u_max + t.backward_weight_s);
    if (!paths.empty()) paths[static_cast<size_t>(k)] = path;
    step = std::max(step, path);
    before += t.forward_slot();
  }
  return step;
}

bool zb_v_sends(int64_t p, int64_t stage, int64_t chunk, ChunkOp::Kind kind) {
  const int64_t v = zb_v_virtual_stage(p, stage, chunk);
  switch (kind) {
    case ChunkOp::Kind::forward: return v < 2 * p - 1 && v != p - 1;
    case ChunkOp::Kind::backward_input:
    case ChunkOp::Kind::backward: return v > 0 && v != p;
    case ChunkOp::Kind::backward_weight: return false;
  }
  return false;
}

std::vector<ZbVOpTimes> zb_v_op_times(std::span<const StageMicrobatchTime> stages) {
  const auto p = static_cast<int64_t>(stages.size());
  std::vector<ZbVOpTimes> r(stages.size());
  for (int64_t i = 0; i < p; ++i) {
    const StageMicrobatchTime& t = stages[static_cast<size_t>(i)];
    const double share0 = t.first_chunk_share >= 0 ? t.first_chunk_share : 0.5;
    const double shares[2] = {share0, t.last_chunk_share >= 0 ? t.last_chunk_share : 1.0 - share0};
    const StageMicrobatchTime::ChunkEdge edges[2] = {t.first_chunk_edge, t.last_chunk_edge};
    // The work the shares split: the stage's less its edge layers, which each go to their own chunk whole.
    const double forward = t.forward_s - edges[0].forward_s - edges[1].forward_s;
    const double backward_input = t.backward_input_s - edges[0].backward_input_s - edges[1].backward_input_s;
    const double f_sends = p2p_forward_sends(i, p, 2, Schedule::zb_v);
    const double b_sends = p2p_sends_per_microbatch(i, p, 2, Schedule::zb_v) - f_sends;
    ZbVOpTimes& o = r[static_cast<size_t>(i)];
    for (int64_t c = 0; c < 2; ++c) {
      const auto ci = static_cast<size_t>(c);
      const bool f_out = zb_v_sends(p, i, c, ChunkOp::Kind::forward) && f_sends > 0;
      const bool b_out = zb_v_sends(p, i, c, ChunkOp::Kind::backward_input) && b_sends > 0;
      o.forward[ci] = shares[ci] * forward + edges[ci].forward_s + (f_out ? t.p2p_forward_s / f_sends : 0.0);
      o.backward_input[ci] = shares[ci] * backward_input + edges[ci].backward_input_s +
                             (b_out ? t.p2p_backward_s / b_sends : 0.0);
      o.backward_weight[ci] = shares[ci] * t.backward_weight_s;
    }
  }
  return r;
}

namespace {
// The state of zb_v_order's list schedule: when each virtual stage's F / B of each microbatch ends (infinity: not yet
// run), each stage's next F / B per chunk, pending W's, when it is free and when it decides next.
struct ZbVList {
  static constexpr double kNever = std::numeric_limits<double>::infinity();
  int64_t p, m;
  std::span<const ZbVOpTimes> times;
  std::vector<double> f_end, b_end, free, wake;
  std::vector<std::array<int64_t, 2>> nf, nb;
  // Stage i's pending W's, a ring of 2p (each is in flight, so at most 2p): the k-th B's W at i 2p + k mod 2p.
  std::vector<ChunkOp> pending_w;
  std::vector<int64_t> next_w;  // W's run per stage
  std::vector<std::vector<ChunkOp>> orders;  // recorded only where asked for (the step needs none)
  std::vector<std::array<double, 2>> last_w_start;  // per stage and chunk: when its latest W started
  // Each stage's op time not yet started, and the step it must not exceed: once a stage's end so far plus its work
  // left does, the order's step is known to exceed it (`exceeded`) and the schedule stops.
  std::vector<double> work_left;
  double cutoff = kNever;
  bool exceeded = false;
  using Event = std::pair<double, int64_t>;  // (decision time, stage): the earliest first, then the lower stage
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;

  ZbVList(int64_t stages, int64_t micro, std::span<const ZbVOpTimes> t, bool record, double cutoff_s)
      : p(stages), m(micro), times(t), f_end(static_cast<size_t>(2 * p * m), kNever), b_end(f_end),
        free(static_cast<size_t>(p), 0.0), wake(free), nf(static_cast<size_t>(p), {0, 0}), nb(nf),
        pending_w(static_cast<size_t>(2 * p * p)), next_w(static_cast<size_t>(p), 0),
        orders(record ? static_cast<size_t>(p) : 0), last_w_start(static_cast<size_t>(p), {0.0, 0.0}),
        work_left(static_cast<size_t>(p), 0.0), cutoff(cutoff_s) {
    for (auto& o : orders) o.reserve(static_cast<size_t>(6 * m));
    for (int64_t i = 0; i < p; ++i) {
      work_left[static_cast<size_t>(i)] = static_cast<double>(m) * times[static_cast<size_t>(i)].per_microbatch();
      exceeded = exceeded || work_left[static_cast<size_t>(i)] > cutoff;
      events.push({0.0, i});
    }
  }
  size_t ring(int64_t i, int64_t k) const { return static_cast<size_t>(i * 2 * p + k % (2 * p)); }
  double& at(std::vector<double>& t, int64_t v, int64_t j) {
    return t[static_cast<size_t>(v * m + j)];
  }
  // When stage i's next op of `kind` on chunk c may start by its input (infinity: its producer has not run).
  double input(int64_t i, int64_t c, ChunkOp::Kind kind) {
    const auto ii = static_cast<size_t>(i), ci = static_cast<size_t>(c);
    const int64_t v = zb_v_virtual_stage(p, i, c);
    if (kind == ChunkOp::Kind::forward) return nf[ii][ci] >= m ? kNever : v > 0 ? at(f_end, v - 1, nf[ii][ci]) : 0.0;
    if (nb[ii][ci] >= m) return kNever;
    return v < 2 * p - 1 ? at(b_end, v + 1, nb[ii][ci]) : at(f_end, v, nb[ii][ci]);
  }
  // The stage that consumes the result of virtual stage v's F (forward) or B: it decides again by `end`.
  void notify(int64_t v, bool forward, double end) {
    const int64_t consumer = forward ? v + 1 : v - 1;
    if (consumer < 0 || consumer > 2 * p - 1) return;
    const int64_t s = consumer < p ? consumer : 2 * p - 1 - consumer;
    const auto si = static_cast<size_t>(s);
    const double t = std::max(end, free[si]);
    if (t < wake[si]) events.push({wake[si] = t, s});
  }
  // Whether an input ready at `t` has arrived at `now`. An input ready the instant the stage is free has arrived; with
  // uniform stages such ties are exact in exact arithmetic, so a rounding difference of the op times (the closed
  // form's and the simulator's sums of the same terms differ in the last bit) must not decide them: a relative
  // tolerance of 1e-12 does.
  static bool arrived(double t, double now) { return t <= now + 1e-12 * (1.0 + now); }
  // Stage i decides at `now`: the op it runs, or none (it then waits for its next input).
  std::optional<ChunkOp> pick(int64_t i, double now) {
    const auto ii = static_cast<size_t>(i);
    for (int32_t c : {0, 1}) {  // B: its gradient arrived (the last virtual stage: its own F), chunk 0 first
      if (!arrived(input(i, c, ChunkOp::Kind::backward_input), now)) continue;
      const auto j = static_cast<int32_t>(nb[ii][static_cast<size_t>(c)]++);
      pending_w[ring(i, nb[ii][0] + nb[ii][1] - 1)] = {ChunkOp::Kind::backward_weight, j, c};
      return ChunkOp{ChunkOp::Kind::backward_input, j, c};
    }
    for (int32_t c : {1, 0}) {  // F: its input arrived and the in-flight limit leaves room, chunk 1 first
      if (!room(i, c) || !arrived(input(i, c, ChunkOp::Kind::forward), now)) continue;
      return ChunkOp{ChunkOp::Kind::forward, static_cast<int32_t>(nf[ii][static_cast<size_t>(c)]++), c};
    }
    if (next_w[ii] < nb[ii][0] + nb[ii][1]) return pending_w[ring(i, next_w[ii]++)];  // the oldest pending W
    return std::nullopt;
  }
  // Whether stage i may run an F of chunk c: fewer than 2p chunk-microbatches await their W, and a chunk-0 F takes the
  // last place only if one of the others is not a chunk-0 awaiting its B. Such a one is freed only after the stage's
  // chunk-1 F of the same microbatch (the V comes back through the stage), so 2p of them would wait for each other:
  // with unit times the warm-up never gets there (stage 0's chunk 1 arrives after 2p - 1 forwards), with real ones it
  // could.
  bool room(int64_t i, int64_t c) const {
    const auto ii = static_cast<size_t>(i);
    const int64_t in_flight = nf[ii][0] + nf[ii][1] - next_w[ii];
    const int64_t chunk0_before_b = nf[ii][0] - nb[ii][0];
    return in_flight < 2 * p - 1 || (in_flight == 2 * p - 1 && (c == 1 || chunk0_before_b < in_flight));
  }
  // Runs stage i's decision at `now`; false when it ran nothing.
  bool step(int64_t i, double now) {
    const auto ii = static_cast<size_t>(i);
    const std::optional<ChunkOp> run = pick(i, now);
    if (!run) {  // idle until the next input that lets it run (an F the limit holds waits for a W, after a B)
      double next = std::min(input(i, 0, ChunkOp::Kind::backward_input), input(i, 1, ChunkOp::Kind::backward_input));
      for (int64_t c : {0, 1}) {
        if (room(i, c)) next = std::min(next, input(i, c, ChunkOp::Kind::forward));
      }
      wake[ii] = next;
      if (next < kNever) events.push({next, i});
      return false;
    }
    const auto ci = static_cast<size_t>(run->chunk);
    const int64_t v = zb_v_virtual_stage(p, i, run->chunk);
    const double duration = times[ii].of(run->kind, ci);
    const double end = now + duration;
    work_left[ii] -= duration;
    exceeded = exceeded || end + work_left[ii] > cutoff;
    free[ii] = wake[ii] = end;
    events.push({end, i});
    if (run->kind == ChunkOp::Kind::backward_weight) last_w_start[ii][ci] = now;
    if (!orders.empty()) orders[ii].push_back(*run);
    if (run->kind == ChunkOp::Kind::forward) notify(v, true, at(f_end, v, run->microbatch) = end);
    if (run->kind == ChunkOp::Kind::backward_input) notify(v, false, at(b_end, v, run->microbatch) = end);
    return true;
  }
};

// The order (recorded where asked for) and each stage's end; no ends (empty) once the step is known to exceed
// cutoff_s.
ZbVOrder zb_v_list(int64_t m, std::span<const ZbVOpTimes> stages, bool record, double cutoff_s) {
  const auto p = static_cast<int64_t>(stages.size());
  ZbVList s(p, m, stages, record, cutoff_s);
  for (int64_t left = 6 * p * m; left > 0 && !s.events.empty() && !s.exceeded;) {
    const auto [now, i] = s.events.top();
    s.events.pop();
    if (now != s.wake[static_cast<size_t>(i)]) continue;  // superseded by an earlier wake-up
    if (s.step(i, now)) --left;
  }
  if (s.exceeded) return {};
  return {std::move(s.orders), std::move(s.free), std::move(s.last_w_start)};
}
}  // namespace

namespace {
// The step, the latest of the stages' ends, each end copied into `paths` where it is given.
double latest_end(std::span<const double> ends, std::span<double> paths) {
  double step = 0;
  for (size_t i = 0; i < ends.size(); ++i) {
    if (!paths.empty()) paths[i] = ends[i];
    step = std::max(step, ends[i]);
  }
  return step;
}

// Each stage's chunks' last W windows (2 per stage) from when they start and the stage's end.
void fill_last_w(std::span<const ZbVOpTimes> times, std::span<const double> end,
                 std::span<const std::array<double, 2>> start, std::span<ChunkWindow> out) {
  for (size_t i = 0; i < end.size(); ++i) {
    for (size_t c = 0; c < 2; ++c) out[2 * i + c] = {end[i] - start[i][c], times[i].backward_weight[c]};
  }
}
}  // namespace

ZbVOrder zb_v_order(int64_t m, std::span<const ZbVOpTimes> stages) {
  return zb_v_list(m, stages, true, ZbVList::kNever);
}

double zb_v_step_s(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths, double cutoff_s,
                   std::span<ChunkWindow> last_w) {
  const std::vector<ZbVOpTimes> times = zb_v_op_times(stages);
  const ZbVOrder o = zb_v_list(m, times, false, cutoff_s);
  if (o.end.empty()) return std::numeric_limits<double>::infinity();
  if (!last_w.empty()) fill_last_w(times, o.end, o.last_w_start, last_w);
  return latest_end(o.end, paths);
}

std::vector<std::vector<ChunkOp>> dualpipe_v_order(int64_t p, int64_t m) {
  std::vector<std::vector<ChunkOp>> orders(static_cast<size_t>(p));
  if (p < 1 || m < 2 * p) return orders;
  for (int64_t r = 0; r < p; ++r) {
    std::vector<ChunkOp>& o = orders[static_cast<size_t>(r)];
    o.reserve(static_cast<size_t>(6 * m));
    std::array<int32_t, 2> nf{0, 0}, nb{0, 0};
    std::vector<ChunkOp> deferred;  // the W's of the backwards that defer theirs, oldest first
    size_t next_w = 0;
    const auto F = [&](int32_t c) { o.push_back({ChunkOp::Kind::forward, nf[static_cast<size_t>(c)]++, c}); };
    const auto B = [&](int32_t c, bool defer_w) {
      const int32_t j = nb[static_cast<size_t>(c)]++;
      o.push_back({ChunkOp::Kind::backward_input, j, c});
      const ChunkOp w{ChunkOp::Kind::backward_weight, j, c};
      if (defer_w) {
        deferred.push_back(w);
      } else {
        o.push_back(w);
      }
    };
    const auto W = [&] { o.push_back(deferred[next_w++]); };
    for (int64_t i = 0; i < 2 * (p - r - 1); ++i) F(0);  // 1: nF0
    for (int64_t i = 0; i < r + 1; ++i) {                 // 2: nF0F1
      F(0);
      F(1);
    }
    for (int64_t i = 0; i < p - r - 1; ++i) {  // 3: nB1W1F1 (zero bubble)
      B(1, true);
      W();
      F(1);
    }
    for (int64_t i = 0; i < m - 2 * p + r + 1; ++i) {  // 4: nF0B1F1B0, two F & B pairs
      F(0);
      B(1, false);
      F(1);
      B(0, false);
    }
    for (int64_t i = 0; i < p - r - 1; ++i) {  // 5: nB1F1B0
      B(1, false);
      F(1);
      B(0, false);
    }
    const int64_t half = (r + 1) / 2;  // 6: nB1B0, those from the middle on deferring their W's
    for (int64_t i = 0; i < r + 1; ++i) {
      B(1, i > half || (i == half && r % 2 == 1));
      B(0, i >= half);
    }
    for (int64_t i = 0; i < p - r - 1; ++i) {  // 7: nWB0 (zero bubble)
      W();
      B(0, true);
    }
    while (next_w < deferred.size()) W();  // 8: nW
  }
  return orders;
}

double order_peak_bytes(std::span<const ChunkOp> order, std::span<const double> chunk_bytes) {
  double live = 0, peak = 0;
  for (const ChunkOp& op : order) {
    const double b = chunk_bytes[static_cast<size_t>(op.chunk)];
    if (op.kind == ChunkOp::Kind::forward) peak = std::max(peak, live += b);
    if (op.kind == ChunkOp::Kind::backward_weight) live -= b;
  }
  return peak;
}

int64_t dualpipe_v_paired_forwards(int64_t p, int64_t m, int64_t stage) {
  if (p < 1 || m < 2 * p) return 0;
  return 2 * (m - 2 * p + stage + 1) + (p - stage - 1) - (stage == p - 1 ? 1 : 0);
}

namespace {
// The longest path through fixed per-stage orders of chunk ops, each stage running its own order one op at a time.
// An op starts when its stage has run the one before it and its input has ended: a forward, the previous virtual
// stage's forward of its microbatch (none for the first); a backward (`backward`, `backward_input`), the next virtual
// stage's (the last virtual stage: its own forward); a `backward_weight`, its own B, earlier in the stage's order. A
// stage stopped at an input goes on once the producer runs it (`ready`: the stages to look at again).
// `virtual_stage(i, chunk)` maps stage i's chunk to its virtual stage (of `nv`), `stage_of(v)` back; `duration(i, op,
// v)` is an op's time; `ran(i, op, end, duration)` sees each op run. Each stage's end; none (empty) once the step is
// known to exceed `cutoff_s`: a stage's work (`work_left`, each stage's op times summed) alone, or its end so far
// plus the op time it has left (the search's bound). `what` names the order in the error for an op whose input
// never runs.
template <class VirtualStage, class StageOf, class Duration, class Ran>
std::vector<double> fixed_order_ends(int64_t m, int64_t nv, const std::vector<std::vector<ChunkOp>>& order,
                                     VirtualStage virtual_stage, StageOf stage_of, Duration duration, Ran ran,
                                     std::vector<double> work_left, double cutoff_s, const char* what) {
  const auto p = static_cast<int64_t>(order.size());
  for (const double w : work_left) {
    if (w > cutoff_s) return {};
  }
  constexpr double kNever = std::numeric_limits<double>::infinity();
  std::vector<double> f_end(static_cast<size_t>(nv * m), kNever), b_end(f_end), free(static_cast<size_t>(p), 0.0);
  const auto at = [&](std::vector<double>& e, int64_t v, int64_t j) -> double& { return e[static_cast<size_t>(v * m + j)]; };
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  std::vector<int64_t> ready;
  size_t left = 0;
  for (int64_t i = 0; i < p; ++i) {
    ready.push_back(p - 1 - i);
    left += order[static_cast<size_t>(i)].size();
  }
  while (!ready.empty()) {
    const int64_t i = ready.back();
    ready.pop_back();
    const auto ii = static_cast<size_t>(i);
    for (; next[ii] < order[ii].size(); ++next[ii]) {
      const ChunkOp& op = order[ii][next[ii]];
      const int64_t v = virtual_stage(i, op.chunk), j = op.microbatch;
      const bool forward = op.kind == ChunkOp::Kind::forward, weight = op.kind == ChunkOp::Kind::backward_weight;
      const double input = forward ? (v > 0 ? at(f_end, v - 1, j) : 0.0)
                           : weight ? 0.0
                                    : (v < nv - 1 ? at(b_end, v + 1, j) : at(f_end, v, j));
      if (input == kNever) break;  // its producer has not run it: this stage waits
      const double d = duration(i, op, v), end = std::max(free[ii], input) + d;
      ran(i, op, end, d);
      work_left[ii] -= d;
      if (end + work_left[ii] > cutoff_s) return {};
      free[ii] = end;
      --left;
      if (forward) {
        at(f_end, v, j) = end;
        if (v + 1 < nv) ready.push_back(stage_of(v + 1));
      } else if (!weight) {
        at(b_end, v, j) = end;
        if (v > 0) ready.push_back(stage_of(v - 1));
      }
    }
  }
  if (left != 0) throw std::logic_error(std::string(what) + ": an op waits for an input that never runs");
  return free;
}

// Per-stage orders kept for the last key they were built for: the search times many candidates of one mesh and batch
// in a row, and an order depends on (p, m[, v]) only.
struct OrderCache {
  std::array<int64_t, 3> key{-1, -1, -1};
  std::vector<std::vector<ChunkOp>> orders;
  template <class Build>
  const std::vector<std::vector<ChunkOp>>& get(const std::array<int64_t, 3>& k, Build build) {
    if (k != key) {
      orders = build();
      key = k;
    }
    return orders;
  }
};
}  // namespace

double dualpipe_v_step_s(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths,
                         double cutoff_s, std::span<ChunkWindow> last_w) {
  const auto p = static_cast<int64_t>(stages.size());
  if (m < 2 * p) throw std::logic_error("dualpipe_v_step_s: DualPipeV needs at least 2 p microbatches");
  thread_local OrderCache cache;
  const std::vector<std::vector<ChunkOp>>& order = cache.get({p, m, 0}, [&] { return dualpipe_v_order(p, m); });
  const std::vector<ZbVOpTimes> times = zb_v_op_times(stages);
  std::vector<double> work(static_cast<size_t>(p), 0.0);
  for (int64_t i = 0; i < p; ++i) {
    work[static_cast<size_t>(i)] = static_cast<double>(m) * times[static_cast<size_t>(i)].per_microbatch();
  }
  std::vector<std::array<double, 2>> last_w_start(static_cast<size_t>(p), {0.0, 0.0});  // each chunk's last W's start
  const std::vector<double> free = fixed_order_ends(
      m, 2 * p, order, [&](int64_t i, int32_t chunk) { return zb_v_virtual_stage(p, i, chunk); },
      [&](int64_t v) { return v < p ? v : 2 * p - 1 - v; },
      [&](int64_t i, const ChunkOp& op, int64_t) { return times[static_cast<size_t>(i)].of(op.kind, static_cast<size_t>(op.chunk)); },
      [&](int64_t i, const ChunkOp& op, double end, double d) {
        if (op.kind == ChunkOp::Kind::backward_weight) {
          last_w_start[static_cast<size_t>(i)][static_cast<size_t>(op.chunk)] = end - d;
        }
      },
      std::move(work), cutoff_s, "dualpipe_v_order");
  if (free.empty()) return std::numeric_limits<double>::infinity();
  if (!last_w.empty()) fill_last_w(times, free, last_w_start, last_w);
  return latest_end(free, paths);
}

double interleaved_step_s(int64_t m, int64_t v, std::span<const StageMicrobatchTime> stages, std::span<double> paths) {
  const auto p = static_cast<int64_t>(stages.size());
  const double md = static_cast<double>(m), w = static_cast<double>(v);
  // Forward chunks after F(0, v-1) until B(0, v-1): the warm-up less the (v-1) p before F(0, v-1); the chunk-op count
  // round_trip_stall's "m" stands for: m v less those same (v-1) p (at least p where m is a multiple of p, as
  // validate() requires; at least 1 for other callers).
  const int64_t chunk_ops = std::max<int64_t>(1, m * v - (v - 1) * p);
  // Microbatch 0's last chunk makes the round trip through the stages after k; the stages before k fill and drain
  // with chunk 0.
  const auto round_trip = [&](int64_t i) {
    const ChunkOps c = chunk_sends(stages[static_cast<size_t>(i)], i, p, v);
    return c.forward_last + c.backward_last;
  };
  // The stages whose warm-up runs every forward chunk before their first backward (the first ones at m = p): the
  // round trip through them starts only after the busy stage's last forward (as in one_f_one_b_step_s).
  double down = 0, upto = 0;
  int64_t all_forwards = -1;
  for (int64_t i = 0; i < p; ++i) {
    const double r = round_trip(i);
    down += r;
    if (interleaved_warmup(p, v, i) >= m * v - 1) {
      upto += r;
      all_forwards = i;
    }
  }
  double up = 0, step = 0;
  for (int64_t k = 0; k < p; ++k) {
    const StageMicrobatchTime& t = stages[static_cast<size_t>(k)];
    const ChunkOps c = chunk_sends(t, k, p, v);
    const double r = c.forward_last + c.backward_last;
    down -= r;
    const double stall = std::max(round_trip_stall(down, interleaved_warmup(p, v, k) - (v - 1) * p, chunk_ops,
                                                   t.forward_slot() / w, t.backward_slot() / w),
                                  k < all_forwards ? upto - r : 0.0);
    upto -= k < all_forwards ? r : 0.0;
    const double path = up + md * t.total() + stall;
    if (!paths.empty()) paths[static_cast<size_t>(k)] = path;
    step = std::max(step, path);
    up += c.forward_first + c.backward_first;
  }
  return step;
}

std::vector<ChunkOp> interleaved_order(int64_t p, int64_t m, int64_t v, int64_t stage) {
  const int64_t total = m * v, group = p * v;
  const int64_t warm = std::min(interleaved_warmup(p, v, stage), total);
  const auto op = [&](ChunkOp::Kind kind, int64_t k) {
    const int64_t chunk = (k % group) / p;
    return ChunkOp{kind, static_cast<int32_t>((k / group) * p + k % p),
                   static_cast<int32_t>(kind == ChunkOp::Kind::forward ? chunk : v - 1 - chunk)};
  };
  std::vector<ChunkOp> o;
  o.reserve(static_cast<size_t>(2 * total));
  for (int64_t k = 0; k < warm; ++k) o.push_back(op(ChunkOp::Kind::forward, k));
  for (int64_t k = 0; k < total - warm; ++k) {
    o.push_back(op(ChunkOp::Kind::forward, k + warm));
    o.push_back(op(ChunkOp::Kind::backward, k));
  }
  for (int64_t k = total - warm; k < total; ++k) o.push_back(op(ChunkOp::Kind::backward, k));
  return o;
}

double interleaved_order_step_s(int64_t m, int64_t v, std::span<const StageMicrobatchTime> stages,
                                std::span<const double> chunk_shares, std::span<double> paths,
                                std::span<ChunkWindow> last_b, double cutoff_s) {
  const auto p = static_cast<int64_t>(stages.size());
  const int64_t nv = p * v;
  const auto idx = [](int64_t a, int64_t n, int64_t b) { return static_cast<size_t>(a * n + b); };
  // Each virtual stage's F and B (chunk c of stage i is virtual stage c p + i), with the send after it.
  std::vector<double> f_time(static_cast<size_t>(nv)), b_time(f_time), b_send(f_time);
  for (int64_t i = 0; i < p; ++i) {
    const StageMicrobatchTime& t = stages[static_cast<size_t>(i)];
    const double f_edges = t.first_chunk_edge.forward_s + t.last_chunk_edge.forward_s;
    const double b_edges = t.first_chunk_edge.backward_input_s + t.last_chunk_edge.backward_input_s;
    const double x = (i < p - 1 ? t.p2p_forward_s : t.p2p_backward_s) / static_cast<double>(v);
    for (int64_t c = 0; c < v; ++c) {
      const double share = chunk_shares.empty() ? 1.0 / static_cast<double>(v) : chunk_shares[idx(i, v, c)];
      const int64_t vs = c * p + i;
      double f = share * (t.forward_s - f_edges), b = share * (t.backward_input_s + t.backward_weight_s - b_edges);
      if (c == 0) {
        f += t.first_chunk_edge.forward_s;
        b += t.first_chunk_edge.backward_input_s;
      }
      if (c == v - 1) {
        f += t.last_chunk_edge.forward_s;
        b += t.last_chunk_edge.backward_input_s;
      }
      f_time[static_cast<size_t>(vs)] = f + (vs < nv - 1 ? x : 0.0);
      b_send[static_cast<size_t>(vs)] = vs > 0 ? x : 0.0;
      b_time[static_cast<size_t>(vs)] = b + b_send[static_cast<size_t>(vs)];
    }
  }
  thread_local OrderCache cache;
  const std::vector<std::vector<ChunkOp>>& order = cache.get({p, m, v}, [&] {
    std::vector<std::vector<ChunkOp>> o(static_cast<size_t>(p));
    for (int64_t i = 0; i < p; ++i) o[static_cast<size_t>(i)] = interleaved_order(p, m, v, i);
    return o;
  });
  std::vector<double> work(static_cast<size_t>(p), 0.0);
  for (int64_t vs = 0; vs < nv; ++vs) {
    work[static_cast<size_t>(vs % p)] += static_cast<double>(m) * (f_time[static_cast<size_t>(vs)] + b_time[static_cast<size_t>(vs)]);
  }
  std::vector<double> last_b_start(static_cast<size_t>(nv), 0.0);  // per virtual stage: its last B's start
  const std::vector<double> free = fixed_order_ends(
      m, nv, order, [&](int64_t i, int32_t chunk) { return chunk * p + i; }, [&](int64_t vs) { return vs % p; },
      [&](int64_t, const ChunkOp& op, int64_t vs) {
        return (op.kind == ChunkOp::Kind::forward ? f_time : b_time)[static_cast<size_t>(vs)];
      },
      [&](int64_t i, const ChunkOp& op, double end, double d) {
        if (op.kind == ChunkOp::Kind::backward && op.microbatch == m - 1) {
          last_b_start[static_cast<size_t>(op.chunk * p + i)] = end - d;
        }
      },
      std::move(work), cutoff_s, "interleaved_order");
  if (free.empty()) return std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < p && !last_b.empty(); ++i) {
    for (int64_t c = 0; c < v; ++c) {
      const auto vs = static_cast<size_t>(c * p + i);
      last_b[idx(i, v, c)] = {free[static_cast<size_t>(i)] - last_b_start[vs], b_time[vs] - b_send[vs]};
    }
  }
  return latest_end(free, paths);
}

double p2p_sends_per_microbatch(int64_t i, int64_t p, int64_t v, Schedule s) {
  if (p <= 1) return 0.0;
  if (v_shaped(s)) return 2.0 * p2p_forward_sends(i, p, v, s);
  return 2.0 * static_cast<double>(v) - (i == 0 ? 1.0 : 0.0) - (i == p - 1 ? 1.0 : 0.0);
}

double p2p_forward_sends(int64_t i, int64_t p, int64_t v, Schedule s) {
  if (v_shaped(s)) return p <= 1 ? 0.0 : (i == 0 || i == p - 1 ? 1.0 : 2.0);
  return p <= 1 ? 0.0 : static_cast<double>(v) - (i == p - 1 ? 1.0 : 0.0);
}

double p2p_fill_drain_s(int64_t p, int64_t v, double p2p_s) { return 2.0 * static_cast<double>(p * v - 1) * p2p_s; }

namespace {
// A stage's op on the backward chain (B, ZB-H1: B_input) with the sends after it (its forward: forward_slot()).
double chain_op(const StageMicrobatchTime& t, bool zb) { return t.backward_slot() - (zb ? t.backward_weight_s : 0.0); }

// The sums over the stages pipeline_time() starts from: the slowest stage's per-microbatch time, the forward slots'
// sum and maximum, the backward chain's ops and the final chain's send delays.
struct StageSums {
  double t_max = 0, f_sum = 0, f_max = 0, b_sum = 0, delay_sum = 0;
  int64_t slowest_stage = 0;
};

StageSums stage_sums(std::span<const StageMicrobatchTime> stages, bool zb) {
  StageSums r;
  for (size_t i = 0; i < stages.size(); ++i) {
    r.delay_sum += stages[i].last_send_delay_s;
    if (stages[i].total() > r.t_max) {
      r.t_max = stages[i].total();
      r.slowest_stage = static_cast<int64_t>(i);
    }
    r.f_sum += stages[i].forward_slot();
    r.f_max = std::max(r.f_max, stages[i].forward_slot());
    r.b_sum += chain_op(stages[i], zb);
  }
  return r;
}

// Interleaved: the end_floor of pipeline_time() (before the send delays), the latest over stages k of k's forward
// chunks and the backwards before its last forward, between the first microbatch's chunk-0 fill and the last
// microbatch's last-chunk trip (b_sum: the backward chain's ops).
double interleaved_end_floor(int64_t m, int64_t v, std::span<const StageMicrobatchTime> stages, double b_sum) {
  const size_t p = stages.size();
  const auto pi = static_cast<int64_t>(p);
  const double md = static_cast<double>(m), w = static_cast<double>(v);
  double end_floor = 0;
  double first = 0, last = 0;  // chunk-0 forwards before k, last-chunk forwards after k
  for (size_t k = 0; k < p; ++k) last += chunk_sends(stages[k], static_cast<int64_t>(k), pi, v).forward_last;
  for (size_t k = 0; k < p; ++k) {
    const ChunkOps c = chunk_sends(stages[k], static_cast<int64_t>(k), pi, v);
    last -= c.forward_last;
    const int64_t warm = std::min(interleaved_warmup(pi, v, static_cast<int64_t>(k)), m * v - 1);
    const double before = static_cast<double>(m * v - 1 - warm);
    const double b = chain_op(stages[k], false);
    end_floor = std::max(end_floor, first + md * stages[k].forward_slot() + before * b / w + last + b_sum);
    first += c.forward_first;
  }
  return end_floor;
}

// The stage ends of an order walked op by op (zb-2p, DualPipeV, timed interleaved) into `ends`, by `walk(m',
// ends, windows, cutoff)`; false past the cutoff. A walk costs O(p m v) time and memory, so past kWalkedMicrobatches
// (or 8 q) the ends are extrapolated from two walks q = 2p microbatches apart, m1 (congruent to m mod q, which keeps
// m % p and its parity, as the orders need) and m1 + q: in the steady state the orders repeat every p microbatches,
// each period adding the same time to every stage's end (tests/planner/cost/pipeline_test.cpp pins the extrapolated
// step to the walk itself at m = 4104, 5000 and 8192). The chunk windows are those of the second walk (measured from the
// ends, the same in every period). A step of 6.7 million interleaved microbatches took 2.4 s walked (34 s under the
// fuzzer's instrumentation); its memory grows with m as well. ZB-V's order, which zb_v_step_s builds from the op
// times, does not repeat that way (extrapolated from 4096 microbatches it came out 2.1% long at 8192): it is walked.
constexpr int64_t kWalkedMicrobatches = 4096;
template <class Walk>
bool walked_order_ends(int64_t m, int64_t p, const Walk& walk, std::span<double> ends, std::span<ChunkWindow> windows,
                       double cutoff_s) {
  const int64_t q = 2 * p, bound = std::max(kWalkedMicrobatches, 8 * q);
  if (m <= bound) return walk(m, ends, windows, cutoff_s);
  const int64_t m1 = m - q * ((m - bound + q - 1) / q);  // in (bound - q, bound]
  constexpr double kNoCutoff = std::numeric_limits<double>::infinity();
  std::vector<double> first(ends.size()), second(ends.size());
  walk(m1, first, {}, kNoCutoff);
  walk(m1 + q, second, windows, kNoCutoff);
  const double periods = static_cast<double>((m - m1) / q);
  double latest = 0;
  for (size_t k = 0; k < ends.size(); ++k) {
    ends[k] = first[k] + periods * (second[k] - first[k]);
    latest = std::max(latest, ends[k]);
  }
  return latest <= cutoff_s;
}

// The final chain's send delays (a path through stage k runs the chain from k down to 0, delay_sum all of them) into
// each path's end in `lead`, and then the latest path through a stage k >= j into lead[j].
void add_chain_delays(std::span<const StageMicrobatchTime> stages, double delay_sum, std::span<double> lead) {
  const size_t p = stages.size();
  double delays = delay_sum;
  for (size_t k = p; k-- > 0;) {
    lead[k] += delays;
    delays -= stages[k].last_send_delay_s;
    if (k + 1 < p) lead[k] = std::max(lead[k], lead[k + 1]);
  }
}
}  // namespace

PipelineTime pipeline_time(Schedule s, int64_t m, int64_t v, std::span<const StageMicrobatchTime> stages,
                           std::span<double> lead, bool post_validation, double cutoff_s,
                           std::span<ChunkWindow> windows, std::span<const double> chunk_shares) {
  PipelineTime r;
  const size_t p = stages.size();
  if (p == 0) return r;
  std::vector<double> own;  // callers that want no leads (tests) still need the paths
  if (lead.empty()) {
    own.resize(p);
    lead = own;
  }
  const double md = static_cast<double>(m);
  const bool timed_interleaved = s == Schedule::interleaved && !chunk_shares.empty();
  if (s == Schedule::zb_2p || v_shaped(s) || timed_interleaved) {  // each path ends at its own stage (pipeline.hpp)
    const StageSums sums = stage_sums(stages, !timed_interleaved);
    r.slowest_stage = sums.slowest_stage;
    r.busy_s = md * sums.t_max;
    const auto walk = [&](int64_t mm, std::span<double> ends, std::span<ChunkWindow> win, double cut) {
      if (s == Schedule::zb_2p) {
        zb_2p_step_s(mm, stages, ends, post_validation);
        return true;
      }
      return !std::isinf(timed_interleaved ? interleaved_order_step_s(mm, v, stages, chunk_shares, ends, win, cut)
                         : s == Schedule::zb_v ? zb_v_step_s(mm, stages, ends, cut, win)
                                               : dualpipe_v_step_s(mm, stages, ends, cut, win));
    };
    const bool repeats = s != Schedule::zb_v;  // ZB-V's order, built from the op times, is walked at every m
    if (!(repeats ? walked_order_ends(m, static_cast<int64_t>(p), walk, lead, windows, cutoff_s)
                  : walk(m, lead, windows, cutoff_s))) {
      return PipelineTime{.step_s = std::numeric_limits<double>::infinity()};  // beyond the cutoff: nothing else
    }
    for (double& end : lead) r.step_s = std::max(r.step_s, end += sums.delay_sum);  // the final chain's send delays
    for (double& end : lead) end = r.step_s - end;
    r.bubble_s = r.step_s - r.busy_s;
    return r;
  }
  const bool zb = s == Schedule::zero_bubble;
  const double w0 = stages[0].backward_weight_s;
  const StageSums sums = stage_sums(stages, zb);
  const double f_sum = sums.f_sum, f_max = sums.f_max, b_sum = sums.b_sum, delay_sum = sums.delay_sum;
  r.slowest_stage = sums.slowest_stage;
  r.busy_s = md * sums.t_max;
  // Each path's end at stage 0 into lead.
  if (s == Schedule::one_f_one_b) {
    one_f_one_b_step_s(m, stages, lead);
  } else if (zb) {
    zero_bubble_step_s(m, stages, lead);
  } else if (s == Schedule::gpipe) {
    // Two flow shops: every forward, then every backward (stage p-1's first backward waits for its last forward).
    const double forwards = md * f_max + (f_sum - f_max);
    for (size_t k = 0; k < p; ++k) {
      lead[k] = forwards + md * chain_op(stages[k], zb) + (b_sum - chain_op(stages[k], zb));
    }
  } else {
    interleaved_step_s(m, v, stages, lead);
  }
  // Stage ends (pipeline.hpp): the latest path through a stage k >= j less the chain S_j, with ZB-H1's trailing W
  // passes against stage 0's one; 1F1B and ZB-H1 no earlier than the last forward's round trip past j; interleaved
  // no earlier than end_floor (interleaved_end_floor).
  const bool interleaved = s == Schedule::interleaved;
  const auto pi = static_cast<int64_t>(p);
  double end_floor = interleaved ? interleaved_end_floor(m, v, stages, b_sum) : 0;
  add_chain_delays(stages, delay_sum, lead);
  double delays = delay_sum;
  end_floor += delays;
  const bool forward_bound = (s == Schedule::one_f_one_b || zb) && p > 1;
  double chain = 0, round = f_sum + b_sum, fill = 0, arrive = 0;  // S_j, the round trip after j, forwards before j
  for (size_t j = 0; j < p; ++j) {
    const StageMicrobatchTime& t = stages[j];
    const double f = t.forward_slot(), b = chain_op(t, zb);
    const double weights = zb ? trailing_weights_s(static_cast<int64_t>(j), m, t) : 0.0;
    double end = std::max(lead[j] - chain + (weights - (zb ? w0 : 0.0)), end_floor - chain);
    chain += (interleaved ? chunk_sends(t, static_cast<int64_t>(j), pi, v).backward_first : b) + t.last_send_delay_s;
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
      end = std::max(end, arrive + round + b + weights + delays);
      fill += f;
    }
    lead[j] = end;
    r.step_s = std::max(r.step_s, end);
    delays -= t.last_send_delay_s;  // the chain from stage j + 1 on
  }
  for (size_t j = 0; j < p; ++j) lead[j] = r.step_s - lead[j];
  r.bubble_s = r.step_s - r.busy_s;
  return r;
}

}  // namespace parplan
