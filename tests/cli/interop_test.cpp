// parplan import / export / --from (issue 31): fixtures written from each framework's documented config format
// (tests/cli/data/interop/) import with every parallel field asserted; export writes each framework's option names.
#include <doctest/doctest.h>
#include <fmt/core.h>
#include <tuple>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/run_helper.hpp"

using parplan::test::import_json;
using parplan::test::run_parplan;
using parplan::test::ScratchDir;

namespace {

const std::string kDir = std::string(PARPLAN_TEST_DIR) + "/cli/data/interop/";

struct Mesh {
  int64_t gpus, dp, tp, pp, cp, ep, vpp, micro, global, microbatches, seq, zero;
  bool sp, distopt;
  std::string schedule, recompute, precision;
};

void check_mesh(const nlohmann::json& plan, const Mesh& m) {
  const auto& p = plan["parallel"];
  CHECK(plan["num_gpus"] == m.gpus);
  CHECK(p["dp"] == m.dp);
  CHECK(p["tp"] == m.tp);
  CHECK(p["pp"] == m.pp);
  CHECK(p["cp"] == m.cp);
  CHECK(p["ep"] == m.ep);
  CHECK(p["vpp"] == m.vpp);
  CHECK(p["micro_batch"] == m.micro);
  CHECK(p["num_microbatches"] == m.microbatches);
  CHECK(plan["training"]["global_batch"] == m.global);
  CHECK(plan["training"]["seq_len"] == m.seq);
  CHECK(p["zero_stage"] == m.zero);
  CHECK(p["sequence_parallel"] == m.sp);
  CHECK(p["distributed_optimizer"] == m.distopt);
  CHECK(p["schedule"] == m.schedule);
  CHECK(p["recompute"] == m.recompute);
  CHECK(plan["training"]["precision"] == m.precision);
}

}  // namespace

TEST_CASE("import and export: Megatron-Core's --recompute-modules list") {
  // The fixtures with one line more: a module list after the selective granularity.
  ScratchDir dir;
  auto with_line = [&](const std::string& fixture, const std::string& after, const std::string& line) {
    std::string text = parplan::test::read_text(kDir + fixture);
    const size_t at = text.find(after);
    REQUIRE(at != std::string::npos);
    text.insert(at + after.size(), line);
    const std::string file = (dir.path / fixture).string();
    parplan::test::write_text(file, text);
    return file;
  };
  const std::string script = with_line("train_gpt_70b.sh", "    --recompute-granularity selective\n",
                                       "    --recompute-modules layernorm moe_act core_attn\n");
  const std::string nemo_yaml = with_line("nemo_gpt.yaml", "  activations_checkpoint_granularity: selective\n",
                                          "  recompute_modules: [core_attn, mlp]\n");
  const auto j = import_json({script});
  CHECK(j["plan"]["parallel"]["recompute"] == "selective");
  CHECK(j["plan"]["parallel"]["recompute_modules"] == nlohmann::json::array({"core_attn", "layernorm", "moe_act"}));
  const auto plain = import_json({kDir + "train_gpt_70b.sh"});
  CHECK_FALSE(plain["plan"]["parallel"].contains("recompute_modules"));  // the default, {core_attn}, is not written
  const std::string plan = (dir.path / "plan.json").string();
  REQUIRE(run_parplan({"import", script, "-o", plan}, {}, 60).exit_code == 0);
  const auto megatron = run_parplan({"export", "--plan", plan, "--to", "megatron"}, {}, 60);
  CHECK(megatron.out.find("--recompute-modules core_attn layernorm moe_act") != std::string::npos);
  const auto nemo = run_parplan({"export", "--plan", plan, "--to", "nemo"}, {}, 60);
  CHECK(nemo.out.find("recompute_modules: [core_attn, layernorm, moe_act]") != std::string::npos);
  const auto nemo_in = import_json({nemo_yaml});
  CHECK(nemo_in["plan"]["parallel"]["recompute_modules"] == nlohmann::json::array({"core_attn", "mlp"}));
  const auto est = run_parplan({"estimate", "--plan", plan}, {}, 60);
  CHECK(est.out.find("recompute selective (core_attn,layernorm,moe_act)") != std::string::npos);
}

// Megatron-Core's --recompute-method block --recompute-num-layers N is recompute_layers N (the first N layers of each
// chunk); export writes it back, to torchtitan as one block in chunk layers / N where N divides them.
TEST_CASE("import and export: Megatron-Core's block recompute method (--recompute-layers)") {
  ScratchDir dir;
  const std::string script = (dir.path / "block.sh").string();
  parplan::test::write_text(script, "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 24 --hidden-size 2048 "
                                    "--num-attention-heads 16 --seq-length 2048 --pipeline-model-parallel-size 2 "
                                    "--global-batch-size 16 --bf16 --recompute-granularity full --recompute-method block "
                                    "--recompute-num-layers 3\n");
  const auto j = import_json({script});
  CHECK(j["plan"]["parallel"]["recompute"] == "full");
  CHECK(j["plan"]["parallel"]["recompute_layers"] == 3);
  const std::string plan = (dir.path / "plan.json").string();
  REQUIRE(run_parplan({"import", script, "-o", plan}, {}, 60).exit_code == 0);
  const auto megatron = run_parplan({"export", "--plan", plan, "--to", "megatron"}, {}, 60);
  CHECK(megatron.out.find("--recompute-method block --recompute-num-layers 3") != std::string::npos);
  const auto nemo = run_parplan({"export", "--plan", plan, "--to", "nemo"}, {}, 60);
  CHECK(nemo.out.find("activations_checkpoint_method: block\n  activations_checkpoint_num_layers: 3") != std::string::npos);
  // 12-layer chunks, 3 of each: torchtitan's one block in 4.
  const auto titan = run_parplan({"export", "--plan", plan, "--to", "torchtitan"}, {}, 60);
  CHECK(titan.out.find("mode = \"selective\"\nselective_ac_option = \"4\"") != std::string::npos);
  const auto est = run_parplan({"estimate", "--plan", plan}, {}, 60);
  CHECK(est.out.find("recompute full (first 3 layers of each chunk)") != std::string::npos);
}

// torchtitan's layer-wise selective AC (selective_ac_option N, every N-th block fully checkpointed) is full recompute
// of floor(chunk layers / N) layers of each chunk, resolved once the model and mesh are known: Llama 3 8B (32 layers)
// on pp 2 has 16-layer chunks: N 2 -> 8, N 3 -> 5, and the option's default ("2") when it is not given; the command
// line's --recompute or --recompute-layers replaces it.
TEST_CASE("import: torchtitan's every N-th block (selective_ac_option N) is --recompute-layers floor(L / N)") {
  ScratchDir dir;
  auto toml = [&](const std::string& name, const std::string& option) {
    const std::string file = (dir.path / name).string();
    parplan::test::write_text(file, "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\n"
                                    "pipeline_parallel_degree = 2\n[activation_checkpoint]\nmode = \"selective\"\n" + option);
    return file;
  };
  const std::string two = toml("two.toml", "selective_ac_option = \"2\"\n");
  const auto j = import_json({two, "--gpus", "8"});
  CHECK(j["plan"]["parallel"]["recompute"] == "full");
  CHECK(j["plan"]["parallel"]["recompute_layers"] == 8);
  CHECK(j["from_file"]["--recompute-layers"]["origin"] ==
        "activation_checkpoint.selective_ac_option (line 8) (one block in 2: 8 of each chunk's 16 layers)");
  CHECK(import_json({toml("three.toml", "selective_ac_option = 3\n"), "--gpus", "8"})["plan"]["parallel"]["recompute_layers"] == 5);
  const auto dflt = import_json({toml("default.toml", ""), "--gpus", "8"});
  CHECK(dflt["plan"]["parallel"]["recompute_layers"] == 8);
  CHECK(dflt["assumed"].dump().find("selective_ac_option 2: not given") != std::string::npos);
  // Every layer with --recompute full from the command line; the command line's K over the file's N.
  CHECK_FALSE(import_json({two, "--gpus", "8", "--recompute", "full"})["plan"]["parallel"].contains("recompute_layers"));
  CHECK(import_json({two, "--gpus", "8", "--recompute-layers", "3"})["plan"]["parallel"]["recompute_layers"] == 3);
  CHECK(import_json({two, "--gpus", "8", "--recompute", "none"})["plan"]["parallel"]["recompute"] == "none");
  // The plan it writes prices it as the block method: estimate --plan says so, and --from gives the same step.
  const std::string plan = (dir.path / "plan.json").string();
  REQUIRE(run_parplan({"import", two, "--gpus", "8", "-o", plan}, {}, 60).exit_code == 0);
  const auto est = run_parplan({"estimate", "--plan", plan, "--json"}, {}, 60);
  const auto from = run_parplan({"estimate", "--from", two, "--gpus", "8", "--json"}, {}, 60);
  REQUIRE(est.exit_code == 0);
  REQUIRE(from.exit_code == 0);
  CHECK(nlohmann::json::parse(est.out)["time"] == nlohmann::json::parse(from.out)["time"]);
}

// Back to torchtitan: K layers of every L-layer chunk with K dividing L is one block in N = L / K, which import reads
// back as K; a K that divides no chunk evenly (or uneven chunks) has no torchtitan form and is written as every layer.
TEST_CASE("export: recompute_layers K of L-layer chunks is torchtitan's selective_ac_option L / K where K divides L") {
  ScratchDir dir;
  auto exported = [&](const std::string& k) {
    const std::string plan = (dir.path / ("k" + k + ".json")).string();
    REQUIRE(run_parplan({"estimate", "--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "4", "--sp",
                         "--recompute", "full", "--recompute-layers", k, "-o", plan}, {}, 60).exit_code != 2);
    const std::string toml = (dir.path / ("k" + k + ".toml")).string();
    const auto e = run_parplan({"export", "--plan", plan, "--to", "torchtitan", "-o", toml}, {}, 60);
    REQUIRE(e.exit_code == 0);
    return std::pair{toml, e.err};
  };
  // 80 layers over pp 4: 20 per chunk. K 10 -> N 2, K 5 -> N 4; K 3 divides no chunk.
  for (const auto& [k, n] : {std::pair<const char*, const char*>{"10", "2"}, {"5", "4"}}) {
    const auto [toml, err] = exported(k);
    CAPTURE(k);
    const std::string text = parplan::test::read_text(toml);
    CHECK(text.find("mode = \"selective\"\nselective_ac_option = \"" + std::string(n) + "\"") != std::string::npos);
    CHECK(err.find("recompute_layers") == std::string::npos);
    CHECK(import_json({toml, "--gpus", "64"})["plan"]["parallel"]["recompute_layers"] == std::stoi(k));
  }
  const auto [toml, err] = exported("3");
  CHECK(parplan::test::read_text(toml).find("mode = \"full\"") != std::string::npos);
  CHECK(err.find("recompute_layers 3 (the first 3 layers of each chunk): written as full (every layer)") != std::string::npos);
}

// NeMo's activations_checkpoint_method / activations_checkpoint_num_layers are Megatron's --recompute-method /
// --recompute-num-layers: block N is --recompute-layers N; uniform 1 (NeMo's every layer) is every layer.
TEST_CASE("import: NeMo's activations_checkpoint_method and _num_layers are Megatron's recompute method") {
  ScratchDir dir;
  auto nemo = [&](const std::string& name, const std::string& method, const std::string& layers) {
    std::string text = parplan::test::read_text(kDir + "nemo_gpt.yaml");
    const std::string from = "  activations_checkpoint_granularity: selective\n  activations_checkpoint_method: null\n";
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), "  activations_checkpoint_granularity: full\n  activations_checkpoint_method: " + method +
                                      "\n  activations_checkpoint_num_layers: " + layers + "\n");
    const std::string file = (dir.path / name).string();
    parplan::test::write_text(file, text);
    return file;
  };
  const auto block = import_json({nemo("block.yaml", "block", "3")});
  CHECK(block["plan"]["parallel"]["recompute"] == "full");
  CHECK(block["plan"]["parallel"]["recompute_layers"] == 3);
  CHECK(block["from_file"]["--recompute-layers"]["origin"] ==
        "model.activations_checkpoint_method (line 34) + model.activations_checkpoint_num_layers (line 35)");
  CHECK(block["ignored"].dump().find("activations_checkpoint") == std::string::npos);
  // A layer count beside selective recompute is not read (as the method is not): listed as ignored, not dropped.
  std::string text = parplan::test::read_text(kDir + "nemo_gpt.yaml");
  const std::string null_method = "  activations_checkpoint_method: null\n";
  const size_t at = text.find(null_method);
  REQUIRE(at != std::string::npos);
  text.insert(at + null_method.size(), "  activations_checkpoint_num_layers: 2\n");
  const std::string selective = (dir.path / "selective.yaml").string();
  parplan::test::write_text(selective, text);
  const auto sel = import_json({selective});
  CHECK(sel["plan"]["parallel"]["recompute"] == "selective");
  CHECK(sel["ignored"].dump().find("model.activations_checkpoint_num_layers (line 35): read only with "
                                   "--recompute-granularity full") != std::string::npos);
  const auto uniform = import_json({nemo("uniform.yaml", "uniform", "1")});
  CHECK(uniform["plan"]["parallel"]["recompute"] == "full");
  CHECK_FALSE(uniform["plan"]["parallel"].contains("recompute_layers"));
  CHECK(uniform["ignored"].dump().find("activations_checkpoint") == std::string::npos);
}

TEST_CASE("export: Megatron-Core's fine-grained activation offloading (--offload-modules)") {
  ScratchDir dir;
  const std::string plan = (dir.path / "moe.json").string();
  const std::vector<std::string> flags = {"--model", "mixtral-8x7b", "--gpus", "16", "--ep", "8", "--tp", "2", "--sp",
                                          "--recompute", "selective", "--distributed-optimizer",
                                          "--offload-modules", "moe_act,expert_fc1"};
  std::vector<std::string> write = {"estimate"};
  write.insert(write.end(), flags.begin(), flags.end());
  write.insert(write.end(), {"-o", plan});
  REQUIRE(run_parplan(write, {}, 60).exit_code == 0);
  CHECK(nlohmann::json::parse(parplan::test::read_text(plan))["parallel"]["offload_modules"] ==
        nlohmann::json::array({"expert_fc1", "moe_act"}));
  const auto megatron = run_parplan({"export", "--plan", plan, "--to", "megatron"}, {}, 60);
  CHECK(megatron.out.find("--fine-grained-activation-offloading --offload-modules expert_fc1 moe_act") !=
        std::string::npos);
  const auto est = run_parplan({"estimate", "--plan", plan}, {}, 60);
  CHECK(est.out.find("expert_fc1,moe_act  |") != std::string::npos);  // the header ('offload modules' may wrap)
  CHECK(est.out.find("host copies (exposed)") != std::string::npos);
  // Read back: the modules parplan prices; another module is listed; the modules without the flag are not read.
  const std::string sh = (dir.path / "moe.sh").string();
  parplan::test::write_text(sh, megatron.out);
  const auto back = import_json({sh});
  CHECK(back["plan"]["parallel"]["offload_modules"] == nlohmann::json::array({"expert_fc1", "moe_act"}));
  std::string text = megatron.out;
  text.replace(text.find("expert_fc1 moe_act"), 18, "expert_fc1 attn_norm");
  parplan::test::write_text(sh, text);
  const auto other = import_json({sh});
  CHECK(other["plan"]["parallel"]["offload_modules"] == nlohmann::json::array({"expert_fc1"}));
  CHECK(other["ignored"].dump().find("module 'attn_norm' not modelled") != std::string::npos);
  text.replace(text.find("--fine-grained-activation-offloading "), 37, "");
  parplan::test::write_text(sh, text);
  const auto without = import_json({sh});
  CHECK_FALSE(without["plan"]["parallel"].contains("offload_modules"));
  CHECK(without["ignored"].dump().find("read only with --fine-grained-activation-offloading") != std::string::npos);
  // NeMo writes and reads them too; torchtitan and DeepSpeed cannot express them (a warning).
  const auto nemo = run_parplan({"export", "--plan", plan, "--to", "nemo"}, {}, 60);
  REQUIRE(nemo.exit_code == 0);
  CHECK(nemo.out.find("offload_modules: [expert_fc1, moe_act]") != std::string::npos);
  const std::string yaml = (dir.path / "moe.yaml").string();
  parplan::test::write_text(yaml, nemo.out);
  CHECK(import_json({yaml})["plan"]["parallel"]["offload_modules"] == nlohmann::json::array({"expert_fc1", "moe_act"}));
  for (const char* to : {"torchtitan", "deepspeed"}) {
    CAPTURE(to);
    const auto r = run_parplan({"export", "--plan", plan, "--to", to}, {}, 60);
    CHECK(r.err.find("cannot express --offload-modules expert_fc1,moe_act") != std::string::npos);
  }
}

TEST_CASE("import: a Megatron-LM launch script with variables, arrays and continuations") {
  const auto j = import_json({kDir + "train_gpt_70b.sh"});
  CHECK(j["format"] == "megatron");
  // 64 nodes (${NUM_NODES:-64}) x 8; tp ${TP}, pp $PP, 80 layers / (4 stages x 5 layers) = vpp 4;
  // global batch $((8 * 64 / 2)) = 256 over dp 16 x micro 1.
  check_mesh(j["plan"], {512, 16, 8, 4, 1, 1, 4, 1, 256, 16, 4096, 0, true, true, "interleaved", "selective", "bf16"});
  const auto& m = j["plan"]["model"];
  CHECK(m["layers"] == 80);
  CHECK(m["hidden"] == 8192);
  CHECK(m["heads"] == 64);
  CHECK(m["kv_heads"] == 8);
  CHECK(m["ffn_hidden"] == 28672);
  CHECK(m["vocab"] == 128256);
  CHECK(m["ffn_type"] == "swiglu");
  CHECK(j["plan"]["parallel"]["overlap_dp_comm"] == true);  // --overlap-grad-reduce
  CHECK(j["from_file"]["--tp"]["origin"] == "--tensor-model-parallel-size (line 51)");
  bool lr_ignored = false;
  for (const auto& l : j["ignored"]) lr_ignored = lr_ignored || l.get<std::string>().starts_with("--lr (line 42)");
  CHECK(lr_ignored);
}

TEST_CASE("import: a Megatron-DeepSpeed script: an argument string, a heredoc, the node count from SLURM") {
  const auto j = import_json({kDir + "megatron_deepspeed.sh", "--gpus", "16"});
  check_mesh(j["plan"], {16, 8, 2, 1, 1, 1, 1, 4, 512, 16, 2048, 1, false, false, "1f1b", "none", "fp16"});
  CHECK(j["replaced"][0] == "--gpus 16 (command line) replaces $SLURM_NNODES (--nnodes, line 23) from the launcher's GPU count");
}

TEST_CASE("import: Megatron-LM YAML args, NeMo YAML, torchtitan TOML, DeepSpeed JSON, nanotron YAML") {
  SUBCASE("megatron yaml") {
    const auto j = import_json({kDir + "megatron_args.yaml", "--gpus", "32"});
    CHECK(j["format"] == "megatron");
    check_mesh(j["plan"], {32, 4, 2, 2, 2, 1, 1, 1, 64, 16, 8192, 0, true, true, "1f1b", "none", "bf16"});
    CHECK(j["plan"]["parallel"]["overlap_dp_comm"] == false);  // overlap_grad_reduce: false
  }
  SUBCASE("nemo") {
    const auto j = import_json({kDir + "nemo_gpt.yaml"});
    CHECK(j["format"] == "nemo");
    // 16 nodes x 8 devices; tp 4 pp 4 cp 2 -> dp 4; 512 / (4 x 2) = 64 microbatches.
    check_mesh(j["plan"], {128, 4, 4, 4, 2, 1, 2, 2, 512, 64, 8192, 0, true, true, "interleaved", "selective", "bf16"});
    CHECK(j["plan"]["model"]["kv_heads"] == 8);
  }
  SUBCASE("torchtitan") {
    const auto j = import_json({kDir + "llama3_8b.toml"});
    CHECK(j["format"] == "torchtitan");
    // dp = shard 8 (FSDP: ZeRO-3); tp 2 cp 2 -> 32 GPUs; 64 / (8 x 2) = 4 microbatches.
    check_mesh(j["plan"], {32, 8, 2, 1, 2, 1, 1, 2, 64, 4, 8192, 3, true, false, "1f1b", "full", "fp8"});
    CHECK(j["plan"]["model"]["name"] == "llama3-8b");
    // mode "selective" with selective_ac_option "op": torchtitan's per-op policy.
    const auto op = import_json({kDir + "llama3_8b_sac_op.toml"});
    CHECK(op["plan"]["parallel"]["recompute"] == "selective-op");
  }
  SUBCASE("deepspeed") {
    const auto j = import_json({kDir + "ds_config.json", "--model", "llama3-8b", "--gpus", "32"});
    CHECK(j["format"] == "deepspeed");
    check_mesh(j["plan"], {32, 32, 1, 1, 1, 1, 1, 4, 256, 2, 8192, 3, false, false, "1f1b", "none", "bf16"});
    CHECK(j["plan"]["parallel"]["zero3_gather_unit"] == "linear");
  }
  SUBCASE("nanotron") {
    const auto j = import_json({kDir + "nanotron_llama.yaml"});
    CHECK(j["format"] == "nanotron");
    check_mesh(j["plan"], {16, 4, 2, 2, 1, 1, 1, 2, 32, 4, 4096, 1, true, false, "1f1b", "none", "bf16"});
    CHECK(j["plan"]["model"]["layers"] == 16);
    CHECK(j["plan"]["model"]["kv_heads"] == 8);
  }
}

TEST_CASE("import -o writes the Plan document that estimate --plan reads; --from gives the same estimate") {
  ScratchDir dir;
  const std::string plan = (dir.path / "plan.json").string();
  const auto w = run_parplan({"import", kDir + "train_gpt_70b.sh", "-o", plan}, {}, 60);
  REQUIRE(w.exit_code == 0);
  const auto a = run_parplan({"estimate", "--plan", plan, "--json"}, {}, 60);
  const auto b = run_parplan({"estimate", "--from", kDir + "train_gpt_70b.sh", "--json"}, {}, 60);
  CAPTURE(b.err);
  REQUIRE(a.exit_code == 0);
  REQUIRE(b.exit_code == 0);
  CHECK(nlohmann::json::parse(a.out)["time"] == nlohmann::json::parse(b.out)["time"]);
  CHECK(b.err.find("train_gpt_70b.sh read as megatron: 1 value assumed, 5 options ignored") != std::string::npos);
  // A command-line flag replaces the file's value, and says so.
  const auto c = run_parplan({"import", kDir + "train_gpt_70b.sh", "--gpus", "256", "--json"}, {}, 60);
  REQUIRE(c.exit_code == 0);
  const auto j = nlohmann::json::parse(c.out);
  CHECK(j["plan"]["parallel"]["dp"] == 8);
  CHECK(j["replaced"][0].get<std::string>().starts_with("--gpus 256 (command line) replaces 512"));
}

TEST_CASE("check --from gates the launch script; simulate and run take --from too") {
  const auto ok = run_parplan({"check", "--from", kDir + "train_gpt_70b.sh", "--headroom", "10%"}, {}, 60);
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("PASS " + kDir + "train_gpt_70b.sh") != std::string::npos);
  // The NeMo config peaks at 18.16 GiB per GPU: under a 16 GiB budget the gate fails (exit 1).
  const auto bad = run_parplan({"check", "--from", kDir + "nemo_gpt.yaml", "--memory", "16GiB"}, {}, 60);
  CHECK(bad.exit_code == 1);
  CHECK(bad.out.find("FAIL " + kDir + "nemo_gpt.yaml") != std::string::npos);
  CHECK(run_parplan({"simulate", "--from", kDir + "nanotron_llama.yaml"}, {}, 120).exit_code == 0);
}

TEST_CASE("check, import, export and run take estimate's precision, GPU and MoE flags beside --from") {
  // The file's float8 all-gather needs fp8: --precision bf16 replaces the file's float8 and that refusal names the
  // file's option, as estimate's does.
  for (const char* cmd : {"check", "estimate", "import", "export"}) {
    std::vector<std::string> args = {cmd, "--from", kDir + "llama3_8b.toml", "--precision", "bf16"};
    if (std::string(cmd) == "import") args = {cmd, kDir + "llama3_8b.toml", "--precision", "bf16"};
    if (std::string(cmd) == "export") args.insert(args.end(), {"--to", "megatron"});
    const auto r = run_parplan(args, {}, 60);
    CAPTURE(cmd);
    CAPTURE(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--fp8-param-gather: fp8 parameter gather needs --precision fp8 (the precision is bf16) (from "
                     "float8.enable_fsdp_float8_all_gather (line 34))") != std::string::npos);
  }
  // The file's tensorwise float8 with tp 2 assumes fp8 TP all-gathers (torchtitan's tensorwise TP); --fp8-recipe
  // rowwise on the command line takes that assumption away (rowwise keeps 16-bit TP).
  const auto rw = run_parplan({"import", kDir + "llama3_8b.toml", "--fp8-recipe", "rowwise", "--json"}, {}, 60);
  REQUIRE(rw.exit_code == 0);
  const nlohmann::json rwj = nlohmann::json::parse(rw.out);
  CHECK(rwj["plan"]["training"]["fp8_recipe"] == "rowwise");
  CHECK(rwj["plan"]["training"]["fp8_tp_gather"] == false);
  CHECK(rwj["set"] == nlohmann::json::array({"--fp8-recipe rowwise"}));  // the file gives no recipe: set, not replaced
  CHECK(rwj["replaced"].empty());
  for (const auto& a : rwj["assumed"]) CHECK(a.get<std::string>().find("--fp8-tp-gather") == std::string::npos);
  const auto tw = run_parplan({"import", kDir + "llama3_8b.toml", "--json"}, {}, 60);
  CHECK(nlohmann::json::parse(tw.out)["plan"]["training"]["fp8_tp_gather"] == true);
  // The same file in bf16 (no float8 converter): the command line's --precision fp8 makes it torchtitan's float8
  // tensorwise with TP 2, which gathers in fp8 (assumed, listed); with --fp8-recipe rowwise too it does not.
  {
    ScratchDir dir;
    std::string text = parplan::test::read_text(kDir + "llama3_8b.toml");
    for (const std::string cut : {"converters = [\"float8\"]\n", "[float8]\nenable_fsdp_float8_all_gather = true\n"}) {
      const size_t at = text.find(cut);
      REQUIRE(at != std::string::npos);
      text.erase(at, cut.size());
    }
    const std::string bf16 = dir.write("llama3_8b_bf16.toml", text);
    const auto plain = import_json({bf16});
    CHECK(plain["plan"]["training"]["fp8_tp_gather"] == false);
    const auto fp8 = import_json({bf16, "--precision", "fp8"});
    CHECK(fp8["plan"]["training"]["fp8_tp_gather"] == true);
    bool listed = false;
    for (const auto& a : fp8["assumed"]) listed = listed || a.get<std::string>().starts_with("--fp8-tp-gather: float8 tensorwise TP");
    CHECK(listed);
    const auto rowwise = import_json({bf16, "--precision", "fp8", "--fp8-recipe", "rowwise"});
    CHECK(rowwise["plan"]["training"]["fp8_tp_gather"] == false);
  }
  // --gpu replaces the cluster's GPU; import writes it into the plan.
  const auto g = run_parplan({"import", kDir + "llama3_8b.toml", "--gpu", "b200", "--json"}, {}, 60);
  REQUIRE(g.exit_code == 0);
  CHECK(nlohmann::json::parse(g.out)["plan"]["gpu"]["name"] == "B200");
  // The file pads every expert to a capacity factor of 1.25; dropless routing with a 1.5x most-loaded expert is
  // slower, and check gives the step estimate gives with the same flags.
  const std::vector<std::string> moe = {"--from", kDir + "megatron_moe_args.yaml", "--gpus", "64"};
  auto with = [&](std::string cmd, std::vector<std::string> extra) {
    std::vector<std::string> args = {cmd};
    args.insert(args.end(), moe.begin(), moe.end());
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("--json");
    const auto r = run_parplan(args, {}, 60);
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
  };
  const std::vector<std::string> dropless = {"--moe-capacity-factor", "none", "--moe-imbalance", "1.5"};
  const double padded = with("check", {})["plans"][0]["step_s"].get<double>();
  const double skewed = with("check", dropless)["plans"][0]["step_s"].get<double>();
  CHECK(skewed > padded * 1.05);
  CHECK(with("estimate", dropless)["time"]["step_s"].get<double>() == doctest::Approx(skewed).epsilon(1e-12));
  // Without --from nothing would read them: each is refused, naming the flag.
  const std::string plan = std::string(PARPLAN_TEST_DIR) + "/cli/data/bad/plan_ok.json";
  for (const char* cmd : {"check", "run", "export"}) {
    std::vector<std::string> args = {cmd, "--plan", plan, "--moe-imbalance", "1.5"};
    if (std::string(cmd) == "export") args.insert(args.end(), {"--to", "megatron"});
    const auto r = run_parplan(args, {}, 60);
    CAPTURE(cmd);
    CHECK(r.exit_code == 2);
    CHECK(r.err == "parplan: error: --moe-imbalance: needs --from FILE (it replaces the file's value)\n");
  }
}

TEST_CASE("export: the Zero Bubble schedules are not expressible; the config written runs 1F1B") {
  ScratchDir dir;
  const std::string plan = (dir.path / "plan.json").string();
  const std::vector<std::string> args = {"estimate", "--model", "gpt3-1.3b", "--gpus", "8",
                                        "--pp",       "4",       "--schedule", "zb-2p",  "-o", plan};
  REQUIRE(run_parplan(args, {}, 60).exit_code == 0);
  const auto m = run_parplan({"export", "--plan", plan, "--to", "megatron"}, {}, 60);
  REQUIRE(m.exit_code == 0);
  CHECK(m.out.find("# parplan: not expressible: schedule zb-2p\n") != std::string::npos);
  CHECK(m.out.find("    --pipeline-model-parallel-size 4 \\\n") != std::string::npos);
  CHECK(m.out.find("--virtual-pipeline-model-parallel-size") == std::string::npos);
  CHECK(m.err.find("parplan export: warning: megatron cannot express schedule zb-2p") != std::string::npos);
  const auto t = run_parplan({"export", "--plan", plan, "--to", "torchtitan"}, {}, 60);
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.find("pipeline_parallel_schedule = \"1F1B\"") != std::string::npos);
  CHECK(t.err.find("torchtitan cannot express schedule zb-2p") != std::string::npos);
  // With Zero Bubble's optimizer post-validation, the warning names it too.
  const std::string pv = (dir.path / "pv.json").string();
  std::vector<std::string> with = args;
  with.back() = pv;
  with.insert(with.end() - 2, "--post-validation");
  REQUIRE(run_parplan(with, {}, 60).exit_code == 0);
  const auto w = run_parplan({"export", "--plan", pv, "--to", "nemo"}, {}, 60);
  REQUIRE(w.exit_code == 0);
  CHECK(w.err.find("nemo cannot express schedule zb-2p with optimizer post-validation") != std::string::npos);
}

TEST_CASE("export: an eager cross entropy is torchtitan's loss, not expressible for Megatron-LM") {
  ScratchDir dir;
  const std::string plan = (dir.path / "plan.json").string();
  REQUIRE(run_parplan({"estimate", "--model", "llama3-8b", "--gpus", "8", "--zero", "3", "--eager-cross-entropy", "-o",
                       plan}, {}, 60).exit_code == 0);
  const auto m = run_parplan({"export", "--plan", plan, "--to", "megatron"}, {}, 60);
  REQUIRE(m.exit_code == 0);
  CHECK(m.err.find("megatron cannot express --eager-cross-entropy") != std::string::npos);
  const auto t = run_parplan({"export", "--plan", plan, "--to", "torchtitan"}, {}, 60);
  REQUIRE(t.exit_code == 0);
  CHECK(t.err.find("eager-cross-entropy") == std::string::npos);
}

TEST_CASE("export: uncompiled element-wise ops are not expressible for Megatron-LM or NeMo") {
  ScratchDir dir;
  const std::string plan = (dir.path / "plan.json").string();
  REQUIRE(run_parplan({"estimate", "--model", "llama3-8b", "--gpus", "8", "--zero", "3", "--recompute", "selective-op",
                       "--eager-elementwise", "-o", plan}, {}, 60).exit_code == 0);
  for (const char* to : {"megatron", "nemo"}) {
    const auto m = run_parplan({"export", "--plan", plan, "--to", to}, {}, 60);
    REQUIRE(m.exit_code == 0);
    CHECK(m.err.find(std::string(to) + " cannot express --eager-elementwise") != std::string::npos);
  }
  const auto t = run_parplan({"export", "--plan", plan, "--to", "torchtitan"}, {}, 60);
  REQUIRE(t.exit_code == 0);
  CHECK(t.err.find("eager-elementwise") == std::string::npos);
}

TEST_CASE("export writes each framework's option names; what it cannot express is a comment and a warning") {
  ScratchDir dir;
  const std::string plan = (dir.path / "plan.json").string();
  REQUIRE(run_parplan({"import", kDir + "nemo_gpt.yaml", "-o", plan}, {}, 60).exit_code == 0);
  const auto m = run_parplan({"export", "--plan", plan, "--to", "megatron"}, {}, 60);
  REQUIRE(m.exit_code == 0);
  CHECK(m.out.find("pretrain_gpt.py \\\n") != std::string::npos);
  CHECK(m.out.find("    --tensor-model-parallel-size 4 \\\n") != std::string::npos);
  CHECK(m.out.find("    --virtual-pipeline-model-parallel-size 2 \\\n") != std::string::npos);
  CHECK(m.err.empty());
  const std::string toml = (dir.path / "job.toml").string();
  const auto t = run_parplan({"export", "--plan", plan, "--to", "torchtitan", "-o", toml}, {}, 60);
  REQUIRE(t.exit_code == 0);
  const std::string text = parplan::test::read_text(toml);
  CHECK(text.find("[parallelism]\n") != std::string::npos);
  CHECK(text.find("tensor_parallel_degree = 4\n") != std::string::npos);
  CHECK(text.find("# parplan: not expressible: interleaved vpp 2") != std::string::npos);
  CHECK(t.err.find("parplan export: warning: torchtitan cannot express interleaved vpp 2") != std::string::npos);
  // The TOML it wrote reads back (the model has no torchtitan flavor: --model gives it).
  const auto back = run_parplan({"import", toml, "--model", "llama3-8b", "--json"}, {}, 60);
  CAPTURE(back.err);
  REQUIRE(back.exit_code == 0);
  CHECK(nlohmann::json::parse(back.out)["plan"]["parallel"]["tp"] == 4);
  const auto ds = run_parplan({"export", "--plan", plan, "--to", "deepspeed"}, {}, 60);
  REQUIRE(ds.exit_code == 0);
  const auto dj = nlohmann::json::parse(ds.out);
  CHECK(dj["train_micro_batch_size_per_gpu"] == 2);
  CHECK(dj["comment"][0].get<std::string>().starts_with("tp 4 x pp 4 x cp 2"));
}

TEST_CASE("suggest --emit writes the winner as a framework config") {
  ScratchDir dir;
  const std::string toml = (dir.path / "best.toml").string();
  const auto s = run_parplan({"suggest", "--model", "llama3-8b", "--gpus", "16", "--threads", "1", "-o", toml, "--emit",
                              "torchtitan"}, {}, 300);
  CAPTURE(s.err);
  REQUIRE(s.exit_code == 0);
  const std::string text = parplan::test::read_text(toml);
  CHECK(text.find("[parallelism]\n") != std::string::npos);
  CHECK(text.find("name = \"llama3\"\nflavor = \"8B\"\n") != std::string::npos);
  // What it wrote reads back as a plan on the same 16 GPUs.
  const auto back = run_parplan({"import", toml, "--json"}, {}, 60);
  CAPTURE(back.err);
  REQUIRE(back.exit_code == 0);
  CHECK(nlohmann::json::parse(back.out)["plan"]["num_gpus"] == 16);
  CHECK(run_parplan({"suggest", "--model", "llama3-8b", "--gpus", "16", "--emit", "megatron"}, {}, 60).exit_code == 2);
}

TEST_CASE("import / export: Megatron-LM's MoE capacity factor (padded), forced balance and MTP layers") {
  const auto j = import_json({kDir + "megatron_moe_args.yaml", "--gpus", "16"});
  const auto& m = j["plan"]["model"];
  CHECK(m["experts"] == 8);
  CHECK(m["moe"]["capacity_factor"] == 1.25);
  CHECK(m["mtp_layers"] == 1);
  CHECK(j["ignored"].empty());  // capacity, padding, forced balance and MTP are all read
  CHECK(j["from_file"]["--moe-capacity-factor"]["origin"] == "language_model.moe_expert_capacity_factor (line 18)");
  CHECK(j["from_file"]["--mtp-layers"]["origin"] == "language_model.mtp_num_layers (line 20)");
  ScratchDir dir;
  const std::string plan = (dir.path / "plan.json").string();
  REQUIRE(run_parplan({"import", kDir + "megatron_moe_args.yaml", "--gpus", "16", "-o", plan}, {}, 60).exit_code == 0);
  const auto back = run_parplan({"export", "--plan", plan, "--to", "megatron"}, {}, 60);
  REQUIRE(back.exit_code == 0);
  CHECK(back.out.find("--moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity") != std::string::npos);
  CHECK(back.out.find("--mtp-num-layers 1") != std::string::npos);
  const auto tt = run_parplan({"export", "--plan", plan, "--to", "torchtitan"}, {}, 60);
  REQUIRE(tt.exit_code == 0);
  CHECK(tt.err.find("torchtitan cannot express --moe-capacity-factor 1.25") != std::string::npos);
  CHECK(tt.err.find("torchtitan cannot express --mtp-layers 1") != std::string::npos);
  // Without padding, Megatron drops the tokens over capacity: not modelled, listed as ignored (priced dropless).
  std::string yaml = parplan::test::read_text(kDir + "megatron_moe_args.yaml");
  yaml.replace(yaml.find("  moe_pad_expert_input_to_capacity: true\n"), 41, "");
  const std::string dropping = (dir.path / "dropping.yaml").string();
  parplan::test::write_text(dropping, yaml);
  const auto d = import_json({dropping, "--gpus", "16"});
  CHECK_FALSE(d["plan"]["model"].contains("moe"));
  bool listed = false;
  for (const auto& l : d["ignored"]) {
    listed = listed || l.get<std::string>().find("token dropping without --moe-pad-expert-input-to-capacity") !=
                           std::string::npos;
  }
  CHECK(listed);
}

TEST_CASE("import / export: group-limited routing (Megatron-Core --moe-router-num-groups / --moe-router-group-topk)") {
  ScratchDir dir;
  const std::string plan = (dir.path / "plan.json").string();
  REQUIRE(run_parplan({"estimate", "--model", "mixtral-8x7b", "--gpus", "16", "--ep", "8", "--moe-router-groups", "4",
                       "--moe-router-group-top-k", "2", "--zero", "1", "--recompute", "full", "-o", plan}, {}, 60)
              .exit_code == 0);
  const auto megatron = run_parplan({"export", "--plan", plan, "--to", "megatron"}, {}, 60);
  REQUIRE(megatron.exit_code == 0);
  CHECK(megatron.out.find("--moe-router-num-groups 4") != std::string::npos);
  CHECK(megatron.out.find("--moe-router-group-topk 2") != std::string::npos);
  const auto nemo = run_parplan({"export", "--plan", plan, "--to", "nemo"}, {}, 60);
  REQUIRE(nemo.exit_code == 0);
  CHECK(nemo.out.find("moe_router_num_groups: 4") != std::string::npos);
  CHECK(nemo.out.find("moe_router_group_topk: 2") != std::string::npos);
  for (const auto& [text, name] : {std::pair{megatron.out, "back.sh"}, std::pair{nemo.out, "back.yaml"}}) {
    const std::string file = (dir.path / name).string();
    parplan::test::write_text(file, text);
    const auto back = import_json({file});
    CHECK(back["plan"]["model"]["moe"]["router_groups"] == 4);
    CHECK(back["plan"]["model"]["moe"]["router_group_top_k"] == 2);
    CHECK(back["from_file"].contains("--moe-router-groups"));
  }
  for (const char* to : {"torchtitan", "deepspeed"}) {
    const auto other = run_parplan({"export", "--plan", plan, "--to", to}, {}, 60);
    REQUIRE(other.exit_code == 0);
    CHECK(other.err.find("cannot express --moe-router-groups 4 --moe-router-group-top-k 2") != std::string::npos);
  }
}

TEST_CASE("import: Megatron-Core's MoE and MLA widths, dense layers, dispatcher and A2A overlap") {
  ScratchDir dir;
  const std::string sh = (dir.path / "moe.sh").string();
  // DeepSeek-V3 as Megatron-Core's recipe writes it: the model reads back as the deepseek-v3 profile's shape.
  const std::string ds = "torchrun --nproc_per_node 8 --nnodes 256 pretrain_gpt.py --num-layers 61 --hidden-size 7168 "
                         "--ffn-hidden-size 18432 --num-attention-heads 128 --swiglu --seq-length 4096 "
                         "--normalization RMSNorm --position-embedding-type rope --disable-bias-linear "
                         "--untie-embeddings-and-output-weights --attention-dropout 0.0 --hidden-dropout 0.0 "
                         "--multi-latent-attention --kv-lora-rank 512 --q-lora-rank 1536 --qk-head-dim 128 "
                         "--qk-pos-emb-head-dim 64 --v-head-dim 128 --num-experts 256 --moe-router-topk 8 "
                         "--moe-ffn-hidden-size 2048 --moe-shared-expert-intermediate-size 2048 "
                         "--moe-layer-freq '([0]*3+[1]*58)' --moe-router-num-groups 8 --moe-router-group-topk 4 "
                         "--expert-model-parallel-size 64 "
                         "--pipeline-model-parallel-size 16 --moe-token-dispatcher-type flex --moe-enable-deepep "
                         "--overlap-moe-expert-parallel-comm --global-batch-size 4096 --bf16";
  parplan::test::write_text(sh, ds + "\n");
  // Megatron-Core's A2A overlap needs a virtual pipeline when pp > 1: refused, naming the option, as Megatron-LM does.
  const auto unpaired = run_parplan({"import", sh}, {}, 60);
  CHECK(unpaired.exit_code == 2);
  CHECK(unpaired.err.find("--overlap-ep: schedule 1f1b at pp 16 runs no microbatch's forward beside another's backward") !=
        std::string::npos);
  CHECK(unpaired.err.find("(from --overlap-moe-expert-parallel-comm (line 1))") != std::string::npos);
  const auto j = import_json({sh, "--pp", "1"});
  const auto& m = j["plan"]["model"];
  CHECK(m["ffn_hidden"] == 2048);
  CHECK(m["shared_experts"] == 1);
  CHECK(m["dense_layers"] == 3);
  CHECK(m["dense_ffn_hidden"] == 18432);
  CHECK(m["kv_lora_rank"] == 512);
  CHECK(m["q_lora_rank"] == 1536);
  CHECK(m["qk_rope_head_dim"] == 64);
  CHECK(m["moe"]["router_groups"] == 8);  // node-limited routing, as the report's config.json n_group / topk_group
  CHECK(m["moe"]["router_group_top_k"] == 4);
  CHECK(j["plan"]["parallel"]["moe_dispatcher"] == "deepep");
  CHECK(j["plan"]["parallel"]["overlap_ep_comm"] == true);
  CHECK(j["ignored"].empty());
  // The profile's shape, field for field (the file gives no vocabulary, sequence default or MTP depth).
  const auto prof = run_parplan({"estimate", "--model", "deepseek-v3", "--gpus", "2048", "--pp", "16", "--ep", "64",
                                 "--json"}, {}, 60);
  REQUIRE(!prof.out.empty());  // exit 1: that plan does not fit; the JSON is written either way
  nlohmann::json want = nlohmann::json::parse(prof.out)["plan"]["model"], got = m;
  for (const char* k : {"name", "source", "vocab", "seq_len", "mtp_layers", "aliases"}) {
    want.erase(k);
    got.erase(k);
  }
  CHECK(got == want);

  // Qwen3-235B's recipe: layers per virtual stage count the embedding and the loss as layers, (94 + 2) / (8 x 3).
  parplan::test::write_text(sh, "pretrain_gpt.py --num-layers 94 --hidden-size 4096 --num-attention-heads 64 "
                                "--seq-length 4096 --bf16 --pipeline-model-parallel-size 8 "
                                "--num-layers-per-virtual-pipeline-stage 3 --account-for-embedding-in-pipeline-split "
                                "--account-for-loss-in-pipeline-split --micro-batch-size 1 --global-batch-size 64\n");
  CHECK(import_json({sh, "--gpus", "8"})["plan"]["parallel"]["vpp"] == 4);
  // Qwen3's head width beside hidden / heads; no dispatcher named: Megatron's allgather is assumed to be alltoall.
  parplan::test::write_text(sh, "pretrain_gpt.py --num-layers 48 --hidden-size 2048 --num-attention-heads 32 "
                                "--num-query-groups 4 --kv-channels 128 --num-experts 128 --moe-router-topk 8 "
                                "--moe-ffn-hidden-size 768 --swiglu --seq-length 4096 --bf16\n");
  const auto q = import_json({sh, "--gpus", "16"});
  CHECK(q["plan"]["model"]["head_dim"] == 128);
  CHECK(q["plan"]["model"]["ffn_hidden"] == 768);
  bool assumed = false;
  for (const auto& l : q["assumed"]) assumed = assumed || l.get<std::string>().starts_with("--moe-dispatcher alltoall:");
  CHECK(assumed);

  // What parplan cannot price is refused naming the argument, or listed.
  const std::string base = "pretrain_gpt.py --num-layers 8 --hidden-size 1024 --num-attention-heads 8 --num-experts 8 "
                           "--moe-ffn-hidden-size 512 --seq-length 2048 --bf16";
  const std::pair<const char*, const char*> bad[] = {
      {" --moe-layer-freq 2", "--moe-layer-freq (line 1) is '2': parplan prices leading dense layers"},
      {" --moe-layer-freq '[0]*2+[1]*5'", "--moe-layer-freq (line 1) gives 7 layers, the model has 8"},
      {" --moe-layer-freq '([0]*2+[1]*6'", "--moe-layer-freq (line 1) is '([0]*2+[1]*6' (Megatron-Core takes"},
      {" --moe-layer-freq '[1,0,1,1,1,1,1,1]'", "parplan prices leading dense layers"},
      {" --moe-layer-freq '[1]*99999999'", "(Megatron-Core takes an integer or a list expression"},  // past 10^6

      {" --moe-shared-expert-intermediate-size 700", "is 700, not a multiple of the expert width 512"},
      {" --multi-latent-attention", "--multi-latent-attention (line 1) needs --kv-lora-rank"},
      {" --moe-flex-dispatcher-backend nccl", "--moe-flex-dispatcher-backend (line 1) is 'nccl'"},
  };
  const std::string deep = " --moe-layer-freq '" + std::string(65, '(') + "[1]*8" + std::string(65, ')') + "'";
  std::vector<std::pair<std::string, std::string>> cases(std::begin(bad), std::end(bad));
  cases.emplace_back(deep, "(Megatron-Core takes an integer or a list expression");  // nested deeper than 64
  for (const auto& [arg, err] : cases) {
    CAPTURE(arg);
    parplan::test::write_text(sh, base + arg + "\n");
    const auto r = run_parplan({"import", sh, "--gpus", "8"}, {}, 60);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(err) != std::string::npos);
  }
  // 64 levels read.
  parplan::test::write_text(sh, base + " --moe-layer-freq '" + std::string(64, '(') + "[1]*8" + std::string(64, ')') + "'\n");
  CHECK(import_json({sh, "--gpus", "8"})["plan"]["model"]["experts"] == 8);
  // Every other layer MoE after one dense layer: step 2.
  parplan::test::write_text(sh, base + " --ffn-hidden-size 4096 --moe-layer-freq '[0]+[0,1]*3+[0]'\n");
  const auto alt = import_json({sh, "--gpus", "8"});
  CHECK(alt["plan"]["model"]["dense_layers"] == 1);
  CHECK(alt["plan"]["model"]["interleave_moe_layer_step"] == 2);
  parplan::test::write_text(sh, base + " --moe-token-dispatcher-type allgather\n");
  bool listed = false;
  const auto gathered = import_json({sh, "--gpus", "8"});
  for (const auto& l : gathered["ignored"]) {
    listed = listed || l.get<std::string>() == "--moe-token-dispatcher-type (line 1): 'allgather' is not modelled (priced as alltoall)";
  }
  CHECK(listed);
}

TEST_CASE("import: torchtitan's MoE model names and flavors find their profiles") {
  ScratchDir dir;
  const std::string toml = (dir.path / "moe.toml").string();
  for (const auto& [name, flavor, profile] : {std::tuple{"deepseek_v3", "671B", "deepseek-v3"},
                                              std::tuple{"llama4", "17bx16e", "llama4-scout"},
                                              std::tuple{"llama4", "17bx128e", "llama4-maverick"}}) {
    CAPTURE(profile);
    parplan::test::write_text(toml, fmt::format("[model]\nname = \"{}\"\nflavor = \"{}\"\n[training]\nlocal_batch_size = 1\n"
                                                "seq_len = 4096\n[parallelism]\nexpert_parallel_degree = 8\n"
                                                "[activation_checkpoint]\nmode = \"full\"\n", name, flavor));
    CHECK(import_json({toml, "--gpus", "256"})["plan"]["model"]["name"] == profile);
    // export --to torchtitan writes the same name and flavor back.
    const std::string plan = (dir.path / "moe.json").string();
    REQUIRE(run_parplan({"import", toml, "--gpus", "256", "-o", plan}, {}, 60).exit_code == 0);
    const auto back = run_parplan({"export", "--plan", plan, "--to", "torchtitan"}, {}, 60);
    CHECK(back.out.find(fmt::format("name = \"{}\"\nflavor = \"{}\"", name, flavor)) != std::string::npos);
    CHECK(back.err.find("cannot express model") == std::string::npos);
  }
}

TEST_CASE("import: fp8 weights gathered in fp8 and the gradient reduce dtype, from each framework's own keys") {
  ScratchDir dir;
  const std::string cmd = "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
                          "--num-attention-heads 32 --seq-length 4096 --bf16 --fp8-format hybrid "
                          "--use-distributed-optimizer";
  const std::string sh = (dir.path / "fp8.sh").string();
  parplan::test::write_text(sh, cmd + " --fp8-param-gather --grad-reduce-in-bf16\n");
  const auto m = import_json({sh});
  CHECK(m["plan"]["training"]["precision"] == "fp8");
  CHECK(m["plan"]["training"]["fp8_param_gather"] == true);
  CHECK(m["plan"]["training"]["grad_fp32"] == false);
  CHECK(m["from_file"]["--fp8-param-gather"]["origin"] == "--fp8-param-gather (line 1)");
  parplan::test::write_text(sh, cmd + " --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16\n");
  const auto pa = import_json({sh});
  CHECK(pa["plan"]["training"]["adam_moments_dtype"] == "bf16");
  parplan::test::write_text(sh, cmd + " --exp-avg-dtype bf16 --exp-avg-sq-dtype fp16\n");
  const auto mixed = run_parplan({"import", sh}, {}, 60);
  CHECK(mixed.exit_code == 2);
  CHECK(mixed.err.find("--exp-avg-dtype bf16 and --exp-avg-sq-dtype fp16: parplan keeps both moments in one dtype") !=
        std::string::npos);
  parplan::test::write_text(sh, cmd + "\n");  // Megatron's defaults: 16-bit weights gathered, fp32 gradients
  const auto d = import_json({sh});
  CHECK(d["plan"]["training"]["fp8_param_gather"] == false);
  CHECK(d["plan"]["training"]["grad_fp32"] == true);
  // The fp8 recipe: --fp8-recipe as given, else Megatron-LM's default, delayed scaling (listed as assumed).
  CHECK(d["plan"]["training"]["fp8_recipe"] == "delayed");
  bool recipe_listed = false;
  for (const auto& l : d["assumed"]) {
    recipe_listed = recipe_listed || l.get<std::string>().starts_with("--fp8-recipe delayed: no --fp8-recipe");
  }
  CHECK(recipe_listed);
  for (const char* recipe : {"tensorwise", "mxfp8", "blockwise", "delayed"}) {
    CAPTURE(recipe);
    parplan::test::write_text(sh, cmd + " --fp8-recipe " + recipe + "\n");
    // MXFP8 runs on Blackwell's block-scaled tensor cores: on the default H100 it is refused (bad_input_test.cpp).
    const auto r = std::string(recipe) == "mxfp8" ? import_json({sh, "--cluster", "dgx-b200"})
                                                  : import_json({sh});
    CHECK(r["plan"]["training"]["fp8_recipe"] == recipe);
    CHECK(r["from_file"]["--fp8-recipe"]["origin"] == "--fp8-recipe (line 1)");
  }
  parplan::test::write_text(sh, cmd + " --fp8-recipe custom\n");
  const auto custom = run_parplan({"import", sh}, {}, 60);
  CHECK(custom.exit_code == 2);
  CHECK(custom.err.find("--fp8-recipe (line 1) is 'custom'") != std::string::npos);
  // 4-bit GEMMs are refused, naming the argument, rather than priced as the fp8 or bf16 beside them.
  for (const char* fp4 : {" --fp4-format e2m1", " --fp4-recipe nvfp4"}) {
    CAPTURE(fp4);
    parplan::test::write_text(sh, cmd + fp4 + "\n");
    const auto r = run_parplan({"import", sh}, {}, 60);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("4-bit GEMMs (NVFP4, MXFP4) are not modelled") != std::string::npos);
    CHECK(r.err.find("(line 1)") != std::string::npos);
  }
  // torchtitan's mx converter: MXFP8 training (16-bit inputs kept); a 4-bit [mx] recipe is refused; another
  // converter is listed as not modelled.
  {
    const std::string mx = (dir.path / "mx.toml").string();
    const std::string head = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n";
    const std::string tail = "[training]\nlocal_batch_size = 1\nseq_len = 8192\n";
    parplan::test::write_text(mx, head + "converters = [\"mx\"]\n" + tail);
    const auto a = import_json({mx, "--gpus", "8", "--cluster", "dgx-b200"});
    CHECK(a["plan"]["training"]["precision"] == "fp8");
    CHECK(a["plan"]["training"]["fp8_recipe"] == "mxfp8");
    CHECK(a["plan"]["training"]["fp8_saved_inputs"] == false);
    parplan::test::write_text(mx, head + "converters = [\"mx\"]\n" + tail + "[mx]\nrecipe_name = \"mxfp8_cublas_rceil\"\n");
    CHECK(import_json({mx, "--gpus", "8", "--cluster", "dgx-b200"})["from_file"]["--fp8-recipe"]["origin"] == "mx.recipe_name (line 9)");
    parplan::test::write_text(mx, head + "converters = [\"mx\"]\n" + tail + "[mx]\nrecipe_name = \"mxfp4_cutlass\"\n");
    const auto fp4 = run_parplan({"import", mx, "--gpus", "8"}, {}, 60);
    CHECK(fp4.exit_code == 2);
    CHECK(fp4.err.find("'mxfp4_cutlass': 4-bit GEMMs (NVFP4, MXFP4) are not modelled") != std::string::npos);
    parplan::test::write_text(mx, head + "converters = [\"float8\", \"mx\"]\n" + tail);
    CHECK(run_parplan({"import", mx, "--gpus", "8"}, {}, 60).exit_code == 2);
    parplan::test::write_text(mx, head + "converters = [\"quantize.linear.awq\"]\n" + tail);
    const auto other = import_json({mx, "--gpus", "8"});
    CHECK(other["plan"]["training"]["precision"] == "bf16");
    bool listed = false;
    for (const auto& l : other["ignored"]) listed = listed || l.get<std::string>().find("converter 'quantize.linear.awq' is not modelled") != std::string::npos;
    CHECK(listed);
  }
  // torchtitan: the [float8] recipe and FSDP float8 all-gather, and FSDP2's reduce dtype.
  const std::string toml = (dir.path / "fp8.toml").string();
  parplan::test::write_text(toml, "[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"float8\"]\n"
                                  "[training]\nlocal_batch_size = 1\nseq_len = 8192\nmixed_precision_reduce = \"bfloat16\"\n"
                                  "[float8]\nrecipe_name = \"rowwise\"\nenable_fsdp_float8_all_gather = true\n"
                                  "precompute_float8_dynamic_scale_for_fsdp = true\n");
  const auto t = import_json({toml, "--gpus", "8"});
  CHECK(t["plan"]["training"]["fp8_recipe"] == "rowwise");
  CHECK(t["plan"]["training"]["fp8_saved_inputs"] == false);  // torchao's float8 keeps 16-bit inputs
  CHECK(t["plan"]["training"]["fp8_param_gather"] == true);
  CHECK(t["plan"]["training"]["grad_fp32"] == false);
  // A float8 key parplan does not read is listed, not silently dropped.
  bool listed = false;
  for (const auto& l : t["ignored"]) listed = listed || l.get<std::string>().starts_with("float8.precompute_float8_dynamic_scale_for_fsdp");
  CHECK(listed);
  // Export writes them back.
  const std::string plan = (dir.path / "plan.json").string();
  REQUIRE(run_parplan({"import", toml, "--gpus", "8", "-o", plan}, {}, 60).exit_code == 0);
  const auto back = run_parplan({"export", "--plan", plan, "--to", "torchtitan"}, {}, 60);
  REQUIRE(back.exit_code == 0);
  CHECK(back.out.find("[float8]\nrecipe_name = \"rowwise\"\nenable_fsdp_float8_all_gather = true\n") != std::string::npos);
  CHECK(back.out.find("mixed_precision_reduce = \"bfloat16\"") != std::string::npos);
}

TEST_CASE("import: Megatron-Core's --pipeline-model-parallel-layout gives the stage layers per chunk and vpp") {
  ScratchDir dir;
  const std::string sh = (dir.path / "layout.sh").string();
  parplan::test::write_text(sh, "torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --num-layers 14 --hidden-size 2048 "
                                "--num-attention-heads 16 --seq-length 2048 --bf16 --pipeline-model-parallel-size 4 "
                                "--global-batch-size 64 --pipeline-model-parallel-layout 'Et|(tt|)*6tL'\n");
  const auto j = import_json({sh});
  CHECK(j["plan"]["parallel"]["vpp"] == 2);
  CHECK(j["plan"]["parallel"]["schedule"] == "interleaved");
  CHECK(j["plan"]["parallel"]["stage_layers"] == nlohmann::json::array({{1, 2}, {2, 2}, {2, 2}, {2, 1}}));
  CHECK(j["from_file"]["--stage-layers"]["origin"] == "--pipeline-model-parallel-layout (line 1)");
  parplan::test::write_text(sh, "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 14 --hidden-size 2048 "
                                "--num-attention-heads 16 --pipeline-model-parallel-size 4 "
                                "--pipeline-model-parallel-layout 'Et|(tt|)*5tL'\n");
  const auto bad = run_parplan({"import", sh}, {}, 60);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--pipeline-model-parallel-layout (line 1): 'Et|(tt|)*5tL': 7 virtual stages do not split over pp 4") !=
        std::string::npos);
}

TEST_CASE("export: FSDP for torchtitan is FSDP2; a plan without its copies, or pipelined ZeRO-1, is noted") {
  ScratchDir dir;
  const std::string z3 = (dir.path / "z3.json").string(), z1 = (dir.path / "z1.json").string();
  REQUIRE(run_parplan({"estimate", "--model", "llama3-8b", "--gpus", "8", "--zero", "3", "--global-batch", "8", "-o", z3},
                      {}, 60).exit_code == 0);
  REQUIRE(run_parplan({"estimate", "--model", "llama3-8b", "--gpus", "8", "--pp", "2", "--zero", "1", "--global-batch", "8",
                       "-o", z1}, {}, 60).exit_code == 0);
  const auto a = run_parplan({"export", "--plan", z3, "--to", "torchtitan"}, {}, 60);
  REQUIRE(a.exit_code == 0);
  CHECK(a.err.find("torchtitan cannot express ZeRO-3 without FSDP2's copies") != std::string::npos);
  const auto b = run_parplan({"export", "--plan", z1, "--to", "torchtitan"}, {}, 60);
  REQUIRE(b.exit_code == 0);
  CHECK(b.err.find("torchtitan cannot express ZeRO-1 with pp > 1") != std::string::npos);
  CHECK(b.out.find("data_parallel_shard_degree = 4") != std::string::npos);
  // With --fsdp2 nothing is noted about the sharding.
  const std::string f2 = (dir.path / "f2.json").string();
  REQUIRE(run_parplan({"estimate", "--model", "llama3-8b", "--gpus", "8", "--zero", "3", "--fsdp2", "--global-batch", "8",
                       "-o", f2}, {}, 60).exit_code == 0);
  const auto c = run_parplan({"export", "--plan", f2, "--to", "torchtitan"}, {}, 60);
  REQUIRE(c.exit_code == 0);
  CHECK(c.err.find("FSDP2") == std::string::npos);
  CHECK(c.err.find("ZeRO") == std::string::npos);
}

TEST_CASE("export: DeepSeek-V3's fp8 activation cache is no framework's flag: every target warns") {
  ScratchDir dir;
  const std::string plan = (dir.path / "plan.json").string();
  REQUIRE(run_parplan({"estimate", "--model", "qwen3-30b-a3b", "--gpus", "8", "--ep", "8", "--precision", "fp8",
                       "--fp8-activation-cache", "-o", plan},
                      {}, 60)
              .exit_code <= 1);
  for (const char* to : {"megatron", "nemo", "torchtitan", "deepspeed"}) {
    CAPTURE(to);
    const auto r = run_parplan({"export", "--plan", plan, "--to", to}, {}, 60);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find(std::string(to) + " cannot express --fp8-activation-cache") != std::string::npos);
  }
}

TEST_CASE("import and export: torchtitan's compile section is the compiled element-wise ops and loss") {
  ScratchDir dir;
  int n = 0;
  auto toml = [&](const std::string& tail) {
    const std::string file = (dir.path / (std::to_string(n++) + ".toml")).string();
    std::string body = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n";
    body += tail;
    parplan::test::write_text(file, body);
    return file;
  };
  auto compiled = [](const nlohmann::json& j) {
    return std::pair<bool, bool>(j["plan"]["training"]["compiled_elementwise"], j["plan"]["training"]["fused_cross_entropy"]);
  };
  // torchtitan's default is off: both uncompiled, and the import says it assumed so.
  const auto none = import_json({toml(""), "--gpus", "8"});
  CHECK(compiled(none) == std::pair(false, false));
  CHECK(none.dump().find("--eager-elementwise: compile.enable not given (torchtitan default false)") != std::string::npos);
  CHECK(compiled(import_json({toml("[compile]\nenable = true\n"), "--gpus", "8"})) == std::pair(true, true));
  CHECK(compiled(import_json({toml("[compile]\nenable = false\n"), "--gpus", "8"})) == std::pair(false, false));
  CHECK(compiled(import_json({toml("[training]\ncompile = true\n"), "--gpus", "8"})) == std::pair(true, true));
  const auto model_only = import_json({toml("[compile]\nenable = true\ncomponents = [\"model\"]\n"), "--gpus", "8"});
  CHECK(compiled(model_only) == std::pair(true, false));
  CHECK(model_only["from_file"]["--eager-cross-entropy"]["origin"] == "compile.enable (line 5) / compile.components (line 6)");
  CHECK(compiled(import_json({toml("[compile]\nenable = true\ncomponents = [\"loss\"]\n"), "--gpus", "8"})) ==
        std::pair(false, true));
  const auto off = import_json({toml("[compile]\nenable = false\ncomponents = [\"model\"]\n"), "--gpus", "8"});
  CHECK(off.dump().find("compile.components (line 6): no effect with compile off") != std::string::npos);
  // Bad values: exit 2 naming the key.
  for (const auto& [tail, message] : std::vector<std::pair<std::string, std::string>>{
           {"[compile]\nenable = 1\n", "compile.enable (line 5) takes true or false, not 1"},
           {"[compile]\nenable = true\ncomponents = [\"optimizer\"]\n",
            "compile.components (line 6): '\"optimizer\"' (torchtitan compiles \"model\" and \"loss\")"},
           {"[compile]\nenable = true\ncomponents = \"model\"\n", "compile.components (line 6) takes a list"},
           {"[training]\ncompile = true\n[compile]\nenable = true\n",
            "compile.enable (line 7) and training.compile (line 5): one setting"}}) {
    CAPTURE(tail);
    const auto r = run_parplan({"import", toml(tail), "--gpus", "8"}, {}, 60);
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.err.find(message) != std::string::npos, r.err);
  }
  // Export writes the section the plan's two settings are, and import reads it back.
  for (const auto& [flags, section] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "[compile]\nenable = true\ncomponents = [\"model\", \"loss\"]\n"},
           {{"--eager-elementwise"}, "[compile]\nenable = true\ncomponents = [\"loss\"]\n"},
           {{"--eager-cross-entropy"}, "[compile]\nenable = true\ncomponents = [\"model\"]\n"},
           {{"--eager-elementwise", "--eager-cross-entropy"}, "[compile]\nenable = false\n"}}) {
    CAPTURE(section);
    const std::string plan = (dir.path / "plan.json").string(), back = (dir.path / "back.toml").string();
    std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--gpus", "8", "--zero", "3", "--fsdp2",
                                     "--recompute", "full", "-o", plan};
    args.insert(args.end(), flags.begin(), flags.end());
    REQUIRE(run_parplan(args, {}, 60).exit_code == 0);
    const auto t = run_parplan({"export", "--plan", plan, "--to", "torchtitan"}, {}, 60);
    REQUIRE(t.exit_code == 0);
    CHECK(t.out.find(section) != std::string::npos);
    parplan::test::write_text(back, t.out);
    const auto j = import_json({back, "--gpus", "8"});
    const bool eager_e = std::find(flags.begin(), flags.end(), "--eager-elementwise") != flags.end();
    const bool eager_l = std::find(flags.begin(), flags.end(), "--eager-cross-entropy") != flags.end();
    CHECK(compiled(j) == std::pair(!eager_e, !eager_l));
  }
}

TEST_CASE("import and export: torchtitan's enable_async_tensor_parallel is micro-pipelined TP") {
  ScratchDir dir;
  auto toml = [&](const std::string& name, const std::string& tp, const std::string& async) {
    const std::string file = (dir.path / name).string();
    parplan::test::write_text(file, "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\ntensor_parallel_degree = " +
                                        tp + "\nenable_async_tensor_parallel = " + async + "\n[compile]\nenable = true\n");
    return file;
  };
  const auto j = import_json({toml("async.toml", "8", "true"), "--gpus", "64"});
  CHECK(j["plan"]["parallel"]["micropipeline_tp"] == true);
  CHECK(j["plan"]["parallel"]["sequence_parallel"] == true);
  CHECK(j["from_file"]["--micropipeline-tp"]["origin"] == "parallelism.enable_async_tensor_parallel (line 6)");
  CHECK(import_json({toml("off.toml", "8", "false"), "--gpus", "64"})["plan"]["parallel"]["micropipeline_tp"] == false);
  // Without TP it does nothing, and says so.
  const auto one = import_json({toml("tp1.toml", "1", "true"), "--gpus", "8"});
  CHECK(one["plan"]["parallel"]["micropipeline_tp"] == false);
  CHECK(one.dump().find("enable_async_tensor_parallel (line 6): no effect with tensor_parallel_degree 1") != std::string::npos);
  // torchtitan refuses async TP without a compiled model; so does import, naming the key.
  const std::string eager = (dir.path / "eager.toml").string();
  parplan::test::write_text(eager, "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\n"
                                   "tensor_parallel_degree = 8\nenable_async_tensor_parallel = true\n");
  const auto refused = run_parplan({"import", eager, "--gpus", "64"}, {}, 60);
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("parallelism.enable_async_tensor_parallel (line 6): torchtitan's async TP needs a compiled "
                         "model") != std::string::npos);
  // Back to torchtitan: the key and the compile section it needs; other frameworks cannot say it.
  const std::string plan = (dir.path / "plan.json").string();
  REQUIRE(run_parplan({"import", toml("again.toml", "8", "true"), "--gpus", "64", "-o", plan}, {}, 60).exit_code == 0);
  const auto titan = run_parplan({"export", "--plan", plan, "--to", "torchtitan"}, {}, 60);
  REQUIRE_MESSAGE(titan.exit_code == 0, titan.err);
  CHECK(titan.out.find("\nenable_async_tensor_parallel = true\n") != std::string::npos);
  CHECK(titan.out.find("\n[compile]\nenable = true\ncomponents = [\"model\", \"loss\"]\n") != std::string::npos);
  // A plan whose element-wise ops run uncompiled cannot be torchtitan's async TP: written, and warned about.
  const std::string eager_plan = (dir.path / "eager_plan.json").string();
  REQUIRE(run_parplan({"estimate", "--model", "llama3-8b", "--gpus", "64", "--tp", "8", "--sp", "--micropipeline-tp",
                       "--eager-elementwise", "--zero", "3", "--fsdp2", "-o", eager_plan},
                      {}, 60)
              .exit_code <= 1);
  const auto eager_titan = run_parplan({"export", "--plan", eager_plan, "--to", "torchtitan"}, {}, 60);
  REQUIRE(eager_titan.exit_code == 0);
  CHECK(eager_titan.err.find("torchtitan cannot express --micropipeline-tp with --eager-elementwise") != std::string::npos);
  const auto megatron = run_parplan({"export", "--plan", plan, "--to", "megatron"}, {}, 60);
  CHECK(megatron.out.find("not expressible: --micropipeline-tp (torchtitan's async tensor parallelism)") != std::string::npos);
}
