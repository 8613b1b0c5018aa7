// Expert-parallel token exchange: bytes and time of one MoE dispatch (or combine) of one layer and microbatch.
//
// An ep group of n ranks spans N NVLink domains with g of its ranks in each (the rank layout and its domains,
// layout.hpp; "node" below is an NVLink domain: a server, or a whole NVL72 rack). Where the domains split a group
// unevenly, g is its fewest ranks in one domain (the member with the most off-domain copies sets the time) and N the
// domains it touches. Each rank routes
// `tokens` tokens to top_k experts each, a copy of h activations (A bytes each) per routed expert; routing is taken
// as balanced (uniform over the experts), as Megatron-Core's benchmarks force it (--moe-router-force-load-balancing).
//   alltoall (NCCL all-to-all of every copy; Megatron-Core --moe-token-dispatcher-type alltoall): of the copies,
//     (n - g)/n go to ranks on other nodes over the NIC, (g - 1)/n to ranks on this node over NVLink, 1/n stay;
//     both tiers run at once: t = max(inter / B_inter, intra / B_intra) + (n - 1) latency. Inside one node (N = 1)
//     this is the nccl-tests all-to-all, (n-1)/n S / B (collectives.hpp).
//   deepep (DeepEP's normal kernels, DeepSeek-AI 2025; DeepSeek-V3 report arXiv:2412.19437 Sec. 3.2.2): a token goes
//     over InfiniBand once to each other node that holds one of its experts, to the GPU of the same in-node index,
//     which forwards it over NVLink to the expert's GPU. Inter-node bytes per token: h A (N - 1) P, with P the chance
//     that a node holding E/N of the E experts holds one of the token's top_k: 1 - C(E - E/N, k) / C(E, k). NVLink
//     bytes: every copy whose expert sits on another GPU of its node, k h A (g - 1) / g. Same max over the tiers.
//     With group-limited routing (ModelSpec::router_groups G, router_group_top_k M; DeepSeek-V3's node-limited
//     routing, arXiv:2412.19437 Sec. 2.1.2) a token's experts lie in at most M groups; the router chooses groups by
//     the sum of their best two experts' scores, so a chosen group nearly always holds one of the token's top k
//     while 2M <= k. The groups hit: H = min(M, G (1 - C(E - E/G, k) / C(E, k))), as many as without the limit, at
//     most M (M = G is the ungrouped draw; a Monte Carlo of that router with independent scores is within 7% of H
//     for M = 1 .. 8 of DeepSeek-V3's 8 groups: tests/planner/cost/expert_comm_test.cpp). routed_node_share():
//     where each node holds g = G/N whole groups, P = 1 - C(G - g, H) / C(G, H) (H interpolated between its whole
//     neighbours; g = 1: P = H/G); where each group spans
//     N/G nodes, P = (H/G) (1 - (1 - G/N)^(k/H)) (the group hit, then its k/H experts over its N/G nodes); where
//     neither count divides the other, the ungrouped P. DeepSeek-V3 at ep 64 over 8 nodes (G = 8, M = 4, k = 8):
//     H = 4, P = 1/2 against 0.662 ungrouped, a token on 4 nodes, the report's "at most 4". The NCCL all-to-all
//     sends every copy whatever the grouping: its bytes do not change.
// Load (moe_rank_load): the all-to-all and the experts' GEMMs wait for the most-loaded rank, which receives L times
// the mean copies: L = the capacity factor when one is set (Megatron-Core --moe-expert-capacity-factor with
// --moe-pad-expert-input-to-capacity: every expert's input is padded to capacity = factor x tokens x top_k / experts,
// moe_utils.get_capacity; Fedus et al. 2021, Switch Transformer, arXiv:2101.03961, Sec. 2.2), else, dropless, the
// imbalance I (the most-loaded expert's tokens over the mean) bounded by ep: a rank holding that expert and others
// as loaded receives I times the mean, and no rank receives more than every token's copies, ep times the mean (ep 1:
// one rank holds every expert and takes exactly tokens x top_k copies). Default I = 1: balanced routing, as
// Megatron-Core's published MoE benchmarks force it (--moe-router-force-load-balancing).
// Overlap (Megatron-Core --overlap-moe-expert-parallel-comm, the 1F1B A2A overlap; DeepSeek-V3's DualPipe, arXiv:
// 2412.19437 Sec. 3.2.1): each steady-state step of the pipeline runs one microbatch's forward beside another's
// backward, so the forward all-to-alls hide behind the other's backward compute and the backward ones behind the
// forward compute (cost_model.cpp names what each hides behind), ep_overlap_exposed_s():
//   - only the steady state pairs passes: the first stage's w warm-up forwards (first_stage_warmup(), pipeline.hpp)
//     and as many cool-down backwards run alone, and a forward cannot pair with its own microbatch's backward, so
//     at least one of each runs alone (one microbatch: none paired). Of the stage's m v forwards (backwards) a share
//     P = 1 - min(m v, max(1, w)) / (m v) is paired; the rest is exposed whole.
//   - a paired pass's all-to-alls of time a hide behind the other's compute C, less what they take from it: kernels
//     holding s of the GPU's SMs leave the compute 1 - s of them while both run, so the pair takes max(a, C + s a)
//     and the exposed part is max(a - C, s a). DeepEP's kernels hold 20 SMs (DeepSeek-V3 report Sec. 3.2.2: 20 SMs
//     partitioned into 10 communication channels, of the H800's 132), s = 20 / gemm.sm_count; NCCL's all-to-all
//     states no SM count, so with the alltoall dispatcher s = 0 (not priced).
// Exposed per pass: P max(a - C, s a) + (1 - P) a. Qwen3-235B, pp 8, vpp 4, m 128: w = 38, P = 474 / 512
// (tests/planner/cost/expert_comm_test.cpp).
#pragma once
#include <cstdint>

#include "planner/spec/spec.hpp"

namespace parplan {

struct ExpertA2A {
  double copies_bytes = 0;      // every routed copy this rank sends (the all-to-all buffer, k tokens h A)
  double inter_node_bytes = 0;  // of what leaves this rank, over the NIC
  double intra_node_bytes = 0;  // over NVLink
  double time_s = 0;            // one dispatch (or one combine)
  int64_t nodes = 1, ranks_per_node = 1;  // N (NVLink domains) and g (ranks per domain) of the ep group
};

// One dispatch (combine: the same bytes back) of `tokens` tokens on one rank, at the most-loaded rank's load.
ExpertA2A expert_a2a(const Plan& plan, double tokens);
// One dispatch of one layer and microbatch: expert_a2a() of the rank's tokens (micro_batch x seq / cp, and / tp with
// sequence parallelism, whose ranks each route their own shard). The one home of the all-to-all's size: the cost
// model prices it (LayerCost::ep_bytes) and the runtime sends it (copies_bytes is the nccl-tests size S).
ExpertA2A layer_expert_a2a(const Plan& plan);

// The --overlap-ep terms (above): the paired share P of a stage's passes and the SM share s the all-to-all kernels
// hold. Without the overlap P = 0.
struct EpOverlap {
  double paired_share = 0;
  double comm_sm_share = 0;
};
EpOverlap ep_overlap(const Plan& plan);
// Exposed time of one pass's all-to-alls of time `comm` where a paired pass hides them behind `behind` of another
// microbatch's compute: P max(comm - behind, s comm) + (1 - P) comm.
double ep_overlap_exposed_s(const EpOverlap& o, double comm, double behind);

// The most-loaded EP rank's routed copies over the mean (above): capacity factor, or min(imbalance, ep).
double moe_rank_load(const ModelSpec& m, int64_t ep);

// Routed token copies of one MoE layer and microbatch on one rank: those it routes (its tokens x top_k, what it
// permutes before the dispatch and unpermutes after the combine) and those its local experts run (x the load; with
// expert tp set the rank's tokens gathered over its etp group, else every tp rank runs the microbatch's tokens).
struct MoeTokenCopies {
  double tokens = 0;      // tokens the rank routes (T / tp with sequence parallelism)
  double dispatched = 0;  // tokens x top_k
  double expert = 0;      // copies the rank's experts run, at the most-loaded rank's load
};
MoeTokenCopies moe_token_copies(const Plan& plan);

// Memory-bound bytes of one MoE layer's routing on one rank, per microbatch (Megatron-Core megatron/core/transformer/
// moe: router.py TopKRouter, moe_utils.py permute / unpermute, token_dispatcher.py MoEAlltoAllTokenDispatcher), with
// n routed copies (h wide, A bytes), r expert copies and t tokens:
//   router, forward: the score function (softmax / sigmoid) reads the logits and writes fp32 scores, top-k reads them
//     and writes k fp32 probabilities and int64 indices per token, the auxiliary load-balancing loss reads the
//     scores once more: t E (A + 8) + 12 t k; backward: top-k's gradient scattered into t E fp32, the aux loss's added
//     (read + write), the score function's backward reads scores and gradient and writes the logits' gradient:
//     t E (20 + A).
//   permute (gather each copy into expert order): read n h A, write n h A; unpermute (weight by the probabilities and
//     scatter-add back to token order): read n h A, write t h A. Backward: permute's is a scatter-add (read n h A,
//     write t h A), unpermute's a gather that also reads the saved expert outputs for the probabilities' gradient
//     (read t h A + n h A, write n h A).
//   with ep > 1 and several local experts, the received copies are sorted by local expert after the dispatch and back
//     before the combine (sort_chunks_by_idxs): read + write r h A each, in both passes.
struct MoeRoutingBytes {
  double forward = 0, backward = 0;
};
MoeRoutingBytes moe_routing_bytes(const Plan& plan);

// The chance that one node holding `experts_per_node` of `experts` experts holds at least one of a token's top_k
// (drawn without replacement): 1 - C(E - e, k) / C(E, k).
double node_hit_probability(int64_t experts, int64_t experts_per_node, int64_t top_k);
// The chance P that one of `nodes` nodes, each holding experts / nodes of the model's experts, holds at least one of
// a token's experts, under the model's group-limited routing when it has one (above).
double routed_node_share(const ModelSpec& m, int64_t nodes);

}  // namespace parplan
