// CLI tests for sliding-window attention: the profiles that use it (profiles show, estimate, suggest), the
// --sliding-window flags, and the interop refusals and warnings.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/run_helper.hpp"

using parplan::test::run_parplan;
using parplan::test::ScratchDir;

namespace {
// `estimate --model mistral-7b` on 8 H100s at 16384 tokens with `extra` flags, as JSON.
nlohmann::json estimate_mistral(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"estimate", "--model", "mistral-7b", "--gpus", "8", "--gpu", "h100", "--cluster",
                                   "dgx-h100", "--tp", "8", "--seq", "16384", "--global-batch", "8", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_parplan(args, {}, 60);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}
}  // namespace

TEST_CASE("sliding window: profiles show writes the window fields of the new profiles") {
  for (const char* name : {"mistral-7b", "gpt-oss-120b", "gpt-oss-20b"}) {
    CAPTURE(name);
    const auto r = run_parplan({"profiles", "show", name});
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["sliding_window"].get<int>() > 0);
  }
  const auto list = run_parplan({"profiles", "list"});
  REQUIRE(list.exit_code == 0);
  CHECK(list.out.find("gpt-oss-120b") != std::string::npos);
  CHECK(list.out.find("mistral-7b") != std::string::npos);
}

TEST_CASE("sliding window: estimate mistral-7b at 16K tokens is faster with its window than with --sliding-window 0") {
  const auto windowed = estimate_mistral({}), full = estimate_mistral({"--sliding-window", "0"});
  CHECK(windowed["time"]["step_s"].get<double>() < full["time"]["step_s"].get<double>());
  CHECK(windowed["time"]["model_flops_per_step"].get<double>() < full["time"]["model_flops_per_step"].get<double>());
  // The plan document keeps the window; reading it back prices the same step.
  ScratchDir dir;
  const std::string plan = dir.file("plan.json");
  const auto a = run_parplan({"estimate", "--model", "gpt-oss-20b", "--gpus", "8", "--gpu", "h100", "--cluster",
                              "dgx-h100", "--pp", "2", "--ep", "4", "--distributed-optimizer", "--global-batch", "16",
                              "--json", "-o", plan},
                             {}, 60);
  REQUIRE(a.exit_code == 0);
  const auto b = run_parplan({"estimate", "--plan", plan, "--json"}, {}, 60);
  REQUIRE(b.exit_code == 0);
  CHECK(nlohmann::json::parse(a.out)["time"] == nlohmann::json::parse(b.out)["time"]);
  const auto text = run_parplan({"estimate", "--plan", plan}, {}, 60);
  CHECK(text.out.find("sliding-window attention: 128 tokens in 12 of 24 layers (12 full)") != std::string::npos);
}

TEST_CASE("sliding window: suggest --model gpt-oss-120b --gpus 64 lists plans, none with context parallelism") {
  const auto r = run_parplan({"suggest", "--model", "gpt-oss-120b", "--gpus", "64", "--json"}, {}, 300);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["plans"].size() > 0);
  for (const auto& p : j["plans"]) CHECK(p["parallel"]["cp"] == 1);
}

TEST_CASE("sliding window: Megatron's window arguments are refused; exports say the window is not written") {
  ScratchDir dir;
  const std::string script =
      dir.write("train.sh", "#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size "
                            "4096 --num-attention-heads 32 --seq-length 4096 --global-batch-size 128 --bf16 "
                            "--window-size 4095 0\n");
  const auto r = run_parplan({"import", script}, {}, 60);
  CAPTURE(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--window-size") != std::string::npos);
  CHECK(r.err.find("sliding-window attention is not read from Megatron arguments") != std::string::npos);
  const std::string plan = dir.file("plan.json");
  REQUIRE(run_parplan({"estimate", "--model", "mistral-7b", "--gpus", "8", "--tp", "8", "-o", plan}, {}, 60).exit_code == 0);
  for (const char* target : {"megatron", "torchtitan"}) {
    CAPTURE(target);
    const auto e = run_parplan({"export", "--plan", plan, "--to", target}, {}, 60);
    REQUIRE(e.exit_code == 0);
    CHECK(e.out.find("not expressible: sliding-window attention (sliding_window 4096, sliding_window_pattern 0)") !=
          std::string::npos);
  }
}
