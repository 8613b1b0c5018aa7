// Tests that the row-major -> column-major BLAS mapping reproduces the host GEMM (checks the cuBLAS arguments).
#include <doctest/doctest.h>

#include <vector>

#include "runtime/gemm_layout.hpp"
#include "runtime/host_gemm.hpp"

using namespace parplan;
using namespace parplan::runtime;

namespace {

// Column-major reference BLAS: C[i + j*ldc] = sum_p opA(A)[i,p] * B[p + j*ldb] (trans_b is always false).
void blas_gemm(const ColumnMajorGemm& g, int64_t batch, const float* A, const float* B, float* C) {
  for (int64_t bt = 0; bt < batch; ++bt) {
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        float acc = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const float a = g.trans_a ? A[bt * g.stride_a + p + i * g.lda] : A[bt * g.stride_a + i + p * g.lda];
          acc += a * B[bt * g.stride_b + p + j * g.ldb];
        }
        C[bt * g.stride_c + i + j * g.ldc] = acc;
      }
    }
  }
}

}  // namespace

TEST_CASE("to_column_major: BLAS(A=our B, B=our A) gives our row-major C, both B layouts, batched") {
  for (bool bt : {true, false}) {
    GemmShape s{.m = 5, .n = 3, .k = 4, .batch = 2, .dtype = DType::fp32, .b_transposed = bt};
    std::vector<float> a(s.m * s.k * s.batch), b(s.n * s.k * s.batch), c1(s.m * s.n * s.batch), c2(c1.size());
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 5) - 2;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 3) + 1;
    host::gemm_reference(s, a.data(), b.data(), c1.data());
    const ColumnMajorGemm g = to_column_major(s);
    CHECK(g.trans_a == bt);
    blas_gemm(g, s.batch, b.data(), a.data(), c2.data());
    CHECK(c1 == c2);
  }
}
