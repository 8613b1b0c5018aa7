// Benchmark: simulate one 1F1B step with p = 64 stages and m = 1,024 microbatches; prints wall time and events/s.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "simulator/simulate.hpp"

using namespace parplan;
using namespace parplan::sim;

int main(int argc, char** argv) {
  const int64_t p = argc > 1 ? std::atoll(argv[1]) : 64;
  const int64_t m = argc > 2 ? std::atoll(argv[2]) : 1024;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  // Uniform stages with p2p transfers and DP buckets, so the graph has compute, transfer and bucket tasks.
  StepCosts c;
  c.p2p_s = 1e-4;
  c.p2p_bytes = 1 << 24;
  c.stages.resize(static_cast<size_t>(p));
  for (auto& st : c.stages) {
    st.chunks.resize(1);
    st.chunks[0].forward_s = 1e-3;
    st.chunks[0].backward_input_s = 1.5e-3;
    st.chunks[0].backward_weight_s = 0.5e-3;
    st.dp_buckets = 8;
    st.dp_bucket_s = 2e-4;
    st.optimizer_s = 1e-3;
  }
  const PipelineSchedule s = make_schedule(Schedule::one_f_one_b, p, m);
  SimOptions o;
  double best = 1e30, best_summary = 1e30;
  SimResult r;
  for (int k = 0; k < reps; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    r = simulate_costs(s, c, o);
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  o.record_timeline = false;
  for (int k = 0; k < reps; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    const SimResult q = simulate_costs(s, c, o);
    const auto t1 = std::chrono::steady_clock::now();
    best_summary = std::min(best_summary, std::chrono::duration<double>(t1 - t0).count());
  }
  std::printf("1F1B p=%lld m=%lld: %lld tasks, %lld events, simulated step %.4f s\n", static_cast<long long>(p),
              static_cast<long long>(m), static_cast<long long>(r.summary.tasks), static_cast<long long>(r.summary.events),
              r.summary.step_s);
  std::printf("  with timeline: %.3f s wall (best of %d), %.2f M events/s\n", best, reps,
              static_cast<double>(r.summary.events) / best / 1e6);
  std::printf("  summary only:  %.3f s wall (best of %d), %.2f M events/s\n", best_summary, reps,
              static_cast<double>(r.summary.events) / best_summary / 1e6);
  return 0;
}
