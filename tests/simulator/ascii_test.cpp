// Tests for simulator/ascii: one line per stage showing the schedule's order.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "simulator/ascii.hpp"
#include "simulator/simulate.hpp"

using namespace parplan;
using namespace parplan::sim;

TEST_CASE("ascii: 1F1B with 2 stages and unit ops reads as the textbook picture") {
  StepCosts c;
  c.stages.resize(2);
  for (auto& st : c.stages) {
    st.chunks.resize(1);
    st.chunks[0].forward_s = 1;
    st.chunks[0].backward_input_s = 1;
  }
  const SimResult r = simulate_costs(make_schedule(Schedule::one_f_one_b, 2, 3), c);
  REQUIRE(r.summary.step_s == doctest::Approx(8.0));
  const std::string a = render_ascii(r.timeline, 16);  // 2 columns per unit of time
  std::istringstream in(a);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  REQUIRE(lines.size() >= 4);
  CHECK(lines[0] == "stage   0 |0011..aa22bb..cc|");
  CHECK(lines[1] == "stage   1 |..00aa11bb22cc..|");
  CHECK(a.find("a-z backward") != std::string::npos);
}
