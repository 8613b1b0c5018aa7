// Deterministic fill pattern for device buffers (see fill_pattern.hpp).
#include "runtime/fill_pattern.hpp"

#include <array>
#include <cmath>
#include <cstring>

#include "runtime/host_numeric.hpp"

namespace parplan::runtime {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e37'79b9'7f4a'7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58'476d'1ce4'e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d0'49bb'1331'11ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint16_t fill_word(uint64_t index, uint64_t seed) {
  const uint64_t r = splitmix64(seed ^ splitmix64(index));
  // 24 random bits -> a float uniform in [-1, 1), rounded to bf16 (may round up to exactly 1.0).
  const float u = static_cast<float>(r >> 40) * 0x1p-24f;
  uint16_t w = host::float_to_bf16(2.0f * u - 1.0f);
  // The low byte is (exponent & 1) << 7 | 7 mantissa bits: 0x7F / 0xFF would be fp8 E4M3 NaN; step the
  // mantissa down by one (the value stays inside [-1, 1]). The high byte is at most 0x3F | sign: never a NaN code.
  if ((w & 0x7F) == 0x7F) w = static_cast<uint16_t>(w - 1);
  return w;
}

std::vector<uint16_t> fill_pattern(size_t count, uint64_t seed, uint64_t first) {
  std::vector<uint16_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = fill_word(first + i, seed);
  return v;
}

double fill_rms(DType d) {
  static const std::array<double, kNumDTypes> rms = [] {
    const std::vector<uint16_t> p = fill_pattern(size_t{1} << 16);
    std::array<double, kNumDTypes> out{};
    for (int t = 0; t < kNumDTypes; ++t) {
      double sum = 0;
      size_t n = 0;
      auto add = [&](double x) {
        sum += x * x;
        ++n;
      };
      switch (static_cast<DType>(t)) {
        case DType::bf16:
          for (uint16_t w : p) add(host::bf16_to_float(w));
          break;
        case DType::fp16:
          for (uint16_t w : p) add(host::fp16_to_float(w));
          break;
        case DType::fp32:
        case DType::tf32:
          for (size_t i = 0; i + 1 < p.size(); i += 2) {
            const uint32_t bits = static_cast<uint32_t>(p[i]) | static_cast<uint32_t>(p[i + 1]) << 16;
            float f;
            std::memcpy(&f, &bits, sizeof f);
            add(f);
          }
          break;
        case DType::fp8:
          for (uint16_t w : p) {
            add(host::fp8_e4m3_to_float(static_cast<uint8_t>(w & 0xFF)));
            add(host::fp8_e4m3_to_float(static_cast<uint8_t>(w >> 8)));
          }
          break;
      }
      out[static_cast<size_t>(t)] = n ? std::sqrt(sum / static_cast<double>(n)) : 1.0;
    }
    return out;
  }();
  return rms[static_cast<size_t>(d)];
}

GemmShape fill_scaled(const GemmShape& g) {
  GemmShape out = g;
  if (g.k > 0) out.alpha = static_cast<float>(1.0 / (std::sqrt(static_cast<double>(g.k)) * fill_rms(g.dtype)));
  return out;
}

}  // namespace parplan::runtime
