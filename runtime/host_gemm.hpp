// The host backend's CPU GEMM: blocked, fp32 accumulation, operands in their stored dtype (see host_numeric.hpp).
#pragma once
#include "runtime/backend.hpp"

namespace parplan::runtime::host {

// C = A * op(B) (or C += when s.accumulate) with the layouts documented on GemmShape. a, b, c point at the
// first element of batch 0. Blocked over m, n and k so each tile of B is widened to float once per block.
void gemm(const GemmShape& s, const void* a, const void* b, void* c);

// The textbook triple loop with the same semantics, for tests.
void gemm_reference(const GemmShape& s, const void* a, const void* b, void* c);

}  // namespace parplan::runtime::host
