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
  CHECK(r.err.find("sliding-window attention is not read from the file; give --model a profile") != std::string::npos);
  const std::string plan = dir.file("plan.json");
  REQUIRE(run_parplan({"estimate", "--model", "mistral-7b", "--gpus", "8", "--tp", "8", "-o", plan}, {}, 60).exit_code == 0);
  for (const char* target : {"megatron", "torchtitan"}) {
    CAPTURE(target);
    const auto e = run_parplan({"export", "--plan", plan, "--to", target}, {}, 60);
    REQUIRE(e.exit_code == 0);
    CHECK(e.out.find("parplan: not written: sliding-window attention (sliding_window 4096): set the framework's "
                     "window option by hand") != std::string::npos);
    CHECK(e.err.find(std::string("warning: not written to the ") + target + " config: sliding-window attention") !=
          std::string::npos);
    CHECK(e.err.find("cannot express sliding-window") == std::string::npos);
  }
}

namespace {
// A NeMo config of a 32-layer dense model on 8 GPUs with `window` lines under model:.
std::string nemo_config(const std::string& window) {
  return "trainer:\n  devices: 8\n  num_nodes: 1\n  precision: bf16-mixed\nmodel:\n  micro_batch_size: 1\n"
         "  global_batch_size: 8\n  tensor_model_parallel_size: 8\n  encoder_seq_length: 16384\n  num_layers: 32\n"
         "  hidden_size: 4096\n  ffn_hidden_size: 14336\n  num_attention_heads: 32\n  num_query_groups: 8\n" +
         window;
}
}  // namespace

TEST_CASE("sliding window: NeMo's model.window_size is refused without a --model that has a window, never ignored") {
  ScratchDir dir;
  for (const char* window : {"  window_size: [4096, 0]\n", "  window_size:\n  - 4096\n  - 0\n",
                             "  window_size: [4096, 0]\n  window_attn_skip_freq: 2\n"}) {
    CAPTURE(window);
    const std::string file = dir.write("nemo.yaml", nemo_config(window));
    const auto r = run_parplan({"import", file}, {}, 60);
    CAPTURE(r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("model.window_size (line 1") != std::string::npos);
    CHECK(r.err.find("'[4096, 0]': sliding-window attention is not read from the file; give --model a profile with "
                     "sliding_window") != std::string::npos);
    // A model without a window would price the file's windowed layers as full attention: refused.
    const auto full = run_parplan({"import", file, "--model", "llama3-8b"}, {}, 60);
    CHECK(full.exit_code == 2);
    CHECK(full.err.find("states a sliding window, and --model llama3-8b has none") != std::string::npos);
    // A model with one prices it; the file's options are listed.
    const auto ok = run_parplan({"import", file, "--model", "mistral-7b"}, {}, 60);
    CAPTURE(ok.err);
    REQUIRE(ok.exit_code == 0);
    CHECK(ok.out.find("'[4096, 0]': the window is --model mistral-7b's (sliding_window 4096, sliding_window_pattern 0") !=
          std::string::npos);
    CHECK(ok.out.find("not modelled") == std::string::npos);
  }
  // -1 on the left is an unbounded window: no window, listed as such.
  const std::string none = dir.write("none.yaml", nemo_config("  window_size: [-1, -1]\n  window_attn_skip_freq: 2\n"));
  const auto r = run_parplan({"import", none}, {}, 60);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("model.window_size (line 15) '[-1, -1]': no window (-1 on the left is unbounded") != std::string::npos);
  CHECK(r.out.find("model.window_attn_skip_freq (line 16) '2': no window to skip") != std::string::npos);
}

TEST_CASE("sliding window: Megatron's --window-size is read with a --model that has a window; -1 is no window") {
  ScratchDir dir;
  const auto script = [&](const std::string& window) {
    return dir.write("train.sh", "#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 "
                                 "--hidden-size 4096 --num-attention-heads 32 --seq-length 16384 --global-batch-size 8 "
                                 "--tensor-model-parallel-size 8 --bf16 " + window + "\n");
  };
  const std::string windowed = script("--window-size 4095,0 --window-attn-skip-freq 2");
  const auto refused = run_parplan({"import", windowed}, {}, 60);
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("--window-size (line 2) '4095,0': sliding-window attention is not read from the file; give "
                         "--model") != std::string::npos);
  // The advice works: --model with a window reads the script, and prices the profile's window.
  const auto ok = run_parplan({"import", windowed, "--model", "gpt-oss-20b"}, {}, 60);
  CAPTURE(ok.err);
  REQUIRE(ok.exit_code == 0);
  CHECK(ok.out.find("--window-attn-skip-freq (line 2) '2': the window is --model gpt-oss-20b's (sliding_window 128, "
                    "sliding_window_pattern 2") != std::string::npos);
  const auto est = run_parplan({"estimate", "--from", windowed, "--model", "mistral-7b", "--json"}, {}, 60);
  CAPTURE(est.err);
  REQUIRE(est.exit_code == 0);
  CHECK(nlohmann::json::parse(est.out)["time"] == estimate_mistral({})["time"]);
  const auto none = run_parplan({"import", windowed, "--model", "llama3-8b"}, {}, 60);
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("--window-size (line 2) '4095,0' states a sliding window, and --model llama3-8b has none") !=
        std::string::npos);
  // No window: -1 on the left (unbounded), whatever the right side.
  for (const char* w : {"--window-size -1,-1", "--window-size -1 -1", "--window-size -1,0", "--window-size \"(-1, 0)\""}) {
    CAPTURE(w);
    const auto r = run_parplan({"import", script(w)}, {}, 60);
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("no window (-1 on the left is unbounded: full attention)") != std::string::npos);
  }
  for (const char* w : {"--window-size 4096", "--window-size abc,0", "--window-size -2,0"}) {
    CAPTURE(w);
    const auto r = run_parplan({"import", script(w)}, {}, 60);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--window-size (line 2) is") != std::string::npos);
    CHECK(r.err.find("the window is two integers, left and right (-1: unbounded)") != std::string::npos);
  }
}
