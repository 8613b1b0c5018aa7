// Chrome trace event JSON writer (see trace.hpp). Written by hand with fmt: 10^5 events, fixed formatting.
#include "simulator/trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <iterator>
#include <map>
#include <vector>

namespace parplan::sim {
namespace {

const char* short_name(EventCategory c) {
  switch (c) {
    case EventCategory::forward: return "F";
    case EventCategory::backward: return "B";
    case EventCategory::backward_input: return "B";
    case EventCategory::backward_weight: return "W";
    case EventCategory::recompute: return "R";
    case EventCategory::layer_comm: return "comm";
    case EventCategory::tp_comm: return "TP";
    case EventCategory::cp_comm: return "CP";
    case EventCategory::pp_comm: return "p2p";
    case EventCategory::dp_comm: return "DP";
    case EventCategory::zero3_gather: return "ZeRO-3 gather";
    case EventCategory::optimizer: return "optimizer";
    case EventCategory::host_copy: return "host copy";
    case EventCategory::ep_comm: return "EP";
  }
  return "?";
}

// Microseconds with nanosecond resolution, the trace format's unit. Start and end are rounded to the nanosecond and
// the duration is their difference, so back-to-back events on a track end exactly where the next begins (rounding ts
// and dur separately let a slice overrun its successor by 1 ns, which Chrome and Perfetto read as mis-nested).
// Times are non-negative; beyond 9e18 ns (285 years, reachable only with absurdly slow profiles) they saturate rather
// than overflow.
int64_t ns(double s) { return s <= 0 ? 0 : s >= 9e9 ? int64_t{9'000'000'000'000'000'000} : std::llround(s * 1e9); }
std::string us_ns(int64_t n) { return fmt::format("{}.{:03d}", n / 1000, n % 1000); }
std::string us(double s) { return us_ns(ns(s)); }

}  // namespace

bool has_chunks(const Timeline& t) {
  for (const auto& tr : t.tracks) {
    for (const auto& st : tr.streams) {
      for (const auto& e : st.events) {
        if (e.chunk > 0) return true;
      }
    }
  }
  return false;
}

std::string event_name(const TimelineEvent& e, bool with_chunk) {
  std::string n = short_name(e.category);
  if (e.microbatch >= 0) {
    if (e.category == EventCategory::pp_comm || e.category == EventCategory::layer_comm ||
        e.category == EventCategory::zero3_gather ||
        e.category == EventCategory::tp_comm || e.category == EventCategory::cp_comm ||
        e.category == EventCategory::ep_comm || e.category == EventCategory::host_copy) {
      n += ' ';
    }
    n += std::to_string(e.microbatch);
    if (with_chunk) {
      n += '.';
      n += std::to_string(e.chunk);
    }
  }
  return n;
}

namespace {

// Where a p2p flow arrow ends: the receiving stage's first compute op of the same microbatch that starts at or after
// the transfer arrives. That op consumes it: a forward's input has arrived only after the microbatch's earlier
// chunks ran, and a gradient after all of its forwards, so no other op of the microbatch starts in between. (The
// arrival time itself often falls inside an unrelated op, which the arrow then pointed at.)
class FlowTargets {
 public:
  explicit FlowTargets(const Timeline& t) {
    for (const TimelineTrack& tr : t.tracks) {
      auto& by_mb = starts_[tr.stage];
      if (tr.streams.empty()) continue;
      for (const TimelineEvent& e : tr.streams[0].events) {
        if (e.microbatch < 0) continue;
        if (e.category == EventCategory::forward || e.category == EventCategory::backward ||
            e.category == EventCategory::backward_input || e.category == EventCategory::recompute) {
          by_mb[e.microbatch].push_back(e.start_s);
        }
      }
      for (auto& [mb, v] : by_mb) std::sort(v.begin(), v.end());
    }
  }
  double end_of(int64_t stage, int64_t microbatch, double arrival_s) const {
    const auto st = starts_.find(stage);
    if (st == starts_.end()) return arrival_s;
    const auto mb = st->second.find(microbatch);
    if (mb == st->second.end()) return arrival_s;
    const auto it = std::lower_bound(mb->second.begin(), mb->second.end(), arrival_s - 1e-12);
    return it == mb->second.end() ? arrival_s : *it;
  }

 private:
  std::map<int64_t, std::map<int64_t, std::vector<double>>> starts_;
};

}  // namespace

std::string chrome_trace_json(const Timeline& t) {
  const bool chunks = has_chunks(t);
  const FlowTargets targets(t);
  std::string out;
  out.reserve(1 << 20);
  auto it = std::back_inserter(out);
  fmt::format_to(it, "{{\"displayTimeUnit\":\"ms\",\"otherData\":{{\"source\":\"{}\",\"step_us\":{}}},\"traceEvents\":[\n",
                 t.source, us(t.step_s));
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (const TimelineTrack& tr : t.tracks) {
    sep();
    fmt::format_to(it, "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"name\":\"stage {} (rank {})\"}}}}",
                   tr.stage, tr.stage, tr.rank);
    sep();
    fmt::format_to(it, "{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"sort_index\":{}}}}}",
                   tr.stage, tr.stage);
    for (size_t k = 0; k < tr.streams.size(); ++k) {
      sep();
      fmt::format_to(it, "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":\"{}\"}}}}",
                     tr.stage, k, tr.streams[k].name);
    }
  }
  for (const TimelineTrack& tr : t.tracks) {
    for (size_t k = 0; k < tr.streams.size(); ++k) {
      for (const TimelineEvent& e : tr.streams[k].events) {
        sep();
        fmt::format_to(it, "{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":{},\"tid\":{}",
                       event_name(e, chunks), to_string(e.category), us(e.start_s), us_ns(ns(e.end_s) - ns(e.start_s)), tr.stage,
                       k);
        if (e.microbatch >= 0 || e.bytes > 0) {
          out += ",\"args\":{";
          bool a = false;
          if (e.microbatch >= 0) {
            fmt::format_to(it, "\"microbatch\":{},\"chunk\":{}", e.microbatch, e.chunk);
            a = true;
          }
          if (e.bytes > 0) fmt::format_to(it, "{}\"bytes\":{}", a ? "," : "", e.bytes);
          if (e.peer_stage >= 0) fmt::format_to(it, ",\"to_stage\":{}", e.peer_stage);
          out += '}';
        }
        out += '}';
        if (e.flow >= 0 && e.peer_stage >= 0) {
          // Flow arrow: from the send on this stage to the op on the receiving stage's compute thread that uses it.
          sep();
          fmt::format_to(it, "{{\"name\":\"p2p\",\"cat\":\"pp_comm\",\"ph\":\"s\",\"id\":{},\"ts\":{},\"pid\":{},\"tid\":{}}}",
                         e.flow, us(e.start_s), tr.stage, k);
          sep();
          fmt::format_to(it, "{{\"name\":\"p2p\",\"cat\":\"pp_comm\",\"ph\":\"f\",\"bp\":\"e\",\"id\":{},\"ts\":{},\"pid\":{},\"tid\":0}}",
                         e.flow, us(targets.end_of(e.peer_stage, e.microbatch, e.end_s)), e.peer_stage);
        }
      }
    }
    for (const MemorySample& m : tr.memory) {
      sep();
      fmt::format_to(it, "{{\"name\":\"activations\",\"ph\":\"C\",\"ts\":{},\"pid\":{},\"args\":{{\"GiB\":{:.6f}}}}}",
                     us(m.t_s), tr.stage, m.activation_bytes / 1073741824.0);
    }
  }
  out += "\n]}\n";
  return out;
}

}  // namespace parplan::sim
