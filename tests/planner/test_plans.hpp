// Shared fixtures for planner tests: embedded profiles and the Korthikanti et al. 2022 GPT-3 175B plan.
#pragma once
#include "planner/spec/profiles.hpp"
#include "planner/spec/spec.hpp"

namespace parplan::test {

inline const ProfileSet& profiles() {
  static const ProfileSet set = ProfileSet::embedded();
  return set;
}

// GPT-3 175B on 64 A100-80GB (DGX A100): tp 8, pp 8, dp 1, batch 64, micro-batch 1, interleaved v=3,
// selective recompute + sequence parallel, fp16, unfused attention (Korthikanti et al. 2022, Table 3 / Sec. 6).
inline Plan korthikanti_175b() {
  Plan p;
  p.model = profiles().model("gpt3-175b", "test");
  p.gpu = profiles().gpu("a100-80gb", "test");
  p.cluster = profiles().cluster("dgx-a100", "test");
  p.num_gpus = 64;
  p.parallel.tp = 8;
  p.parallel.pp = 8;
  p.parallel.dp = 1;
  p.parallel.micro_batch = 1;
  p.parallel.num_microbatches = 64;
  p.parallel.schedule = Schedule::interleaved;
  p.parallel.vpp = 3;
  p.parallel.recompute = Recompute::selective;
  p.parallel.sequence_parallel = true;
  p.training.precision = Precision::fp16;
  p.training.attention = AttentionKernel::unfused;
  p.training.grad_fp32 = false;
  p.training.global_batch = 64;
  p.training.seq_len = 2048;
  return p;
}

// The same model and cluster without a pipeline: tp 8 x dp 8, micro-batch 1, m microbatches, ZeRO `zero`, full
// recompute (dp crosses nodes: the reduce-scatters and ZeRO-3 gathers run on InfiniBand).
inline Plan korthikanti_175b_sharded_dp(int zero, int64_t m) {
  Plan p = korthikanti_175b();
  p.parallel.pp = 1;
  p.parallel.vpp = 1;
  p.parallel.schedule = Schedule::one_f_one_b;
  p.parallel.sequence_parallel = false;
  p.parallel.dp = 8;
  p.parallel.zero_stage = zero;
  p.parallel.recompute = Recompute::full;
  p.parallel.num_microbatches = m;
  p.num_gpus = 64;
  p.training.global_batch = 8 * m;
  return p;
}

}  // namespace parplan::test
