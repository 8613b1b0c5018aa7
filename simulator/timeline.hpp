// Timeline: what ran where and when during one training step, per pipeline stage and stream. The simulator fills it
// with predicted times and the runtime with measured ones, so it holds no simulator internals.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace parplan {

enum class EventCategory : uint8_t {
  forward,
  backward,          // full backward (input + weight gradients)
  backward_input,    // split backward: input gradients
  backward_weight,   // split backward: weight gradients
  recompute,         // activation recomputation before a backward
  layer_comm,        // exposed (not overlapped) in-layer collectives: TP/SP, CP, EP, ZeRO-3 gathers
  tp_comm,           // a TP/SP collective (overlapped: on its own stream)
  cp_comm,           // a CP ring exchange (overlapped)
  pp_comm,           // a p2p activation / gradient transfer between stages
  dp_comm,           // a data-parallel gradient bucket reduction or parameter all-gather
  zero3_gather,      // ZeRO-3 parameter all-gathers of one pass on the DP link (their exposed part is layer_comm)
  optimizer,         // the optimizer step
  host_copy,         // offload over the host link: optimizer offload's gradient copy down and parameter copy back
                     // (compute stream), activation offload's copies (host stream) and a pass's wait for those
                     // that outlast it (compute stream, with the pass's microbatch)
  ep_comm,           // a MoE token dispatch / combine all-to-all over the ep group (its exposed part is layer_comm)
};
std::string_view to_string(EventCategory c);
bool is_compute(EventCategory c);  // forward / backward / recompute / optimizer (and its host copies)

struct TimelineEvent {
  EventCategory category = EventCategory::forward;
  int32_t microbatch = -1;  // -1: not tied to a microbatch
  int32_t chunk = 0;
  double start_s = 0, end_s = 0;
  int64_t bytes = 0;        // payload of a transfer
  int64_t flow = -1;        // >= 0: a p2p transfer (the trace draws an arrow to the op on peer_stage that uses it)
  int32_t peer_stage = -1;  // transfers: the other stage
  double duration_s() const { return end_s - start_s; }
};

struct TimelineStream {
  std::string name;  // "compute", "tp", "cp", "pp", "dp", "host", "ep"
  std::vector<TimelineEvent> events;  // sorted by start
};

struct MemorySample {
  double t_s = 0;
  double activation_bytes = 0;
};

struct TimelineTrack {
  int64_t stage = 0;
  int64_t rank = 0;  // the representative rank of the stage (tp = cp = dp = 0)
  std::vector<TimelineStream> streams;
  std::vector<MemorySample> memory;  // stored activations over time (step changes)
};

struct Timeline {
  std::string source;  // "simulated" or "measured"
  double step_s = 0;
  std::vector<TimelineTrack> tracks;  // one per pipeline stage
};

}  // namespace parplan
