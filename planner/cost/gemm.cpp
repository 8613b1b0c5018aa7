// GEMM and memory-bound kernel time (model and sources in gemm.hpp).
#include "planner/cost/gemm.hpp"

#include <algorithm>
#include <cmath>

namespace parplan {
namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

namespace {
// Tile and wave quantization of an m x n output (per batch entry): the fraction of peak they leave and the waves.
struct Waves {
  double efficiency = 1, count = 1;
};
Waves tile_waves(const GemmEfficiency& e, int64_t m, int64_t n, int64_t batch) {
  const int64_t tm = ceil_div(m, e.tile_m), tn = ceil_div(n, e.tile_n);
  const double tile_eff = static_cast<double>(m) * static_cast<double>(n) /
                          (static_cast<double>(tm * e.tile_m) * static_cast<double>(tn * e.tile_n));
  // Tile and wave counts in double: tm * tn * batch overflows int64 for extreme (but accepted) shapes; below 2^53
  // tiles the values are exact, so ordinary results are unchanged.
  const double tiles = static_cast<double>(tm) * static_cast<double>(tn) * static_cast<double>(batch);
  const double sms = static_cast<double>(e.sm_count);
  const double waves = std::ceil(tiles / sms);
  const double wave_eff = tiles / (waves * sms);
  return {tile_eff * wave_eff, waves};
}

// The batched model's time with `per_wave_s` added to every wave of tiles.
double tiled_gemm_time_s(const GpuSpec& gpu, DType d, int64_t m, int64_t n, int64_t k, int64_t batch, double per_wave_s) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0.0;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
                       static_cast<double>(batch);
  const double fraction = gpu.gemm.peak_fraction * (d == DType::fp8 ? gpu.gemm.fp8_efficiency : 1.0);
  const Waves w = tile_waves(gpu.gemm, m, n, batch);
  const double compute = flops / (gpu.peak(d) * fraction * w.efficiency) + w.count * per_wave_s;
  const double bytes = static_cast<double>(dtype_bytes(d)) *
                       (static_cast<double>(m) * k + static_cast<double>(k) * n + static_cast<double>(m) * n) *
                       static_cast<double>(batch);
  return std::max(compute, memory_bound_time_s(gpu, bytes)) + gpu.gemm.kernel_overhead_s;
}
}  // namespace

double wave_efficiency(const GemmEfficiency& e, int64_t m, int64_t n, int64_t batch) {
  return tile_waves(e, m, n, batch).efficiency;
}

double gemm_time_s(const GpuSpec& gpu, DType d, int64_t m, int64_t n, int64_t k, int64_t batch) {
  return tiled_gemm_time_s(gpu, d, m, n, k, batch, 0.0);
}

double grouped_gemm_time_s(const GpuSpec& gpu, DType d, int64_t m, int64_t n, int64_t k, int64_t groups) {
  return tiled_gemm_time_s(gpu, d, m, n, k, groups, gpu.gemm.grouped_tile_overhead_s);
}

double memory_bound_time_s(const GpuSpec& gpu, double bytes) {
  return bytes / (gpu.hbm_bandwidth_Bps * gpu.hbm_efficiency);
}

namespace {
// S of attention_shape_factor(): time per useful tile, in units of one tile's time on one SM.
double attention_tile_span(double c, double sms, const AttentionCall& call) {
  const auto tiles = [](int64_t tokens) { return static_cast<double>((tokens + kAttentionTile - 1) / kAttentionTile); };
  const double nq = tiles(call.q_tokens), nk = tiles(call.kv_tokens), units = static_cast<double>(call.units);
  const double tile2 = static_cast<double>(kAttentionTile) * static_cast<double>(kAttentionTile);
  double visited = nq * nk;
  double useful = static_cast<double>(call.q_tokens) * static_cast<double>(call.kv_tokens) / tile2;
  if (call.causal) {  // a square block: row i visits i + 1 key tiles
    visited = nq * (nq + 1.0) / 2.0;
    useful /= 2.0;
  }
  const double work = units * (visited + nq * c);
  return (work / sms + nk + c) * sms / (units * useful);
}
}  // namespace

double attention_shape_factor(const GemmEfficiency& e, const AttentionCall& call) {
  const double c = e.attention_tile_overhead;
  if (c <= 0 || call.units <= 0 || call.q_tokens <= 0 || call.kv_tokens <= 0) return 1.0;
  const double sms = static_cast<double>(std::max<int64_t>(1, e.sm_count));
  const AttentionCall ref{kAttentionRefHeads, kAttentionRefTokens, kAttentionRefTokens, true};
  // No faster than the reference: it is the largest shape measured (8192 tokens, 2048 thread blocks), and nothing
  // here measures how the kernels behave beyond it.
  return std::max(1.0, attention_tile_span(c, sms, call) / attention_tile_span(c, sms, ref));
}

}  // namespace parplan
