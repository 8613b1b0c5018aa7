// Rank layout (see layout.hpp for the order and its source).
#include "planner/cost/layout.hpp"

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
      return pc.dp * pc.cp;
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
      index = c.cp + pc.cp * c.dp;
      break;
  }
  const int64_t first = rank - index * stride;
  std::vector<int64_t> ranks(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) ranks[static_cast<size_t>(i)] = first + i * stride;
  return ranks;
}

bool group_crosses_nodes(const ParallelConfig& pc, GroupKind g, int64_t gpus_per_node) {
  const int64_t size = group_size(pc, g);
  if (size <= 1) return false;
  return group_stride(pc, g) * size > gpus_per_node;
}

int64_t expert_dp_size(const ParallelConfig& pc) {
  return pc.etp > 0 ? pc.tp * pc.cp * pc.dp / (pc.ep * pc.etp) : pc.dp * pc.cp / pc.ep;
}

const LinkSpec& expert_dp_link(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  // Folding: the expert-data-parallel ranks are etp x ep apart; otherwise dp ranks ep apart and the cp ranks.
  const int64_t span = pc.etp > 0 ? (expert_dp_size(pc) - 1) * pc.ep * pc.etp + 1
                                  : (pc.dp / pc.ep - 1) * pc.ep * pc.tp * pc.cp + (pc.cp - 1) * pc.tp + 1;
  return expert_dp_size(pc) > 1 && span > plan.cluster.gpus_per_node ? plan.cluster.inter_node : plan.cluster.intra_node;
}

const LinkSpec& group_link(const Plan& plan, GroupKind g) {
  return group_crosses_nodes(plan.parallel, g, plan.cluster.gpus_per_node) ? plan.cluster.inter_node
                                                                            : plan.cluster.intra_node;
}

}  // namespace parplan
