// Tests for the host backend's bf16 / fp16 / fp8 conversions.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "runtime/host_numeric.hpp"

using namespace parplan;
using namespace parplan::runtime::host;

TEST_CASE("bf16 round-trips exactly representable values and rounds to nearest even") {
  for (float f : {0.0f, 1.0f, -2.5f, 3.0f, 256.0f, 1.0f / 1024}) CHECK(bf16_to_float(float_to_bf16(f)) == f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0); 1 + 3*2^-8 ties up to 1 + 2^-6.
  CHECK(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)) == 1.0f);
  CHECK(bf16_to_float(float_to_bf16(1.0f + 3.0f / 256)) == 1.0f + 1.0f / 64);
  CHECK(float_to_bf16(1.0f) == 0x3f80);
}

TEST_CASE("fp16 conversion covers normals, subnormals, overflow and ties") {
  CHECK(float_to_fp16(1.0f) == 0x3c00);
  CHECK(float_to_fp16(-2.0f) == 0xc000);
  CHECK(fp16_to_float(0x7bff) == 65504.0f);
  CHECK(float_to_fp16(65504.0f) == 0x7bff);
  CHECK(float_to_fp16(70000.0f) == 0x7c00);                  // inf
  CHECK(fp16_to_float(0x0001) == std::ldexp(1.0f, -24));     // smallest subnormal
  CHECK(float_to_fp16(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(float_to_fp16(std::ldexp(1.0f, -14)) == 0x0400);     // smallest normal
  CHECK(fp16_to_float(float_to_fp16(1.0f + 1.0f / 2048)) == 1.0f);  // tie to even
  for (int i = -2048; i <= 2048; i += 7) CHECK(fp16_to_float(float_to_fp16(static_cast<float>(i))) == static_cast<float>(i));
}

TEST_CASE("fp8 e4m3 decodes its range and rounds to the nearest code") {
  CHECK(fp8_e4m3_to_float(0x7e) == 448.0f);
  CHECK(fp8_e4m3_to_float(0x38) == 1.0f);  // exponent 7 = bias
  CHECK(fp8_e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
  CHECK(std::isnan(fp8_e4m3_to_float(0x7f)));
  CHECK(float_to_fp8_e4m3(1000.0f) == 0x7e);  // saturates
  CHECK(float_to_fp8_e4m3(-1.0f) == 0xb8);
  CHECK(fp8_e4m3_to_float(float_to_fp8_e4m3(1.1f)) == 1.125f);
  for (int code = 0; code < 0x7f; ++code) {
    CHECK(float_to_fp8_e4m3(fp8_e4m3_to_float(static_cast<uint8_t>(code))) == code);
  }
}

TEST_CASE("load and store dispatch on dtype") {
  uint16_t h[2] = {0, 0};
  store(h, 1, DType::bf16, 3.0f);
  CHECK(load(h, 1, DType::bf16) == 3.0f);
  CHECK(h[0] == 0);
  float f[3];
  const float in[3] = {1.0f, 2.0f, 3.0f};
  store_range(f, 0, 3, DType::fp32, in);
  float out[2];
  load_range(f, 1, 2, DType::fp32, out);
  CHECK(out[0] == 2.0f);
  CHECK(out[1] == 3.0f);
}
