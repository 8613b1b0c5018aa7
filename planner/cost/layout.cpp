// Rank layout (see layout.hpp for the order and its source).
#include "planner/cost/layout.hpp"

#include <algorithm>
#include <numeric>

namespace parplan {

RankCoord coord_of(const ParallelConfig& pc, int64_t rank) {
  RankCoord c;
  c.tp = rank % pc.tp;
  rank /= pc.tp;
  c.cp = rank % pc.cp;
  rank /= pc.cp;
  c.dp = rank % pc.dp;
  c.pp = rank / pc.dp;
  return c;
}

int64_t rank_of(const ParallelConfig& pc, const RankCoord& c) {
  return c.tp + pc.tp * (c.cp + pc.cp * (c.dp + pc.dp * c.pp));
}

int64_t group_size(const ParallelConfig& pc, GroupKind g) {
  switch (g) {
    case GroupKind::tp:
      return pc.tp;
    case GroupKind::cp:
      return pc.cp;
    case GroupKind::dp:
      return pc.dp;
    case GroupKind::pp:
      return pc.pp;
    case GroupKind::ep:
      return pc.ep;
    case GroupKind::dp_cp:
      return pc.shard_group();
    case GroupKind::dp_replicate:
      return pc.dp_replicate > 1 ? pc.dp_replicate : 1;
  }
  return 1;
}

int64_t group_stride(const ParallelConfig& pc, GroupKind g) {
  switch (g) {
    case GroupKind::tp:
      return 1;
    case GroupKind::cp:
    case GroupKind::dp_cp:
      return pc.tp;
    case GroupKind::dp:
      return pc.tp * pc.cp;
    case GroupKind::ep:
      return pc.etp > 0 ? pc.etp : pc.tp * pc.cp;  // folding: etp innermost, then ep
    case GroupKind::pp:
      return pc.tp * pc.cp * pc.dp;
    case GroupKind::dp_replicate:
      return pc.tp * pc.shard_group();
  }
  return 1;
}

std::vector<int64_t> group_ranks(const ParallelConfig& pc, GroupKind g, int64_t rank) {
  const int64_t size = group_size(pc, g), stride = group_stride(pc, g);
  RankCoord c = coord_of(pc, rank);
  int64_t index = 0;
  switch (g) {
    case GroupKind::tp:
      index = c.tp;
      break;
    case GroupKind::cp:
      index = c.cp;
      break;
    case GroupKind::dp:
      index = c.dp;
      break;
    case GroupKind::ep:  // folding: the rank's place in its stage, refolded as etp x ep x edp
      index = pc.etp > 0 ? (rank % (pc.tp * pc.cp * pc.dp)) / pc.etp % pc.ep : c.dp % pc.ep;
      break;
    case GroupKind::pp:
      index = c.pp;
      break;
    case GroupKind::dp_cp:
      index = c.cp + pc.cp * (c.dp % pc.dp_shard());
      break;
    case GroupKind::dp_replicate:
      index = c.dp / pc.dp_shard();
      break;
  }
  const int64_t first = rank - index * stride;
  std::vector<int64_t> ranks(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) ranks[static_cast<size_t>(i)] = first + i * stride;
  return ranks;
}

bool group_crosses_domain(const ParallelConfig& pc, GroupKind g, const ClusterSpec& c) {
  const int64_t size = group_size(pc, g);
  return size > 1 && c.domain_splits_blocks(group_stride(pc, g) * size, pc.gpus());
}

DomainSplit group_domain_split(const ParallelConfig& pc, GroupKind g, const ClusterSpec& c) {
  const int64_t n = group_size(pc, g), s = group_stride(pc, g), D = c.placed_domain(pc.gpus()), block = s * n;
  DomainSplit worst{1, n};
  if (!group_crosses_domain(pc, g, c)) return worst;
  // The layout repeats every lcm(block, D) ranks: one period's groups are all the cases.
  const int64_t period = std::min(pc.gpus(), std::lcm(block, D));
  for (int64_t b = 0; b < period; b += block) {
    for (int64_t f = b; f < b + s; ++f) {  // the group whose members are f, f + s, ..., f + (n - 1) s
      const int64_t last = f + (n - 1) * s;
      int64_t touched = 0;
      for (int64_t d = f / D; d <= last / D; ++d) {  // members in [lo, hi]: i from ceil((lo - f) / s) to (hi - f) / s
        const int64_t lo = std::max(f, d * D), hi = std::min(last, (d + 1) * D - 1);
        const int64_t members = (hi - f) / s - (lo - f + s - 1) / s + 1;
        if (members <= 0) continue;  // a domain between two members (stride > D)
        ++touched;
        worst.fewest = std::min(worst.fewest, members);
      }
      worst.domains = std::max(worst.domains, touched);
    }
  }
  return worst;
}

int64_t expert_dp_size(const ParallelConfig& pc) {
  return pc.etp > 0 ? pc.tp * pc.cp * pc.dp / (pc.ep * pc.etp) : pc.shard_group() / pc.ep;
}

bool expert_dp_crosses_domain(const ParallelConfig& pc, const ClusterSpec& c) {
  if (expert_dp_size(pc) <= 1) return false;
  if (pc.dp_replicate > 1) return group_crosses_domain(pc, GroupKind::dp_cp, c);  // ep 1: the shard group
  // Folding: etp ep-strided groups tiling each stage. Otherwise: with dp/ep >= 2 every group reaches across its stage
  // (dp indices ep apart, every cp index), which the groups' spans cover with no gap; with dp = ep the group is the
  // cp group.
  const int64_t stage = pc.tp * pc.cp * pc.dp;
  const int64_t block = pc.etp > 0 || pc.dp / pc.ep >= 2 ? stage : pc.tp * pc.cp;
  return c.domain_splits_blocks(block, pc.gpus());
}

const LinkSpec& expert_dp_link(const Plan& plan) {
  return expert_dp_crosses_domain(plan.parallel, plan.cluster) ? plan.cluster.inter_node
                                                                               : plan.cluster.intra_node;
}

bool dp_reduction_crosses_domain(const ParallelConfig& pc, const ClusterSpec& c) {
  return group_crosses_domain(pc, GroupKind::dp_cp, c) ||
         (pc.dp_replicate > 1 && group_crosses_domain(pc, GroupKind::dp_replicate, c));
}

const LinkSpec& group_link(const Plan& plan, GroupKind g) {
  return group_crosses_domain(plan.parallel, g, plan.cluster) ? plan.cluster.inter_node
                                                                              : plan.cluster.intra_node;
}

}  // namespace parplan
