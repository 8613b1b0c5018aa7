// Maps the seam's row-major GEMM (C = A * op(B)) onto a column-major BLAS call (cuBLAS / cuBLASLt argument order).
//
// A row-major [r, c] matrix is a column-major [c, r] matrix with the same bytes, so row-major C = A * op(B) is
// column-major C^T = op(B)^T * A^T: the BLAS "A" operand is our B and the BLAS "B" operand is our A. With
// b_transposed (B stored [n, k]) that is the TN form cuBLASLt requires for fp8. Kept free of CUDA types so a
// host test can check the mapping against the host GEMM.
#pragma once
#include <cstdint>

#include "runtime/backend.hpp"

namespace parplan::runtime {

struct ColumnMajorGemm {
  bool trans_a = false;  // op on the BLAS A operand (our B)
  bool trans_b = false;  // op on the BLAS B operand (our A); always false
  int64_t m = 0, n = 0, k = 0;  // BLAS dimensions: m = our n, n = our m
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batches
};

inline ColumnMajorGemm to_column_major(const GemmShape& s) {
  ColumnMajorGemm g;
  g.trans_a = s.b_transposed;
  g.trans_b = false;
  g.m = s.n;
  g.n = s.m;
  g.k = s.k;
  g.lda = s.b_transposed ? s.k : s.n;
  g.ldb = s.k;
  g.ldc = s.n;
  g.stride_a = s.n * s.k;
  g.stride_b = s.m * s.k;
  g.stride_c = s.m * s.n;
  return g;
}

}  // namespace parplan::runtime
