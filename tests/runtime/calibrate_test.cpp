// Tests for calibrate's GEMM sweep and the gemm.peak_fraction fit (no GPU: times come from the planner's model).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "planner/cost/collectives.hpp"
#include "planner/cost/gemm.hpp"
#include "planner/spec/profiles.hpp"
#include "runtime/calibrate.hpp"
#include "runtime/collective_bytes.hpp"

using namespace parplan;
using namespace parplan::runtime;

namespace {

const GpuSpec& h100() {
  static const GpuSpec g = ProfileSet::embedded().gpu("H100-SXM5-80GB", "test");
  return g;
}

// The GPU sweep's shapes (squares and training-like) with times from the model at `fraction`, times `noise(rng)`.
template <typename Noise>
std::vector<GemmPoint> model_points(const GpuSpec& base, DType d, double fraction, Noise noise) {
  GpuSpec g = base;
  g.gemm.peak_fraction = fraction;
  const CalibrateOptions o = default_calibrate_options(true);
  std::vector<GemmCase> cases;
  for (int64_t s : o.gemm_sizes) cases.push_back({s, s, s, true});
  cases.insert(cases.end(), o.gemm_shapes.begin(), o.gemm_shapes.end());
  std::vector<GemmPoint> pts;
  for (const GemmCase& c : cases) {
    const double t = gemm_time_s(g, d, c.m, c.n, c.k) * noise();
    pts.push_back({d, c.m, c.n, c.k, t, 2.0 * static_cast<double>(c.m) * c.n * c.k / t, c.b_transposed});
  }
  return pts;
}

}  // namespace

TEST_CASE("layer_gemm_cases: forward, input-gradient and weight-gradient shapes of the four layer GEMMs") {
  const auto c = layer_gemm_cases(4096, 8192, 28672, 8);
  REQUIRE(c.size() == 12);
  // QKV forward [T, 3h/tp, h], its input gradient [T, h, 3h/tp], its weight gradient [3h/tp, h, T].
  CHECK(std::tie(c[0].m, c[0].n, c[0].k, c[0].b_transposed) == std::make_tuple(4096, 3072, 8192, true));
  CHECK(std::tie(c[1].m, c[1].n, c[1].k, c[1].b_transposed) == std::make_tuple(4096, 8192, 3072, false));
  CHECK(std::tie(c[2].m, c[2].n, c[2].k, c[2].b_transposed) == std::make_tuple(3072, 8192, 4096, false));
  // MLP down forward [T, h, ffn/tp].
  CHECK(std::tie(c[9].m, c[9].n, c[9].k) == std::make_tuple(4096, 8192, 3584));
  CHECK_THROWS(layer_gemm_cases(0, 8192, 28672, 8));
}

TEST_CASE("default GPU sweep: training-like shapes in bf16 and fp16, no duplicates, a bounded amount of work") {
  const CalibrateOptions o = default_calibrate_options(true);
  CHECK(o.gemm_shapes.size() >= 100);
  std::set<std::tuple<int64_t, int64_t, int64_t, bool>> seen;
  double flops = 0;
  for (const GemmCase& c : o.gemm_shapes) {
    CHECK(seen.insert({c.m, c.n, c.k, c.b_transposed}).second);
    flops += 2.0 * static_cast<double>(c.m) * c.n * c.k;
  }
  CHECK(o.shape_dtypes == std::vector<DType>{DType::bf16, DType::fp16});
  CHECK(o.gemm_iterations >= 10);
  // Wall-time guard: every launch of both dtypes at 600 TFLOP/s stays under 30 s.
  const double launches = o.gemm_warmups + o.gemm_iterations;
  CHECK(flops * launches * static_cast<double>(o.shape_dtypes.size()) / 600e12 < 30.0);
  const CalibrateOptions host = default_calibrate_options(false);
  CHECK(!host.gemm_shapes.empty());
  for (const GemmCase& c : host.gemm_shapes) CHECK(c.m * c.n * c.k <= 256 * 256 * 256);
}

TEST_CASE("fit_gemm_peak_fraction recovers the fraction the times were generated with") {
  const GpuSpec& base = h100();
  for (double truth : {0.71, 0.55, 0.9}) {
    const auto pts = model_points(base, DType::bf16, truth, [] { return 1.0; });
    const GemmFit f = fit_gemm_peak_fraction(pts, base, DType::bf16);
    CAPTURE(truth);
    CHECK(f.points == static_cast<int>(pts.size()));
    CHECK(std::fabs(f.peak_fraction - truth) < 1e-3);
    CHECK(f.mean_abs_error < 1e-3);
    CHECK(f.errors.size() == pts.size());
    // The best-point estimate overshoots: the model's best shape runs below the fraction (wave quantization etc.).
    CHECK(f.best_fraction <= truth + 1e-9);
  }
}

TEST_CASE("fit_gemm_peak_fraction with multiplicative noise stays close and reports the residuals") {
  const GpuSpec& base = h100();
  std::mt19937 rng(11);
  std::normal_distribution<double> n(0.0, 0.05);  // ~5% per-point log noise
  const auto pts = model_points(base, DType::bf16, 0.71, [&] { return std::exp(n(rng)); });
  const GemmFit f = fit_gemm_peak_fraction(pts, base, DType::bf16);
  CHECK(std::fabs(f.peak_fraction - 0.71) < 0.01);
  CHECK(f.mean_abs_error > 0.01);
  CHECK(f.mean_abs_error < 0.08);
  CHECK(f.max_abs_error >= f.mean_abs_error);
}

TEST_CASE("fit_gemm_peak_fraction: bounds, other dtypes ignored, nothing usable keeps the base value") {
  const GpuSpec& base = h100();
  auto pts = model_points(base, DType::bf16, 0.2, [] { return 1.0; });  // below the bound: clamps at lo
  CHECK(fit_gemm_peak_fraction(pts, base, DType::bf16).peak_fraction == doctest::Approx(0.3).epsilon(1e-3));
  const GemmFit none = fit_gemm_peak_fraction(pts, base, DType::fp16);
  CHECK(none.points == 0);
  CHECK(none.peak_fraction == base.gemm.peak_fraction);
  // Zero / negative times are skipped.
  pts.push_back({DType::bf16, 1024, 1024, 1024, 0.0, 0.0, true});
  CHECK(fit_gemm_peak_fraction(pts, base, DType::bf16).points == static_cast<int>(pts.size()) - 1);
  CHECK_THROWS(fit_gemm_peak_fraction(pts, base, DType::bf16, 0.0, 0.5));
}

TEST_CASE("measured_gpu writes the bf16 fit as gemm.peak_fraction, fp16 when no bf16 was measured") {
  const GpuSpec& base = h100();
  CalibrationResult r;
  r.device = "test";
  r.hbm_bandwidth_Bps = base.hbm_bandwidth_Bps * base.hbm_efficiency;  // keeps the base's efficiency
  r.gemm = model_points(base, DType::fp16, 0.66, [] { return 1.0; });
  GpuSpec g = measured_gpu(base, r, false, "m");
  CHECK(std::fabs(g.gemm.peak_fraction - 0.66) < 1e-3);
  const auto bf = model_points(base, DType::bf16, 0.74, [] { return 1.0; });
  r.gemm.insert(r.gemm.end(), bf.begin(), bf.end());
  g = measured_gpu(base, r, false, "m");
  CHECK(std::fabs(g.gemm.peak_fraction - 0.74) < 1e-3);
  CHECK(g.source.find("fitted") != std::string::npos);
  const auto fits = fit_gemm_peak_fractions(r.gemm, base);
  REQUIRE(fits.size() == 2);
  REQUIRE(profile_gemm_fit(fits) != nullptr);
  CHECK(profile_gemm_fit(fits)->dtype == DType::bf16);
  CHECK(profile_gemm_fit({}) == nullptr);
}

TEST_CASE("measured_gpu on the host: measured rates as peaks, no GPU tile or wave shape, no launch overhead") {
  const GpuSpec& base = h100();
  CalibrationResult r;
  r.device = "host";
  r.hbm_bandwidth_Bps = 5e9;
  // A 64^3 and a 256^3 bf16 GEMM measured at 2 and 3 GFLOP/s: the best rate becomes the bf16 peak.
  r.gemm.push_back({DType::bf16, 64, 64, 64, 2.0 * 64 * 64 * 64 / 2e9, 2e9, true});
  r.gemm.push_back({DType::bf16, 256, 256, 256, 2.0 * 256 * 256 * 256 / 3e9, 3e9, true});
  const GpuSpec g = measured_gpu(base, r, true, "host-profile");
  CHECK(g.peak(DType::bf16) == 3e9);
  CHECK(g.gemm.peak_fraction == 1.0);
  CHECK(g.gemm.sm_count == 1);
  CHECK(wave_efficiency(g.gemm, 3, 5, 7) == 1.0);
  // The 256^3 GEMM is predicted at its measured time: with the H100's 128 x 256 tiles on 132 SMs it was charged
  // 132 / 2 = 66 times its flops' worth (one partial wave of two tiles), plus 4 us of launch overhead.
  CHECK(gemm_time_s(g, DType::bf16, 256, 256, 256) == doctest::Approx(2.0 * 256 * 256 * 256 / 3e9).scale(0).epsilon(1e-12));
  CHECK(gemm_time_s(base, DType::bf16, 256, 256, 256) > 0);
  GpuSpec with_h100_shape = g;
  with_h100_shape.gemm = base.gemm;
  with_h100_shape.gemm.peak_fraction = 1.0;
  CHECK(gemm_time_s(with_h100_shape, DType::bf16, 256, 256, 256) > 60 * gemm_time_s(g, DType::bf16, 256, 256, 256));
  // Nor a grouped (MoE expert) GEMM's fixed time per wave: with 1 x 1 tiles every output element is a wave, and the
  // H100's 2.75 us per wave made 8 experts of 32 x 256 outputs cost 0.18 s.
  REQUIRE(base.gemm.grouped_tile_overhead_s > 0);
  CHECK(g.gemm.grouped_tile_overhead_s == 0.0);
  CHECK(g.gemm.attention_tile_overhead == 0.0);
  CHECK(grouped_gemm_time_s(g, DType::bf16, 32, 256, 64, 8) ==
        doctest::Approx(8 * 2.0 * 32 * 256 * 64 / 3e9).scale(0).epsilon(1e-9));
}

// A DGX H100 sweep as nccl-tests measures one (hardware-reference.json): 8 ranks, ring all-gather 370 GB/s busbw,
// NVLS all-reduce 480 GB/s busbw (275 GB/s algbw). The ring's efficiency comes from the all-gather (the all-reduce
// once clamped it to 1.0, so every ring collective of a calibrated H100 node ran 22% fast) and NVLS from the
// all-reduce, which then reproduces its measured time.
TEST_CASE("measured_cluster: ring efficiency from the all-gather, nvls_efficiency from a faster all-reduce") {
  const ClusterSpec base = ProfileSet::embedded().cluster("dgx-h100", "test");
  const int n = 8;
  const auto point = [&](CollectiveKind kind, int64_t bytes, double busbw, double latency_s) {
    const double factor = bus_bandwidth_factor(kind, n);
    const double t = latency_s + static_cast<double>(bytes) * factor / busbw;
    return CollectivePoint{kind, n, bytes, t, static_cast<double>(bytes) / t, static_cast<double>(bytes) / t * factor};
  };
  const int64_t small = 8 << 10, large = int64_t{4} << 30;
  CalibrationResult r;
  r.device = "H100";
  r.ranks = n;
  r.collectives = {point(CollectiveKind::all_reduce, small, 480e9, 30e-6), point(CollectiveKind::all_gather, small, 370e9, 21e-6),
                   point(CollectiveKind::all_reduce, large, 480e9, 0), point(CollectiveKind::all_gather, large, 370e9, 0)};
  ClusterSpec c = measured_cluster(base, r, "m", "H100-SXM5-80GB");
  CHECK(c.intra_node.efficiency == doctest::Approx(370.0 / 450).scale(0).epsilon(1e-6));
  CHECK(c.intra_node.latency_s == doctest::Approx(3e-6).scale(0).epsilon(0.01));  // 21 us over 7 ring steps
  CHECK(c.intra_node.nvls_efficiency == doctest::Approx(0.6875).scale(0).epsilon(0.01));
  const double S = static_cast<double>(large);
  CHECK(collective_time_s(Collective::all_reduce, S, n, c.intra_node) ==
        doctest::Approx(r.collectives[2].seconds).scale(0).epsilon(0.01));
  CHECK(collective_time_s(Collective::all_gather, S, n, c.intra_node) ==
        doctest::Approx(r.collectives[3].seconds).scale(0).epsilon(0.01));
  CHECK(c.source.find("NVLS") != std::string::npos);
  // An all-reduce no faster than the ring (a fabric without NVLS): no NVLS, the same ring.
  r.collectives[2] = point(CollectiveKind::all_reduce, large, 370e9, 0);
  c = measured_cluster(base, r, "m", "H100-SXM5-80GB");
  CHECK(c.intra_node.nvls_efficiency == 0.0);
  CHECK(c.intra_node.efficiency == doctest::Approx(370.0 / 450).scale(0).epsilon(1e-6));
  // Only an all-reduce sweep: the ring is fitted to it, as before.
  r.collectives = {point(CollectiveKind::all_reduce, small, 370e9, 42e-6), point(CollectiveKind::all_reduce, large, 370e9, 0)};
  c = measured_cluster(base, r, "m", "H100-SXM5-80GB");
  CHECK(c.intra_node.efficiency == doctest::Approx(370.0 / 450).scale(0).epsilon(1e-6));
  CHECK(c.intra_node.latency_s == doctest::Approx(3e-6).scale(0).epsilon(0.01));  // 42 us over 14 ring steps
  CHECK(c.intra_node.nvls_efficiency == 0.0);
}
