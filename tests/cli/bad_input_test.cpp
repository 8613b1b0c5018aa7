// Bad-input suite (issue 9): every malformed file, flag or value gets exactly one stderr line naming the flag or
// JSON path, exit 2, no crash, no hang, no output file (partial or not). Fixtures: tests/cli/data/bad/.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "cli/run_helper.hpp"

namespace fs = std::filesystem;
using parplan::test::line_count;
using parplan::test::run_parplan;
using parplan::test::ScratchDir;

namespace {

const std::string kBad = std::string(PARPLAN_TEST_DIR) + "/cli/data/bad/";


struct BadCase {
  std::vector<std::string> args;
  std::string names;  // the flag or JSON path the single error line must contain
};

int g_cases_run = 0;

// Runs one bad invocation and checks the contract. `out_dir`, when given, must stay empty afterwards.
void expect_bad(const BadCase& c, const ScratchDir* out_dir = nullptr) {
  std::string cmd;
  for (const auto& a : c.args) cmd += " " + a;
  CAPTURE(cmd);
  const auto r = run_parplan(c.args, {}, 60);
  ++g_cases_run;
  CAPTURE(r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 2);
  CHECK(line_count(r.err) == 1);
  CHECK(r.err.rfind("parplan: error: ", 0) == 0);
  CHECK(r.err.find(c.names) != std::string::npos);
  CHECK(r.out.empty());
  if (out_dir) {
    const auto left = out_dir->entries();
    CHECK_MESSAGE(left.empty(), "files left behind: " << (left.empty() ? "" : left.front()));
  }
}

// Estimate cases get `-o <scratch>/plan.json`: an error must leave neither the plan nor a temporary file.
void expect_bad_estimate(std::vector<std::string> args, const std::string& names) {
  ScratchDir dir;
  args.insert(args.begin(), "estimate");
  args.push_back("-o");
  args.push_back((dir.path / "plan.json").string());
  expect_bad({args, names}, &dir);
}

const std::vector<std::string> kModel = {"--model", "gpt3-175b"};
const std::vector<std::string> kMoe = {"--model", "mixtral-8x7b", "--gpus", "16", "--ep", "8"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

}  // namespace

TEST_CASE("bad input: estimate flags") {
  const std::vector<BadCase> cases = {
      {{}, "--model or --params is required"},
      {{"--model", "gpt3-175b"}, "--gpus"},
      {{"--model", "no-such-model", "--gpus", "8"}, "--model"},
      {{"--model", "gpt3-175b", "--params", "175B", "--gpus", "8"}, "--model and --params"},
      {{"--params", "1e30", "--gpus", "8"}, "--params"},
      {{"--params", "abc", "--gpus", "8"}, "--params"},
      {{"--params", "-5B", "--gpus", "8"}, "--params"},
      {{"--params", "0", "--gpus", "8"}, "--params"},
      {{"--params", "nan", "--gpus", "8"}, "--params"},
      {{"--params", "inf", "--gpus", "8"}, "--params"},
      {{"--params", "1e400", "--gpus", "8"}, "--params"},
      {{"--params", "7Q", "--gpus", "8"}, "--params"},
      {{"--params", "", "--gpus", "8"}, "--params"},
      {with(kModel, {"--gpus", "0"}), "--gpus"},
      {with(kModel, {"--gpus", "-8"}), "--gpus"},
      {with(kModel, {"--gpus", "abc"}), "--gpus"},
      {with(kModel, {"--gpus", "8.5"}), "--gpus"},
      {with(kModel, {"--gpus", "010"}), "--gpus: 010 is not a decimal integer"},  // CLI11 reads octal 8
      {with(kModel, {"--gpus", "0x40"}), "--gpus: 0x40 is not a decimal integer"},
      {with(kModel, {"--gpus", "64", "--tp", "08"}), "--tp: 08 is not a decimal integer"},  // range-checked by CLI11
      {with(kModel, {"--gpus", "8.0"}), "--gpus: 8.0 is not a decimal integer"},
      {with(kModel, {"--gpus", "64", "--dp-replicate", "1e9"}),
       "--dp-replicate: 1e9 is not a decimal integer (write its digits: 1000000000)"},  // CLI11 reads no exponent
      {with(kModel, {"--gpus", "8e0"}), "--gpus: 8e0 is not a decimal integer (write its digits: 8)"},
      {with(kModel, {"--gpus", "64", "--bucket-mb", "0.0001"}), "--bucket-mb: Value 0.0001 not in range"},  // a number
      {with(kModel, {"--gpus", "64", "--global-batch", "64", "--global-batch", "65"}),
       "--global-batch: given 2 times: give it once"},
      {with(kModel, {"--gpus", "nan"}), "--gpus"},
      {with(kModel, {"--gpus", "1000000000"}), "--gpus"},
      {with(kModel, {"--gpus", "99999999999999999999999"}), "--gpus"},
      {with(kModel, {"--gpus", "64", "--seq", "0"}), "--seq"},
      {{"--model", "mistral-7b", "--gpus", "8", "--cp", "2"}, "--cp: context parallelism (cp 2) over sliding-window"},
      {{"--model", "mistral-7b", "--gpus", "8", "--sliding-window", "-1"}, "--sliding-window"},
      {with(kModel, {"--gpus", "64", "--sliding-window-pattern", "2"}), "--sliding-window-pattern: 2 needs a window"},
      {{"--model", "gpt-oss-20b", "--gpus", "8", "--sliding-window-pattern", "1"}, "--sliding-window-pattern: 1"},
      {{"--model", "gpt-oss-20b", "--gpus", "8", "--sliding-window-pattern", "25"},
       "--sliding-window-pattern: 25 is above the model's 24 layers"},
      {with(kModel, {"--gpus", "64", "--seq", "-1"}), "--seq"},
      {with(kModel, {"--gpus", "64", "--tp", "0"}), "--tp"},
      {with(kModel, {"--gpus", "64", "--pp", "-2"}), "--pp"},
      {with(kModel, {"--gpus", "64", "--tp", "3"}), "--gpus"},                   // 64 % 3
      {with(kModel, {"--gpus", "64", "--dp", "2", "--tp", "8", "--pp", "8"}), "--gpus"},  // 128 != 64
      {with(kModel, {"--gpus", "7", "--tp", "7"}), "tp 7 does not divide"},     // 96 heads
      {{"--model", "gpt3-1.3b", "--gpus", "32", "--pp", "32"}, "pp 32 exceeds the 24 layers"},
      {with(kModel, {"--gpus", "64", "--tp", "16"}), "--allow-tp-across-nodes"},
      {with(kModel, {"--gpus", "64", "--cp", "3"}), "--gpus"},
      {with(kModel, {"--gpus", "64", "--ep", "2"}), "--ep/--etp: ep 2"},
      {with(kModel, {"--gpus", "64", "--etp", "2"}), "--ep/--etp: ep 1 / etp 2: the model has no experts"},
      {with(kModel, {"--gpus", "64", "--pp", "2", "--account-for-embedding-in-pipeline-split"}), "--account-for-*-in-pipeline-split: "},
      {with(kModel, {"--gpus", "64", "--vpp", "0"}), "--vpp"},
      {with(kModel, {"--gpus", "64", "--pp", "8", "--vpp", "5"}), "--vpp: "},  // 96 % 40
      {with(kModel, {"--gpus", "64", "--micro-batch", "0"}), "--micro-batch"},
      {with(kModel, {"--gpus", "64", "--global-batch", "0"}), "--global-batch"},
      {with(kModel, {"--gpus", "64", "--global-batch", "100"}), "--global-batch"},  // 100 % 64
      {with(kModel, {"--gpus", "64", "--global-batch", "128", "--microbatches", "3"}), "--microbatches"},
      {with(kModel, {"--gpus", "64", "--global-batch", "32"}), "--global-batch"},  // fewer sequences than dp 64
      {with(kModel, {"--gpus", "64", "--global-batch", "64", "--tokens-per-step", "131072"}),
       "--global-batch and --tokens-per-step: give one"},
      {with(kModel, {"--gpus", "64", "--microbatches", "2", "--tokens-per-step", "131072"}),
       "--microbatches and --tokens-per-step: give one"},
      {with(kModel, {"--gpus", "64", "--tokens-per-step", "0"}), "--tokens-per-step"},
      {with(kModel, {"--gpus", "64", "--tokens-per-step", "1125899906842624"}),
       "--tokens-per-step: 1125899906842624 tokens are 549755813888 sequences"},
      // dp x micro-batch x microbatches = 10^20 sequences: once a wrapped (signed-overflow) global batch.
      {with(kModel, {"--gpus", "80000", "--tp", "8", "--dp", "10000", "--micro-batch", "100000", "--microbatches",
                     "100000000"}),
       "--microbatches"},
      {with(kModel, {"--gpus", "64", "--schedule", "2f2b"}), "--schedule"},
      // ZB-2p keeps one chunk per stage; ZB-V has its V's two (vpp 1 or 2), each stage's layers split in two, pp >= 2.
      {with(kModel, {"--gpus", "64", "--pp", "8", "--vpp", "2", "--schedule", "zb-2p"}),
       "--vpp: schedule zb-2p with vpp 2"},
      {with(kModel, {"--gpus", "64", "--pp", "8", "--schedule", "zb-2p", "--recompute", "full"}),
       "--schedule: schedule zb-2p with full recompute"},
      {with(kModel, {"--gpus", "64", "--pp", "8", "--vpp", "3", "--schedule", "zb-v"}),
       "--vpp: schedule zb-v with vpp 3: its V places 2 chunks on every stage"},
      // Without --vpp the line names what is wrong, not --vpp: the stages' layers (--pp; an odd count: only
      // --stage-layers; a stated split: its flags) or pp itself.
      {with(kModel, {"--gpus", "64", "--pp", "32", "--schedule", "zb-v"}),
       "--pp: schedule zb-v places 2 chunks on every stage (its V), so every stage's layers must be even: the 32 "
       "stages hold 3 of 96 layers; a pp that splits them so, or a per-chunk --stage-layers"},
      {with({"--model", "deepseek-v3"}, {"--gpus", "1024", "--pp", "16", "--ep", "64", "--schedule", "zb-v"}),
       "--stage-layers: schedule zb-v places 2 chunks on every stage (its V), so every stage's layers must be even: "
       "the 16 stages hold 3..4 of 61 layers; an odd count, so only a per-chunk --stage-layers can place them"},
      {with(kModel, {"--gpus", "64", "--pp", "8", "--first-stage-layers", "11", "--schedule", "zb-v"}),
       "--pp/--first-stage-layers/--last-stage-layers: schedule zb-v places 2 chunks"},
      {with(kModel, {"--gpus", "64", "--pp", "2", "--stage-layers", "47,49", "--schedule", "zb-v"}),
       "--stage-layers: schedule zb-v places 2 chunks on every stage (its V), so every stage's layers must be even: "
       "the 2 stages hold 47..49 of 96 layers"},
      // DualPipeV: the same V, and its order needs m >= 2 pp.
      {with(kModel, {"--gpus", "64", "--pp", "8", "--global-batch", "64", "--schedule", "dualpipe-v"}),
       "--global-batch/--micro-batch/--microbatches: schedule dualpipe-v on 8 stages needs at least 2 pp = 16 "
       "microbatches (its order's overlapped pairs), the plan has 8"},
      {with(kModel, {"--gpus", "64", "--pp", "32", "--schedule", "dualpipe-v"}),
       "--pp: schedule dualpipe-v places 2 chunks on every stage (its V)"},
      {with(kModel, {"--gpus", "64", "--pp", "8", "--schedule", "dualpipe-v", "--recompute", "full"}),
       "--schedule: schedule dualpipe-v with full recompute"},
      {with(kModel, {"--gpus", "64", "--pp", "8", "--schedule", "dualpipe-v", "--post-validation"}),
       "optimizer post-validation is Zero Bubble's"},
      {with(kModel, {"--gpus", "64", "--pp", "1", "--schedule", "zb-v"}),
       "--pp: schedule zb-v with pp 1: its V runs down the stages and back (2 chunks on every stage), so it needs "
       "pp >= 2"},
      {with(kModel, {"--gpus", "64", "--pp", "8", "--schedule", "zb-v", "--recompute", "full"}),
       "--schedule: schedule zb-v with full recompute"},
      {with(kModel, {"--gpus", "64", "--pp", "8", "--schedule", "zb-h2"}), "--schedule: unknown value 'zb-h2'"},
      {with(kModel, {"--gpus", "64", "--recompute", "some"}), "--recompute"},
      {with(kModel, {"--gpus", "64", "--precision", "fp4"}), "--precision"},
      {with(kModel, {"--gpus", "64", "--attention", "sparse"}), "--attention"},
      {with(kModel, {"--gpus", "64", "--zero", "4"}), "--zero"},
      {with(kModel, {"--gpus", "64", "--zero", "-1"}), "--zero"},
      {with(kModel, {"--gpus", "64", "--zero", "3", "--zero3-gather-unit", "block"}), "--zero3-gather-unit"},
      {with(kModel, {"--gpus", "64", "--moe-dispatcher", "nccl"}), "--moe-dispatcher"},
      // The token-exchange flags where nothing is exchanged: a dense model, or a MoE model at ep 1.
      {with(kModel, {"--gpus", "64", "--moe-dispatcher", "deepep"}), "--moe-dispatcher: the model has no experts"},
      {with(kModel, {"--gpus", "64", "--overlap-ep"}), "--overlap-ep: the model has no experts"},
      // MXFP8 needs block-scaled fp8 tensor cores (Blackwell's); an H100 has none.
      {with(kMoe, {"--precision", "fp8", "--fp8-recipe", "mxfp8"}),
       "--fp8-recipe: fp8 recipe mxfp8: H100-SXM5-80GB has no tensor cores that scale fp8 per 32-element block"},
      {{"--model", "mixtral-8x7b", "--gpus", "16", "--overlap-ep"},
       "--overlap-ep: ep 1 has no all-to-all to overlap (give --ep N)"},
      {{"--model", "mixtral-8x7b", "--gpus", "16", "--moe-dispatcher", "deepep"},
       "--moe-dispatcher: ep 1 has no all-to-all to dispatch (give --ep N)"},
      {with(kMoe, {"--moe-capacity-factor", "0.5"}),
       "--moe-capacity-factor: capacity factor 0.5 is outside 1 .. experts / top_k = 4"},
      {with(kMoe, {"--moe-capacity-factor", "5"}), "--moe-capacity-factor: capacity factor 5 is outside"},
      {with(kMoe, {"--moe-capacity-factor", "dropless"}), "--moe-capacity-factor: 'dropless' is not none or a number"},
      {with(kMoe, {"--moe-capacity-factor", "nan"}), "--moe-capacity-factor: 'nan' is not none or a number"},
      {with(kMoe, {"--moe-capacity-factor", "1.25x"}), "--moe-capacity-factor: '1.25x' is not none or a number"},
      {with(kMoe, {"--moe-imbalance", "0.9"}), "--moe-imbalance: imbalance 0.9 is outside 1 .. experts / top_k = 4"},
      {with(kMoe, {"--moe-imbalance", "1.5", "--moe-capacity-factor", "1.25"}),
       "--moe-imbalance: imbalance is for dropless routing"},
      {with(kModel, {"--gpus", "64", "--moe-imbalance", "1.2"}), "--moe-imbalance: MoE routing settings are for MoE"},
      {with(kModel, {"--gpus", "64", "--moe-capacity-factor", "1.2"}), "--moe-capacity-factor: MoE routing settings"},
      {with(kMoe, {"--moe-router-groups", "3", "--moe-router-group-top-k", "1"}),
       "--moe-router-groups: 3 does not divide the 8 experts into 2 or more equal groups"},
      {with(kMoe, {"--moe-router-groups", "1", "--moe-router-group-top-k", "1"}),
       "--moe-router-groups: 1 does not divide"},
      {with(kMoe, {"--moe-router-groups", "4"}), "--moe-router-groups: 4 groups need router_group_top_k"},
      {with(kMoe, {"--moe-router-group-top-k", "2"}), "--moe-router-group-top-k: 2 needs router_groups"},
      {with(kMoe, {"--moe-router-groups", "4", "--moe-router-group-top-k", "5"}),
       "--moe-router-group-top-k: 5 is outside 1 .. router_groups = 4"},
      {with(kMoe, {"--moe-router-groups", "8", "--moe-router-group-top-k", "1"}),
       "--moe-router-group-top-k: 1 groups of 1 experts hold fewer than top_k = 2 experts"},
      {with(kMoe, {"--moe-router-group-top-k", "0"}), "--moe-router-group-top-k"},
      {with(kMoe, {"--moe-router-groups", "-1"}), "--moe-router-groups"},
      {with(kModel, {"--gpus", "64", "--moe-router-groups", "4", "--moe-router-group-top-k", "2"}),
       "--moe-router-groups: MoE routing settings are for MoE"},
      {with(kMoe, {"--mtp-layers", "-1"}), "--mtp-layers"},
      {with(kMoe, {"--mtp-layers", "101"}), "--mtp-layers"},
      {with(kModel, {"--gpus", "64", "--fp8-recipe", "rowwise"}), "--fp8-recipe: rowwise needs --precision fp8"},
      {with(kModel, {"--gpus", "64", "--distributed-optimizer", "--fp8-param-gather"}),
       "--fp8-param-gather: fp8 parameter gather needs --precision fp8 (the precision is bf16)"},
      {with(kModel, {"--gpus", "64", "--precision", "fp8", "--fp8-param-gather"}),
       "--fp8-param-gather: fp8 parameter gather needs --precision fp8 and a sharded parameter gather"},
      {with(kModel, {"--gpus", "64", "--grad-reduce-dtype", "fp16"}),
       "--grad-reduce-dtype: 'fp16' (use fp32 or bf16, the 16-bit dtype of --precision bf16)"},
      {with(kModel, {"--gpus", "64", "--precision", "fp16", "--grad-reduce-dtype", "bf16"}), "--grad-reduce-dtype: 'bf16'"},
      {with(kModel, {"--gpus", "64", "--adam-moments-dtype", "fp64"}), "--adam-moments-dtype: unknown value 'fp64'"},
      {with(kModel, {"--gpus", "64", "--fp8-16bit-saved-inputs"}), "--fp8-16bit-saved-inputs: needs --precision fp8"},
      {with(kModel, {"--gpus", "64", "--fp8-activation-cache"}),
       "--fp8-activation-cache: needs --precision fp8 (the precision is bf16)"},
      {with(kModel, {"--gpus", "64", "--adam-moments-dtype", "tf32"}), "--adam-moments-dtype: tf32 is a compute mode"},
      {with(kModel, {"--gpus", "64", "--precision", "fp8", "--fp8-recipe", "per-tensor"}), "--fp8-recipe"},
      {with(kModel, {"--gpus", "64", "--zero", "1", "--offload", "cpu"}), "--offload: unknown value 'cpu'"},
      {with(kModel, {"--gpus", "64", "--zero", "1", "--offload", "optimizer,"}), "--offload: unknown value"},
      {with(kModel, {"--gpus", "64", "--offload", "activations,gpu"}), "--offload: unknown value 'activations,gpu'"},
      {with(kModel, {"--gpus", "64", "--offload", "activations,activations"}), "--offload: unknown value"},
      {with(kModel, {"--gpus", "64", "--offload", "activations", "--cluster", kBad + "cluster_no_host_link.json"}),
       "--offload: offload activations: cluster test-no-host-link has no host_link"},
      {with(kModel, {"--gpus", "64", "--offload", "optimizer"}), "--offload: offload optimizer: the host updates"},
      {with(kModel, {"--gpus", "64", "--zero", "2", "--offload", "optimizer,params"}), "--offload: offload "
                                                                                          "optimizer,params with ZeRO "
                                                                                          "stage 2"},
      {with(kModel, {"--gpus", "64", "--zero", "3", "--offload", "params"}), "--offload: offload params"},
      {with(kModel, {"--gpus", "64", "--bucket-mb", "0"}), "--bucket-mb"},
      {with(kModel, {"--gpus", "64", "--bucket-mb", "nan"}), "--bucket-mb"},
      {with(kModel, {"--gpus", "64", "--sp"}), "--sequence-parallel: sequence parallelism needs tp > 1"},
      {with(kModel, {"--gpus", "64", "--recompute-modules", "mlp"}), "--recompute-modules: needs --recompute selective"},
      {with(kModel, {"--gpus", "64", "--recompute-layers", "2"}), "--recompute-layers: needs --recompute full"},
      {with(kModel, {"--gpus", "64", "--recompute", "full", "--recompute-layers", "-1"}), "--recompute-layers: -1 is negative"},
      {with(kModel, {"--gpus", "64", "--pp", "8", "--recompute", "full", "--recompute-layers", "13"}),
       "--recompute-layers: recompute_layers 13 needs recompute full, at most the layers of a model chunk (the largest "
       "holds 12)"},
      {with(kModel, {"--gpus", "64", "--recompute", "selective", "--recompute-modules", "mlp,norm"}),
       "--recompute-modules: unknown or repeated module in 'mlp,norm'"},
      {with(kModel, {"--gpus", "64", "--recompute", "selective", "--recompute-modules", "mlp,mlp"}), "--recompute-modules"},
      {with(kModel, {"--gpus", "64", "--recompute", "selective", "--recompute-modules", ""}), "--recompute-modules"},
      {with(kMoe, {"--offload-modules", "expert_fc1,core_attn"}),
       "--offload-modules: unknown, unmodelled or repeated module in 'expert_fc1,core_attn'"},
      {with(kMoe, {"--offload-modules", "fc2"}), "--offload-modules: unknown, unmodelled or repeated module in 'fc2'"},
      {with(kMoe, {"--offload-modules", "moe_act,moe_act"}), "--offload-modules: unknown, unmodelled or repeated"},
      {with(kMoe, {"--offload-modules", ""}), "--offload-modules"},
      {with(kMoe, {"--offload-modules", "moe_act", "--offload", "activations"}),
       "--offload-modules: offload modules moe_act: fine-grained activation offloading and whole-layer activation "
       "offload (offload activations) exclude each other"},
      {with(kMoe, {"--offload-modules", "moe_act", "--recompute", "full"}),
       "--offload-modules: offload modules moe_act: full recompute keeps only each layer's input"},
      {with(kModel, {"--gpus", "64", "--offload-modules", "expert_fc1"}),
       "--offload-modules: offload modules expert_fc1: model gpt3-175b has no MoE experts"},
      {with(kMoe, {"--offload-modules", "moe_act", "--cluster", kBad + "cluster_no_host_link.json"}),
       "--offload-modules: offload modules moe_act: cluster test-no-host-link has no host_link"},
      {with(kModel, {"--gpus", "64", "--pp", "2", "--zero", "3", "--offload", "optimizer,params"}),
       "--offload: offload optimizer,params with ZeRO stage 3: parameter offload needs ZeRO-3 (--zero 3) without "
       "pipelining"},
      {with(kModel, {"--gpus", "64", "--pp", "8", "--first-stage-layers", "95"}), "first/last stage layers"},
      {with(kModel, {"--gpus", "64", "--pp", "2", "--stage-layers", "48,4x"}), "--stage-layers: '48,4x'"},
      {with(kModel, {"--gpus", "64", "--pp", "2", "--stage-layers", "48,47"}),
       "--first-stage-layers/--last-stage-layers/--stage-layers/--account-for-*-in-pipeline-split: stage layers: 2 "
       "entries for pp 2"},
      {with(kModel, {"--gpus", "64", "--pp", "2", "--vpp", "2", "--stage-layers", "24/24,24/23/1"}), "stage layers: "},
      {{"--model", "gpt3-175b", "--gpus", "64", "--gpu", "a100-80gb", "--precision", "fp8"}, "--precision: "},
      {with(kModel, {"--gpus", "64", "--gpu", "no-such-gpu"}), "--gpu"},
      {with(kModel, {"--gpus", "64", "--cluster", "no-such-cluster"}), "--cluster"},
      {with(kModel, {"--gpus", "64", "--no-such-flag"}), "--no-such-flag"},
      {with(kModel, {"--gpus", "64", "--tp"}), "--tp"},
      {with(kModel, {"--gpus", "64", "--gpus", "32"}), "--gpus"},
      // A mesh product past 64 bits wrapped to 0 (a division by zero) or to a small count that passed the check.
      {with(kModel, {"--gpus", "64", "--tp", "67108864", "--pp", "67108864", "--cp", "4096"}),
       "--tp: tp*pp*cp = 67108864*67108864*4096 exceeds 100000000 GPUs"},
      {with(kModel, {"--dp", "4", "--tp", "67108864", "--pp", "67108864", "--cp", "4096"}), "--tp: tp*pp*cp"},
      {with(kModel, {"--dp", "4", "--tp", "8192", "--pp", "8192"}), "--dp: dp*tp*pp*cp = 4*8192*8192*1 exceeds"},
  };
  for (const auto& c : cases) expect_bad_estimate(c.args, c.names);
}

TEST_CASE("bad input: files named by flags (missing, unreadable, malformed, wrong kind)") {
  const std::string missing = kBad + "does-not-exist.json";
  const std::vector<BadCase> cases = {
      {{"--model", missing, "--gpus", "8"}, "--model"},
      {{"--model", kBad + "a_directory.json", "--gpus", "8"}, "--model"},
      {{"--model", "/nonexistent-dir/model.json", "--gpus", "8"}, "--model"},
      {{"--model", "/dev/zero", "--gpus", "8"}, "--model"},
      {{"--model", kBad + "gpu_ok.json", "--gpus", "8"}, "--model"},          // a GPU profile, not a model
      {{"--model", kBad + "model_truncated.json", "--gpus", "8"}, "model_truncated.json: malformed JSON"},
      {{"--model", kBad + "model_empty.json", "--gpus", "8"}, "model_empty.json: malformed JSON"},
      {{"--model", kBad + "model_unknown_key.json", "--gpus", "8"}, "/layerz: unknown key"},
      {{"--model", kBad + "model_1e30_params.json", "--gpus", "8"}, "parameters"},
      {{"--model", kBad + "model_seq_zero.json", "--gpus", "8"}, "/seq_len"},
      {with(kModel, {"--gpus", "64", "--gpu", kBad + "gpu_zero_memory.json"}), "/memory_GiB"},
      {with(kModel, {"--gpus", "64", "--gpu", kBad + "gpu_zero_bandwidth.json"}), "/hbm_bandwidth_GBps"},
      {with(kModel, {"--gpus", "64", "--gpu", kBad + "model_ok.json"}), "--gpu"},
      {with(kModel, {"--gpus", "64", "--gpu", missing}), "--gpu"},
      {with(kModel, {"--gpus", "64", "--cluster", kBad + "cluster_zero_bandwidth.json"}), "/intra_node/bandwidth_GBps"},
      {with(kModel, {"--gpus", "64", "--cluster", kBad + "cluster_unknown_gpu.json"}), "--cluster"},
      {with(kModel, {"--gpus", "64", "--cluster", missing}), "--cluster"},
      {with(kModel, {"--gpus", "64", "--profile", missing}), "--profile"},
      {with(kModel, {"--gpus", "64", "--profile", kBad + "model_bad_enum.json"}), "/ffn_type"},
      {{"--plan", missing}, "--plan"},
      {{"--plan", kBad + "a_directory.json"}, "--plan"},
      {{"--plan", kBad + "model_ok.json"}, "/model: missing required key"},
  };
  for (const auto& c : cases) expect_bad_estimate(c.args, c.names);
}

TEST_CASE("bad input: plan documents") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"plan_mesh_mismatch.json", "/parallel: dp*tp*pp*cp = 2*4*2*1 = 16 but there are 64 GPUs"},
      {"plan_tp_not_dividing_heads.json", "/parallel: tp 3 does not divide"},
      {"plan_pp_exceeds_layers.json", "/parallel: pp 64 exceeds the 40 layers"},
      {"plan_cp_sliding_window.json", "/parallel: context parallelism (cp 2) over sliding-window attention"},
      {"plan_batch_mismatch.json", "/parallel: global batch 17"},
      {"plan_unknown_key.json", "/parallel/dq: unknown key"},
      {"plan_adam_moments_tf32.json", "/training/adam_moments_dtype: tf32 is a compute mode, not a storage dtype"},
      {"plan_adam_moments_unknown.json", "/training/adam_moments_dtype: unknown value 'fp64'"},
      {"plan_fp8_param_gather_bf16.json", "/parallel: fp8 parameter gather needs --precision fp8"},
      {"plan_fp8_saved_inputs_not_bool.json", "/training/fp8_saved_inputs: expected true or false"},
      {"plan_fused_cross_entropy_not_bool.json", "/training/fused_cross_entropy: expected true or false"},
      {"plan_compiled_elementwise_not_bool.json", "/training/compiled_elementwise: expected true or false"},
      {"plan_missing_training.json", "/training: missing required key"},
      {"plan_wrong_version.json", "/parplan_plan"},
      {"plan_unknown_model.json", "/model: unknown model 'gpt-9000'"},
      // A Plan's inline model: its cross-field errors name the key under /model, as its range errors do.
      {"plan_model_top_k_exceeds_experts.json", "/model/top_k: top_k 9 exceeds the 8 experts"},
      {"plan_model_moe_imbalance.json", "/model/moe/imbalance: imbalance 200 is outside 1 .. experts / top_k = 4"},
      {"plan_absurd_gpus.json", "/parallel/dp"},
      {"plan_bad_schedule.json", "/parallel/schedule"},
      {"plan_zb2p_vpp2.json", "/parallel: schedule zb-2p with vpp 2"},
      {"plan_schedule_zbv.json", "/parallel: schedule zb-v with vpp 4: its V places 2 chunks on every stage"},
      {"plan_bad_fp8_recipe.json", "/training/fp8_recipe: unknown value 'per-tensor'"},
      {"plan_bad_moe_dispatcher.json", "/parallel/moe_dispatcher: unknown value 'deep-ep'"},
      {"plan_overlap_ep_not_bool.json", "/parallel/overlap_ep_comm: expected true or false"},
      {"plan_zero_stage_5.json", "/parallel/zero_stage"},
      {"plan_async_tp_not_bool.json", "/parallel/async_tp_backward: expected true or false"},
      {"plan_p2p_scatter_gather_not_bool.json", "/parallel/p2p_scatter_gather: expected true or false"},
      {"plan_zero3_gather_unit_unknown.json", "/parallel/zero3_gather_unit"},
      {"plan_offload_unknown.json", "/parallel/offload: unknown value 'gpu'"},
      {"plan_recompute_modules_unknown.json", "/parallel/recompute_modules/1: must be one of core_attn"},
      {"plan_recompute_modules_not_selective.json", "/parallel/recompute_modules: needs recompute \"selective\""},
      {"plan_recompute_modules_empty.json", "/parallel/recompute_modules: must be a non-empty array"},
      {"plan_recompute_layers_not_full.json", "/parallel/recompute_layers: needs recompute \"full\""},
      {"plan_recompute_layers_negative.json", "/parallel/recompute_layers"},
      {"plan_recompute_layers_too_many.json", "/parallel: recompute_layers 41 needs recompute full, at most the layers"},
      {"plan_offload_modules_unpriced.json", "/parallel/offload_modules/1: 'core_attn' is not modelled"},
      {"plan_offload_modules_unknown.json", "/parallel/offload_modules/1: must be one of expert_fc1, moe_act"},
      {"plan_offload_modules_empty.json", "/parallel/offload_modules: must be a non-empty array"},
      {"plan_offload_modules_dense.json", "/parallel: offload modules expert_fc1: model gpt3-13b has no MoE experts"},
      {"plan_offload_modules_full_recompute.json", "/parallel: offload modules moe_act: full recompute keeps only"},
      {"plan_offload_activations_unknown.json", "/parallel/offload: unknown value 'activations,cpu'"},
      {"plan_offload_params_zero1.json", "/parallel: offload optimizer,params with ZeRO stage 1"},
      {"plan_fused_grad_accumulation_not_bool.json", "/training/fused_grad_accumulation: expected true or false"},
      {"plan_inline_gpu_zero_memory.json", "/gpu/memory_GiB"},
      {"plan_inline_cluster_nvlink_domain.json",
       "/cluster/nvlink_domain_gpus: must be a multiple of gpus_per_node (8)"},
      {"plan_seq_negative.json", "/training/seq_len"},
      {"plan_duplicate_key.json", "/parallel/tp: duplicate key"},
      {"plan_nul_key.json", "/parallel/d\\x00q: unknown key"},  // a JSON \u0000 does not end the line early
      {"plan_deep_nesting.json", "JSON nested deeper than 256 levels"},
      {"plan_empty_name.json", "/name: must not be empty"},
      {"plan_name_not_string.json", "/name"},
      {"plan_stage_layers_not_counts.json", "/parallel/stage_layers/1/1: must be a layer count"},
      {"plan_stage_layers_wrong_sum.json", "/parallel: stage layers: 2 entries for pp 2"},
  };
  for (const auto& [file, names] : cases) expect_bad_estimate({"--plan", kBad + file}, kBad + file + ": " + names);
}

TEST_CASE("bad input: profile files (profiles validate and --profile)") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"model_truncated.json", "malformed JSON at byte"},
      {"gpu_duplicate_key.json", "/memory_GiB: duplicate key"},
      {"model_empty.json", "malformed JSON at byte"},
      {"model_trailing_garbage.json", "malformed JSON at byte"},
      {"model_not_object.json", "/: expected a JSON object"},
      {"model_unknown_key.json", "/layerz: unknown key"},
      {"model_missing_hidden.json", "/hidden: missing required key"},
      {"model_layers_string.json", "/layers: expected an integer, got string"},
      {"model_layers_negative.json", "/layers: -4 is out of range"},
      {"model_layers_zero.json", "/layers: 0 is out of range"},
      {"model_layers_fraction.json", "/layers: expected an integer"},
      {"model_layers_nan.json", "malformed JSON"},
      {"model_hidden_inf.json", "malformed JSON: a number is out of range"},
      {"model_hidden_absurd.json", "/hidden"},
      {"model_seq_zero.json", "/seq_len: 0 is out of range"},
      {"model_heads_not_dividing.json", "/heads: 3 heads do not divide hidden 256"},
      {"model_kv_heads_not_dividing.json", "/kv_heads"},
      {"model_top_k_exceeds_experts.json", "/top_k"},
      {"model_shared_experts_dense.json", "/shared_experts: 1 is for MoE models; this one has experts 1"},
      {"model_dense_layers_no_ffn.json", "/dense_ffn_hidden: dense layers (dense_layers, interleave_moe_layer_step) and "
                                         "dense_ffn_hidden go together"},
      {"model_moe_step_no_ffn.json", "/dense_ffn_hidden: dense layers (dense_layers, interleave_moe_layer_step) and "
                                     "dense_ffn_hidden go together"},
      {"model_moe_step_dense.json", "/interleave_moe_layer_step: 2 is for MoE models; this one has experts 1"},
      {"model_moe_step_none.json", "/interleave_moe_layer_step: every 5th of the 4 layers after the 0 leading dense "
                                   "ones is MoE: none is"},
      {"model_moe_capacity_below_one.json", "/moe/capacity_factor: 0.5 is out of range"},
      {"model_moe_capacity_not_none.json", "/moe/capacity_factor: expected \"none\" (dropless) or a number >= 1"},
      {"model_moe_imbalance_above_experts.json", "/moe/imbalance: imbalance 5 is outside 1 .. experts / top_k = 4"},
      {"model_moe_imbalance_with_capacity.json", "/moe/imbalance: imbalance is for dropless routing"},
      {"model_moe_routing_dense.json", "/moe/imbalance: MoE routing settings are for MoE models"},
      {"model_moe_groups_dense.json", "/moe/router_groups: MoE routing settings are for MoE models"},
      {"model_moe_groups_not_dividing.json", "/moe/router_groups: 3 does not divide the 8 experts into 2 or more equal"},
      {"model_moe_groups_one.json", "/moe/router_groups: 1 is out of range"},
      {"model_moe_group_top_k_alone.json", "/moe/router_group_top_k: 2 needs router_groups"},
      {"model_moe_groups_without_top_k.json", "/moe/router_group_top_k: 4 groups need router_group_top_k"},
      {"model_moe_group_top_k_above_groups.json", "/moe/router_group_top_k: 5 is outside 1 .. router_groups = 4"},
      {"model_moe_groups_below_top_k.json", "/moe/router_group_top_k: 1 groups of 1 experts hold fewer than top_k = 2"},
      {"model_moe_unknown_key.json", "/moe/capacity: unknown key"},
      {"model_mtp_negative.json", "/mtp_layers: -1 is out of range"},
      {"model_dense_layers_all.json", "/dense_layers: 4 dense layers leave none of the 4 layers MoE"},
      {"model_q_lora_without_mla.json", "/q_lora_rank: 64 is for multi-head latent attention"},
      {"model_mla_gqa.json", "/kv_heads: multi-head latent attention gives every head its keys and values"},
      {"model_head_dim_zero.json", "/head_dim: 0 is out of range"},
      {"model_sliding_window_zero.json", "/sliding_window: 0 is out of range"},
      {"model_sliding_window_negative.json", "/sliding_window: -128 is out of range"},
      {"model_sliding_window_pattern_alone.json", "/sliding_window_pattern: 2 needs a window (sliding_window"},
      {"model_sliding_window_pattern_one.json", "/sliding_window_pattern: 1 makes every layer full attention"},
      {"model_sliding_window_pattern_above_layers.json", "/sliding_window_pattern: 5 is above the model's 4 layers"},
      {"model_sliding_window_not_causal.json", "/sliding_window: a window over a model without the causal mask"},
      {"model_bad_enum.json", "/ffn_type: unknown value 'relu'"},
      {"model_enum_newline.json", "/norm: unknown value 'layer\\nnorm'"},
      {"model_kind_unknown.json", "/kind: unknown kind 'robot'"},
      {"model_aliases_not_array.json", "/aliases"},
      {"model_1e30_params.json", "/: the model has about"},
      {"gpu_zero_memory.json", "/memory_GiB: 0 is out of range"},
      {"gpu_zero_bandwidth.json", "/hbm_bandwidth_GBps: 0 is out of range"},
      {"gpu_negative_memory.json", "/memory_GiB: -80 is out of range"},
      {"gpu_no_peak.json", "/peak_tflops"},
      {"gpu_peak_string.json", "/peak_tflops/bf16: expected a number"},
      {"gpu_unknown_dtype.json", "/peak_tflops/fp4: unknown key"},
      {"gpu_gemm_unknown_key.json", "/gemm/tiles: unknown key"},
      {"gpu_gemm_zero_sms.json", "/gemm/sm_count"},
      {"gpu_gemm_grouped_overhead_negative.json", "/gemm/grouped_tile_overhead_us: -1 is out of range"},
      {"gpu_gemm_attention_overhead_string.json", "/gemm/attention_tile_overhead: expected a number"},
      {"gpu_efficiency_above_one.json", "/hbm_efficiency"},
      {"cluster_zero_bandwidth.json", "/intra_node/bandwidth_GBps"},
      {"cluster_zero_gpus_per_node.json", "/gpus_per_node"},
      {"cluster_missing_inter_node.json", "/inter_node: missing required key"},
      {"cluster_link_unknown_key.json", "/intra_node/latency: unknown key"},
      {"cluster_nvls_above_one.json", "/intra_node/nvls_efficiency: 1.5 is out of range"},
      {"cluster_host_link_zero.json", "/host_link/bandwidth_GBps: 0 is out of range"},
      {"cluster_host_memory_negative.json", "/host_memory_GiB: -1 is out of range"},
      {"cluster_host_adam_zero.json", "/host_adam_Gparams_per_s: 0 is out of range"},
      {"cluster_nvlink_domain_not_multiple.json", "/nvlink_domain_gpus: must be a multiple of gpus_per_node (4)"},
      {"cluster_nvlink_domain_zero.json", "/nvlink_domain_gpus: 0 is out of range"},
      {"cluster_nvlink_domain_string.json", "/nvlink_domain_gpus: expected an integer"},
  };
  for (const auto& [file, names] : cases) {
    const std::string path = kBad + file;
    expect_bad({{"profiles", "validate", path}, path + ": " + names});
    expect_bad({{"profiles", "--profile", path, "list"}, path + ": " + names});
  }
  // The same strictness reaches estimate through --profile.
  expect_bad_estimate(with(kModel, {"--gpus", "8", "--profile", kBad + "gpu_zero_memory.json"}), "/memory_GiB");
}

TEST_CASE("bad input: two --profile files defining one name") {
  // A file may override an embedded profile, but two files answering to one name would leave the choice to their
  // order on the command line; every command that takes --profile refuses it, naming both files.
  const std::string a = kBad + "gpu_ok.json", same = kBad + "gpu_ok_same_name.json";
  const std::string other = kBad + "gpu_ok_other.json", alias = kBad + "gpu_ok_alias_clash.json";
  const std::string both = "--profile: '" + a + "' and '" + same + "' both define gpu 'BAD-GPU' (give one)";
  const std::string plan = kBad + "plan_ok.json";
  ScratchDir dir;
  const std::string out = (dir.path / "fitted.json").string();
  const std::vector<BadCase> cases = {
      {with({"estimate", "--model", "gpt3-175b"}, {"--gpus", "8", "--profile", a, "--profile", same}), both},
      {{"suggest", "--params", "1e9", "--gpus", "8", "--profile", a, "--profile", same}, both},
      {{"simulate", "--plan", plan, "--profile", a, "--profile", same}, both},
      {{"check", "--plan", plan, "--profile", a, "--profile", same}, both},
      {{"validate", "--runs", kBad + "runs_ok.json", "--profile", a, "--profile", same}, both},
      {{"profiles", "--profile", a, "--profile", same, "list"}, both},
      {{"calibrate", "--from-runs", kBad + "runs_ok.json", "--profile", a, "--profile", same, "--out", out}, both},
      {{"profiles", "--profile", other, "--profile", alias, "list"},
       "--profile: gpu 'other-gpu' in '" + other + "' and gpu 'third-gpu' in '" + alias +
           "' both answer to 'other-gpu' (give one)"},
  };
  for (const BadCase& c : cases) expect_bad(c, &dir);
  // The same file twice is one definition, however it is spelled; different names are two.
  CHECK(run_parplan({"profiles", "--profile", a, "--profile", a, "list"}, {}, 60).exit_code == 0);
  const std::string dotted = (fs::path(kBad) / "." / "gpu_ok.json").string();
  const std::string linked = (dir.path / "gpu_ok_link.json").string();
  fs::create_symlink(a, linked);
  CHECK(run_parplan({"profiles", "--profile", a, "--profile", dotted, "--profile", linked, "list"}, {}, 60).exit_code == 0);
  fs::remove(linked);
  CHECK(run_parplan({"profiles", "--profile", a, "--profile", other, "list"}, {}, 60).exit_code == 0);
}

TEST_CASE("bad input: profile names and aliases are bounded, printable text") {
  ScratchDir dir;
  const nlohmann::json gpu = nlohmann::json::parse(parplan::test::read_text(kBad + "gpu_ok.json"));
  auto write_gpu = [&](const std::string& file, const std::string& name, const nlohmann::json& aliases) {
    nlohmann::json j = gpu;
    j["name"] = name;
    j["aliases"] = aliases;
    const std::string path = (dir.path / file).string();
    parplan::test::write_text(path, j.dump());
    return path;
  };
  auto many = [](const std::string& prefix, int n) {
    nlohmann::json a = nlohmann::json::array();
    for (int i = 0; i < n; ++i) a.push_back(prefix + std::to_string(i));
    return a;
  };
  expect_bad({{"profiles", "--profile", write_gpu("many.json", "G", many("g-", 1001)), "list"},
              "many.json: /aliases: 1001 aliases (at most 1000)"});
  expect_bad({{"profiles", "--profile", write_gpu("bell.json", "G", {"ok", "a\u0007b"}), "list"},
              "bell.json: /aliases: a control character in a name"});
  expect_bad({{"profiles", "--profile", write_gpu("newline.json", "x\ny", nlohmann::json::array()), "list"},
              "newline.json: /name: a control character in a name"});
  expect_bad({{"profiles", "--profile", write_gpu("empty.json", "G", {""}), "list"}, "empty.json: /aliases: empty name"});
  expect_bad({{"profiles", "--profile", write_gpu("long.json", std::string(201, 'n'), nlohmann::json::array()), "list"},
              "long.json: /name: a name of 201 bytes (at most 200)"});
  // At the limit, two files load and answer to every alias (the name-clash check was quadratic: 100k aliases each
  // took over a minute).
  const std::string a = write_gpu("a.json", "GA", many("a-", 1000)), b = write_gpu("b.json", "GB", many("b-", 1000));
  const auto r = run_parplan({"estimate", "--model", "gpt3-1.3b", "--gpus", "8", "--profile", a, "--profile", b, "--gpu",
                              "B-999", "--json"},
                             {}, 60);
  CHECK((r.exit_code == 0 || r.exit_code == 1));  // a 16 GiB GPU: fits or not, but estimated
  CHECK(nlohmann::json::parse(r.out)["plan"]["gpu"]["name"] == "GB");
  // A slow but real peak is read: the host backend's GEMM in the ASan+UBSan build measures about 0.9 GFLOP/s, and a
  // 0.001 TFLOP/s floor refused the profile calibrate wrote there.
  nlohmann::json slow = gpu;
  slow["peak_tflops"]["bf16"] = 0.0009;
  const std::string slow_path = (dir.path / "slow.json").string();
  parplan::test::write_text(slow_path, slow.dump());
  const auto s = run_parplan({"estimate", "--params", "1.3B", "--gpus", "8", "--gpu", slow_path, "--json"}, {}, 60);
  CAPTURE(s.err);
  CHECK((s.exit_code == 0 || s.exit_code == 1));
}

TEST_CASE("bad input: profiles subcommand") {
  expect_bad({{"profiles"}, "subcommand"});
  expect_bad({{"profiles", "show"}, "name"});
  expect_bad({{"profiles", "show", "no-such-profile"}, "show: unknown profile 'no-such-profile'"});
  expect_bad({{"profiles", "list", "--kind", "robot"}, "--kind"});
  expect_bad({{"profiles", "validate"}, "file"});
  expect_bad({{"profiles", "validate", kBad + "does-not-exist.json"}, "does-not-exist.json"});
  expect_bad({{"profiles", "validate", kBad + "a_directory.json"}, "is a directory"});
  expect_bad({{"profiles", "--profile", kBad + "does-not-exist.json", "list"}, "--profile"});
  expect_bad({{"no-such-subcommand"}, "unknown subcommand 'no-such-subcommand'"});
  expect_bad({{"profiles", "frobnicate"}, "profiles: unknown subcommand 'frobnicate' (known: list, show, validate)"});
  expect_bad({{"--helpx"}, "unknown option '--helpx'"});
}

TEST_CASE("bad input: suggest") {
  const std::vector<BadCase> cases = {
      {{}, "--model or --params is required"},
      // Expert flags on a dense model (estimate refuses them too).
      {with(kModel, {"--gpus", "64", "--ep", "2"}), "--ep: the model 'gpt3-175b' has no experts (experts 1)"},
      {with(kModel, {"--gpus", "64", "--precision", "fp8", "--fp8-recipe", "mxfp8"}),
       "--fp8-recipe: mxfp8: H100-SXM5-80GB has no tensor cores that scale fp8 per 32-element block"},
      {with(kModel, {"--gpus", "64", "--etp", "1"}), "--etp: the model 'gpt3-175b' has no experts (experts 1)"},
      {with(kModel, {"--gpus", "64", "--overlap-ep"}), "--overlap-ep: the model 'gpt3-175b' has no experts"},
      {with(kModel, {"--gpus", "64", "--moe-dispatcher", "deepep"}), "--moe-dispatcher: the model 'gpt3-175b' has no"},
      {{"--model", "gpt3-175b"}, "--gpus"},
      {with(kModel, {"--gpus", "0"}), "--gpus"},
      {with(kModel, {"--gpus", "nan"}), "--gpus"},
      {{"--params", "1e30", "--gpus", "8"}, "--params"},
      {{"--params", "inf", "--gpus", "8"}, "--params"},
      {with(kModel, {"--gpus", "64", "--seq", "0"}), "--seq"},
      {with(kModel, {"--gpus", "64", "--objective", "slowest"}), "--objective"},
      {with(kModel, {"--gpus", "64", "--fp8-param-gather"}), "--fp8-param-gather: fp8 parameter gather needs --precision fp8"},
      {with(kModel, {"--gpus", "64", "--grad-reduce-dtype", "fp64"}), "--grad-reduce-dtype: 'fp64'"},
      {with(kModel, {"--gpus", "64", "--objective", "fewest-gpus"}), "--min-tokens-per-s"},
      {with(kModel, {"--gpus", "64", "--objective", "fewest-gpus", "--min-tokens-per-s", "nan"}), "--min-tokens-per-s"},
      {with(kModel, {"--gpus", "64", "--top", "0"}), "--top"},
      {with(kModel, {"--gpus", "64", "--threads", "0"}), "--threads"},
      {with(kModel, {"--gpus", "64", "--max-micro-batch", "0"}), "--max-micro-batch"},
      {with(kModel, {"--gpus", "64", "--tokens-per-step", "0"}), "--tokens-per-step"},
      // 2^50 tokens of 2,048: more sequences than a plan document holds (estimate --plan refused the plan written)
      {with(kModel, {"--gpus", "64", "--tokens-per-step", "1125899906842624"}),
       "--tokens-per-step: 1125899906842624 tokens are 549755813888 sequences"},
      {with(kModel, {"--gpus", "64", "--gpu", kBad + "gpu_peak_denormal.json"}),
       "/peak_tflops/bf16: expected 0 (not supported) or 1e-06 to 1e6 TFLOP/s"},
      {with(kModel, {"--gpus", "64", "--vpp", "1"}), "--vpp"},
      {with(kModel, {"--gpus", "64", "--schedule", "3f1b"}), "--schedule"},
      {with(kModel, {"--gpus", "64", "--schedule", "1f1b,3f1b"}), "--schedule: unknown value '3f1b'"},
      {with(kModel, {"--gpus", "64", "--schedule", "1f1b,"}), "--schedule: '1f1b,' has an empty entry"},
      {with(kModel, {"--gpus", "64", "--recompute", "none,,full"}), "--recompute: 'none,,full' has an empty entry"},
      {with(kModel, {"--gpus", "64", "--vpp", "2", "--schedule", "1f1b,zb-h1"}), "--vpp: 2 chunks per stage need"},
      {with(kModel, {"--gpus", "64", "--vpp", "2", "--schedule", "zb-2p"}),
       "--vpp: 2 chunks per stage need --schedule interleaved, not zb-2p"},
      {with(kModel, {"--gpus", "64", "--schedule", "zb-2p,zb-h2"}), "--schedule: unknown value 'zb-h2'"},
      {with(kModel, {"--gpus", "64", "--vpp", "2", "--schedule", "zb-v"}),
       "--vpp: 2 chunks per stage need --schedule interleaved, not zb-v"},
      {with(kModel, {"--gpus", "64", "--recompute", "most"}), "--recompute"},
      {with(kModel, {"--gpus", "64", "--recompute-layers", "-1"}), "--recompute-layers: -1 is negative"},
      {with(kModel, {"--gpus", "64", "--recompute-layers", "two"}), "--recompute-layers"},
      {with(kModel, {"--gpus", "64", "--recompute", "none,selective", "--recompute-layers", "2"}),
       "--recompute-layers: needs full among the searched --recompute modes (not none,selective)"},
      // Above the model's 96 layers no plan can take it (and CLI11 saturates an out-of-range number to it).
      {with(kModel, {"--gpus", "64", "--recompute-layers", "97"}),
       "--recompute-layers: 97 is above the model's 96 layers"},
      {with(kModel, {"--gpus", "64", "--recompute-layers", "99999999999999999999"}),
       "--recompute-layers: 9223372036854775807 is above the model's 96 layers"},
      {with(kModel, {"--gpus", "64", "--zero", "9"}), "--zero"},
      {with(kModel, {"--gpus", "64", "--headroom", "80GiB"}), "--headroom: 80.00 GiB leaves nothing"},
      {with(kModel, {"--gpus", "64", "--headroom", "1"}), "--headroom"},
      {with(kModel, {"--gpus", "64", "--headroom", "lots"}), "--headroom"},
      {with(kModel, {"--gpus", "64", "--memory", "seventy"}), "--memory"},
      {with(kModel, {"--gpus", "64", "--memory", "70GiB", "--headroom", "70GiB"}), "--headroom"},
      {with(kModel, {"--gpus", "64", "--gpu", kBad + "gpu_zero_memory.json"}), "/memory_GiB"},
      {with(kModel, {"--gpus", "64", "--cluster", kBad + "cluster_zero_bandwidth.json"}), "/intra_node/bandwidth_GBps"},
      {{"--model", kBad + "model_1e30_params.json", "--gpus", "8"}, "parameters"},
      {{"--model", kBad + "model_truncated.json", "--gpus", "8"}, "malformed JSON"},
      {{"--model", kBad + "does-not-exist.json", "--gpus", "8"}, "--model"},
      {with(kModel, {"--gpus", "64", "--out", "/nonexistent-dir/plan.json"}), "-o"},
      // Pins that admit no mesh at all are a usage error, not "nothing fits".
      {with(kModel, {"--gpus", "64", "--tp", "3"}), "--tp 3"},
      {with(kModel, {"--gpus", "64", "--tp", "128", "--pp", "2"}), "--tp 128, --pp 2"},
  };
  for (const auto& c : cases) {
    ScratchDir dir;
    std::vector<std::string> args = with({"suggest", "--threads", "1"}, c.args);
    if (std::find(args.begin(), args.end(), "--out") == args.end()) {
      args.push_back("-o");
      args.push_back((dir.path / "plan.json").string());
    }
    expect_bad({args, c.names}, &dir);
  }
}

TEST_CASE("bad input: plan flags beside --plan are refused, not silently ignored") {
  const std::string ok = kBad + "plan_ok.json";
  expect_bad_estimate({"--plan", ok, "--tp", "4"}, "--tp: cannot be combined with --plan");
  expect_bad_estimate({"--plan", ok, "--gpus", "32"}, "--gpus: cannot be combined with --plan");
  expect_bad_estimate({"--plan", ok, "--sp"}, "--sequence-parallel: cannot be combined with --plan");
  expect_bad_estimate({"--plan", ok, "--no-overlap-cp"}, "--no-overlap-cp: cannot be combined with --plan");
  expect_bad_estimate({"--plan", ok, "--overlap-p2p"}, "--overlap-p2p: cannot be combined with --plan");
  // Only the interleaved schedule overlaps its sends: elsewhere the flag would be silently ignored.
  expect_bad_estimate({"--model", "gpt3-13b", "--gpus", "8", "--pp", "4", "--overlap-p2p"},
                      "--overlap-p2p: schedule 1f1b waits for its pipeline sends");
  expect_bad({{"simulate", "--model", "gpt3-13b", "--gpus", "8", "--pp", "4", "--schedule", "zb-h1", "--overlap-p2p"},
              "--overlap-p2p: schedule zb-h1 waits for its pipeline sends"});
  {  // and in a plan document, naming it and the path
    ScratchDir dir;
    nlohmann::json j = nlohmann::json::parse(parplan::test::read_text(ok));
    j["parallel"]["overlap_p2p_comm"] = true;
    j["parallel"]["schedule"] = "1f1b";
    const std::string plan = (dir.path / "overlap.json").string();
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan}, plan + ": /parallel: schedule 1f1b waits for its pipeline sends");
  }
  // Zero Bubble's optimizer post-validation: on a zero-bubble schedule only, a flag or a plan key.
  expect_bad_estimate({"--plan", ok, "--post-validation"}, "--post-validation: cannot be combined with --plan");
  expect_bad_estimate({"--model", "gpt3-13b", "--gpus", "8", "--pp", "4", "--post-validation"},
                      "--post-validation: optimizer post-validation is Zero Bubble's (zb-h1, zb-2p, zb-v); the schedule is 1f1b");
  {
    ScratchDir dir;
    nlohmann::json j = nlohmann::json::parse(parplan::test::read_text(ok));
    j["parallel"]["post_validation"] = true;
    const std::string plan = (dir.path / "post_validation.json").string();
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan}, plan + ": /parallel: optimizer post-validation is Zero Bubble's");
    j["parallel"]["post_validation"] = "yes";
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan}, plan + ": /parallel/post_validation: expected true or false");
  }
  // FSDP2's copies: ZeRO-3 gathered per layer only, a flag or a plan key.
  expect_bad_estimate({"--model", "gpt3-13b", "--gpus", "8", "--zero", "2", "--fsdp2"},
                      "--fsdp2: FSDP2 is ZeRO 3 gathered one layer at a time (zero3_gather_unit layer); the plan has ZeRO 2");
  expect_bad_estimate({"--model", "gpt3-13b", "--gpus", "8", "--zero", "3", "--zero3-gather-unit", "linear", "--fsdp2"},
                      "--fsdp2: FSDP2 is ZeRO 3 gathered one layer at a time (zero3_gather_unit layer); the plan has ZeRO 3 "
                      "gathered one linear at a time");
  {
    ScratchDir dir;
    nlohmann::json j = nlohmann::json::parse(parplan::test::read_text(ok));
    j["parallel"]["fsdp2"] = true;
    const std::string plan = (dir.path / "fsdp2.json").string();
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan}, plan + ": /parallel: FSDP2 is ZeRO 3 gathered one layer at a time");
    j["parallel"]["fsdp2"] = 1;
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan}, plan + ": /parallel/fsdp2: expected true or false");
  }
  // Sequence parallelism over tokens tp does not divide.
  expect_bad_estimate({"--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--sp", "--seq", "12"},
                      "--sequence-parallel: sequence parallelism splits each rank's 12 tokens (seq 12) over tp 8, "
                      "which does not divide them");
  // The ZeRO-3 gather unit without ZeRO-3 would have no effect: refused, a flag or a plan key.
  expect_bad_estimate({"--model", "gpt3-13b", "--gpus", "8", "--zero", "1", "--zero3-gather-unit", "linear"},
                      "--zero3-gather-unit: the gather unit linear is how ZeRO 3 gathers its sharded weights; the plan "
                      "has ZeRO 1, whose weights are not sharded, so it would have no effect");
  {
    ScratchDir dir;
    nlohmann::json j = nlohmann::json::parse(parplan::test::read_text(ok));
    j["parallel"]["zero3_gather_unit"] = "linear";
    const std::string plan = (dir.path / "unit.json").string();
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan}, plan + ": /parallel: the gather unit linear is how ZeRO 3 gathers");
  }
  // HSDP replicas: at least 1, dividing dp, leaving a shard group of 2 or more dp ranks, with a sharded optimizer,
  // without split experts, with FSDP's per-layer gathers; a flag or a plan key.
  const std::vector<std::string> hsdp = {"--model", "gpt3-13b", "--gpus", "16", "--zero", "1"};
  auto with = [](std::vector<std::string> a, std::initializer_list<std::string> more) {
    a.insert(a.end(), more);
    return a;
  };
  expect_bad_estimate(with(hsdp, {"--dp-replicate", "0"}), "--dp-replicate: Value 0 not in range 1 to");
  expect_bad_estimate(with(hsdp, {"--dp-replicate", "-2"}), "--dp-replicate: Value -2 not in range 1 to");
  expect_bad_estimate(with(hsdp, {"--dp-replicate", "3"}),
                      "--dp-replicate: dp_replicate 3 must be at least 1 and divide dp 16");
  expect_bad_estimate(with(hsdp, {"--dp-replicate", "16"}),
                      "--dp-replicate: dp_replicate 16 = dp with cp 1 leaves one rank per shard group");
  expect_bad_estimate({"--model", "gpt3-13b", "--gpus", "16", "--dp-replicate", "2"},
                      "--dp-replicate: dp_replicate 2 (HSDP) replicates sharded model states and needs ZeRO 1-3 or the "
                      "distributed optimizer; the plan has ZeRO 0");
  expect_bad_estimate({"--model", "mixtral-8x7b", "--gpus", "16", "--ep", "2", "--zero", "1", "--dp-replicate",
                       "2"},
                      "--dp-replicate: dp_replicate 2 (HSDP) with ep 2: replicas of expert-data-parallel groups are "
                      "not modelled (HSDP needs ep 1 and no --etp)");
  expect_bad_estimate({"--model", "gpt3-13b", "--gpus", "16", "--zero", "3", "--zero3-gather-unit", "linear",
                       "--dp-replicate", "2"},
                      "--dp-replicate: dp_replicate 2 (HSDP) is modelled for ZeRO-3 gathered one layer at a time");
  {
    ScratchDir dir;
    nlohmann::json j = nlohmann::json::parse(parplan::test::read_text(ok));
    const std::string plan = (dir.path / "hsdp.json").string();
    j["parallel"]["dp_replicate"] = 2;  // dp 2: no shard group left
    j["parallel"]["zero_stage"] = 1;
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan},
                        plan + ": /parallel: dp_replicate 2 = dp with cp 1 leaves one rank per shard group");
    j["parallel"]["dp_replicate"] = 4;
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan}, plan + ": /parallel/dp_replicate: 4 does not divide dp 2");
    j["parallel"]["dp_replicate"] = 0;
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan}, plan + ": /parallel/dp_replicate");
    j["parallel"]["dp"] = 4;
    j["parallel"]["tp"] = 2;
    j["parallel"]["num_microbatches"] = 4;
    j["parallel"]["dp_replicate"] = 2;
    j["parallel"]["zero_stage"] = 0;
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan}, plan + ": /parallel: dp_replicate 2 (HSDP) replicates sharded model states");
  }
  // The copies around TP collectives on the sequence dim: tp > 1 with sequence parallelism, a flag or a plan key.
  expect_bad_estimate({"--model", "gpt3-13b", "--gpus", "8", "--tp-collective-copies"},
                      "--tp-collective-copies: the copies around TP collectives on the sequence dim need tp > 1 with "
                      "sequence parallelism; the plan has tp 1 without sequence parallelism");
  expect_bad_estimate({"--model", "gpt3-13b", "--gpus", "8", "--tp", "8", "--tp-collective-copies"},
                      "--tp-collective-copies: the copies around TP collectives on the sequence dim need tp > 1 with "
                      "sequence parallelism; the plan has tp 8 without sequence parallelism");
  {
    ScratchDir dir;
    nlohmann::json j = nlohmann::json::parse(parplan::test::read_text(ok));
    j["parallel"]["tp_collective_copies"] = true;
    j["parallel"]["sequence_parallel"] = false;
    const std::string plan = (dir.path / "tp_copies.json").string();
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan}, plan + ": /parallel: the copies around TP collectives on the sequence dim");
    j["parallel"]["tp_collective_copies"] = "yes";
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan}, plan + ": /parallel/tp_collective_copies: expected true or false");
  }
  // Micro-pipelined TP: tp > 1 with SP, not beside TP comm overlap, a dense model; a plan's value is a boolean; run
  // does not lower it.
  expect_bad_estimate({"--model", "gpt3-13b", "--gpus", "8", "--tp", "8", "--micropipeline-tp"},
                      "--micropipeline-tp: micro-pipelined TP splits sequence-parallel collectives: it needs tp > 1 with "
                      "sequence parallelism; the plan has tp 8 without sequence parallelism");
  expect_bad_estimate({"--model", "gpt3-13b", "--gpus", "8", "--tp", "8", "--sp", "--overlap-tp", "--micropipeline-tp"},
                      "--micropipeline-tp: micro-pipelined TP and TP comm overlap are two ways to run the same "
                      "collectives: give one");
  expect_bad_estimate({"--model", "mixtral-8x7b", "--gpus", "64", "--tp", "8", "--sp", "--ep", "8", "--micropipeline-tp"},
                      "--micropipeline-tp: micro-pipelined TP is modelled for dense layers");
  expect_bad({{"suggest", "--params", "7e9", "--gpus", "8", "--no-sp", "--micropipeline-tp"},
              "--micropipeline-tp: it splits sequence-parallel collectives; --no-sp leaves none"});
  {
    ScratchDir dir;
    nlohmann::json j = nlohmann::json::parse(parplan::test::read_text(ok));
    j["parallel"]["micropipeline_tp"] = "yes";
    const std::string plan = (dir.path / "micropipeline.json").string();
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan}, plan + ": /parallel/micropipeline_tp: expected true or false");
  }
  // A tiny micro-pipelined plan stands (estimate prices it); run refuses it, naming the field.
  const std::string piped = kBad + "plan_micropipeline_run.json";
  CHECK(parplan::test::run_parplan({"estimate", "--plan", piped}, {}, 60).exit_code == 0);
  expect_bad({{"run", "--backend", "host", "--plan", piped},
              "run: /parallel/micropipeline_tp: micro-pipelined TP is not lowered yet"});
  // fp8 TP all-gathers: fp8, tp > 1 and sequence parallelism.
  // One stage is named in the singular.
  expect_bad_estimate({"--model", "gpt3-175b", "--gpus", "8", "--tp", "8", "--schedule", "interleaved", "--vpp", "2"},
                      "--vpp: schedule interleaved with vpp 2: interleaving needs vpp >= 2, pp >= 2, every stage's layers "
                      "divisible by vpp (the 1 stage holds 96 of 96 layers)");
  expect_bad_estimate({"--model", "gpt3-13b", "--gpus", "8", "--tp", "8", "--sp", "--fp8-tp-gather"},
                      "--fp8-tp-gather: fp8 TP all-gathers need --precision fp8 (the precision is bf16)");
  expect_bad_estimate({"--model", "llama3-8b", "--gpus", "8", "--precision", "fp8", "--fp8-tp-gather"},
                      "--fp8-tp-gather: fp8 TP all-gathers need --precision fp8, tp > 1 and sequence parallelism; the "
                      "plan has precision fp8, tp 1 without sequence parallelism");
  {
    ScratchDir dir;
    nlohmann::json j = nlohmann::json::parse(parplan::test::read_text(ok));
    j["training"]["fp8_tp_gather"] = 1;
    const std::string plan = (dir.path / "fp8_tp_gather.json").string();
    parplan::test::write_text(plan, j.dump(2));
    expect_bad_estimate({"--plan", plan}, plan + ": /training/fp8_tp_gather: expected true or false");
    j = nlohmann::json::parse(parplan::test::read_text(ok));
    j["training"]["fp8_activation_cache"] = "yes";
    const std::string cache = (dir.path / "fp8_activation_cache.json").string();
    parplan::test::write_text(cache, j.dump(2));
    expect_bad_estimate({"--plan", cache}, cache + ": /training/fp8_activation_cache: expected true or false");
    j["training"]["fp8_activation_cache"] = true;  // on a 16-bit plan
    parplan::test::write_text(cache, j.dump(2));
    expect_bad_estimate({"--plan", cache}, "the fp8 activation cache (DeepSeek-V3's) needs --precision fp8");
  }
  expect_bad({{"simulate", "--plan", ok, "--recompute", "full"}, "--recompute: cannot be combined with --plan"});
  expect_bad({{"simulate", "--plan", ok, "--model", "gpt3-13b"}, "--model: cannot be combined with --plan"});
  // What a plan document does not fix stays allowed: user profiles, and simulate's bucket size.
  CHECK(run_parplan({"estimate", "--plan", ok, "--profile", kBad + "gpu_ok.json"}, {}, 60).exit_code != 2);
  CHECK(run_parplan({"simulate", "--plan", ok, "--bucket-mb", "80"}, {}, 60).exit_code != 2);
}

TEST_CASE("bad input: check") {
  const std::string ok = kBad + "plan_ok.json";
  const std::vector<BadCase> cases = {
      {{"check"}, "--plan"},
      {{"check", "--plan", kBad + "does-not-exist.json"}, "--plan"},
      {{"check", "--plan", kBad + "plan_mesh_mismatch.json"}, "plan_mesh_mismatch.json: /parallel: dp*tp*pp*cp"},
      {{"check", "--plan", kBad + "plan_tp_not_dividing_heads.json"}, "/parallel: tp 3 does not divide"},
      {{"check", "--plan", kBad + "model_truncated.json"}, "model_truncated.json: malformed JSON"},
      {{"check", "--plan", kBad + "a_directory.json"}, "--plan"},
      {{"check", "--plan", ok, "--memory", "0"}, "--memory"},
      {{"check", "--plan", ok, "--memory", "-5GiB"}, "--memory"},
      {{"check", "--plan", ok, "--memory", "nanGiB"}, "--memory"},
      {{"check", "--plan", ok, "--memory", "1e30TiB"}, "--memory"},
      {{"check", "--plan", ok, "--headroom", "150%"}, "--headroom"},
      {{"check", "--plan", ok, "--min-mfu", "2"}, "--min-mfu"},
      {{"check", "--plan", ok, "--max-bubble", "nan"}, "--max-bubble"},
      {{"check", "--plan", ok, "--max-dp-comm", "-0.1"}, "--max-dp-comm"},
      {{"check", "--plan", ok, "--max-step-time", "0s"}, "--max-step-time"},
      {{"check", "--plan", ok, "--max-step-time", "1e308min"}, "--max-step-time"},
      {{"check", "--plan", ok, "--max-time-regression", "-5%"}, "--max-time-regression"},
      {{"check", "--plan", ok, "--require-baseline"}, "--require-baseline: needs --baseline FILE"},
      {{"check", "--plan", ok, "--baseline", kBad + "model_ok.json"}, "model_ok.json: /parplan_check_baseline"},
      {{"check", "--plan", ok, "--junit", "/nonexistent-dir/report.xml"}, "--junit"},
      {{"check", "--plan", ok, "--config", kBad + "does-not-exist.toml"}, "--config"},
      {{"check", "--plan", ok, "--profile", kBad + "gpu_zero_memory.json"}, "/memory_GiB"},
  };
  for (const auto& c : cases) expect_bad(c);
}

TEST_CASE("bad input: run --backend host and calibrate") {
  const std::string ok = kBad + "plan_ok.json";
  const std::vector<BadCase> cases = {
      {{"run", "--backend", "host"}, "--plan"},
      {{"run", "--backend", "host", "--plan", kBad + "does-not-exist.json"}, "--plan"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_mesh_mismatch.json"}, "/parallel: dp*tp*pp*cp"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_pp_exceeds_layers.json"}, "/parallel: pp 64 exceeds"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_dualpipev_run.json"},
       "/parallel/schedule: run does not lower dualpipe-v (its V places the last chunk on stage 0)"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_zbv_run.json"},
       "/parallel/schedule: run does not lower zb-v (its V places the last chunk on stage 0)"},
      {{"run", "--backend", "host", "--plan", kBad + "model_truncated.json"}, "malformed JSON"},
      {{"run", "--backend", "gpu", "--plan", ok}, "--backend"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_offload_run.json"}, "run: /parallel/offload optimizer: offload is not lowered yet"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_recompute_modules_run.json"},
       "run: /parallel/recompute_modules core_attn,mlp: not lowered yet"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_recompute_layers_too_many.json"},
       "/parallel: recompute_layers 41 needs recompute full, at most the layers of a model chunk (the largest holds 40)"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_selective_op_unfused_run.json"},
       "/parallel: recompute selective-op"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_offload_modules_run.json"},
       "run: /parallel/offload_modules expert_fc1: fine-grained activation offloading is not lowered yet"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_mtp_run.json"},
       "run: /model/mtp_layers 1: multi-token prediction is not lowered yet"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_sliding_window_run.json"},
       "run: /model/sliding_window 8: sliding-window attention is not lowered yet"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_moe_etp_run.json"}, "run: /parallel/etp 1: MoE parallel folding"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_moe_deepep_run.json"}, "run: /parallel/moe_dispatcher deepep"},
      {{"run", "--backend", "host", "--plan", kBad + "plan_moe_zero3_run.json"}, "run: /parallel/zero_stage 3 with experts"},
      {{"run", "--backend", "host", "--plan", ok, "--steps", "0"}, "--steps"},
      {{"run", "--backend", "host", "--plan", ok, "--warmup", "-1"}, "--warmup"},
      {{"run", "--backend", "host", "--plan", ok, "--rank", "-1"}, "--rank"},
      {{"run", "--backend", "host", "--plan", ok, "--rank", "999"}, "--rank"},
      {{"run", "--backend", "host", "--plan", ok, "--trace", "/nonexistent-dir/trace.json"}, "--trace"},
      {{"run", "--backend", "host", "--plan", ok, "--trace", kBad + "a_directory.json"}, "--trace"},
      {{"run", "--backend", "host", "--plan", ok, "--profile", kBad + "cluster_zero_bandwidth.json"},
       "/intra_node/bandwidth_GBps"},
      {{"run", "--backend", "host", "--plan", ok, "--gpu", "no-such-gpu"}, "--gpu: unknown GPU 'no-such-gpu'"},
      {{"run", "--backend", "host", "--plan", ok, "--gpu", kBad + "does-not-exist.json"}, "--gpu"},
      {{"run", "--backend", "host", "--plan", ok, "--gpu", kBad + "cluster_ok.json"}, "--gpu: "},
      {{"run", "--backend", "host", "--plan", ok, "--gpu", kBad + "gpu_zero_memory.json"}, "/memory_GiB"},
      {{"run", "--backend", "host", "--plan", ok, "--profile", kBad + "gpu_ok.json", "--profile", kBad + "gpu_ok_other.json"},
       "--gpu: the --profile files hold 2 GPU profiles"},
      {{"calibrate", "--backend", "foo"}, "--backend"},
      {{"calibrate", "--backend", "host"}, "--out"},
      {{"calibrate", "--backend", "host", "--ranks", "0"}, "--ranks"},
      {{"calibrate", "--backend", "host", "--ranks", "256", "--out", "/tmp/parplan-never-written.json"},
       "--ranks: 256 ranks on --backend host (at most 64"},
      {{"calibrate", "--backend", "host", "--out", "/nonexistent-dir/gpu.json"}, "--out"},
      {{"calibrate", "--backend", "host", "--out", kBad + "a_directory.json"}, "--out"},
  };
  for (const auto& c : cases) expect_bad(c);
  // Two outputs: the second one is bad, so neither may be written.
  ScratchDir dir;
  expect_bad({{"calibrate", "--backend", "host", "--out", (dir.path / "gpu.json").string(), "--cluster-out",
               "/nonexistent-dir/cluster.json"},
              "--cluster-out"},
             &dir);
}

TEST_CASE("bad input: simulate") {
  const std::string ok = kBad + "plan_ok.json";
  const std::vector<BadCase> cases = {
      {{"simulate"}, "--model or --params is required"},
      {{"simulate", "--plan", kBad + "does-not-exist.json"}, "--plan"},
      {{"simulate", "--plan", kBad + "plan_mesh_mismatch.json"}, "/parallel: dp*tp*pp*cp"},
      {{"simulate", "--plan", kBad + "plan_pp_exceeds_layers.json"}, "/parallel: pp 64 exceeds"},
      {{"simulate", "--plan", kBad + "model_truncated.json"}, "malformed JSON"},
      {{"simulate", "--model", "gpt3-175b", "--gpus", "64", "--tp", "3"}, "--gpus"},
      {{"simulate", "--model", "gpt3-175b", "--gpus", "0"}, "--gpus"},
      {{"simulate", "--params", "1e30", "--gpus", "8"}, "--params"},
      {{"simulate", "--model", "gpt3-175b", "--gpus", "64", "--seq", "0"}, "--seq"},
      {{"simulate", "--model", "gpt3-175b", "--gpus", "64", "--bucket-mb", "nan"}, "--bucket-mb"},
      {{"simulate", "--plan", ok, "--bucket-mb", "nan"}, "--bucket-mb"},
      {{"simulate", "--model", "gpt3-175b", "--gpus", "64", "--tp", "8", "--pp", "8", "--microbatches", "100000000"},
       "too large to simulate"},
      // Within the schedule limit but too many tasks: refused before the graph is built (these ran out of memory).
      {{"simulate", "--model", "gpt3-175b", "--gpus", "768", "--tp", "8", "--pp", "96", "--microbatches", "100000",
        "--global-batch", "100000"},
       "simulate: more than 16777216 tasks"},
      // Simulated in 2 s, but its 2.8 M tasks would write a trace of about 0.7 GB: a timeline is kept to 2^20 tasks.
      {{"simulate", "--model", "gpt3-1.3b", "--gpus", "8", "--pp", "4", "--microbatches", "200000", "--global-batch",
        "400000", "--trace", "/dev/null"},
       "simulate: more than 1048576 tasks (4 stages x 200000 microbatches x 1 chunks, 42 gradient buckets per stage: a "
       "larger --bucket-mb makes fewer) is too large to record as a timeline"},
      {{"simulate", "--model", "gpt3-175b", "--gpus", "512", "--tp", "8", "--pp", "8", "--zero", "1", "--bucket-mb",
        "0.001"},
       "a larger --bucket-mb makes fewer"},
      {{"simulate", "--model", "gpt3-175b", "--gpus", "64", "--gpu", kBad + "gpu_zero_bandwidth.json"},
       "/hbm_bandwidth_GBps"},
  };
  for (const auto& c : cases) expect_bad(c);
  // Output files: a bad second output must not leave the first one behind.
  ScratchDir dir;
  const std::string trace = (dir.path / "trace.json").string(), svg = (dir.path / "step.svg").string();
  expect_bad({{"simulate", "--plan", ok, "--trace", trace, "--svg", "/nonexistent-dir/step.svg"}, "--svg"}, &dir);
  expect_bad({{"simulate", "--plan", ok, "--svg", svg, "--trace", "/nonexistent-dir/trace.json"}, "--trace"}, &dir);
  expect_bad({{"simulate", "--plan", ok, "--trace", dir.path.string()}, "--trace"}, &dir);
  expect_bad({{"simulate", "--plan", kBad + "plan_mesh_mismatch.json", "--trace", trace, "--svg", svg}, "/parallel"},
             &dir);
}

TEST_CASE("bad input: validate (published-run files)") {
  const std::vector<BadCase> cases = {
      {{"validate"}, "--runs"},
      {{"validate", "--runs", kBad + "does-not-exist.json"}, "--runs"},
      {{"validate", "--runs", kBad + "a_directory.json"}, "--runs"},
      {{"validate", "--runs", "/dev/zero"}, "--runs"},
      {{"validate", "--runs", kBad + "model_truncated.json"}, "malformed JSON"},
      {{"validate", "--runs", kBad + "runs_not_array.json"}, "runs_not_array.json: /: expected a JSON array"},
      {{"validate", "--runs", kBad + "runs_duplicate_id.json"}, "runs_duplicate_id.json: /1/id: duplicate"},
      {{"validate", "--runs", kBad + "runs_duplicate_key.json"}, "runs_duplicate_key.json: /0/parallel/tp: duplicate key"},
      {{"validate", "--runs", kBad + "runs_ok.json", "--plans", "/nonexistent-dir/plans"}, "--plans"},
      {{"validate", "--runs", kBad + "runs_ok.json", "--plans", kBad + "runs_ok.json"}, "--plans"},
      {{"validate", "--runs", kBad + "runs_ok.json", "--profile", kBad + "gpu_zero_memory.json"}, "/memory_GiB"},
      {{"validate", "--runs", kBad + "runs_ok.json", "--unstated", "guess"}, "--unstated: 'guess' is not strict or search"},
      {{"validate", "--runs", kBad + "runs_ok.json", "--fit-fields", "gemm.peak_fraction"}, "--fit-fields: only with --cross-validate"},
      {{"validate", "--runs", kBad + "runs_ok.json", "--cross-validate", "--fit-fields", "gemm.speed"}, "--fit-fields"},
      {{"validate", "--runs", kBad + "runs_ok.json", kBad + "runs_ok.json"}, "--runs: run id"},
  };
  for (const auto& c : cases) expect_bad(c);
}

TEST_CASE("bad input: an output path that cannot be written leaves nothing behind") {
  ScratchDir dir;
  const std::vector<std::string> good = {"estimate", "--model", "gpt3-1.3b", "--gpus", "8"};
  expect_bad({with(good, {"-o", "/nonexistent-dir/plan.json"}), "-o"});
  expect_bad({with(good, {"-o", dir.path.string()}), "-o"}, &dir);  // a directory
  const fs::path sub = dir.path / "sub";
  fs::create_directory(sub);
  expect_bad({with(good, {"-o", (sub / "missing" / "plan.json").string()}), "-o"});
  CHECK(fs::is_empty(sub));
  // Sanity: the same command with a writable path succeeds and writes exactly the plan file.
  const auto r = run_parplan(with(good, {"-o", (sub / "plan.json").string()}));
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(sub / "plan.json"));
  CHECK(std::distance(fs::directory_iterator(sub), fs::directory_iterator{}) == 1);
  // A name at the file system's 255-byte limit is written (its temporary file once took the name plus a suffix).
  const fs::path longest = dir.path / (std::string(250, 'a') + ".json");
  CHECK(run_parplan(with(good, {"-o", longest.string()})).exit_code == 0);
  CHECK(fs::file_size(longest) > 0);
}

TEST_CASE("bad input: outputs that are not plain files, and checks made before any output is written") {
  ScratchDir dir;
  const std::vector<std::string> good = {"estimate", "--model", "gpt3-1.3b", "--gpus", "8"};
  // A FIFO (or any existing non-regular file but a device) is refused; renaming onto it would replace it.
  const fs::path fifo = dir.path / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0644) == 0);
  expect_bad({with(good, {"-o", fifo.string()}), "is not a regular file"});
  CHECK(fs::is_fifo(fifo));
  // ... and as an input a named FIFO is refused at once (with no writer, opening it blocked forever).
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"estimate", "--plan", fifo.string()}, {"estimate", "--model", fifo.string(), "--gpus", "8"},
        {"validate", "--runs", fifo.string()}, {"check", "--plan", fifo.string()}, {"profiles", "validate", fifo.string()},
        {"check", "--plan", kBad + "plan_ok.json", "--baseline", fifo.string()}}) {
    expect_bad({args, "is a named pipe (FIFO)"});
  }
  {  // an anonymous pipe (a shell's <(...)) is still read: it was made with its writer
    const std::string runs = parplan::test::read_text(kBad + "runs_ok.json");
    REQUIRE(runs.size() < 65536);  // fits in the pipe's buffer, so the write below cannot block
    int p[2];
    REQUIRE(pipe(p) == 0);
    REQUIRE(write(p[1], runs.data(), runs.size()) == static_cast<ssize_t>(runs.size()));
    close(p[1]);
    const auto r = run_parplan({"validate", "--runs", "/dev/fd/" + std::to_string(p[0])});
    close(p[0]);
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("1 scored") != std::string::npos);
  }
  // A symbolic link is followed: its target gets the plan, the link stays a link.
  const fs::path target = dir.path / "target.json", link = dir.path / "link.json";
  fs::create_symlink(target, link);
  CHECK(run_parplan(with(good, {"-o", link.string()})).exit_code == 0);
  CHECK(fs::is_symlink(link));
  CHECK(fs::file_size(target) > 0);
  // A character device is written in place, not replaced: /dev/null stays a device.
  CHECK(run_parplan(with(good, {"-o", "/dev/null"})).exit_code == 0);
  CHECK(fs::is_character_file("/dev/null"));
  // suggest checks -o before searching; contradictory pins are usage errors.
  expect_bad({{"suggest", "--params", "13e9", "--gpus", "8", "-o", "/nonexistent-dir/plan.json"}, "-o"});
  expect_bad({{"suggest", "--params", "13e9", "--gpus", "8", "--vpp", "2", "--schedule", "gpipe"},
              "--vpp: 2 chunks per stage need --schedule interleaved"});
  expect_bad({{"suggest", "--params", "13e9", "--gpus", "8", "--simulate", "101"}, "--simulate"});
  expect_bad({{"suggest", "--params", "13e9", "--gpus", "8", "--zero3-gather-unit", "linear", "--fsdp2"},
              "--fsdp2: FSDP2 gathers one layer at a time; --zero3-gather-unit linear is DeepSpeed's"});
  expect_bad({{"suggest", "--params", "13e9", "--gpus", "8", "--zero", "1", "--fsdp2"},
              "--fsdp2: prices ZeRO-3 candidates; --zero 1 leaves none"});
  // --dp-replicate: CLI11's range as --tp's; pins no sharding or mesh admits are one line naming the flag, exit 2.
  expect_bad({{"suggest", "--params", "13e9", "--gpus", "8", "--dp-replicate", "0"},
              "--dp-replicate: Value 0 not in range 1 to 100000000"});
  expect_bad({{"estimate", "--params", "13e9", "--gpus", "8", "--dp-replicate", "1e9"},
              "--dp-replicate: 1e9 is not a decimal integer"});
  expect_bad({{"suggest", "--params", "13e9", "--gpus", "8", "--dp-replicate", "2", "--zero", "0",
               "--no-distributed-optimizer"},
              "--dp-replicate 2: HSDP replicates sharded states; --zero 0 with --no-distributed-optimizer leaves "
              "none"});
  expect_bad({{"suggest", "--model", "llama3-8b", "--gpus", "256", "--dp-replicate", "3"},
              "--dp-replicate 3: no configuration of 256 GPUs has a dp it divides with a shard group left"});
  expect_bad({{"suggest", "--model", "llama3-8b", "--gpus", "256", "--dp-replicate", "512"},
              "--dp-replicate 512: no configuration of 256 GPUs has a dp it divides"});
  expect_bad({{"suggest", "--model", "llama3-8b", "--gpus", "256", "--dp-replicate", "2", "--tp", "8", "--pp", "32"},
              "--dp-replicate 2: no configuration of 256 GPUs with --tp 8, --pp 32 has a dp it divides"});
  expect_bad({{"suggest", "--model", "mixtral-8x7b", "--gpus", "64", "--dp-replicate", "2", "--ep", "2"},
              "--dp-replicate 2 with --ep 2: replicas of expert-data-parallel groups are not modelled"});
  expect_bad({{"suggest", "--model", "llama3-8b", "--gpus", "256", "--dp-replicate", "2", "--zero", "3",
               "--zero3-gather-unit", "linear"},
              "--dp-replicate 2 with --zero3-gather-unit linear: HSDP is modelled for ZeRO-3 gathered one layer"});
  // calibrate --from-runs: both outputs checked before fitting; a cluster field needs --cluster-out.
  ScratchDir out;
  const std::string runs = kBad + "runs_ok.json";
  expect_bad({{"calibrate", "--from-runs", runs, "--gpu", "a100-80gb", "--out", (out.path / "gpu.json").string(),
               "--cluster-out", "/nonexistent-dir/cluster.json"},
              "--cluster-out"},
             &out);
  expect_bad({{"calibrate", "--from-runs", runs, "--gpu", "a100-80gb", "--out", (out.path / "gpu.json").string(),
               "--unstated", "loose"},
              "--unstated: 'loose' is not strict or search"},
             &out);
  expect_bad({{"calibrate", "--from-runs", runs, runs, "--gpu", "a100-80gb", "--out", (out.path / "gpu.json").string()},
              "--from-runs: run id '"},
             &out);
  expect_bad({{"calibrate", "--from-runs", runs, "--gpu", "a100-80gb", "--out", (out.path / "gpu.json").string(),
               "--fit-fields", "inter_node.efficiency"},
              "--fit-fields: inter_node.efficiency is a cluster field"},
             &out);
}

TEST_CASE("bad input: check --headroom beyond the GPU, a baseline with zero time or memory") {
  const std::string ok = kBad + "plan_ok.json";
  expect_bad({{"check", "--plan", ok, "--headroom", "100GiB"}, "--headroom: 100.00 GiB leaves nothing"});
  ScratchDir dir;
  const std::string base = (dir.path / "baseline.json").string();
  REQUIRE(run_parplan({"check", "--plan", ok, "--baseline", base, "--update-baseline"}).exit_code == 0);
  for (const char* key : {"step_s", "peak_memory_bytes"}) {
    nlohmann::json j = nlohmann::json::parse(parplan::test::read_text(base));
    for (auto& [name, snap] : j["plans"].items()) snap[key] = 0.0;
    const std::string bad = (dir.path / (std::string(key) + ".json")).string();
    parplan::test::write_text(bad, j.dump(2));
    expect_bad({{"check", "--plan", ok, "--baseline", bad}, std::string(key) + ": 0 is out of range"});
  }
}

TEST_CASE("bad input: run --backend host refuses a plan whose tensors cannot fit in this machine's memory") {
  ScratchDir dir;
  const std::string plan = (dir.path / "175b.json").string();
  REQUIRE(run_parplan({"estimate", "--model", "gpt3-175b", "--gpus", "64", "--tp", "8", "--pp", "8", "-o", plan})
              .exit_code <= 1);
  // 64 ranks of GPT-3 175B: terabytes of tensors, refused before anything is allocated (it was killed for memory).
  expect_bad({{"run", "--backend", "host", "--plan", plan}, "--backend host: the plan's 64 ranks need about"});
}

TEST_CASE("bad input: run --backend host refuses a plan that would compute for hours on the CPU") {
  ScratchDir dir;
  const std::string plan = (dir.path / "0.1b.json").string();
  // 0.1B parameters at the default batch (2,048 x 2,048 tokens): small in memory, ~3,000 TFLOP a step (it ran for
  // hours). Refused for the whole run and for one step; a rank-local run of one rank is the same plan here.
  REQUIRE(run_parplan({"estimate", "--params", "0.1e9", "--gpus", "1", "-o", plan}).exit_code <= 1);
  expect_bad({{"run", "--backend", "host", "--plan", plan}, "--backend host: 7 step(s) of this plan execute about"});
  expect_bad({{"run", "--backend", "host", "--plan", plan, "--steps", "1", "--warmup", "0", "--rank", "0"},
              "--backend host: 1 step(s) of this plan execute about"});
}

TEST_CASE("bad input: an empty option value is an error, not 'not given'") {
  const std::string ok = kBad + "plan_ok.json";
  const std::vector<BadCase> cases = {
      {{"estimate", "--model", "gpt3-1.3b", "--gpus", "8", "-o", ""}, "--out: empty value"},
      {{"simulate", "--plan", ok, "--trace", ""}, "--trace: empty value"},
      {{"suggest", "--params", "13e9", "--gpus", "8", "--schedule", ""}, "--schedule: empty value"},
      {{"check", "--plan", ok, "--headroom", ""}, "--headroom: empty value"},
      {{"profiles", "list", "--kind", ""}, "--kind: empty value"},
      // -o - and --json would print two documents on stdout
      {{"estimate", "--model", "gpt3-1.3b", "--gpus", "8", "-o", "-", "--json"}, "-o: '-' (stdout) and --json"},
      {{"suggest", "--params", "13e9", "--gpus", "8", "-o", "-", "--json"}, "-o: '-' (stdout) and --json"},
      {{"simulate", "--plan", ok, "--trace", "-", "--json"}, "--trace: '-' (stdout) and --json"},
      {{"simulate", "--plan", ok, "--svg", "-", "--json"}, "--svg: '-' (stdout) and --json"},
      {{"simulate", "--plan", ok, "--trace", "-", "--svg", "-"}, "--trace and --svg: both name stdout"},
      {{"check", "--plan", ok, "--junit", "-", "--json"}, "--junit: '-' (stdout) and --json"},
      {{"check", "--plan", ok, "--baseline", "-", "--update-baseline", "--json"}, "--baseline: '-' (stdout) and --json"},
      {{"check", "--plan", ok, "--baseline", "-", "--update-baseline", "--junit", "-"},
       "--junit and --baseline: both name stdout"},
  };
  for (const auto& c : cases) expect_bad(c);
  // The same file for both outputs: the SVG replaced the trace. Nothing is written.
  ScratchDir dir;
  const std::string a = (dir.path / "step.out").string();
  const std::string b = (dir.path / "." / "step.out").string();
  expect_bad({{"simulate", "--plan", ok, "--trace", a, "--svg", b}, "--trace and --svg: both name '" + a + "'"}, &dir);
  // ... or through a link to a file not there yet (the link is followed when writing), and /dev/stdout is stdout.
  const std::string target = (dir.path / "target.out").string(), link = (dir.path / "link.out").string();
  fs::create_symlink("target.out", link);
  expect_bad({{"simulate", "--plan", ok, "--trace", link, "--svg", target}, "--trace and --svg: both name"});
  fs::remove(link);
  // (Here stdout is a pipe, which outputs refuse before that check: either way the flag is named, nothing written.)
  expect_bad({{"simulate", "--plan", ok, "--svg", "/dev/stdout", "--json"}, "--svg: "}, &dir);
  expect_bad({{"simulate", "--plan", ok, "--trace", "-", "--svg", "/dev/stdout"}, "--svg"}, &dir);
  expect_bad({{"estimate", "--plan", ok, "-o", "/dev/stdout", "--json"}, "-o: "}, &dir);
}

TEST_CASE("bad input: an output naming one of the command's inputs is refused, and no output is written") {
  ScratchDir dir;
  auto file = [&](const std::string& name) { return (dir.path / name).string(); };
  const std::string plan = file("plan.json"), runs = file("runs.json"), gpu = file("gpu.json");
  fs::copy_file(kBad + "plan_ok.json", plan);
  fs::copy_file(kBad + "runs_ok.json", runs);
  fs::copy_file(kBad + "gpu_ok.json", gpu);
  fs::create_symlink("plan.json", file("link.json"));
  const auto before = [&] {
    std::vector<std::string> texts;
    for (const std::string& f : {plan, runs, gpu}) texts.push_back(parplan::test::read_text(f));
    return texts;
  }();
  const std::vector<BadCase> cases = {
      {{"simulate", "--plan", plan, "--trace", plan}, "--trace: '" + plan + "' is the --plan input"},
      {{"simulate", "--plan", plan, "--trace", file("t.json"), "--svg", file("./plan.json")}, "--svg: "},
      {{"simulate", "--plan", file("link.json"), "--svg", plan}, "is the --plan input"},  // one file, two names
      {{"estimate", "--plan", plan, "-o", plan}, "-o: '" + plan + "' is the --plan input"},
      {{"estimate", "--model", "gpt3-1.3b", "--gpus", "8", "--profile", gpu, "-o", gpu}, "is the --profile input"},
      {{"suggest", "--model", "gpt3-1.3b", "--gpus", "8", "--profile", gpu, "-o", gpu}, "is the --profile input"},
      {{"check", "--plan", plan, "--junit", plan}, "--junit: '" + plan + "' is the --plan input"},
      {{"check", "--plan", plan, "--profile", gpu, "--baseline", file("b.json"), "--update-baseline", "--junit", gpu},
       "--junit: '" + gpu + "' is the --profile input"},
      {{"calibrate", "--from-runs", runs, "--gpu", "a100-80gb", "--out", runs}, "--out: '" + runs + "' is the --from-runs"},
      {{"calibrate", "--from-runs", runs, "--gpu", "a100-80gb", "--out", file("fit.json"), "--cluster-out", runs,
        "--fit-fields", "inter_node.efficiency"},
       "--cluster-out: '" + runs + "' is the --from-runs input"},
  };
  for (const auto& c : cases) expect_bad(c);
  // Nothing was replaced, and no other output was written.
  CHECK(before == std::vector<std::string>{parplan::test::read_text(plan), parplan::test::read_text(runs),
                                           parplan::test::read_text(gpu)});
  auto names = dir.entries();
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"gpu.json", "link.json", "plan.json", "runs.json"});
  // validate --plans: a run whose file name is the --runs file (runs_ok.json holds narayanan21_t1_1.7B).
  const std::string named = file("narayanan21_t1_1.7B.json");
  fs::copy_file(kBad + "runs_ok.json", named);
  expect_bad({{"validate", "--runs", named, "--plans", dir.path.string()}, "--plans: '" + named + "' is the --runs"});
  CHECK(parplan::test::read_text(named) == before[1]);
  // An output may replace the input of its own flag: check --baseline B --update-baseline reads and rewrites B.
  const std::string base = file("baseline.json");
  REQUIRE(run_parplan({"check", "--plan", plan, "--baseline", base, "--update-baseline"}).exit_code == 0);
  CHECK(run_parplan({"check", "--plan", plan, "--baseline", base, "--update-baseline"}).exit_code == 0);
}

TEST_CASE("validate --plans: file names from run ids stay inside the directory") {
  ScratchDir dir;
  const auto r = run_parplan({"validate", "--runs", kBad + "runs_id_path.json", "--plans", dir.path.string()});
  CHECK(r.exit_code == 0);
  auto names = dir.entries();
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"_.._.._escape.json", "sub_dir.json"});
  CHECK_FALSE(fs::exists(dir.path.parent_path() / "escape.json"));
}

TEST_CASE("extreme scale: 10^7 GPUs and 1T+ parameters give finite numbers or a clean error") {
  // Valid but huge: every number in the JSON estimate must be finite and the run must end quickly.
  const std::vector<std::vector<std::string>> runs = {
      {"--model", "gpt3-175b", "--gpus", "10000000", "--tp", "8", "--pp", "8"},
      {"--model", "megatron-1t", "--gpus", "16384", "--tp", "8", "--pp", "64"},
      {"--params", "1e14", "--gpus", "65536", "--tp", "8", "--pp", "128"},
      {"--params", "1e14", "--gpus", "1", "--seq", "100000000"},
      {"--model", "llama3-405b", "--gpus", "16384", "--tp", "8", "--pp", "16", "--seq", "131072", "--cp", "16"},
      {"--model", "mixtral-8x7b", "--gpus", "16384", "--tp", "2", "--pp", "4", "--ep", "8"},
  };
  for (const auto& args : runs) {
    std::string cmd;
    for (const auto& a : args) cmd += " " + a;
    CAPTURE(cmd);
    auto full = with({"estimate", "--json"}, args);
    const auto r = run_parplan(full, {}, 60);
    ++g_cases_run;
    CAPTURE(r.err);
    REQUIRE_FALSE(r.timed_out);
    if (r.exit_code == 2) {  // refused: one clean line
      CHECK(line_count(r.err) == 1);
      continue;
    }
    REQUIRE((r.exit_code == 0 || r.exit_code == 1));  // fits / does not fit
    const auto j = nlohmann::json::parse(r.out);
    int numbers = 0;
    std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& v) {
      if (v.is_number()) {
        ++numbers;
        CHECK(std::isfinite(v.get<double>()));
      } else if (v.is_structured()) {
        for (const auto& x : v) walk(x);
      }
    };
    walk(j);
    CHECK(numbers > 20);
    CHECK(j["time"]["step_s"].get<double>() > 0);
    CHECK(j["memory"]["peak_bytes"].get<double>() > 0);
  }
  // The search at 10^7 GPUs: bounded time and memory (it once allocated per pipeline stage up to pp = --gpus).
  const auto s = run_parplan({"suggest", "--params", "1e12", "--gpus", "10000000", "--threads", "1", "--json"}, {}, 300);
  ++g_cases_run;
  CHECK_FALSE(s.timed_out);
  CHECK((s.exit_code == 0 || s.exit_code == 1));
  MESSAGE("bad-input and extreme-scale invocations run so far: " << g_cases_run);
}

TEST_CASE("bad input: framework configs (import, --from, export)") {
  ScratchDir in;
  const std::string d = in.path.string() + "/";
  const std::string cmd = "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 24 --hidden-size 2048 "
                          "--num-attention-heads 16 --seq-length 2048";
  parplan::test::write_text(d + "placeholder.sh", cmd + " --tensor-model-parallel-size ${TP}\n");
  parplan::test::write_text(d + "two_tp.sh", "TP=2\n" + cmd + " --tensor-model-parallel-size $TP \\\n  --tensor-model-parallel-size 4\n");
  parplan::test::write_text(d + "two_precisions.sh", cmd + " --bf16 --fp16\n");
  parplan::test::write_text(d + "recompute_modules.sh", cmd + " --recompute-granularity selective --recompute-modules layernorm attention\n");
  parplan::test::write_text(d + "no_command.sh", "echo hello\n");
  parplan::test::write_text(d + "tab.yaml", "trainer:\n  devices: 8\nmodel:\n\ttensor_model_parallel_size: 2\n");
  parplan::test::write_text(d + "anchor.yaml", "trainer:\n  devices: &d 8\n");
  parplan::test::write_text(d + "interpolated.yaml", "trainer:\n  devices: 8\n  num_nodes: 1\nmodel:\n  tensor_model_parallel_size: ${tp}\n");
  parplan::test::write_text(d + "array_tables.toml", "[[layers]]\nx = 1\n");
  parplan::test::write_text(d + "no_format.yaml", "model:\n  x: 1\n");
  {
    std::string deep;
    for (int i = 0; i < 100000; ++i) deep += "- ";
    parplan::test::write_text(d + "deep.yaml", deep + "x\n");  // once a recursion per dash
  }
  parplan::test::write_text(d + "overflow.sh", "A=$((99999999999*99999999999*999999999))\n" + cmd + " --global-batch-size $A\n");
  parplan::test::write_text(d + "ds_bad_stage.json", "{\"zero_optimization\": {\"stage\": 4}}");
  for (const auto& [name, option] : {std::pair{"zero", "\"0\""}, std::pair{"negative", "-2"}, std::pair{"word", "\"every\""},
                                     std::pair{"float", "2.5"}, std::pair{"too_few", "\"40\""}}) {
    parplan::test::write_text(d + "titan_layer_ac_" + name + ".toml",
                              std::string("[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = ") + option + "\n");
  }
  const std::string nemo_fixture = parplan::test::read_text(std::string(PARPLAN_TEST_DIR) + "/cli/data/interop/nemo_gpt.yaml");
  for (const auto& [name, method, layers] : {std::tuple{"zero", "block", "0"}, std::tuple{"negative", "block", "-1"},
                                             std::tuple{"word", "block", "three"}, std::tuple{"method", "blocks", "2"},
                                             std::tuple{"block_null", "block", "null"}}) {
    std::string text = nemo_fixture;
    const std::string from = "  activations_checkpoint_granularity: selective\n  activations_checkpoint_method: null\n";
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), std::string("  activations_checkpoint_granularity: full\n  activations_checkpoint_method: ") +
                                      method + "\n  activations_checkpoint_num_layers: " + layers + "\n");
    parplan::test::write_text(d + "nemo_ac_" + name + ".yaml", text);
  }
  const std::string fp8 = "[model]\nconverters = [\"float8\"]\n";
  parplan::test::write_text(d + "titan_mx_recipe.toml", fp8 + "[float8]\nrecipe_name = \"mxfp8\"\n");
  parplan::test::write_text(d + "titan_fp8_gather_text.toml", fp8 + "[float8]\nenable_fsdp_float8_all_gather = \"yes\"\n");
  parplan::test::write_text(d + "titan_reduce_fp16.toml", "[training]\nmixed_precision_reduce = \"float16\"\n");
  const std::string interop = std::string(PARPLAN_TEST_DIR) + "/cli/data/interop/";
  const std::vector<BadCase> cases = {
      {{"import", d + "placeholder.sh"}, "--tensor-model-parallel-size ${TP} (line 1) is ${TP}, which the file does not set: set it in the file or give --tp N"},
      {{"import", d + "two_tp.sh"}, "--tensor-model-parallel-size (line 2) says 2 but --tensor-model-parallel-size (line 3) says 4"},
      {{"import", d + "two_precisions.sh"}, "--bf16 (line 1) says bf16 but --fp16 (line 1) says fp16"},
      {{"import", d + "no_command.sh"}, "no pretrain_*.py command"},
      {{"import", d + "tab.yaml"}, "tab.yaml:4: a tab in the indentation"},
      {{"import", d + "anchor.yaml"}, "anchor.yaml:2: key 'trainer.devices': anchors"},
      {{"import", d + "interpolated.yaml"}, "model.tensor_model_parallel_size (line 5) is ${tp}"},
      {{"import", d + "array_tables.toml"}, "array_tables.toml:1: arrays of tables"},
      {{"import", d + "no_format.yaml"}, "cannot tell the format"},
      {{"import", d + "ds_bad_stage.json"}, "/zero_optimization/stage: must be 0, 1, 2 or 3"},
      {{"import", d + "titan_layer_ac_zero.toml", "--model", "llama3-8b", "--gpus", "8"}, "activation_checkpoint.selective_ac_option (line 3): takes \"op\" or a positive integer N (every N-th block fully checkpointed), not \"0\""},
      {{"import", d + "titan_layer_ac_negative.toml", "--model", "llama3-8b", "--gpus", "8"}, "activation_checkpoint.selective_ac_option (line 3): takes \"op\" or a positive integer N"},
      {{"import", d + "titan_layer_ac_word.toml", "--model", "llama3-8b", "--gpus", "8"}, "activation_checkpoint.selective_ac_option (line 3): takes \"op\" or a positive integer N"},
      {{"import", d + "titan_layer_ac_float.toml", "--model", "llama3-8b", "--gpus", "8"}, "activation_checkpoint.selective_ac_option (line 3): takes \"op\" or a positive integer N"},
      {{"import", d + "titan_layer_ac_too_few.toml", "--model", "llama3-8b", "--gpus", "8"}, "activation_checkpoint.selective_ac_option (line 3): one block in 40 with 32-layer chunks recomputes no block of a chunk"},
      {{"import", d + "nemo_ac_zero.yaml"}, "model.activations_checkpoint_num_layers (line 35) is 0 (with full recompute Megatron-LM takes 1 up to"},
      {{"import", d + "nemo_ac_negative.yaml"}, "model.activations_checkpoint_num_layers (line 35) takes a non-negative decimal integer, not '-1'"},
      {{"import", d + "nemo_ac_word.yaml"}, "model.activations_checkpoint_num_layers (line 35) takes a non-negative decimal integer, not 'three'"},
      {{"import", d + "nemo_ac_method.yaml"}, "model.activations_checkpoint_method (line 34) is 'blocks' (Megatron-LM takes uniform or block)"},
      // block without a layer count: Megatron-LM refuses it; parplan would price every layer.
      {{"import", d + "nemo_ac_block_null.yaml"}, "model.activations_checkpoint_method (line 34) is block without a number of layers"},
      {{"import", d + "titan_mx_recipe.toml", "--model", "llama3-8b", "--gpus", "8"}, "float8.recipe_name (line 4): 'mxfp8' is not modelled (tensorwise and rowwise are)"},
      {{"import", d + "titan_fp8_gather_text.toml", "--model", "llama3-8b", "--gpus", "8"}, "float8.enable_fsdp_float8_all_gather (line 4) takes true or false"},
      {{"import", d + "titan_reduce_fp16.toml", "--model", "llama3-8b", "--gpus", "8"}, "training.mixed_precision_reduce (line 2): 'float16' is not modelled (float32 and bfloat16 are)"},
      {{"estimate", "--model", "mixtral-8x7b", "--gpus", "8", "--ep", "8", "--recompute", "selective-op"}, "recompute selective-op (torchtitan's per-op policy) is modelled for dense layers"},
      {{"import", d + "deep.yaml", "--format", "nemo"}, "deep.yaml:1: nesting deeper than 64 levels"},
      {{"import", d + "overflow.sh"}, "--global-batch-size $((99999999999*99999999999*999999999)) (line 2) is $(("},
      {{"import", interop + "llama3_8b.toml", "--format", "nemo"}, "looks like a torchtitan TOML job config, not a NeMo YAML config (give --format torchtitan)"},
      {{"import", interop + "llama3_8b.toml", "--format", "pytorch"}, "--format: unknown format 'pytorch'"},
      {{"import", interop + "megatron_args.yaml"}, "the GPU count is not in the file"},
      {{"import", interop + "megatron_deepspeed.sh"}, "the launcher's GPU count is $SLURM_NNODES (--nnodes, line 23), which the file does not set: set it in the file or give --gpus N"},
      {{"import", interop + "ds_config.json", "--gpus", "32"}, "gives no model shape: give --model NAME"},
      {{"import", interop + "nemo_gpt.yaml", "--gpus", "7"}, "--gpus: 7 GPUs are not divisible"},
      {{"import", d + "recompute_modules.sh"}, "recompute_modules.sh: --recompute-modules (line 1) is 'layernorm attention' (Megatron-Core takes core_attn"},
      {{"import", interop + "train_gpt_70b.sh", "--tp", "3"}, "--gpus: 512 GPUs are not divisible by tp*pp*cp = 12 (from --nproc_per_node 8 (line 14) x --nnodes 64 (line 15))"},
      {{"estimate", "--model", "gpt3-13b", "--gpus", "8", "--format", "megatron"}, "--format: needs --from FILE"},
      {{"estimate", "--from", interop + "nemo_gpt.yaml", "--plan", kBad + "plan_ok.json"}, "--from and --plan: give one"},
      {{"check", "--plan", kBad + "plan_ok.json", "--tp", "4"}, "--tp: needs --from FILE"},
      {{"export", "--plan", kBad + "plan_ok.json", "--to", "nanotron"}, "--to: nanotron is read (import) but not written"},
      {{"export", "--plan", kBad + "plan_ok.json", "--to", "jax"}, "--to: unknown format 'jax'"},
      {{"suggest", "--model", "llama3-8b", "--gpus", "16", "--emit", "megatron"}, "--emit: needs -o FILE"},
      {{"suggest", "--model", "llama3-8b", "--gpus", "8", "--zero", "2", "--zero3-gather-unit", "linear"},
       "--zero3-gather-unit: is how ZeRO 3 gathers its sharded weights; --zero 2 leaves no ZeRO-3 candidate"},
      {{"suggest", "--model", "llama3-8b", "--gpus", "8", "--max-micro-batch", "1", "--micro-batch", "4"},
       "--max-micro-batch: has no effect with --micro-batch 4 pinned: give one"},
      {{"suggest", "--model", "llama3-8b", "--gpus", "8", "--schedule", "1f1b,zb-h1", "--overlap-p2p"},
       "--overlap-p2p: only the interleaved schedule overlaps its pipeline sends, and --schedule 1f1b,zb-h1 lists no "
       "interleaved"},
      {{"suggest", "--model", "llama3-8b", "--gpus", "16", "--emit", "nanotron"}, "--emit: nanotron is read (import) but not written"},
      {{"suggest", "--model", "llama3-8b", "--gpus", "16", "--emit", "auto"}, "--emit: unknown format 'auto'"},
  };
  for (const auto& c : cases) {
    ScratchDir out;
    std::vector<std::string> args = c.args;
    args.push_back("-o");
    args.push_back((out.path / "out.txt").string());
    if (args[0] == "check" || c.names.find("needs -o") != std::string::npos) args.resize(args.size() - 2);  // no -o here
    expect_bad({args, c.names}, &out);
  }
}
