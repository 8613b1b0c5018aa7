// The published-run files vendored in validation/, loaded for the tests that score against them.
#pragma once
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "planner/test_plans.hpp"
#include "planner/validation/validation.hpp"

namespace parplan::test {

// validation/<file> mapped with the embedded profiles; fails the test when the file is missing.
inline std::vector<MappedRun> vendored_runs(const std::string& file, Unstated unstated = Unstated::strict) {
  const std::string path = PARPLAN_SOURCE_DIR "/validation/" + file;
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "missing ", path, " (the published-run data vendored in validation/)");
  std::stringstream ss;
  ss << in.rdbuf();
  return load_published_runs(ss.str(), path, profiles(), unstated);
}

}  // namespace parplan::test
