// CLI tests for `parplan calibrate --from-runs`: the cluster written is the runs' cluster profile with only the
// fitted fields changed; --cluster must name the runs' cluster; --backend and --ranks are refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/run_helper.hpp"

using parplan::test::read_text;
using parplan::test::run_parplan;
namespace fs = std::filesystem;

namespace {

const std::string kRuns = std::string(PARPLAN_SOURCE_DIR) + "/validation/published-runs.json";

using TempDir = parplan::test::ScratchDir;

}  // namespace

TEST_CASE("calibrate --from-runs --cluster-out writes the runs' cluster profile with only the fitted fields changed") {
  TempDir d;
  const auto r = run_parplan({"calibrate", "--from-runs", kRuns, "--gpu", "A100-SXM4-80GB", "--out", d.file("g.json"),
                              "--cluster-out", d.file("c.json"), "--fit-fields", "gemm.peak_fraction"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const nlohmann::json written = nlohmann::json::parse(read_text(d.file("c.json")));
  const auto shown = run_parplan({"profiles", "show", "dgx-a100"});
  REQUIRE_MESSAGE(shown.exit_code == 0, shown.err);
  const nlohmann::json preset = nlohmann::json::parse(shown.out);
  CHECK(written["name"] == "dgx-a100");
  CHECK(written["inter_node"] == preset["inter_node"]);  // 25 GB/s per GPU, not a row's 6.25
  CHECK(written["intra_node"] == preset["intra_node"]);
  CHECK(written["inter_node"]["bandwidth_GBps"] == 25.0);
  const std::string source = written["source"];
  CHECK(source.find(" -- ") == source.rfind(" -- "));  // the fit's note once

  // Fitting again from the written profiles replaces the earlier note instead of adding a second one.
  const auto again = run_parplan({"calibrate", "--from-runs", kRuns, "--gpu", "A100-SXM4-80GB", "--profile",
                                  d.file("g.json"), "--profile", d.file("c.json"), "--out", d.file("g2.json"),
                                  "--cluster-out", d.file("c2.json"), "--fit-fields", "gemm.peak_fraction"});
  REQUIRE_MESSAGE(again.exit_code == 0, again.err);
  for (const char* f : {"g2.json", "c2.json"}) {
    const std::string s = nlohmann::json::parse(read_text(d.file(f)))["source"];
    CHECK_MESSAGE(s.find("fitted by parplan") == s.rfind("fitted by parplan"), s);
  }
}

TEST_CASE("calibrate --from-runs: --cluster names the runs' cluster; --backend and --ranks are refused") {
  TempDir d;
  const std::string out = d.file("g.json");
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"calibrate", "--from-runs", kRuns, "--gpu", "A100-SXM4-80GB", "--out", out};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_parplan(args);
  };
  const auto other = run({"--cluster", "dgx-h100"});
  CHECK(other.exit_code == 2);
  CHECK(other.err ==
        "parplan: error: --cluster: the A100-SXM4-80GB runs are on dgx-a100, not dgx-h100; --from-runs fits the runs' "
        "cluster\n");
  const auto unknown = run({"--cluster", "no-such"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.starts_with("parplan: error: --cluster: unknown cluster 'no-such'"));
  const auto backend = run({"--backend", "host"});
  CHECK(backend.exit_code == 2);
  CHECK(backend.err == "parplan: error: --backend: not used with --from-runs (nothing is measured)\n");
  const auto ranks = run({"--ranks", "4"});
  CHECK(ranks.exit_code == 2);
  CHECK(ranks.err == "parplan: error: --ranks: not used with --from-runs (nothing is measured)\n");
  CHECK_FALSE(fs::exists(out));
  const auto same = run({"--cluster", "dgx-a100"});
  CHECK_MESSAGE(same.exit_code == 0, same.err);
  CHECK(fs::exists(out));
}
