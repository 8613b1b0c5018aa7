// Pipeline schedules in closed form: in-flight microbatches per stage and step time / bubble.
// Sources: GPipe (Huang et al. 2019) and 1F1B (Narayanan et al. 2021, Sec. 2.2): bubble (p-1)/m of the ideal time,
// (p-1)/(m+p-1) of the step; interleaved 1F1B with v chunks: (p-1)/(v m) (Narayanan 2021 Sec. 2.2.2);
// ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"): bubble (p-1)(T_F + T_B - T_W) vs 1F1B's
// (p-1)(T_F + T_B + T_W). In-flight activations: GPipe m; 1F1B min(p - i, m); interleaved stage i holds
// min(2(p-i-1) + (v-1)p + 1, v m) chunk-microbatches (Megatron-LM warm-up + 1; stage 0: p + (p-1)/v microbatches,
// Korthikanti et al. 2022 Sec. 4.2.3); ZB-H1 min(p, m) on every stage: stage i defers its W passes by i
// microbatches, so it holds p - i microbatches awaiting B and up to i awaiting W, each kept whole until its W (as the
// runtime keeps it): Qi et al.'s memory bound for ZB-H1, p M_B (1F1B's stage-0 peak), reached on every stage.
#pragma once
#include <cstdint>
#include <span>

#include "planner/spec.hpp"

namespace parplan {

// Chunk-microbatches whose activations stage `stage` holds at its peak (a chunk is 1/v of the stage's layers).
int64_t in_flight_chunks(Schedule s, int64_t p, int64_t m, int64_t v, int64_t stage);

// Microbatches whose first chunk stage `stage` holds at that same peak: the count of embedding outputs the first stage
// stores. One chunk per stage: in_flight_chunks. Interleaved: Megatron-LM's order (the k-th forward runs chunk
// (k mod pv) / p, the k-th backward chunk v - 1 - (k mod pv) / p) runs chunk 0's forwards ahead and its backwards last,
// so it holds more than in_flight_chunks / v of them: p = 2, v = 2, m = 4, stage 0 holds 5 chunk-microbatches of which
// 4 are chunk 0 (not 2.5). Every steady-state forward reaches the chunk peak, so both maxima coincide.
int64_t in_flight_first_chunks(Schedule s, int64_t p, int64_t m, int64_t v, int64_t stage);

// Per-stage, per-microbatch time (all v chunks of the stage), split as the schedules need it.
struct StageMicrobatchTime {
  double forward_s = 0;         // forward compute + exposed in-layer comm
  double backward_input_s = 0;  // input-gradient backward (+ recompute)
  double backward_weight_s = 0; // weight-gradient backward
  double p2p_s = 0;             // blocking p2p sends/receives of this stage per microbatch
  double total() const { return forward_s + backward_input_s + backward_weight_s + p2p_s; }
};

struct PipelineTime {
  double step_s = 0;    // from the first forward to the last backward
  double busy_s = 0;    // m x the slowest stage's per-microbatch time
  double bubble_s = 0;  // step_s - busy_s
  int64_t slowest_stage = 0;
};

// 1F1B step with m >= p microbatches over stages of different times t_i = f_i + b_i (f: forward and half the p2p,
// b: backward and the other half): the longest of the paths that keep one stage k busy from its first forward to its
// last backward. The stages before k fill and drain (their whole t_i); k runs m microbatches; a microbatch's round
// trip through the stages after it, D_k = sum_{j>k} t_j, stalls k only by what its p-1-k warm-up forwards (before its
// first backward) and cool-down backwards (after its last forward) do not cover:
//   max_k [ sum_{i<k} t_i + m t_k + max(0, D_k - (p-1-k) f_k) + max(0, D_k - (p-1-k) b_k) ]
// Uniform stages: (m + p - 1) t, the textbook value; a heavier last stage: m t_max + (sum - t_max) as before. A lighter
// stage after the bottleneck costs less than its t. Derived here from the 1F1B order (Narayanan et al. 2021,
// Sec. 2.2); against a list schedule of that order over 3,000 seeded stage-time sets (tests/planner/pipeline_test.cpp:
// first/last stages scaled as uneven splits make them, and arbitrary times) it is never above, exact on 2,440, at
// most 5.2% below (the stages after k can themselves be busy when the round trip reaches them), where
// m t_max + (sum - t_max), which charged every other stage whole, was up to 25.2% above. GPipe keeps that form.
double one_f_one_b_step_s(int64_t m, std::span<const StageMicrobatchTime> stages);

// Waited pipeline sends (Megatron-LM's batched p2p, p2p_communication.py: send_forward_recv_backward and its
// siblings wait on their requests) that stage i of p pays per microbatch with v chunks: an activation on after every
// forward chunk and a gradient back after every backward chunk, 2 v, less the activation the last stage does not
// send and the gradient the first does not: 2 v - 1 on either edge (0 with one stage).
double p2p_sends_per_microbatch(int64_t i, int64_t p, int64_t v);

// Overlapped pipeline sends (interleaved, Megatron-Core --overlap-p2p-communication): a transfer delays only the op
// that consumes it, so the step pays the transfers on the fill and drain path: the first microbatch's forward
// through all p v virtual stages and the last microbatch's backward back, 2 (p v - 1) transfers of p2p_s each (the
// v - 1 wraps from the last stage to the first stall the warm-up and the cool-down, which have no other work).
double p2p_fill_drain_s(int64_t p, int64_t v, double p2p_s);

// Closed-form pipeline time: with t_i the per-microbatch time of stage i and t_max the slowest,
//   GPipe:         m t_max + (sum_i t_i - t_max)             (uniform: (m + p - 1) t)
//   1F1B:          m < p as GPipe; m >= p one_f_one_b_step_s() (uniform: (m + p - 1) t)
//   interleaved:   m t_max + (sum_i t_i - t_max) / v         (uniform: (m + (p-1)/v) t)
//   ZB-H1, m >= p: m t_max + (sum_i u_i - u_max), u_i = F + B_input - B_weight + p2p   (uniform: m t + (p-1) u)
//   ZB-H1, m < p:  m g_max + (sum_i g_i - g_max) + W_0, g_i = F + B_input + p2p   (uniform: (m + p - 1)(F + B) + W)
// The m < p form is derived from the schedule (stage i defers its W by i microbatches; Qi et al. state only the
// m >= p bubble): the warm-up never reaches steady state, every W except the first stage's last one runs in an idle
// slot, so the critical path is 1F1B's over F + B_input followed by one W. It equals the simulator for uniform stages
// with W <= F (tests/simulator/task_graph_test.cpp) and is 1F1B's (m + p - 1)(F + B + W) less (m + p - 2) W.
PipelineTime pipeline_time(Schedule s, int64_t m, int64_t v, std::span<const StageMicrobatchTime> stages);

}  // namespace parplan
