// Tests for planner/cost/expert_comm: the MoE token exchange per tier, NCCL all-to-all and DeepEP's dispatch.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <vector>

#include "planner/cost/collectives.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/expert_comm.hpp"
#include "planner/cost/flops.hpp"
#include "planner/cost/gemm.hpp"
#include "planner/spec/config.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
// Qwen3-235B-A22B (128 experts, top-8) on 4 DGX H100 nodes: tp 2 (SP) x dp 16 x pp 1, ep 32 with etp 1 (folding).
Plan qwen3_ep(int64_t ep, MoeDispatcher dispatcher) {
  Plan p;
  p.model = test::profiles().model("qwen3-235b-a22b", "test");
  p.gpu = test::profiles().gpu("h100", "test");
  p.cluster = test::profiles().cluster("dgx-h100", "test");
  p.parallel.tp = 2;
  p.parallel.sequence_parallel = true;
  p.parallel.dp = 16;
  p.parallel.ep = ep;
  p.parallel.etp = 1;
  p.parallel.moe_dispatcher = dispatcher;
  p.parallel.num_microbatches = 4;
  p.num_gpus = 32;
  p.training.global_batch = 64;
  return p;
}
}  // namespace

TEST_CASE("node_hit_probability: 1 - C(E - e, k) / C(E, k), the chance a node holds one of a token's experts") {
  // 128 experts over 4 nodes (32 each), top-8: 1 - prod_{i<8} (96 - i) / (128 - i).
  double miss = 1.0;
  for (int i = 0; i < 8; ++i) miss *= (96.0 - i) / (128.0 - i);
  CHECK(node_hit_probability(128, 32, 8) == doctest::Approx(1.0 - miss).epsilon(1e-12));
  CHECK(node_hit_probability(128, 32, 8) == doctest::Approx(0.9073).epsilon(1e-3));
  CHECK(node_hit_probability(8, 8, 2) == 1.0);  // one node holds them all
  CHECK(node_hit_probability(256, 32, 1) == doctest::Approx(32.0 / 256.0).epsilon(1e-12));
}

TEST_CASE("routed_node_share: group-limited routing puts a token's experts in at most M groups") {
  const ModelSpec v3 = test::profiles().model("deepseek-v3", "test");
  REQUIRE(v3.router_groups == 8);  // the report's node-limited routing (config.json n_group 8, topk_group 4)
  REQUIRE(v3.router_group_top_k == 4);
  // ep 64 over 8 nodes, one group a node: H = min(4, 8 x 0.662) = 4 groups hit, P = 4 / 8. The report
  // (arXiv:2412.19437 Sec. 2.1.2): each token is sent to at most M = 4 nodes.
  CHECK(routed_node_share(v3, 8) == doctest::Approx(0.5).epsilon(1e-12));
  CHECK(8.0 * routed_node_share(v3, 8) == doctest::Approx(4.0).epsilon(1e-12));
  ModelSpec ungrouped = v3;
  ungrouped.router_groups = ungrouped.router_group_top_k = 0;
  CHECK(routed_node_share(ungrouped, 8) == doctest::Approx(node_hit_probability(256, 32, 8)).epsilon(1e-12));
  CHECK(routed_node_share(ungrouped, 8) == doctest::Approx(0.6618).epsilon(1e-3));
  // ep 32 over 4 nodes, two groups a node: hit unless neither is among the 4 hit, 1 - C(6, 4) / C(8, 4).
  CHECK(routed_node_share(v3, 4) == doctest::Approx(1.0 - 15.0 / 70.0).epsilon(1e-12));
  // Groups spanning 2 nodes each (16 nodes): the group hit (4 / 8), then its 8 / 4 experts over its 2 nodes.
  CHECK(routed_node_share(v3, 16) == doctest::Approx(0.5 * (1.0 - 0.5 * 0.5)).epsilon(1e-12));
  // Every group chosen (M = G) is the ungrouped draw; one node holds every expert.
  ModelSpec all = v3;
  all.router_group_top_k = 8;
  CHECK(routed_node_share(all, 8) == doctest::Approx(node_hit_probability(256, 32, 8)).epsilon(1e-12));
  CHECK(routed_node_share(v3, 1) == 1.0);
  // A token reaching every expert (top-8 of 8, all 4 groups chosen, 2 groups a node): H = G = 4, every node.
  ModelSpec tiny = v3;
  tiny.experts = 8;
  tiny.router_groups = 4;
  tiny.router_group_top_k = 4;
  CHECK(routed_node_share(tiny, 2) == 1.0);
  // Between whole counts: 8 x 0.662 = 5.29 groups hit when 6 of 8 may be, on 4 nodes of 2 groups each.
  all.router_group_top_k = 6;
  const double h = 8.0 * node_hit_probability(256, 32, 8), f = h - 5.0;
  CHECK(routed_node_share(all, 4) ==
        doctest::Approx((1.0 - f) * node_hit_probability(8, 2, 5) + f * node_hit_probability(8, 2, 6)).epsilon(1e-12));
}

// H, the groups a token's experts fall in, against a Monte Carlo of the router: independent normal scores for
// DeepSeek-V3's 256 experts, the M groups with the largest sum of their best two chosen, the top 8 of their experts
// taken (DeepSeek-V3 report Sec. 2.1.2; Hugging Face modeling_deepseek.py MoEGate, "noaux_tc"). With one group a node
// the share is H / G, so 8 x routed_node_share(., 8) is H.
TEST_CASE("routed_node_share: the groups hit match a simulated top-2-sum group router within 7%") {
  ModelSpec m = test::profiles().model("deepseek-v3", "test");
  std::mt19937 rng(2412);
  std::normal_distribution<double> score;
  const int E = 256, G = 8, per = E / G, k = 8, tokens = 4000;
  for (int M = 1; M <= G; ++M) {
    m.router_group_top_k = M;
    double hit_groups = 0;
    for (int t = 0; t < tokens; ++t) {
      std::vector<double> s(E);
      for (double& x : s) x = score(rng);
      std::vector<std::pair<double, int>> group_score;
      for (int g = 0; g < G; ++g) {
        std::vector<double> in(s.begin() + g * per, s.begin() + (g + 1) * per);
        std::partial_sort(in.begin(), in.begin() + 2, in.end(), std::greater<>());
        group_score.emplace_back(in[0] + in[1], g);
      }
      std::sort(group_score.begin(), group_score.end(), std::greater<>());
      std::vector<std::pair<double, int>> eligible;  // (score, group) of the chosen groups' experts
      for (int c = 0; c < M; ++c) {
        const int g = group_score[c].second;
        for (int e = 0; e < per; ++e) eligible.emplace_back(s[g * per + e], g);
      }
      std::partial_sort(eligible.begin(), eligible.begin() + k, eligible.end(), std::greater<>());
      std::set<int> groups;
      for (int i = 0; i < k; ++i) groups.insert(eligible[i].second);
      hit_groups += static_cast<double>(groups.size());
    }
    const double simulated = hit_groups / tokens, modelled = 8.0 * routed_node_share(m, 8);
    INFO("M = " << M << ": simulated " << simulated << " groups, modelled " << modelled);
    CHECK(modelled <= M);
    CHECK(std::fabs(modelled - simulated) <= 0.07 * simulated);
  }
}

TEST_CASE("expert a2a inside a node is the nccl-tests all-to-all, for either dispatcher") {
  for (MoeDispatcher disp : {MoeDispatcher::alltoall, MoeDispatcher::deepep}) {
    const Plan p = qwen3_ep(8, disp);
    const double tokens = 2048;
    const ExpertA2A a = expert_a2a(p, tokens);
    CHECK(a.nodes == 1);
    CHECK(a.ranks_per_node == 8);
    CHECK(a.inter_node_bytes == 0.0);
    CHECK(a.copies_bytes == doctest::Approx(tokens * 8 * 4096 * 2).epsilon(1e-12));
    CHECK(a.time_s == doctest::Approx(collective_time_s(Collective::all_to_all, a.copies_bytes, 8, p.cluster.intra_node))
                          .epsilon(1e-12));
  }
}

TEST_CASE("expert a2a across nodes: all-to-all sends (n - g)/n of the copies over the NIC, DeepEP one per node hit") {
  const double tokens = 2048, token_bytes = tokens * 4096 * 2;
  const ExpertA2A nccl = expert_a2a(qwen3_ep(32, MoeDispatcher::alltoall), tokens);
  REQUIRE(nccl.nodes == 4);
  REQUIRE(nccl.ranks_per_node == 8);
  CHECK(nccl.inter_node_bytes == doctest::Approx(8 * token_bytes * 24.0 / 32.0).epsilon(1e-12));
  CHECK(nccl.intra_node_bytes == doctest::Approx(8 * token_bytes * 7.0 / 32.0).epsilon(1e-12));
  const ExpertA2A deepep = expert_a2a(qwen3_ep(32, MoeDispatcher::deepep), tokens);
  CHECK(deepep.inter_node_bytes == doctest::Approx(token_bytes * 3.0 * node_hit_probability(128, 32, 8)).epsilon(1e-12));
  CHECK(deepep.intra_node_bytes == doctest::Approx(8 * token_bytes * 7.0 / 8.0).epsilon(1e-12));
  // 6 copies of each token cross the NIC with the all-to-all, 2.72 with DeepEP: 2.2x less on the slow tier.
  CHECK(nccl.inter_node_bytes / deepep.inter_node_bytes == doctest::Approx(6.0 / (3.0 * 0.9073)).epsilon(1e-3));
  CHECK(deepep.time_s < nccl.time_s);
  // The NIC is the bound on both: its bytes over its effective bandwidth, plus the latencies.
  const LinkSpec& ib = qwen3_ep(32, MoeDispatcher::alltoall).cluster.inter_node;
  CHECK(nccl.time_s == doctest::Approx(nccl.inter_node_bytes / ib.effective_Bps() + 31 * ib.latency_s).epsilon(1e-12));
}

TEST_CASE("expert a2a with group-limited routing: DeepEP's NIC bytes fall, the all-to-all's do not") {
  const double tokens = 2048, token_bytes = tokens * 4096 * 2;
  Plan grouped = qwen3_ep(32, MoeDispatcher::deepep);  // 4 nodes of 32 experts
  grouped.model.router_groups = 4;                     // one group a node, 2 chosen: at most 2 nodes a token
  grouped.model.router_group_top_k = 2;
  REQUIRE(moe_routing_error(grouped.model).field == MoeRoutingError::Field::none);
  const ExpertA2A a = expert_a2a(grouped, tokens);
  // Both chosen groups hit (H = min(2, 4 x 0.907)): each other node with chance 2 / 4, against 0.907 ungrouped.
  CHECK(a.inter_node_bytes == doctest::Approx(token_bytes * 3.0 * 0.5).epsilon(1e-12));
  CHECK(a.inter_node_bytes < expert_a2a(qwen3_ep(32, MoeDispatcher::deepep), tokens).inter_node_bytes);
  CHECK(a.intra_node_bytes == doctest::Approx(8 * token_bytes * 7.0 / 8.0).epsilon(1e-12));
  Plan nccl = grouped;
  nccl.parallel.moe_dispatcher = MoeDispatcher::alltoall;
  CHECK(expert_a2a(nccl, tokens).inter_node_bytes ==
        doctest::Approx(expert_a2a(qwen3_ep(32, MoeDispatcher::alltoall), tokens).inter_node_bytes).epsilon(1e-12));
}

TEST_CASE("overlap_ep_comm hides the all-to-alls behind another microbatch's compute; one microbatch cannot") {
  Plan p = qwen3_ep(32, MoeDispatcher::alltoall);
  REQUIRE(validate(p).ok());
  const LayerCost plain = layer_cost(p);
  p.parallel.overlap_ep_comm = true;
  const LayerCost overlapped = layer_cost(p);
  CHECK(overlapped.ep_comm_forward_s == plain.ep_comm_forward_s);  // the same transfers ...
  CHECK(overlapped.exposed_ep_s < plain.exposed_ep_s);              // ... less of them on the critical path
  CHECK(overlapped.exposed_ep_s >= 0.0);
  // pp 1, m 4: the first forward and the last backward run alone (a forward cannot pair with its own backward).
  const EpOverlap o = ep_overlap(p);
  CHECK(o.paired_share == doctest::Approx(3.0 / 4.0).epsilon(1e-12));
  CHECK(o.comm_sm_share == 0.0);  // NCCL's all-to-all: no stated SM count, not priced
  const double fwd_hidden_behind = 2.0 * overlapped.gemm_forward_s;  // at least the other's dgrad + wgrad GEMMs
  const double paired = std::max(0.0, plain.ep_comm_forward_s - fwd_hidden_behind) +
                        std::max(0.0, plain.ep_comm_backward_s - overlapped.gemm_forward_s);
  CHECK(overlapped.exposed_ep_s <= 0.75 * paired + 0.25 * plain.exposed_ep_s + 1e-12);
  CHECK(overlapped.exposed_ep_s >= 0.25 * plain.exposed_ep_s - 1e-12);
  p.parallel.num_microbatches = 1;
  p.training.global_batch = 16;
  CHECK(ep_overlap(p).paired_share == 0.0);
  CHECK(layer_cost(p).exposed_ep_s == doctest::Approx(plain.exposed_ep_s).epsilon(1e-12));
}

// The steady state pairs passes: Megatron-LM's interleaved warm-up on the first stage, 2 (p - 1) + (v - 1) p forward
// chunks, and as many cool-down backwards, run alone. Qwen3-235B on 256 H100 (the Megatron MoE ModelZoo recipe:
// pp 8, vpp 4, 128 microbatches): 38 of 512 chunk passes alone, 474 paired. DeepEP's kernels hold 20 of the H100's
// 132 SMs (DeepSeek-V3 report, arXiv:2412.19437 Sec. 3.2.2).
TEST_CASE("ep_overlap: the warm-up and cool-down run alone; DeepEP's 20 SMs leave the paired compute 112 of 132") {
  Plan p = qwen3_ep(32, MoeDispatcher::deepep);
  p.parallel.overlap_ep_comm = true;
  p.parallel.pp = 8;
  p.parallel.schedule = Schedule::interleaved;
  p.parallel.vpp = 4;
  p.parallel.num_microbatches = 128;
  REQUIRE(p.gpu.gemm.sm_count == 132);
  const EpOverlap o = ep_overlap(p);
  CHECK(o.paired_share == doctest::Approx(474.0 / 512.0).epsilon(1e-12));
  CHECK(o.comm_sm_share == doctest::Approx(20.0 / 132.0).epsilon(1e-12));
  p.parallel.schedule = Schedule::one_f_one_b;  // 1F1B: p - 1 = 7 warm-up microbatches of 128
  p.parallel.vpp = 1;
  CHECK(ep_overlap(p).paired_share == doctest::Approx(121.0 / 128.0).epsilon(1e-12));
  // DualPipeV: the forwards of its F & B pairs, 2 (m - 2p + 1) + p - 1 = 2 m - 3 p + 1 of stage 0's 2 m (2 chunks).
  p.parallel.schedule = Schedule::dualpipe_v;
  CHECK(ep_overlap(p).paired_share == doctest::Approx((2.0 * 128 - 3.0 * 8 + 1) / (2.0 * 128)).epsilon(1e-12));
  p.parallel.schedule = Schedule::gpipe;  // every forward before every backward: nothing paired
  CHECK(ep_overlap(p).paired_share == 0.0);
  p.parallel.overlap_ep_comm = false;
  CHECK(ep_overlap(p).paired_share == 0.0);
  CHECK(ep_overlap(p).comm_sm_share == 0.0);

  // A paired pass with a of all-to-alls beside C of compute at s of the SMs: max(a, C + s a) for the pair, so
  // max(a - C, s a) exposed; the unpaired share is exposed whole.
  const EpOverlap half{0.5, 0.2};
  CHECK(ep_overlap_exposed_s(half, 1.0, 0.5) == doctest::Approx(0.5 * 0.5 + 0.5 * 1.0).epsilon(1e-12));
  CHECK(ep_overlap_exposed_s(half, 1.0, 3.0) == doctest::Approx(0.5 * 0.2 + 0.5 * 1.0).epsilon(1e-12));
  CHECK(ep_overlap_exposed_s(EpOverlap{1.0, 0.0}, 1.0, 3.0) == 0.0);
  CHECK(ep_overlap_exposed_s(EpOverlap{}, 1.0, 3.0) == 1.0);
}

TEST_CASE("overlap_ep_comm with DeepEP inside a node: all-to-alls shorter than the compute expose s a per paired pass") {
  Plan p = qwen3_ep(8, MoeDispatcher::deepep);
  REQUIRE(validate(p).ok());
  const LayerCost plain = layer_cost(p);
  REQUIRE(plain.ep_comm_backward_s < plain.gemm_forward_s);  // NVLink all-to-alls: the forward GEMMs cover them
  p.parallel.overlap_ep_comm = true;
  const EpOverlap o = ep_overlap(p);
  const double share = o.paired_share * o.comm_sm_share + (1.0 - o.paired_share);
  CHECK(layer_cost(p).exposed_ep_s ==
        doctest::Approx(share * (plain.ep_comm_forward_s + plain.ep_comm_backward_s)).epsilon(1e-12));
  CHECK(layer_cost(p).exposed_ep_s > 0.2 * plain.exposed_ep_s);  // 1 of 4 passes alone, 20/132 of the rest
}

// A GB200 NVL72 rack's 72 GPUs share one NVLink fabric although its trays hold 4: Qwen3-235B with ep 64 over 64 GPUs
// (the Megatron-Core GB300 recipe's mesh, dp 64 ep 64 etp 1) exchanges its tokens over NVLink; on DGX B200 servers the
// same group spans 8 of them and 7/8 of the copies cross the NIC.
TEST_CASE("expert a2a: ep 64 inside a GB200 NVL72 rack is on NVLink, across DGX B200 nodes on the NIC") {
  Plan p = qwen3_ep(64, MoeDispatcher::alltoall);
  p.parallel.tp = 1;
  p.parallel.sequence_parallel = false;
  p.parallel.dp = 64;
  p.num_gpus = 64;
  p.training.global_batch = 64 * p.parallel.num_microbatches;
  const double tokens = 4096, copies = tokens * 8 * 4096 * 2;
  p.gpu = test::profiles().gpu("GB200", "test");
  p.cluster = test::profiles().cluster("gb200-nvl72", "test");
  REQUIRE(validate(p).ok());
  const ExpertA2A rack = expert_a2a(p, tokens);
  CHECK(rack.nodes == 1);
  CHECK(rack.ranks_per_node == 64);
  CHECK(rack.inter_node_bytes == 0.0);
  CHECK(rack.time_s == doctest::Approx(collective_time_s(Collective::all_to_all, copies, 64, p.cluster.intra_node))
                           .epsilon(1e-12));
  p.gpu = test::profiles().gpu("B200", "test");
  p.cluster = test::profiles().cluster("dgx-b200", "test");
  const ExpertA2A servers = expert_a2a(p, tokens);
  CHECK(servers.nodes == 8);
  CHECK(servers.ranks_per_node == 8);
  CHECK(servers.inter_node_bytes == doctest::Approx(copies * 56.0 / 64.0).epsilon(1e-12));
  const LinkSpec& nic = p.cluster.inter_node;
  CHECK(servers.time_s ==
        doctest::Approx(copies * 56.0 / 64.0 / nic.effective_Bps() + 63 * nic.latency_s).epsilon(1e-12));
  CHECK(servers.time_s > 9 * rack.time_s);  // 50 GB/s NIC against 900 GB/s NVLink

  // Over two racks, 128 GPUs are placed 64 to a rack (ClusterSpec::placed_domain) and each ep 64 group stays on one
  // rack's NVLink. 144 GPUs fill both racks' 72: the ep 16 group at ranks 64..79 has 8 members in each, which send
  // 8/16 of their copies over the NIC and set the pace.
  p.gpu = test::profiles().gpu("GB200", "test");
  p.cluster = test::profiles().cluster("gb200-nvl72", "test");
  p.parallel.dp = 128;
  p.num_gpus = 128;
  p.training.global_batch = 128 * p.parallel.num_microbatches;
  REQUIRE(validate(p).ok());
  const ExpertA2A placed = expert_a2a(p, tokens);
  CHECK(placed.nodes == 1);
  CHECK(placed.inter_node_bytes == 0.0);
  p.parallel.dp = 144;
  p.parallel.ep = 16;
  p.num_gpus = 144;
  p.training.global_batch = 144 * p.parallel.num_microbatches;
  REQUIRE(validate(p).ok());
  const ExpertA2A racks = expert_a2a(p, tokens);
  CHECK(racks.nodes == 2);
  CHECK(racks.ranks_per_node == 8);
  CHECK(racks.inter_node_bytes == doctest::Approx(copies * 8.0 / 16.0).epsilon(1e-12));
}

TEST_CASE("recompute modules on a MoE layer: layernorm and moe_act are memory-bound passes; moe reruns the layer") {
  using M = RecomputeModule;
  Plan p = qwen3_ep(32, MoeDispatcher::alltoall);
  p.parallel.recompute = Recompute::selective;
  const LayerCost core = layer_cost(p);  // the default, {core_attn}
  const auto with = [&](std::initializer_list<M> list) {
    Plan q = p;
    q.parallel.recompute_modules.bits = 0;
    for (M x : list) q.parallel.recompute_modules.add(x);
    return q;
  };
  const Plan norm_act = with({M::layernorm, M::moe_act});
  const RecomputeModuleBytes b = recompute_module_bytes(p.model, activation_shape(p));
  REQUIRE(b.norm_qkv == 0);  // GQA: the input norm is fused into the QKV GEMM
  const double k = p.gpu.gemm.kernel_overhead_s;
  // The pre-MLP norm reads its input and writes its output; SwiGLU reads 2f and writes f per copy.
  const double expected = memory_bound_time_s(p.gpu, 2 * b.norm_mlp) + k + memory_bound_time_s(p.gpu, 3 * b.act_routed) + k;
  CHECK(layer_cost(norm_act).recompute_s == doctest::Approx(expected).epsilon(1e-12));
  CHECK(layer_cost(norm_act).recompute_s < core.recompute_s);  // no attention core rerun
  // moe reruns the experts' GEMMs and the routing, and its forward all-to-alls again.
  const LayerCost moe = layer_cost(with({M::moe}));
  CHECK(moe.recompute_s > layer_cost(with({M::moe_act})).recompute_s);
  CHECK(moe.exposed_recompute_comm_s == doctest::Approx(core.exposed_recompute_comm_s + moe.ep_comm_forward_s));
  CHECK(moe.exposed_ep_s == doctest::Approx(core.exposed_ep_s + moe.ep_comm_forward_s));
  // Hardware FLOPs: moe adds the MoE layers' MLP and router forward; layernorm / moe_act add no matmul.
  const int64_t s = norm_act.seq_len();
  CHECK(hardware_flops_per_step(p.model, 64, s, Recompute::selective, with({M::layernorm, M::moe_act}).parallel.recompute_modules) ==
        model_flops_per_step(p.model, 64, s));
  const LayerFlops lf = layer_forward_flops(p.model, 64, s, false);
  CHECK(hardware_flops_per_step(p.model, 64, s, Recompute::selective, with({M::moe}).parallel.recompute_modules) ==
        doctest::Approx(model_flops_per_step(p.model, 64, s) + static_cast<double>(p.model.moe_layers()) * (lf.mlp + lf.router)));
}
