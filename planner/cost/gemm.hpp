// Compute-time model for one GPU: GEMMs (peak x named efficiency with tile/wave quantization, HBM roofline,
// launch overhead) and memory-bound kernels (bytes / achieved HBM bandwidth).
// Wave quantization: NVIDIA "Matrix Multiplication Background User's Guide" (tile and wave quantization);
// roofline: Williams et al. 2009. Calibration lives in the GPU profile's "gemm" fields. An fp8 GEMM reaches
// fp8_efficiency x peak_fraction of the fp8 peak: on an H200, torch._scaled_mm with tensorwise scales ran at a median
// 0.907 of the bf16 GEMM's fraction of peak over 11 Llama 3 training shapes (bench/gpu/results/h200-2026-11-26,
// kernels.json; rowwise scales 0.882, not modelled separately: their ratio to tensorwise spans 0.92-1.07).
#pragma once
#include <cstdint>

#include "planner/spec/spec.hpp"

namespace parplan {

// Fraction of peak lost to tile and wave quantization for an m x n output (per batch entry) on this GPU.
double wave_efficiency(const GemmEfficiency& e, int64_t m, int64_t n, int64_t batch);

// Time of a (batched) GEMM C[m,n] = A[m,k] B[k,n] in dtype d.
double gemm_time_s(const GpuSpec& gpu, DType d, int64_t m, int64_t n, int64_t k, int64_t batch = 1);

// Time of a grouped GEMM: `groups` products C_g[m,n] = A_g[m,k] B_g[k,n] in one kernel (a MoE layer's local experts).
// The batched model above plus grouped_tile_overhead_s per wave of tiles: a grouped kernel's tiles each pay their
// pipeline prologue and output epilogue, which dominate when a tile's k loop is short (fine-grained experts, and the
// weight gradients, whose depth is the tokens per expert). The field is fitted to bench/gpu/grouped_gemm.py's 933
// shapes (torch._grouped_mm, bf16, on an H200: bench/gpu/results/h200-2026-11-26b, docs/cost-model.md).
double grouped_gemm_time_s(const GpuSpec& gpu, DType d, int64_t m, int64_t n, int64_t k, int64_t groups);

// Time of a memory-bound kernel moving `bytes` (reads + writes).
double memory_bound_time_s(const GpuSpec& gpu, double bytes);

}  // namespace parplan
