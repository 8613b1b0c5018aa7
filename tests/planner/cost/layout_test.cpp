// Tests for planner/layout: Megatron rank order (tp innermost, then cp, dp, pp) and network tiers.
#include <doctest/doctest.h>

#include "planner/cost/layout.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

TEST_CASE("Megatron-LM example: 16 GPUs, tp 2, pp 4, dp 2") {
  // Megatron-LM parallel_state docstring: tp groups [g0,g1],[g2,g3]...; pp groups [g0,g4,g8,g12],...; dp [g0,g2],...
  ParallelConfig pc;
  pc.tp = 2;
  pc.pp = 4;
  pc.dp = 2;
  CHECK(group_ranks(pc, GroupKind::tp, 3) == std::vector<int64_t>{2, 3});
  CHECK(group_ranks(pc, GroupKind::pp, 0) == std::vector<int64_t>{0, 4, 8, 12});
  CHECK(group_ranks(pc, GroupKind::pp, 5) == std::vector<int64_t>{1, 5, 9, 13});
  CHECK(group_ranks(pc, GroupKind::dp, 0) == std::vector<int64_t>{0, 2});
  CHECK(group_ranks(pc, GroupKind::dp, 13) == std::vector<int64_t>{13, 15});
  for (int64_t r = 0; r < 16; ++r) CHECK(rank_of(pc, coord_of(pc, r)) == r);
}

TEST_CASE("groups cross nodes exactly when stride x size exceeds the node") {
  ParallelConfig pc;
  pc.tp = 8;
  pc.pp = 8;
  pc.dp = 2;
  CHECK_FALSE(group_crosses_nodes(pc, GroupKind::tp, 8));
  CHECK(group_crosses_nodes(pc, GroupKind::dp, 8));
  CHECK(group_crosses_nodes(pc, GroupKind::pp, 8));
  pc.tp = 2;
  pc.dp = 4;
  pc.pp = 1;
  CHECK_FALSE(group_crosses_nodes(pc, GroupKind::dp, 8));
  Plan p = test::korthikanti_175b();
  CHECK(&group_link(p, GroupKind::tp) == &p.cluster.intra_node);
  CHECK(&group_link(p, GroupKind::pp) == &p.cluster.inter_node);
}

TEST_CASE("cp and ep groups") {
  ParallelConfig pc;
  pc.tp = 2;
  pc.cp = 2;
  pc.dp = 4;
  pc.ep = 2;
  CHECK(group_ranks(pc, GroupKind::cp, 1) == std::vector<int64_t>{1, 3});
  CHECK(group_ranks(pc, GroupKind::dp, 0) == std::vector<int64_t>{0, 4, 8, 12});
  CHECK(group_ranks(pc, GroupKind::ep, 8) == std::vector<int64_t>{8, 12});
}

TEST_CASE("the gradient-reduction group is dp x cp: it crosses nodes with dp 1 when cp does") {
  ParallelConfig pc;
  pc.tp = 2;
  pc.cp = 2;
  pc.dp = 4;
  // Ranks with the same tp and pp coordinates, stride tp, in (cp, dp) order.
  CHECK(group_ranks(pc, GroupKind::dp_cp, 0) == std::vector<int64_t>{0, 2, 4, 6, 8, 10, 12, 14});
  CHECK(group_ranks(pc, GroupKind::dp_cp, 13) == std::vector<int64_t>{1, 3, 5, 7, 9, 11, 13, 15});
  // tp 8, cp 2, dp 1 on 8-GPU nodes: the dp group has one rank, the dp x cp group spans two nodes.
  pc.tp = 8;
  pc.cp = 2;
  pc.dp = 1;
  CHECK_FALSE(group_crosses_nodes(pc, GroupKind::dp, 8));
  CHECK(group_crosses_nodes(pc, GroupKind::dp_cp, 8));
  CHECK(group_ranks(pc, GroupKind::dp_cp, 3) == std::vector<int64_t>{3, 11});
  pc.tp = 4;
  CHECK_FALSE(group_crosses_nodes(pc, GroupKind::dp_cp, 8));
}

// MoE parallel folding (Megatron-Core --expert-tensor-parallel-size; Liu et al. 2025, arXiv:2504.14960): a stage's
// tp x cp x dp ranks are refolded as etp x ep x edp for the experts, etp innermost.
TEST_CASE("expert groups under parallel folding: etp innermost, then ep, then edp") {
  ParallelConfig pc;
  pc.tp = 2;
  pc.dp = 128;
  pc.ep = 8;
  pc.etp = 1;
  // The expert-parallel group is 8 consecutive ranks, inside one 8-GPU node, although tp 2 x dp puts the attention's
  // dp groups 2 ranks apart.
  CHECK(group_ranks(pc, GroupKind::ep, 13) == std::vector<int64_t>{8, 9, 10, 11, 12, 13, 14, 15});
  CHECK_FALSE(group_crosses_nodes(pc, GroupKind::ep, 8));
  CHECK(group_ranks(pc, GroupKind::dp, 13) != group_ranks(pc, GroupKind::ep, 13));
  pc.etp = 2;
  CHECK(group_ranks(pc, GroupKind::ep, 13) == std::vector<int64_t>{1, 3, 5, 7, 9, 11, 13, 15});
  CHECK(group_crosses_nodes(pc, GroupKind::ep, 8));
  pc.etp = 0;  // unset: ep groups within dp, tp apart (the layout before folding)
  CHECK(group_ranks(pc, GroupKind::ep, 13) == std::vector<int64_t>{1, 3, 5, 7, 9, 11, 13, 15});
}

// The Megatron-Core MoE ModelZoo table states each recipe's expert-data-parallel size beside its mesh: folding
// derives it as tp cp dp / (ep etp).
TEST_CASE("expert-data-parallel size: the Megatron-Core Qwen3-235B recipes' stated EDP") {
  struct Recipe {
    int64_t tp, dp, ep, etp, edp;
  };
  for (const Recipe& r : {Recipe{2, 128, 8, 1, 32}, Recipe{2, 16, 32, 1, 1}, Recipe{4, 8, 8, 1, 4}, Recipe{2, 4, 8, 1, 1}}) {
    ParallelConfig pc;
    pc.tp = r.tp;
    pc.dp = r.dp;
    pc.ep = r.ep;
    pc.etp = r.etp;
    CAPTURE(r.tp);
    CAPTURE(r.dp);
    CAPTURE(r.ep);
    CHECK(expert_dp_size(pc) == r.edp);
  }
}
