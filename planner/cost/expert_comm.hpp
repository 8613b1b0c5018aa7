// Expert-parallel token exchange: bytes and time of one MoE dispatch (or combine) of one layer and microbatch.
//
// An ep group of n ranks spans N nodes with g of its ranks on each (the rank layout, layout.hpp). Each rank routes
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
// Overlap (Megatron-Core --overlap-moe-expert-parallel-comm, the 1F1B A2A overlap; DeepSeek-V3's DualPipe): in the
// steady state of the pipeline one microbatch's forward runs beside another's backward, so the forward all-to-alls
// hide behind the other's backward compute and the backward ones behind the forward compute (cost_model.cpp).
#pragma once
#include <cstdint>

#include "planner/spec/spec.hpp"

namespace parplan {

struct ExpertA2A {
  double copies_bytes = 0;      // every routed copy this rank sends (the all-to-all buffer, k tokens h A)
  double inter_node_bytes = 0;  // of what leaves this rank, over the NIC
  double intra_node_bytes = 0;  // over NVLink
  double time_s = 0;            // one dispatch (or one combine)
  int64_t nodes = 1, ranks_per_node = 1;  // N and g of the ep group
};

// One dispatch (combine: the same bytes back) of `tokens` tokens on one rank.
ExpertA2A expert_a2a(const Plan& plan, double tokens);
// One dispatch of one layer and microbatch: expert_a2a() of the rank's tokens (micro_batch x seq / cp, and / tp with
// sequence parallelism, whose ranks each route their own shard). The one home of the all-to-all's size: the cost
// model prices it (LayerCost::ep_bytes) and the runtime sends it (copies_bytes is the nccl-tests size S).
ExpertA2A layer_expert_a2a(const Plan& plan);

// The chance that one node holding `experts_per_node` of `experts` experts holds at least one of a token's top_k
// (drawn without replacement): 1 - C(E - e, k) / C(E, k).
double node_hit_probability(int64_t experts, int64_t experts_per_node, int64_t top_k);

}  // namespace parplan
