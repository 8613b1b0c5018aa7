// CLI tests for `parplan validate`: the JSON rows carry the predicted step term by term, --breakdown prints it.
// The scoring itself is tested in tests/planner/validation/validation_test.cpp.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/run_helper.hpp"

using parplan::test::run_parplan;

namespace {
const std::string kRuns = PARPLAN_SOURCE_DIR "/validation/published-runs.json";

// The first whitespace-separated field ending in '%' on the line that starts with `id` ("" when none).
std::string first_percent(const std::string& text, const std::string& id) {
  const size_t row = text.find("\n" + id + " ");
  if (row == std::string::npos) return "";
  std::istringstream line(text.substr(row + 1, text.find('\n', row + 1) - row - 1));
  std::string f;
  while (line >> f) {
    if (f.back() == '%') return f;
  }
  return "";
}
}  // namespace

TEST_CASE("validate --json: each mapped row's predicted terms add up to its predicted step") {
  const auto r = run_parplan({"validate", "--runs", kRuns, "--json"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  int mapped = 0, unmapped = 0;
  for (const auto& row : j.at("rows")) {
    CAPTURE(row.at("id").get<std::string>());
    if (row.at("predicted_step_time_s").is_null()) {
      CHECK(row.at("predicted_time_s").is_null());
      CHECK(row.at("predicted_mfu").is_null());
      ++unmapped;
      continue;
    }
    ++mapped;
    const auto& terms = row.at("predicted_time_s");
    REQUIRE(terms.size() == 10);  // kTimeTerms
    double sum = 0;
    for (const auto& [name, v] : terms.items()) {
      CHECK(v.get<double>() >= 0);
      sum += v.get<double>();
    }
    const double step = row.at("predicted_step_time_s").get<double>();
    CHECK(sum == doctest::Approx(step).epsilon(1e-9));
    CHECK(terms.at("compute").get<double>() > 0);
    const double mfu = row.at("predicted_mfu").get<double>();
    CHECK(mfu > 0);
    CHECK(mfu < 1);
  }
  CHECK(mapped >= 45);  // the scored rows and the mapped rows without an iteration time
  CHECK(unmapped > 0);
}

TEST_CASE("validate --breakdown: a row per scored run with its error and the shares of its predicted step") {
  const auto plain = run_parplan({"validate", "--runs", kRuns});
  const auto r = run_parplan({"validate", "--runs", kRuns, "--breakdown"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(plain.out.find("Where the predicted step goes") == std::string::npos);
  const size_t at = r.out.find("Where the predicted step goes");
  REQUIRE(at != std::string::npos);
  const std::string table = r.out.substr(at, r.out.find("\n\n", at) - at);
  CHECK(table.find("ZeRO-3") != std::string::npos);
  // Each row shows the same signed error as the default table: the first percentage after the id in both.
  for (const char* id : {"korthikanti22_175B_selective_sp", "narayanan21_t2_ZeRO-3_174.6B_384gpu", "bloom176b_48nodes"}) {
    CAPTURE(id);
    const std::string err = first_percent(table, id);
    CHECK(err.size() > 1);
    CHECK(err == first_percent(plain.out, id));
  }
  // One row per scored run: title, header and rule, then the runs ("... (45 scored, ...").
  const size_t open = plain.out.find('('), scored_at = plain.out.find(" scored", open);
  REQUIRE(scored_at != std::string::npos);
  const int scored = std::stoi(plain.out.substr(open + 1, scored_at - open - 1));
  CHECK(scored >= 45);
  int newlines = 0;
  for (char c : table) newlines += c == '\n';
  CHECK(newlines + 1 == 3 + scored);
}

// A row the schema cannot read is skipped with the reason naming its JSON path, and the run exits 0 (the file's other
// rows are still scored: tests/planner/validation/validation_test.cpp).
TEST_CASE("validate: a row the schema cannot read is skipped naming its JSON path") {
  const std::string bad = std::string(PARPLAN_TEST_DIR) + "/cli/data/bad/";
  const std::pair<const char*, const char*> cases[] = {
      {"runs_wrong_type.json", "/0/hardware/num_gpus"},
      {"runs_peak_memory_not_number.json", "/0/measured/other/peak_memory_GiB: expected a number"},
      {"runs_unknown_key.json", "/0/parallel/tpp: unknown key"},
      {"runs_derived_time_tiny.json", "/0/derived/iter_time_s: expected a number from 1e-9"},
  };
  for (const auto& [file, path] : cases) {
    CAPTURE(file);
    const std::string runs = bad + file;
    const auto r = run_parplan({"validate", "--runs", runs, "--json"}, {}, 120);
    CAPTURE(r.err);
    // The report is written; with no row scored (each file holds one bad row) the command fails, saying so.
    REQUIRE(r.exit_code == 1);
    CHECK(r.err.starts_with("parplan validate: no row of " + runs + " was scored (1 skipped, each with its reason)"));
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["summary"]["skipped"].get<int>() >= 1);
    bool named = false;
    for (const auto& row : j["rows"]) {
      if (row["skipped_reason"].is_string()) {
        const std::string why = row["skipped_reason"];
        named = named || why == "not read: " + runs + ": " + path || why.starts_with("not read: " + runs + ": " + path);
      }
    }
    CHECK(named);
  }
}
