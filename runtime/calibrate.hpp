// Calibration sweeps on a backend: GEMM throughput over shapes and dtypes, memory bandwidth, and collective
// algbw / busbw over message sizes (nccl-tests definitions), plus the profile fields they imply.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "planner/spec.hpp"
#include "runtime/backend.hpp"

namespace parplan::runtime {

struct CalibrateOptions {
  std::vector<int64_t> gemm_sizes;         // square m = n = k
  std::vector<DType> gemm_dtypes;          // fp8 is skipped where the device lacks it
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

// A GPU profile from measurements. GPU backend: `base`'s datasheet peaks are kept and the calibration fields fitted
// (gemm.peak_fraction = best measured / peak for the base's main dtype, hbm_efficiency = measured / datasheet).
// Host backend (`host` true): the measured rates become the peaks, fractions 1.
GpuSpec measured_gpu(const GpuSpec& base, const CalibrationResult& r, bool host, const std::string& name);

// A cluster profile whose intra-node link efficiency and latency come from the all-reduce sweep (needs ranks > 1).
ClusterSpec measured_cluster(const ClusterSpec& base, const CalibrationResult& r, const std::string& name,
                             const std::string& gpu_name);

}  // namespace parplan::runtime
