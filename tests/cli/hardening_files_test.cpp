// Files and outputs under attack or failure: planted temporary files, concurrent baseline updates, two outputs on
// one destination, signals while writing, failed writes to stdout, all-or-nothing `validate --plans`, and calibrate
// flags checked before measuring (docs/robustness.md, "Adversarial probe: files and outputs").
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/run_helper.hpp"

namespace fs = std::filesystem;
using parplan::test::line_count;
using parplan::test::read_text;
using parplan::test::run_parplan;
using parplan::test::ScratchDir;
using parplan::test::spawn_parplan;
using parplan::test::wait_parplan;
using parplan::test::write_text;

namespace {

const std::string kBad = std::string(PARPLAN_TEST_DIR) + "/cli/data/bad/";
const std::string kPlan = kBad + "plan_ok.json";
const std::vector<std::string> kEstimate = {"estimate", "--model", "gpt3-1.3b", "--gpus", "8"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::string> sorted_entries(const ScratchDir& dir) {
  std::vector<std::string> names = dir.entries();
  std::sort(names.begin(), names.end());
  return names;
}

bool has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// The one-line error contract: `code`, one stderr line starting "parplan: error: " and containing every needle.
void expect_error(const parplan::test::RunResult& r, int code, const std::vector<std::string>& needles) {
  CAPTURE(r.err);
  CHECK(r.exit_code == code);
  CHECK(line_count(r.err) == 1);
  CHECK(r.err.rfind("parplan: error: ", 0) == 0);
  for (const std::string& n : needles) CHECK_MESSAGE(has(r.err, n), "missing '" << n << "'");
}

// Runs spawned parplan with stdout and stderr to files in `dir`; returns its exit code, stdout and stderr.
parplan::test::RunResult run_to(const std::vector<std::string>& args, const std::string& out, const fs::path& dir) {
  const std::string err = (dir / "stderr.txt").string();
  parplan::test::RunResult r;
  r.exit_code = wait_parplan(spawn_parplan(args, out, err), 60);
  r.out = out == "/dev/full" ? "" : read_text(out);
  r.err = read_text(err);
  fs::remove(err);
  return r;
}

}  // namespace

TEST_CASE("an output's temporary file cannot be planted: links at predictable names are never followed") {
  // parplan once wrote to ".parplan-<pid>.tmp" beside the output, through whatever was there: a link planted for the
  // next process ids made `estimate -o out.json` overwrite the file it named (and left out.json a link).
  ScratchDir dir;
  const fs::path victim = dir.path / "victim.txt", out = dir.path / "out.json";
  write_text(victim.string(), "precious\n");
  auto planted_files = [&] {
    std::vector<fs::path> p;
    for (const auto& e : fs::directory_iterator(dir.path)) {
      if (e.path().filename().string().rfind(".parplan-", 0) == 0) p.push_back(e.path());
    }
    return p;
  };
  for (const bool hard : {false, true}) {
    CAPTURE(hard);
    for (const fs::path& p : planted_files()) fs::remove(p);
    int last_pid = 0;  // the next process ids follow it
    std::ifstream("/proc/sys/kernel/ns_last_pid") >> last_pid;
    for (int pid = last_pid + 1; pid <= last_pid + 3000; ++pid) {
      const fs::path planted = dir.path / (".parplan-" + std::to_string(pid) + ".tmp");
      if (hard) {
        fs::create_hard_link(victim, planted);
      } else {
        fs::create_symlink(victim, planted);
      }
    }
    const auto r = run_parplan(with(kEstimate, {"-o", out.string()}));
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(read_text(victim.string()) == "precious\n");
    CHECK(fs::is_regular_file(fs::symlink_status(out)));
    CHECK(nlohmann::json::parse(read_text(out.string())).contains("parallel"));
    CHECK(planted_files().size() == 3000);  // untouched, and no temporary file of parplan's own left
    fs::remove(out);
  }
  // (An output that is itself a link still writes the file it names, and /dev/null is written in place: the
  // bad-input suite's "outputs that are not plain files" case.)
}

TEST_CASE("concurrent check --update-baseline runs on one baseline keep every plan's entry") {
  // Each run read the baseline, added its plans and replaced the file: two at once lost one's entries (23-31% of
  // pairs), and two processes with one pid (PID namespaces) shared a temporary file.
  ScratchDir dir;
  constexpr int kRuns = 8;
  std::vector<std::string> plans;
  for (int i = 0; i < kRuns; ++i) {
    plans.push_back((dir.path / ("plan" + std::to_string(i) + ".json")).string());
    nlohmann::json plan = nlohmann::json::parse(read_text(kPlan));
    plan["name"] = "plan" + std::to_string(i);  // entries are keyed by the plan's name (docs/ci.md)
    std::ofstream(plans.back()) << plan.dump();
  }
  const std::string base = (dir.path / "baseline.json").string();
  for (int round = 0; round < 4; ++round) {
    CAPTURE(round);
    fs::remove(base);
    std::vector<pid_t> pids;
    for (int i = 0; i < kRuns; ++i) {
      const std::string log = (dir.path / ("log" + std::to_string(i))).string();
      pids.push_back(spawn_parplan({"check", "--plan", plans[i], "--baseline", base, "--update-baseline"}, log, log));
    }
    for (int i = 0; i < kRuns; ++i) {
      const int rc = wait_parplan(pids[i], 120);
      const std::string log = (dir.path / ("log" + std::to_string(i))).string();
      CHECK_MESSAGE(rc == 0, read_text(log));
      fs::remove(log);
    }
    const nlohmann::json j = nlohmann::json::parse(read_text(base));  // valid JSON
    for (int i = 0; i < kRuns; ++i) CHECK_MESSAGE(j["plans"].contains("plan" + std::to_string(i)), "lost " << plans[i]);
    auto names = sorted_entries(dir);  // no lock or temporary file left
    CHECK(names.size() == kRuns + 1);
  }
}

TEST_CASE("two outputs naming one destination are refused, naming both flags, before anything is written") {
  ScratchDir dir;
  auto file = [&](const std::string& name) { return (dir.path / name).string(); };
  const std::string runs = kBad + "runs_ok.json";
  const std::vector<std::string> fit = {"calibrate", "--from-runs", runs, "--gpu", "a100-80gb", "--fit-fields",
                                        "inter_node.efficiency"};
  const std::vector<std::string> host = {"calibrate", "--backend", "host"};
  write_text(file("existing.json"), "{}\n");
  fs::create_symlink("c.json", file("link.json"));
  fs::create_hard_link(file("existing.json"), file("hard.json"));
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> names;
  };
  const std::vector<Case> cases = {
      {with(host, {"--out", file("c.json"), "--cluster-out", file("c.json")}), {"--out and --cluster-out: both name"}},
      {with(host, {"--out", file("link.json"), "--cluster-out", file("c.json")}), {"--out and --cluster-out"}},
      {with(host, {"--out", file("existing.json"), "--cluster-out", file("hard.json")}), {"--out and --cluster-out"}},
      {with(host, {"--out", "-", "--cluster-out", "-"}), {"--out and --cluster-out: both name stdout"}},
      {with(host, {"--out", "-", "--json"}), {"--out: '-' (stdout) and --json"}},
      {with(fit, {"--out", file("c.json"), "--cluster-out", file("./c.json")}), {"--out and --cluster-out"}},
      {with(fit, {"--out", "-", "--cluster-out", "/dev/stdout"}), {"--out and --cluster-out: both name stdout"}},
      {{"check", "--plan", kPlan, "--baseline", file("new.json"), "--update-baseline", "--junit", file("new.json")},
       {"--junit and --baseline: both name"}},
      {{"run", "--backend", "host", "--plan", kPlan, "--trace", "-", "--json"}, {"--trace: '-' (stdout) and --json"}},
      {{"simulate", "--plan", kPlan, "--trace", "-", "--json"}, {"--trace: '-' (stdout) and --json"}},
  };
  for (const Case& c : cases) {
    std::string cmd;
    for (const auto& a : c.args) cmd += " " + a;
    CAPTURE(cmd);
    const auto r = run_parplan(c.args, {}, 60);
    expect_error(r, 2, c.names);
    CHECK(r.out.empty());
  }
  // stdout redirected to a file: /dev/stdout is that file, and stdout all the same.
  const auto r = run_to({"simulate", "--plan", kPlan, "--trace", "/dev/stdout", "--json"}, file("f.out"), dir.path);
  expect_error(r, 2, {"--trace: '/dev/stdout' (stdout) and --json"});
  CHECK(r.out.empty());
  const auto r2 = run_to({"simulate", "--plan", kPlan, "--trace", "-", "--svg", "/dev/stdout"}, file("f.out"), dir.path);
  expect_error(r2, 2, {"--trace and --svg: both name stdout"});
  // Nothing was written (the hard link still shares the file), and one device twice is allowed.
  auto names = sorted_entries(dir);
  CHECK(names == std::vector<std::string>{"existing.json", "f.out", "hard.json", "link.json"});
  CHECK(read_text(file("existing.json")) == "{}\n");
  CHECK(run_parplan({"simulate", "--plan", kPlan, "--trace", "/dev/null", "--svg", "/dev/null"}).exit_code == 0);
}

TEST_CASE("SIGTERM or SIGINT while simulate writes --trace and --svg leaves both files or neither, and no temporary") {
  ScratchDir dir;
  const fs::path trace = dir.path / "t.json", svg = dir.path / "t.svg";
  auto temporaries = [&] {
    std::vector<std::string> t;
    for (const auto& e : fs::directory_iterator(dir.path)) {
      if (e.path().filename().string().rfind(".parplan-", 0) == 0) t.push_back(e.path().filename().string());
    }
    return t;
  };
  // A 17 MB trace: writing it takes long enough to be caught in the act.
  const std::vector<std::string> args = {"simulate", "--model", "gpt3-1.3b", "--gpus", "8", "--tp", "2", "--pp", "4",
                                         "--global-batch", "4096", "--trace", trace.string(), "--svg", svg.string()};
  int caught = 0;
  for (int attempt = 0; attempt < 40 && caught < 6; ++attempt) {
    fs::remove(trace);
    fs::remove(svg);
    const std::string log = (dir.path.parent_path() / (dir.path.filename().string() + ".log")).string();
    const pid_t pid = spawn_parplan(args, "/dev/null", log);
    bool seen = false;  // a temporary file existed when the signal was sent
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    auto running = [pid] {
      siginfo_t info{};
      return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
    };
    int sig = 0;
    while (std::chrono::steady_clock::now() < deadline && running() && !(seen = !temporaries().empty())) usleep(200);
    const int signal_sent = caught % 2 == 0 ? SIGTERM : SIGINT;
    if (seen) kill(pid, signal_sent);
    const int rc = wait_parplan(pid, 60, &sig);
    fs::remove(log);
    if (!seen || rc == 0) continue;  // finished before a temporary was seen, or before the signal arrived
    ++caught;
    CAPTURE(attempt);
    CHECK(sig == signal_sent);  // it still dies of the signal
    CHECK(temporaries().empty());
    CHECK(fs::exists(trace) == fs::exists(svg));  // the pair: both or neither
  }
  MESSAGE("signals that landed while a temporary file existed: " << caught);
  CHECK_MESSAGE(caught > 0, "no signal landed while a temporary file existed");
}

TEST_CASE("a failed write to stdout exits 3 with one line") {
  ScratchDir dir;
  const std::vector<std::vector<std::string>> cases = {
      kEstimate,
      with(kEstimate, {"--json"}),
      with(kEstimate, {"-o", "-"}),
      {"check", "--plan", kPlan},
      {"check", "--plan", kPlan, "--json"},
      {"simulate", "--plan", kPlan, "--trace", "-"},
      {"validate", "--runs", kBad + "runs_ok.json"},
  };
  for (const auto& args : cases) {
    std::string cmd;
    for (const auto& a : args) cmd += " " + a;
    CAPTURE(cmd);
    expect_error(run_to(args, "/dev/full", dir.path), 3, {"stdout", "No space left on device"});
  }
}

TEST_CASE("validate --plans writes every plan or none; a long id gets a short unique file name") {
  const nlohmann::json row = nlohmann::json::parse(read_text(kBad + "runs_ok.json"))[0];
  auto runs_file = [&](const fs::path& dir, const std::vector<std::string>& ids) {
    nlohmann::json rows = nlohmann::json::array();
    for (const std::string& id : ids) {
      rows.push_back(row);
      rows.back()["id"] = id;
    }
    const std::string path = (dir.parent_path() / (dir.filename().string() + "-runs.json")).string();
    write_text(path, rows.dump(2));
    return path;
  };
  SUBCASE("a 300-character id (its file name was too long: the rows before it were written, then exit 2)") {
    ScratchDir dir;
    const std::string long_id = std::string(150, 'x') + std::string(150, 'y');
    const std::string runs = runs_file(dir.path, {"a_first", long_id, std::string(150, 'x') + std::string(150, 'z')});
    const auto r = run_parplan({"validate", "--runs", runs, "--plans", dir.path.string()});
    fs::remove(runs);
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    auto names = sorted_entries(dir);
    REQUIRE(names.size() == 3);
    CHECK(names[0] == "a_first.json");
    for (size_t i : {1, 2}) {
      CHECK(names[i].size() == 100 + 1 + 16 + 5);
      CHECK(names[i].rfind(std::string(100, 'x') + "-", 0) == 0);
    }
    CHECK(names[1] != names[2]);
  }
  SUBCASE("a plan that cannot be written: none is, and an existing one keeps its contents") {
    ScratchDir dir;
    const std::string runs = runs_file(dir.path, {"a", "b"});
    write_text((dir.path / "a.json").string(), "old\n");
    fs::create_symlink("/proc/parplan-cannot-create.json", dir.path / "b.json");  // creating it fails, even as root
    const auto r = run_parplan({"validate", "--runs", runs, "--plans", dir.path.string()});
    expect_error(r, 2, {"--plans: cannot write", "b.json"});
    CHECK(read_text((dir.path / "a.json").string()) == "old\n");
    // A full disk: exit 3, and again nothing is written.
    fs::remove(dir.path / "b.json");
    fs::create_symlink("/dev/full", dir.path / "b.json");
    const auto full = run_parplan({"validate", "--runs", runs, "--plans", dir.path.string()});
    fs::remove(runs);
    expect_error(full, 3, {"--plans: cannot write", "No space left on device"});
    CHECK(read_text((dir.path / "a.json").string()) == "old\n");
    CHECK(sorted_entries(dir) == std::vector<std::string>{"a.json", "b.json"});
  }
}

TEST_CASE("a pair of outputs is all or nothing: a failed second output puts the first one's old contents back") {
  ScratchDir dir;
  const std::string trace = (dir.path / "t.json").string();
  write_text(trace, "old trace\n");
  const std::string svg = (dir.path / (std::string(300, 's') + ".svg")).string();  // too long a name: rename fails
  const auto r = run_parplan({"simulate", "--plan", kPlan, "--trace", trace, "--svg", svg});
  expect_error(r, 2, {"--svg: cannot write"});
  CHECK(read_text(trace) == "old trace\n");
  CHECK(sorted_entries(dir) == std::vector<std::string>{"t.json"});
}

TEST_CASE("calibrate checks every flag before measuring or writing anything") {
  ScratchDir dir;
  const std::string gpu = (dir.path / "gpu.json").string(), cluster = (dir.path / "cluster.json").string();
  const std::vector<std::string> host = {"calibrate", "--backend", "host", "--out", gpu, "--cluster-out", cluster};
  expect_error(run_parplan(with(host, {"--ranks", "1"})), 2, {"--cluster-out: needs >= 2 ranks"});
  expect_error(run_parplan(with(host, {"--cluster", "no-such-cluster"})), 2, {"--cluster"});
  CHECK(dir.entries().empty());
}
