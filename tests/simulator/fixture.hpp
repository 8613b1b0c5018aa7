// Shared fixture for the output tests: a small 1F1B step (p 2, m 3) with p2p and DP buckets, costs given by hand
// (independent of the cost model, so the golden trace changes only when the simulator or the format does).
#pragma once
#include "simulator/simulate.hpp"

namespace parplan::sim::test {

inline SimResult small_step() {
  StepCosts c;
  c.p2p_s = 0.5e-3;
  c.p2p_bytes = 1 << 20;
  c.stages.resize(2);
  for (auto& st : c.stages) {
    st.chunks.resize(1);
    st.chunks[0].forward_s = 1e-3;
    st.chunks[0].forward_comm_s = 0.25e-3;
    st.chunks[0].backward_input_s = 1.5e-3;
    st.chunks[0].backward_weight_s = 0.5e-3;
    st.dp_buckets = 2;
    st.dp_bucket_s = 0.75e-3;
    st.dp_bucket_bytes = 1 << 22;
    st.optimizer_s = 0.5e-3;
  }
  return simulate_costs(make_schedule(Schedule::one_f_one_b, 2, 3), c);
}

}  // namespace parplan::sim::test
