// Tests for planner/config: one case per rejection reason, and stage layer assignment.
#include <doctest/doctest.h>

#include "planner/spec/config.hpp"
#include "planner/spec/error.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

TEST_CASE("the Korthikanti 175B plan is valid") { CHECK(validate(test::korthikanti_175b()).ok()); }

namespace {
// The plan breaks rule r and no other, and r has a description.
void expect_only(const Plan& p, Reject r) {
  const Validity v = validate(p);
  CHECK_MESSAGE(v.has(r), reject_name(r));
  Validity only;
  only.add(r);
  CHECK_MESSAGE(v.mask == only.mask, reject_name(r), " mask ", v.mask);
  CHECK(!describe(r, p).empty());
}
}  // namespace

TEST_CASE("every rejection reason fires on its own") {
  Plan p = test::korthikanti_175b();
  p.num_gpus = 128;
  expect_only(p, Reject::gpu_count_mismatch);
  p = test::korthikanti_175b();
  p.parallel.tp = 16;
  p.parallel.pp = 4;
  expect_only(p, Reject::tp_crosses_node);
  p = test::korthikanti_175b();
  p.model.heads = 100;
  p.model.kv_heads = 100;
  p.model.hidden = 12800;
  p.model.ffn_hidden = 51200;
  expect_only(p, Reject::tp_not_dividing_heads);
  p = test::korthikanti_175b();
  p.model.ffn_hidden = 49153;
  expect_only(p, Reject::tp_not_dividing_ffn);
  p = test::korthikanti_175b();
  p.model.layers = 6;
  p.parallel.schedule = Schedule::one_f_one_b;
  p.parallel.vpp = 1;
  expect_only(p, Reject::pp_exceeds_layers);
  p = test::korthikanti_175b();
  p.parallel.vpp = 5;  // 96 % 40 != 0
  expect_only(p, Reject::vpp_invalid);
  // Interleaving with uneven stages: every stage's layers must split into vpp chunks.
  p = test::korthikanti_175b();  // 96 layers, pp 8, interleaved
  p.parallel.vpp = 2;
  p.parallel.last_stage_layers = 12;  // 7 x 12 + 12: valid (the even split spelled out)
  CHECK(validate(p).ok());
  p.parallel.last_stage_layers = 5;  // 7 x 13 + 5 -> 13 layers do not split into 2 chunks
  expect_only(p, Reject::vpp_invalid);
  CHECK(describe(Reject::vpp_invalid, p).find("hold 5..13 of 96 layers") != std::string::npos);
  p.parallel.last_stage_layers = 0;
  p.model.layers = 94;  // 94 = 6 x 12 + 2 x 11: no even split interleaves; the message names one that does
  expect_only(p, Reject::vpp_invalid);
  CHECK(describe(Reject::vpp_invalid, p).find("--last-stage-layers 10") != std::string::npos);
  p.parallel.last_stage_layers = 10;  // 7 x 12 + 10
  CHECK(validate(p).ok());
  CHECK(stage_layers_divisible(p, 2));
  CHECK_FALSE(stage_layers_divisible(p, 4));
  CHECK(interleaved_last_stage_layers(126, 16, 2) == 6);  // Llama 3 405B on 16 stages: 15 x 8 + 6
  CHECK(interleaved_last_stage_layers(96, 8, 2) == 0);    // an even split (12) interleaves
  CHECK(interleaved_last_stage_layers(48, 4, 2) == 0);    // 12 each interleaves; 3 x 14 + 6 would too but is not needed
  CHECK(interleaved_last_stage_layers(50, 4, 2) == 8);    // 3 x 14 + 8
  CHECK(interleaved_last_stage_layers(94, 8, 2) == 10);
  CHECK(interleaved_last_stage_layers(10, 1, 2) == 0);
  p = test::korthikanti_175b();
  p.parallel.schedule = Schedule::one_f_one_b;
  p.parallel.first_stage_layers = 95;
  p.parallel.vpp = 1;
  expect_only(p, Reject::uneven_stages_invalid);
  p = test::korthikanti_175b();
  p.parallel.cp = 2;
  p.parallel.pp = 4;
  p.training.seq_len = 2050;
  p.model.seq_len = 2050;
  p.parallel.num_microbatches = 64;
  expect_only(p, Reject::cp_not_dividing_seq);
  p = test::korthikanti_175b();
  p.parallel.ep = 2;
  expect_only(p, Reject::ep_invalid);
  p = test::korthikanti_175b();
  p.training.global_batch = 65;
  expect_only(p, Reject::batch_not_divisible);
  p = test::korthikanti_175b();
  p.parallel.tp = 1;
  p.parallel.dp = 8;
  p.parallel.num_microbatches = 8;
  expect_only(p, Reject::sp_without_tp);
  p = test::korthikanti_175b();
  p.parallel.zero_stage = 3;  // with pp 8: runs as ZeRO-1 within the step (FSDP with PP), no longer refused
  CHECK(validate(p).ok());
  CHECK(p.parallel.step_zero_stage() == 1);
  p = test::korthikanti_175b();
  p.training.precision = Precision::fp8;
  expect_only(p, Reject::precision_unsupported);
  p = test::korthikanti_175b();
  p.parallel.schedule = Schedule::zero_bubble;
  p.parallel.vpp = 1;
  p.parallel.recompute = Recompute::full;
  expect_only(p, Reject::zb_full_recompute);
  p.parallel.recompute = Recompute::selective;
  CHECK(validate(p).ok());
  // Only the interleaved schedule overlaps its pipeline sends (Megatron-Core); elsewhere the field would be ignored.
  p.parallel.overlap_p2p_comm = true;
  expect_only(p, Reject::overlap_p2p_not_interleaved);
  CHECK(describe(Reject::overlap_p2p_not_interleaved, p) ==
        "schedule zb-h1 waits for its pipeline sends; only the interleaved schedule overlaps them (give --vpp 2 or more)");
  p.parallel.schedule = Schedule::interleaved;
  p.parallel.vpp = 2;
  CHECK(validate(p).ok());
}

TEST_CASE("validate: sequence parallelism needs tp to divide each rank's tokens (Megatron-LM: seq % tp)") {
  Plan p = test::korthikanti_175b();  // tp 8, SP, seq 2048
  REQUIRE(p.parallel.sequence_parallel);
  p.training.seq_len = 2052;  // 2052 / 8 is not whole
  expect_only(p, Reject::sp_not_dividing_seq);
  CHECK(describe(Reject::sp_not_dividing_seq, p) ==
        "sequence parallelism splits each rank's 2052 tokens (seq 2052) over tp 8, which does not divide them");
  p.parallel.sequence_parallel = false;
  CHECK(validate(p).ok());
}

TEST_CASE("validate: a gather unit other than the layer needs ZeRO 3 (it would have no effect)") {
  Plan p = test::korthikanti_175b();
  p.parallel.zero3_gather_unit = Zero3GatherUnit::linear;
  for (const int z : {0, 1, 2}) {
    CAPTURE(z);
    p.parallel.zero_stage = z;
    expect_only(p, Reject::zero3_gather_unit_invalid);
  }
  p.parallel.zero_stage = 3;
  CHECK_FALSE(validate(p).has(Reject::zero3_gather_unit_invalid));
}

TEST_CASE("validate: the MoE all-to-all overlap needs an order that pairs passes (pp 1, interleaved, DualPipeV)") {
  Plan p = test::korthikanti_175b();  // 8 stages, interleaved
  p.model.experts = 8;
  p.model.top_k = 2;
  p.parallel.dp = 4;  // ep divides dp
  p.num_gpus *= 4;
  p.training.global_batch *= 4;
  p.parallel.ep = 4;
  p.parallel.overlap_ep_comm = true;
  REQUIRE(p.parallel.schedule == Schedule::interleaved);
  CHECK(validate(p).ok());
  for (const Schedule s : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::zero_bubble, Schedule::zb_2p}) {
    CAPTURE(to_string(s));
    p.parallel.schedule = s;
    p.parallel.vpp = 1;
    expect_only(p, Reject::overlap_ep_unpaired);
  }
  CHECK(describe(Reject::overlap_ep_unpaired, p) ==
        "schedule zb-2p at pp 8 runs no microbatch's forward beside another's backward, so no all-to-all hides: "
        "Megatron-Core's 1F1B A2A overlap needs pp 1 or the interleaved schedule (--vpp 2 or more), and DualPipeV "
        "pairs its own");
  // Without a pipeline: GPipe's order pairs nothing, 1F1B's does with two microbatches or more.
  Plan q = p;
  q.parallel.pp = 1;
  q.parallel.vpp = 1;
  q.num_gpus /= 8;
  q.parallel.schedule = Schedule::gpipe;
  expect_only(q, Reject::overlap_ep_unpaired);
  CHECK(describe(Reject::overlap_ep_unpaired, q) ==
        "schedule gpipe runs every forward before any backward, so no all-to-all hides: without a pipeline "
        "Megatron-Core's 1F1B A2A overlap pairs them under 1f1b");
  q.parallel.schedule = Schedule::one_f_one_b;
  CHECK(validate(q).ok());
  q.parallel.num_microbatches = 1;
  q.training.global_batch = q.parallel.dp * q.parallel.micro_batch;
  expect_only(q, Reject::overlap_ep_unpaired);
  CHECK(describe(Reject::overlap_ep_unpaired, q).starts_with("one microbatch per step: no other microbatch's pass"));
  p.parallel.ep = 1;  // no all-to-all: the field has nothing to act on
  CHECK(validate(p).ok());
  CHECK(pairs_passes(Schedule::one_f_one_b, 1, 2));
  CHECK_FALSE(pairs_passes(Schedule::one_f_one_b, 1, 1));  // one microbatch: nothing to pair with
  CHECK_FALSE(pairs_passes(Schedule::one_f_one_b, 2, 8));
  CHECK_FALSE(pairs_passes(Schedule::zb_v, 4, 16));
  CHECK(pairs_passes(Schedule::dualpipe_v, 4, 16));
  CHECK(pairs_passes(Schedule::interleaved, 4, 16));
}

TEST_CASE("stage layers: even split, remainder to middle stages, explicit first/last") {
  Plan p = test::korthikanti_175b();
  p.parallel.schedule = Schedule::one_f_one_b;
  p.parallel.vpp = 1;
  p.model.layers = 99;  // 99 = 8 x 12 + 3
  int64_t sum = 0;
  for (int64_t i = 0; i < 8; ++i) sum += stage_layers(p, i);
  CHECK(sum == 99);
  CHECK(stage_layers(p, 0) == 12);
  CHECK(stage_layers(p, 7) == 12);
  CHECK(stage_layers(p, 1) == 13);
  p.model.layers = 96;
  p.parallel.first_stage_layers = 10;
  p.parallel.last_stage_layers = 8;
  sum = 0;
  for (int64_t i = 0; i < 8; ++i) sum += stage_layers(p, i);
  CHECK(sum == 96);
  CHECK(stage_layers(p, 0) == 10);
  CHECK(stage_layers(p, 7) == 8);
  CHECK(validate(p).ok());
  // Only the last stage set: the free stages' remainder goes to the middle stages, not to stage 0 (which holds the
  // embedding and the most in-flight microbatches). Llama 3 70B's 80 layers on 4 stages with a 19-layer last stage.
  auto split = [&](int64_t pp) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < pp; ++i) v.push_back(stage_layers(p, i));
    return v;
  };
  p.parallel.pp = 4;
  p.model.layers = 80;
  p.parallel.first_stage_layers = 0;
  p.parallel.last_stage_layers = 19;
  CHECK(split(4) == std::vector<int64_t>{20, 21, 20, 19});
  p.parallel.last_stage_layers = 17;  // 63 over 3 free stages: even
  CHECK(split(4) == std::vector<int64_t>{21, 21, 21, 17});
  p.parallel.last_stage_layers = 15;  // 65: two extra layers, both to the middle
  CHECK(split(4) == std::vector<int64_t>{21, 22, 22, 15});
  p.model.layers = 82;  // 67 over 3: 22 each, the one extra to stage 1 (stage 0 is last in line: never extra)
  CHECK(split(4) == std::vector<int64_t>{22, 23, 22, 15});
  // Only the first stage set: middle stages, then the last stage.
  p.model.layers = 80;
  p.parallel.first_stage_layers = 19;
  p.parallel.last_stage_layers = 0;
  CHECK(split(4) == std::vector<int64_t>{19, 21, 20, 20});
  p.parallel.first_stage_layers = 16;  // 64 over 3: middle, middle, last
  CHECK(split(4) == std::vector<int64_t>{16, 22, 21, 21});
}

// Megatron-Core's --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split: Llama 3 405B's
// 126 layers over 16 stages (Dubey et al. 2024 Sec. 3.3.2: the first and the last stage hold one layer fewer) with
// 2 interleaved chunks, as Megatron splits 126 + 2 = 128 layers into 32 chunks of 4.
TEST_CASE("stage layers: Megatron's split counts the embedding and the loss as layers") {
  Plan p = test::korthikanti_175b();
  p.model.layers = 126;
  p.parallel.pp = 16;
  p.parallel.tp = 4;
  p.num_gpus = 64;
  p.parallel.vpp = 2;
  p.parallel.schedule = Schedule::interleaved;
  p.parallel.num_microbatches = 64;
  p.training.global_batch = 64;
  CHECK(validate(p).has(Reject::vpp_invalid));  // 126 / 16 does not interleave: 7..8 layers per stage
  CHECK(describe(Reject::vpp_invalid, p).find("--account-for-embedding-in-pipeline-split") != std::string::npos);
  p.parallel.embedding_in_pipeline_split = p.parallel.loss_in_pipeline_split = true;
  REQUIRE(validate(p).ok());
  CHECK(stage_layers(p, 0) == 7);
  CHECK(stage_layers(p, 15) == 7);
  int64_t total = 0;
  for (int64_t i = 0; i < 16; ++i) {
    if (i > 0 && i < 15) CHECK(stage_layers(p, i) == 8);
    total += stage_layers(p, i);
  }
  CHECK(total == 126);
  // Only the embedding: 127 layers do not split over 16 stages.
  p.parallel.loss_in_pipeline_split = false;
  CHECK(validate(p).has(Reject::uneven_stages_invalid));
  CHECK(describe(Reject::uneven_stages_invalid, p).find("do not split evenly") != std::string::npos);
  // Three chunks: 128 layers are not 48 equal chunks.
  p.parallel.loss_in_pipeline_split = true;
  p.parallel.vpp = 3;
  CHECK(validate(p).has(Reject::vpp_invalid));
  // Not together with explicit first / last stage layers.
  p.parallel.vpp = 2;
  p.parallel.first_stage_layers = 7;
  CHECK(validate(p).has(Reject::uneven_stages_invalid));
}

// Expert tensor parallelism with MoE parallel folding (Megatron-Core): ep x etp divide tp x cp x dp, not dp alone.
TEST_CASE("etp: ep x etp must divide tp x cp x dp; tp > 1 needs SP") {
  Plan p = test::korthikanti_175b();
  p.model.experts = 128;
  p.model.top_k = 8;
  p.parallel.tp = 2;
  p.parallel.pp = 2;
  p.parallel.dp = 16;
  p.parallel.vpp = 1;
  p.parallel.schedule = Schedule::one_f_one_b;
  p.num_gpus = 64;
  p.parallel.sequence_parallel = true;
  p.parallel.ep = 32;  // 32 does not divide dp 16: invalid without folding
  CHECK(validate(p).has(Reject::ep_invalid));
  p.parallel.etp = 1;  // folding: ep 32 x etp 1 divides tp 2 x dp 16
  CHECK_FALSE(validate(p).has(Reject::ep_invalid));
  p.parallel.etp = 2;  // 64 does not divide 32
  CHECK(validate(p).has(Reject::ep_invalid));
  // The message names the rule the mesh breaks, not every folding rule.
  CHECK(describe(Reject::ep_invalid, p) ==
        "ep 32 x etp 2: ep x etp must divide tp x cp x dp (32) (Megatron-Core MoE parallel folding)");
  p.parallel.etp = 1;
  p.parallel.sequence_parallel = false;
  CHECK(validate(p).has(Reject::ep_invalid));
  CHECK(describe(Reject::ep_invalid, p) ==
        "ep 32 x etp 1: tp 2 needs sequence parallelism (Megatron-Core MoE parallel folding)");
}

TEST_CASE("stage layers: an explicit layout, per stage or per chunk") {
  Plan p = test::korthikanti_175b();  // 96 layers, pp 8, interleaved with vpp 3
  p.parallel.stage_layout = parse_stage_layout("3/4/4,4/4/4,4/4/4,5/5/4,4/4/4,4/4/4,4/4/4,4/4/3", "--stage-layers");
  REQUIRE(p.parallel.stage_layout.size() == 8);
  CHECK(validate(p).ok());
  CHECK(stage_layers(p, 0) == 11);
  CHECK(stage_layers(p, 3) == 14);
  CHECK(stage_layers(p, 7) == 11);
  CHECK(chunk_layers(p, 0, 0) == 3);
  CHECK(chunk_layers(p, 3, 1) == 5);
  CHECK(chunk_layers(p, 7, 2) == 3);
  CHECK(uneven_chunks(p, 0));
  CHECK_FALSE(uneven_chunks(p, 1));
  CHECK(format_stage_layout(p.parallel.stage_layout) == "3/4/4,4/4/4,4/4/4,5/5/4,4/4/4,4/4/4,4/4/4,4/4/3");
  // A MoE model's 5 leading dense layers in model order over the chunks: stage 0's chunk 0 (3), then stage 1's (2).
  p.model.experts = 8;
  p.model.dense_layers = 5;
  CHECK(chunk_dense_layers(p, 0, 0) == 3);
  CHECK(chunk_dense_layers(p, 1, 0) == 2);
  CHECK(stage_dense_layers(p, 0) == 3);
  CHECK(stage_dense_layers(p, 1) == 2);
  CHECK(stage_dense_layers(p, 2) == 0);
  p.model = test::korthikanti_175b().model;

  // Per stage: interleaving needs each count divisible by vpp; 1F1B takes any.
  p.parallel.stage_layout = parse_stage_layout("11,12,12,14,12,12,12,11", "--stage-layers");
  CHECK(validate(p).has(Reject::vpp_invalid));
  p.parallel.schedule = Schedule::one_f_one_b;
  p.parallel.vpp = 1;
  CHECK(validate(p).ok());
  CHECK(stage_layers(p, 3) == 14);
  CHECK(chunk_layers(p, 3, 0) == 14);

  // Wrong sizes, sums, chunk counts and combinations: uneven_stages_invalid.
  for (const char* bad : {"12,12,12,12,12,12,24", "11,12,12,14,12,12,12,12", "0,24,12,12,12,12,12,12",
                          "4/4/4,12,12,12,12,12,12,12"}) {
    CAPTURE(bad);
    p.parallel.stage_layout = parse_stage_layout(bad, "--stage-layers");
    CHECK(validate(p).has(Reject::uneven_stages_invalid));
    CHECK(describe(Reject::uneven_stages_invalid, p).find("stage layers") != std::string::npos);
  }
  p.parallel.stage_layout = parse_stage_layout("11,12,12,14,12,12,12,11", "--stage-layers");
  p.parallel.first_stage_layers = 11;
  CHECK(validate(p).has(Reject::uneven_stages_invalid));

  for (const char* bad : {"", "3,,4", "3/x", "-1,2", "3;4", "3,4,"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_stage_layout(bad, "--stage-layers"), doctest::Contains("--stage-layers: "), InputError);
  }
}

// Megatron-Core's --pipeline-model-parallel-layout (megatron/core/transformer/pipeline_parallel_layer_layout.py): its
// DeepSeek-V3 recipes' 'Et*4|(tttt|)*14tmL' is 16 virtual stages of 4 transformer layers but the last, which holds one
// beside the MTP and the loss; virtual stage v is chunk v / pp of stage v % pp.
TEST_CASE("Megatron layout strings: DeepSeek-V3's 61 layers over pp 8 x 2 and pp 4 x 4") {
  const auto pp8 = parse_megatron_layout("Et*4|(tttt|)*14tmL", 8, "--pipeline-model-parallel-layout");
  CHECK(format_stage_layout(pp8) == "4/4,4/4,4/4,4/4,4/4,4/4,4/4,4/1");
  const auto pp4 = parse_megatron_layout("Et*4|(tttt|)*14tmL", 4, "--pipeline-model-parallel-layout");
  CHECK(format_stage_layout(pp4) == "4/4/4/4,4/4/4/4,4/4/4/4,4/4/4/1");
  CHECK(format_stage_layout(parse_megatron_layout("E|t*3|t*3|tL", 2, "x")) == "0/3,3/1");
  CHECK(format_stage_layout(parse_megatron_layout(" Ett | ttL ", 2, "x")) == "2,2");  // spaces are ignored
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {"Et*4|(tttt|)*14tmL", "16 virtual stages do not split over pp 3"},
           {"tE|tL", "E in virtual stage 0"},  // allowed: E in the first virtual stage
           {"t|Et|t|tL", "E in virtual stage 1"},
           {"tL|t", "L in virtual stage 0"},
           {"Etx|tL", "'x' is not E, t, m, L"},
           {"Et*|tL", "a '*' takes a count"},
           {"*2|tL", "a '*' repeats a letter"},
           {"Et)*2|tL", "a ')' without its '('"},
           {"(t*1000)*100000", "past a million letters"},
           {std::string(300, 't') + std::string(257, '*'), "longer than 4096 characters or 256 repeats"}}) {
    CAPTURE(bad);
    if (says == "E in virtual stage 0") {
      CHECK(format_stage_layout(parse_megatron_layout(bad, 2, "x")) == "1,1");
      continue;
    }
    try {
      parse_megatron_layout(bad, bad.starts_with("Et*4") ? 3 : 2, "--pipeline-model-parallel-layout");
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).starts_with("--pipeline-model-parallel-layout: "));
      CHECK(std::string(e.what()).find(says) != std::string::npos);
    }
  }
}
