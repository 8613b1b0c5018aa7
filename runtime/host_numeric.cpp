// Conversions between float and the 16- and 8-bit formats the host backend stores (round to nearest even).
#include "runtime/host_numeric.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace parplan::runtime::host {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The 128 non-negative E4M3 codes (0x00..0x7f) decoded; 0x7f is NaN. Sorted ascending for 0x00..0x7e.
std::array<float, 128> make_fp8_table() {
  std::array<float, 128> t{};
  for (int code = 0; code < 128; ++code) {
    int exp = (code >> 3) & 0xf;
    int man = code & 0x7;
    if (exp == 0xf && man == 0x7) {
      t[code] = std::numeric_limits<float>::quiet_NaN();
    } else if (exp == 0) {
      t[code] = std::ldexp(static_cast<float>(man) / 8.0f, -6);  // subnormal: 0.man * 2^(1-7)
    } else {
      t[code] = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
    }
  }
  return t;
}
const std::array<float, 128>& fp8_table() {
  static const std::array<float, 128> t = make_fp8_table();
  return t;
}

}  // namespace

uint16_t float_to_bf16(float f) {
  uint32_t u = bits_of(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float bf16_to_float(uint16_t h) { return float_of(static_cast<uint32_t>(h) << 16); }

uint16_t float_to_fp16(float f) {
  uint32_t u = bits_of(f);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t abs = u & 0x7fffffff;
  if (abs > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);  // NaN
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to >= 65520: inf
  if (abs < 0x38800000) {  // below the smallest normal half (2^-14): subnormal or zero
    // value = abs_float; half subnormal unit = 2^-24
    float v = float_of(abs) * 16777216.0f;  // scale by 2^24, exact
    float r = std::nearbyint(v);            // default rounding mode: nearest even
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(r));
  }
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t man = abs & 0x7fffff;
  uint32_t half = (exp << 10) | (man >> 13);
  uint32_t rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // may carry into the exponent: correct
  return static_cast<uint16_t>(sign | half);
}

float fp16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 0x1f) return float_of(sign | 0x7f800000 | (man << 13));
  return float_of(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint8_t float_to_fp8_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  float a = std::fabs(f);
  const auto& t = fp8_table();
  if (a >= t[0x7e]) return static_cast<uint8_t>(sign | 0x7e);  // saturate at 448
  // First code whose value is >= a, among 0x00..0x7e (ascending).
  auto it = std::lower_bound(t.begin(), t.begin() + 0x7f, a);
  int hi = static_cast<int>(it - t.begin());
  if (hi == 0) return sign;
  int lo = hi - 1;
  float dlo = a - t[lo], dhi = t[hi] - a;
  int code = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) == 0 ? lo : hi);  // ties to even mantissa
  return static_cast<uint8_t>(sign | code);
}

float fp8_e4m3_to_float(uint8_t v) {
  float a = fp8_table()[v & 0x7f];
  return (v & 0x80) ? -a : a;
}

float load(const void* base, int64_t i, DType dtype) {
  switch (dtype) {
    case DType::fp32:
    case DType::tf32:
      return static_cast<const float*>(base)[i];
    case DType::bf16:
      return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::fp16:
      return fp16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::fp8:
      return fp8_e4m3_to_float(static_cast<const uint8_t*>(base)[i]);
  }
  return 0.0f;
}

void store(void* base, int64_t i, DType dtype, float f) {
  switch (dtype) {
    case DType::fp32:
    case DType::tf32:
      static_cast<float*>(base)[i] = f;
      return;
    case DType::bf16:
      static_cast<uint16_t*>(base)[i] = float_to_bf16(f);
      return;
    case DType::fp16:
      static_cast<uint16_t*>(base)[i] = float_to_fp16(f);
      return;
    case DType::fp8:
      static_cast<uint8_t*>(base)[i] = float_to_fp8_e4m3(f);
      return;
  }
}

void load_range(const void* base, int64_t first, int64_t count, DType dtype, float* out) {
  if (count <= 0) return;
  if (dtype == DType::fp32 || dtype == DType::tf32) {
    std::memcpy(out, static_cast<const float*>(base) + first, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < count; ++i) out[i] = load(base, first + i, dtype);
}

void store_range(void* base, int64_t first, int64_t count, DType dtype, const float* in) {
  if (count <= 0) return;
  if (dtype == DType::fp32 || dtype == DType::tf32) {
    std::memcpy(static_cast<float*>(base) + first, in, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < count; ++i) store(base, first + i, dtype, in[i]);
}

}  // namespace parplan::runtime::host
