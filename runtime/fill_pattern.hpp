// The data device buffers are filled with: deterministic pseudo-random 16-bit words, uniform in [-1, 1] as bf16.
//
// Why not zeros: on Hopper a GEMM over zero-filled operands runs 10-13% faster than over random data (less
// switching, lower power, higher clocks), so timings on zeros are optimistic (docs/runtime.md). The pattern is
// chosen so that whatever dtype a GEMM reads it as, every element is finite: bf16 words are in [-1, 1]; the same
// bits read as fp16 have exponent field <= 15 (|x| < 2); an fp32 word is two such halves (the high one sets the
// exponent, |x| <= 1); and neither byte is 0x7F or 0xFF, the fp8 E4M3 NaN codes (so |x| <= 448 as E4M3).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "planner/spec/spec.hpp"
#include "runtime/backend.hpp"

namespace parplan::runtime {

inline constexpr uint64_t kFillSeed = 0x9a6b'1e5e'ed20'2611ull;

// Word `index` of the pattern for `seed` (a counter-based hash: any word can be computed on its own).
uint16_t fill_word(uint64_t index, uint64_t seed = kFillSeed);

// Words [first, first + count) of the pattern.
std::vector<uint16_t> fill_pattern(size_t count, uint64_t seed = kFillSeed, uint64_t first = 0);

// Root mean square of the pattern read as `d` (fp32 / tf32: pairs of words, little-endian; fp8: single bytes).
// The executor scales GEMMs by 1 / (sqrt(k) * fill_rms) so outputs that later GEMMs read stay the size of the fill.
double fill_rms(DType d);

// `g` with alpha = 1 / (sqrt(k) * fill_rms(dtype)): C is then about the size of A. The executor's GEMMs share the
// scratch slot, so later GEMMs read earlier outputs as their A operand; unscaled, each reuse multiplies the
// magnitude by about sqrt(k) * rms and after a few dozen GEMMs the scratch holds inf/NaN, constant data that runs
// as fast as zeros. Scaled, the data stay finite and random. calibrate launches its GEMMs the same way.
GemmShape fill_scaled(const GemmShape& g);

}  // namespace parplan::runtime
