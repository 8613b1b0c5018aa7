// Tests for planner/units: counts, byte sizes and durations at the input boundary.
#include <doctest/doctest.h>

#include "planner/spec/error.hpp"
#include "planner/spec/units.hpp"

using namespace parplan;

TEST_CASE("counts accept plain numbers and K/M/B/T suffixes") {
  CHECK(parse_count("175e9", "--params") == doctest::Approx(175e9));
  CHECK(parse_count("175B", "--params") == doctest::Approx(175e9));
  CHECK(parse_count("1.3T", "--params") == doctest::Approx(1.3e12));
  CHECK(parse_count("350M", "--params") == doctest::Approx(350e6));
  CHECK_THROWS_WITH_AS(parse_count("abc", "--params"), "--params: 'abc' is not a number", InputError);
  CHECK_THROWS_AS(parse_count("-5B", "--params"), InputError);
  CHECK_THROWS_AS(parse_count("nan", "--params"), InputError);
  CHECK_THROWS_AS(parse_count("inf", "--params"), InputError);
  CHECK_THROWS_WITH_AS(parse_count("5X", "--params"), "--params: unknown suffix 'X' in '5X' (use K, M, B or T)", InputError);
}

TEST_CASE("byte sizes and durations") {
  CHECK(parse_bytes("80GiB", "--memory") == 80LL * 1024 * 1024 * 1024);
  CHECK(parse_bytes("72GB", "--memory") == 72'000'000'000LL);
  CHECK(parse_bytes("512B", "--memory") == 512);
  // Without a unit: refused, not read as bytes ("--memory 72" meant GiB).
  CHECK_THROWS_WITH_AS(parse_bytes("72", "--memory"),
                       "--memory: '72' has no unit: give one, e.g. 72GiB (or 72B for bytes)", InputError);
  CHECK_THROWS_AS(parse_bytes("0GiB", "--memory"), InputError);
  CHECK_THROWS_AS(parse_bytes("1e30", "--memory"), InputError);
  CHECK_THROWS_AS(parse_bytes("5 parsecs", "--memory"), InputError);
  CHECK(parse_seconds("12s", "--max-step-time") == doctest::Approx(12));
  CHECK(parse_seconds("850ms", "--max-step-time") == doctest::Approx(0.85));
  CHECK(parse_seconds("1.5", "--max-step-time") == doctest::Approx(1.5));
  CHECK_THROWS_AS(parse_seconds("-1s", "--max-step-time"), InputError);
}
