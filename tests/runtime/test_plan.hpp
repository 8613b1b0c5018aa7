// A small dense model and a dp x tp x pp = 2 x 2 x 2 plan on the H100 profile, shared by the lowering and executor tests.
#pragma once
#include <vector>

#include "planner/profiles.hpp"
#include "planner/spec.hpp"
#include "runtime/lower.hpp"

namespace parplan::runtime::testing {

inline Plan small_plan(int64_t dp = 2, int64_t tp = 2, int64_t pp = 2, int64_t microbatches = 2) {
  const ProfileSet profiles = ProfileSet::embedded();
  Plan p;
  p.model.name = "tiny";
  p.model.layers = 4;
  p.model.hidden = 64;
  p.model.heads = 4;
  p.model.kv_heads = 4;
  p.model.ffn_hidden = 256;
  p.model.vocab = 128;
  p.model.seq_len = 32;
  p.gpu = profiles.gpu("H100-SXM5-80GB", "test");
  p.cluster = profiles.cluster("dgx-h100", "test");
  p.num_gpus = dp * tp * pp;
  p.parallel.dp = dp;
  p.parallel.tp = tp;
  p.parallel.pp = pp;
  p.parallel.micro_batch = 1;
  p.parallel.num_microbatches = microbatches;
  p.training.global_batch = dp * microbatches;
  p.training.dp_bucket_bytes = 40'000;  // a few buckets for this model's gradients
  return p;
}

// The 1F1B order of one stage for these tests (in the product this comes from the simulator's schedule):
// warm-up forwards min(p - stage - 1, m), then one forward / one backward, then the remaining backwards.
inline std::vector<ScheduleStep> one_f_one_b(int64_t p, int64_t m, int64_t stage) {
  std::vector<ScheduleStep> out;
  const int64_t warm = std::min(p - stage - 1, m);
  int64_t f = 0, b = 0;
  for (; f < warm; ++f) out.push_back({Phase::forward, f, 0});
  while (f < m) {
    out.push_back({Phase::forward, f++, 0});
    out.push_back({Phase::backward, b++, 0});
  }
  while (b < m) out.push_back({Phase::backward, b++, 0});
  return out;
}

}  // namespace parplan::runtime::testing
