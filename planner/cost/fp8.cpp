// FP8 quantization work (formulas and sources in fp8.hpp).
#include "planner/cost/fp8.hpp"

namespace parplan {

Fp8CastBytes fp8_cast_bytes(const Plan& plan, double layer_params) {
  Fp8CastBytes c;
  if (plan.training.precision != Precision::fp8) return c;
  const ModelSpec& m = plan.model;
  const ParallelConfig& pc = plan.parallel;
  auto d = [](int64_t x) { return static_cast<double>(x); };
  const double tp = d(pc.tp), T = d(pc.micro_batch) * d(plan.seq_len()) / d(pc.cp);
  const double h = d(m.hidden), f = d(m.ffn_hidden) / tp, ctx = d(m.context_dim()) / tp;
  const double up = (m.ffn_type == FfnType::swiglu ? 2.0 : 1.0) * f;
  const double qkv = d(m.q_dim() + m.k_width() + m.v_width()) / tp;
  const double routed = m.mlp_copies_per_token();
  // Inputs: QKV (h), attention out (context), MLP up (h per routed copy), MLP down (f per routed copy).
  c.inputs = T * (h + ctx + routed * (h + f));
  // Output gradients: QKV (q + k + v), attention out (h), MLP up (up per routed copy), MLP down (h per routed copy).
  c.output_grads = T * (qkv + h + routed * (up + h));
  c.weights = layer_params;
  const double A = d(dtype_bytes(plan.activation_dtype()));
  const Fp8Recipe r = plan.training.fp8_recipe;
  const double amax = r == Fp8Recipe::tensorwise || r == Fp8Recipe::rowwise ? A : 0.0;
  // Weights held in fp8 (fp8_param_gather) are cast once per step, by the optimizer step that writes them.
  const double cast_weights = plan.training.fp8_param_gather ? 0.0 : c.weights;
  // TP all-gathers in fp8 (fp8_tp_gather): the column-parallel GEMMs' inputs (QKV, MLP up: h each) and the
  // row-parallel GEMMs' output gradients (attention out, MLP down: h each) are cast on this rank's 1/tp of the
  // tokens, before their all-gather; the gathered fp8 gradient is then transposed alone (read 1, write 1).
  const double gathered = plan.training.fp8_tp_gather ? T * h * (1.0 + routed) : 0.0;
  c.forward = (c.inputs - gathered * (1.0 - 1.0 / tp) + cast_weights) * (A + 1.0 + amax);
  if (r == Fp8Recipe::rowwise) {
    const double requantize = 2.0 * A + 1.0;  // amax along the other dimension, then the cast
    c.backward = requantize * (2.0 * c.output_grads + c.inputs + c.weights);
  } else {
    c.backward = (c.output_grads - gathered) * (A + 2.0 + amax) + gathered * ((A + 1.0 + amax) / tp + 2.0) +
                 2.0 * c.inputs + 2.0 * c.weights;
  }
  return c;
}

}  // namespace parplan
