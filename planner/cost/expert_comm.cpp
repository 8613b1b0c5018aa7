// Expert-parallel token exchange (formulas and sources in expert_comm.hpp).
#include "planner/cost/expert_comm.hpp"

#include <algorithm>

#include "planner/cost/collectives.hpp"
#include "planner/cost/layout.hpp"

namespace parplan {

double node_hit_probability(int64_t experts, int64_t experts_per_node, int64_t top_k) {
  if (experts_per_node >= experts) return 1.0;
  double miss = 1.0;  // C(E - e, k) / C(E, k) = prod_i (E - e - i) / (E - i)
  for (int64_t i = 0; i < top_k; ++i) {
    miss *= std::max(0.0, static_cast<double>(experts - experts_per_node - i)) / static_cast<double>(experts - i);
  }
  return 1.0 - miss;
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
    const double hit = node_hit_probability(m.experts, m.experts / a.nodes, m.top_k);
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
