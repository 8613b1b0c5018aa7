// CLI tests of `parplan calibrate`: the host sweep writes GPU and cluster profiles that `estimate --profile` uses.
#include <doctest/doctest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "run_helper.hpp"

using parplan::test::read_text;
using parplan::test::run_parplan;

TEST_CASE("calibrate --backend host writes profiles that estimate accepts") {
  const parplan::test::ScratchDir dir;  // per process: test runs of two checkouts at once do not share files
  const std::string gpu = (dir.path / "gpu.json").string(), cluster = (dir.path / "cluster.json").string();
  auto r = run_parplan({"calibrate", "--backend", "host", "--out", gpu, "--cluster-out", cluster, "--name", "host-test", "--json"});
  REQUIRE(r.exit_code == 0);
  const auto m = nlohmann::json::parse(r.out);
  CHECK(m["gemm"].size() >= 3);
  CHECK(m["hbm_bandwidth_Bps"].get<double>() > 0);
  bool all_reduce = false;
  for (const auto& c : m["collectives"]) {
    if (c["kind"] != "all_reduce") continue;
    all_reduce = true;
    // nccl-tests: busbw = algbw * 2(n-1)/n; n = 2 gives busbw == algbw.
    CHECK(c["busbw_Bps"].get<double>() == doctest::Approx(c["algbw_Bps"].get<double>()));
  }
  CHECK(all_reduce);
  const auto prof = nlohmann::json::parse(read_text(gpu));
  CHECK(prof["kind"] == "gpu");
  CHECK(prof["name"] == "host-test");
  auto e = run_parplan({"estimate", "--params", "1.3B", "--profile", gpu, "--profile", cluster, "--cluster", "host-test-cluster",
                        "--gpus", "8", "--tp", "2", "--json"});
  CAPTURE(e.err);
  CHECK(e.exit_code != 2);  // the profiles parse and are usable (the 1.3B model may or may not fit: 0 or 1)
  CHECK(run_parplan({"calibrate", "--backend", "host"}).exit_code == 2);  // --out is required
  std::remove(gpu.c_str());
  std::remove(cluster.c_str());
}
