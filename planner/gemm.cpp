// GEMM and memory-bound kernel time (model and sources in gemm.hpp).
#include "planner/gemm.hpp"

#include <algorithm>

namespace parplan {
namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

double wave_efficiency(const GemmEfficiency& e, int64_t m, int64_t n, int64_t batch) {
  const int64_t tm = ceil_div(m, e.tile_m), tn = ceil_div(n, e.tile_n);
  const double tile_eff = static_cast<double>(m) * static_cast<double>(n) /
                          (static_cast<double>(tm * e.tile_m) * static_cast<double>(tn * e.tile_n));
  const int64_t tiles = tm * tn * batch;
  const int64_t waves = ceil_div(tiles, e.sm_count);
  const double wave_eff = static_cast<double>(tiles) / static_cast<double>(waves * e.sm_count);
  return tile_eff * wave_eff;
}

double gemm_time_s(const GpuSpec& gpu, DType d, int64_t m, int64_t n, int64_t k, int64_t batch) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0.0;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
                       static_cast<double>(batch);
  const double rate = gpu.peak(d) * gpu.gemm.peak_fraction * wave_efficiency(gpu.gemm, m, n, batch);
  const double compute = flops / rate;
  const double bytes = static_cast<double>(dtype_bytes(d)) *
                       (static_cast<double>(m) * k + static_cast<double>(k) * n + static_cast<double>(m) * n) *
                       static_cast<double>(batch);
  return std::max(compute, memory_bound_time_s(gpu, bytes)) + gpu.gemm.kernel_overhead_s;
}

double memory_bound_time_s(const GpuSpec& gpu, double bytes) {
  return bytes / (gpu.hbm_bandwidth_Bps * gpu.hbm_efficiency);
}

}  // namespace parplan
