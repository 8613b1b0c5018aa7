// Tests for simulator/engine: ordering, dependencies, link sharing, shadows, cycle detection, determinism.
#include <doctest/doctest.h>

#include <stdexcept>

#include "simulator/engine.hpp"

using namespace parplan::sim;

TEST_CASE("engine: an ordered stream runs its tasks one after another") {
  TaskGraph g;
  const int32_t s = g.add_stream(true);
  const int32_t a = g.add_task(1.0, s), b = g.add_task(2.0, s), c = g.add_task(0.5, s);
  const TaskTimes t = run(g);
  CHECK(t.start_s[static_cast<size_t>(a)] == 0.0);
  CHECK(t.start_s[static_cast<size_t>(b)] == 1.0);
  CHECK(t.end_s[static_cast<size_t>(c)] == 3.5);
  CHECK(t.makespan_s == 3.5);
}

TEST_CASE("engine: dependencies across streams; an unordered stream runs tasks concurrently") {
  TaskGraph g;
  const int32_t s0 = g.add_stream(true), s1 = g.add_stream(false);
  const int32_t a = g.add_task(1.0, s0);
  const int32_t x = g.add_task(2.0, s1), y = g.add_task(2.0, s1);
  const int32_t b = g.add_task(1.0, s0);
  g.add_dep(a, x);
  g.add_dep(a, y);
  g.add_dep(x, b);  // b waits for x although it is next on s0
  const TaskTimes t = run(g);
  CHECK(t.start_s[static_cast<size_t>(x)] == 1.0);
  CHECK(t.start_s[static_cast<size_t>(y)] == 1.0);  // concurrent with x
  CHECK(t.start_s[static_cast<size_t>(b)] == 3.0);
  CHECK(t.makespan_s == 4.0);
}

TEST_CASE("engine: transfers on one link share its bandwidth; contention off gives full speed") {
  TaskGraph g;
  const int32_t s = g.add_stream(false), l = g.add_link();
  const int32_t a = g.add_task(2.0, s, l);
  const int32_t gate = g.add_task(1.0, g.add_stream(true));
  const int32_t b = g.add_task(1.0, s, l);
  g.add_dep(gate, b);
  // a alone for 1 s (1 s of work left), then a and b share: each needs 1 s of work at half speed -> both end at 3.
  TaskTimes t = run(g);
  CHECK(t.end_s[static_cast<size_t>(a)] == doctest::Approx(3.0));
  CHECK(t.end_s[static_cast<size_t>(b)] == doctest::Approx(3.0));
  EngineOptions off;
  off.contention = false;
  t = run(g, off);
  CHECK(t.end_s[static_cast<size_t>(a)] == 2.0);
  CHECK(t.end_s[static_cast<size_t>(b)] == 2.0);
}

TEST_CASE("engine: transfers on different links do not interfere") {
  TaskGraph g;
  const int32_t s = g.add_stream(false);
  const int32_t a = g.add_task(1.0, s, g.add_link()), b = g.add_task(1.0, s, g.add_link());
  const TaskTimes t = run(g);
  CHECK(t.end_s[static_cast<size_t>(a)] == 1.0);
  CHECK(t.end_s[static_cast<size_t>(b)] == 1.0);
}

TEST_CASE("engine: a shadow starts with its anchor and gates nothing") {
  TaskGraph g;
  const int32_t s0 = g.add_stream(true), s1 = g.add_stream(false);
  const int32_t a = g.add_task(1.0, s0);
  const int32_t b = g.add_task(3.0, s0);
  const int32_t sh = g.add_shadow(b, 10.0, s1);
  const int32_t c = g.add_task(1.0, s0);
  const TaskTimes t = run(g);
  CHECK(t.start_s[static_cast<size_t>(sh)] == t.start_s[static_cast<size_t>(b)]);
  CHECK(t.start_s[static_cast<size_t>(c)] == 4.0);
  CHECK(t.end_s[static_cast<size_t>(sh)] == 11.0);
  (void)a;
}

TEST_CASE("engine: a cycle or an order contradicting dependencies is reported, not hung") {
  TaskGraph g;
  const int32_t s = g.add_stream(true);
  const int32_t a = g.add_task(1.0, s), b = g.add_task(1.0, s);
  g.add_dep(b, a);  // a is first on the stream but waits for b, which waits for a's slot
  CHECK_THROWS_AS(run(g), std::logic_error);
}

TEST_CASE("engine: equal-time events resolve by sequence: identical runs give identical times") {
  TaskGraph g;
  const int32_t l = g.add_link();
  for (int k = 0; k < 50; ++k) {
    const int32_t s = g.add_stream(k % 2 == 0);
    int32_t prev = -1;
    for (int j = 0; j < 20; ++j) {
      const int32_t t = g.add_task(0.25 * ((k + j) % 3 + 1), s, j % 4 == 0 ? l : -1);
      if (prev >= 0 && j % 3 == 0) g.add_dep(prev, t);
      prev = t;
    }
  }
  const TaskTimes a = run(g), b = run(g);
  CHECK(a.start_s == b.start_s);
  CHECK(a.end_s == b.end_s);
  CHECK(a.events == b.events);
}
