// Builds a Timeline from the executor's per-op times.
#include "runtime/measured_timeline.hpp"

#include <algorithm>
#include <set>

namespace parplan::runtime {
namespace {

enum StreamIndex { kCompute = 0, kTp, kCp, kPp, kDp, kEp, kStreams };

bool is_comm(const Op& op) { return op.kind == OpKind::collective || op.kind == OpKind::p2p; }

EventCategory compute_category(const Op& op, bool split) {
  switch (op.term) {
    case Term::recompute:
      return EventCategory::recompute;
    case Term::optimizer:
      return EventCategory::optimizer;
    case Term::backward:
      if (op.phase == Phase::backward_weight) return EventCategory::backward_weight;
      return split ? EventCategory::backward_input : EventCategory::backward;
    default:
      return op.phase == Phase::tail ? EventCategory::optimizer : EventCategory::forward;
  }
}

}  // namespace

Timeline measured_timeline(const RunResult& r, const std::vector<Program>& programs, bool rank_local) {
  Timeline tl;
  tl.source = rank_local ? "measured (rank-local: communication predicted)" : "measured";
  tl.step_s = r.median_step_s();
  std::set<int64_t> seen;
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    const RankRun& rr = r.ranks[i];
    if (!seen.insert(rr.stage).second || rr.step_ops.empty()) continue;
    const auto& times = rr.step_ops[static_cast<size_t>(std::min<int>(r.median_step, static_cast<int>(rr.step_ops.size()) - 1))];
    const auto& ops = programs[i].ops;
    const bool split = std::any_of(ops.begin(), ops.end(), [](const Op& o) { return o.phase == Phase::backward_weight; });
    TimelineTrack tr;
    tr.stage = rr.stage;
    tr.rank = rr.rank;
    tr.streams.resize(kStreams);
    const char* names[kStreams] = {"compute", "tp", "cp", "pp", "dp", "ep"};
    for (int s = 0; s < kStreams; ++s) tr.streams[static_cast<size_t>(s)].name = names[s];
    for (size_t k = 0; k < ops.size(); ++k) {
      const Op& op = ops[k];
      if (op.kind == OpKind::alloc || op.kind == OpKind::free) continue;
      TimelineEvent ev;
      ev.microbatch = static_cast<int32_t>(op.microbatch);
      ev.chunk = static_cast<int32_t>(op.chunk);
      ev.start_s = times[k].start_s;
      ev.end_s = times[k].end_s;
      if (!is_comm(op)) {
        ev.category = compute_category(op, split);
        auto& evs = tr.streams[kCompute].events;
        if (!evs.empty() && evs.back().category == ev.category && evs.back().microbatch == ev.microbatch &&
            evs.back().chunk == ev.chunk) {
          evs.back().end_s = std::max(evs.back().end_s, ev.end_s);  // same task: extend
        } else {
          evs.push_back(ev);
        }
        continue;
      }
      // A grouped exchange (exchange_end: a send and a receive in one call, e.g. send_forward_recv_backward, or a
      // ring step of ring attention) shares one span: one event, named by its send.
      const Op* named = &op;
      if (op.kind == OpKind::p2p) {
        const size_t j = exchange_end(ops, k);
        for (size_t x = k; x < j; ++x) {
          if (ops[x].collective == CollectiveKind::send) {
            named = &ops[x];
            break;
          }
        }
        k = j - 1;
      }
      ev.microbatch = static_cast<int32_t>(named->microbatch);
      ev.chunk = static_cast<int32_t>(named->chunk);
      ev.bytes = named->bytes;
      int stream = kTp;
      switch (op.term) {
        case Term::cp_comm:
          ev.category = EventCategory::cp_comm;
          stream = kCp;
          break;
        case Term::pp_comm: {
          ev.category = EventCategory::pp_comm;
          stream = kPp;
          // A send names the stage it goes to (the trace's to_stage); a receive alone does not.
          ev.peer_stage = named->collective == CollectiveKind::send ? named->peer : -1;
          break;
        }
        case Term::dp_comm:
          ev.category = EventCategory::dp_comm;
          stream = kDp;
          break;
        case Term::zero3_comm:
          ev.category = EventCategory::layer_comm;
          stream = kDp;
          break;
        case Term::ep_comm:
          ev.category = EventCategory::ep_comm;
          stream = kEp;
          break;
        default:
          ev.category = EventCategory::tp_comm;
          stream = kTp;
          break;
      }
      tr.streams[static_cast<size_t>(stream)].events.push_back(ev);
    }
    for (TimelineStream& st : tr.streams) {
      std::stable_sort(st.events.begin(), st.events.end(), [](const TimelineEvent& a, const TimelineEvent& b) { return a.start_s < b.start_s; });
    }
    if (tr.streams.back().events.empty()) tr.streams.pop_back();  // the ep stream only where a MoE plan has one
    tl.tracks.push_back(std::move(tr));
  }
  std::sort(tl.tracks.begin(), tl.tracks.end(), [](const TimelineTrack& a, const TimelineTrack& b) { return a.stage < b.stage; });
  return tl;
}

}  // namespace parplan::runtime
