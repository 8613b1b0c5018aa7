// Profile fitting: field access, determinism, recovery of a known efficiency, held-out split, bad input.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "planner/cost/cost_model.hpp"
#include "planner/spec/error.hpp"
#include "planner/validation/fit.hpp"

using namespace parplan;

namespace {

// Synthetic runs (on A100-80GB, or alternating with A100-40GB) whose "measured" times come from the cost model with
// peak_fraction 0.6.
std::vector<MappedRun> synthetic_runs(bool both_a100s = false) {
  const ProfileSet profiles = ProfileSet::embedded();
  nlohmann::json rows = nlohmann::json::array();
  const int64_t layers[] = {24, 32, 40, 48, 64, 80};
  for (int i = 0; i < 6; ++i) {
    const char* gpu = both_a100s && i % 2 ? "A100-SXM4-40GB" : "A100-SXM4-80GB";
    rows.push_back({{"id", "run" + std::to_string(i)},
                    {"source", "synthetic 2021"},
                    {"arch", {{"layers", both_a100s ? 16 : layers[i]}, {"hidden", 4096}, {"heads", 32}, {"kv_heads", 32}, {"ffn", 16384},
                              {"ffn_type", "GeLU"}, {"vocab", 51200}, {"seq_len", 2048}}},
                    {"hardware", {{"gpu", gpu}, {"num_gpus", 16}, {"gpus_per_node", 8}}},
                    {"parallel", {{"tp", 2}, {"pp", 2}, {"dp", 4}, {"micro_batch", 1 + i % 2}, {"global_batch_seqs", 64}}},
                    {"precision", "fp16"},
                    {"recompute", i % 2 ? "full" : "none"},
                    {"measured", {{"iter_time_s", 1.0}}}});
  }
  std::vector<MappedRun> runs = load_published_runs(rows.dump(), "synthetic", profiles);
  for (MappedRun& r : runs) {
    REQUIRE(r.scored());
    Plan p = *r.plan;
    p.gpu.gemm.peak_fraction = 0.6;
    r.measured_step_time_s = estimate(p).time.step_s;
  }
  return runs;
}

GpuSpec gpu(const std::string& name) { return ProfileSet::embedded().gpu(name, "test"); }

}  // namespace

TEST_CASE("fit: field get/set round trip and unknown names") {
  GpuSpec g;
  ClusterSpec c;
  for (const FitField& f : default_fit_fields()) {
    set_field(g, c, f.name, 0.5 * (f.lo + f.hi));
    CHECK(get_field(g, c, f.name) == doctest::Approx(0.5 * (f.lo + f.hi)));
  }
  set_field(g, c, "inter_node.efficiency", 0.7);
  CHECK(c.inter_node.efficiency == 0.7);
  set_field(g, c, "gemm.kernel_overhead_us", 5);
  CHECK(g.gemm.kernel_overhead_s == doctest::Approx(5e-6));
  CHECK_THROWS_AS(fit_field("gemm.bogus", "--fit-fields"), InputError);
  CHECK(fit_field("inter_node.latency_us", "--fit-fields").hi > 0);
}

TEST_CASE("fit: recovers a known GEMM efficiency, deterministically, with a held-out half") {
  const std::vector<MappedRun> runs = synthetic_runs();
  FitOptions opt;
  opt.fields = {fit_field("gemm.peak_fraction", "t")};
  const FitResult a = fit_profiles(runs, gpu("A100-SXM4-80GB"), opt);
  CHECK(a.gpu.gemm.peak_fraction == doctest::Approx(0.6).scale(0).epsilon(0.01));
  CHECK(a.error_before.mean_abs > 0.1);
  CHECK(a.error_after.mean_abs < 0.005);
  CHECK(a.heldout_after.mean_abs < 0.005);
  CHECK(a.heldout_before.mean_abs > 0.1);
  CHECK(a.fit_ids == std::vector<std::string>{"run0", "run2", "run4"});
  CHECK(a.heldout_ids == std::vector<std::string>{"run1", "run3", "run5"});
  const FitResult b = fit_profiles(runs, gpu("A100-SXM4-80GB"), opt);
  CHECK(a.gpu.gemm.peak_fraction == b.gpu.gemm.peak_fraction);  // bit-identical
  REQUIRE(a.before.size() == 1);
  CHECK(a.before[0].second == doctest::Approx(runs[0].plan->gpu.gemm.peak_fraction));
}

TEST_CASE("fit: default fields stay in bounds and never make the objective worse") {
  const std::vector<MappedRun> runs = synthetic_runs();
  const FitResult r = fit_profiles(runs, gpu("A100-SXM4-80GB"));
  for (size_t i = 0; i < r.after.size(); ++i) {
    const FitField f = fit_field(r.after[i].first, "t");
    CHECK(r.after[i].second >= f.lo);
    CHECK(r.after[i].second <= f.hi);
  }
  CHECK(r.error_after.mean_abs <= r.error_before.mean_abs);
}

TEST_CASE("fit: too few runs for the GPU is an input error") {
  const std::vector<MappedRun> runs = synthetic_runs();
  CHECK_THROWS_AS(fit_profiles(runs, gpu("H100-SXM5-80GB")), InputError);
}

TEST_CASE("fit: the fields are fitted over every GPU of the base profile's architecture, each row on its own GPU") {
  const std::vector<MappedRun> runs = synthetic_runs(true);
  REQUIRE(runs[1].gpu_type == "A100-SXM4-40GB");
  REQUIRE(gpu("A100-SXM4-40GB").architecture == "Ampere");
  FitOptions opt;
  opt.fields = {fit_field("gemm.peak_fraction", "t")};
  const FitResult r = fit_profiles(runs, gpu("A100-SXM4-40GB"), opt);
  CHECK(r.gpu.name == "A100-SXM4-40GB");  // the base profile, with the fitted field
  CHECK(r.gpu.gemm.peak_fraction == doctest::Approx(0.6).scale(0).epsilon(0.01));
  CHECK(r.error_after.count == 6);  // rows of both A100s
  CHECK(r.error_after.mean_abs < 0.005);
  // Link fields are one cluster's: rows on two clusters refuse them.
  opt.fields = {fit_field("inter_node.efficiency", "t")};
  REQUIRE(runs[0].plan->cluster.name != runs[1].plan->cluster.name);
  CHECK_THROWS_AS(fit_profiles(runs, gpu("A100-SXM4-80GB"), opt), InputError);
}
