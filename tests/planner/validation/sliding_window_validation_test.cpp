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

namespace {
struct WindowCase {
  std::string attention;
  int64_t window = 0, pattern = 0;  // the mapped model's (0, 0: no window)
  std::string skip = {};            // when set: the row is skipped with a reason holding it
};

void check_window_cases(std::initializer_list<WindowCase> cases) {
  for (const WindowCase& c : cases) {
    CAPTURE(c.attention);
    const MappedRun r = map_row(window_row(c.attention, ""));
    CAPTURE(r.skip_reason());
    if (!c.skip.empty()) {
      CHECK(r.skip_reason().find(c.skip) != std::string::npos);
      continue;
    }
    CHECK(r.skip_reason().find("arch") == std::string::npos);  // (the row states no time: that is its only skip)
    REQUIRE(r.plan);
    CHECK(r.plan->model.sliding_window == c.window);
    CHECK(r.plan->model.sliding_window_pattern == c.pattern);
  }
}
}  // namespace

TEST_CASE("validation: a window's size reads with a K suffix and thousands separators; out of range is a skip") {
  check_window_cases({
      {"sliding window of 4K tokens", 4096, 0},
      {"sliding window 4,096", 4096, 0},
      {"sliding window 32k", 32768, 0},
      {"4096-token sliding window", 4096, 0},
      {"sliding window 1024, 5:1 local:global", 1024, 6},  // the comma ends the size
      {"sliding window 500000000", 0, 0, "arch: sliding window 500000000 is out of range [1, 100000000]"},
      {"sliding window 1000000000", 0, 0, "arch: sliding window 1000000000 is out of range [1, 100000000]"},
      {"sliding window 0", 0, 0, "arch: sliding window 0 is out of range"},
      {"window_size=-1, sliding window attention", 0, 0, "arch: sliding window -1 is out of range"},
  });
}

TEST_CASE("validation: a denied window is no window, whatever the parentheses; stated and denied is a skip") {
  check_window_cases({
      {"Sliding Window Attention (4096) is not used", 0, 0},
      {"SWA (4,096) disabled", 0, 0},
      {"sliding window attention was not used in this run", 0, 0},
      {"no SWA; sliding window 4096 in the ablation only", 0, 0, "arch: a sliding window is both stated and denied"},
  });
}

TEST_CASE("validation: the layers a window covers are read or the row is skipped, never guessed as every layer") {
  const std::string unread = "arch: which layers the sliding window covers is not read";
  check_window_cases({
      {"sliding window 1024, local:global 5:1", 1024, 6},
      {"sliding window 1024, global:local 1:3", 1024, 4},
      {"sliding window 4096, 1:1 local:global", 4096, 2},
      {"sliding window 4096, 0:1 local:global", 0, 0, "local:global ratio '0:1'"},
      {"sliding window 4096, local:global 5:2", 0, 0, "local:global ratio '5:2'"},
      {"sliding window 128, alternating with full attention", 128, 2},
      {"sliding window attention (4096) on every other layer", 4096, 2},
      {"sliding window 4096; alternating dense and MoE layers", 4096, 0},  // the alternation is the MLP's
      {"sliding window (4096) on 3 of every 4 layers", 0, 0, unread},
      {"sliding window 4096 (even layers), global attention (odd layers)", 0, 0, unread},
      {"sliding window 4096 in every layer but the last", 0, 0, unread},
      {"sliding window 4096, 40:1 local:global", 0, 0, "arch: a sliding-window pattern of 41 is above the model's 32 layers"},
  });
}

TEST_CASE("validation: local and banded attention with a size is a window, never full attention") {
  check_window_cases({
      {"alternating local (128) and global attention", 128, 2},
      {"alternating dense and locally banded sparse attention patterns (bandwidth 128)", 128, 2},
      {"local attention window 1024", 1024, 0},
      {"local window 1024", 1024, 0},
      {"local attention (window 4096) in 5 of every 6 layers", 0, 0,
       "arch: which layers the sliding window covers is not read"},
      {"interleaved local/global attention, local window 1024", 0, 0,
       "arch: which layers the sliding window covers is not read"},
      {"local attention", 0, 0, "arch: sliding window size not stated"},
      {"GQA; local and global batch sizes 8 and 1024", 0, 0},  // batch sizes, not attention
  });
}
