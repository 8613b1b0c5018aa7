// Pipeline schedules in closed form: in-flight microbatches per stage and step time / bubble.
// Sources: GPipe (Huang et al. 2019) and 1F1B (Narayanan et al. 2021, Sec. 2.2): bubble (p-1)/m of the ideal time,
// (p-1)/(m+p-1) of the step; interleaved 1F1B with v chunks: (p-1)/(v m) (Narayanan 2021 Sec. 2.2.2);
// ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"): bubble (p-1)(T_F + T_B - T_W) vs 1F1B's
// (p-1)(T_F + T_B + T_W). In-flight activations: GPipe m; 1F1B min(p - i, m); interleaved stage i holds
// min(2(p-i-1) + (v-1)p + 1, v m) chunk-microbatches (Megatron-LM warm-up + 1; stage 0: p + (p-1)/v microbatches,
// Korthikanti et al. 2022 Sec. 4.2.3); ZB-H1 min(p, m) on every stage: stage i defers its W passes by i
// microbatches, so it holds p - i microbatches awaiting B and up to i awaiting W, each kept whole until its W (as the
// runtime keeps it): Qi et al.'s memory bound for ZB-H1, p M_B (1F1B's stage-0 peak), reached on every stage;
// ZB-2p min(2p - 1, m) on every stage: Qi et al.'s ZB-H2 peak (2p - 1) M_B (their Table 1); ZB-V min(p, m) v = min(2p, 2m)
// half-stage chunks on every stage: p M_B, 1F1B's stage-0 peak (Qi et al. 2023 Sec. 6: ZB-V keeps 1F1B's memory).
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "planner/spec/spec.hpp"

namespace parplan {

// Chunk-microbatches whose activations stage `stage` holds at its peak (a chunk is 1/v of the stage's layers).
int64_t in_flight_chunks(Schedule s, int64_t p, int64_t m, int64_t v, int64_t stage);

// Microbatches whose first chunk stage `stage` holds at that same peak: the count of embedding outputs the first stage
// stores. One chunk per stage: in_flight_chunks. Interleaved: Megatron-LM's order (the k-th forward runs chunk
// (k mod pv) / p, the k-th backward chunk v - 1 - (k mod pv) / p) runs chunk 0's forwards ahead and its backwards last,
// so it holds more than in_flight_chunks / v of them: p = 2, v = 2, m = 4, stage 0 holds 5 chunk-microbatches of which
// 4 are chunk 0 (not 2.5). Every steady-state forward reaches the chunk peak, so both maxima coincide.
int64_t in_flight_first_chunks(Schedule s, int64_t p, int64_t m, int64_t v, int64_t stage);

// Interleaved with chunks of different sizes: the most bytes stage `stage`'s live chunk-microbatches hold over its
// order (Megatron-LM's, as in_flight_first_chunks walks it), a microbatch's chunk c holding chunk_bytes[c] (v
// entries) from its forward to its backward. Equal chunks: in_flight_chunks x the chunk's bytes.
double interleaved_peak_bytes(int64_t p, int64_t m, int64_t v, int64_t stage, std::span<const double> chunk_bytes);

// Per-stage, per-microbatch time (all v chunks of the stage), split as the schedules need it.
// Blocking sends wait after the op they follow: activations after forwards, gradients after backwards (ZB-H1: after
// B_input), so the first stage sends only after forwards and the last only after backwards.
struct StageMicrobatchTime {
  double forward_s = 0;          // forward compute + exposed in-layer comm
  double backward_input_s = 0;   // input-gradient backward (+ recompute)
  double backward_weight_s = 0;  // weight-gradient backward
  double p2p_forward_s = 0;      // blocking sends after this stage's forwards, per microbatch
  double p2p_backward_s = 0;     // blocking sends after its backwards
  // The last microbatch's gradient send takes this much longer: it shares the stage's link with the stage's DP
  // reduction, running by then (cost_model.cpp step_time). Once per step, on the final backward chain.
  double last_send_delay_s = 0;
  // Interleaved: the stage's first (chunk 0) and last (chunk v-1) chunk's share of its compute; negative: 1/v (equal
  // chunks). An explicit per-chunk layout (config.hpp chunk_layers) sets them to the chunks' layer fractions.
  double first_chunk_share = -1, last_chunk_share = -1;
  // The work in forward_s / backward_input_s that one chunk does alone, outside the shares: the embedding (the first
  // stage's chunk 0) and the output layer with its TP communication (output_stage()'s last chunk). ZB-V's op times
  // (zb_v_op_times) put it in its chunk, as the simulator runs it; the other forms spread it with the rest.
  struct ChunkEdge {
    double forward_s = 0, backward_input_s = 0;
  };
  ChunkEdge first_chunk_edge{}, last_chunk_edge{};
  double forward_slot() const { return forward_s + p2p_forward_s; }
  double backward_slot() const { return backward_input_s + backward_weight_s + p2p_backward_s; }
  double total() const { return forward_slot() + backward_slot(); }
};

// Megatron-LM's interleaved warm-up: the forward chunks stage `stage` runs before its first backward,
// 2 (p - stage - 1) + (v - 1) p (capped by the schedule's m v chunk-microbatches where it is used).
int64_t interleaved_warmup(int64_t p, int64_t v, int64_t stage);

// The first stage's warm-up: the forward (chunk) passes it runs before its steady state, whose k-th step runs
// forward w + k beside backward k. w + 1 forwards precede its first backward and w + 1 backwards follow its last
// forward (no more in ZB-2p and ZB-V, which run a ready backward first); w = m v: no steady state. GPipe m v; 1F1B
// and ZB-H1 min(p - 1, m) (Narayanan et al. 2021 Sec. 2.2; Megatron-LM's num_warmup_microbatches on rank 0; ZB-H1
// keeps 1F1B's F/B order); interleaved min(interleaved_warmup(p, v, 0), m v); ZB-2p min(2p - 2, m) (its order runs
// 2(p - 1 - i) + 1 forwards on stage i before its first B); ZB-V min(2p - 1, m) of its 2m half-stage chunks
// (zb_v_order()). Pinned against the orders the simulator runs (tests/simulator/schedule_test.cpp). The first stage
// starts the step and ends it, so its warm-up and cool-down lie on the step's path.
int64_t first_stage_warmup(Schedule s, int64_t p, int64_t m, int64_t v);

struct PipelineTime {
  double step_s = 0;    // from the first forward to the last backward
  double busy_s = 0;    // m x the slowest stage's per-microbatch time
  double bubble_s = 0;  // step_s - busy_s
  int64_t slowest_stage = 0;
};

// 1F1B step over stages of different times t_i = f_i + b_i (f: forward_slot, b: backward_slot, each with the sends
// after it): the longest of the paths that keep one stage k busy from its first forward to its last backward. The
// stages before k fill and drain (their whole t_i); k runs m microbatches; a microbatch's round trip through the
// stages after it, D_k = sum_{j>k} t_j, stalls k only by what its n = min(p-1-k, m-1) forwards between a
// microbatch's forward and its backward (warm-up) and its n backwards between the last forward and the last backward
// (cool-down) do not cover:
//   max_k [ sum_{i<k} t_i + m t_k + max(0, D_k - n f_k) + max(0, D_k - n b_k) ]
// Where the warm-up p-1-k reaches m-1 (the stages k <= p - m: every stage at m = 1, none at m > p) the last forward
// precedes the first backward and the two waits are one gap: max(0, D_k - n min(f_k, b_k)) in place of the two terms.
// Those stages also hold microbatch 0's backward until their own last forward, which k paces, so k's wait is at
// least the round trip through the ones after it, sum_{k<j<=p-m} t_j (a heavy first stage with m < p: without it
// down to -8.1% against the simulator, tests/simulator/task_graph_test.cpp).
// Where k has a steady phase (m > p - k), a second path through it (pipeline.cpp one_f_one_b_chain_paths) follows the
// stages after k when they are themselves busy as the round trip reaches them (a light last stage after busy ones):
// the fill as the grid of the first microbatches' forwards (stage j's W_j + 1 = p - j forwards before its first
// backward end no earlier than sum_{r<=j} f_r + W_j max_{r<=j} f_r) and the drain as the last forward's chain through
// each later stage's W_j + 1 cool-down backwards; the longer of the two paths counts.
// Uniform stages: (m + p - 1) t, the textbook value, for every m. A lighter stage after the bottleneck costs less
// than its t. Derived here from the 1F1B order (Narayanan et al. 2021, Sec. 2.2); against a list schedule of that
// order over 3,000 seeded stage-time sets with m >= p (tests/planner/cost/pipeline_test.cpp: first/last stages scaled as
// uneven splits make them, and arbitrary times) it is never above, exact on 2,447, at most 4.1% below (2,440 and
// 5.2% with the round trip alone; busy stages then a light last one: within 0.5% where the round trip alone was
// 1.6% below), where m t_max + (sum - t_max), which charged
// every other stage whole, was up to 25.2% above. With m < p (3,000 more sets) it is never above and at most 4.2%
// below, where that GPipe form, which 1F1B used there, was up to 24.1% above (the 1F1B order lets the stages after
// the bottleneck run their first round trips beside its forwards).
double one_f_one_b_step_s(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths = {});

// ZB-H1 over stages of different times, the same path construction over its order (stage k defers its W passes by
// k microbatches; Qi et al. 2023, simulator/schedule.cpp): the stages before k fill with F and drain with B_input
// only (u_i = F_i + B_input_i + p2p_i); k runs m microbatches, of which its last min(k + 1, m) W passes follow its
// last B_input, off the path, which reaches stage 0's last B_input and ends with stage 0's one W after it; the round
// trip D_k = sum_{j>k} u_j stalls k as in 1F1B (b_k = backward_slot, one gap where p-1-k >= m-1, and at least the
// trip through the stages up to p - m, which run every forward first):
//   P_k = sum_{i<k} u_i + m t_k - min(k + 1, m) W_k + W_0 + stall_k
// Returns max_k P_k, stage 0's end; pipeline_time() also takes the stages whose trailing W passes end later. Uniform
// stages: m t + (p - 1)(F + B_input - W + p2p) for m >= p, Qi et al.'s bubble; (m + p - 1)(F + B_input + p2p) + W for
// m < p (every W but stage 0's last one fills an idle slot; Qi et al. state only the m >= p bubble). Both equal the
// simulator for uniform stages with W <= F (tests/simulator/task_graph_test.cpp). It replaces m t_max +
// (sum u - u_max) for m >= p and a GPipe-like form over F + B_input for m < p: on that test's 600 seeded uneven sets
// (no sends) -8.5..+12.2% and -3.4..+13.6% against the simulator.
double zero_bubble_step_s(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths = {});

// ZB-2p (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"; simulator/schedule.cpp: the greedy order with
// up to 2p - 1 microbatches in flight, the handcrafted ZB-H2's memory). With F, B (input gradient) and W of each
// stage, sends after F and B, the path through stage k: the forwards before it, its m microbatches, and per later
// stage i the paper's bubble term x_i = F_i + B_i - 2 W_i (its Table 1: ZB-H2's bubble (p - 1)(T_F + T_B - 2 T_W)):
//   P_k = sum_{i<k} F_i + m t_k + sum_{i>k} x_i,
// and stage 0 also C = sum_i (F_i + B_i) + (m - 1) max_i (F_i + B_i) + W_0 (few microbatches: the forward and
// input-gradient chain). The step is the latest: uniform stages with W <= F <= B,
//   max( m t + (p - 1) F,  m t + (p - 1)(F + B - 2 W),  (m + p - 1)(F + B) + W ),
// equal to the simulator for every m (tests/simulator/task_graph_test.cpp). With m >= 2p - 1 stage 0 idles exactly
// (p - 1) max(0, F + B - 2 W) between its first and its last op, the paper's ZB-H2 bubble; the step also holds the
// (p - 1) F before the last stage starts, which the paper's post-validation (its Sec. 4: no optimizer sync across
// stages) lets the next iteration fill and which parplan, pricing one iteration, keeps. P_k is where stage k ends
// (`paths`); pipeline_time() takes the step as the latest. Uneven stages: tests/simulator/task_graph_test.cpp.
// With the optimizer post-validation (ParallelConfig::post_validation; Qi et al. 2023 Sec. 4) no stage waits for the
// others' optimizer step, so a continuous run's next iteration fills the pipeline while this one drains: each path
// drops the forwards before its stage, P_k = m t_k + sum_{i>k} x_i, and a uniform step with m >= 2p - 1 is the
// paper's m t + (p - 1) max(0, F + B - 2 W). The few-microbatch chain C stays (its dependencies are the iteration's
// own).
double zb_2p_step_s(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths = {},
                    bool post_validation = false);

// ZB-V (Qi et al. 2023, arXiv:2401.10241 Sec. 6, the V-ZB of Qi et al. 2024, "Pipeline Parallelism with
// Controllable Memory": 2 chunks per stage in a V, 1F1B's activation memory, zero bubble when T_F = T_B = T_W).
// Its order (THE definition; simulator/schedule.cpp runs it): one list schedule of all stages in continuous time over
// the stages' own op durations (ZbVOpTimes), as the paper's scheduler builds its schedules from profiled F, B and W
// times (Qi et al. 2023 Sec. 3-4): whenever a stage is free it runs its next B if that B's gradient has arrived
// (chunk 0 first), else its next F if its input has arrived and fewer than 2p chunk-microbatches await their W (chunk
// 1 first: 1F1B's memory bound), else its oldest pending W, else it idles until the next of its inputs arrives.
// Stages free at the same instant decide in stage order; an op's result counts from its end (sends included). With
// unit times (the default ZbVOpTimes) that is the tick-by-tick list schedule of T_F = T_B = T_W. Stage i's chunk c is
// virtual stage zb_v_virtual_stage(p, i, c).
struct ChunkOp {
  // backward: the whole backward of a chunk (input and weight gradients; the schedules that do not split it).
  enum class Kind : uint8_t { forward, backward_input, backward_weight, backward } kind = Kind::forward;
  int32_t microbatch = 0;
  int32_t chunk = 0;
};
constexpr int64_t zb_v_virtual_stage(int64_t p, int64_t stage, int64_t chunk) {
  return chunk == 0 ? stage : 2 * p - 1 - stage;
}
// Whether stage i's op of `kind` on chunk c sends its result to another stage: F unless it ends the V or is the turn
// on the last stage (virtual stage p - 1 feeds p on the same stage), B unless it is the first virtual stage or the
// turn's way back (p to p - 1); W never.
bool zb_v_sends(int64_t p, int64_t stage, int64_t chunk, ChunkOp::Kind kind);
// One stage's op durations per chunk (index 0, 1), each with the blocking send after it where zb_v_sends.
struct ZbVOpTimes {
  double forward[2] = {1.0, 1.0}, backward_input[2] = {1.0, 1.0}, backward_weight[2] = {1.0, 1.0};
  // The duration of an op of `kind` on chunk c (0 or 1), and of one microbatch's six ops.
  double of(ChunkOp::Kind kind, size_t c) const {
    switch (kind) {
      case ChunkOp::Kind::forward: return forward[c];
      case ChunkOp::Kind::backward_input: return backward_input[c];
      case ChunkOp::Kind::backward_weight: return backward_weight[c];
      case ChunkOp::Kind::backward: return backward_input[c] + backward_weight[c];
    }
    return 0.0;
  }
  double per_microbatch() const {
    return forward[0] + forward[1] + backward_input[0] + backward_input[1] + backward_weight[0] + backward_weight[1];
  }
};
// The estimate's op durations: each chunk its share of the stage's F, B and W (first_chunk_share / last_chunk_share,
// or a half) less the edge work, plus the edge work it owns (first_chunk_edge: chunk 0, last_chunk_edge: chunk 1)
// and, where it sends, one of the stage's blocking sends (p2p_forward_sends / p2p_sends_per_microbatch): the
// simulator's op times (simulator/task_graph.hpp zb_v_op_times) of the same plan.
std::vector<ZbVOpTimes> zb_v_op_times(std::span<const StageMicrobatchTime> stages);
struct ZbVOrder {
  std::vector<std::vector<ChunkOp>> order;  // per stage, in execution order
  std::vector<double> end;                  // per stage, when its last op ends (the order's longest path to it)
  std::vector<std::array<double, 2>> last_w_start;  // per stage and chunk: when its last W (microbatch m - 1) starts
};
// A chunk's last gradient-completing pass on its stage (a V schedule's last W; interleaved chunks of their own
// sizes: the last B): how long before the stage's last op ends it starts, and how long it runs. The chunk's DP
// gradient buckets leave during it (cost_model.cpp dp_reduction_tail_s; the simulator releases them there). Passed
// as one span per step, stage-major: stage i's chunk c at i chunks + c.
struct ChunkWindow {
  double start_before_end = 0, duration = 0;
};
// The order over stages.size() stages and m microbatches. O(p m log p).
ZbVOrder zb_v_order(int64_t m, std::span<const ZbVOpTimes> stages);
// The step: that order over zb_v_op_times(stages), each stage's end (`paths`) the list schedule's, which is the
// longest path through the order as the simulator times it without link contention. Uniform stages with F = B = W,
// p <= 8 and m >= 2p: m t + (p - 1) F / 2, the paper's zero bubble less the first forward's way to the last stage,
// which one iteration (as priced here) keeps (tests/simulator/task_graph_test.cpp). Uniform stages with F, B, W
// apart: tests/simulator/task_graph_test.cpp bounds the bubble. With a finite `cutoff_s` the order stops, and the
// step is +infinity (`paths` untouched), as soon as it is known to exceed the cutoff: when a stage's end so far plus
// the op time it has left does (the search's bound, SearchRequest / EstimateOptions::step_cutoff_s).
double zb_v_step_s(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths = {},
                   double cutoff_s = std::numeric_limits<double>::infinity(), std::span<ChunkWindow> last_w = {});

// DualPipeV (DeepSeek-AI, github.com/deepseek-ai/DualPipe, dualpipev.py: the "cut-in-half" DualPipe of the DeepSeek-V3
// report, arXiv:2412.19437 Sec. 3.2.1; the order below is reproduced from that file from memory, not from a pinned
// revision): ZB-V's V placement (stage i holds virtual stages i and 2p - 1 - i: zb_v_virtual_stage), m >= 2p
// microbatches, and one fixed order per stage in eight steps (r the stage; F0 / F1 a forward of chunk 0 / 1, B a
// backward's input gradient, W a weight gradient):
//   1: 2(p - r - 1) F0;  2: r + 1 x (F0, F1);  3: p - r - 1 x (B1 deferring its W, the oldest W, F1);
//   4: m - 2p + r + 1 x (F0 & B1, F1 & B0);  5: p - r - 1 x (B1, F1 & B0);
//   6: r + 1 x (B1, B0), those from the middle on deferring their W;  7: p - r - 1 x (the oldest W, B0 deferring);
//   8: the remaining W's.
// "X & Y" is the repository's overlapped forward-and-backward of two microbatches (F&B; its all-to-alls hidden behind
// the other's compute: expert_comm.hpp ep_overlap with --overlap-ep), timed here as X then Y; a backward that does
// not defer its W runs it right after. Every stage holds at most 2p + 1 chunk-microbatches at once, 2p - r of chunk 0
// and r + 1 of chunk 1 (the repository's "PP + 1" activations, PP = 2p chunks). Empty stages where m < 2p.
std::vector<std::vector<ChunkOp>> dualpipe_v_order(int64_t p, int64_t m);
// The most bytes one stage's order holds at once: a chunk-microbatch's `chunk_bytes[chunk]` from its forward until
// its weight gradient (W) ends it.
double order_peak_bytes(std::span<const ChunkOp> order, std::span<const double> chunk_bytes);
// The forwards stage `stage` runs in an F & B pair: 2 (m - 2p + stage + 1) + p - stage - 1, the last stage one fewer
// (the repository runs its first pair apart).
int64_t dualpipe_v_paired_forwards(int64_t p, int64_t m, int64_t stage);
// The step: the longest path through dualpipe_v_order over zb_v_op_times(stages) (the V's op times, sends included),
// each stage's end in `paths`, as the simulator times that order without link contention. With a finite cutoff,
// +infinity (paths untouched) once a stage's end so far plus its work left exceeds it (as zb_v_step_s).
double dualpipe_v_step_s(int64_t m, std::span<const StageMicrobatchTime> stages, std::span<double> paths = {},
                         double cutoff_s = std::numeric_limits<double>::infinity(),
                         std::span<ChunkWindow> last_w = {});

// Interleaved 1F1B (Megatron-LM's order, v chunks per stage, m a multiple of p) over stages of different times, the
// same path construction at chunk granularity: the stages before k fill and drain with one chunk each (t_i / v);
// k runs its m microbatches (m t_k); its first backward (microbatch 0's last chunk) waits for the round trip of that
// chunk through the stages after k, D_k = sum_{j>k} t_j / v (with the sends that chunk makes: the last stage's last
// chunk sends no activation, stage 0's chunk 0 no gradient), less the 2 (p-1-k) forward chunks its order runs
// between that chunk's forward and backward, and the last microbatch's last chunk likewise, less the 2 (p-1-k)
// backward chunks before its backward (one gap where the warm-up 2 (p-1-k) + (v-1) p reaches m v - 1; at least the
// trip through the later stages whose warm-up runs every forward chunk first, as in 1F1B):
//   max_k [ sum_{i<k} t_i / v + m t_k + max(0, D_k - n f_k / v) + max(0, D_k - n b_k / v) ],  n = 2 (p-1-k)
// Uniform stages without sends: m t + (p - 1) t / v, Narayanan et al.'s bubble. It replaces m t_max +
// (sum_i t_i - t_max) / v, which charged the stages after the bottleneck whole: on 200 seeded sets with light first
// and last stages that was 0..8.4% above the simulator, this is 0..5.3% below (4.9% with blocking sends;
// tests/simulator/task_graph_test.cpp), the most with m = p, where the warm-up is the whole schedule.
double interleaved_step_s(int64_t m, int64_t v, std::span<const StageMicrobatchTime> stages,
                          std::span<double> paths = {});

// Megatron-LM's interleaved 1F1B order of stage `stage` (forward_backward_pipelining_with_interleaving, without its
// m == p "all warm-up" special case, which only simplifies its p2p pairing: the general order is
// dependency-consistent for m == p too and holds fewer activations): the k-th forward runs microbatch
// (k / pv) p + k % p of chunk (k % pv) / p, the k-th backward the same microbatch of chunk v - 1 - (k % pv) / p; a
// warm-up of interleaved_warmup(p, v, stage) forwards (capped at m v), then one forward and one backward (whole:
// ChunkOp::Kind::backward) each, then the remaining backwards. m a multiple of p. The one definition: the simulator
// runs it, interleaved_order_step_s times it.
std::vector<ChunkOp> interleaved_order(int64_t p, int64_t m, int64_t v, int64_t stage);

// Interleaved 1F1B over stages whose chunks hold different shares of their layers (an explicit per-chunk layout,
// config.hpp chunk_layers, e.g. 4/4,...,0/8) or stages of different sizes (5/5,3/3,4/4,4/4, an uneven last stage,
// Megatron's embedding and loss accounting), where interleaved_step_s's equal stages and chunks do not describe the
// order's waits (it was up to 16% short of the simulator on Qwen3 235B's recipes, 94 layers + 2 over pp 32): the
// longest path through interleaved_order, each op starting when its stage has run the op before it and its input
// has ended (F: the previous virtual stage's F of its microbatch; B: the next one's B, the last virtual stage's
// own F). Chunk c of stage i runs chunk_shares[i v + c] of the stage's work (empty: 1 / v each), the edge layers in the
// chunk that owns them (first_chunk_edge in chunk 0, last_chunk_edge in chunk v - 1), and a forward (backward) sends
// its result on unless it ends (starts) the virtual pipeline, one transfer of the stage's send time per chunk; the
// simulator runs the same order with the same op times, so the two agree exactly without link contention
// (tests/simulator/task_graph_test.cpp). Each stage's end into `paths`; each chunk's last backward into `last_b`
// (ChunkWindow, p v entries; its compute, the send after it left out) where given. O(p m v). With a finite
// `cutoff_s`, +infinity (paths untouched) once a stage's end so far plus its work left exceeds it (as zb_v_step_s).
double interleaved_order_step_s(int64_t m, int64_t v, std::span<const StageMicrobatchTime> stages,
                                std::span<const double> chunk_shares, std::span<double> paths = {},
                                std::span<ChunkWindow> last_b = {},
                                double cutoff_s = std::numeric_limits<double>::infinity());

// Waited pipeline sends (Megatron-LM's batched p2p, p2p_communication.py: send_forward_recv_backward and its
// siblings wait on their requests) that stage i of p pays per microbatch with v chunks: an activation on after every
// forward chunk and a gradient back after every backward chunk, 2 v, less the activation the last stage does not
// send and the gradient the first does not: 2 v - 1 on either edge (0 with one stage). p2p_forward_sends: those after
// forward chunks, v less the last stage's one.
// ZB-V (v = 2 in a V): the first stage sends chunk 0's activation and chunk 1's gradient, the last chunk 1's
// activation and chunk 0's gradient (its turn from chunk 0 to 1 stays on the stage), the others both chunks': 2, 2, 4.
double p2p_sends_per_microbatch(int64_t i, int64_t p, int64_t v, Schedule s = Schedule::one_f_one_b);
double p2p_forward_sends(int64_t i, int64_t p, int64_t v, Schedule s = Schedule::one_f_one_b);

// Overlapped pipeline sends (interleaved, Megatron-Core --overlap-p2p-communication): a transfer delays only the op
// that consumes it, so the step pays the transfers on the fill and drain path: the first microbatch's forward
// through all p v virtual stages and the last microbatch's backward back, 2 (p v - 1) transfers of p2p_s each (the
// v - 1 wraps from the last stage to the first stall the warm-up and the cool-down, which have no other work).
double p2p_fill_drain_s(int64_t p, int64_t v, double p2p_s);

// Closed-form pipeline time: with t_i the per-microbatch time of stage i and t_max the slowest,
//   GPipe:         two flow shops, every forward then every backward (stage p-1's first backward waits for its last
//                  forward): m f_max + (sum_i f_i - f_max) + m b_max + (sum_i b_i - b_max)   (uniform: (m + p - 1) t)
//   1F1B:          one_f_one_b_step_s()                      (uniform: (m + p - 1) t)
//   interleaved:   interleaved_step_s()                      (uniform: (m + (p-1)/v) t)
//   ZB-H1:         zero_bubble_step_s()                      (uniform, m >= p: m t + (p-1) u, u = F + B_input - W)
//   ZB-2p:         zb_2p_step_s()                            (uniform, m >= 2p-1: m t + (p-1) max(F, F + B_input - 2W))
//   ZB-V:          zb_v_step_s(), its order timed            (uniform, F = B_input = W, p <= 8, m >= 2p: m t + (p-1) F/2)
// GPipe's form is exact for its order, blocking sends included, without link contention (a flow shop of m identical
// jobs takes one job's time plus m - 1 of its slowest stage's); the former m t_max + (sum - t_max) was up to 14.4%
// below it where the forward and the backward bottleneck are different stages. Each form is the longest of p paths
// P_k (stage k busy, the others fill and drain), each ending at stage 0.
//
// Per-stage ends, for the DP reduction, optimizer and parameter gather, which start after a stage's last pipeline op,
// not at the pipeline's end. Every stage's last op on the chain is the backward (ZB-H1: B_input) of the same
// (microbatch, chunk), which runs from stage p-1 down to stage 0: stage j reaches it S_j = sum_{i<j} b_i before
// stage 0 (b_i: stage i's backward of that chunk and the gradient it sends; ZB-H1: B_input). The paths through a stage
// k >= j pass that op S_j before they reach stage 0, the others after it, so stage j ends no earlier than
// max_{k>=j} P_k - S_j. 1F1B and ZB-H1: nor before the last microbatch's forward has reached stage j (it leaves a
// stage k <= j once k has run its m forwards and the backwards its order puts before the last one), made its round
// trip through the stages after j, and stage j has run its own last chain op. Under ZB-H1 stage j then runs
// min(j + 1, m) W passes where stage 0 runs one, so a heavy middle stage can end after stage 0: the step is the
// latest end. Against the simulator on 600 seeded uneven stage sets, each without communication and with blocking
// sends (tests/simulator/task_graph_test.cpp), GPipe's step and stage ends are exact, 1F1B's and ZB-H1's never late
// and at most 2.9% / 5.2% of the step early. A stage's last_send_delay_s lengthens the final chain at that stage:
// every path through it or a later stage, its own end and the ends of the stages before it.
// Interleaved: its ends also take a floor, the longest of: stage k's m v forward chunks and the backward chunks its
// order puts before its last forward, after the first microbatch reaches it, then the last microbatch's last-chunk
// forward through the stages after k and its backward through all p v virtual stages.
// `lead`, when not empty (p entries), receives how long before the step's end each stage ends. `post_validation`:
// ZB-2p's continuous-run step (zb_2p_step_s); the other schedules' steps do not change with it. `cutoff_s`: a timed
// order (ZB-V, DualPipeV, interleaved with chunk_shares) stops once its step is known to exceed it (zb_v_step_s);
// step_s is then +infinity and nothing else is set. The closed forms ignore it. `chunk_shares`, when not empty (p v
// entries): interleaved chunks or stages of their own sizes, timed by interleaved_order_step_s (its stage ends
// exact). `windows`, when not empty (p x chunks entries, stage-major): the chunks' last gradient-completing passes
// (ChunkWindow) where an order is timed, a V schedule's (ZB-V, DualPipeV: their last W) and those interleaved
// chunks' (their last B); untouched for the others.
PipelineTime pipeline_time(Schedule s, int64_t m, int64_t v, std::span<const StageMicrobatchTime> stages,
                           std::span<double> lead = {}, bool post_validation = false,
                           double cutoff_s = std::numeric_limits<double>::infinity(),
                           std::span<ChunkWindow> windows = {}, std::span<const double> chunk_shares = {});

}  // namespace parplan
