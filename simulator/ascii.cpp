// ASCII timeline (see ascii.hpp): each column shows the compute-stream event covering the column's midpoint.
#include "simulator/ascii.hpp"

#include <algorithm>
#include <fmt/core.h>

namespace parplan::sim {
namespace {

char glyph(const TimelineEvent& e) {
  const int mb = std::max(0, e.microbatch);
  switch (e.category) {
    case EventCategory::forward: return static_cast<char>('0' + mb % 10);
    case EventCategory::backward:
    case EventCategory::backward_input: return static_cast<char>('a' + mb % 26);
    case EventCategory::backward_weight: return 'W';
    case EventCategory::recompute: return 'r';
    case EventCategory::layer_comm: return '~';
    case EventCategory::zero3_gather: return 'g';
    case EventCategory::pp_comm: return '>';
    case EventCategory::optimizer: return 'O';
    case EventCategory::host_copy: return 'H';
    case EventCategory::ep_comm: return 'e';
    default: return '?';
  }
}

}  // namespace

std::string render_ascii(const Timeline& t, int width) {
  width = std::max(width, 10);
  const double step = t.step_s > 0 ? t.step_s : 1.0;
  const double dt = step / width;
  std::string out;
  for (const TimelineTrack& tr : t.tracks) {
    std::string line(static_cast<size_t>(width), '.');
    if (!tr.streams.empty()) {
      const auto& ev = tr.streams[0].events;  // compute stream, sorted by start
      size_t k = 0;
      for (int c = 0; c < width; ++c) {
        const double mid = (c + 0.5) * dt;
        while (k < ev.size() && ev[k].end_s <= mid) ++k;
        if (k < ev.size() && ev[k].start_s <= mid) line[static_cast<size_t>(c)] = glyph(ev[k]);
      }
    }
    out += fmt::format("stage {:>3} |{}|\n", tr.stage, line);
  }
  out += fmt::format("{:>10}0{:>{}}\n", "", step >= 1 ? fmt::format("{:.4g} s", step) : fmt::format("{:.4g} ms", step * 1e3), width + 1);
  out += "  0-9 forward (microbatch mod 10)  a-z backward (mod 26)  W weight grad  r recompute  ~ exposed comm  "
         "> blocking send  O optimizer  H host copy  . idle\n";
  return out;
}

}  // namespace parplan::sim
