// Tests for the blocked CPU GEMM against the naive triple loop, for every dtype and both B layouts.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/host_gemm.hpp"
#include "runtime/host_numeric.hpp"

using namespace parplan;
using namespace parplan::runtime;

namespace {

std::vector<unsigned char> random_matrix(int64_t elems, DType d, std::mt19937& rng) {
  std::vector<unsigned char> v(static_cast<size_t>(elems * element_bytes(d)));
  std::uniform_int_distribution<int> dist(-4, 4);  // small integers: exact in every dtype, sums exact in fp32
  for (int64_t i = 0; i < elems; ++i) host::store(v.data(), i, d, static_cast<float>(dist(rng)) * 0.5f);
  return v;
}

}  // namespace

TEST_CASE("blocked gemm equals the naive gemm exactly on integer data") {
  std::mt19937 rng(7);
  for (DType d : {DType::fp32, DType::bf16, DType::fp16, DType::fp8}) {
    for (bool bt : {true, false}) {
      // Sizes straddle the 64 x 64 x 256 blocks.
      GemmShape s{.m = 70, .n = 65, .k = 300, .batch = 2, .dtype = d, .b_transposed = bt};
      auto a = random_matrix(s.m * s.k * s.batch, d, rng);
      auto b = random_matrix(s.n * s.k * s.batch, d, rng);
      std::vector<unsigned char> c1(static_cast<size_t>(s.c_bytes())), c2(c1.size());
      host::gemm(s, a.data(), b.data(), c1.data());
      host::gemm_reference(s, a.data(), b.data(), c2.data());
      CAPTURE(static_cast<int>(d));
      CAPTURE(bt);
      CHECK(c1 == c2);
    }
  }
}

TEST_CASE("gemm computes A * B^T and accumulates") {
  // A = [[1,2],[3,4]], B (stored [n,k]) = [[1,0],[1,1],[0,2]] -> C = A * B^T = [[1,3,4],[3,7,8]]
  const float a[4] = {1, 2, 3, 4};
  const float b[6] = {1, 0, 1, 1, 0, 2};
  float c[6] = {10, 10, 10, 10, 10, 10};
  GemmShape s{.m = 2, .n = 3, .k = 2, .batch = 1, .dtype = DType::fp32, .b_transposed = true, .accumulate = false};
  host::gemm(s, a, b, c);
  const float want[6] = {1, 3, 4, 3, 7, 8};
  for (int i = 0; i < 6; ++i) CHECK(c[i] == want[i]);
  s.accumulate = true;
  host::gemm(s, a, b, c);
  for (int i = 0; i < 6; ++i) CHECK(c[i] == 2 * want[i]);
}

TEST_CASE("fp8 gemm writes a bf16 output") {
  GemmShape s{.m = 1, .n = 1, .k = 3, .batch = 1, .dtype = DType::fp8};
  CHECK(s.c_bytes() == 2);
  unsigned char a[3], b[3];
  for (int i = 0; i < 3; ++i) {
    a[i] = host::float_to_fp8_e4m3(2.0f);
    b[i] = host::float_to_fp8_e4m3(1.5f);
  }
  uint16_t c = 0;
  host::gemm(s, a, b, &c);
  CHECK(host::bf16_to_float(c) == 9.0f);
}
