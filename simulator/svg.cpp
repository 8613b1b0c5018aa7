// SVG schedule picture (see svg.hpp). Deterministic text; coordinates rounded to 0.01 px.
#include "simulator/svg.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>
#include <string>
#include <utility>
#include <vector>

#include "simulator/trace.hpp"

namespace parplan::sim {
namespace {

constexpr double kLeft = 90, kRight = 20, kTop = 40, kPlot = 1200;
constexpr double kRowCompute = 26, kRowComm = 7, kGap = 8;  // kRowComm: one sub-row per communication stream

// Hue per microbatch spread by the golden angle so neighbours differ; forward light, backward dark.
std::string colour(const TimelineEvent& e) {
  const double hue = std::fmod(std::max(0, e.microbatch) * 137.508, 360.0);
  switch (e.category) {
    case EventCategory::forward: return fmt::format("hsl({:.0f},70%,72%)", hue);
    case EventCategory::backward:
    case EventCategory::backward_input: return fmt::format("hsl({:.0f},60%,45%)", hue);
    case EventCategory::backward_weight: return fmt::format("hsl({:.0f},35%,30%)", hue);
    case EventCategory::recompute: return "#bdbdbd";
    case EventCategory::optimizer: return "#555555";
    case EventCategory::host_copy: return "#8d6e63";
    default: return "#999999";
  }
}

std::string fill_of(const TimelineEvent& e) {
  switch (e.category) {
    case EventCategory::layer_comm:
    case EventCategory::tp_comm:
    case EventCategory::cp_comm:
    case EventCategory::ep_comm: return "url(#hatch-tp)";
    case EventCategory::pp_comm: return "url(#hatch-pp)";
    case EventCategory::dp_comm:
    case EventCategory::zero3_gather: return "url(#hatch-dp)";
    default: return colour(e);
  }
}

// A "nice" tick spacing: 1, 2 or 5 x 10^k with about 10 ticks over the step.
double tick_step(double span) {
  const double raw = span / 10.0;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0}) {
    if (f * p >= raw) return f * p;
  }
  return 10 * p;
}

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

}  // namespace

namespace {
// Sub-pixel events of one stream row gathered in one pixel column (render_svg).
struct Bin {
  int64_t column = -1;
  double x0 = 0, x1 = 0, start_s = 0, end_s = 0;
  int64_t events = 0;
  std::vector<std::pair<std::string, double>> fills;  // fill -> seconds drawn in it (few kinds)
  void add(const std::string& fill, double s) {
    for (auto& [f, t] : fills) {
      if (f == fill) {
        t += s;
        return;
      }
    }
    fills.emplace_back(fill, s);
  }
};
}  // namespace

namespace {
constexpr double kCutPx = 36;  // width of one elision mark

// Where time is drawn: seconds to pixels, with the elided spans (cuts) each drawn as kCutPx pixels.
struct TimeMap {
  struct Cut {
    double a = 0, b = 0;  // the elided span [a, b], seconds
  };
  std::vector<Cut> cuts;  // sorted, disjoint
  double sx = 1;          // pixels per second outside the cuts
  double x(double t) const {
    double elided = 0, px = kLeft;
    for (const Cut& c : cuts) {
      if (t <= c.a) break;
      if (t < c.b) return px + (c.a - elided) * sx + kCutPx * (t - c.a) / (c.b - c.a);
      elided += c.b - c.a;
      px += kCutPx;
    }
    return px + (t - elided) * sx;
  }
  bool hidden(double t0, double t1) const {  // [t0, t1] lies inside one cut
    return std::any_of(cuts.begin(), cuts.end(), [&](const Cut& c) { return t0 >= c.a && t1 <= c.b; });
  }
  // The parts of [t0, t1] outside the cuts.
  std::vector<std::pair<double, double>> pieces(double t0, double t1) const {
    std::vector<std::pair<double, double>> out;
    for (const Cut& c : cuts) {
      if (c.b <= t0 || c.a >= t1) continue;
      if (c.a > t0) out.emplace_back(t0, c.a);
      t0 = std::max(t0, c.b);
    }
    if (t1 > t0) out.emplace_back(t0, t1);
    return out;
  }
};

// Per track, the spans in which its compute stream runs only microbatches in [lo, hi) (idle time between two of
// them included); the spans common to every track are where the steady state can be elided.
std::vector<TimeMap::Cut> steady_spans(const TimelineTrack& tr, int32_t lo, int32_t hi) {
  std::vector<TimeMap::Cut> spans;
  bool open = false;
  for (const TimelineEvent& e : tr.streams.front().events) {
    const bool inside = e.microbatch >= lo && e.microbatch < hi;
    if (inside && open) spans.back().b = std::max(spans.back().b, e.end_s);
    if (inside && !open) spans.push_back({e.start_s, e.end_s});
    open = inside;
  }
  return spans;
}

std::vector<TimeMap::Cut> intersect(const std::vector<TimeMap::Cut>& x, const std::vector<TimeMap::Cut>& y) {
  std::vector<TimeMap::Cut> out;
  for (size_t i = 0, j = 0; i < x.size() && j < y.size();) {
    const double a = std::max(x[i].a, y[j].a), b = std::min(x[i].b, y[j].b);
    if (b > a) out.push_back({a, b});
    (x[i].b < y[j].b ? i : j)++;
  }
  return out;
}

// What the picture elides: microbatches [keep, m - keep) of a step of m > kSvgElideAbove, keep = the pipeline's
// chunks (stages x chunks per stage) plus three steady cycles, cut where every stage runs only those microbatches.
struct Elision {
  std::vector<TimeMap::Cut> cuts;
  int32_t microbatches = 0, hidden = 0, first_hidden = -1, last_hidden = -1;
};
Elision find_elision(const Timeline& t, double span) {
  Elision el;
  int32_t chunks = 1;
  for (const auto& tr : t.tracks) {
    for (const TimelineEvent& e : tr.streams.front().events) {
      el.microbatches = std::max(el.microbatches, e.microbatch + 1);
      chunks = std::max(chunks, e.chunk + 1);
    }
  }
  const int32_t keep = static_cast<int32_t>(t.tracks.size()) * chunks + 3;
  if (el.microbatches <= kSvgElideAbove || el.microbatches - 2 * keep < kSvgMinElided) return el;
  std::vector<TimeMap::Cut> common = {{0, span}};
  for (const auto& tr : t.tracks) common = intersect(common, steady_spans(tr, keep, el.microbatches - keep));
  for (const TimeMap::Cut& c : common) {
    if (c.b - c.a > 0.02 * span) el.cuts.push_back(c);  // a sliver is not worth a mark
  }
  // Hidden: a microbatch none of whose compute is drawn.
  std::vector<char> shown(static_cast<size_t>(el.microbatches), 0);
  TimeMap map;
  map.cuts = el.cuts;
  for (const auto& tr : t.tracks) {
    for (const TimelineEvent& e : tr.streams.front().events) {
      if (e.microbatch >= 0 && !map.hidden(e.start_s, e.end_s)) shown[static_cast<size_t>(e.microbatch)] = 1;
    }
  }
  for (int32_t m = 0; m < el.microbatches; ++m) {
    if (shown[static_cast<size_t>(m)]) continue;
    ++el.hidden;
    if (el.first_hidden < 0) el.first_hidden = m;
    el.last_hidden = m;
  }
  return el;
}

// The axis spans the step and anything drawn after it (with a sharded optimizer the parameter all-gather runs on
// into the next step's first forward), so no bar leaves the picture.
double drawn_span(const Timeline& t, double step) {
  double span = step;
  for (const auto& tr : t.tracks)
    for (const auto& st : tr.streams)
      for (const auto& e : st.events) span = std::max(span, e.end_s);
  return span;
}

// Each stage: the compute row, then one thin row per communication stream that carries events (tp, cp, pp, dp),
// so concurrent transfers on different streams do not overprint.
struct Rows {
  std::vector<std::vector<size_t>> comm_rows;  // per track: the streams given a row, in order
  std::vector<double> track_y;                 // per track: the top of its compute row
  double y_next = kTop;                        // below the last track
};
Rows stage_rows(const Timeline& t) {
  Rows rows;
  rows.comm_rows.resize(t.tracks.size());
  rows.track_y.resize(t.tracks.size());
  for (size_t i = 0; i < t.tracks.size(); ++i) {
    for (size_t k = 1; k < t.tracks[i].streams.size(); ++k) {
      if (!t.tracks[i].streams[k].events.empty()) rows.comm_rows[i].push_back(k);
    }
    rows.track_y[i] = rows.y_next;
    rows.y_next += kRowCompute + kRowComm * static_cast<double>(std::max<size_t>(1, rows.comm_rows[i].size())) + kGap;
  }
  return rows;
}

// The <svg> element, the hatch patterns of the communication fills, the white background and the title.
void draw_header(std::string& o, double width, double height, const std::string& title) {
  o += fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
                   "viewBox=\"0 0 {:.0f} {:.0f}\" font-family=\"sans-serif\" font-size=\"11\">\n",
                   width, height, width, height);
  o += "<defs>\n";
  for (const auto& [id, c] : {std::pair<const char*, const char*>{"tp", "#d62728"}, {"pp", "#1f77b4"}, {"dp", "#2ca02c"}}) {
    o += fmt::format("<pattern id=\"hatch-{}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
                     "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"white\"/>"
                     "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"{}\" stroke-width=\"3\"/></pattern>\n", id, c);
  }
  o += "</defs>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += fmt::format("<text x=\"{:.0f}\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{}</text>\n", kLeft, escape(title));
}

// One stream's bars in the row at `ry` of height `rh` (the compute row labels the bars its labels fit). An event
// an elision cuts is drawn up to the cut and from it; one inside a cut is not drawn.
void draw_stream(std::string& o, const TimelineStream& stream, double ry, double rh, bool compute, const TimeMap& map,
                 bool chunks) {
  // Bars narrower than a pixel are binned by pixel column: one bar per column, in the colour that fills most of
  // it, titled with its event count (a 2,048-microbatch step drew 450,000 bars, 39 MB, that no browser shows).
  Bin bin;
  auto flush = [&] {
    if (bin.events == 0) return;
    const auto top = std::max_element(bin.fills.begin(), bin.fills.end(),
                                      [](const auto& a, const auto& b) { return a.second < b.second; });
    o += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\">"
                     "<title>{} {} events {:.3f}-{:.3f} ms</title></rect>\n",
                     bin.x0, ry, std::max(bin.x1 - bin.x0, 0.01), rh, top->first, stream.name, bin.events,
                     bin.start_s * 1e3, bin.end_s * 1e3);
    bin = Bin{};
  };
  for (const TimelineEvent& e : stream.events) {
    if (e.end_s <= e.start_s || map.hidden(e.start_s, e.end_s)) continue;
    for (const auto& [t0, t1] : map.pieces(e.start_s, e.end_s)) {
      const double x = map.x(t0), w = (t1 - t0) * map.sx;  // a piece is outside the cuts: no gap inside it
      if (w < 1.0) {
        const int64_t column = static_cast<int64_t>(std::floor(x - kLeft));
        if (column != bin.column) {
          flush();
          bin.column = column;
          bin.x0 = x;
          bin.start_s = e.start_s;
        }
        ++bin.events;
        bin.x1 = std::max(bin.x1, x + w);
        bin.end_s = std::max(bin.end_s, e.end_s);
        bin.add(fill_of(e), t1 - t0);
        continue;
      }
      flush();
      const std::string label = event_name(e, chunks);
      o += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" "
                       "stroke=\"white\" stroke-width=\"0.3\"><title>{} {} {:.3f}-{:.3f} ms</title></rect>\n",
                       x, ry, w, rh, fill_of(e), stream.name, label, e.start_s * 1e3, e.end_s * 1e3);
      // Only where the label fits its bar (about 6 px per character at font-size 9, digits and capitals).
      if (compute && e.microbatch >= 0 && w >= 6.0 * static_cast<double>(label.size()) + 2 &&
          !(e.category == EventCategory::layer_comm)) {
        o += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" font-size=\"9\">{}</text>\n",
                         x + w / 2, ry + rh * 0.65, label);
      }
    }
  }
  flush();
}

// One stage at `y`: its label, the compute row's background, the communication rows' labels, then every stream.
void draw_track(std::string& o, const TimelineTrack& tr, double y, const std::vector<size_t>& comm_rows,
                const TimeMap& map, bool chunks) {
  o += fmt::format("<text x=\"{:.0f}\" y=\"{:.2f}\" text-anchor=\"end\">stage {}</text>\n", kLeft - 8,
                   y + kRowCompute * 0.7, tr.stage);
  o += fmt::format("<rect x=\"{:.0f}\" y=\"{:.2f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"#f4f4f4\"/>\n", kLeft, y,
                   kPlot, kRowCompute);
  for (size_t r = 0; r < comm_rows.size(); ++r) {
    o += fmt::format("<text x=\"{:.0f}\" y=\"{:.2f}\" text-anchor=\"end\" font-size=\"7\">{}</text>\n", kLeft - 3,
                     y + kRowCompute + kRowComm * (static_cast<double>(r) + 0.85), tr.streams[comm_rows[r]].name);
  }
  for (size_t k = 0; k < tr.streams.size(); ++k) {
    const bool compute = k == 0;
    const auto sub = std::find(comm_rows.begin(), comm_rows.end(), k) - comm_rows.begin();
    const double ry = compute ? y : y + kRowCompute + kRowComm * static_cast<double>(sub);
    const double rh = compute ? kRowCompute : kRowComm;
    draw_stream(o, tr.streams[k], ry, rh, compute, map, chunks);
  }
}

// The time axis at `ay` with ticks in ms, and a dashed line at the step's end when bars run past it.
void draw_time_axis(std::string& o, double ay, double span, double step, const TimeMap& map) {
  o += fmt::format("<line x1=\"{:.0f}\" y1=\"{:.2f}\" x2=\"{:.0f}\" y2=\"{:.2f}\" stroke=\"black\"/>\n", kLeft, ay,
                   kLeft + kPlot, ay);
  double shown = span;  // ticks spaced for the time drawn; none inside a cut
  for (const TimeMap::Cut& c : map.cuts) shown -= c.b - c.a;
  const double ts = tick_step(shown);
  // Tick labels in ms as plain decimals (no exponents): as many decimals as the tick spacing needs.
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(ts * 1e3) + 1e-9)));
  for (int k = 0; k * ts <= span * (1 + 1e-9); ++k) {
    const double tk = k * ts;
    if (std::any_of(map.cuts.begin(), map.cuts.end(), [&](const TimeMap::Cut& c) { return tk > c.a && tk < c.b; })) {
      continue;
    }
    const double x = map.x(tk);
    o += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"black\"/>"
                     "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\">{:.{}f}</text>\n",
                     x, ay, x, ay + 5, x, ay + 17, k * ts * 1e3, decimals);
  }
  if (span > step * (1 + 1e-9)) {
    const double x = map.x(step);
    o += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.0f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"black\" "
                     "stroke-dasharray=\"4 3\"/><text x=\"{:.2f}\" y=\"{:.0f}\" text-anchor=\"end\" font-size=\"9\">"
                     "step end (later bars overlap the next step)</text>\n",
                     x, kTop - 6, x, ay, x - 3, kTop - 8);
  }
  o += fmt::format("<text x=\"{:.0f}\" y=\"{:.2f}\" text-anchor=\"end\">ms</text>\n", kLeft - 8, ay + 17);
}

// The legend at `ly`: one swatch per kind of bar.
void draw_legend(std::string& o, double ly) {
  struct Item {
    const char* label;
    std::string fill;
  };
  TimelineEvent f, b, w;
  f.microbatch = b.microbatch = w.microbatch = 0;
  b.category = EventCategory::backward;
  w.category = EventCategory::backward_weight;
  const Item items[] = {{"forward (hue = microbatch)", colour(f)}, {"backward", colour(b)}, {"weight grad (W)", colour(w)},
                        {"recompute", "#bdbdbd"},           {"TP/CP comm", "url(#hatch-tp)"}, {"p2p", "url(#hatch-pp)"},
                        {"DP comm, ZeRO-3 gathers", "url(#hatch-dp)"}, {"optimizer", "#555555"},
                        {"host copy (offload)", "#8d6e63"}};
  double lx = kLeft;
  for (const Item& it : items) {
    o += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"14\" height=\"14\" fill=\"{}\" stroke=\"#333\" "
                     "stroke-width=\"0.5\"/><text x=\"{:.0f}\" y=\"{:.0f}\">{}</text>\n",
                     lx, ly, it.fill, lx + 18, ly + 11, it.label);
    lx += 30 + 6.2 * static_cast<double>(std::char_traits<char>::length(it.label));
  }
}

// The elision marks: a dashed band across the stages per cut, "..." on each stage, the count above; and the note
// under the legend saying which microbatches are not drawn.
void draw_elision(std::string& o, const Elision& el, const TimeMap& map, const Rows& rows, double note_y) {
  for (const TimeMap::Cut& c : map.cuts) {
    const double x = map.x(c.a);
    o += fmt::format("<g class=\"elided\"><rect x=\"{:.2f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.2f}\" "
                     "fill=\"white\" stroke=\"#777\" stroke-dasharray=\"3 3\"/>",
                     x, kTop - 2, kCutPx, rows.y_next - kTop);
    for (const double y : rows.track_y) {
      o += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\">...</text>", x + kCutPx / 2,
                       y + kRowCompute * 0.6);
    }
    o += fmt::format("<title>{:.3f}-{:.3f} ms elided</title></g>\n", c.a * 1e3, c.b * 1e3);
  }
  if (el.hidden == 0) return;
  o += fmt::format("<text x=\"{:.0f}\" y=\"{:.2f}\">... elided: {} of {} microbatches not drawn (microbatches {}-{}); "
                   "the fill, the first and last steady cycles and the drain are drawn to scale</text>\n",
                   kLeft, note_y, el.hidden, el.microbatches, el.first_hidden, el.last_hidden);
}

}  // namespace

std::string svg_fractions_line(const SimSummary& s) {
  auto pct = [](double f) { return fmt::format("{:.1f}%", f * 100); };
  std::string line = fmt::format("stage {} (the busiest): bubble {}, TP comm {}", s.critical_stage, pct(s.bubble),
                                 pct(s.tp_comm));
  if (s.cp_comm > 0) line += ", CP comm " + pct(s.cp_comm);
  if (s.ep_comm > 0) line += ", EP comm " + pct(s.ep_comm);
  line += ", PP comm " + pct(s.pp_comm);
  if (s.zero3_comm > 0) line += ", ZeRO-3 gathers " + pct(s.zero3_comm);
  if (s.offload_exposed > 0) line += ", host copies " + pct(s.offload_exposed);
  line += fmt::format(", DP comm {} exposed ({} in all), compute {}, optimizer {} of the step", pct(s.dp_comm_exposed),
                      pct(s.dp_comm_total), pct(s.compute), pct(s.optimizer));
  return line;
}

std::string render_svg(const Timeline& t, const std::string& title, const SvgOptions& options) {
  const double step = t.step_s > 0 ? t.step_s : 1.0;
  const double span = drawn_span(t, step);  // a dashed line marks the step's end when it is wider
  const Elision el = options.elide ? find_elision(t, span) : Elision{};
  TimeMap map;
  map.cuts = el.cuts;
  double shown = span;
  for (const TimeMap::Cut& c : map.cuts) shown -= c.b - c.a;
  map.sx = (kPlot - kCutPx * static_cast<double>(map.cuts.size())) / shown;
  const Rows rows = stage_rows(t);
  const double notes = (options.summary ? 18.0 : 0.0) + (el.hidden > 0 ? 18.0 : 0.0);
  const double height = rows.y_next + 80 + notes;
  const double width = kLeft + kPlot + kRight;
  std::string o;
  draw_header(o, width, height, title);
  const bool chunks = has_chunks(t);
  for (size_t i = 0; i < t.tracks.size(); ++i) {
    draw_track(o, t.tracks[i], rows.track_y[i], rows.comm_rows[i], map, chunks);
  }
  const double ay = rows.y_next + 4;  // the time axis, below the stages; the legend below it, then the notes
  draw_time_axis(o, ay, span, step, map);
  draw_legend(o, ay + 40);
  double note_y = ay + 70;
  if (options.summary) {
    o += fmt::format("<text x=\"{:.0f}\" y=\"{:.2f}\">{}</text>\n", kLeft, note_y,
                     escape(svg_fractions_line(*options.summary)));
    note_y += 18;
  }
  draw_elision(o, el, map, rows, note_y);
  o += "</svg>\n";
  return o;
}

}  // namespace parplan::sim
