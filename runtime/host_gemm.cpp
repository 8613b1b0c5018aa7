// Blocked CPU GEMM with fp32 accumulation over operands stored as fp32/bf16/fp16/fp8.
#include "runtime/host_gemm.hpp"

#include <algorithm>
#include <vector>

#include "runtime/host_numeric.hpp"

namespace parplan::runtime::host {
namespace {

DType out_dtype(DType d) { return d == DType::fp8 ? DType::bf16 : d; }

constexpr int64_t kBlockM = 64;
constexpr int64_t kBlockN = 64;
constexpr int64_t kBlockK = 256;

}  // namespace

void gemm(const GemmShape& s, const void* a, const void* b, void* c) {
  const DType in = s.dtype, out = out_dtype(s.dtype);
  std::vector<float> abuf(static_cast<size_t>(kBlockM * kBlockK));
  std::vector<float> bbuf(static_cast<size_t>(kBlockK * kBlockN));
  std::vector<float> ctile(static_cast<size_t>(kBlockM * kBlockN));
  std::vector<float> row(static_cast<size_t>(std::max(kBlockN, kBlockK)));
  for (int64_t bt = 0; bt < s.batch; ++bt) {
    const int64_t a0 = bt * s.m * s.k, b0 = bt * s.n * s.k, c0 = bt * s.m * s.n;
    for (int64_t i0 = 0; i0 < s.m; i0 += kBlockM) {
      const int64_t mb = std::min(kBlockM, s.m - i0);
      for (int64_t j0 = 0; j0 < s.n; j0 += kBlockN) {
        const int64_t nb = std::min(kBlockN, s.n - j0);
        std::fill(ctile.begin(), ctile.end(), 0.0f);
        for (int64_t p0 = 0; p0 < s.k; p0 += kBlockK) {
          const int64_t kb = std::min(kBlockK, s.k - p0);
          for (int64_t ii = 0; ii < mb; ++ii) load_range(a, a0 + (i0 + ii) * s.k + p0, kb, in, &abuf[ii * kBlockK]);
          if (s.b_transposed) {  // B is [n, k]: row j holds column j of op(B)
            for (int64_t jj = 0; jj < nb; ++jj) {
              load_range(b, b0 + (j0 + jj) * s.k + p0, kb, in, row.data());
              for (int64_t pp = 0; pp < kb; ++pp) bbuf[pp * kBlockN + jj] = row[pp];
            }
          } else {  // B is [k, n]
            for (int64_t pp = 0; pp < kb; ++pp) load_range(b, b0 + (p0 + pp) * s.n + j0, nb, in, &bbuf[pp * kBlockN]);
          }
          for (int64_t ii = 0; ii < mb; ++ii) {
            float* crow = &ctile[ii * kBlockN];
            const float* arow = &abuf[ii * kBlockK];
            for (int64_t pp = 0; pp < kb; ++pp) {
              const float av = arow[pp];
              const float* brow = &bbuf[pp * kBlockN];
              for (int64_t jj = 0; jj < nb; ++jj) crow[jj] += av * brow[jj];
            }
          }
        }
        for (int64_t ii = 0; ii < mb; ++ii) {
          const int64_t first = c0 + (i0 + ii) * s.n + j0;
          float* crow = &ctile[ii * kBlockN];
          if (s.alpha != 1.0f) {
            for (int64_t jj = 0; jj < nb; ++jj) crow[jj] *= s.alpha;
          }
          if (s.accumulate) {
            load_range(c, first, nb, out, row.data());
            for (int64_t jj = 0; jj < nb; ++jj) crow[jj] += row[jj];
          }
          store_range(c, first, nb, out, crow);
        }
      }
    }
  }
}

void gemm_reference(const GemmShape& s, const void* a, const void* b, void* c) {
  const DType in = s.dtype, out = out_dtype(s.dtype);
  for (int64_t bt = 0; bt < s.batch; ++bt) {
    const int64_t a0 = bt * s.m * s.k, b0 = bt * s.n * s.k, c0 = bt * s.m * s.n;
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        float acc = 0.0f;
        for (int64_t p = 0; p < s.k; ++p) {
          const int64_t bi = s.b_transposed ? j * s.k + p : p * s.n + j;
          acc += load(a, a0 + i * s.k + p, in) * load(b, b0 + bi, in);
        }
        acc *= s.alpha;
        if (s.accumulate) acc += load(c, c0 + i * s.n + j, out);
        store(c, c0 + i * s.n + j, out, acc);
      }
    }
  }
}

}  // namespace parplan::runtime::host
