// Calibration sweeps on a backend: GEMM throughput over shapes and dtypes, memory bandwidth, and collective
// algbw / busbw over message sizes (nccl-tests definitions), plus the profile fields they imply.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "planner/spec/spec.hpp"
#include "runtime/backend.hpp"

namespace parplan::runtime {

// One GEMM shape of the sweep: C[m,n] = A[m,k] op(B), B stored transposed or not (as the executor launches it).
struct GemmCase {
  int64_t m = 0, n = 0, k = 0;
  bool b_transposed = true;
};

// The training-like GEMM shapes of a transformer layer for `tokens` rows: QKV (n = 3h/tp, k = h), attention out
// (n = h, k = h/tp), MLP up (n = ffn/tp, k = h) and down (n = h, k = ffn/tp), each as the forward GEMM
// [tokens, n, k] (B transposed), the input gradient [tokens, k, n] and the weight gradient [n, k, tokens]
// (B not transposed), the executor's layouts (runtime/lower.cpp).
std::vector<GemmCase> layer_gemm_cases(int64_t tokens, int64_t hidden, int64_t ffn, int64_t tp);

struct CalibrateOptions {
  std::vector<int64_t> gemm_sizes;         // square m = n = k, timed in every gemm_dtype
  std::vector<DType> gemm_dtypes;          // fp8 is skipped where the device lacks it
  std::vector<GemmCase> gemm_shapes;       // training-like shapes, timed in each shape_dtype
  std::vector<DType> shape_dtypes;         // the dtypes the fit of gemm.peak_fraction rests on (bf16, fp16)
  int gemm_warmups = 1;                    // untimed launches before each GEMM point
  int gemm_iterations = 5;                 // timed launches per GEMM point; the median is kept
  int64_t hbm_bytes = 0;                   // buffer for the bandwidth test
  std::vector<int64_t> collective_bytes;   // message sizes S
  int iterations = 5;                      // timed repetitions (after one warm-up) per point; the median is kept
};
// Sizes for a GPU (up to 8192^3 GEMMs, 1 GiB copies, 1 MiB..256 MiB messages) or for the host (small).
CalibrateOptions default_calibrate_options(bool gpu);

struct GemmPoint {
  DType dtype = DType::bf16;
  int64_t m = 0, n = 0, k = 0;
  double seconds = 0, flops_per_s = 0;
  bool b_transposed = true;
};
struct CollectivePoint {
  CollectiveKind kind = CollectiveKind::all_reduce;
  int ranks = 1;
  int64_t bytes = 0;  // nccl-tests S
  double seconds = 0, algbw_Bps = 0, busbw_Bps = 0;
};
struct CalibrationResult {
  std::string device;
  int ranks = 1;
  std::vector<GemmPoint> gemm;
  double hbm_bandwidth_Bps = 0;  // (read + write bytes) / time of a device-to-device copy
  std::vector<CollectivePoint> collectives;
  double best_flops(DType d) const;
};

// Runs the sweeps on every rank of `world` (collectives over all ranks; send/recv between ranks 0 and 1) and
// returns rank 0's measurements.
CalibrationResult calibrate(World& world, const CalibrateOptions& opt);

// gemm.peak_fraction fitted to measured GEMMs of one dtype: the value in [lo, hi] for which the planner's GEMM
// model (planner/cost/gemm.hpp: gemm_time_s with wave quantization, tiles, kernel overhead and the HBM roofline, all
// other fields from `gpu`) best reproduces the measured times, minimising the mean squared log ratio
// model / measured (a grid scan over the bounds, refined by golden-section search). Pure: no device needed.
struct GemmFit {
  DType dtype = DType::bf16;
  int points = 0;                 // measured points of the dtype used (seconds > 0)
  double peak_fraction = 0;       // fitted value (`gpu`'s own value when no point was usable)
  double mean_abs_error = 0;      // mean |model / measured - 1| over the points at the fitted value
  double max_abs_error = 0;
  double best_fraction = 0;       // the old estimate, best measured FLOP/s / peak, for comparison
  std::vector<double> errors;     // model / measured - 1 per used point, in the order of `points`
};
GemmFit fit_gemm_peak_fraction(const std::vector<GemmPoint>& points, const GpuSpec& gpu, DType d, double lo = 0.3,
                               double hi = 0.98);
// One fit per dtype measured (and with a datasheet peak in `gpu`), in DType order.
std::vector<GemmFit> fit_gemm_peak_fractions(const std::vector<GemmPoint>& points, const GpuSpec& gpu);
// The dtype whose fit becomes the profile's gemm.peak_fraction: bf16 if measured, else fp16, else none (nullptr).
const GemmFit* profile_gemm_fit(const std::vector<GemmFit>& fits);

// A GPU profile from measurements. GPU backend: `base`'s datasheet peaks are kept and the calibration fields fitted
// (hbm_efficiency = measured / datasheet; then gemm.peak_fraction = fit_gemm_peak_fraction of the bf16 points, fp16
// where no bf16 was measured, under that hbm_efficiency). Host backend (`host` true): the measured rates become the
// peaks, fractions 1. `fits`, when given, receives the per-dtype GEMM fits (none for the host backend).
GpuSpec measured_gpu(const GpuSpec& base, const CalibrationResult& r, bool host, const std::string& name,
                     std::vector<GemmFit>* fits = nullptr);

// A cluster profile whose intra-node link comes from the collective sweep (needs ranks > 1): efficiency and latency
// of the ring from the all-gather (from the all-reduce when no all-gather was measured), nvls_efficiency from an
// all-reduce that beat that ring by more than 2% (else none).
ClusterSpec measured_cluster(const ClusterSpec& base, const CalibrationResult& r, const std::string& name,
                             const std::string& gpu_name);

}  // namespace parplan::runtime
