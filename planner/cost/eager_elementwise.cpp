// Uncompiled PyTorch's element-wise ops, kernel by kernel (derivations in eager_elementwise.hpp).
#include "planner/cost/eager_elementwise.hpp"

namespace parplan {
namespace {
constexpr double kF32 = 4.0;  // bytes of an fp32 element
// The fp32 upcast (x.float()) or downcast (.type_as(x)) of one element: read one dtype, write the other; no kernel
// when the activations are fp32 already.
double cast_bytes(double A) { return A < kF32 ? A + kF32 : 0.0; }
int casts(double A) { return A < kF32 ? 1 : 0; }
}  // namespace

EagerOp eager_rmsnorm(double A) {
  EagerOp op;
  op.forward_bytes = 5.0 * kF32 + 2.0 * A + 2.0 * cast_bytes(A);
  op.backward_bytes = 6.0 * A + 17.0 * kF32 + 2.0 * cast_bytes(A);
  op.forward_kernels = 6 + 2 * casts(A);
  op.backward_kernels = 14 + 2 * casts(A);
  return op;
}

EagerOp eager_rotary(double A) {
  EagerOp op;
  op.forward_bytes = op.backward_bytes = 2.0 * kF32 + 2.0 * cast_bytes(A);
  op.forward_kernels = op.backward_kernels = 1 + 2 * casts(A);
  return op;
}

EagerOp eager_swiglu(double A) { return {5.0 * A, 9.0 * A, 2, 3}; }

EagerOp eager_dropout_add(double A) { return {5.0 * A + 1.0, 5.0 * A + 1.0, 2, 2}; }

EagerLaunches eager_extra_launches(const EagerOp& op, int eager, int fused) {
  return {static_cast<double>(eager * op.forward_kernels - fused), static_cast<double>(eager * op.backward_kernels - 2 * fused)};
}

}  // namespace parplan
