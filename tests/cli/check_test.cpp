// CLI tests for `parplan check`: exit codes, gates, baseline, JUnit (parsed back), GitHub annotations and summary,
// TOML plans and config files, one-line errors with the path and no output files on bad input.
#include <doctest/doctest.h>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/run_helper.hpp"

using parplan::test::read_text;
using parplan::test::run_parplan;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(PARPLAN_TEST_DIR) + "/cli/data/check/";
const std::string kSmall = kData + "small.toml";  // passes: ~39 GiB of 80
const std::string kBig = kData + "big.toml";      // 175B without recompute: ~174 GiB, fails memory
const std::string kDp = kData + "dp.toml";        // DP communication ~68% of the step

bool has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// A fresh directory under the system temp directory, removed at scope exit.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("parplan_check_" + std::to_string(getpid()) + "_" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

nlohmann::json json_of(const parplan::test::RunResult& r) {
  REQUIRE_MESSAGE(r.exit_code >= 0, r.err);
  return nlohmann::json::parse(r.out);
}

// ---- a small XML well-formedness parser: elements, attributes, text, entity references, one root ----
struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<std::unique_ptr<XmlElement>> children;
  std::string text;
  std::vector<const XmlElement*> all(const std::string& n) const {
    std::vector<const XmlElement*> out;
    for (const auto& c : children) {
      if (c->name == n) out.push_back(c.get());
    }
    return out;
  }
};

class XmlParser {
 public:
  explicit XmlParser(std::string s) : s_(std::move(s)) {}
  // Throws std::runtime_error("offset N: what") when the document is not well-formed.
  std::unique_ptr<XmlElement> parse() {
    skip_ws();
    if (s_.compare(i_, 5, "<?xml") == 0) {
      const size_t end = s_.find("?>", i_);
      if (end == std::string::npos) fail("unterminated XML declaration");
      i_ = end + 2;
    }
    skip_ws();
    auto root = element();
    skip_ws();
    if (i_ != s_.size()) fail("content after the root element");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("offset " + std::to_string(i_) + ": " + what);
  }
  void skip_ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  std::string name() {
    const size_t b = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '-' ||
                              s_[i_] == '.' || s_[i_] == ':')) {
      ++i_;
    }
    if (b == i_) fail("expected a name");
    return s_.substr(b, i_ - b);
  }
  // Character data up to `stop`, with entity references resolved; a raw '<' or a bad '&' is an error.
  std::string chars(char stop) {
    std::string out;
    while (i_ < s_.size() && s_[i_] != stop) {
      const char c = s_[i_];
      if (c == '<') fail("raw '<' in character data");
      if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\r' && c != '\t') fail("control character");
      if (c == '&') {
        const size_t semi = s_.find(';', i_);
        if (semi == std::string::npos) fail("unterminated entity");
        const std::string ent = s_.substr(i_ + 1, semi - i_ - 1);
        static const std::map<std::string, char> named = {
            {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
        if (named.count(ent)) {
          out += named.at(ent);
        } else if (ent.size() > 1 && ent[0] == '#' && ent.find_first_not_of("0123456789", 1) == std::string::npos) {
          out += static_cast<char>(std::stoi(ent.substr(1)));
        } else {
          fail("unknown entity &" + ent + ";");
        }
        i_ = semi + 1;
      } else {
        out += c;
        ++i_;
      }
    }
    return out;
  }
  std::unique_ptr<XmlElement> element() {
    if (i_ >= s_.size() || s_[i_] != '<') fail("expected '<'");
    ++i_;
    auto e = std::make_unique<XmlElement>();
    e->name = name();
    for (;;) {
      skip_ws();
      if (s_.compare(i_, 2, "/>") == 0) {
        i_ += 2;
        return e;
      }
      if (i_ < s_.size() && s_[i_] == '>') {
        ++i_;
        break;
      }
      const std::string a = name();
      skip_ws();
      if (i_ >= s_.size() || s_[i_] != '=') fail("expected '=' after attribute " + a);
      ++i_;
      skip_ws();
      if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) fail("unquoted attribute " + a);
      const char q = s_[i_++];
      std::string v = chars(q);
      if (i_ >= s_.size()) fail("unterminated attribute " + a);
      ++i_;
      if (!e->attrs.emplace(a, v).second) fail("duplicate attribute " + a);
    }
    for (;;) {
      e->text += chars('<');
      if (i_ >= s_.size()) fail("unterminated element " + e->name);
      if (s_.compare(i_, 2, "</") == 0) {
        i_ += 2;
        if (name() != e->name) fail("mismatched end tag for " + e->name);
        skip_ws();
        if (i_ >= s_.size() || s_[i_] != '>') fail("expected '>'");
        ++i_;
        return e;
      }
      e->children.push_back(element());
    }
  }
  std::string s_;
  size_t i_ = 0;
};

// Reverses the GitHub workflow-command escaping (%25 %0D %0A %3A %2C).
std::string workflow_unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

TEST_CASE("xml test parser rejects what is not well-formed") {
  CHECK_NOTHROW(XmlParser("<?xml version=\"1.0\"?><a x=\"1 &amp; 2\"><b/>t&#10;</a>").parse());
  CHECK_THROWS(XmlParser("<a><b></a>").parse());
  CHECK_THROWS(XmlParser("<a x=\"<\"/>").parse());
  CHECK_THROWS(XmlParser("<a>&bogus;</a>").parse());
  CHECK_THROWS(XmlParser("<a>1 & 2</a>").parse());
  CHECK_THROWS(XmlParser("<a/><b/>").parse());
}

TEST_CASE("check: a plan that fits passes with exit 0 and one summary line with the margin") {
  const auto r = run_parplan({"check", "--plan", kSmall});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.err.empty());
  CHECK(has(r.out, "PASS " + kSmall + ": peak "));
  CHECK(has(r.out, "GiB under the"));
  CHECK(has(r.out, "on stage 0"));
  CHECK(has(r.out, "1 plan checked: 1 passed, 0 failed"));
}

TEST_CASE("check: memory fails against --memory and --headroom with GiB over, stage and largest term") {
  const auto mem = run_parplan({"check", "--plan", kSmall, "--memory", "30GiB"});
  CHECK(mem.exit_code == 1);
  CHECK(has(mem.out, "FAIL " + kSmall));
  CHECK(has(mem.out, "OVER the 30.00 GiB limit"));
  CHECK(has(mem.out, "  memory: peak "));
  CHECK(has(mem.out, "largest term"));
  const auto head = run_parplan({"check", "--plan", kSmall, "--headroom", "60%"});
  CHECK(head.exit_code == 1);
  CHECK(has(head.out, "headroom"));
  const auto bytes = run_parplan({"check", "--plan", kSmall, "--headroom", "8GiB"});
  CHECK(bytes.exit_code == 0);
  const auto big = run_parplan({"check", "--plan", kBig});
  CHECK(big.exit_code == 1);
  CHECK(has(big.out, "largest term activations"));
  // A budget above the GPU is capped at its capacity, and said so on stderr.
  const auto above = run_parplan({"check", "--plan", kSmall, "--memory", "1000GiB"});
  CHECK(above.exit_code == 0);
  CHECK(has(above.err, "warning: --memory 1000.00 GiB is above " + kSmall + "'s GPU"));
  CHECK(run_parplan({"check", "--plan", kSmall, "--memory", "30GiB"}).err.empty());
}

TEST_CASE("check: each performance floor fails just past the plan's value and passes just inside it") {
  const auto small = json_of(run_parplan({"check", "--plan", kSmall, "--json"}))["plans"][0];
  const auto dp = json_of(run_parplan({"check", "--plan", kDp, "--json"}))["plans"][0];
  const double bubble = small["bubble_fraction"], mfu = small["mfu"], step = small["step_s"];
  const double dpc = dp["dp_comm_fraction"];
  REQUIRE(bubble > 0);
  REQUIRE(dpc > 0.1);
  struct Case {
    std::string plan, flag, gate;
    double failing, passing;
  };
  const std::vector<Case> cases = {
      {kSmall, "--max-bubble", "bubble", bubble * 0.9, bubble * 1.1},
      {kDp, "--max-dp-comm", "dp_comm", dpc * 0.9, dpc * 1.1},
      {kSmall, "--min-mfu", "mfu", mfu * 1.1, mfu * 0.9},
      {kSmall, "--max-step-time", "step_time", step * 0.9, step * 1.1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.flag);
    const auto bad = run_parplan({"check", "--plan", c.plan, c.flag, fmt::format("{}", c.failing)});
    CHECK(bad.exit_code == 1);
    CHECK(has(bad.out, "  " + c.gate + ": "));
    CHECK_FALSE(has(bad.out, "  memory: "));
    const auto good = run_parplan({"check", "--plan", c.plan, c.flag, fmt::format("{}", c.passing)});
    CHECK_MESSAGE(good.exit_code == 0, good.out << good.err);
  }
  // Percent and duration forms.
  CHECK(run_parplan({"check", "--plan", kSmall, "--min-mfu", "99%"}).exit_code == 1);
  CHECK(run_parplan({"check", "--plan", kSmall, "--max-step-time", "100ms"}).exit_code == 1);
  CHECK(run_parplan({"check", "--plan", kSmall, "--max-step-time", "1min"}).exit_code == 0);
}

TEST_CASE("check: several plans with mixed results exit 1 and report every plan") {
  const auto r = run_parplan({"check", "--plan", kSmall, "--plan", kBig, "--plan", kDp});
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "PASS " + kSmall));
  CHECK(has(r.out, "FAIL " + kBig));
  CHECK(has(r.out, "PASS " + kDp));
  CHECK(has(r.out, "3 plans checked: 2 passed, 1 failed"));
  const auto j = json_of(run_parplan({"check", "--plan", kSmall, "--plan", kBig, "--json"}));
  CHECK(j["pass"] == false);
  REQUIRE(j["plans"].size() == 2);
  CHECK(j["plans"][0]["pass"] == true);
  CHECK(j["plans"][1]["pass"] == false);
  CHECK(j["plans"][1]["margin_bytes"].get<double>() < 0);
}

TEST_CASE("check: plans from a directory and from a config file (paths relative to it)") {
  TempDir d("dir");
  fs::copy_file(kSmall, d.file("a.toml"));
  fs::copy_file(kDp, d.file("b.toml"));
  write(d.file("notes.txt"), "not a plan");
  const auto r = run_parplan({"check", "--plan", d.path.string()});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(has(r.out, "a.toml"));
  CHECK(has(r.out, "b.toml"));
  CHECK(has(r.out, "2 plans checked"));
  CHECK(r.out.find("a.toml") < r.out.find("b.toml"));

  const auto c = run_parplan({"check", "--config", kData + "check.toml"});
  CHECK(c.exit_code == 1);
  CHECK(has(c.out, "PASS " + kData + "small.toml"));
  CHECK(has(c.out, "FAIL " + kData + "big.toml"));
  CHECK(has(c.out, "8.00 GiB headroom"));  // headroom = "10%" from the config file
  // The command line wins over the config file.
  const auto over = run_parplan({"check", "--config", kData + "check.toml", "--headroom", "0"});
  CHECK_FALSE(has(over.out, "GiB headroom"));
  TempDir e("emptydir");
  const auto none = run_parplan({"check", "--plan", e.path.string()});
  CHECK(none.exit_code == 2);
  CHECK(has(none.err, e.path.string()));
}

TEST_CASE("check: JSON plan documents from estimate -o are accepted") {
  TempDir d("json");
  const auto est = run_parplan({"estimate", "--model", "gpt3-175b", "--gpu", "a100-80gb", "--cluster", "dgx-a100",
                                "--gpus", "64", "--tp", "8", "--pp", "8", "--recompute", "selective", "--sp",
                                "--global-batch", "64", "--vpp", "3", "-o", d.file("p.json")});
  REQUIRE(est.exit_code == 0);
  const auto r = run_parplan({"check", "--plan", d.file("p.json"), "--memory", "72GiB"});
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "PASS " + d.file("p.json")));
}

TEST_CASE("check: baseline update, then a regression fails naming the term and stage that grew") {
  TempDir d("baseline");
  const std::string plan = d.file("llama.toml"), base = d.file("baseline.json");
  // Named: the entry follows the plan through edits (an unnamed plan is keyed by its content).
  write(plan, "name = \"llama\"\n" + read_text(kSmall));
  const auto up = run_parplan({"check", "--plan", plan, "--baseline", base, "--update-baseline"});
  REQUIRE_MESSAGE(up.exit_code == 0, up.err);
  const auto doc = nlohmann::json::parse(read_text(base));
  CHECK(doc["parplan_check_baseline"] == 1);
  CHECK(doc["plans"].contains("llama"));
  CHECK(run_parplan({"check", "--plan", plan, "--baseline", base}).exit_code == 0);

  std::string text = read_text(plan);
  text.replace(text.find("micro-batch = 1"), 15, "micro-batch = 4");
  write(plan, text);
  const auto r = run_parplan({"check", "--plan", plan, "--baseline", base});
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "memory_regression: peak memory"));
  CHECK(has(r.out, "activations on stage 0 grew most"));
  const auto j = json_of(run_parplan({"check", "--plan", plan, "--baseline", base, "--json"}));
  CHECK(j["plans"][0]["memory_moved"]["term"] == "activations");
  CHECK(j["plans"][0]["memory_moved"]["stage"] == 0);
  // A generous threshold accepts the change.
  CHECK(run_parplan({"check", "--plan", plan, "--baseline", base, "--max-memory-regression", "100%"}).exit_code == 0);
  // A plan without an entry passes and says so.
  const auto fresh = run_parplan({"check", "--plan", kSmall, "--baseline", base});
  CHECK(fresh.exit_code == 0);
  CHECK(has(fresh.out, "no baseline entry yet"));
  // Bad baseline inputs exit 2.
  CHECK(run_parplan({"check", "--plan", plan, "--baseline", d.file("missing.json")}).exit_code == 2);
  CHECK(run_parplan({"check", "--plan", plan, "--update-baseline"}).exit_code == 2);
  write(d.file("bad.json"), "{\"parplan_check_baseline\": 1, \"plans\": {\"x\": {}}}");
  const auto bad = run_parplan({"check", "--plan", plan, "--baseline", d.file("bad.json")});
  CHECK(bad.exit_code == 2);
  CHECK(has(bad.err, d.file("bad.json") + ": /plans/x/"));
}

TEST_CASE("check: --require-baseline fails a plan with no entry, naming it; without it the plan passes") {
  TempDir d("require");
  const std::string base = d.file("baseline.json");
  REQUIRE(run_parplan({"check", "--plan", kDp, "--baseline", base, "--update-baseline"}).exit_code == 0);
  const auto loose = run_parplan({"check", "--plan", kDp, "--plan", kSmall, "--baseline", base});
  CHECK(loose.exit_code == 0);
  CHECK(has(loose.out, "no baseline entry yet"));
  const auto r = run_parplan({"check", "--plan", kDp, "--plan", kSmall, "--baseline", base, "--require-baseline"});
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "PASS " + kDp));
  CHECK(has(r.out, "FAIL " + kSmall));
  CHECK(has(r.out, "  baseline: no entry 'content:"));
  const auto j = json_of(run_parplan({"check", "--plan", kSmall, "--baseline", base, "--require-baseline", "--json"}));
  CHECK(j["plans"][0]["gates"].back()["gate"] == "baseline");
  CHECK(j["plans"][0]["pass"] == false);
  // From a config file too; and it needs a baseline to compare with.
  write(d.file("ci.toml"), "plan = [\"" + kSmall + "\"]\nbaseline = \"baseline.json\"\nrequire-baseline = true\n");
  CHECK(run_parplan({"check", "--config", d.file("ci.toml")}).exit_code == 1);
  const auto none = run_parplan({"check", "--plan", kSmall, "--require-baseline"});
  CHECK(none.exit_code == 2);
  CHECK(has(none.err, "--require-baseline: needs --baseline FILE"));
}

TEST_CASE("check: baseline entries are keyed by name or content, not by the path the plan was found under") {
  TempDir d("keys");
  fs::create_directories(d.path / "a");
  fs::create_directories(d.path / "b");
  const std::string base = d.file("baseline.json");
  // Unnamed: the key is the content hash; comments and spacing do not change it, the path does not matter.
  fs::copy_file(kSmall, d.file("a/llama.toml"));
  write(d.file("b/copy.toml"), "# moved\n" + read_text(kSmall));
  REQUIRE(run_parplan({"check", "--plan", d.file("a/llama.toml"), "--baseline", base, "--update-baseline"}).exit_code == 0);
  const auto keys = nlohmann::json::parse(read_text(base))["plans"];
  REQUIRE(keys.size() == 1);
  const std::string key = keys.begin().key();
  CHECK(key.rfind("content:", 0) == 0);
  const auto moved = run_parplan({"check", "--plan", d.file("b/copy.toml"), "--baseline", base, "--require-baseline"});
  CHECK_MESSAGE(moved.exit_code == 0, moved.out);
  CHECK_FALSE(has(moved.out, "no baseline entry"));
  // A JSON plan document: named by its "name".
  const auto est = run_parplan({"estimate", "--model", "llama2-7b", "--cluster", "dgx-h100", "--gpus", "16", "--tp",
                                "2", "--pp", "2", "--global-batch", "256", "-o", d.file("a/p.json")});
  REQUIRE(est.exit_code == 0);
  auto doc = nlohmann::json::parse(read_text(d.file("a/p.json")));
  doc["name"] = "llama-json";
  write(d.file("a/p.json"), doc.dump(1));
  write(d.file("b/p.json"), doc.dump());
  REQUIRE(run_parplan({"check", "--plan", d.file("a/p.json"), "--baseline", base, "--update-baseline"}).exit_code == 0);
  CHECK(nlohmann::json::parse(read_text(base))["plans"].contains("llama-json"));
  CHECK(run_parplan({"check", "--plan", d.file("b/p.json"), "--baseline", base, "--require-baseline"}).exit_code == 0);
  // The name goes through estimate --plan -o.
  REQUIRE(run_parplan({"estimate", "--plan", d.file("a/p.json"), "-o", d.file("a/q.json")}).exit_code == 0);
  CHECK(nlohmann::json::parse(read_text(d.file("a/q.json")))["name"] == "llama-json");
}

TEST_CASE("check: a baseline keyed by plan path (written before names) is read, and rewritten under the new key") {
  TempDir d("migrate");
  const std::string plan = d.file("llama.toml"), base = d.file("baseline.json");
  fs::copy_file(kSmall, plan);
  REQUIRE(run_parplan({"check", "--plan", plan, "--baseline", base, "--update-baseline"}).exit_code == 0);
  auto doc = nlohmann::json::parse(read_text(base));
  const std::string key = doc["plans"].begin().key();
  // The old form: the entry under the path as typed, and no tokens_per_step.
  nlohmann::json entry = doc["plans"][key];
  entry.erase("tokens_per_step");
  doc["plans"] = {{plan, entry}};
  write(base, doc.dump(2));
  const auto r = run_parplan({"check", "--plan", plan, "--baseline", base, "--require-baseline"});
  CHECK_MESSAGE(r.exit_code == 0, r.out);
  CHECK(has(r.out, "vs baseline: memory +0.0%"));
  REQUIRE(run_parplan({"check", "--plan", plan, "--baseline", base, "--update-baseline"}).exit_code == 0);
  const auto plans = nlohmann::json::parse(read_text(base))["plans"];
  CHECK(plans.size() == 1);
  CHECK(plans.contains(key));
  CHECK(plans[key].contains("tokens_per_step"));
}

TEST_CASE("check: the time gate compares time per token, so a larger batch is no regression") {
  TempDir d("per_token");
  const std::string plan = d.file("llama.toml"), base = d.file("baseline.json");
  const std::string text = "name = \"llama\"\n" + read_text(kSmall);
  write(plan, text);
  REQUIRE(run_parplan({"check", "--plan", plan, "--baseline", base, "--update-baseline"}).exit_code == 0);
  std::string doubled = text;
  doubled.replace(doubled.find("global-batch = 256"), 18, "global-batch = 512");
  write(plan, doubled);
  const auto r = run_parplan({"check", "--plan", plan, "--baseline", base, "--max-memory-regression", "100%"});
  CHECK_MESSAGE(r.exit_code == 0, r.out);
  CHECK(has(r.out, "time per token"));
  const auto j = json_of(run_parplan({"check", "--plan", plan, "--baseline", base, "--json"}));
  const auto& gates = j["plans"][0]["gates"];
  const auto time_gate = std::find_if(gates.begin(), gates.end(), [](const auto& g) { return g["gate"] == "time_regression"; });
  REQUIRE(time_gate != gates.end());
  CHECK(std::fabs((*time_gate)["value"].get<double>()) < 0.05);
  CHECK(has((*time_gate)["message"].get<std::string>(), "for 2097152 tokens vs"));
  // A longer step at the same tokens per step is still a regression: a slower GPU.
  std::string slower = text;
  slower.replace(slower.find("cluster = \"dgx-h100\""), 20, "cluster = \"dgx-a100\"");
  write(plan, slower);
  const auto s = run_parplan({"check", "--plan", plan, "--baseline", base, "--max-memory-regression", "100%"});
  CHECK(s.exit_code == 1);
  CHECK(has(s.out, "time_regression: time per token"));
}

TEST_CASE("check: --junit writes well-formed XML with one test case per plan and the numbers in failures") {
  TempDir d("junit");
  // A plan path with XML metacharacters must be escaped in attributes.
  const std::string odd = d.file("a&b<c>\"q\".toml");
  fs::copy_file(kSmall, odd);
  const auto r = run_parplan({"check", "--plan", odd, "--plan", kBig, "--junit", d.file("report.xml")});
  CHECK(r.exit_code == 1);
  const std::string xml = read_text(d.file("report.xml"));
  std::unique_ptr<XmlElement> root;
  try {
    root = XmlParser(xml).parse();
  } catch (const std::exception& e) {
    FAIL("JUnit XML is not well-formed: " << e.what() << "\n" << xml);
  }
  CHECK(root->name == "testsuites");
  CHECK(root->attrs["tests"] == "2");
  CHECK(root->attrs["failures"] == "1");
  const auto suites = root->all("testsuite");
  REQUIRE(suites.size() == 1);
  const auto cases = suites[0]->all("testcase");
  REQUIRE(cases.size() == 2);
  CHECK(cases[0]->attrs.at("name") == odd);
  CHECK(cases[0]->all("failure").empty());
  const auto failures = cases[1]->all("failure");
  REQUIRE(failures.size() == 1);
  CHECK(cases[1]->attrs.at("name") == kBig);
  CHECK(failures[0]->attrs.at("type") == "memory");
  CHECK(has(failures[0]->attrs.at("message"), "GiB over the limit"));
  CHECK(has(failures[0]->text, "on stage 0"));
  // --junit - : the XML is all of stdout (it parses as one document); the text report goes to stderr.
  const auto out = run_parplan({"check", "--plan", odd, "--plan", kBig, "--junit", "-"});
  CHECK(out.exit_code == 1);
  CHECK(XmlParser(out.out).parse()->attrs["tests"] == "2");
  CHECK(has(out.err, "1 passed, 1 failed"));
  // likewise the baseline written to stdout: one JSON document
  const auto base = run_parplan({"check", "--plan", odd, "--baseline", "-", "--update-baseline"});
  CHECK(base.exit_code == 0);
  CHECK(nlohmann::json::parse(base.out).contains("parplan_check_baseline"));
  CHECK(has(base.err, "baseline written to -"));
}

TEST_CASE("check: GitHub Actions annotations are escaped and the Markdown summary is appended") {
  TempDir d("gha");
  const std::string odd = d.file("x,y:z%.toml");
  fs::copy_file(kSmall, odd);
  write(d.file("summary.md"), "previous step\n");
  const auto r = run_parplan({"check", "--plan", odd, "--plan", kBig, "--memory", "30GiB"},
                             {"GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + d.file("summary.md")});
  CHECK(r.exit_code == 1);
  std::vector<std::string> annotations;
  size_t pos = 0;
  while ((pos = r.out.find("::error ", pos)) != std::string::npos) {
    annotations.push_back(r.out.substr(pos, r.out.find('\n', pos) - pos));
    ++pos;
  }
  REQUIRE(annotations.size() == 2);
  const std::string& a = annotations[0];
  const std::string props = a.substr(8, a.find("::", 8) - 8);
  const std::string msg = a.substr(a.find("::", 8) + 2);
  CHECK(has(props, "file=" + d.path.string() + "/x%2Cy%3Az%25.toml,"));
  CHECK(has(props, "title=parplan check%3A memory"));
  CHECK(props.find_first_of(":\r") == std::string::npos);
  CHECK(props.find(',') == props.find(",title="));  // the only raw ',' separates the properties
  CHECK(msg.find_first_of("\r") == std::string::npos);
  CHECK(has(msg, "%0A"));    // the message's line break
  CHECK(has(msg, "%25"));    // percentages
  CHECK(has(workflow_unescape(msg), "\n"));
  CHECK(has(workflow_unescape(msg), odd + ": peak "));
  const std::string md = read_text(d.file("summary.md"));
  CHECK(md.rfind("previous step\n", 0) == 0);
  CHECK(has(md, "## parplan check: 2 of 2 plans failed"));
  CHECK(has(md, "| Plan |"));
  CHECK(has(md, "❌"));
  // Without GITHUB_ACTIONS there are no workflow commands.
  CHECK_FALSE(has(run_parplan({"check", "--plan", kBig}, {"GITHUB_ACTIONS=false"}).out, "::error"));
}

TEST_CASE("check: bad input is one line naming the path, exit 2, and no output file") {
  TempDir d("bad");
  const std::string junit = d.file("report.xml"), base = d.file("base.json");
  struct Case {
    std::string plan, needle;
  };
  const std::vector<Case> cases = {
      {kData + "malformed.json", kData + "malformed.json: malformed JSON"},
      {kData + "unknown_key.toml", kData + "unknown_key.toml:3: unknown key 'tensor-parallel'"},
      {d.file("missing.json"), d.file("missing.json")},
  };
  for (const Case& c : cases) {
    CAPTURE(c.plan);
    // The good plan first: nothing may be written for it either.
    const auto r = run_parplan(
        {"check", "--plan", kSmall, "--plan", c.plan, "--junit", junit, "--baseline", base, "--update-baseline"});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(parplan::test::line_count(r.err) == 1);
    CHECK(has(r.err, c.needle));
    CHECK_FALSE(fs::exists(junit));
    CHECK_FALSE(fs::exists(base));
  }
  // Plan names: not empty, not shared by two plans (they would share one baseline entry).
  write(d.file("noname.toml"), "name = \"\"\n" + read_text(kSmall));
  const auto noname = run_parplan({"check", "--plan", d.file("noname.toml")});
  CHECK(noname.exit_code == 2);
  CHECK(has(noname.err, d.file("noname.toml") + ":1: key 'name' must not be empty"));
  write(d.file("one.toml"), "name = \"x\"\n" + read_text(kSmall));
  write(d.file("two.toml"), "name = \"x\"\n" + read_text(kDp));
  const auto twice = run_parplan({"check", "--plan", d.file("one.toml"), "--plan", d.file("two.toml")});
  CHECK(twice.exit_code == 2);
  CHECK(parplan::test::line_count(twice.err) == 1);
  CHECK(has(twice.err, "are both named 'x'"));
  write(d.file("section.toml"), "model = \"llama2-7b\"\ngpus = 8\n[mesh]\ntp = 2\n");
  const auto sec = run_parplan({"check", "--plan", d.file("section.toml")});
  CHECK(sec.exit_code == 2);
  CHECK(has(sec.err, d.file("section.toml") + ":3: section [mesh] (sections are not supported"));
  // An empty section header was accepted (no key inside it to report), in plans and in --config.
  write(d.file("empty_section.toml"), "model = \"llama2-7b\"\ngpus = 8\n[mesh]\n");
  const auto empty = run_parplan({"check", "--plan", d.file("empty_section.toml")});
  CHECK(empty.exit_code == 2);
  CHECK(has(empty.err, d.file("empty_section.toml") + ":3: section [mesh]"));
  write(d.file("empty_section_cfg.toml"), "plan = [\"empty_section.toml\"]\n[gates]\n");
  const auto empty_cfg = run_parplan({"check", "--config", d.file("empty_section_cfg.toml")});
  CHECK(empty_cfg.exit_code == 2);
  CHECK(has(empty_cfg.err, d.file("empty_section_cfg.toml") + ":2: section [gates]"));
  // [default] (which the TOML reader folds into the top level) and a bare [] are sections too.
  for (const char* header : {"[DEFAULT]", "[default]", "[]"}) {
    write(d.file("default.toml"), std::string(header) + "\nmodel = \"llama2-7b\"\ngpus = 8\n");
    const auto r = run_parplan({"check", "--plan", d.file("default.toml")});
    CHECK(r.exit_code == 2);
    CHECK(has(r.err, d.file("default.toml") + ":1: section " + header));
  }
  // Values of the wrong TOML kind: the reader stripped quotes and read any word, so tp = "2" read as 2.
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {"tp = \"2\"", "key 'tp' takes a decimal integer, not \"2\""},
      {"tp = 2.5", "key 'tp' takes a decimal integer, not 2.5"},
      {"tp = true", "key 'tp' takes a decimal integer, not true"},
      {"\"tp\" = \"2\"", "key 'tp' takes a decimal integer, not \"2\""},  // a quoted key names the same option
      {"'tp' = 2.5", "key 'tp' takes a decimal integer, not 2.5"},
      {"tp = 010", "key 'tp' takes a decimal integer, not 010"},  // CLI11 would read 8
      {"tp = 0x2", "key 'tp' takes a decimal integer, not 0x2"},
      {"tp =", "key 'tp' takes a decimal integer, not nothing"},
      {"bucket-mb = \"40\"", "key 'bucket-mb' takes a number, not \"40\""},
      {"sequence-parallel = 1", "key 'sequence-parallel' takes true or false, not 1"},
      {"sequence-parallel = \"true\"", "key 'sequence-parallel' takes true or false, not \"true\""},
      {"recompute = full", "key 'recompute' takes a quoted string, not full"},
      {"recompute = [\"full\"]", "key 'recompute' takes a quoted string, not [\"full\"]"},
      {"profile = x.json", "key 'profile' takes a quoted string or an array of them, not x.json"},
  };
  for (const auto& [line, needle] : kinds) {
    CAPTURE(line);
    write(d.file("kind.toml"), "model = \"llama2-7b\"\ngpus = 8\n" + line + "\n");
    const auto r = run_parplan({"check", "--plan", d.file("kind.toml")});
    CHECK(r.exit_code == 2);
    CHECK(parplan::test::line_count(r.err) == 1);
    CHECK(has(r.err, d.file("kind.toml") + ":3: " + needle));
  }
  // The right kinds still read, comments after a value included; a number is a value for a text option.
  write(d.file("kinds_ok.toml"), "model = \"llama2-7b\"  # 7B\ngpus = 8\ntp = 2 # two\nbucket-mb = 25.5\n"
                                 "sequence-parallel = true\n");
  CHECK(run_parplan({"check", "--plan", d.file("kinds_ok.toml")}).exit_code == 0);
  write(d.file("quoted_ok.toml"), "model = \"llama2-7b\"\ngpus = 8\n\"tp\" = 2\n");  // read as tp = 2: it fits
  CHECK(run_parplan({"check", "--plan", d.file("quoted_ok.toml")}).exit_code == 0);
  write(d.file("cfg_ok.toml"), "plan = [\"kinds_ok.toml\"]\nmax-bubble = 0.2\nmin-mfu = \"1%\"\n");
  CHECK(run_parplan({"check", "--config", d.file("cfg_ok.toml")}).exit_code == 0);
  write(d.file("twice.toml"), "model = \"llama2-7b\"\ngpus = 8\ngpus = 16\n");
  CHECK(has(run_parplan({"check", "--plan", d.file("twice.toml")}).err, "twice.toml:3: key 'gpus' is given more than once (first on line 2)"));
  write(d.file("badcfg.toml"), "plan = [\"a.toml\"]\nmax-bubbles = 0.2\n");
  const auto cfg = run_parplan({"check", "--config", d.file("badcfg.toml")});
  CHECK(cfg.exit_code == 2);
  CHECK(has(cfg.err, d.file("badcfg.toml") + ":2: unknown key 'max-bubbles'"));
  for (const auto& flags : std::vector<std::vector<std::string>>{{"--headroom", "150%"},
                                                                {"--max-bubble", "abc"},
                                                                {"--min-mfu", "2"},
                                                                {"--memory", "lots"},
                                                                {"--max-step-time", "-1s"}}) {
    const auto r = run_parplan({"check", "--plan", kSmall, flags[0], flags[1]});
    CHECK(r.exit_code == 2);
    CHECK(has(r.err, flags[0]));
  }
  CHECK(run_parplan({"check"}).exit_code == 2);
}
