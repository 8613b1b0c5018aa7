// Property tests of the cost model over seeded random valid plans (issue 9): finite positive memory and time, and
// monotonicity in dp (model-state bytes), recompute (stored activations) and microbatches (1F1B bubble fraction);
// 64-bit counts at 1T+ parameters and 16,384+ GPUs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "planner/spec/config.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/flops.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/cost/pipeline.hpp"
#include "planner/spec/spec.hpp"
#include "planner/test_plans.hpp"

namespace parplan {
namespace {

constexpr uint64_t kSeed = 0x9a7b1a2;  // fixed: the same plans on every run
constexpr int kSamples = 400;

bool finite_nonneg(double x) { return std::isfinite(x) && x >= 0; }
bool finite_pos(double x) { return std::isfinite(x) && x > 0; }

std::vector<int64_t> divisors(int64_t n, int64_t cap) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= n && i <= cap; ++i) {
    if (n % i == 0) d.push_back(i);
  }
  return d;
}

// Random plan generator: embedded models (and GPT shapes inferred from 100M..2T parameters) on the embedded
// clusters, meshes built from divisors so most candidates are valid.
class PlanGen {
 public:
  explicit PlanGen(uint64_t seed) : rng_(seed) {
    for (const auto& e : test::profiles().entries()) {
      if (e.kind == "model") models_.push_back(e.name);
      if (e.kind == "cluster") clusters_.push_back(e.name);
    }
  }

  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng_)];
  }
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool coin() { return uniform(0, 1) == 1; }

  // A plan that passes validate(), or nothing after a few tries.
  bool next(Plan& p) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      p = Plan{};
      if (uniform(0, 4) == 0) {
        p.model = infer_gpt_shape(std::pow(10.0, 8.0 + 4.3 * std::uniform_real_distribution<double>(0, 1)(rng_)));
      } else {
        p.model = test::profiles().model(pick(models_), "test");
      }
      p.cluster = test::profiles().cluster(pick(clusters_), "test");
      p.gpu = test::profiles().gpu(p.cluster.gpu, "test");
      ParallelConfig& pc = p.parallel;
      const int64_t heads_gcd = std::gcd(p.model.heads, p.model.kv_heads);
      pc.tp = pick(divisors(std::gcd(heads_gcd, p.model.ffn_hidden), p.cluster.gpus_per_node));
      pc.pp = pick(divisors(p.model.layers, 16));
      pc.cp = coin() ? 1 : 2;
      pc.dp = int64_t{1} << uniform(0, 6);
      if (p.model.is_moe()) pc.ep = pick(divisors(std::gcd(p.model.experts, pc.dp), 64));
      pc.micro_batch = uniform(1, 4);
      pc.num_microbatches = pc.pp * uniform(1, 8);
      pc.schedule = static_cast<Schedule>(uniform(0, 3));
      if (pc.schedule == Schedule::interleaved) {
        pc.vpp = pick(divisors(p.model.layers / pc.pp, 4));
        if (pc.vpp < 2 || pc.pp < 2) pc.schedule = Schedule::one_f_one_b, pc.vpp = 1;
      }
      // Uneven stages: a lighter last stage (interleaved: the split the search tries, on a pp that need not divide
      // the layers).
      if (pc.pp > 1 && uniform(0, 3) == 0) {
        if (pc.schedule == Schedule::interleaved) {
          const int64_t pp = uniform(2, 16);
          const int64_t last = interleaved_last_stage_layers(p.model.layers, pp, pc.vpp);
          if (last > 0 && p.model.layers >= pp) pc.pp = pp, pc.last_stage_layers = last;
        } else if (p.model.layers / pc.pp >= 2) {
          pc.last_stage_layers = p.model.layers / pc.pp - 1;
        }
        pc.num_microbatches = pc.pp * uniform(1, 8);
      }
      pc.recompute = static_cast<Recompute>(uniform(0, 2));
      pc.sequence_parallel = pc.tp > 1 && coin();
      pc.zero_stage = static_cast<int>(pc.pp > 1 ? uniform(0, 1) : uniform(0, 3));
      pc.distributed_optimizer = coin();
      pc.zero3_gather_unit = coin() ? Zero3GatherUnit::linear : Zero3GatherUnit::layer;
      pc.overlap_dp_comm = coin();
      pc.overlap_tp_comm = coin();
      pc.async_tp_backward = coin();
      pc.p2p_scatter_gather = coin();
      p.training.precision = static_cast<Precision>(uniform(0, 2));
      p.training.attention = coin() ? AttentionKernel::flash : AttentionKernel::unfused;
      p.training.grad_fp32 = p.training.precision != Precision::fp16;
      p.training.fused_grad_accumulation = coin();
      p.training.seq_len = coin() ? 0 : int64_t{512} << uniform(0, 4);
      p.training.global_batch = pc.dp * pc.micro_batch * pc.num_microbatches;
      p.num_gpus = pc.gpus();
      if (validate(p).ok()) return true;
    }
    return false;
  }

 private:
  std::mt19937_64 rng_;
  std::vector<std::string> models_, clusters_;
};

std::string describe_plan(const Plan& p) {
  const ParallelConfig& pc = p.parallel;
  return p.model.name + " on " + p.cluster.name + " dp" + std::to_string(pc.dp) + " tp" + std::to_string(pc.tp) +
         " pp" + std::to_string(pc.pp) + " cp" + std::to_string(pc.cp) + " ep" + std::to_string(pc.ep) + " vpp" +
         std::to_string(pc.vpp) + " mb" + std::to_string(pc.micro_batch) + " m" +
         std::to_string(pc.num_microbatches) + " " + std::string(to_string(pc.schedule)) + " recompute " +
         std::string(to_string(pc.recompute)) + " zero" + std::to_string(pc.zero_stage) + " " +
         std::string(to_string(p.training.precision));
}

}  // namespace

TEST_CASE("property: memory and time are finite and positive on random valid plans") {
  PlanGen gen(kSeed);
  int valid = 0;
  for (int i = 0; i < kSamples; ++i) {
    Plan p;
    if (!gen.next(p)) continue;
    ++valid;
    CAPTURE(describe_plan(p));
    const Estimate e = estimate(p);
    REQUIRE(e.memory.size() == static_cast<size_t>(p.parallel.pp));
    CHECK(finite_pos(e.peak_memory_bytes));
    CHECK(finite_pos(e.capacity_bytes));
    for (const StageMemory& m : e.memory) {
      CHECK(finite_pos(m.total));
      CHECK(finite_pos(m.weights));
      CHECK(finite_nonneg(m.grads));
      CHECK(finite_nonneg(m.optimizer));
      CHECK(finite_pos(m.activations));
      CHECK(m.total <= e.peak_memory_bytes * (1 + 1e-12));
    }
    const TimeBreakdown& t = e.time;
    CHECK(finite_pos(t.step_s));
    CHECK(finite_pos(t.compute_s));
    for (double x : {t.bubble_s, t.tp_comm_s, t.cp_comm_s, t.ep_comm_s, t.pp_comm_s, t.dp_comm_exposed_s,
                     t.dp_comm_total_s, t.optimizer_s, t.zero3_exposed_s}) {
      CHECK(finite_nonneg(x));
    }
    CHECK(t.dp_comm_exposed_s <= t.dp_comm_total_s * (1 + 1e-9) + 1e-15);
    CHECK(t.step_s >= t.compute_s);
    CHECK(finite_pos(t.tokens_per_s));
    CHECK(t.mfu > 0);
    CHECK(t.mfu < 1);
    CHECK(t.hfu >= t.mfu * (1 - 1e-12));
  }
  MESSAGE("valid random plans checked: " << valid);
  CHECK(valid >= kSamples * 3 / 4);
}

TEST_CASE("property: more data-parallel GPUs never increase per-GPU model-state bytes") {
  PlanGen gen(kSeed + 1);
  int checked = 0;
  for (int i = 0; i < kSamples; ++i) {
    Plan a;
    if (!gen.next(a)) continue;
    Plan b = a;
    b.parallel.dp *= 2;
    b.num_gpus = b.parallel.gpus();
    b.training.global_batch = b.parallel.dp * b.parallel.micro_batch * b.parallel.num_microbatches;
    if (!validate(b).ok()) continue;
    ++checked;
    CAPTURE(describe_plan(a));
    for (int64_t s = 0; s < a.parallel.pp; ++s) {
      const StageMemory ma = stage_memory(a, s), mb = stage_memory(b, s);
      CHECK(mb.weights <= ma.weights * (1 + 1e-12));
      CHECK(mb.grads <= ma.grads * (1 + 1e-12));
      CHECK(mb.optimizer <= ma.optimizer * (1 + 1e-12));
    }
  }
  MESSAGE("dp doublings checked: " << checked);
  CHECK(checked >= kSamples / 2);
}

TEST_CASE("property: more recompute never increases stored activations") {
  PlanGen gen(kSeed + 2);
  int checked = 0;
  for (int i = 0; i < kSamples; ++i) {
    Plan p;
    if (!gen.next(p)) continue;
    CAPTURE(describe_plan(p));
    double previous = INFINITY;
    for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
      p.parallel.recompute = r;
      double act = 0;
      for (int64_t s = 0; s < p.parallel.pp; ++s) act = std::max(act, stage_memory(p, s).activations);
      CAPTURE(to_string(r));
      CHECK(finite_pos(act));
      CHECK(act <= previous * (1 + 1e-12));
      previous = act;
    }
    ++checked;
  }
  CHECK(checked >= kSamples * 3 / 4);
}

TEST_CASE("property: more microbatches never increase the 1F1B bubble fraction") {
  PlanGen gen(kSeed + 3);
  int checked = 0;
  for (int i = 0; i < kSamples; ++i) {
    Plan p;
    if (!gen.next(p)) continue;
    if (p.parallel.schedule == Schedule::interleaved) continue;
    p.parallel.schedule = Schedule::one_f_one_b;
    CAPTURE(describe_plan(p));
    double prev_pipeline = INFINITY, prev_step = INFINITY;
    for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{8}, int64_t{32}, int64_t{128}}) {
      p.parallel.num_microbatches = m;
      p.training.global_batch = p.parallel.dp * p.parallel.micro_batch * m;
      REQUIRE(validate(p).ok());
      const Estimate e = estimate(p);
      const double pipeline_fraction = e.time.bubble_s / e.time.pipeline_s;
      CAPTURE(m);
      CHECK(pipeline_fraction >= 0);
      CHECK(pipeline_fraction <= prev_pipeline * (1 + 1e-12));
      CHECK(e.time.bubble_fraction() <= prev_step * (1 + 1e-12));
      if (p.parallel.pp == 1) CHECK(e.time.bubble_s == doctest::Approx(0.0));
      prev_pipeline = pipeline_fraction;
      prev_step = e.time.bubble_fraction();
    }
    ++checked;
  }
  CHECK(checked >= kSamples / 2);
}

TEST_CASE("property: the closed-form 1F1B bubble is (p-1)/(m+p-1) for uniform stages") {
  for (int64_t p : {2, 4, 8, 64}) {
    double previous = 1;
    for (int64_t m : {1, 2, 3, 8, 100, 10'000}) {
      std::vector<StageMicrobatchTime> stages(static_cast<size_t>(p), StageMicrobatchTime{1.0, 2.0, 0.0, 0.0});
      const PipelineTime t = pipeline_time(Schedule::one_f_one_b, m, 1, stages);
      const double fraction = t.bubble_s / t.step_s;
      CHECK(fraction == doctest::Approx(static_cast<double>(p - 1) / static_cast<double>(m + p - 1)));
      CHECK(fraction <= previous);
      previous = fraction;
    }
  }
}

TEST_CASE("extreme scale: 64-bit parameter and FLOP counts at 1T+ parameters and 16,384+ GPUs") {
  // Megatron 1T: counts stay exact integers and agree with the double-precision closed form.
  const ModelSpec m1t = test::profiles().model("megatron-1t", "test");
  const int64_t n = total_params(m1t);
  CHECK(n > 1'000'000'000'000);
  const double l = static_cast<double>(m1t.layers), h = static_cast<double>(m1t.hidden);
  CHECK(static_cast<double>(n) == doctest::Approx(12.0 * l * h * h).epsilon(0.03));

  // 100T inferred (the --params ceiling): no overflow, the count matches the request within 2%.
  const ModelSpec m100t = infer_gpt_shape(1e14);
  CHECK(static_cast<double>(total_params(m100t)) == doctest::Approx(1e14).epsilon(0.02));

  // 1T on 16,384 and 65,536 GPUs; 405B with 131k-token sequences on 16,384 GPUs.
  struct Case {
    ModelSpec model;
    int64_t dp, tp, pp, cp, seq, microbatches;
  };
  const std::vector<Case> cases = {
      {m1t, 32, 8, 64, 1, 2048, 512},
      {m1t, 128, 8, 64, 1, 2048, 4096},
      {m100t, 128, 2, 114, 1, 2048, 1026},  // 798 layers and heads: tp 2, pp 114
      {test::profiles().model("llama3-405b", "test"), 64, 8, 16, 2, 131072, 64},
  };
  for (const Case& c : cases) {
    Plan p;
    p.model = c.model;
    p.cluster = test::profiles().cluster("dgx-h100", "test");
    p.gpu = test::profiles().gpu(p.cluster.gpu, "test");
    p.parallel.dp = c.dp;
    p.parallel.tp = c.tp;
    p.parallel.pp = c.pp;
    p.parallel.cp = c.cp;
    p.parallel.num_microbatches = c.microbatches;
    p.parallel.recompute = Recompute::full;
    p.parallel.sequence_parallel = true;
    p.parallel.distributed_optimizer = true;
    p.num_gpus = p.parallel.gpus();
    p.training.seq_len = c.seq;
    p.training.global_batch = c.dp * c.microbatches;
    CAPTURE(describe_plan(p));
    CHECK(p.num_gpus >= 16384);
    const Validity v = validate(p);
    for (int r = 0; r < kNumRejects; ++r) {
      if (v.has(static_cast<Reject>(r))) MESSAGE("rejected: " << describe(static_cast<Reject>(r), p));
    }
    REQUIRE(v.ok());
    const Estimate e = estimate(p);
    CHECK(finite_pos(e.peak_memory_bytes));
    CHECK(finite_pos(e.time.step_s));
    CHECK(e.time.mfu > 0);
    CHECK(e.time.mfu < 1);
    // Model FLOPs: at least 6 N per token (Kaplan), at most 6 N + the attention term, no overflow at 1e21+.
    const double tokens = static_cast<double>(p.training.global_batch) * static_cast<double>(c.seq);
    const double six_n = 6.0 * static_cast<double>(total_params(p.model)) * tokens;
    CHECK(e.time.model_flops >= 0.9 * six_n);
    CHECK(std::isfinite(e.time.model_flops));
  }
}

}  // namespace parplan
