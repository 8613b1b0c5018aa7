// Hardening of the readers and of what parplan prints from its input: JSON reading linear in the input (wide
// objects and arrays, big baselines, thousands of --profile files), no text after a JSON document, the TOML reader
// (TOML 1.0 for what it reads, clear refusals for the rest), bounded echoes of input in error lines, plan paths that
// cannot inject GitHub Actions workflow commands, JUnit XML that is valid UTF-8, and GITHUB_STEP_SUMMARY that is a FIFO
// or /dev/full.
#include <doctest/doctest.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/run_helper.hpp"

namespace fs = std::filesystem;
using parplan::test::line_count;
using parplan::test::read_text;
using parplan::test::run_parplan;
using parplan::test::RunResult;
using parplan::test::write_text;

namespace {

const std::string kData = std::string(PARPLAN_TEST_DIR) + "/cli/data/";
const std::string kSmall = kData + "check/small.toml";  // passes: ~39 GiB of 80
const std::string kBig = kData + "check/big.toml";      // fails memory

bool has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// A fresh, empty scratch directory (removed by the destructor).
struct Scratch {
  fs::path path;
  Scratch() {
    std::string tmpl = (fs::temp_directory_path() / "parplan-hardB-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    write_text(file(name), text);
    return file(name);
  }
};

// Runs the binary and returns the wall time in seconds; `r` gets the result. Bounded: a run over 60 s is a failure.
double timed_run(const std::vector<std::string>& args, RunResult& r, const std::vector<std::string>& env = {}) {
  const auto t0 = std::chrono::steady_clock::now();
  r = run_parplan(args, env, 60);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK_FALSE(r.timed_out);
  return s;
}

// The time for an input 4x as large over the time for `n` (the first floored at 0.05 s, so that start-up noise
// does not count): about 4 when the work is linear, 16 when quadratic. `run(n)` runs the command on an input of
// size n, checks its outcome and returns its time. Each size takes the best of three runs: load from other tests
// (ctest runs suites side by side) only ever adds time, so the minimum is the run's own cost.
double growth(size_t n, const std::function<double(size_t)>& run) {
  auto best = [&](size_t size) { return std::min({run(size), run(size), run(size)}); };
  const double small = best(n);
  const double large = best(4 * n);
  MESSAGE("n = " << n << ": " << small << " s, 4n: " << large << " s");
  CHECK(large < 20.0);
  return large / std::max(small, 0.05);
}

std::string repeat(const std::string& item, size_t n, const std::string& sep = ",") {
  std::string s;
  s.reserve(n * (item.size() + sep.size()));
  for (size_t i = 0; i < n; ++i) s += (i ? sep : "") + item;
  return s;
}

const char* kGpuFields = R"("peak_tflops": {"bf16": 100}, "memory_GiB": 16, "hbm_bandwidth_GBps": 1000)";

}  // namespace

// ---- reading is linear in the input ----

namespace {
// growth() of a command reading one JSON file of n items: `text(n)` is the file, `args` the command before its
// path; the command must exit `code` and print `needle` (on stderr, or on stdout for exit 0).
struct JsonInput {
  std::function<std::string(size_t)> text;
  std::vector<std::string> args;
  int code;
  std::string needle;
};
double json_growth(size_t n, const JsonInput& in) {
  Scratch d;
  return growth(n, [&](size_t size) {
    std::vector<std::string> args = in.args;
    args.push_back(d.write("input.json", in.text(size)));
    RunResult r;
    const double s = timed_run(args, r);
    CHECK(r.exit_code == in.code);
    CHECK(has(in.code == 2 ? r.err : r.out, in.needle));  // bad input on stderr; reports (exit 0 or 1) on stdout
    return s;
  });
}
}  // namespace

TEST_CASE("hardening: a JSON object of 4n empty members reads in about 4x the time of n, not 16x") {
  auto text = [](size_t n) {
    std::string t = "{";
    for (size_t i = 0; i < n; ++i) t += fmt::format("{}\"k{}\":{{}}", i ? "," : "", i);
    return t + "}";
  };
  CHECK(json_growth(16384, {text, {"profiles", "validate"}, 2, "input.json: /kind: missing required key"}) < 8.0);
}

TEST_CASE("hardening: validate --runs with an array of 4n empty objects reads in about 4x the time of n") {
  auto text = [](size_t n) { return fmt::format("[{}]", repeat("{}", n)); };
  // Each row is skipped naming its path (a row the schema cannot read does not stop the others); with none scored,
  // exit 1.
  CHECK(json_growth(16384, {text, {"validate", "--runs"}, 1, "input.json: /0/id: missing or empty run id"}) < 8.0);
}

TEST_CASE("hardening: a baseline of 4n plans reads in about 4x the time of n") {
  Scratch d;
  const std::string base = d.file("one.json");
  REQUIRE(run_parplan({"check", "--plan", kSmall, "--baseline", base, "--update-baseline"}).exit_code == 0);
  const std::string entry = nlohmann::json::parse(read_text(base))["plans"].begin().value().dump();
  auto text = [&](size_t n) {
    std::string t = R"({"parplan_check_baseline": 1, "plans": {)";
    for (size_t i = 0; i < n; ++i) t += fmt::format("\"plans/p{}.toml\": {},", i, entry);
    return t + nlohmann::json(kSmall).dump() + ": " + entry + "}}";
  };
  CHECK(json_growth(2500, {text, {"check", "--plan", kSmall, "--baseline"}, 0, "1 plan checked: 1 passed"}) < 8.0);
}

TEST_CASE("hardening: 4n --profile files load in about 4x the time of n; 2,000 files within seconds") {
  Scratch d;
  std::vector<std::string> files;
  for (size_t i = 0; i < 2000; ++i) {
    const std::string name = fmt::format("G{}", i);
    files.push_back(d.write(name + ".json", fmt::format(R"({{"kind": "gpu", "name": "{0}", "aliases": ["{0}-a", "{0}-b"], {1}}})",
                                                        name, kGpuFields)));
  }
  auto run = [&](size_t n) {
    std::vector<std::string> args{"profiles"};
    for (size_t i = 0; i < n; ++i) {
      args.push_back("--profile");
      args.push_back(files[i]);
    }
    args.insert(args.end(), {"list", "--kind", "gpu"});
    RunResult r;
    const double s = timed_run(args, r);
    CHECK(r.exit_code == 0);
    CHECK(has(r.out, fmt::format("G{} ", n - 1)));
    CHECK(has(r.out, fmt::format("g{}-a", n - 1)));
    return s;
  };
  CHECK(growth(250, run) < 8.0);
  RunResult r;
  std::vector<std::string> args{"estimate", "--model", "gpt3-1.3b", "--gpus", "8", "--gpu", "g1999-b", "--json"};
  for (const std::string& f : files) args.insert(args.end(), {"--profile", f});
  CHECK(timed_run(args, r) < 20.0);
  CHECK((r.exit_code == 0 || r.exit_code == 1));
  CHECK(nlohmann::json::parse(r.out)["plan"]["gpu"]["name"] == "G1999");
  // A clash among them is still found: the last file answers to an alias of the first.
  args.insert(args.end(), {"--profile", d.write("clash.json", R"({"kind": "gpu", "name": "X", "aliases": ["g0-b"], )" +
                                                                   std::string(kGpuFields) + "}")});
  const RunResult clash = run_parplan(args, {}, 60);
  CHECK(clash.exit_code == 2);
  CHECK(has(clash.err, "--profile: gpu 'G0' in '" + files[0] + "' and gpu 'X' in '" + d.file("clash.json") +
                           "' both answer to 'g0-b' (give one)"));
}

// ---- a JSON document ends the file ----

TEST_CASE("hardening: a JSON document followed by a NUL and more bytes is refused, naming the file and the offset") {
  Scratch d;
  const std::string plan = read_text(kData + "bad/plan_ok.json");
  const std::string f = d.write("plan.json", plan + std::string("\0garbage", 8));
  const auto r = run_parplan({"estimate", "--plan", f});
  CHECK(r.exit_code == 2);
  CHECK(line_count(r.err) == 1);
  CHECK(has(r.err, f + ": malformed JSON at byte " + std::to_string(plan.size() + 1) +
                       ": text after the JSON document (only whitespace may follow it)"));
  const auto text = run_parplan({"estimate", "--plan", d.write("text.json", plan + " {}")});
  CHECK(text.exit_code == 2);
  CHECK(has(text.err, "text after the JSON document"));
  // Whitespace after the document is fine; so is a NUL inside a string refused as malformed (a control character).
  CHECK(run_parplan({"estimate", "--plan", d.write("ws.json", plan + " \n\t\r\n")}).exit_code == 0);
  const auto in_string = run_parplan({"profiles", "validate", d.write("s.json", std::string("{\"kind\": \"a\0b\"}", 15))});
  CHECK(in_string.exit_code == 2);
  CHECK(has(in_string.err, "malformed JSON at byte"));
}

// ---- suggest's advice is bounded whatever the profiles hold ----

TEST_CASE("hardening: suggest's 'what it would need' stays bounded with extreme profiles") {
  Scratch d;
  // A GPU of 1 MiB, a 100,000-layer model (its states need ~3.4e8 such GPUs) and a cluster of 720,720 GPUs a node:
  // the advice searched up to 6 counts of hundreds of millions of highly divisible GPU counts (over 4 minutes).
  const std::string gpu = d.write("tiny.json", R"({"kind": "gpu", "name": "TINY", "peak_tflops": {"bf16": 100},
      "memory_GiB": 0.001, "hbm_bandwidth_GBps": 1000})");
  const std::string model = d.write("deep.json", R"({"kind": "model", "name": "DEEP", "layers": 100000,
      "hidden": 4096, "heads": 32, "ffn_hidden": 16384, "vocab": 51200, "seq_len": 2048})");
  const std::string cluster = d.write("wide.json", R"({"kind": "cluster", "name": "WIDE", "gpu": "TINY",
      "gpus_per_node": 720720, "intra_node": {"bandwidth_GBps": 450}, "inter_node": {"bandwidth_GBps": 50}})");
  RunResult r;
  CHECK(timed_run({"suggest", "--model", model, "--profile", gpu, "--cluster", cluster, "--gpus", "8"}, r) < 20.0);
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "NOTHING FITS"));
  CHECK(has(r.out, "more than the 100000000 GPUs parplan plans for"));
  // Twenty GPU profiles: the advice tries the six nearest upgrades and says how many it left out.
  std::vector<std::string> args{"suggest", "--params", "175e9", "--gpus", "8", "--gpu", "a100-40gb"};
  for (int i = 0; i < 20; ++i) {
    args.insert(args.end(), {"--profile", d.write(fmt::format("g{}.json", i),
                                                  fmt::format(R"({{"kind": "gpu", "name": "G{}", "peak_tflops": )"
                                                              R"({{"bf16": 100}}, "memory_GiB": {}, )"
                                                              R"("hbm_bandwidth_GBps": 1000}})",
                                                              i, 10 + i))});
  }
  const RunResult many = run_parplan(args, {}, 60);
  CHECK(many.exit_code == 1);
  // The twenty have less memory than the A100-40GB: no upgrade. Of the 10 other embedded GPUs, all with more, the six
  // nearest are tried (A100-80GB up to B200), the 4 beyond them named as a count.
  CHECK(has(many.out, "(4 other GPU profiles with more memory not tried)"));
  CHECK(has(many.out, "H200-141GB"));
  CHECK_FALSE(has(many.out, "G13 "));
}

// ---- check's outputs: plan paths cannot inject workflow commands; JUnit is valid UTF-8; the step summary ----

namespace {
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || i + n > s.size() || (n == 2 && c < 0xC2)) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}
std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  for (size_t at = 0; at < s.size();) {
    const size_t end = std::min(s.find('\n', at), s.size());
    out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}
}  // namespace

TEST_CASE("hardening: a plan path with a line break and ::error cannot inject a workflow command") {
  Scratch d;
  const std::string odd = d.file("a\n::error file=x::injected.toml");
  fs::copy_file(kSmall, odd);
  const std::string summary = d.write("summary.md", "");
  const auto r = run_parplan({"check", "--plan", odd, "--memory", "30GiB", "--junit", d.file("r.xml")},
                             {"GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary});
  CHECK(r.exit_code == 1);
  int commands = 0;
  for (const std::string& line : lines_of(r.out)) {
    CAPTURE(line);
    if (!line.starts_with("::")) continue;
    ++commands;
    CHECK(line.starts_with("::error file=" + d.path.string() + "/a\\n%3A%3Aerror file=x%3A%3Ainjected.toml,"));
  }
  CHECK(commands == 1);  // the one annotation of the failed memory gate
  CHECK(has(r.out, "FAIL " + d.path.string() + "/a\\n::error file=x::injected.toml: peak "));
  for (const std::string& line : lines_of(read_text(summary))) CHECK_FALSE(line.starts_with("::"));
  CHECK(has(read_text(summary), "/a\\n::error file=x::injected.toml |"));
  // The warning on stderr names the path the same way.
  const auto warn = run_parplan({"check", "--plan", odd, "--memory", "1000GiB"}, {"GITHUB_ACTIONS=true"});
  CHECK(warn.exit_code == 0);
  for (const std::string& line : lines_of(warn.err)) CHECK_FALSE(line.starts_with("::"));
  CHECK(has(warn.err, "/a\\n::error file=x::injected.toml's GPU"));
}

TEST_CASE("hardening: JUnit XML of a plan named with bytes that are not UTF-8 is valid UTF-8") {
  Scratch d;
  const std::string odd = d.file("caf\xe9\x01\xff.toml");  // Latin-1 e-acute, a control character, a stray byte
  fs::copy_file(kSmall, odd);
  const auto r = run_parplan({"check", "--plan", odd, "--plan", kBig, "--junit", d.file("r.xml")});
  CHECK(r.exit_code == 1);
  const std::string xml = read_text(d.file("r.xml"));
  CHECK(valid_utf8(xml));
  CHECK(has(xml, "name=\"" + d.path.string() + "/caf\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD.toml\""));
  for (const char c : xml) CHECK_FALSE((static_cast<unsigned char>(c) < 0x20 && c != '\n'));
  CHECK(has(r.out, "PASS " + d.path.string() + "/caf\\xe9\\x01\\xff.toml: peak"));
  // --json: a JSON string holds only UTF-8 as well.
  const auto j = run_parplan({"check", "--plan", odd, "--json"});
  CHECK(j.exit_code == 0);
  CHECK(valid_utf8(j.out));
  CHECK(nlohmann::json::parse(j.out)["plans"][0]["pass"] == true);
}

TEST_CASE("hardening: GITHUB_STEP_SUMMARY that is a FIFO or /dev/full: a warning and exit 3, no hang") {
  Scratch d;
  const std::string fifo = d.file("summary.fifo");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const auto f = run_parplan({"check", "--plan", kSmall}, {"GITHUB_STEP_SUMMARY=" + fifo}, 20);
  CHECK_FALSE(f.timed_out);
  CHECK(f.exit_code == 3);
  CHECK(line_count(f.err) == 1);
  CHECK(has(f.err, "parplan: warning: cannot append to GITHUB_STEP_SUMMARY '" + fifo + "': not a regular file"));
  CHECK(has(f.out, "1 plan checked: 1 passed"));  // the report is still written
  const auto full = run_parplan({"check", "--plan", kSmall}, {"GITHUB_STEP_SUMMARY=/dev/full"}, 20);
  CHECK(full.exit_code == 3);
  CHECK(has(full.err, "cannot append to GITHUB_STEP_SUMMARY '/dev/full': No space left on device"));
  // A regular file still takes the summary, exit 0.
  const auto ok = run_parplan({"check", "--plan", kSmall}, {"GITHUB_STEP_SUMMARY=" + d.file("s.md")}, 20);
  CHECK(ok.exit_code == 0);
  CHECK(has(read_text(d.file("s.md")), "## parplan check: the plan passes"));
}

// ---- the TOML reader ----

TEST_CASE("hardening: TOML plans and configs follow TOML 1.0 for what they read and refuse the rest by file:line") {
  Scratch d;
  const std::string head = "model = \"llama2-7b\"\ngpus = 8\n";  // lines 1 and 2
  struct Case {
    std::string text, needle;
  };
  const std::vector<Case> cases = {
      {head + "tp\n", ":3: key 'tp' has no value (write tp = value)"},
      {head + "sequence-parallel\ntp = 2\n", ":3: key 'sequence-parallel' has no value"},
      {head + "tp = 2\nsequence-parallel = false\nsp = true\n",
       ":5: keys 'sequence-parallel' (line 4) and 'sp' name the same option --sequence-parallel; give one"},
      {head + "gpus = 16\n", ":3: key 'gpus' is given more than once (first on line 2)"},
      {head + "bucket-mb = 0x10\n", ":3: key 'bucket-mb' takes a number, not 0x10"},
      {head + "bucket-mb = inf\n", ":3: key 'bucket-mb' takes a number, not inf"},
      {head + "tp = 2 trailing\n", ":3: text after the value of key 'tp'"},
      {head + "tp = 2 = 3\n", ":3: text after the value of key 'tp'"},
      {head + "profile = [[\"a.json\"]]\n", ":3: key 'profile': nested arrays are not supported"},
      {head + "profile = [\"a.json\",\n", ":4: key 'profile': an array without its closing ']'"},
      {head + "profile = [\"a.json\" \"b.json\"]\n", ":3: key 'profile': expected ',' or ']' in the array"},
      {head + "recompute = {a = 1}\n", ":3: key 'recompute': inline tables are not supported"},
      {head + "recompute = \"\"\"full\"\"\"\n", ":3: multi-line strings are not supported"},
      {head + "recompute = \"full\n", ":3: a string without its closing quote"},
      {head + "recompute = \"fu\\ll\"\n", ":3: an unknown escape sequence in a string"},
      {head + "mesh.tp = 2\n", ":3: unknown key 'mesh.tp' (sections are not supported; use top-level keys)"},
      {"model = \"llama2-7b\"\rgpus = 8\r", ":1: a carriage return without a line feed"},
      {head + "# caf\xe9\n", ":3: bytes that are not UTF-8 in a comment"},
      {head + "= 2\n", ":3: expected a key = value line"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const std::string f = d.write("p.toml", c.text);
    const auto r = run_parplan({"check", "--plan", f});
    CHECK(r.exit_code == 2);
    CHECK(line_count(r.err) == 1);
    CHECK(has(r.err, "parplan: error: " + f + c.needle));
  }
  // What TOML allows reads as TOML says: CRLF line ends, '#' inside a string, escapes, a multi-line array with
  // comments and a trailing comma, a comment right after a value.
  fs::copy_file(kSmall, d.file("a#b.toml"));
  fs::copy_file(kSmall, d.file("c d.toml"));
  const std::string cfg = d.write("cfg.toml",
                                  "plan = [  # two plans\r\n  \"a#b.toml\",\r\n  'c d.toml',  # literal\r\n]\r\n"
                                  "max-bubble = 0.5# no blank needed\r\nheadroom = \"1\\u0030%\"\r\n");
  const auto ok = run_parplan({"check", "--config", cfg});
  CHECK_MESSAGE(ok.exit_code == 0, ok.err);
  CHECK(has(ok.out, "PASS " + d.file("a#b.toml")));
  CHECK(has(ok.out, "PASS " + d.file("c d.toml")));
  CHECK(has(ok.out, "under the 71.68 GiB limit"));  // "1\u0030%" is 10% headroom: 90% of 79.65 GiB
  const std::string sp = d.write("sp.toml", head + "tp = 2\nsp = false\n");
  const auto sp_off = run_parplan({"check", "--plan", sp, "--json"});
  REQUIRE(sp_off.exit_code == 0);
  CHECK(nlohmann::json::parse(sp_off.out)["plans"][0]["pass"] == true);
  // Hex floats on the command line too.
  const auto hex = run_parplan({"estimate", "--model", "llama2-7b", "--gpus", "8", "--bucket-mb", "0x10"});
  CHECK(hex.exit_code == 2);
  CHECK(has(hex.err, "--bucket-mb: 0x10 is not a decimal number"));
  CHECK(run_parplan({"estimate", "--model", "llama2-7b", "--gpus", "8", "--bucket-mb", "2.5e1"}).exit_code != 2);
}

// ---- what an error line echoes of the input is bounded ----

TEST_CASE("hardening: error lines echo at most a short excerpt of the input") {
  Scratch d;
  const std::string huge(1 << 20, 'x');
  auto short_line = [](const RunResult& r) {
    CHECK(r.exit_code == 2);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.size() < 600);
    CHECK(has(r.err, "xxx..."));
  };
  // A TOML value, a JSON key, a JSON enum value, a profile name asked for, an option value.
  short_line(run_parplan({"check", "--plan", d.write("v.toml", "model = \"llama2-7b\"\ngpus = 8\ntp = " + huge + "\n")}));
  short_line(run_parplan({"check", "--plan", d.write("r.toml", "model = \"llama2-7b\"\ngpus = 8\nrecompute = \"" + huge +
                                                                   "\"\n")}));
  short_line(run_parplan({"profiles", "validate", d.write("k.json", "{\"kind\": \"gpu\", \"name\": \"G\", " +
                                                                        std::string(kGpuFields) + ", \"" + huge +
                                                                        "\": 1}")}));
  short_line(run_parplan({"profiles", "validate",
                          d.write("e.json", R"({"kind": "model", "name": "m", "layers": 2, "hidden": 64, "heads": 4,
      "ffn_hidden": 256, "vocab": 100, "seq_len": 16, "ffn_type": ")" + huge + "\"}")}));
  short_line(run_parplan({"check", "--plan", d.write("m.toml", "model = \"" + huge + "\"\ngpus = 8\n")}));
  // A file given as a config that is not one (a password file): its contents are not echoed.
  const std::string secret = "root:$6$saltsalt$" + std::string(86, 'h') + ":19000:0:99999:7:::";
  const auto shadow = run_parplan({"check", "--config", d.write("shadow", secret + "\ndaemon:*:19000:0:99999:7:::\n")});
  CHECK(shadow.exit_code == 2);
  CHECK(line_count(shadow.err) == 1);
  CHECK_FALSE(has(shadow.err, "$6$"));
  CHECK(has(shadow.err, d.file("shadow") + ":1: expected '=' after key 'root'"));
  const auto junk = run_parplan({"check", "--config", d.write("junk", huge + "\n")});
  CHECK(junk.exit_code == 2);
  CHECK(junk.err.size() < 600);
}

TEST_CASE("hardening: a launch script line that is blank or a bare 'export' is read, not a crash") {
  // Found by tests/fuzz/interop_fuzz.cpp: a logical line of blanks after 'export ' made the assignment reader compare
  // past the line's end (std::out_of_range, abort).
  parplan::test::ScratchDir dir;
  const std::string sh = (dir.path / "blank.sh").string();
  for (const char* head : {"export \n", "export\t\n", "declare -a \n", "readonly \n", "  \t \n"}) {
    CAPTURE(head);
    parplan::test::write_text(sh, std::string(head) + "pretrain_gpt.py --num-layers 2 --hidden-size 64 "
                                                       "--num-attention-heads 2 --seq-length 128\n");
    const auto r = parplan::test::run_parplan({"import", sh, "--gpus", "1"}, {}, 60);
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("terminate") == std::string::npos);
  }
}

TEST_CASE("hardening: a DeepSpeed JSON number out of range or a duplicate key is a one-line error, not a crash") {
  // Found by tests/fuzz/interop_fuzz.cpp: nlohmann's out_of_range (a number like 22222E4444) escaped the DeepSpeed
  // reader, which caught parse errors only; it now reads through the planner's strict JSON reader.
  parplan::test::ScratchDir dir;
  const std::string js = (dir.path / "ds.json").string();
  const std::pair<const char*, const char*> cases[] = {
      {"{\"train_batch_size\": 22222E4444}", "a number is out of range"},
      {"{\"train_batch_size\": 8, \"train_batch_size\": 16}", "duplicate key"},
      {"{\"train_batch_size\": 8", "malformed JSON"},
  };
  for (const auto& [text, err] : cases) {
    CAPTURE(text);
    parplan::test::write_text(js, text);
    const auto r = parplan::test::run_parplan({"import", js, "--format", "deepspeed", "--model", "llama3-8b", "--gpus", "8"}, {}, 60);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(err) != std::string::npos);
    CHECK(line_count(r.err) == 1);
  }
}
