// Lowering: a plan and its pipeline schedule (from the simulator, never re-derived here) become one Program per rank.
//
// Sizes come from the planner: GEMM shapes are the ones layer_cost() prices, a layer's memory-bound ops move
// layer_memory_bound_bytes() (element-wise and unfused-softmax traffic, forward and backward), collective payloads are
// LayerCost::tp_bytes (with sequence parallelism also the two backward re-gathers per layer) / cp_bytes, p2p_bytes(), DpCost::grad_bytes in DpCost::buckets buckets, the MoE
// all-to-alls layer_expert_a2a() and the grouped expert GEMMs expert_gemms(), and the slots the
// program allocates are StageMemory's weights, grads, optimizer, activations (one stash per in-flight microbatch
// chunk, allocated at its forward and freed after its backward), recompute working set and ZeRO-3 buffers. The only
// other memory is the declared scratch allowance (GEMM / attention operands and collective staging).
#pragma once
#include <cstdint>
#include <vector>

#include "planner/spec/spec.hpp"
#include "runtime/program.hpp"

namespace parplan::runtime {

// One pipeline task of one stage, in execution order.
struct ScheduleStep {
  Phase phase = Phase::forward;  // forward, backward (input + weight gradients unless the schedule splits them),
                                 // or backward_weight (zero-bubble schedules)
  int64_t microbatch = 0;
  int64_t chunk = 0;  // model chunk on this stage (interleaved schedules); virtual stage = chunk * pp + stage
};

// Rank ranks of the group of kind g that `rank` belongs to, in group order (planner/cost/layout.hpp's rank order).
std::vector<int64_t> group_members(const ParallelConfig& pc, Group g, int64_t rank);
// The split() colour of that group: equal for exactly its members, distinct across groups and kinds.
int group_color(const ParallelConfig& pc, Group g, int64_t rank);

// The program of world rank `rank`, whose stage runs `order`. Throws InputError for plans the runtime cannot lower
// (MoE parallel folding, the DeepEP dispatcher, ZeRO-3 with experts, latent attention, offload), naming the field.
Program lower(const Plan& plan, int64_t rank, const std::vector<ScheduleStep>& order);

}  // namespace parplan::runtime
