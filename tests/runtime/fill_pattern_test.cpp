// The device fill pattern: finite under every dtype a GEMM may read it as, uniform in [-1, 1] as bf16,
// deterministic, not mostly zeros; fill_scaled keeps a GEMM's output the size of its input.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "runtime/backend.hpp"
#include "runtime/fill_pattern.hpp"
#include "runtime/host_gemm.hpp"
#include "runtime/host_numeric.hpp"

using namespace parplan;
using namespace parplan::runtime;

TEST_CASE("fill pattern words are finite as bf16, fp16, fp32 halves and fp8 E4M3 bytes, and in [-1, 1] as bf16") {
  const auto p = fill_pattern(size_t{1} << 20);
  double sum = 0;
  size_t zeros = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const uint16_t w = p[i];
    const float bf = host::bf16_to_float(w);
    REQUIRE(std::isfinite(bf));
    REQUIRE(std::fabs(bf) <= 1.0f);
    REQUIRE(std::isfinite(host::fp16_to_float(w)));
    REQUIRE(std::fabs(host::fp16_to_float(w)) < 2.0f);
    for (uint8_t byte : {static_cast<uint8_t>(w & 0xFF), static_cast<uint8_t>(w >> 8)}) {
      REQUIRE(byte != 0x7F);
      REQUIRE(byte != 0xFF);
      REQUIRE(std::isfinite(host::fp8_e4m3_to_float(byte)));
    }
    // Any two neighbouring words as one little-endian fp32 (the allocation offset may start at either).
    if (i + 1 < p.size()) {
      const uint32_t bits = static_cast<uint32_t>(p[i]) | static_cast<uint32_t>(p[i + 1]) << 16;
      float f;
      std::memcpy(&f, &bits, sizeof f);
      REQUIRE(std::isfinite(f));
      REQUIRE(std::fabs(f) <= 1.01f);
    }
    sum += bf;
    zeros += bf == 0.0f;
  }
  CHECK(std::fabs(sum / static_cast<double>(p.size())) < 0.01);  // centred
  CHECK(zeros < p.size() / 1000);                                // not a zero fill
  CHECK(fill_rms(DType::bf16) == doctest::Approx(1.0 / std::sqrt(3.0)).scale(0).epsilon(0.02));  // uniform on [-1, 1]
  for (int d = 0; d < kNumDTypes; ++d) {
    CHECK(fill_rms(static_cast<DType>(d)) > 0.1);
    CHECK(fill_rms(static_cast<DType>(d)) < (d == static_cast<int>(DType::fp8) ? 448.0 : 2.0));  // E4M3 max 448
  }
}

TEST_CASE("fill pattern is deterministic, counter-based, and depends on the seed") {
  const auto a = fill_pattern(4096), b = fill_pattern(4096);
  CHECK(a == b);
  const auto tail = fill_pattern(96, kFillSeed, 4000);
  CHECK(std::equal(tail.begin(), tail.end(), a.begin() + 4000));
  CHECK(fill_word(123) == a[123]);
  CHECK(fill_pattern(4096, kFillSeed + 1) != a);
  CHECK(std::set<uint16_t>(a.begin(), a.end()).size() > 1000);  // many distinct values, not a short cycle
}

TEST_CASE("fill_scaled keeps a GEMM's output about the size of its input, so reused outputs never overflow") {
  for (DType d : {DType::fp32, DType::bf16, DType::fp16}) {
    CAPTURE(static_cast<int>(d));
    const GemmShape s = fill_scaled(GemmShape{.m = 64, .n = 64, .k = 1024, .dtype = d});
    CHECK(s.alpha == doctest::Approx(1.0 / (32.0 * fill_rms(d))));
    auto fill = [&](int64_t bytes, uint64_t first) {
      auto w = fill_pattern(static_cast<size_t>(bytes / 2), kFillSeed, first);
      std::vector<unsigned char> v(static_cast<size_t>(bytes));
      std::memcpy(v.data(), w.data(), v.size());
      return v;
    };
    auto a = fill(s.a_bytes(), 0), b = fill(s.b_bytes(), 1 << 20);
    std::vector<unsigned char> c(static_cast<size_t>(s.c_bytes()));
    host::gemm(s, a.data(), b.data(), c.data());
    double sum = 0;
    for (int64_t i = 0; i < s.m * s.n; ++i) {
      const float x = host::load(c.data(), i, d);
      REQUIRE(std::isfinite(x));
      sum += static_cast<double>(x) * x;
    }
    CHECK(std::sqrt(sum / static_cast<double>(s.m * s.n)) == doctest::Approx(fill_rms(d)).epsilon(0.25));
  }
}

TEST_CASE("host gemm applies alpha before accumulating") {
  const float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1};  // B = I (stored [n, k])
  float c[4] = {10, 10, 10, 10};
  host::gemm(GemmShape{.m = 2, .n = 2, .k = 2, .dtype = DType::fp32, .accumulate = true, .alpha = 0.5f}, a, b, c);
  CHECK(c[0] == 10.5f);
  CHECK(c[3] == 12.0f);
  float r[4] = {10, 10, 10, 10};
  host::gemm_reference(GemmShape{.m = 2, .n = 2, .k = 2, .dtype = DType::fp32, .accumulate = true, .alpha = 0.5f}, a, b, r);
  CHECK(std::equal(c, c + 4, r));
}
