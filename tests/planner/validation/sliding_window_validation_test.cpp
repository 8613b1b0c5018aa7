// Published-run validation: sliding-window attention as a row's attention text or notes state it.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "planner/validation/validation.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
// A Mistral-7B-shaped row on 8 H100s, tp 8, sequences of 16384 tokens; the attention text and notes are the cases'.
nlohmann::json window_row(const std::string& attention, const std::string& notes) {
  nlohmann::json row = nlohmann::json::parse(R"J({
    "id": "w1", "model": "Mistral 7B", "run_type": "benchmark", "source": "test row", "source_locator": "-",
    "arch": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "ffn_type": "SwiGLU",
             "vocab": 32000, "seq_len": 16384, "params_B": 7.24, "arch_notes": null},
    "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 8, "gpus_per_node": 8,
                 "intra_node": "NVLink4 + NVSwitch", "inter_node_per_node": null, "system": null},
    "parallel": {"tp": 8, "pp": 1, "dp": 1, "cp": 1, "ep": null, "sequence_parallel": true,
                 "vpp_chunks_per_stage": null, "zero_stage": 0, "fsdp": null, "micro_batch": 1,
                 "global_batch_seqs": 8, "grad_accum": 8, "parallel_notes": null},
    "precision": "bf16", "recompute": "none",
    "measured": {"tflops_per_gpu": null, "tflops_basis": null, "mfu": 0.4, "hfu": null, "pct_of_peak": null,
                 "iter_time_s": null, "tokens_per_s_total": null, "tokens_per_s_per_gpu": null,
                 "samples_per_s": null, "aggregate_pflops": null, "memory_per_gpu_GB": null, "other": null},
    "derived": {"tokens_per_s_total": null}, "confidence": "high", "notes": null})J");
  row["arch"]["attention"] = attention;
  row["arch"]["arch_notes"] = notes;
  return row;
}

MappedRun map_row(const nlohmann::json& row) {
  auto runs = load_published_runs(nlohmann::json::array({row}).dump(), "runs.json", test::profiles());
  REQUIRE(runs.size() == 1);
  return runs.front();
}
}  // namespace

TEST_CASE("validation: a row's sliding window maps onto the model when its size is stated") {
  struct Case {
    std::string attention, notes;
    int64_t window, pattern;  // window -1: a skip naming the unstated size
  };
  const Case cases[] = {
      {"GQA", "sliding window 4096", 4096, 0},
      {"GQA, SWA (window 128)", "", 128, 0},
      {"GQA", "alternating dense and banded window of 128 tokens", 128, 2},
      {"GQA", "sliding window attention (4096) on every other layer", 4096, 2},
      {"GQA", "5:1 local:global, sliding window 1024", 1024, 6},
      {"GQA", "window_size=4096, sliding-window attention", 4096, 0},
      {"GQA", "sliding window attention", -1, 0},
      {"GQA", "no sliding window", 0, 0},
      {"GQA", "swap space 4096", 0, 0},  // "swa" only as a word
  };
  for (const Case& c : cases) {
    CAPTURE(c.attention);
    CAPTURE(c.notes);
    const MappedRun r = map_row(window_row(c.attention, c.notes));
    CAPTURE(r.skip_reason());
    if (c.window < 0) {
      CHECK(r.skip_reason().find("sliding window size not stated") != std::string::npos);
      continue;
    }
    REQUIRE(r.plan);
    CHECK(r.plan->model.sliding_window == c.window);
    CHECK(r.plan->model.sliding_window_pattern == c.pattern);
  }
}
