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
// With HSDP (ParallelConfig::dp_replicate r > 1) the dp index splits as dp_i = dp_shard_i + (dp / r) replica_i, the
// shard index inner: torchtitan's mesh order ["dp_replicate", "dp_shard", "cp", "tp"], tp innermost (from torchtitan's
// parallel_dims.py, not checked against a pinned revision). dp_cp is then the shard group (dp / r x cp ranks, stride
// tp: one block of tp cp dp / r consecutive ranks, often within a node), and dp_replicate the replica group (the r
// ranks with the same shard index, stride tp cp dp / r, across the blocks) that all-reduces each gradient shard.
enum class GroupKind : uint8_t { tp, cp, dp, pp, ep, dp_cp, dp_replicate };

struct RankCoord {
  int64_t tp = 0, cp = 0, dp = 0, pp = 0;
};

RankCoord coord_of(const ParallelConfig& pc, int64_t rank);
int64_t rank_of(const ParallelConfig& pc, const RankCoord& c);
int64_t group_size(const ParallelConfig& pc, GroupKind g);
int64_t group_stride(const ParallelConfig& pc, GroupKind g);
// The ranks of `rank`'s group of kind g, in group order.
std::vector<int64_t> group_ranks(const ParallelConfig& pc, GroupKind g, int64_t rank);
// NVLink domains: blocks of D consecutive ranks, rank r in domain r / D, D the job's share of a domain
// (ClusterSpec::placed_domain of the plan's GPUs; the domain itself when the job fits in one). A group crosses
// domains when its members fall in different domains; a kind crosses when any of its groups does (its collectives
// run in lockstep, so the slowest group sets the pace). Every kind's groups tile the ranks in aligned blocks of
// stride x size ranks, each block interleaving stride groups; a domain boundary inside a block splits one of them
// (with size >= 2 the first group reaches from the block's start to (size - 1) stride, the last from stride - 1 to its
// end), so a kind crosses exactly when there is more than one domain and D is not a multiple of the block.
// Example, D = 72: tp 8 (blocks 0..7, ..., 64..71) never crosses; ep 16 over 144 ranks crosses (block 64..79).
bool group_crosses_domain(const ParallelConfig& pc, GroupKind g, const ClusterSpec& c);
// The worst split of a kind's groups over domains: the most domains one group touches and the fewest of one group's
// members that share a domain (the member whose share of the group is off-domain the most). {1, size} when none
// crosses.
struct DomainSplit {
  int64_t domains = 1, fewest = 1;
};
DomainSplit group_domain_split(const ParallelConfig& pc, GroupKind g, const ClusterSpec& c);
// The link a group's collectives run on: NVLink (intra_node) when no group of the kind crosses an NVLink domain,
// else the per-GPU NIC (inter_node).
const LinkSpec& group_link(const Plan& plan, GroupKind g);
// Whether the data-parallel gradient reduction crosses an NVLink domain: its dp_cp group does, or with HSDP its
// dp_replicate group (the tier the simulator and the link-sharing rule give the reduction).
bool dp_reduction_crosses_domain(const ParallelConfig& pc, const ClusterSpec& c);

// The expert-data-parallel group (MoE): the dp cp / ep ranks that hold the same experts (dp indices equal mod ep,
// every cp index; with HSDP, where ep is 1, the shard group), over which the experts' gradients are reduced and
// their states sharded (Megatron-Core's expert_data_parallel group). Its members span (dp/ep - 1) ep tp cp +
// (cp - 1) tp + 1 consecutive ranks.
int64_t expert_dp_size(const ParallelConfig& pc);
// True when an expert-data-parallel group crosses an NVLink domain (as group_crosses_domain).
bool expert_dp_crosses_domain(const ParallelConfig& pc, const ClusterSpec& c);
const LinkSpec& expert_dp_link(const Plan& plan);

}  // namespace parplan
