// Pipeline schedules: THE single definition of per-stage op order (GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZB-2p), their
// cross-stage dependencies and the live-activation counts they imply. The simulator times these orders; the
// runtime executes the same ones.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "planner/cost/pipeline.hpp"
#include "planner/spec/spec.hpp"

namespace parplan::sim {

enum class OpKind : uint8_t {
  forward,
  backward,         // full backward: input and weight gradients
  backward_input,   // ZB-H1, ZB-2p: input-gradient half (on the critical path)
  backward_weight,  // ZB-H1, ZB-2p: weight-gradient half (deferred to fill bubbles)
};
const char* to_string(OpKind k);

struct PipeOp {
  OpKind kind = OpKind::forward;
  int32_t microbatch = 0;
  int32_t chunk = 0;  // model chunk on this stage; virtual stage = chunk * stages + stage (Megatron-LM; ZB-V: below)
  bool operator==(const PipeOp&) const = default;
};

struct PipelineSchedule {
  Schedule schedule = Schedule::one_f_one_b;
  int64_t stages = 1, microbatches = 1, chunks = 1;
  std::vector<std::vector<PipeOp>> order;  // order[stage] = ops in execution order

  int64_t virtual_stages() const { return stages * chunks; }
  // ZB-V's and DualPipeV's V: chunk 0 of stage i is virtual stage i, chunk 1 is 2p - 1 - i (the last stage runs p - 1
  // and p).
  bool v_shape() const { return v_shaped(schedule); }
  int64_t virtual_stage(int64_t stage, int64_t chunk) const {
    return v_shape() ? zb_v_virtual_stage(stages, stage, chunk) : chunk * stages + stage;
  }
  int64_t stage_of(int64_t vstage) const {
    return v_shape() && vstage >= stages ? 2 * stages - 1 - vstage : vstage % stages;
  }
  int64_t chunk_of(int64_t vstage) const { return vstage / stages; }
};

// The op order of every stage. p stages, m microbatches, v chunks per stage (v must be 1 unless interleaved).
//  gpipe:        all forwards, then all backwards (Huang et al. 2019).
//  one_f_one_b:  min(p-i-1, m) warm-up forwards, then one forward / one backward, then the remaining backwards
//                (Narayanan et al. 2021, Megatron-LM non-interleaved).
//  interleaved:  Megatron-LM's interleaved 1F1B: the k-th forward on a stage runs microbatch (k / pv) p + k % p of
//                chunk (k % pv) / p, backwards walk the chunks in reverse; warm-up 2(p-i-1) + (v-1)p forwards
//                (capped at mv). Requires m % p == 0.
//  zero_bubble:  ZB-H1 (Qi et al. 2023): 1F1B with the backward split into B (input grad) and W (weight grad);
//                stage i defers its W passes by i microbatches so the last stages keep the gradient flowing and
//                fill their cool-down with W. Bubble (p-1)(F + B - W) when W <= F + B.
//  zb_2p:        ZB-2p (Qi et al. 2023), ZB-H2's shape: one list schedule of all stages with unit op times, each free
//                stage running its next B if its gradient has arrived, else its next F if its input has arrived and
//                fewer than 2p - 1 microbatches await their W, else a pending W (schedule.cpp). Stage i runs
//                2(p-1-i) + 1 forwards before its first B; min(2p - 1, m) stashes on every stage.
//  zb_v:         ZB-V (Qi et al. 2023, arXiv:2401.10241 Sec. 6; Qi et al. 2024, "Pipeline Parallelism with
//                Controllable Memory", V-ZB): 2 chunks per stage in a V (virtual_stage()), the order of
//                planner/cost/pipeline.hpp zb_v_order() (a list schedule over the stages' op times `zb_v_times`,
//                unit times where empty: B first, then F while fewer than 2p chunk-microbatches await their W, then
//                W). min(2p, 2m) chunk stashes (p M_B, 1F1B's stage-0 peak) on every stage. With T_F = T_B = T_W the
//                step is m t + (p - 1) F / 2 for p <= 8, m >= 2p; p 16..32 about 1.3% more (task_graph_test.cpp).
// Throws InputError for p, m, v < 1, v > 1 on a non-interleaved schedule (ZB-V: v != 2), m % p != 0 on
// interleaved, or op times given to another schedule than ZB-V or for other than p stages.
PipelineSchedule make_schedule(Schedule s, int64_t p, int64_t m, int64_t v = 1,
                               std::span<const ZbVOpTimes> zb_v_times = {});
// The plan's schedule (v = vpp for interleaved, 2 for ZB-V, else 1).
PipelineSchedule make_schedule(const Plan& plan, std::span<const ZbVOpTimes> zb_v_times = {});

// The op on another (virtual) stage that `op` at `stage` waits for, if any: F needs F of the previous virtual
// stage; B / B_input need B / B_input of the next virtual stage (the last virtual stage: its own F, same stage);
// W needs its own B_input (same stage). Same-stage order is implied by the order itself.
struct CrossDep {
  bool exists = false;
  int64_t stage = 0;  // physical stage of the producer
  PipeOp op;          // the producer
};
CrossDep cross_stage_dependency(const PipelineSchedule& s, int64_t stage, const PipeOp& op);

// Live chunk-microbatches per stage over the stage's own op sequence: activations are allocated by F and freed by B
// (or B_input); `peak_until_weight_grad` additionally counts chunk-microbatches whose W has not run (ZB-H1 keeps the
// inputs of the weight-gradient GEMMs until then). live[stage][k] = activations held after the stage's k-th op.
struct LiveActivations {
  std::vector<std::vector<int32_t>> live;
  std::vector<int64_t> peak;                    // max over the order, per stage (chunk-microbatches)
  std::vector<int64_t> peak_until_weight_grad;  // F..W (equals peak for schedules without a split backward)
};
LiveActivations live_activations(const PipelineSchedule& s);

}  // namespace parplan::sim
