// A small dense model and a dp x tp x pp = 2 x 2 x 2 plan on the H100 profile, shared by the lowering and executor tests.
#pragma once
#include <vector>

#include "planner/spec/profiles.hpp"
#include "planner/spec/spec.hpp"
#include "runtime/lower.hpp"
#include "runtime/schedule_source.hpp"

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

// The order of one stage for these tests: the simulator's schedule (via the runtime's adapter).
inline std::vector<ScheduleStep> one_f_one_b(int64_t p, int64_t m, int64_t stage) {
  Plan plan = small_plan(2, 2, p, m);
  plan.parallel.schedule = Schedule::one_f_one_b;
  return stage_schedule(plan, stage);
}

}  // namespace parplan::runtime::testing
