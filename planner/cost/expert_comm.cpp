// Expert-parallel token exchange (formulas and sources in expert_comm.hpp).
#include "planner/cost/expert_comm.hpp"

#include <algorithm>
#include <cmath>

#include "planner/cost/collectives.hpp"
#include "planner/cost/layout.hpp"
#include "planner/cost/pipeline.hpp"

namespace parplan {

double node_hit_probability(int64_t experts, int64_t experts_per_node, int64_t top_k) {
  if (experts_per_node >= experts) return 1.0;
  double miss = 1.0;  // C(E - e, k) / C(E, k) = prod_i (E - e - i) / (E - i)
  for (int64_t i = 0; i < top_k; ++i) {
    miss *= std::max(0.0, static_cast<double>(experts - experts_per_node - i)) / static_cast<double>(experts - i);
  }
  return 1.0 - miss;
}

double routed_node_share(const ModelSpec& m, int64_t nodes) {
  const int64_t E = m.experts, G = m.router_groups, per_node = E / nodes;
  if (G <= 0 || nodes <= 1 || (G % nodes != 0 && nodes % G != 0)) return node_hit_probability(E, per_node, m.top_k);
  // The groups a token's experts fall in: as many as without the limit, at most the M it chooses.
  const double groups = static_cast<double>(G);
  const double k = static_cast<double>(m.top_k);
  const double ungrouped = groups * node_hit_probability(E, E / G, m.top_k);
  const double hit = std::min(static_cast<double>(m.router_group_top_k), ungrouped);
  if (nodes % G == 0) {  // each group spans nodes / G nodes; a hit group's k / H experts land on one with G / N each
    return hit / groups * (1.0 - std::pow(1.0 - groups / static_cast<double>(nodes), k / hit));
  }
  // Each node holds g = G / nodes whole groups: hit unless none of them is among the H hit ones (H interpolated
  // between the whole counts around it; exact for g = 1, where the share is H / G).
  const int64_t g = G / nodes, below = static_cast<int64_t>(std::floor(hit));
  const double above = hit - static_cast<double>(below), at_below = node_hit_probability(G, g, below);
  return above > 0 ? at_below + above * (node_hit_probability(G, g, below + 1) - at_below) : at_below;
}

ExpertA2A expert_a2a(const Plan& plan, double tokens) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& pc = plan.parallel;
  ExpertA2A a;
  const int64_t n = pc.ep;
  if (!m.is_moe() || n <= 1) return a;
  const double A = static_cast<double>(dtype_bytes(plan.activation_dtype()));
  const double token_bytes = tokens * static_cast<double>(m.hidden) * A * moe_rank_load(m, n);
  a.copies_bytes = token_bytes * static_cast<double>(m.top_k);
  // The group's split over NVLink domains (layout.hpp): the worst group's domains, and its member with the fewest
  // group ranks in its domain (most of its copies off-domain).
  const DomainSplit split = group_domain_split(pc, GroupKind::ep, plan.cluster);
  a.ranks_per_node = split.fewest;
  a.nodes = split.domains;
  const double nd = static_cast<double>(n), g = static_cast<double>(a.ranks_per_node);
  if (pc.moe_dispatcher == MoeDispatcher::deepep) {
    const double hit = routed_node_share(m, a.nodes);
    a.inter_node_bytes = token_bytes * static_cast<double>(a.nodes - 1) * hit;
    a.intra_node_bytes = a.copies_bytes * (g - 1.0) / g;
  } else {
    a.inter_node_bytes = a.copies_bytes * (nd - g) / nd;
    a.intra_node_bytes = a.copies_bytes * (g - 1.0) / nd;
  }
  const LinkSpec& intra = plan.cluster.intra_node;
  const LinkSpec& inter = plan.cluster.inter_node;
  const double latency = static_cast<double>(latency_steps(Collective::all_to_all, n)) *
                         (a.nodes > 1 ? inter.latency_s : intra.latency_s);
  a.time_s = std::max(a.inter_node_bytes / inter.effective_Bps(), a.intra_node_bytes / intra.effective_Bps()) + latency;
  return a;
}

ExpertA2A layer_expert_a2a(const Plan& plan) { return expert_a2a(plan, moe_token_copies(plan).tokens); }

EpOverlap ep_overlap(const Plan& plan) {
  const ParallelConfig& pc = plan.parallel;
  EpOverlap o;
  if (!pc.overlap_ep_comm) return o;
  const int64_t v = pc.chunks_per_stage(), passes = pc.num_microbatches * v;
  const int64_t warmup = first_stage_warmup(pc.schedule, pc.pp, pc.num_microbatches, v);
  const int64_t alone = std::min(passes, std::max<int64_t>(1, warmup));
  o.paired_share = static_cast<double>(passes - alone) / static_cast<double>(passes);
  // DeepEP's normal kernels: 20 SMs (DeepSeek-V3 report, arXiv:2412.19437 Sec. 3.2.2).
  constexpr double kDeepEpSms = 20.0;
  if (pc.moe_dispatcher == MoeDispatcher::deepep) {
    o.comm_sm_share = std::min(1.0, kDeepEpSms / static_cast<double>(std::max<int64_t>(1, plan.gpu.gemm.sm_count)));
  }
  return o;
}

double ep_overlap_exposed_s(const EpOverlap& o, double comm, double behind) {
  const double paired = std::max(comm - behind, o.comm_sm_share * comm);
  return o.paired_share * paired + (1.0 - o.paired_share) * comm;
}

double moe_rank_load(const ModelSpec& m, int64_t ep) {
  if (!m.is_moe()) return 1.0;
  if (m.capacity_factor > 0) return m.capacity_factor;
  return std::min(m.imbalance, static_cast<double>(ep));
}

MoeTokenCopies moe_token_copies(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& pc = plan.parallel;
  MoeTokenCopies c;
  if (!m.is_moe()) return c;
  const double T = static_cast<double>(pc.micro_batch) * static_cast<double>(plan.seq_len()) / static_cast<double>(pc.cp);
  const double tp = static_cast<double>(pc.tp), k = static_cast<double>(m.top_k);
  c.tokens = pc.sequence_parallel ? T / tp : T;
  c.dispatched = c.tokens * k;
  const double gathered = pc.etp > 0 ? T / tp * static_cast<double>(pc.etp) : T;
  c.expert = gathered * k * moe_rank_load(m, pc.ep);
  return c;
}

MoeRoutingBytes moe_routing_bytes(const Plan& plan) {
  const ModelSpec& m = plan.model;
  MoeRoutingBytes b;
  if (!m.is_moe()) return b;
  const MoeTokenCopies c = moe_token_copies(plan);
  const double A = static_cast<double>(dtype_bytes(plan.activation_dtype()));
  const double h = static_cast<double>(m.hidden), E = static_cast<double>(m.experts), k = static_cast<double>(m.top_k);
  const double t = c.tokens, n = c.dispatched;
  b.forward = t * E * (A + 8.0) + 12.0 * t * k + (3.0 * n + t) * h * A;
  b.backward = t * E * (20.0 + A) + (3.0 * n + 2.0 * t) * h * A;
  if (plan.parallel.ep > 1 && m.experts / plan.parallel.ep > 1) {
    b.forward += 4.0 * c.expert * h * A;
    b.backward += 4.0 * c.expert * h * A;
  }
  return b;
}

}  // namespace parplan
