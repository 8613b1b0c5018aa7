// A rank's program: the ordered ops one rank executes in one training step, produced by lower() and run by the
// executor. Buffers are named slots (what the memory model counts, or a declared allowance), not pointers.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/backend.hpp"

namespace parplan::runtime {

// What an op's time counts towards in the predicted-vs-measured report.
enum class Term : uint8_t {
  forward, backward, recompute, tp_comm, cp_comm, ep_comm, pp_comm, dp_comm, zero3_comm, optimizer, memory
};
inline constexpr int kNumTerms = 11;
std::string_view to_string(Term t);

// Memory categories of the memory model (StageMemory) and the runtime's own allowances.
enum class SlotKind : uint8_t {
  weights, grads, optimizer, activations, recompute_working_set, zero3_buffers,  // counted by the memory model
  scratch,                                                                       // allowance: GEMM/attention operands
};
inline constexpr int kNumSlotKinds = 7;
std::string_view to_string(SlotKind k);
inline bool is_allowance(SlotKind k) { return k == SlotKind::scratch; }

struct Slot {
  SlotKind kind = SlotKind::scratch;
  int64_t bytes = 0;
  bool persistent = true;  // allocated once before the steps; otherwise by alloc/free ops inside the step
  std::string name;        // e.g. "stash mb3 chunk0"
};

// Communication groups. dp_cp is the data-parallel gradient group (dp x cp ranks with the same tp and pp
// coordinates), which the planner's DpCost reduces over. MoE: ep is the expert-parallel group the token dispatch and
// combine all-to-alls run over, edp the expert-data-parallel group (layout.hpp expert_dp_size) that reduces the
// experts' gradients; for a dense model ep is each rank alone and edp equals dp_cp.
// dp_cp: the ranks that shard the model states (dp x cp; with HSDP the shard group, dp / dp_replicate x cp);
// dp_replica: HSDP's replica group (the same place in each of the dp_replicate shard groups).
enum class Group : uint8_t { tp, cp, dp_cp, pp, ep, edp, dp_replica };
inline constexpr int kNumGroups = 7;
std::string_view to_string(Group g);

enum class OpKind : uint8_t { alloc, free, gemm, memory, collective, p2p };

// A pipeline task (the simulator's unit: forward / backward of one microbatch chunk, or the step's tail) that an
// op belongs to, so measured ops can be grouped into the same tasks as the predicted timeline.
enum class Phase : uint8_t { forward, backward, backward_weight, tail };
std::string_view to_string(Phase p);

struct Op {
  OpKind kind = OpKind::memory;
  Term term = Term::forward;
  Phase phase = Phase::forward;
  int64_t microbatch = -1;  // -1: not tied to a microbatch (optimizer, DP sync)
  int64_t chunk = 0;
  int slot = -1;            // alloc/free; memory: the slot it reads and writes; gemm/collective: operand slot
  int b_slot = -1;          // gemm: the B operand (weights) slot
  int c_slot = -1;          // gemm: output slot
  GemmShape gemm;
  int64_t bytes = 0;        // memory: bytes of traffic (read + write); collective/p2p: payload (nccl-tests S)
  int64_t offset = 0;       // collective: byte offset of the operand region inside `slot`
  bool overlap = false;     // collective: compute does not wait for it (DP buckets); the step's end does
  int32_t wait_for = -1;    // >= 0: index of an earlier overlapped collective the compute stream waits for first
  Group group = Group::tp;
  CollectiveKind collective = CollectiveKind::all_reduce;
  int64_t count = 0;        // collective elements (per rank for all_gather / reduce_scatter / all_to_all)
  DType dtype = DType::bf16;
  int peer = -1;            // p2p: rank within the group
  double predicted_s = 0;   // the cost model's time for this op (used in rank-local mode for communication)
  const char* label = "";   // static string: "qkv", "attn.scores", "mlp.up", "tp.all_reduce", ...
};

struct Program {
  int64_t rank = 0;
  int64_t stage = 0;
  std::vector<Slot> slots;
  std::vector<Op> ops;
  // split() colour of this rank's group of each kind (every rank splits all kinds, in Group order).
  int colors[kNumGroups] = {};
};

}  // namespace parplan::runtime
