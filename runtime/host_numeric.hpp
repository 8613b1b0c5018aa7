// Host-side element formats: bf16, fp16 and fp8 (E4M3) stored in their real widths, converted to/from float.
//
// The host backend keeps every tensor in its true size (so allocations match the memory model) and does the
// arithmetic in float: loads widen to float, stores round to nearest-even. This emulates the GPU's mixed
// precision (fp32 accumulation) but is not bit-identical to cuBLAS, whose summation order differs.
#pragma once
#include <cstdint>

#include "planner/spec/spec.hpp"

namespace parplan::runtime::host {

uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_fp16(float f);
float fp16_to_float(uint16_t h);
uint8_t float_to_fp8_e4m3(float f);  // saturates to +-448; NaN stays NaN
float fp8_e4m3_to_float(uint8_t v);

// Element i of a buffer of `dtype`, widened to float (tf32 is stored as fp32).
float load(const void* base, int64_t i, DType dtype);
// Stores f into element i, rounded to `dtype`.
void store(void* base, int64_t i, DType dtype, float f);

// Widens `count` elements starting at element `first` into out[0..count).
void load_range(const void* base, int64_t first, int64_t count, DType dtype, float* out);
// Rounds in[0..count) into elements [first, first + count).
void store_range(void* base, int64_t first, int64_t count, DType dtype, const float* in);

}  // namespace parplan::runtime::host
