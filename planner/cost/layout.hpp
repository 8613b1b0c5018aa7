// Rank layout: which ranks form each tp / cp / dp / pp / ep group and which network tier each group crosses.
// Order (Megatron-LM): tp innermost, then cp, then dp, then pp:  rank = tp_i + tp*(cp_i + cp*(dp_i + dp*pp_i)).
// ep groups are carved out of dp: ep consecutive dp indices (stride tp*cp), as in Megatron-Core's expert parallelism.
#pragma once
#include <cstdint>
#include <vector>

#include "planner/spec/spec.hpp"

namespace parplan {

// dp_cp: the gradient-reduction group (data and context parallel ranks together, stride tp), over which the
// gradient all-reduce / reduce-scatter and the ZeRO gathers run; with dp 1 it is the cp group, with cp 1 the dp group.
enum class GroupKind : uint8_t { tp, cp, dp, pp, ep, dp_cp };

struct RankCoord {
  int64_t tp = 0, cp = 0, dp = 0, pp = 0;
};

RankCoord coord_of(const ParallelConfig& pc, int64_t rank);
int64_t rank_of(const ParallelConfig& pc, const RankCoord& c);
int64_t group_size(const ParallelConfig& pc, GroupKind g);
int64_t group_stride(const ParallelConfig& pc, GroupKind g);
// The ranks of `rank`'s group of kind g, in group order.
std::vector<int64_t> group_ranks(const ParallelConfig& pc, GroupKind g, int64_t rank);
// True when a group of kind g spans more than one node (nodes are blocks of gpus_per_node consecutive ranks).
bool group_crosses_nodes(const ParallelConfig& pc, GroupKind g, int64_t gpus_per_node);
// The link a group's collectives run on: intra-node when the group fits in a node, else the per-GPU NIC.
const LinkSpec& group_link(const Plan& plan, GroupKind g);

// The expert-data-parallel group (MoE): the dp cp / ep ranks that hold the same experts (dp indices equal mod ep,
// every cp index), over which the experts' gradients are reduced and their states sharded (Megatron-Core's
// expert_data_parallel group). Its members span (dp/ep - 1) ep tp cp + (cp - 1) tp + 1 consecutive ranks.
int64_t expert_dp_size(const ParallelConfig& pc);
const LinkSpec& expert_dp_link(const Plan& plan);

}  // namespace parplan
