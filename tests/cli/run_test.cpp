// CLI tests of `parplan run`: host backend end to end, rank-local mode, JSON, trace, and exit 3 without a GPU.
#include <algorithm>
#include <doctest/doctest.h>

#include <cstdio>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_helper.hpp"

using parplan::test::read_text;
using parplan::test::run_parplan;
using parplan::test::ScratchDir;

namespace {

// A 4-layer model and its dp 2 x tp 2 x pp 2 plan, written with `estimate -o` into the test case's scratch
// directory (its own per process: test runs of two checkouts at once do not share files).
std::string make_plan(const ScratchDir& dir) {
  const std::string model = (dir.path / "model.json").string();
  const std::string plan = (dir.path / "plan.json").string();
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
  const ScratchDir dir;
  const std::string plan = make_plan(dir);
  const std::string trace = (dir.path / "trace.json").string();
  auto r = run_parplan({"run", "--plan", plan, "--backend", "host", "--steps", "2", "--warmup", "1", "--trace", trace});
  CHECK(r.exit_code == 0);
  // Predicted with this host's profile, calibrated first with the plan's 8 ranks as threads.
  CHECK(r.out.find("predicted with GPU profile host-measured (from calibrating this host: 8 rank threads on ") !=
        std::string::npos);
  // Progress on stderr, one line per step, warm-up included.
  CHECK(r.err.find("parplan run: step 1/3 (warm-up) ") != std::string::npos);
  CHECK(r.err.find("parplan run: step 2/3 ") != std::string::npos);
  CHECK(r.err.find("parplan run: step 3/3 ") != std::string::npos);
  CHECK(r.err.find("step 4/") == std::string::npos);
  for (const char* term : {"step", "compute", "bubble", "tp comm", "pp comm", "dp comm", "optimizer", "tensors stage 0", "tensors stage 1"}) {
    CHECK(r.out.find(term) != std::string::npos);
  }
  CHECK(r.out.find("+0.0%") != std::string::npos);  // tensor bytes equal the memory model's
  const auto j = nlohmann::json::parse(read_text(trace));
  CHECK(j["traceEvents"].size() > 100);
  std::remove(trace.c_str());
}

TEST_CASE("run --backend host executes an HSDP plan (dp 4 as 2 replicas of 2, ZeRO-1): tensors equal the model's") {
  const ScratchDir dir;
  const std::string model = (dir.path / "model.json").string();
  const std::string plan = (dir.path / "plan.json").string();
  std::ofstream(model) << R"({"kind":"model","name":"tiny","layers":4,"hidden":64,"heads":4,"ffn_hidden":256,)"
                          R"("vocab":128,"seq_len":32})";
  REQUIRE(run_parplan({"estimate", "--model", model, "--gpus", "4", "--zero", "1", "--dp-replicate", "2",
                       "--global-batch", "4", "-o", plan})
              .exit_code == 0);
  auto r = run_parplan({"run", "--plan", plan, "--backend", "host", "--steps", "2", "--warmup", "1", "--json"});
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  bool dp = false, tensors = false;
  for (const auto& t : j["terms"]) {
    const std::string term = t["term"];
    if (term == "dp comm (total)") {  // the shard group's reduce-scatter and parameter gather, the replica all-reduce
      dp = true;
      CHECK(t["predicted"].get<double>() > 0);
      CHECK(t["measured"].get<double>() > 0);
    }
    if (term.rfind("tensors stage 0", 0) == 0) {
      tensors = true;
      CHECK(t["measured"].get<double>() == t["predicted"].get<double>());
    }
  }
  CHECK(dp);
  CHECK(tensors);
}

TEST_CASE("run --backend host executes a MoE plan (8 experts, top-2, ep 4): ep comm row, a2a events in both traces") {
  const ScratchDir dir;
  const std::string model = (dir.path / "model.json").string(), plan = (dir.path / "plan.json").string();
  const std::string trace = (dir.path / "trace.json").string(), sim = (dir.path / "sim.json").string();
  std::ofstream(model) << R"({"kind":"model","name":"tiny-moe","layers":4,"hidden":64,"heads":4,"kv_heads":4,)"
                          R"("ffn_hidden":128,"ffn_type":"swiglu","vocab":128,"seq_len":32,"norm":"rmsnorm",)"
                          R"("position":"rotary","experts":8,"top_k":2,"causal":true,"source":"test"})";
  REQUIRE(run_parplan({"estimate", "--model", model, "--gpus", "4", "--dp", "4", "--ep", "4", "--global-batch", "8",
                       "-o", plan}).exit_code == 0);
  auto r = run_parplan({"run", "--plan", plan, "--backend", "host", "--steps", "2", "--warmup", "1", "--trace", trace});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("parplan run: tiny-moe on host backend, 4 ranks") != std::string::npos);
  CHECK(r.out.find("\nep comm ") != std::string::npos);
  CHECK(r.out.find("+0.0%") != std::string::npos);  // tensor bytes (expert states included) equal the memory model's
  REQUIRE(run_parplan({"simulate", "--plan", plan, "--trace", sim}).exit_code == 0);
  for (const std::string& file : {trace, sim}) {
    CAPTURE(file);
    int a2a = 0;
    const auto j = nlohmann::json::parse(read_text(file));
    for (const auto& ev : j["traceEvents"]) {
      if (ev.value("cat", "") == "ep_comm") ++a2a;
    }
    // measured: dispatch + combine, forward and backward, 4 layers x 2 microbatches; simulated: one per pass
    CHECK(a2a == (file == trace ? 4 * 4 * 2 : 2 * 2));
  }
  // The same plan with the all-to-all overlap (pp 1, 2 microbatches): predicted partly hidden, executed blocking, said.
  const std::string overlapped = (dir.path / "overlap.json").string();
  REQUIRE(run_parplan({"estimate", "--model", model, "--gpus", "4", "--dp", "4", "--ep", "4", "--global-batch", "8",
                       "--overlap-ep", "-o", overlapped}).exit_code == 0);
  const auto o = run_parplan({"run", "--plan", overlapped, "--backend", "host", "--steps", "1", "--warmup", "0",
                              "--json"});
  REQUIRE(o.exit_code == 0);
  CHECK(nlohmann::json::parse(o.out)["note"].get<std::string>().starts_with(
      "EP all-to-all overlap: the prediction hides part of each all-to-all behind another microbatch's compute"));
  for (const std::string& f : {model, plan, trace, sim, overlapped}) std::remove(f.c_str());
}

TEST_CASE("run --rank R --json marks communication as not measured") {
  const ScratchDir dir;
  const std::string plan = make_plan(dir);
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
  const ScratchDir dir;
  const std::string plan = make_plan(dir);
  auto r = run_parplan({"run", "--plan", plan, "--backend", "cuda", "--rank", "0"});
  if (r.exit_code == 0) return;  // a machine with a GPU
  CHECK(r.exit_code == 3);
  CHECK(parplan::test::line_count(r.err) == 1);
  CHECK(r.err.starts_with("parplan: backend error: no usable GPU: "));
  // Not the CUDA runtime's "driver version is insufficient", which is what it says where there is no driver at all.
  CHECK(r.err.find("driver version is insufficient") == std::string::npos);
  // A machine without a driver (no libcuda to load, as on CPU-only CI) is told so, when the CUDA backend is built.
  void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (libcuda) {
    dlclose(libcuda);
  } else if (r.err.find("cudaGetDeviceCount") != std::string::npos) {
    CHECK(r.err.find("this machine has no NVIDIA driver") != std::string::npos);
  }
}

TEST_CASE("--version names the CUDA backend plugin run would load; PARPLAN_CUDA_PLUGIN chooses it, and a wrong one "
          "is named in run's error (exit 3)") {
  const auto v = run_parplan({"--version"});
  CHECK(v.exit_code == 0);
  CHECK(v.out.find("parplan 0.1.0") != std::string::npos);
  CHECK(v.out.find("CUDA backend: ") != std::string::npos);
  const std::string missing = "/nonexistent/libparplan_cuda.so";
  const auto vm = run_parplan({"--version"}, {"PARPLAN_CUDA_PLUGIN=" + missing});
  CHECK(vm.exit_code == 0);
  CHECK(vm.out.find("CUDA backend: none: ") != std::string::npos);
  const ScratchDir dir;
  const std::string plan = make_plan(dir);
  const auto r = run_parplan({"run", "--plan", plan, "--backend", "cuda"}, {"PARPLAN_CUDA_PLUGIN=" + missing});
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("no usable GPU") != std::string::npos);
#ifdef PARPLAN_HAVE_CUDA
  CHECK(vm.out.find("PARPLAN_CUDA_PLUGIN=" + missing + " is not a file") != std::string::npos);
  CHECK(r.err.find(missing) != std::string::npos);
  // A file that is not a parplan backend (the plan itself) is named too, with dlopen's reason.
  const auto bad = run_parplan({"run", "--plan", plan, "--backend", "cuda"}, {"PARPLAN_CUDA_PLUGIN=" + plan});
  CHECK(bad.exit_code == 3);
  CHECK(bad.err.find("cannot load the CUDA backend " + plan) != std::string::npos);
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
  // A relative path is taken from the working directory (dlopen alone would search the library path for it).
  const std::filesystem::path rel = std::filesystem::relative(std::filesystem::path(plan));
  const auto vr = run_parplan({"--version"}, {"PARPLAN_CUDA_PLUGIN=" + rel.string()});
  CHECK(vr.out.find("CUDA backend: " + std::filesystem::absolute(rel).lexically_normal().string()) != std::string::npos);
#endif
}

TEST_CASE("run uses a measured GPU profile given with --profile or --gpu, and says which profile it predicted with") {
  const ScratchDir dir;
  const std::string plan = make_plan(dir);
  auto pj = nlohmann::json::parse(read_text(plan));
  const std::string plan_gpu = pj["gpu"]["name"];
  // What calibrate --out writes: the plan's GPU under another name, here half the memory bandwidth (slower
  // memory-bound ops, so a larger predicted compute time).
  nlohmann::json g = pj["gpu"];
  g["kind"] = "gpu";
  g["name"] = plan_gpu + "-measured-test";
  g["hbm_bandwidth_GBps"] = g["hbm_bandwidth_GBps"].get<double>() / 2;
  const std::string measured = (dir.path / "measured-gpu.json").string();
  std::ofstream(measured) << g.dump();
  auto compute = [](const std::string& out) {
    const auto j = nlohmann::json::parse(out);
    for (const auto& t : j["terms"]) {
      if (t["term"] == "compute") return t["predicted"].get<double>();
    }
    return -1.0;
  };
  const std::vector<std::string> base{"run", "--plan", plan, "--backend", "host", "--rank", "0", "--steps", "1", "--warmup", "0"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_parplan(args);
  };

  // No profile chosen: the host backend predicts with this host, calibrated first (one rank thread: rank-local).
  auto r0 = with({"--json"});
  REQUIRE(r0.exit_code == 0);
  const auto j0 = nlohmann::json::parse(r0.out);
  CHECK(j0["gpu_profile"]["name"] == "host-measured");
  CHECK(j0["gpu_profile"]["from"].get<std::string>().starts_with("calibrating this host: 1 rank thread on "));
  CHECK(r0.err.starts_with("parplan run: step 1/1 "));  // the progress line, alone
  CHECK(parplan::test::line_count(r0.err) == 1);

  auto r1 = with({"--profile", measured, "--json"});  // one user GPU profile: used, and announced on stderr
  REQUIRE(r1.exit_code == 0);
  const auto j1 = nlohmann::json::parse(r1.out);
  CHECK(j1["gpu_profile"]["name"] == g["name"]);
  CHECK(j1["gpu_profile"]["from"] == "--profile " + measured);
  CHECK(r1.err.find("predicting with GPU profile '" + g["name"].get<std::string>() + "'") != std::string::npos);

  auto r2 = with({"--profile", measured, "--gpu", plan_gpu, "--json"});  // --gpu wins: back to the plan's GPU
  REQUIRE(r2.exit_code == 0);
  CHECK(nlohmann::json::parse(r2.out)["gpu_profile"]["from"] == "--gpu");
  CHECK(compute(r1.out) > compute(r2.out));
  CHECK(compute(r0.out) > compute(r2.out));  // this CPU is slower than the plan's datasheet GPU
  CHECK(r2.err.find("predicting with") == std::string::npos);

  auto r3 = with({"--gpu", measured, "--json"});  // --gpu FILE
  REQUIRE(r3.exit_code == 0);
  CHECK(nlohmann::json::parse(r3.out)["gpu_profile"]["name"] == g["name"]);
  CHECK(compute(r3.out) == doctest::Approx(compute(r1.out)));

  auto r4 = with({"--profile", measured});  // the table's header names the profile
  REQUIRE(r4.exit_code == 0);
  CHECK(r4.out.find("predicted with GPU profile " + g["name"].get<std::string>()) != std::string::npos);
  std::remove(measured.c_str());
}

TEST_CASE("run says 1 step, not 1 steps") {
  const ScratchDir dir;
  const std::string plan = make_plan(dir);
  const auto r = run_parplan({"run", "--plan", plan, "--backend", "host", "--steps", "1", "--warmup", "0"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("8 ranks; median of 1 step after 0 warm-up") != std::string::npos);
}

TEST_CASE("run --backend host executes recompute_layers and selective-op plans: tensors equal the model's, one "
          "recompute event per rerun layer") {
  const ScratchDir dir;
  const std::string model = (dir.path / "model.json").string(), trace = (dir.path / "trace.json").string();
  std::ofstream(model) << R"({"kind":"model","name":"tiny-llama","layers":4,"hidden":64,"heads":4,"kv_heads":2,)"
                          R"("ffn_hidden":128,"ffn_type":"swiglu","vocab":128,"seq_len":32,"norm":"rmsnorm",)"
                          R"("position":"rotary","experts":1,"top_k":1,"causal":true,"source":"test"})";
  // Recompute flags -> recompute events in the trace of one step (dp 2, one microbatch, 4 layers on the one stage):
  // the first K = 1 layer, every layer (full, as before), every layer's per-op rerun (selective-op).
  const std::vector<std::pair<std::vector<std::string>, int>> cases = {
      {{"--recompute", "full", "--recompute-layers", "1"}, 1},
      {{"--recompute", "full"}, 4},
      {{"--recompute", "selective-op"}, 4}};
  for (const auto& [flags, events] : cases) {
    CAPTURE(flags[1]);
    const std::string plan = (dir.path / "plan.json").string();
    std::vector<std::string> args = {"estimate", "--model", model, "--gpus", "2", "--dp", "2", "--global-batch", "2",
                                     "-o", plan};
    args.insert(args.end(), flags.begin(), flags.end());
    REQUIRE(run_parplan(args).exit_code == 0);
    const auto r = run_parplan({"run", "--plan", plan, "--backend", "host", "--steps", "1", "--warmup", "0", "--trace", trace});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("+0.0%") != std::string::npos);  // tensor bytes equal the memory model's
    int recompute = 0;
    const auto j = nlohmann::json::parse(read_text(trace));
    for (const auto& ev : j["traceEvents"]) recompute += ev.value("cat", "") == "recompute";
    CHECK(recompute == events);
  }
}

// A ZB-2p plan with Zero Bubble's optimizer post-validation is predicted as a continuous run's step, while run times
// one iteration (with its warm-up fill) per step: the report says so, as simulate does, and only for that plan.
TEST_CASE("run says that a post-validation plan's prediction is a continuous run's step, not the measured iteration") {
  const ScratchDir dir;
  const std::string model = (dir.path / "model.json").string();
  std::ofstream(model) << R"({"kind":"model","name":"tiny-llama","layers":4,"hidden":64,"heads":4,"kv_heads":2,)"
                          R"("ffn_hidden":128,"ffn_type":"swiglu","vocab":128,"seq_len":32,"norm":"rmsnorm",)"
                          R"("position":"rotary","experts":1,"top_k":1,"causal":true,"source":"test"})";
  const std::string note = "post-validation: each measured step runs one iteration with its warm-up forwards";
  for (const bool pv : {true, false}) {
    CAPTURE(pv);
    const std::string plan = (dir.path / "plan.json").string();
    std::vector<std::string> args = {"estimate", "--model", model, "--gpus", "2", "--pp", "2", "--global-batch", "8",
                                     "--microbatches", "8", "--schedule", "zb-2p", "-o", plan};
    if (pv) args.push_back("--post-validation");
    REQUIRE(run_parplan(args).exit_code == 0);
    const std::vector<std::string> run = {"run", "--plan", plan, "--backend", "host", "--steps", "1", "--warmup", "0"};
    const auto r = run_parplan(run);
    REQUIRE(r.exit_code == 0);
    CHECK((r.out.find(note) != std::string::npos) == pv);
    std::vector<std::string> json = run;
    json.push_back("--json");
    const auto j = run_parplan(json);
    REQUIRE(j.exit_code == 0);
    const auto doc = nlohmann::json::parse(j.out);
    CHECK(doc.contains("note") == pv);
    if (pv) CHECK(doc["note"].get<std::string>().starts_with(note));
  }
}
