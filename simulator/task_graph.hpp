// The task graph of one training step: a pipeline schedule expanded with per-stage durations into compute tasks,
// exposed in-layer communication, p2p transfers, overlapped collectives, DP gradient buckets and the optimizer.
// Durations arrive as StepCosts (plain numbers, filled from the planner in costs.cpp or by hand in tests).
#pragma once
#include <cstdint>
#include <vector>

#include "simulator/engine.hpp"
#include "simulator/schedule.hpp"
#include "simulator/timeline.hpp"

namespace parplan::sim {

// One microbatch through one chunk of one stage. Exposed comm is what stays on the compute stream after the
// configured overlaps; the *_overlapped_s fields are the full collectives shown on their own streams.
struct ChunkCosts {
  double forward_s = 0, forward_comm_s = 0;
  double backward_input_s = 0, backward_comm_s = 0;
  double backward_weight_s = 0;
  double recompute_s = 0, recompute_comm_s = 0;
  double tp_overlapped_forward_s = 0, tp_overlapped_backward_s = 0;  // 0 when TP overlap is off
  double cp_overlapped_forward_s = 0, cp_overlapped_backward_s = 0;  // 0 when CP overlap is off
  // Exposed comm by kind over all passes of one microbatch (sums to forward+backward+recompute comm).
  double exposed_tp_s = 0, exposed_cp_s = 0, exposed_ep_s = 0, exposed_zero3_s = 0;
  // ZeRO-3: the chunk's parameter all-gathers of one pass, whole, as time on the DP link (0 without ZeRO-3). They
  // occupy the link the gradient reduce-scatters use; what they add to the critical path is in *_comm_s above.
  double zero3_gather_forward_s = 0, zero3_gather_backward_s = 0, zero3_gather_recompute_s = 0;
  // Activation offload: the chunk's stored activations copied to the host beside the forward and back beside the
  // backward, whole, on the host stream; what outlasts the compute is in *_comm_s above and in exposed_offload_s
  // (the forward's part exposed_offload_forward_s, the rest the backward's): a host_copy task on the compute stream.
  double host_copy_s = 0, exposed_offload_s = 0, exposed_offload_forward_s = 0;
  // MoE with ep > 1: the chunk's token dispatch and combine all-to-alls of one pass, whole, on the ep stream (their
  // exposed part is in *_comm_s above and exposed_ep_s).
  double ep_forward_s = 0, ep_backward_s = 0;
};

struct StageCosts {
  std::vector<ChunkCosts> chunks;  // one per chunk (v)
  int64_t dp_buckets = 0;          // gradient buckets reduced per step (0: no DP reduction)
  double dp_bucket_s = 0;          // time of one bucket alone on the link
  int64_t dp_bucket_bytes = 0;
  bool dp_per_microbatch = false;  // ZeRO-2/3: buckets reduced after every microbatch's backward
  int64_t layers_per_chunk = 1;    // ZeRO-2/3 with overlap: a microbatch's buckets leave in up to this many pieces
  double param_gather_s = 0;       // all-gather of updated parameters after the optimizer (sharded optimizer)
  double embedding_grad_s = 0;     // tied-embedding gradient all-reduce, first <-> last stage, before the optimizer
  double optimizer_s = 0;          // on the GPU, or (optimizer offload) the host CPU's step
  // Optimizer offload: the gradient shard's copy to the host before the optimizer, the updated parameters' copy back
  // after it (offload.hpp: serial with it).
  double grad_to_host_s = 0, params_to_gpu_s = 0;
  int32_t pp_tier = 0, dp_tier = 0;  // network tier of the stage's p2p sends and DP collectives (0 intra, 1 inter)
};

struct StepCosts {
  std::vector<StageCosts> stages;
  double p2p_s = 0;        // one activation (or gradient) transfer between neighbouring stages
  int64_t p2p_bytes = 0;
  bool p2p_blocking = false;  // the sender's compute stream waits for its sends (no overlap)
  bool dp_overlap = true;     // buckets start as backward produces them; off: after the stage's last backward
};

// What each task of the graph is, for the timeline and the summary.
enum class StreamKind : uint8_t { compute, tp, cp, pp, dp, host, ep };
inline constexpr int kNumStreamKinds = 7;
const char* to_string(StreamKind k);

struct TaskInfo {
  int32_t stage = 0;
  StreamKind stream = StreamKind::compute;
  EventCategory category = EventCategory::forward;
  int32_t microbatch = -1, chunk = 0;
  int32_t peer_stage = -1;
  int64_t bytes = 0;
  int64_t flow = -1;
  const ChunkCosts* costs = nullptr;  // compute tasks of a pipeline op: the chunk costs (for per-kind comm)
  bool last_piece = true;             // an op split into pieces (bucket readiness): the piece that ends it
};

struct StepGraph {
  TaskGraph graph;
  std::vector<TaskInfo> info;  // parallel to graph tasks
  std::vector<int32_t> stage_stream;  // stage * kNumStreamKinds + kind -> stream id
  std::vector<int32_t> optimizer_task;  // per stage: the optimizer step's first task (offload: the gradient copy)
  std::vector<int32_t> optimizer_end_task;  // per stage: its last task (offload: the parameter copy back)
  std::vector<int32_t> first_gather_task, last_gather_task;  // per stage, -1 without a parameter gather
  // Per stage: the tied-embedding all-reduce (-1: none) and the stage's last DP bucket before it (-1: none); it also
  // waits for the stage's last compute. The all-reduce joins the first and last stage, so it may wait for the other
  // stage too: that wait is idle time, not DP communication.
  std::vector<int32_t> embedding_task, embedding_after_bucket;
};

// Expands schedule x costs. costs.stages.size() must equal s.stages and each stage must have s.chunks chunk entries.
StepGraph build_step_graph(const PipelineSchedule& s, const StepCosts& costs);

// The tasks build_step_graph() makes for p stages, m microbatches, v chunks per stage (`split_backward`: ZB-H1's
// separate input- and weight-gradient passes), counted from the costs alone: nothing is built, not even the schedule.
// Counting stops once past `limit` (the result is then some number above it).
int64_t count_step_tasks(int64_t p, int64_t m, int64_t v, bool split_backward, const StepCosts& costs, int64_t limit);

// ZB-V's op times on each stage's compute stream, for its order (make_schedule): an F its forward and exposed comm;
// a B its recompute, input-gradient backward and exposed comm; a W its weight-gradient backward; each with the
// blocking send after it where its result leaves the stage (zb_v_sends). costs.stages: 2 chunks each.
std::vector<ZbVOpTimes> zb_v_op_times(const StepCosts& costs);

}  // namespace parplan::sim
