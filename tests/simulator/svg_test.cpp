// Tests for simulator/svg: well-formed picture with a bar per event, hatched comm, axis and legend; deterministic.
#include <doctest/doctest.h>

#include <string>

#include "simulator/fixture.hpp"
#include "simulator/svg.hpp"

using namespace parplan::sim;

namespace {
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
  size_t events = 0;
  for (const auto& tr : r.timeline.tracks)
    for (const auto& st : tr.streams)
      for (const auto& e : st.events) events += e.end_s > e.start_s ? 1 : 0;
  CHECK(count(svg, "<title>") == events);
  CHECK(count(svg, "fill=\"url(#hatch-pp)\"") >= 6);  // p2p sends hatched
  CHECK(count(svg, "fill=\"url(#hatch-dp)\"") >= 4);  // DP buckets hatched
  CHECK(svg.find("backward") != std::string::npos);    // legend
  CHECK(svg.find(">ms</text>") != std::string::npos);  // axis unit
  CHECK(svg == render_svg(test::small_step().timeline, "p2 m3 <test>"));
}
