// CLI tests for `parplan check`: host memory in the memory gate, empty TOML values, plans sharing a baseline key,
// baseline path keys in any spelling, regression limits without a baseline, config values named by file:line,
// baselines whose stages disagree, and one file reached twice.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/run_helper.hpp"

using parplan::test::read_text;
using parplan::test::run_parplan;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(PARPLAN_TEST_DIR) + "/cli/data/check/";
const std::string kSmall = kData + "small.toml";          // passes, nothing offloaded
const std::string kHostOver = kData + "host_over.toml";   // GPU peak fits, offloaded states above host memory

bool has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

using TempDir = parplan::test::ScratchDir;

nlohmann::json json_of(const parplan::test::RunResult& r) {
  REQUIRE_MESSAGE(r.exit_code >= 0, r.err);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("check: offloaded states above the node's host memory fail the memory gate, as estimate says") {
  const auto r = run_parplan({"check", "--plan", kHostOver});
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "FAIL " + kHostOver));
  CHECK(has(r.out, "host memory 1.51 TiB per node OVER its 1.00 TiB"));
  CHECK(has(r.out, "  memory: peak 3.38 GiB on stage 0 is 36.62 GiB under the limit 40.00 GiB, but the offloaded "
                   "states need 1.51 TiB per node, above its 1.00 TiB of host memory"));

  const nlohmann::json j = json_of(run_parplan({"check", "--plan", kHostOver, "--json"}));
  const nlohmann::json& p = j["plans"][0];
  CHECK(j["pass"] == false);
  CHECK(p["host_fits"] == false);
  CHECK(p["host_bytes_per_node"].get<double>() > p["host_capacity_bytes"].get<double>());
  CHECK(p["host_capacity_bytes"].get<double>() == doctest::Approx(1024.0 * 1024 * 1024 * 1024));
  CHECK(p["gates"][0]["gate"] == "memory");
  CHECK(p["gates"][0]["pass"] == false);

  const nlohmann::json small = json_of(run_parplan({"check", "--plan", kSmall, "--json"}));
  CHECK(small["plans"][0]["host_fits"] == true);
  CHECK(small["plans"][0]["host_bytes_per_node"] == 0.0);
}

TEST_CASE("check: an empty string in a --config or a TOML plan is refused naming file:line and the key") {
  TempDir d;
  fs::copy_file(kSmall, d.file("small.toml"));
  struct Case {
    std::string name, text, needle;
  };
  const std::vector<Case> configs = {
      {"junit.toml", "plan = [\"small.toml\"]\nbaseline = \"base.json\"\njunit = \"\"\nrequire-baseline = true\n",
       ":3: key 'junit' must not be empty"},
      {"baseline.toml", "plan = [\"small.toml\"]\nbaseline = \"\"\nrequire-baseline = true\n",
       ":2: key 'baseline' must not be empty"},
      {"step.toml", "plan = [\"small.toml\"]\nmax-step-time = \"\"\nmin-mfu = \"56%\"\n",
       ":2: key 'max-step-time' must not be empty"},
      {"plans.toml", "plan = [\"small.toml\", \"\"]\n", ":1: key 'plan' must not be empty"},
  };
  for (const Case& c : configs) {
    CAPTURE(c.name);
    const std::string cfg = d.write(c.name, c.text);
    const auto r = run_parplan({"check", "--config", cfg});
    CHECK(r.exit_code == 2);
    CHECK(r.err == "parplan: error: " + cfg + c.needle + "\n");
  }
  CHECK_FALSE(fs::exists(d.file("--require-baseline")));
  CHECK_FALSE(fs::exists(d.file("base.json")));

  const std::string head = "model = \"llama2-7b\"\ngpus = 8\n";
  const std::vector<Case> plans = {
      {"recompute.toml", head + "recompute = \"\"\nsequence-parallel = true\n", ":3: key 'recompute' must not be empty"},
      {"profile.toml", head + "profile = [\"\"]\nsequence-parallel = true\n", ":3: key 'profile' must not be empty"},
      {"name.toml", "name = \"\"\n" + head, ":1: key 'name' must not be empty"},
  };
  for (const Case& c : plans) {
    CAPTURE(c.name);
    const std::string plan = d.write(c.name, c.text);
    const auto r = run_parplan({"check", "--plan", plan});
    CHECK(r.exit_code == 2);
    CHECK(r.err == "parplan: error: " + plan + c.needle + "\n");
  }
}

TEST_CASE("check: two unnamed plans with the same text are refused with a baseline; named, each keeps its entry") {
  TempDir d;
  const std::string plan = "model = \"model.json\"\ngpus = 8\ntp = 2\nglobal-batch = 64\n";
  const std::string a = d.write("a/plan.toml", plan), b = d.write("b/plan.toml", plan);
  auto model = nlohmann::json::parse(read_text(std::string(PARPLAN_SOURCE_DIR) + "/profiles/models/llama2-7b.json"));
  d.write("b/model.json", model.dump());
  model["layers"] = 36;
  d.write("a/model.json", model.dump());
  const std::string base = d.file("base.json");

  const auto refused = run_parplan({"check", "--plan", a, "--plan", b, "--baseline", base, "--update-baseline"});
  CHECK(refused.exit_code == 2);
  CHECK(has(refused.err, "parplan: error: --plan: " + a + " and " + b + " have the same text, so they share the "
                         "baseline key 'content:"));
  CHECK(has(refused.err, "give them names"));
  CHECK_FALSE(fs::exists(base));
  // Without a baseline the key does not matter: both are checked.
  const auto plain = run_parplan({"check", "--plan", a, "--plan", b});
  CHECK(plain.exit_code == 0);
  CHECK(has(plain.out, "2 plans checked"));

  d.write("a/plan.toml", "name = \"a\"\n" + plan);
  d.write("b/plan.toml", "name = \"b\"\n" + plan);
  const auto named = run_parplan({"check", "--plan", a, "--plan", b, "--baseline", base, "--update-baseline"});
  CHECK(named.exit_code == 0);
  CHECK(has(named.out, "(2 plans)"));
  CHECK(nlohmann::json::parse(read_text(base))["plans"].size() == 2);
  const auto again = run_parplan({"check", "--plan", a, "--plan", b, "--baseline", base, "--require-baseline"});
  CHECK_MESSAGE(again.exit_code == 0, again.out);
}

TEST_CASE("check: a baseline entry keyed by the plan path is found in any spelling and moved on update") {
  TempDir d;
  const std::string plan = d.write("plans/p.toml", read_text(kSmall));
  const std::string base = d.file("base.json");
  REQUIRE(run_parplan({"check", "--plan", plan, "--baseline", base, "--update-baseline"}).exit_code == 0);
  nlohmann::json doc = nlohmann::json::parse(read_text(base));
  REQUIRE(doc["plans"].size() == 1);
  const nlohmann::json entry = doc["plans"].begin().value();
  const std::string content_key = doc["plans"].begin().key();
  const std::string old_key = d.path.generic_string() + "/./plans/p.toml";  // an old baseline: the path as typed
  doc["plans"] = nlohmann::json::object({{old_key, entry}});
  d.write("base.json", doc.dump(2));

  const nlohmann::json j = json_of(run_parplan({"check", "--plan", plan, "--baseline", base, "--require-baseline", "--json"}));
  CHECK(j["pass"] == true);
  CHECK(j["plans"][0]["baseline_missing"] == false);

  REQUIRE(run_parplan({"check", "--plan", plan, "--baseline", base, "--update-baseline"}).exit_code == 0);
  const nlohmann::json after = nlohmann::json::parse(read_text(base))["plans"];
  CHECK(after.size() == 1);
  CHECK(after.contains(content_key));
}

TEST_CASE("check: regression limits without --baseline are refused, naming the flag or the config line") {
  for (const char* flag : {"--max-memory-regression", "--max-time-regression"}) {
    const auto r = run_parplan({"check", "--plan", kSmall, flag, "1%"});
    CHECK(r.exit_code == 2);
    CHECK(r.err == std::string("parplan: error: ") + flag + ": needs --baseline FILE\n");
  }
  TempDir d;
  fs::copy_file(kSmall, d.file("small.toml"));
  const std::string cfg = d.write("c.toml", "plan = [\"small.toml\"]\nmax-time-regression = \"1%\"\n");
  const auto r = run_parplan({"check", "--config", cfg});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "parplan: error: " + cfg + ":2: max-time-regression: needs --baseline FILE\n");
}

TEST_CASE("check: a config value out of range names the config file and line") {
  TempDir d;
  fs::copy_file(kSmall, d.file("small.toml"));
  const std::string cfg = d.write("c.toml", "plan = [\"small.toml\"]\nheadroom = 10\nmin-mfu = \"120%\"\n");
  const auto r = run_parplan({"check", "--config", cfg});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "parplan: error: " + cfg +
                     ":2: headroom: '10' must be a fraction in [0, 1] or a percentage such as 20%\n");
  const auto cli = run_parplan({"check", "--config", cfg, "--headroom", "10%"});  // the command line wins
  CHECK(cli.exit_code == 2);
  CHECK(has(cli.err, cfg + ":3: min-mfu: '120%' must be a fraction"));
}

TEST_CASE("check: a baseline with no stages, or a peak stage past the last, is refused naming the JSON path") {
  TempDir d;
  const std::string plan = d.write("p.toml", "name = \"p\"\n" + read_text(kSmall));
  const std::string base = d.file("base.json");
  REQUIRE(run_parplan({"check", "--plan", plan, "--baseline", base, "--update-baseline"}).exit_code == 0);
  const nlohmann::json good = nlohmann::json::parse(read_text(base));
  nlohmann::json no_stages = good, past = good;
  no_stages["plans"]["p"]["stage_memory_bytes"] = nlohmann::json::array();
  past["plans"]["p"]["peak_stage"] = 99;
  for (const auto& [doc, needle] : {std::pair{no_stages, "/plans/p/stage_memory_bytes"}, std::pair{past, "/plans/p/peak_stage"}}) {
    CAPTURE(needle);
    d.write("base.json", doc.dump());
    const auto r = run_parplan({"check", "--plan", plan, "--baseline", base});
    CHECK(r.exit_code == 2);
    CHECK(has(r.err, needle));
    CHECK(r.err.find('\n') == r.err.size() - 1);
  }
}

TEST_CASE("check: one file reached twice is one plan") {
  TempDir d;
  const std::string plan = d.write("plans/p.toml", "name = \"p\"\n" + read_text(kSmall));
  const auto r = run_parplan({"check", "--plan", d.file("plans"), "--plan", plan, "--plan", d.file("plans/./p.toml")});
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "1 plan checked: 1 passed, 0 failed"));
}
