// Term-by-term comparison of the cost model's estimate with a measured run.
#include "runtime/report.hpp"

#include <algorithm>
#include <array>
#include <fmt/core.h>
#include <set>

namespace parplan::runtime {

std::vector<TermRow> compare(const Estimate& e, const RunResult& r, const std::vector<Program>& programs, bool rank_local) {
  std::vector<TermRow> rows;
  if (r.ranks.empty()) return rows;
  // Per rank: time per term in the median step.
  std::vector<std::array<double, kNumTerms>> by_term(r.ranks.size());
  size_t slowest = 0;
  double slowest_compute = -1;
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    const auto& times = r.ranks[i].step_ops[static_cast<size_t>(std::min<int>(r.median_step, static_cast<int>(r.ranks[i].step_ops.size()) - 1))];
    by_term[i].fill(0.0);
    const auto& ops = programs[i].ops;
    for (size_t k = 0; k < ops.size(); ++k) {
      const Op& op = ops[k];
      // Joining an overlapped collective: the compute stream's wait for it (from the previous op's end to this
      // op's start) is what it exposes, counted as TP comm for TP-group collectives as the cost model does.
      if (op.wait_for >= 0 && k > 0 && !rank_local) {
        const Op& awaited = ops[static_cast<size_t>(op.wait_for)];
        const Term t_wait = awaited.group == Group::tp ? Term::tp_comm : awaited.term;
        by_term[i][static_cast<size_t>(t_wait)] += std::max(0.0, times[k].start_s - times[k - 1].end_s);
      }
      // An overlapped collective other than the DP buckets (whose total is reported) runs beside compute: its
      // exposed part is the wait above, not its duration.
      if (op.kind == OpKind::collective && op.overlap && op.term != Term::dp_comm) continue;
      by_term[i][static_cast<size_t>(op.term)] += times[k].duration_s();
      // The ops of one grouped p2p exchange (exchange_end, as execute() issues them) share its span: counted once.
      if (op.kind == OpKind::p2p) k = exchange_end(ops, k) - 1;
    }
    const double compute = by_term[i][static_cast<size_t>(Term::forward)] + by_term[i][static_cast<size_t>(Term::backward)] +
                           by_term[i][static_cast<size_t>(Term::recompute)];
    if (compute > slowest_compute) {
      slowest_compute = compute;
      slowest = i;
    }
  }
  const auto& t = by_term[slowest];
  auto term = [&](Term x) { return t[static_cast<size_t>(x)]; };
  const double step = r.ranks[slowest].step_s.empty() ? 0.0 : r.median_step_s();
  double busy = 0;
  for (double v : t) busy += v;
  const TimeBreakdown& tb = e.time;
  const std::string comm_note = rank_local ? "predicted (rank-local: not measured)" : "";
  rows.push_back({"step", false, tb.step_s, step, true, rank_local ? "includes predicted communication" : ""});
  rows.push_back({"compute", false, tb.compute_s, slowest_compute, true, ""});
  rows.push_back({"bubble", false, tb.bubble_s, std::max(0.0, step - busy), !rank_local, rank_local ? "not measured" : ""});
  rows.push_back({"tp comm", false, tb.tp_comm_s, term(Term::tp_comm), !rank_local, comm_note});
  rows.push_back({"cp comm", false, tb.cp_comm_s, term(Term::cp_comm), !rank_local, comm_note});
  if (e.layer.ep_bytes > 0) {  // MoE with ep > 1: the expert all-to-alls (dispatch, combine, both passes)
    rows.push_back({"ep comm", false, tb.ep_comm_s, term(Term::ep_comm), !rank_local, comm_note});
  }
  rows.push_back({"pp comm", false, tb.pp_comm_s, term(Term::pp_comm), !rank_local, rank_local ? comm_note : "includes waiting for the peer stage"});
  rows.push_back({"dp comm (total)", false, tb.dp_comm_total_s, term(Term::dp_comm), !rank_local, comm_note});
  rows.push_back({"zero3 comm", false, tb.zero3_exposed_s, term(Term::zero3_comm), !rank_local, comm_note});
  rows.push_back({"optimizer", false, tb.optimizer_s, term(Term::optimizer), true, ""});
  std::set<int64_t> seen;
  for (const RankRun& rr : r.ranks) {
    if (!seen.insert(rr.stage).second) continue;
    const StageMemory& sm = e.memory[static_cast<size_t>(rr.stage)];
    const double tensors = sm.weights + sm.grads + sm.optimizer + sm.activations + sm.recompute_working_set + sm.zero3_buffers;
    rows.push_back({fmt::format("tensors stage {} (rank {})", rr.stage, rr.rank), true, tensors,
                    static_cast<double>(rr.model_peak_bytes()), true,
                    fmt::format("+ {} B runtime scratch; model allowances {} B", rr.allowance_bytes,
                                static_cast<int64_t>(sm.workspace + sm.comm_buffers + sm.cuda_context + sm.fragmentation))});
  }
  return rows;
}

}  // namespace parplan::runtime
