// CLI tests of `parplan run`: host backend end to end, rank-local mode, JSON, trace, and exit 3 without a GPU.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_helper.hpp"

using parplan::test::read_text;
using parplan::test::run_parplan;

namespace {

// A 4-layer model and its dp 2 x tp 2 x pp 2 plan, written with `estimate -o`.
std::string make_plan(const std::string& tag) {
  const std::string model = "/tmp/parplan-run-test-" + tag + "-model.json";
  const std::string plan = "/tmp/parplan-run-test-" + tag + "-plan.json";
  std::ofstream(model) << R"({"kind":"model","name":"tiny","layers":4,"hidden":64,"heads":4,"kv_heads":4,"ffn_hidden":256,)"
                          R"("ffn_type":"gelu","vocab":128,"seq_len":32,"tied_embeddings":true,"bias":true,"dropout":true,)"
                          R"("norm":"layernorm","position":"learned","experts":1,"top_k":1,"causal":true,"source":"test"})";
  auto r = run_parplan({"estimate", "--model", model, "--gpus", "8", "--tp", "2", "--pp", "2", "--dp", "2",
                        "--global-batch", "8", "-o", plan});
  REQUIRE(r.exit_code == 0);
  return plan;
}

}  // namespace

TEST_CASE("run --backend host executes a 2x2x2 plan and reports predicted vs measured per term") {
  const std::string plan = make_plan("host");
  const std::string trace = "/tmp/parplan-run-test-trace.json";
  auto r = run_parplan({"run", "--plan", plan, "--backend", "host", "--steps", "2", "--warmup", "1", "--trace", trace});
  CHECK(r.exit_code == 0);
  for (const char* term : {"step", "compute", "bubble", "tp comm", "pp comm", "dp comm", "optimizer", "tensors stage 0", "tensors stage 1"}) {
    CHECK(r.out.find(term) != std::string::npos);
  }
  CHECK(r.out.find("+0.0%") != std::string::npos);  // tensor bytes equal the memory model's
  const auto j = nlohmann::json::parse(read_text(trace));
  CHECK(j["traceEvents"].size() > 100);
  std::remove(trace.c_str());
}

TEST_CASE("run --rank R --json marks communication as not measured") {
  const std::string plan = make_plan("local");
  auto r = run_parplan({"run", "--plan", plan, "--backend", "host", "--rank", "3", "--steps", "1", "--warmup", "0", "--json"});
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["rank_local"] == true);
  bool saw_comm = false;
  for (const auto& t : j["terms"]) {
    if (t["term"] == "tp comm") {
      saw_comm = true;
      CHECK(t["measured_valid"] == false);
    }
    if (t["term"] == "compute") CHECK(t["measured"].get<double>() > 0);
  }
  CHECK(saw_comm);
  CHECK(run_parplan({"run", "--plan", plan, "--backend", "host", "--rank", "8"}).exit_code == 2);
}

TEST_CASE("run --backend cuda without a usable GPU exits 3 with the call and the reason") {
  const std::string plan = make_plan("cuda");
  auto r = run_parplan({"run", "--plan", plan, "--backend", "cuda", "--rank", "0"});
  if (r.exit_code == 0) return;  // a machine with a GPU
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("no usable GPU") != std::string::npos);
}
