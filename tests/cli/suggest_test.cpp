// CLI tests for `parplan suggest`: golden JSON for 175B on 64 GPUs, the A100-40GB explanation (exit 1), -o plan
// round trip through estimate, thread-count independence, bad input (exit 2, one line naming the flag).
// Regenerate the golden file: PARPLAN_UPDATE_GOLDEN=1 build/<dir>/tests/parplan_cli_tests -tc='suggest*'
#include <doctest/doctest.h>

#include <cmath>
#include <fmt/core.h>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/run_helper.hpp"

using parplan::test::run_parplan;

namespace {
// `suggest --params 175e9 --gpus 64 --json --top N` with `extra` flags, which must succeed.
nlohmann::json suggest_175b(const char* top, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"suggest", "--params", "175e9", "--gpus", "64", "--json", "--top", top};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_parplan(args);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return nlohmann::json::parse(r.out);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("parplan_suggest_test_" + std::to_string(getpid()) + "_" + name)).string();
}
}  // namespace

TEST_CASE("suggest --params 175e9 --gpus 64 --json matches the golden file") {
  const auto r = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--json"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["fits"] == true);
  CHECK(j["plans"].size() == 5);
  CHECK(j["global_batch"] == 2048);  // default: 4Mi tokens / 2048
  CHECK(j["plans"][0]["rank"] == 1);
  CHECK(j["plans"][0]["step_s"].get<double>() <= j["plans"][1]["step_s"].get<double>());
  parplan::test::check_golden("suggest_175b_64.json", r.out);
}

TEST_CASE("suggest: results do not depend on the thread count") {
  const auto a = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--json", "--explain", "--threads", "1"});
  const auto b = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--json", "--explain", "--threads", "2"});
  REQUIRE(a.exit_code == 0);
  CHECK(a.out == b.out);
}

TEST_CASE("suggest: steps equal to a part in a million tie and rank by memory, with a full top list too") {
  // With and without recompute this 70B ZeRO-3 plan's steps differ by ~1e-13 s (the exposed gathers trade for the
  // recompute): they tie, so the plan with less memory ranks first, also when the top list holds one plan and the
  // other is evaluated after it is full.
  const std::vector<std::string> args = {"suggest", "--params", "70e9", "--gpus", "64", "--zero", "3", "--gpu",
                                         "A100-SXM4-80GB", "--cluster", "dgx-a100", "--zero3-gather-unit", "linear",
                                         "--cp", "1", "--pp", "1", "--json", "--threads", "1"};
  auto with_top = [&args](const char* k) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--top", k});
    return a;
  };
  const auto three = run_parplan(with_top("3"));
  REQUIRE(three.exit_code == 0);
  const auto j3 = nlohmann::json::parse(three.out);
  const auto& p0 = j3["plans"][0];
  const auto& p1 = j3["plans"][1];
  const double s0 = p0["step_s"].get<double>(), s1 = p1["step_s"].get<double>();
  REQUIRE(std::abs(s0 - s1) < 1e-9 * s0);
  CHECK(p0["peak_memory_bytes"].get<double>() < p1["peak_memory_bytes"].get<double>());
  const auto one = run_parplan(with_top("1"));
  REQUIRE(one.exit_code == 0);
  CHECK(nlohmann::json::parse(one.out)["plans"][0]["peak_memory_bytes"] == p0["peak_memory_bytes"]);
}

TEST_CASE("suggest: 175B on 64 A100-40GB comes out as an optimizer-offload plan that fits (exit 0)") {
  // The classic ZeRO-Offload case: 16 bytes/param of model states do not fit 64 x 40 GB even fully sharded.
  const auto j = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--gpu", "a100-40gb", "--json"});
  REQUIRE(j.exit_code == 0);
  const auto doc = nlohmann::json::parse(j.out);
  REQUIRE(!doc["plans"].empty());
  for (const auto& p : doc["plans"]) {
    CHECK(p["parallel"]["offload"].get<std::string>().find("optimizer") == 0);
    CHECK(p["peak_memory_bytes"].get<double>() <= doc["memory_limit"]["limit_bytes"].get<double>());
  }
  CHECK(doc["offload_note"].get<std::string>().find("No plan fits with every state on the GPU") == 0);
  // The winner, estimated on its own: it fits and its optimizer term is the host tail.
  parplan::test::ScratchDir dir;
  const std::string plan = (dir.path / "offload.json").string();
  REQUIRE(run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--gpu", "a100-40gb", "-o", plan}).exit_code == 0);
  const auto e = run_parplan({"estimate", "--plan", plan, "--json"});
  REQUIRE(e.exit_code == 0);
  const auto est = nlohmann::json::parse(e.out);
  CHECK(est["memory"]["fits"] == true);
  CHECK(est["memory"]["host_bytes_per_gpu"].get<double>() > 0);
  const auto& off = est["time"]["offload"];
  CHECK(est["time"]["seconds"]["optimizer"].get<double>() ==
        doctest::Approx(off["gradient_to_host_s"].get<double>() + off["cpu_optimizer_s"].get<double>() +
                        off["params_to_gpu_s"].get<double>()));
  CHECK(est["time"]["step_s"].get<double>() == doctest::Approx(doc["plans"][0]["step_s"].get<double>()));
  const auto text = run_parplan({"estimate", "--plan", plan});
  CHECK(text.out.find("optimizer step on the host: gradients to host") != std::string::npos);
  CHECK(text.out.find("host memory: ") != std::string::npos);
}

TEST_CASE("suggest: 175B on 64 A100-40GB without offload exits 1 and says why and what it would need") {
  const auto r =
      run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--gpu", "a100-40gb", "--wide", "--offload", "none"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("NOTHING FITS") != std::string::npos);
  CHECK(r.out.find("16 bytes/param") != std::string::npos);
  CHECK(r.out.find("43.65 GB per GPU") != std::string::npos);
  CHECK(r.out.find("do not fit even fully sharded") != std::string::npos);
  CHECK(r.out.find("more GPUs") != std::string::npos);
  CHECK(r.out.find("a plan fits on") != std::string::npos);
  CHECK(r.out.find("A100-SXM4-80GB") != std::string::npos);
  CHECK(r.out.find("Closest:") != std::string::npos);
  CHECK(r.out.find("- offload to host memory: --offload optimizer") != std::string::npos);
  // With offload searched too and still nothing fitting (8 GPUs), the advice says it was tried.
  const auto small = run_parplan({"suggest", "--params", "175e9", "--gpus", "8", "--gpu", "a100-40gb", "--wide"});
  CHECK(small.exit_code == 1);
  CHECK(small.out.find("- offload to host memory: tried (optimizer, optimizer,params, activations, "
                       "optimizer,activations, optimizer,params,activations)") != std::string::npos);
  const auto j =
      run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--gpu", "a100-40gb", "--json", "--offload", "none"});
  CHECK(j.exit_code == 1);
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["fits"] == false);
  CHECK(doc["advice"]["model_states_fit_sharded"] == false);
  CHECK(doc["advice"]["min_gpus_for_model_states"].get<int64_t>() > 64);
  CHECK(doc["closest"]["rejected_for"][0] == "out_of_memory");
  CHECK(doc["advice"]["headline"] == "nothing_fits");
}

TEST_CASE("suggest: another GPU whose plan offloads on a cluster without a host-memory figure is not called a fit") {
  // Llama 3 405B on 16 H100s fits nowhere; on the 96 GB H100 and the MI300X it fits only by offloading 19-35 TiB per
  // node, which their cluster profiles cannot check (they give no host memory).
  const auto r = run_parplan({"suggest", "--model", "llama3-405b", "--gpus", "16", "--top", "1", "--wide"}, {}, 240);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("  - a GPU with more memory: H100-SXM5-96GB-HBM2e (grand-teton-h100) fits on 16 GPUs if its nodes "
                   "hold 18.96 TiB of host memory each (the cluster profile gives none, so it is not checked)") !=
        std::string::npos);
  const auto j = run_parplan({"suggest", "--model", "llama3-405b", "--gpus", "16", "--top", "1", "--json"}, {}, 240);
  bool unchecked = false;
  const nlohmann::json doc = nlohmann::json::parse(j.out);  // named: the loop reads into it
  for (const auto& g : doc["advice"]["other_gpus"]) {
    if (g.contains("host_bytes_per_node_unchecked")) unchecked = g["host_bytes_per_node_unchecked"].get<double>() > 1e13;
  }
  CHECK(unchecked);
}

TEST_CASE("suggest: V schedules only on an odd layer count point to a per-chunk layout, which estimate prices") {
  // DeepSeek-V3's 61 layers: zb-v / dualpipe-v need every stage's layers even, which no even split gives.
  const auto r = run_parplan({"suggest", "--model", "deepseek-v3", "--gpus", "512", "--schedule", "dualpipe-v", "--wide"},
                             {}, 120);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("NOTHING VALID") != std::string::npos);
  CHECK(r.out.find("  - a per-chunk layout: dualpipe-v places 2 chunks on every stage, and 61 layers split into none "
                   "evenly; price one with parplan estimate ... --schedule dualpipe-v --stage-layers a/b,c/d,...") !=
        std::string::npos);
  const auto e = run_parplan({"estimate", "--model", "deepseek-v3", "--gpus", "512", "--pp", "8", "--ep", "64",
                              "--schedule", "dualpipe-v", "--stage-layers", "4/4,4/4,4/4,4/4,4/4,4/4,4/4,4/1",
                              "--global-batch", "1024", "--json"},
                             {}, 120);
  CHECK(e.exit_code != 2);  // priced (1: it does not fit at this batch)
  CHECK(nlohmann::json::parse(e.out)["time"]["step_s"].get<double>() > 0);
  // With an even-layer model the advice is not given.
  const auto even = run_parplan({"suggest", "--params", "13e9", "--gpus", "24", "--pp", "3", "--vpp", "2"});
  CHECK(even.out.find("a per-chunk layout") == std::string::npos);
}

TEST_CASE("suggest: when every configuration breaks a rule, it says so, not that nothing fits in memory") {
  // pp 3 with vpp 2: 40 layers do not split into 3 x 2 equal chunks and 128 microbatches are not a multiple of 3.
  const auto r = run_parplan({"suggest", "--params", "13e9", "--gpus", "24", "--pp", "3", "--vpp", "2", "--explain"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("NOTHING FITS") == std::string::npos);
  CHECK(r.out.find("NOTHING VALID: every configuration of") != std::string::npos);
  CHECK(r.out.find("none reached the memory check") != std::string::npos);
  CHECK(r.out.find("Model states:") == std::string::npos);  // the memory floor says nothing about broken rules
  CHECK(r.out.find("fewer pinned knobs") != std::string::npos);
  const auto j = run_parplan({"suggest", "--params", "13e9", "--gpus", "24", "--pp", "3", "--vpp", "2", "--json"});
  CHECK(nlohmann::json::parse(j.out)["advice"]["headline"] == "nothing_valid");
  // The --explain line must not offer an uneven split that would still fail on the microbatch count.
  CHECK(r.out.find("vpp_invalid: ") != std::string::npos);
  CHECK(r.out.find("--last-stage-layers 12") == std::string::npos);
  // With 6 microbatches (divisible by pp 3) the split is offered, and it works.
  const auto e = run_parplan({"estimate", "--params", "13e9", "--gpus", "24", "--pp", "3", "--vpp", "2", "--dp", "8",
                              "--micro-batch", "2", "--global-batch", "96"});
  CHECK(e.exit_code == 2);
  CHECK(e.err.find("--last-stage-layers 12") != std::string::npos);
  const auto fixed = run_parplan({"estimate", "--params", "13e9", "--gpus", "24", "--pp", "3", "--vpp", "2", "--dp",
                                  "8", "--micro-batch", "2", "--global-batch", "96", "--last-stage-layers", "12"});
  CHECK(fixed.exit_code != 2);
  // vpp 1 with the interleaved schedule: no split helps, so none is offered.
  const auto v1 = run_parplan({"estimate", "--params", "13e9", "--gpus", "24", "--pp", "3", "--schedule", "interleaved",
                               "--vpp", "1", "--global-batch", "192"});
  CHECK(v1.exit_code == 2);
  CHECK(v1.err.find("--last-stage-layers") == std::string::npos);
}

TEST_CASE("suggest -o writes the winner's plan; estimate --plan reproduces its step time") {
  const std::string path = temp_path("plan.json");
  const auto r = run_parplan({"suggest", "--model", "gpt3-1.3b", "--gpus", "8", "--gpu", "a100-40gb", "--json", "-o", path});
  REQUIRE(r.exit_code == 0);
  const auto s = nlohmann::json::parse(r.out);
  const auto e = run_parplan({"estimate", "--plan", path, "--json"});
  REQUIRE(e.exit_code == 0);
  const auto est = nlohmann::json::parse(e.out);
  CHECK(est["time"]["step_s"].get<double>() == s["plans"][0]["step_s"].get<double>());
  CHECK(est["memory"]["peak_bytes"].get<double>() == s["plans"][0]["peak_memory_bytes"].get<double>());
  std::filesystem::remove(path);
}

TEST_CASE("suggest: text output, pins, explain and objectives") {
  auto r = run_parplan({"suggest", "--model", "gpt3-1.3b", "--gpus", "16", "--tp", "2", "--schedule", "1f1b", "--explain"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("fastest step that fits") != std::string::npos);
  CHECK(r.out.find("Best candidate rejected for each single reason") != std::string::npos);
  CHECK(r.out.find("x2x") != std::string::npos);
  r = run_parplan({"suggest", "--model", "gpt3-1.3b", "--gpus", "64", "--objective", "fewest-gpus",
                   "--min-tokens-per-s", "1000", "--json"});
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(r.out)["plans"][0]["num_gpus"] == 1);
  r = run_parplan({"suggest", "--model", "gpt3-1.3b", "--gpus", "8", "--objective", "headroom", "--top", "2", "--json"});
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["plans"][0]["headroom_bytes"].get<double>() >= j["plans"][1]["headroom_bytes"].get<double>());
}

TEST_CASE("suggest --explain: meshes with more stages than layers are listed, not estimated") {
  // 64 GPUs reach pp 32 and 64 for the 24 layers of GPT-3 1.3B: rejected for that reason alone, such a mesh has
  // stages without layers, which the cost model cannot price (timing one overran its per-stage scratch).
  const auto r = run_parplan({"suggest", "--model", "gpt3-1.3b", "--gpus", "64", "--explain", "--json"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto j = nlohmann::json::parse(r.out);
  bool found = false;
  for (const auto& rej : j["rejections"]) {
    if (rej["reason"] != "pp_exceeds_layers") continue;
    found = true;
    CHECK(rej["count"].get<int64_t>() > 0);
    REQUIRE(rej.contains("best"));
    CHECK(rej["best"]["parallel"]["pp"].get<int64_t>() > 24);
    CHECK_FALSE(rej["best"].contains("step_s"));
    CHECK_FALSE(rej["best"].contains("peak_memory_bytes"));
  }
  CHECK(found);
  const auto big = run_parplan({"suggest", "--model", "megatron-1t", "--gpus", "16384", "--explain"});
  CHECK_MESSAGE(big.exit_code == 0, big.err);
}

TEST_CASE("suggest: bad input exits 2 with one line naming the flag") {
  struct Case {
    std::vector<std::string> args;
    std::string flag;
  };
  const std::vector<Case> cases = {
      {{"suggest", "--params", "175e9", "--gpus", "64", "--objective", "cheapest"}, "--objective"},
      {{"suggest", "--params", "175e9", "--gpus", "64", "--global-batch", "8", "--tokens-per-step", "1000"}, "--global-batch"},
      {{"suggest", "--params", "175e9", "--gpus", "64", "--objective", "fewest-gpus"}, "--min-tokens-per-s"},
      {{"suggest", "--params", "175e9"}, "--gpus"},
      {{"suggest", "--params", "175e9", "--gpus", "64", "--schedule", "fast"}, "--schedule"},
      {{"suggest", "--params", "175e9", "--gpus", "64", "--sp", "--no-sp"}, "--sp"},
      {{"suggest", "--params", "175e9", "--gpus", "64", "--precision", "fp8", "--gpu", "a100-80gb"}, "--precision"},
      {{"suggest", "--params", "175e9", "--gpus", "64", "--no-fp8-param-gather"}, "--no-fp8-param-gather"},
      {{"suggest", "--params", "175e9", "--gpus", "64", "--precision", "fp8", "--fp8-param-gather",
        "--no-fp8-param-gather"}, "--fp8-param-gather"},
      {{"suggest", "--params", "175e9", "--gpus", "64", "--offload", "host"}, "--offload"},
      {{"suggest", "--params", "175e9", "--gpus", "64", "--offload", "params"}, "--offload"},
      {{"suggest", "--params", "175e9", "--gpus", "64", "--offload", "optimizer,params", "--zero", "1"}, "--offload"},
  };
  for (const auto& c : cases) {
    const auto r = run_parplan(c.args);
    CAPTURE(c.flag);
    CHECK(r.exit_code == 2);
    CHECK(parplan::test::line_count(r.err) == 1);
    CHECK(r.err.find(c.flag) != std::string::npos);
  }
}

TEST_CASE("suggest --simulate K re-ranks the top K by the simulator's step time") {
  const auto r = run_parplan({"suggest", "--model", "gpt3-1.3b", "--gpus", "8", "--global-batch", "64", "--simulate", "3",
                              "--top", "3", "--json"});
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["plans"].size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    REQUIRE(j["plans"][i].contains("simulated_step_s"));
    CHECK(j["plans"][i]["simulated_step_s"].get<double>() > 0);
    if (i > 0) CHECK(j["plans"][i - 1]["simulated_step_s"].get<double>() <= j["plans"][i]["simulated_step_s"].get<double>());
  }
  // The reasons follow the order that was used: the simulated step, with the analytical one beside it.
  CHECK(j["plans"][0]["reason"] == "fastest simulated step that fits");
  CHECK(j["plans"][1]["reason"].get<std::string>().find("simulated step (") != std::string::npos);
  const auto t = run_parplan({"suggest", "--model", "gpt3-1.3b", "--gpus", "8", "--global-batch", "64", "--simulate",
                              "3", "--top", "3"});
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.find("simulated") != std::string::npos);
  CHECK(t.out.find("fastest simulated step that fits") != std::string::npos);
  // Other objectives do not rank by step time: --simulate with them is a usage error.
  const auto h = run_parplan({"suggest", "--model", "gpt3-1.3b", "--gpus", "8", "--simulate", "3", "--objective",
                              "headroom"});
  CHECK(h.exit_code == 2);
  CHECK(h.err.find("--simulate") != std::string::npos);
  CHECK(j["simulated_plans"] == 3);
  CHECK(j["simulated_over_budget"] == 0);
}

TEST_CASE("suggest --simulate shares a task budget: plans past it are not simulated and keep the analytical order") {
  // pp 8, one sequence per microbatch, 600,000 microbatches: each step graph has 19.2 M tasks (8 stages x 600,000 x
  // a forward and a backward with their sends), past the 2^24 budget on its own (a large batch made 100 simulations
  // run for minutes). None is simulated; the search result stands.
  const auto r = run_parplan({"suggest", "--model", "gpt3-1.3b", "--gpus", "8", "--pp", "8", "--micro-batch", "1",
                              "--global-batch", "600000", "--simulate", "3", "--json"});
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["simulated_top"] == 3);
  CHECK(j["simulated_plans"] == 0);
  CHECK(j["simulated_over_budget"] == 3);
  for (const auto& p : j["plans"]) CHECK_FALSE(p.contains("simulated_step_s"));
  CHECK(j["plans"][0]["reason"] == "fastest step that fits");
  const auto t = run_parplan({"suggest", "--model", "gpt3-1.3b", "--gpus", "8", "--pp", "8", "--micro-batch", "1",
                              "--global-batch", "600000", "--simulate", "3"});
  CHECK(t.out.find("3 of them not simulated") != std::string::npos);
}

TEST_CASE("suggest --overlap-p2p: interleaved plans overlap their sends, the others wait for them") {
  auto plans = [](std::vector<std::string> extra) {
    // --headroom 0: the interleaved plans that lead leave 0.8-3.9 GiB free, under the default 5%.
    std::vector<std::string> args = {"suggest", "--params", "175e9", "--gpus", "64", "--json", "--top", "10",
                                     "--headroom", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_parplan(args);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out)["plans"];
  };
  const auto waited = plans({}), overlapped = plans({"--overlap-p2p"});
  int interleaved = 0;
  for (const auto& p : overlapped) {
    const bool il = p["parallel"]["schedule"] == "interleaved";
    interleaved += il ? 1 : 0;
    CHECK(p["parallel"]["overlap_p2p_comm"].get<bool>() == il);
  }
  CHECK(interleaved > 0);
  for (const auto& p : waited) CHECK_FALSE(p["parallel"]["overlap_p2p_comm"].get<bool>());
  // With overlapped sends the interleaved plans lose their per-microbatch transfers and lead.
  CHECK(overlapped[0]["parallel"]["schedule"] == "interleaved");
  CHECK(overlapped[0]["step_s"].get<double>() < waited[0]["step_s"].get<double>());
}

TEST_CASE("suggest: --no-distributed-optimizer pins it off; with --zero 0 no plan shards the optimizer") {
  auto plans = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"suggest", "--model", "llama3-70b", "--gpus", "64", "--zero", "0", "--json",
                                     "--top", "10"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_parplan(args);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out)["plans"];
  };
  int dist = 0;
  for (const auto& p : plans({})) dist += p["parallel"]["distributed_optimizer"].get<bool>() ? 1 : 0;
  CHECK(dist > 0);  // --zero 0 alone still tries the distributed optimizer (a knob of its own)
  const auto off = plans({"--no-distributed-optimizer"});
  REQUIRE(!off.empty());
  for (const auto& p : off) {
    CHECK(p["parallel"]["zero_stage"] == 0);
    CHECK(p["parallel"]["distributed_optimizer"] == false);
  }
  const auto both = run_parplan({"suggest", "--model", "llama3-70b", "--gpus", "64", "--distributed-optimizer",
                                 "--no-distributed-optimizer"});
  CHECK(both.exit_code == 2);
  CHECK(both.err.find("--no-distributed-optimizer") != std::string::npos);
}

TEST_CASE("suggest: plans within the family's out-of-sample error of the first are marked as ties") {
  // A100-80GB 16-bit: the shipped table's median (validation/accuracy.json) is a few percent, so near plans tie and
  // far ones do not.
  const auto r = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--cluster", "dgx-a100", "--top", "20",
                              "--json"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j.at("accuracy").is_object());
  const double median = j.at("accuracy").at("median_abs_error").get<double>();
  const auto& plans = j.at("plans");
  REQUIRE(plans.size() >= 2);
  const double best = plans[0].at("step_s").get<double>();
  CHECK_FALSE(plans[0].at("tie_with_first").get<bool>());
  int ties = 0, apart = 0;
  for (size_t i = 1; i < plans.size(); ++i) {
    const double step = plans[i].at("step_s").get<double>();
    const bool tie = plans[i].at("tie_with_first").get<bool>();
    CHECK(tie == (step - best < median * best));
    (tie ? ties : apart) += 1;
  }
  CHECK(ties > 0);
  // The text says it beside the reason, and prints the family's sentence.
  const auto t = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--cluster", "dgx-a100"});
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.find("= #1 within model error") != std::string::npos);
  CHECK(t.out.find("Out of sample: A100-SXM4-80GB 16-bit plans are predicted within") != std::string::npos);
  MESSAGE("ties ", ties, ", apart ", apart);
}

TEST_CASE("suggest --headroom and --memory keep only plans that leave that much memory free") {
  auto run = [](const std::vector<std::string>& extra) { return suggest_175b("10", extra); };
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  // --headroom 0: the search as it was, plans to within a GiB of the GPU's 79.65 GiB.
  const auto none = run({"--headroom", "0"});
  const double capacity = none["memory_limit"]["capacity_bytes"].get<double>();
  CHECK(none["memory_limit"]["limit_bytes"].get<double>() == capacity);
  double least_free = capacity;
  for (const auto& p : none["plans"]) least_free = std::min(least_free, p["headroom_bytes"].get<double>());
  CHECK(least_free < 0.05 * capacity);
  // A fraction of the budget, or bytes: every plan leaves at least that much.
  for (const auto& [flag, keep] : std::vector<std::pair<std::string, double>>{{"10%", 0.1 * capacity}, {"12GiB", 12 * kGiB}}) {
    CAPTURE(flag);
    const auto j = run({"--headroom", flag});
    CHECK(j["memory_limit"]["headroom_bytes"].get<double>() == doctest::Approx(keep));
    REQUIRE_FALSE(j["plans"].empty());
    for (const auto& p : j["plans"]) CHECK(p["headroom_bytes"].get<double>() >= keep);
  }
  // The default keeps 5%: the same plans as --headroom 5%.
  const auto dflt = run({});
  CHECK(dflt["plans"] == run({"--headroom", "5%"})["plans"]);
  CHECK(dflt["memory_limit"]["headroom_bytes"].get<double>() == doctest::Approx(0.05 * capacity));
  // --memory: a budget below the GPU's memory, the headroom a fraction of it.
  const auto budget = run({"--memory", "70GiB", "--headroom", "0"});
  CHECK(budget["memory_limit"]["limit_bytes"].get<double>() == 70 * kGiB);
  for (const auto& p : budget["plans"]) CHECK(p["peak_memory_bytes"].get<double>() <= 70 * kGiB);
  // A budget above the GPU's memory is capped at it, and the text says so.
  CHECK(run({"--memory", "100GiB"})["memory_limit"]["budget_bytes"].get<double>() == capacity);
  CHECK(run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--memory", "100GiB", "--wide"})
            .out.find("(--memory 100.00 GiB is more than the GPU has: the capacity is the budget)") != std::string::npos);
  // The text says what the limit is.
  const auto t = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--headroom", "10%"});
  CHECK(t.out.find("Memory limit 71.68 GiB per GPU = capacity 79.65 GiB - 7.96 GiB headroom (10%)") != std::string::npos);
}

TEST_CASE("suggest: when nothing fits under the headroom, the closest miss is measured against the limit") {
  // 175B on 64 A100-80GB fits with 2.4 GiB free; keeping 60 GiB free, nothing does.
  const auto r = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--cluster", "dgx-a100", "--headroom",
                              "60GiB", "--json", "--offload", "none"});
  CHECK(r.exit_code == 1);
  const auto j = nlohmann::json::parse(r.out);
  const double limit = j["memory_limit"]["limit_bytes"].get<double>();
  CHECK(j["advice"]["limit_bytes"].get<double>() == limit);
  CHECK(j["closest"]["peak_memory_bytes"].get<double>() > limit);
  CHECK(j["closest"]["peak_memory_bytes"].get<double>() < j["memory_limit"]["capacity_bytes"].get<double>());
}

TEST_CASE("suggest --schedule and --recompute take a set: the search tries those values only") {
  auto plans = [](const std::vector<std::string>& extra) { return suggest_175b("30", extra)["plans"]; };
  const auto both = plans({"--schedule", "1f1b,interleaved", "--recompute", "none,selective"});
  std::set<std::string> schedules, recomputes;
  for (const auto& p : both) {
    schedules.insert(p["parallel"]["schedule"].get<std::string>());
    recomputes.insert(p["parallel"]["recompute"].get<std::string>());
  }
  CHECK(schedules == std::set<std::string>{"1f1b", "interleaved"});
  CHECK(recomputes == std::set<std::string>{"none", "selective"});
  // The set's best is the better of the two single pins' bests.
  const double one = plans({"--schedule", "1f1b", "--recompute", "none,selective"})[0]["step_s"].get<double>();
  const double il = plans({"--schedule", "interleaved", "--recompute", "none,selective"})[0]["step_s"].get<double>();
  CHECK(both[0]["step_s"].get<double>() == std::min(one, il));
  // A value given twice is searched once.
  CHECK(plans({"--schedule", "1f1b,1f1b"}) == plans({"--schedule", "1f1b"}));
  // --vpp pins the interleaved plans' chunks; the other schedules in the set are searched beside them.
  for (const auto& p : plans({"--schedule", "zb-h1,interleaved", "--vpp", "2"})) {
    if (p["parallel"]["schedule"] == "interleaved") CHECK(p["parallel"]["vpp"] == 2);
  }
}

// 175B on 64 H100s under a 60 GiB budget: full recompute of every layer was the fastest that fit; the search now
// recomputes only the first K layers of each chunk (the smallest K that fits), shown in the table, the JSON and the
// plan -o writes (estimate --plan says so and reproduces the step); --recompute-layers 0 pins every layer.
TEST_CASE("suggest searches full recompute of the first K layers of each chunk, shows K, and pins it") {
  const std::vector<std::string> tight = {"--memory", "60GiB", "--offload", "none"};
  const std::string path = temp_path("rl_plan.json");
  std::vector<std::string> with_out = tight;
  with_out.insert(with_out.end(), {"-o", path});
  const auto searched = suggest_175b("5", with_out);
  const auto& best = searched["plans"][0];
  REQUIRE(best["parallel"]["recompute"] == "full");
  REQUIRE(best["parallel"].contains("recompute_layers"));
  const int64_t k = best["parallel"]["recompute_layers"].get<int64_t>();
  CHECK(k > 0);
  const auto e = run_parplan({"estimate", "--plan", path});
  REQUIRE(e.exit_code == 0);
  CHECK(e.out.find(fmt::format("full (first {} layers of each chunk)", k)) != std::string::npos);
  std::filesystem::remove(path);

  std::vector<std::string> args = {"suggest", "--params", "175e9", "--gpus", "64", "--top", "5", "--wide"};
  args.insert(args.end(), tight.begin(), tight.end());
  const auto text = run_parplan(args);
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find(fmt::format("rc-full-first{} ", k)) != std::string::npos);
  CHECK(text.out.find("rc-full-firstK: full recompute of the first K layers of each model chunk") != std::string::npos);

  std::vector<std::string> every = tight;
  every.insert(every.end(), {"--recompute-layers", "0"});
  const auto all = suggest_175b("5", every);
  for (const auto& p : all["plans"]) CHECK_FALSE(p["parallel"].contains("recompute_layers"));
  CHECK(all["plans"][0]["step_s"].get<double>() > best["step_s"].get<double>());
  std::vector<std::string> pinned = tight;
  pinned.insert(pinned.end(), {"--recompute-layers", std::to_string(k)});
  const auto pk = suggest_175b("5", pinned);
  CHECK(pk["plans"][0] == best);
  for (const auto& p : pk["plans"]) {
    if (p["parallel"]["recompute"] == "full") CHECK(p["parallel"]["recompute_layers"] == k);
  }
}

namespace {
// The widest line of `text`.
size_t widest_line(const std::string& text) {
  size_t widest = 0, at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    widest = std::max(widest, end - at);
    at = end + 1;
  }
  return widest;
}
}  // namespace

TEST_CASE("suggest's text fits 120 columns; --wide keeps each reason in its row") {
  const std::vector<std::vector<std::string>> runs = {
      {"--params", "175e9", "--gpus", "64"},
      {"--params", "175e9", "--gpus", "64", "--explain"},
      {"--params", "175e9", "--gpus", "64", "--gpu", "a100-40gb"},  // nothing fits: the advice
      {"--model", "llama3-405b", "--gpus", "16384"},
      {"--model", "mixtral-8x7b", "--gpus", "64"},
      {"--model", "gpt3-1.3b", "--gpus", "64", "--objective", "fewest-gpus", "--min-tokens-per-s", "1000"},
      // knobs too long for one line beside a simulated column: they wrap in their column
      {"--model", "llama3-405b", "--gpus", "2048", "--schedule", "interleaved", "--overlap-p2p", "--recompute",
       "selective", "--distributed-optimizer", "--sp", "--simulate", "2", "--top", "3", "--headroom", "0"},
  };
  for (const auto& extra : runs) {
    std::vector<std::string> args = {"suggest"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_parplan(args);
    CAPTURE(r.out);
    REQUIRE(r.exit_code <= 1);
    CHECK(widest_line(r.out) <= 120);
  }
  const auto narrow = run_parplan({"suggest", "--params", "175e9", "--gpus", "64"});
  CHECK(narrow.out.find("\n1  1x4x16x1  ") != std::string::npos);
  CHECK(narrow.out.find("\n   fastest step that fits\n") != std::string::npos);  // the reason under its row
  const auto wide = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--wide"});
  CHECK(widest_line(wide.out) > 120);
  const size_t row = wide.out.find("\n1  1x4x16x1  ");
  REQUIRE(row != std::string::npos);
  const std::string first = wide.out.substr(row + 1, wide.out.find('\n', row + 1) - row - 1);
  CHECK(first.ends_with("fastest step that fits"));
  // The knobs that did not fit their column continue under it.
  std::vector<std::string> last = {"suggest"};
  last.insert(last.end(), runs.back().begin(), runs.back().end());
  const auto knobs = run_parplan(last);
  CHECK(knobs.out.find("\n             p2p-overlap last2L rc-selective sp\n") != std::string::npos);
}

TEST_CASE("suggest and estimate say what tokens/s adds up and what MFU is measured against") {
  const auto s = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--wide"});
  CHECK(s.out.find("mesh: dp x tp x pp x cp; tokens/s: all 64 GPUs (#1: 387 per GPU); MFU: of the bf16 dense peak "
                   "(989 TFLOP/s per GPU)\n") != std::string::npos);
  const auto fp8 = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--precision", "fp8", "--wide"});
  CHECK(fp8.out.find("MFU: of the fp8 dense peak (1979 TFLOP/s per GPU)") != std::string::npos);
  const auto e = run_parplan({"estimate", "--params", "175e9", "--gpus", "64", "--tp", "8", "--pp", "8", "--sp",
                              "--recompute", "selective"});
  CHECK(e.out.find("| 22289 tokens/s (348 per GPU)  | MFU 37.9%, HFU 38.2% of the bf16 dense peak (989 TFLOP/s per "
                   "GPU)\n") != std::string::npos);
  CHECK(widest_line(e.out) <= 120);
  CHECK(widest_line(run_parplan({"estimate", "--params", "175e9", "--gpus", "64", "--tp", "8", "--pp", "8", "--sp",
                                 "--recompute", "selective", "--wide"}).out) > 120);
}

TEST_CASE("counts of one are singular, and a --seq beside --params is the seq the plan uses") {
  const auto one = run_parplan({"suggest", "--model", "gpt3-1.3b", "--gpus", "64", "--objective", "fewest-gpus",
                                "--min-tokens-per-s", "1000"});
  CHECK(one.out.find("1 GPU: 1x1x1x1") != std::string::npos);
  CHECK(one.out.find("1 GPUs") == std::string::npos);
  const auto mb = run_parplan({"estimate", "--model", "gpt3-1.3b", "--gpus", "8", "--global-batch", "8"});
  CHECK(mb.out.find("micro-batch 1 x 1 microbatch = global batch 8") != std::string::npos);
  const auto seq = run_parplan({"suggest", "--params", "50e6", "--seq", "256", "--gpus", "1", "--wide"});
  CHECK(seq.out.find("vocab 51200, seq 256 (--seq) (0.04841B parameters") != std::string::npos);
  CHECK(seq.out.find("seq 2048") == std::string::npos);
  CHECK(seq.out.find("Global batch 16384 x seq 256 = 4.194M tokens/step (the default for 1 GPU, 4 Mi tokens)") !=
        std::string::npos);
  const auto profile = run_parplan({"estimate", "--model", "gpt3-1.3b", "--seq", "1024", "--gpus", "8", "--wide"});
  CHECK(profile.out.find("; seq 1024 (--seq; the profile's is 2048)") != std::string::npos);
}

TEST_CASE("suggest: activation offload is searched when nothing fits, and can be pinned; estimate shows its terms") {
  // --offload auto adds the activation sets: on 175B / 64 A100-40GB the winner offloads activations too (micro-batch
  // 8 without recompute: its stored layers live on the host, the copies hide behind the layers' compute).
  const auto a = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--gpu", "a100-40gb", "--json"});
  REQUIRE(a.exit_code == 0);
  const auto doc = nlohmann::json::parse(a.out);
  REQUIRE(!doc["plans"].empty());
  CHECK(doc["plans"][0]["parallel"]["offload"].get<std::string>().find("activations") != std::string::npos);
  // Pinned: every plan has exactly that set.
  const auto p = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--gpu", "a100-40gb", "--json",
                              "--offload", "optimizer,activations"});
  REQUIRE(p.exit_code == 0);
  const auto pinned = nlohmann::json::parse(p.out);
  REQUIRE(!pinned["plans"].empty());
  for (const auto& plan : pinned["plans"]) CHECK(plan["parallel"]["offload"] == "optimizer,activations");
  const auto text = run_parplan({"suggest", "--params", "175e9", "--gpus", "64", "--gpu", "a100-40gb", "--offload",
                                 "optimizer,activations", "--top", "1"});
  CHECK(text.out.find(" off-opt off-act") != std::string::npos);

  // estimate: the exposed copies are a term of the step, the host line says how much is activations.
  const auto e = run_parplan({"estimate", "--params", "7e9", "--gpus", "8", "--gpu", "a100-40gb", "--zero", "3",
                                "--offload", "activations"});
  REQUIRE(e.exit_code == 0);
  CHECK(e.out.find("host copies (exposed)") != std::string::npos);
  CHECK(e.out.find("activations to the host and back: ") != std::string::npos);
  CHECK(e.out.find("of it activations; the GPU keeps 2 layers'") != std::string::npos);
  const auto j = run_parplan({"estimate", "--params", "7e9", "--gpus", "8", "--gpu", "a100-40gb", "--zero", "3",
                                "--offload", "activations", "--json"});
  REQUIRE(j.exit_code == 0);
  const auto est = nlohmann::json::parse(j.out);
  CHECK(est["plan"]["parallel"]["offload"] == "activations");
  // docs/cost-model.md's worked example: 8.92 ms copies against a 4.82 ms forward, 34 layers x 256 microbatches.
  CHECK(est["time"]["seconds"]["offload_exposed"].get<double>() == doctest::Approx(35.721).epsilon(1e-4));
  CHECK(est["stages"][0]["offloaded_activation_bytes"].get<double>() == doctest::Approx(34 * 285474816.0));
}

TEST_CASE("suggest --precision fp8: candidates that shard the optimizer or weights hold the weights in fp8") {
  // fp8 weights (--fp8-param-gather) take 2 bytes against Transformer Engine's 16-bit weights with two cached fp8
  // copies (4), and move 1 byte per gathered parameter: where a candidate can gather them, they dominate.
  const std::vector<std::string> base = {"suggest", "--model", "llama3-8b", "--gpus", "8", "--precision", "fp8",
                                         "--top", "50", "--json"};
  const auto r = run_parplan(base);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  int held = 0;
  for (const auto& p : doc["plans"]) {
    const auto& pc = p["parallel"];
    const bool sharded = pc["zero_stage"].get<int>() >= 1 || pc["distributed_optimizer"].get<bool>();
    CHECK(p["fp8_param_gather"].get<bool>() == sharded);
    held += sharded ? 1 : 0;
  }
  CHECK(held > 0);
  CHECK(run_parplan({"suggest", "--model", "llama3-8b", "--gpus", "8", "--precision", "fp8", "--top", "1"})
            .out.find(" fp8-gather ") != std::string::npos);

  // Pinned off: none holds them, and #1 needs at least as much memory and time as the default's #1.
  std::vector<std::string> off = base;
  off.push_back("--no-fp8-param-gather");
  const auto o = nlohmann::json::parse(run_parplan(off).out);
  for (const auto& p : o["plans"]) CHECK_FALSE(p["fp8_param_gather"].get<bool>());
  CHECK(o["plans"][0]["step_s"].get<double>() >= doc["plans"][0]["step_s"].get<double>());

  // #1 written with -o estimates to the same step, fp8 weights included.
  parplan::test::ScratchDir dir;
  const std::string path = (dir.path / "fp8_gather_plan.json").string();
  REQUIRE(run_parplan({"suggest", "--model", "llama3-8b", "--gpus", "8", "--precision", "fp8", "-o", path}).exit_code == 0);
  const auto est = nlohmann::json::parse(run_parplan({"estimate", "--plan", path, "--json"}).out);
  CHECK(est["plan"]["training"]["fp8_param_gather"] == true);
  CHECK(est["time"]["step_s"].get<double>() == doctest::Approx(doc["plans"][0]["step_s"].get<double>()));
}

TEST_CASE("suggest --no-async-tp --tp-collective-copies --fp8-tp-gather: TP as torchtitan runs it, where a plan has TP") {
  // torchtitan's DTensor TP: blocking backward collectives on every tp > 1 candidate; the copies around each collective
  // and, in fp8 (tensorwise), the fp8 all-gathers on those with sequence parallelism; tp 1 candidates stay valid.
  const std::vector<std::string> base = {"suggest", "--model", "llama3-8b", "--gpus", "16", "--precision", "fp8",
                                         "--top", "200", "--json"};
  std::vector<std::string> titan = base;
  for (const char* f : {"--no-async-tp", "--tp-collective-copies", "--fp8-tp-gather"}) titan.push_back(f);
  const auto r = run_parplan(titan);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  int tp_sp = 0, tp1 = 0;
  for (const auto& p : doc["plans"]) {
    const auto& pc = p["parallel"];
    const bool tp = pc["tp"].get<int>() > 1, sp = pc["sequence_parallel"].get<bool>();
    CHECK(pc["async_tp_backward"].get<bool>() == !tp);
    CHECK(pc["tp_collective_copies"].get<bool>() == (tp && sp));
    CHECK(p["fp8_tp_gather"].get<bool>() == (tp && sp));
    tp_sp += tp && sp ? 1 : 0;
    tp1 += tp ? 0 : 1;
  }
  CHECK(tp_sp > 0);
  CHECK(tp1 > 0);
  // Without the flags, none of them.
  const auto plain = nlohmann::json::parse(run_parplan(base).out);
  for (const auto& p : plain["plans"]) {
    CHECK(p["parallel"]["async_tp_backward"].get<bool>());
    CHECK_FALSE(p["parallel"]["tp_collective_copies"].get<bool>());
    CHECK_FALSE(p["fp8_tp_gather"].get<bool>());
  }
  // A TP plan written with -o estimates to the same step, the TP style included.
  parplan::test::ScratchDir dir;
  const std::string path = (dir.path / "titan_tp_plan.json").string();
  std::vector<std::string> one = {"suggest", "--model", "llama3-8b", "--gpus", "16", "--precision", "fp8", "--tp", "8",
                                  "--sp", "--no-async-tp", "--tp-collective-copies", "--fp8-tp-gather", "-o", path, "--json"};
  const auto w = run_parplan(one);
  REQUIRE(w.exit_code == 0);
  const auto est = nlohmann::json::parse(run_parplan({"estimate", "--plan", path, "--json"}).out);
  CHECK(est["plan"]["training"]["fp8_tp_gather"] == true);
  CHECK(est["plan"]["parallel"]["tp_collective_copies"] == true);
  CHECK(est["plan"]["parallel"]["async_tp_backward"] == false);
  CHECK(est["time"]["step_s"].get<double>() ==
        doctest::Approx(nlohmann::json::parse(w.out)["plans"][0]["step_s"].get<double>()));
  // Bad input: copies without sequence parallelism, fp8 gathers without fp8.
  CHECK(run_parplan({"suggest", "--model", "llama3-8b", "--gpus", "16", "--tp-collective-copies", "--no-sp"}).err.find(
            "--tp-collective-copies: the copies are around sequence-parallel collectives") != std::string::npos);
  const auto bad = run_parplan({"suggest", "--model", "llama3-8b", "--gpus", "16", "--fp8-tp-gather"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--fp8-tp-gather: fp8 TP all-gathers need --precision fp8") != std::string::npos);
}

TEST_CASE("suggest --moe-dispatcher deepep --overlap-ep: expert-parallel candidates exchange tokens as pinned") {
  // Every candidate with ep > 1 takes the dispatcher, and the 1F1B A2A overlap where its schedule pairs passes (pp 1,
  // interleaved, DualPipeV); ep 1 candidates have no all-to-all.
  const std::vector<std::string> base = {"suggest", "--model", "mixtral-8x7b", "--gpus", "64", "--top", "100", "--json"};
  for (const char* ep : {"1", "8"}) {
    CAPTURE(ep);
    std::vector<std::string> pinned = base;
    for (const char* f : {"--moe-dispatcher", "deepep", "--overlap-ep", "--ep"}) pinned.push_back(f);
    pinned.push_back(ep);
    const auto r = run_parplan(pinned);
    REQUIRE(r.exit_code == 0);
    const auto plans = nlohmann::json::parse(r.out)["plans"];
    CHECK_FALSE(plans.empty());
    int paired = 0, unpaired = 0;
    for (const auto& p : plans) {
      CHECK(p["parallel"]["moe_dispatcher"] == "deepep");
      const std::string s = p["parallel"]["schedule"];
      const bool pairs = s == "interleaved" || s == "dualpipe-v" || (p["parallel"]["pp"] == 1 && s == "1f1b");
      CHECK(p["parallel"]["overlap_ep_comm"].get<bool>() == (std::string(ep) == "8" && pairs));
      (pairs ? paired : unpaired) += 1;
    }
    CHECK(paired > 0);
    CHECK(unpaired > 0);
  }
  const auto defaults = nlohmann::json::parse(run_parplan(base).out);  // named: the loop reads into it
  CHECK_FALSE(defaults["plans"].empty());
  for (const auto& p : defaults["plans"]) {  // the defaults: alltoall, no overlap
    CHECK(p["parallel"]["moe_dispatcher"] == "alltoall");
    CHECK_FALSE(p["parallel"]["overlap_ep_comm"].get<bool>());
  }
  // The knobs column names them; the winner written with -o estimates to the same step.
  const auto text = run_parplan({"suggest", "--model", "mixtral-8x7b", "--gpus", "64", "--ep", "8", "--top", "1",
                                 "--moe-dispatcher", "deepep", "--overlap-ep"});
  CHECK(text.out.find("deepep a2a-overlap") != std::string::npos);
  parplan::test::ScratchDir dir;
  const std::string path = (dir.path / "moe_plan.json").string();
  const auto w = run_parplan({"suggest", "--model", "mixtral-8x7b", "--gpus", "64", "--ep", "8", "--moe-dispatcher",
                              "deepep", "--overlap-ep", "-o", path, "--json"});
  REQUIRE(w.exit_code == 0);
  const auto est = nlohmann::json::parse(run_parplan({"estimate", "--plan", path, "--json"}).out);
  CHECK(est["plan"]["parallel"]["moe_dispatcher"] == "deepep");
  CHECK(est["plan"]["parallel"]["overlap_ep_comm"] == true);
  // estimate's mesh line says how the expert tokens move.
  CHECK(run_parplan({"estimate", "--plan", path}).out.find(", DeepEP dispatch, A2A overlapped)") != std::string::npos);
  CHECK(est["time"]["step_s"].get<double>() ==
        doctest::Approx(nlohmann::json::parse(w.out)["plans"][0]["step_s"].get<double>()));
  const auto bad = run_parplan({"suggest", "--model", "mixtral-8x7b", "--gpus", "64", "--moe-dispatcher", "nccl"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--moe-dispatcher") != std::string::npos);
}

// --zero 0 pins ZeRO off but still searches the distributed optimizer, so with --dp-replicate 2 it searches the
// distributed-optimizer HSDP plans (the ones unpinned --zero 0 lists), not a usage error.
TEST_CASE("suggest: --zero 0 --dp-replicate 2 searches the distributed optimizer's HSDP plans") {
  const auto r = parplan::test::run_parplan(
      {"suggest", "--model", "llama3-8b", "--gpus", "256", "--zero", "0", "--dp-replicate", "2", "--top", "3",
       "--json"},
      {}, 120);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(!j["plans"].empty());
  for (const auto& p : j["plans"]) {
    CHECK(p["parallel"]["dp_replicate"] == 2);
    CHECK(p["parallel"]["distributed_optimizer"] == true);
    CHECK(p["parallel"]["zero_stage"] == 0);
  }
}

TEST_CASE("suggest --explain with DualPipeV candidates that have too few microbatches: no crash, the reason counted") {
  // Rejected for m < 2 pp, such a candidate has no order to time as if allowed (it used to abort the search).
  for (const char* threads : {"1", "2"}) {
    const auto r = parplan::test::run_parplan({"suggest", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8",
                                               "--schedule", "dualpipe-v", "--explain", "--threads", threads});
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("vpp_invalid") != std::string::npos);
  }
}
