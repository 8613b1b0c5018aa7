// Tests for simulator/svg: well-formed picture with a bar per event, hatched comm, axis and legend; deterministic.
#include <doctest/doctest.h>

#include <algorithm>
#include <fmt/core.h>
#include <map>
#include <set>
#include <string>

#include "planner/test_plans.hpp"
#include "simulator/fixture.hpp"
#include "simulator/simulate.hpp"
#include "simulator/svg.hpp"

using namespace parplan::sim;

namespace {
// Events with a positive duration: the ones the picture draws.
size_t drawn_events(const parplan::Timeline& t) {
  size_t n = 0;
  for (const auto& tr : t.tracks)
    for (const auto& st : tr.streams)
      for (const auto& e : st.events) n += e.end_s > e.start_s ? 1 : 0;
  return n;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("svg: stages down, one bar per event, comm hatched, axis and legend") {
  const SimResult r = test::small_step();
  const std::string svg = render_svg(r.timeline, "p2 m3 <test>");
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("p2 m3 &lt;test&gt;") != std::string::npos);  // title escaped
  CHECK(count(svg, ">stage ") == 2);
  const size_t events = drawn_events(r.timeline);
  CHECK(count(svg, "<title>") == events);
  CHECK(count(svg, "fill=\"url(#hatch-pp)\"") >= 6);  // p2p sends hatched
  CHECK(count(svg, "fill=\"url(#hatch-dp)\"") >= 4);  // DP buckets hatched
  CHECK(svg.find("backward") != std::string::npos);    // legend
  CHECK(svg.find(">ms</text>") != std::string::npos);  // axis unit
  CHECK(svg == render_svg(test::small_step().timeline, "p2 m3 <test>"));
}

TEST_CASE("svg: bars after the step's end stay in the picture; plain tick labels; labels only where they fit") {
  // With the distributed optimizer the parameter all-gather runs past the step (into the next step's forward): the
  // axis spans it and a dashed line marks the step's end. Bars used to be drawn beyond the SVG's width.
  parplan::Plan plan = parplan::test::korthikanti_175b();
  plan.parallel.pp = 4;
  plan.parallel.dp = 2;
  plan.parallel.vpp = 2;
  plan.parallel.num_microbatches = 8;
  plan.parallel.distributed_optimizer = true;
  plan.training.global_batch = 16;
  SimOptions o;
  o.record_timeline = true;
  const SimResult r = simulate(plan, o);
  double last = 0;
  for (const auto& tr : r.timeline.tracks)
    for (const auto& st : tr.streams)
      for (const auto& e : st.events) last = std::max(last, e.end_s);
  REQUIRE(last > r.timeline.step_s * 1.01);
  const std::string svg = render_svg(r.timeline, "t");
  CHECK(svg.find("step end") != std::string::npos);
  const double width = 1310;
  REQUIRE(svg.find("width=\"1310\"") != std::string::npos);
  for (size_t p = svg.find("<rect x=\""); p != std::string::npos; p = svg.find("<rect x=\"", p + 1)) {
    const double x = std::stod(svg.substr(p + 9));
    const size_t wp = svg.find("width=\"", p) + 7;
    CHECK(x + std::stod(svg.substr(wp)) <= width - 20 + 0.02);  // x and width are each rounded to 0.01
  }
  CHECK(svg.find("e+") == std::string::npos);
  // A ten-second step: ticks read 10000, not 1e+04.
  parplan::Timeline t = r.timeline;
  const double k = 12.0 / t.step_s;
  t.step_s *= k;
  for (auto& tr : t.tracks)
    for (auto& st : tr.streams)
      for (auto& e : st.events) e.start_s *= k, e.end_s *= k;
  const std::string long_svg = render_svg(t, "t");
  CHECK(long_svg.find(">10000</text>") != std::string::npos);
  CHECK(long_svg.find("e+") == std::string::npos);
  // Interleaved labels ("B3.1") are drawn only on bars wide enough for them.
  for (size_t p = svg.find("font-size=\"9\">B"); p != std::string::npos; p = svg.find("font-size=\"9\">B", p + 1)) {
    const size_t rect = svg.rfind("<rect x=\"", p);
    const double w = std::stod(svg.substr(svg.find("width=\"", rect) + 7));
    const size_t end = svg.find('<', p);
    const size_t chars = end - (p + 14);
    CHECK(w >= 6.0 * static_cast<double>(chars) + 2);
  }
}

TEST_CASE("svg: each communication stream has its own row under its stage, so transfers on two streams never overprint") {
  // All communication shared one row: a p2p bar was drawn over a DP bar, CP over TP (27 of 49 audited plans).
  parplan::Plan plan = parplan::test::korthikanti_175b();
  plan.parallel.pp = 4;
  plan.parallel.dp = 2;
  plan.parallel.vpp = 1;
  plan.parallel.schedule = parplan::Schedule::one_f_one_b;
  plan.parallel.num_microbatches = 8;
  plan.parallel.overlap_tp_comm = true;
  plan.training.global_batch = 16;
  SimOptions o;
  o.record_timeline = true;
  const std::string svg = render_svg(simulate(plan, o).timeline, "t");
  std::map<std::string, std::set<std::string>> streams_at_y;  // y of a bar -> streams drawn there
  for (size_t p = svg.find("<rect x=\""); p != std::string::npos; p = svg.find("<rect x=\"", p + 1)) {
    const size_t title = svg.find("<title>", p), close = svg.find("</rect>", p);
    if (title == std::string::npos || title > close) continue;  // backgrounds and legend swatches
    const size_t yp = svg.find("y=\"", p) + 3;
    const std::string y = svg.substr(yp, svg.find('"', yp) - yp);
    const std::string stream = svg.substr(title + 7, svg.find(' ', title) - title - 7);
    streams_at_y[y].insert(stream);
  }
  size_t comm_rows = 0;
  for (const auto& [y, names] : streams_at_y) {
    CAPTURE(y);
    CHECK(names.size() == 1);
    comm_rows += names.count("compute") == 0;
  }
  CHECK(comm_rows >= 4 * 2);  // at least tp and pp (or dp) rows on each of the 4 stages
  CHECK(svg.find("DP comm, ZeRO-3 gathers") != std::string::npos);
}

TEST_CASE("svg: bars narrower than a pixel are binned by pixel column, each bin titled with its event count") {
  // 4,096 microbatches on 4 stages: most events are far below a pixel of the 1200-pixel plot. A bar each made the
  // default suggest plan's picture 39 MB (450,000 bars).
  parplan::Plan plan = parplan::test::korthikanti_175b();
  plan.parallel.pp = 4;
  plan.parallel.vpp = 1;
  plan.parallel.schedule = parplan::Schedule::one_f_one_b;
  plan.parallel.num_microbatches = 4096;
  plan.training.global_batch = 4096;
  SimOptions o;
  o.record_timeline = true;
  const SimResult r = simulate(plan, o);
  const size_t events = drawn_events(r.timeline);
  SvgOptions all;
  all.elide = false;  // every microbatch drawn: binned
  const std::string svg = render_svg(r.timeline, "t", all);
  size_t bars = 0, counted = 0, bins = 0;
  for (size_t p = svg.find("<title>"); p != std::string::npos; p = svg.find("<title>", p + 1)) {
    ++bars;
    const std::string title = svg.substr(p + 7, svg.find("</title>", p) - p - 7);
    const size_t ev = title.find(" events ");
    if (ev == std::string::npos) {
      ++counted;
      continue;
    }
    ++bins;
    counted += std::stoul(title.substr(title.find(' ') + 1));  // "<stream> <n> events <from>-<to> ms"
  }
  CHECK(counted == events);  // every event is in exactly one bar
  CHECK(bins > 0);
  CHECK(bars < events / 4);
  CHECK(svg.size() < 4'000'000);
  CHECK(svg == render_svg(simulate(plan, o).timeline, "t", all));  // deterministic
}

namespace {
// The 175B plan on 4 stages with `m` microbatches (1F1B).
SimResult many_microbatches(int64_t m, parplan::Schedule schedule = parplan::Schedule::one_f_one_b) {
  parplan::Plan plan = parplan::test::korthikanti_175b();
  plan.parallel.pp = 4;
  plan.parallel.vpp = schedule == parplan::Schedule::interleaved ? 2 : 1;
  plan.parallel.schedule = schedule;
  plan.parallel.num_microbatches = m;
  plan.training.global_batch = m;
  SimOptions o;
  o.record_timeline = true;
  return simulate(plan, o);
}

// The microbatch numbers in the titles of bars drawn one per event ("compute F12 ..." -> 12).
std::set<int> drawn_microbatches(const std::string& svg) {
  std::set<int> out;
  for (size_t p = svg.find("<title>compute "); p != std::string::npos; p = svg.find("<title>compute ", p + 1)) {
    const size_t at = p + 15;
    if (svg.compare(at, 1, "F") != 0 && svg.compare(at, 1, "B") != 0) continue;
    out.insert(std::stoi(svg.substr(at + 1)));
  }
  return out;
}
}  // namespace

TEST_CASE("svg: 512 microbatches draw the fill, three steady cycles, an elision mark with the count, and the drain") {
  const SimResult r = many_microbatches(512);
  SvgOptions opt;
  opt.summary = &r.summary;
  const std::string svg = render_svg(r.timeline, "t", opt);
  CHECK(svg.size() < 150'000);  // every microbatch drawn (binned): about 1 MB of slivers
  SvgOptions all = opt;
  all.elide = false;
  CHECK(render_svg(r.timeline, "t", all).size() > 4 * svg.size());
  CHECK(count(svg, "<g class=\"elided\">") == 1);
  CHECK(svg.find(">...</text>") != std::string::npos);
  // The count: 4 stages + 3 cycles = 7 microbatches kept at each end; the hidden ones are the rest, named.
  const size_t note = svg.find("... elided: ");
  REQUIRE(note != std::string::npos);
  const int hidden = std::stoi(svg.substr(note + 12));
  CHECK(hidden > 400);
  CHECK(hidden <= 512 - 14);
  CHECK(svg.find(fmt::format("{} of 512 microbatches not drawn", hidden)) != std::string::npos);
  // Fill and drain are drawn bar by bar with their labels; the hidden microbatches are not drawn at all.
  const std::set<int> drawn = drawn_microbatches(svg);
  for (int m : {0, 1, 6, 505, 511}) CHECK(drawn.count(m) == 1);
  CHECK(drawn.size() + static_cast<size_t>(hidden) == 512);
  // The fractions, as the summary has them.
  CHECK(svg.find(fmt::format("bubble {:.1f}%", r.summary.bubble * 100)) != std::string::npos);
  CHECK(svg.find(fmt::format("PP comm {:.1f}%", r.summary.pp_comm * 100)) != std::string::npos);
  CHECK(svg.find("DP comm ") != std::string::npos);
  CHECK(svg == render_svg(many_microbatches(512).timeline, "t", opt));  // deterministic
  // Interleaved: kept microbatches follow the chunks (4 stages x 2 chunks + 3 = 11 at each end).
  const SimResult iv = many_microbatches(512, parplan::Schedule::interleaved);
  const std::string isvg = render_svg(iv.timeline, "t");
  CHECK(isvg.size() < 200'000);
  CHECK(isvg.find("... elided: ") != std::string::npos);
}

TEST_CASE("svg: a small step is drawn as before; the fractions add one line of text and nothing else") {
  const SimResult r = many_microbatches(8);
  const std::string plain = render_svg(r.timeline, "t");
  CHECK(plain.find("elided") == std::string::npos);
  SvgOptions opt;
  opt.summary = &r.summary;
  std::string with = render_svg(r.timeline, "t", opt);
  const std::string line = svg_fractions_line(r.summary);
  const size_t at = with.find(">" + line + "</text>\n");
  REQUIRE(at != std::string::npos);
  const size_t start = with.rfind("<text", at);
  with.erase(start, at + line.size() + 9 - start);
  // Only the height grew (by the line).
  const size_t h = plain.find("height=\"");
  const std::string plain_h = plain.substr(h + 8, plain.find('"', h + 8) - h - 8);
  const std::string with_h = with.substr(h + 8, with.find('"', h + 8) - h - 8);
  CHECK(std::stod(with_h) == doctest::Approx(std::stod(plain_h) + 18));
  auto without_size = [](std::string s) {
    const size_t p = s.find("<defs>");
    return s.substr(p);
  };
  CHECK(without_size(with) == without_size(plain));
  // 32 microbatches (the limit) are all drawn.
  CHECK(render_svg(many_microbatches(32).timeline, "t").find("elided") == std::string::npos);
}

TEST_CASE("svg: the fractions line names exposed host copies when there are any, so its terms add up to the step") {
  // Activation offload over a slow host link: the copies outlast the layers. The line left them out (18.1% of a
  // llama3-8b pp 2 step with --offload optimizer,activations: its terms summed to 81.8%).
  parplan::Plan plan = parplan::test::korthikanti_175b();
  plan.parallel.pp = 4;
  plan.parallel.vpp = 1;
  plan.parallel.schedule = parplan::Schedule::one_f_one_b;
  plan.parallel.num_microbatches = 8;
  plan.training.global_batch = 8;
  plan.parallel.offload.activations = true;
  plan.cluster.host_link.bandwidth_Bps = 2e9;
  SimOptions o;
  o.record_timeline = false;
  const SimSummary s = simulate(plan, o).summary;
  REQUIRE(s.offload_exposed > 0.01);
  const std::string line = svg_fractions_line(s);
  CAPTURE(line);
  CHECK(line.find(fmt::format(", host copies {:.1f}%", s.offload_exposed * 100)) != std::string::npos);
  // Every term but DP's "(x% in all)" is a share of the step: they add up to 100% (each rounded to 0.1%).
  double sum = 0;
  for (size_t at = line.find('%'); at != std::string::npos; at = line.find('%', at + 1)) {
    const size_t start = line.find_last_of(" (", at - 1) + 1;
    if (line.compare(at + 1, 7, " in all") != 0) sum += std::stod(line.substr(start, at - start));
  }
  CHECK(sum == doctest::Approx(100.0).epsilon(0.005));
  plan.parallel.offload.activations = false;
  CHECK(svg_fractions_line(simulate(plan, o).summary).find("host copies") == std::string::npos);
}
