// Tests for planner/plan_json: the Plan document round-trips; names and inline specs both work; errors name paths.
#include <doctest/doctest.h>
#include <fmt/core.h>

#include "planner/cost/cost_model.hpp"
#include "planner/spec/config.hpp"
#include "planner/spec/error.hpp"
#include "planner/spec/plan_json.hpp"
#include "planner/spec/profiles.hpp"
#include "planner/spec/spec_json.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

TEST_CASE("plan_to_json -> plan_from_json gives the same estimate") {
  const Plan p = test::korthikanti_175b();
  const nlohmann::json j = plan_to_json(p);
  const Plan q = plan_from_json(j, test::profiles(), "plan.json");
  CHECK(plan_to_json(q) == j);
  CHECK(estimate(q).time.step_s == doctest::Approx(estimate(p).time.step_s).epsilon(1e-12));
}

TEST_CASE("stage_layers round-trips, per stage and per chunk, and moves the estimate") {
  Plan p = test::korthikanti_175b();  // interleaved, vpp 3, 96 layers on 8 stages
  p.parallel.stage_layout = {{3, 4, 4}, {12}, {4, 4, 4}, {5, 5, 4}, {12}, {12}, {12}, {4, 4, 3}};
  const nlohmann::json j = plan_to_json(p);
  CHECK(j["parallel"]["stage_layers"] == nlohmann::json::parse("[[3,4,4],12,[4,4,4],[5,5,4],12,12,12,[4,4,3]]"));
  const Plan q = plan_from_json(j, test::profiles(), "plan.json");
  CHECK(q.parallel.stage_layout == p.parallel.stage_layout);
  CHECK(plan_to_json(q) == j);
  CHECK(estimate(q).time.step_s == doctest::Approx(estimate(p).time.step_s).epsilon(1e-12));
  CHECK(estimate(q).time.step_s > estimate(test::korthikanti_175b()).time.step_s);  // stage 3 holds 14 layers
}

TEST_CASE("a hand-written plan may name profiles; the GPU comes from the cluster") {
  const char* text = R"({"model":"gpt3-175b","cluster":"dgx-a100","num_gpus":64,
    "parallel":{"dp":1,"tp":8,"pp":8,"num_microbatches":64,"recompute":"selective","sequence_parallel":true},
    "training":{"global_batch":64}})";
  const Plan p = plan_from_text(text, test::profiles(), "plan.json");
  CHECK(p.gpu.name == "A100-SXM4-80GB");
  CHECK(p.model.layers == 96);
  CHECK(p.seq_len() == 2048);
}

TEST_CASE("without num_microbatches a plan derives it from the global batch, as the flags do") {
  const char* text = R"({"model":"gpt3-175b","cluster":"dgx-a100","num_gpus":64,
    "parallel":{"dp":2,"tp":8,"pp":4,"micro_batch":2},"training":{"global_batch":64}})";
  const Plan p = plan_from_text(text, test::profiles(), "plan.json");
  CHECK(p.parallel.num_microbatches == 16);  // 64 / (dp 2 x micro-batch 2); it was 1
  // Not divisible: left to the batch check, which names the mismatch.
  const char* odd = R"({"model":"gpt3-175b","cluster":"dgx-a100","num_gpus":64,
    "parallel":{"dp":2,"tp":8,"pp":4,"micro_batch":2},"training":{"global_batch":66}})";
  CHECK(plan_from_text(odd, test::profiles(), "plan.json").parallel.num_microbatches == 1);
}

TEST_CASE("plan errors name the file and JSON path") {
  auto err = [](const char* text) {
    try {
      plan_from_text(text, test::profiles(), "plan.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(err(R"({"model":"nope","cluster":"dgx-a100","num_gpus":8,"parallel":{"dp":8,"tp":1,"pp":1},"training":{"global_batch":8}})")
            .rfind("plan.json: /model: unknown model 'nope'", 0) == 0);
  CHECK(err(R"({"model":"gpt3-175b","cluster":"dgx-a100","num_gpus":8,"parallel":{"dp":8,"tp":1,"pp":1,"zero":1},"training":{"global_batch":8}})") ==
        "plan.json: /parallel/zero: unknown key");
  CHECK(err(R"({"model":"gpt3-175b","cluster":"dgx-a100","num_gpus":8,"parallel":{"dp":8,"tp":1,"pp":1,"schedule":"2f2b"},"training":{"global_batch":8}})") ==
        "plan.json: /parallel/schedule: unknown value '2f2b'");
  CHECK(err(R"({"model":"gpt3-175b","cluster":"dgx-a100","num_gpus":8,"parallel":{"dp":100000000,"tp":100000000,"pp":1},"training":{"global_batch":8}})")
            .find("/parallel/dp") != std::string::npos);
  CHECK(err(R"({"parplan_plan":2})") == "plan.json: /parplan_plan: 2 is out of range [1, 1]");
}

// Zero Bubble's optimizer post-validation: the key round-trips; a ZB-2p step is shorter with it (no warm-up fill in a
// continuous run, pipeline.hpp), validate() refuses it beside a schedule that is not zero-bubble.
TEST_CASE("post_validation round-trips, shortens a ZB-2p step, and needs a zero-bubble schedule") {
  Plan p = test::korthikanti_175b();
  p.parallel.schedule = Schedule::zb_2p;
  p.parallel.vpp = 1;
  REQUIRE(validate(p).ok());
  const Estimate one = estimate(p);
  p.parallel.post_validation = true;
  REQUIRE(validate(p).ok());
  const nlohmann::json j = plan_to_json(p);
  CHECK(j["parallel"]["post_validation"] == true);
  const Plan q = plan_from_json(j, test::profiles(), "plan.json");
  CHECK(q.parallel.post_validation);
  CHECK(estimate(q).time.step_s < one.time.step_s);
  CHECK(estimate(q).time.compute_s == doctest::Approx(one.time.compute_s));
  p.parallel.schedule = Schedule::one_f_one_b;
  CHECK(validate(p).has(Reject::post_validation_invalid));
}

TEST_CASE("overlap_p2p_comm round-trips and moves the interleaved plan's p2p from every microbatch to the fill/drain path") {
  Plan p = test::korthikanti_175b();
  p.parallel.schedule = Schedule::interleaved;
  p.parallel.vpp = 3;
  REQUIRE(p.parallel.num_microbatches % p.parallel.pp == 0);
  const Estimate waited = estimate(p);
  p.parallel.overlap_p2p_comm = true;
  const nlohmann::json j = plan_to_json(p);
  CHECK(j["parallel"]["overlap_p2p_comm"] == true);
  const Plan q = plan_from_json(j, test::profiles(), "plan.json");
  CHECK(q.parallel.overlap_p2p_comm);
  const Estimate overlapped = estimate(q);
  const double pv = static_cast<double>(p.parallel.pp * 3), m = static_cast<double>(p.parallel.num_microbatches);
  // Waited sends: 2 v transfers per microbatch on a middle stage, one fewer on the first (it sends no gradient
  // back) and the last (no activation on); the slowest stage here is the last (the output layer).
  const size_t last = waited.stages.size() - 1;
  CHECK(waited.stages[0].p2p_s == doctest::Approx(5.0 * waited.p2p_s).epsilon(1e-12));
  CHECK(waited.stages[1].p2p_s == doctest::Approx(6.0 * waited.p2p_s).epsilon(1e-12));
  CHECK(waited.stages[last].p2p_s == doctest::Approx(5.0 * waited.p2p_s).epsilon(1e-12));
  REQUIRE(waited.time.slowest_stage == static_cast<int64_t>(last));
  CHECK(waited.time.pp_comm_s == doctest::Approx(m * 5.0 * waited.p2p_s).epsilon(1e-12));
  CHECK(overlapped.time.pp_comm_s == doctest::Approx(2.0 * (pv - 1.0) * waited.p2p_s).epsilon(1e-12));
  CHECK(overlapped.time.step_s < waited.time.step_s);
}

TEST_CASE("GPU profiles written back read as the same bytes, in the file's units") {
  const ProfileSet set = test::profiles();
  for (const auto& e : set.entries()) {
    if (e.kind != "gpu") continue;
    CAPTURE(e.name);
    const GpuSpec& g = *set.find_gpu(e.name);
    nlohmann::json j = to_json(g);
    j["aliases"] = e.aliases;
    ProfileSet again;
    again.add(j.dump(), "again.json");
    const GpuSpec& h = *again.find_gpu(e.name);
    CHECK(h.memory_bytes == g.memory_bytes);
    CHECK(h.cuda_context_bytes == g.cuda_context_bytes);
    CHECK(h.workspace_bytes == g.workspace_bytes);
    CHECK(h.comm_buffer_bytes_per_group == g.comm_buffer_bytes_per_group);
    // the shortest decimal that reads back as those bytes: at most 6 significant digits for the shipped profiles
    CHECK(fmt::format("{}", j["memory_GiB"].get<double>()).size() <= 7);
  }
}

TEST_CASE("plan documents are a fixed point for DP bucket sizes in MB (a unit that is not a power of two)") {
  // 1001 bytes (--bucket-mb 0.0010011) was written as 0.001001 MB, read back as 1000 bytes.
  for (int64_t bytes : {int64_t{1001}, int64_t{1000001}, int64_t{40000000}, int64_t{123456789}, int64_t{1000}}) {
    Plan p = test::korthikanti_175b();
    p.training.dp_bucket_bytes = bytes;
    const Plan q = plan_from_json(plan_to_json(p), test::profiles(), "plan.json");
    CAPTURE(bytes);
    CHECK(q.training.dp_bucket_bytes == bytes);
  }
  int64_t failures = 0;
  for (int64_t bytes = 1000; bytes < 200000; bytes += 7) {  // 0.001 MB is the smallest bucket
    Plan p = test::korthikanti_175b();
    p.training.dp_bucket_bytes = bytes;
    failures += plan_from_json(plan_to_json(p), test::profiles(), "plan.json").training.dp_bucket_bytes != bytes;
  }
  CHECK(failures == 0);
}

TEST_CASE("offload round-trips through the plan document; omitted means none; the cluster keeps its host fields") {
  Plan p = test::korthikanti_175b();
  p.parallel.zero_stage = 1;
  p.parallel.offload.optimizer = true;
  const nlohmann::json j = plan_to_json(p);
  CHECK(j["parallel"]["offload"] == "optimizer");
  CHECK(j["cluster"]["host_link"]["bandwidth_GBps"] == 32.0);
  CHECK(j["cluster"]["host_memory_GiB"] == 2048.0);
  const Plan q = plan_from_json(j, test::profiles(), "plan.json");
  CHECK(q.parallel.offload == p.parallel.offload);
  CHECK(q.cluster.host_link.bandwidth_Bps == p.cluster.host_link.bandwidth_Bps);
  CHECK(q.cluster.host_memory_bytes == p.cluster.host_memory_bytes);
  CHECK(q.cluster.host_adam_params_per_s == doctest::Approx(p.cluster.host_adam_params_per_s));
  CHECK(estimate(q).time.step_s == doctest::Approx(estimate(p).time.step_s).epsilon(1e-12));
  CHECK(!plan_to_json(test::korthikanti_175b())["parallel"].contains("offload"));
}

TEST_CASE("MoE routing, alternating layers and MTP round-trip through the plan document's model; defaults stay unwritten") {
  Plan p;
  p.model = test::profiles().model("llama4-maverick", "test");
  p.gpu = test::profiles().gpu("h100", "test");
  p.cluster = test::profiles().cluster("dgx-h100", "test");
  p.num_gpus = 64;
  p.parallel.pp = 4;
  p.parallel.dp = 16;
  p.parallel.ep = 8;
  p.parallel.num_microbatches = 4;
  p.parallel.recompute = Recompute::full;
  p.training.global_batch = 64;
  const nlohmann::json plain = plan_to_json(p);
  CHECK(plain["model"]["interleave_moe_layer_step"] == 2);
  CHECK_FALSE(plain["model"].contains("moe"));  // dropless and balanced: not written
  CHECK_FALSE(plain["model"].contains("mtp_layers"));
  p.model.capacity_factor = 1.25;
  p.model.mtp_layers = 1;
  const nlohmann::json j = plan_to_json(p);
  CHECK(j["model"]["moe"] == nlohmann::json::parse(R"({"capacity_factor": 1.25, "imbalance": 1.0})"));
  CHECK(j["model"]["mtp_layers"] == 1);
  const Plan q = plan_from_json(j, test::profiles(), "plan.json");
  CHECK(q.model.capacity_factor == 1.25);
  CHECK(q.model.mtp_layers == 1);
  CHECK(q.model.moe_layer_step == 2);
  CHECK(plan_to_json(q) == j);
  CHECK(estimate(q).time.step_s == doctest::Approx(estimate(p).time.step_s).epsilon(1e-12));
  // Dropless with an imbalance is written as "none" and read back.
  p.model.capacity_factor = 0;
  p.model.imbalance = 1.3;
  const nlohmann::json k = plan_to_json(p);
  CHECK(k["model"]["moe"]["capacity_factor"] == "none");
  const Plan r = plan_from_json(k, test::profiles(), "plan.json");
  CHECK(r.model.capacity_factor == 0);
  CHECK(r.model.imbalance == 1.3);
  CHECK(estimate(r).time.step_s > estimate(plan_from_json(plain, test::profiles(), "plan.json")).time.step_s);
  // Group-limited routing round-trips beside them.
  p.model.router_groups = 4;
  p.model.router_group_top_k = 2;
  const nlohmann::json g = plan_to_json(p);
  CHECK(g["model"]["moe"]["router_groups"] == 4);
  CHECK(g["model"]["moe"]["router_group_top_k"] == 2);
  const Plan back = plan_from_json(g, test::profiles(), "plan.json");
  CHECK(back.model.router_groups == 4);
  CHECK(back.model.router_group_top_k == 2);
  CHECK(plan_to_json(back) == g);
}

// recompute_layers round-trips (omitted at 0); with an explicit per-chunk layout a chunk of fewer layers than k
// recomputes all of them (Megatron-Core's block method: layer l of the chunk when l < k), here stage 0's chunk of 3.
TEST_CASE("recompute_layers round-trips and prices the uneven chunks of a layout") {
  Plan p = test::korthikanti_175b();
  p.parallel.recompute = Recompute::full;
  p.parallel.stage_layout = {{3, 4, 4}, {12}, {4, 4, 4}, {5, 5, 4}, {12}, {12}, {12}, {4, 4, 3}};
  CHECK_FALSE(plan_to_json(p)["parallel"].contains("recompute_layers"));
  Plan half = p;
  half.parallel.recompute_layers = 4;
  const nlohmann::json j = plan_to_json(half);
  CHECK(j["parallel"]["recompute_layers"] == 4);
  const Plan q = plan_from_json(j, test::profiles(), "plan.json");
  CHECK(q.parallel.recompute_layers == 4);
  CHECK(plan_to_json(q) == j);
  CHECK(chunk_recomputed_layers(q, 0, 0) == 3);
  CHECK(chunk_recomputed_layers(q, 3, 0) == 4);
  CHECK(stage_recomputed_layers(q, 3).layers == 12);  // 4 of 5, 4 of 5, 4 of 4
  const Estimate eq = estimate(q), ep = estimate(p);
  CHECK(eq.time.step_s == doctest::Approx(estimate(half).time.step_s).epsilon(1e-12));
  CHECK(eq.time.step_s < ep.time.step_s);
  CHECK(eq.memory[3].activations > ep.memory[3].activations);  // 2 layers of stage 3 keep everything
  CHECK(eq.memory[0].activations == doctest::Approx(ep.memory[0].activations));  // every chunk of stage 0 recomputed
}
