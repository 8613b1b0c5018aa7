// Tests for planner/layout: Megatron rank order (tp innermost, then cp, dp, pp) and network tiers.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "planner/cost/layout.hpp"
#include "planner/spec/config.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
// A cluster of `gpn`-GPU nodes and NVLink domains of `domain` GPUs (0: a domain per node).
ClusterSpec nodes_of(int64_t gpn, int64_t domain = 0) {
  ClusterSpec c;
  c.gpus_per_node = gpn;
  c.nvlink_domain_gpus = domain;
  return c;
}
}  // namespace

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

TEST_CASE("groups cross nodes where stride x size exceeds the node") {
  ParallelConfig pc;
  pc.tp = 8;
  pc.pp = 8;
  pc.dp = 2;
  CHECK_FALSE(group_crosses_domain(pc, GroupKind::tp, nodes_of(8)));
  CHECK(group_crosses_domain(pc, GroupKind::dp, nodes_of(8)));
  CHECK(group_crosses_domain(pc, GroupKind::pp, nodes_of(8)));
  pc.tp = 2;
  pc.dp = 4;
  pc.pp = 1;
  CHECK_FALSE(group_crosses_domain(pc, GroupKind::dp, nodes_of(8)));
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
  CHECK_FALSE(group_crosses_domain(pc, GroupKind::dp, nodes_of(8)));
  CHECK(group_crosses_domain(pc, GroupKind::dp_cp, nodes_of(8)));
  CHECK(group_ranks(pc, GroupKind::dp_cp, 3) == std::vector<int64_t>{3, 11});
  pc.tp = 4;
  CHECK_FALSE(group_crosses_domain(pc, GroupKind::dp_cp, nodes_of(8)));
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
  CHECK_FALSE(group_crosses_domain(pc, GroupKind::ep, nodes_of(8)));
  CHECK(group_ranks(pc, GroupKind::dp, 13) != group_ranks(pc, GroupKind::ep, 13));
  pc.etp = 2;
  CHECK(group_ranks(pc, GroupKind::ep, 13) == std::vector<int64_t>{1, 3, 5, 7, 9, 11, 13, 15});
  CHECK(group_crosses_domain(pc, GroupKind::ep, nodes_of(8)));
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

namespace {
int64_t domain_of(int64_t rank, int64_t D) { return rank / D; }

// Brute force over every rank: the most domains one group touches and its fewest members in one domain ({1, n} when
// no group crosses), from group_ranks().
DomainSplit brute_split(const ParallelConfig& pc, GroupKind g, int64_t D) {
  DomainSplit worst{1, group_size(pc, g)};
  bool crosses = false;
  for (int64_t r = 0; r < pc.gpus(); ++r) {
    const std::vector<int64_t> ranks = group_ranks(pc, g, r);
    std::map<int64_t, int64_t> per_domain;
    for (int64_t m : ranks) ++per_domain[domain_of(m, D)];
    if (per_domain.size() < 2) continue;
    crosses = true;
    worst.domains = std::max(worst.domains, static_cast<int64_t>(per_domain.size()));
    for (const auto& [d, k] : per_domain) worst.fewest = std::min(worst.fewest, k);
  }
  return crosses ? worst : DomainSplit{1, group_size(pc, g)};
}

// Whether an expert-data-parallel group has members in two domains, by definition (layout.hpp): the ranks of a stage
// with the same tp index and dp index mod ep (every cp index); folding: the same etp and ep indices of the refolded
// stage. Checks each group's size on the way.
bool brute_expert_dp_crosses(const ParallelConfig& pc, int64_t D) {
  const int64_t stage = pc.tp * pc.cp * pc.dp;
  struct Span {
    int64_t first = -1, last = -1, size = 0;
  };
  std::map<std::tuple<int64_t, int64_t, int64_t>, Span> groups;
  for (int64_t q = 0; q < pc.gpus(); ++q) {
    const int64_t a = q % stage;
    const RankCoord c = coord_of(pc, q);
    Span& s = groups[pc.etp > 0 ? std::tuple{q / stage, a % pc.etp, a / pc.etp % pc.ep}
                                : std::tuple{q / stage, c.tp, c.dp % pc.ep}];
    if (s.first < 0) s.first = q;
    s.last = q;
    ++s.size;
  }
  bool crosses = false;
  for (const auto& [key, s] : groups) {
    CHECK(s.size == expert_dp_size(pc));
    crosses = crosses || domain_of(s.first, D) != domain_of(s.last, D);
  }
  return crosses;
}
}  // namespace

// NVLink domains that hold several nodes (GB200/GB300 NVL72: 72 GPUs in trays of 4): rank r is in domain r / 72, and a
// kind crosses when any of its groups has members in two domains.
TEST_CASE("NVLink domain of 72: tp 8 at ranks 64..71 is inside, an ep 16 group at 64..79 crosses") {
  const ClusterSpec nvl = nodes_of(4, 72), trays = nodes_of(4);
  ParallelConfig pc;
  pc.tp = 8;
  pc.dp = 18;  // 144 ranks, two domains
  CHECK(group_ranks(pc, GroupKind::tp, 64) == std::vector<int64_t>{64, 65, 66, 67, 68, 69, 70, 71});
  CHECK_FALSE(group_crosses_domain(pc, GroupKind::tp, nvl));
  CHECK(group_crosses_domain(pc, GroupKind::tp, trays));  // 4-GPU trays without the shared fabric
  CHECK(group_crosses_domain(pc, GroupKind::dp, nvl));    // dp spans both racks

  pc.tp = 1;
  pc.dp = 144;
  pc.ep = 16;
  CHECK(group_ranks(pc, GroupKind::ep, 70).front() == 64);
  CHECK(group_ranks(pc, GroupKind::ep, 70).back() == 79);
  CHECK(group_crosses_domain(pc, GroupKind::ep, nvl));
  CHECK(group_domain_split(pc, GroupKind::ep, nvl).domains == 2);
  CHECK(group_domain_split(pc, GroupKind::ep, nvl).fewest == 8);  // 64..71 in rack 0, 72..79 in rack 1
  pc.ep = 8;  // 72 = 9 x 8: no ep 8 group straddles
  CHECK_FALSE(group_crosses_domain(pc, GroupKind::ep, nvl));

  // ep 64 on one rack's 64 GPUs: one domain. On 8-GPU servers the same group spans 8 of them.
  pc.dp = 64;
  pc.ep = 64;
  CHECK_FALSE(group_crosses_domain(pc, GroupKind::ep, nvl));
  CHECK(group_domain_split(pc, GroupKind::ep, nvl).fewest == 64);
  CHECK(group_crosses_domain(pc, GroupKind::ep, nodes_of(8)));
  CHECK(group_domain_split(pc, GroupKind::ep, nodes_of(8)).domains == 8);
  // ep 64 over 8 racks' worth of ranks: groups 64..127 (8 | 56), 128..191 (16 | 48), ...: the worst member has 8.
  pc.dp = 576;
  CHECK(group_crosses_domain(pc, GroupKind::ep, nvl));
  CHECK(group_domain_split(pc, GroupKind::ep, nvl).domains == 2);
  CHECK(group_domain_split(pc, GroupKind::ep, nvl).fewest == 8);
}

// A job larger than one NVLink domain is spread evenly over the fewest domains, in whole trays: 128 GPUs on NVL72
// racks are two racks of 64, so an ep 64 group at ranks 64..127 stays on one rack's NVLink; 144 are two racks of 72;
// 200 are three of 68 (17 trays each, the last 64).
TEST_CASE("placement: a multi-rack job takes equal shares of the fewest racks, in whole trays") {
  const ClusterSpec nvl = nodes_of(4, 72);
  CHECK(nvl.placed_domain(16) == 72);
  CHECK(nvl.placed_domain(72) == 72);
  CHECK(nvl.placed_domain(128) == 64);
  CHECK(nvl.placed_domain(144) == 72);
  CHECK(nvl.placed_domain(200) == 68);
  CHECK(nvl.placed_domain(256) == 64);
  CHECK(nvl.placed_domain(576) == 72);
  CHECK(nodes_of(8).placed_domain(256) == 8);  // a server is its own domain
  ParallelConfig pc;
  pc.dp = 128;
  pc.ep = 64;
  CHECK_FALSE(group_crosses_domain(pc, GroupKind::ep, nvl));
  CHECK(group_domain_split(pc, GroupKind::ep, nvl).fewest == 64);
  pc.dp = 256;
  CHECK_FALSE(group_crosses_domain(pc, GroupKind::ep, nvl));
  CHECK(group_crosses_domain(pc, GroupKind::dp, nvl));
  pc.dp = 200;
  pc.ep = 8;  // 68 = 8 x 8 + 4: the group at 64..71 has 4 members in each of the first two racks
  CHECK(group_crosses_domain(pc, GroupKind::ep, nvl));
  CHECK(group_domain_split(pc, GroupKind::ep, nvl).fewest == 4);
}

TEST_CASE("domain crossings and splits agree with a rank-by-rank count, uneven domains included") {
  int64_t cases = 0, crossing = 0;
  for (const ClusterSpec& c : {nodes_of(8), nodes_of(4, 72), nodes_of(4, 12), nodes_of(2, 6), nodes_of(4, 24)}) {
    for (int64_t tp : {1, 2, 3, 4, 8}) {
      for (int64_t cp : {1, 2}) {
        for (int64_t dp : {1, 2, 4, 6, 8, 16, 24}) {
          for (int64_t pp : {1, 2, 3}) {
            for (int64_t ep : {1, 2, 4, 8, 16}) {
              for (int64_t etp : {0, 1, 2}) {
                ParallelConfig pc;
                pc.tp = tp;
                pc.cp = cp;
                pc.dp = dp;
                pc.pp = pp;
                pc.ep = ep;
                pc.etp = etp;
                const bool folds = etp > 0;
                if (folds ? (tp * cp * dp) % (ep * etp) != 0 : dp % ep != 0) continue;
                const int64_t D = c.placed_domain(pc.gpus());  // ranks r and s share NVLink when r / D == s / D
                CAPTURE(D);
                CAPTURE(tp);
                CAPTURE(cp);
                CAPTURE(dp);
                CAPTURE(pp);
                CAPTURE(ep);
                CAPTURE(etp);
                for (GroupKind g : {GroupKind::tp, GroupKind::cp, GroupKind::dp, GroupKind::pp, GroupKind::ep,
                                    GroupKind::dp_cp}) {
                  const DomainSplit want = brute_split(pc, g, D), got = group_domain_split(pc, g, c);
                  CHECK(group_crosses_domain(pc, g, c) == (want.domains > 1));
                  CHECK(got.domains == want.domains);
                  CHECK(got.fewest == want.fewest);
                  crossing += want.domains > 1 ? 1 : 0;
                  ++cases;
                }
                CHECK(expert_dp_crosses_domain(pc, c) == brute_expert_dp_crosses(pc, D));
              }
            }
          }
        }
      }
    }
  }
  CHECK(cases > 5000);
  CHECK(crossing > 1000);  // both outcomes are exercised
  CHECK(crossing < cases);
}

// tp groups may not cross an NVLink domain (without --allow-tp-across-nodes): 4-GPU trays alone refuse tp 8, a
// 72-GPU domain over 64 ranks takes it, a 12-GPU domain splits the tp 8 group at ranks 8..15.
TEST_CASE("tp across NVLink domains is refused by the domain, not the tray") {
  Plan p = test::korthikanti_175b();  // tp 8 x pp 8 on 64 GPUs
  p.cluster.gpus_per_node = 4;
  CHECK(validate(p).has(Reject::tp_crosses_node));
  CHECK(describe(Reject::tp_crosses_node, p).starts_with("tp 8 is larger than an NVLink domain of 4 GPUs"));
  p.cluster.nvlink_domain_gpus = 72;
  CHECK(validate(p).ok());
  CHECK(&group_link(p, GroupKind::tp) == &p.cluster.intra_node);
  CHECK(&group_link(p, GroupKind::pp) == &p.cluster.intra_node);  // all 64 ranks in one rack
  p.cluster.nvlink_domain_gpus = 12;
  CHECK(validate(p).has(Reject::tp_crosses_node));
  CHECK(describe(Reject::tp_crosses_node, p).starts_with("tp 8 groups straddle the edge of an NVLink domain of 12"));
  CHECK(validate(p, ValidateOptions{true}).ok());
  CHECK(&group_link(p, GroupKind::tp) == &p.cluster.inter_node);
}
