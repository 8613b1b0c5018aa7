// export on the plans of the interop QA pass: what each target can write of an uneven pipeline split, offload,
// unfused gradient accumulation and whole-layer ZeRO-3 gathers, and a warning (stderr and a comment in the file) for
// each thing it cannot; a launcher line torchrun accepts; --to naming only the formats export writes.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/run_helper.hpp"

using parplan::test::import_json;
using parplan::test::run_parplan;
using parplan::test::ScratchDir;

namespace {

struct Dir {
  ScratchDir dir;
  std::string path(const std::string& name) const { return (dir.path / name).string(); }
};

// estimate's Plan document for `flags`, written to `out`.
void plan(const std::vector<std::string>& flags, const std::string& out) {
  std::vector<std::string> a = {"estimate"};
  a.insert(a.end(), flags.begin(), flags.end());
  a.insert(a.end(), {"-o", out});
  const auto r = run_parplan(a, {}, 60);
  CAPTURE(r.err);
  REQUIRE(r.exit_code <= 1);  // 1: does not fit, still a plan
}

struct Export {
  std::string text, err;
};
Export exported(const std::string& plan_file, const std::string& to, const std::string& out) {
  const auto r = run_parplan({"export", "--plan", plan_file, "--to", to, "-o", out}, {}, 60);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  return {parplan::test::read_text(out), r.err};
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("export: an uneven pipeline split is written where the target has it and warned where it has not") {
  Dir d;
  // Megatron-LM: an explicit per-chunk split is Megatron-Core's layout string, read back as the same stage layers.
  plan({"--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--pp", "4", "--global-batch", "64", "--stage-layers",
        "6,9,9,8"},
       d.path("sl.json"));
  const Export m = exported(d.path("sl.json"), "megatron", d.path("sl.sh"));
  CHECK(has(m.text, "--pipeline-model-parallel-layout 'Etttttt|ttttttttt|ttttttttt|ttttttttL'"));
  CHECK(import_json({d.path("sl.sh")})["plan"]["parallel"]["stage_layers"] == nlohmann::json::array({6, 9, 9, 8}));
  // NeMo: Megatron-Core's first / last stage sizes and the embedding and loss counted in the split, read back.
  plan({"--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "4", "--global-batch", "128",
        "--first-stage-layers", "18", "--last-stage-layers", "18", "--distributed-optimizer"},
       d.path("fl.json"));
  const Export n = exported(d.path("fl.json"), "nemo", d.path("fl.yaml"));
  CHECK(has(n.text, "num_layers_in_first_pipeline_stage: 18"));
  const auto back = import_json({d.path("fl.yaml")})["plan"]["parallel"];
  CHECK(back["first_stage_layers"] == 18);
  CHECK(back["last_stage_layers"] == 18);
  plan({"--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--pp", "2", "--global-batch", "64",
        "--distributed-optimizer", "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"},
       d.path("acc.json"));
  const Export acc = exported(d.path("acc.json"), "nemo", d.path("acc.yaml"));
  CHECK(has(acc.text, "account_for_loss_in_pipeline_split: true"));
  const auto acc_back = import_json({d.path("acc.yaml"), "--model", "llama3-8b"})["plan"]["parallel"];
  CHECK(acc_back["embedding_in_pipeline_split"] == true);
  CHECK(acc_back["loss_in_pipeline_split"] == true);
  // torchtitan and DeepSpeed have no key for it: a warning on stderr and a comment in the file.
  for (const char* to : {"torchtitan", "deepspeed"}) {
    CAPTURE(to);
    const Export e = exported(d.path("fl.json"), to, d.path(std::string("fl.") + to));
    CHECK(has(e.err, "cannot express --first-stage-layers 18"));
    CHECK(has(e.text, "--first-stage-layers 18"));
    CHECK(has(exported(d.path("acc.json"), to, d.path(std::string("acc.") + to)).err,
              "cannot express --account-for-embedding-in-pipeline-split"));
  }
}

TEST_CASE("export: offload is DeepSpeed's offload_optimizer / offload_param, and a warning elsewhere") {
  Dir d;
  plan({"--model", "llama3-8b", "--gpus", "8", "--zero", "3", "--offload", "optimizer,params", "--global-batch", "64"},
       d.path("off.json"));
  const Export ds = exported(d.path("off.json"), "deepspeed", d.path("off.ds.json"));
  const auto j = nlohmann::json::parse(ds.text);
  CHECK(j["zero_optimization"]["offload_optimizer"]["device"] == "cpu");
  CHECK(j["zero_optimization"]["offload_param"]["device"] == "cpu");
  CHECK(import_json({d.path("off.ds.json"), "--model", "llama3-8b", "--gpus", "8"})["plan"]["parallel"]["offload"] ==
        "optimizer,params");
  for (const char* to : {"megatron", "nemo", "torchtitan"}) {
    CAPTURE(to);
    CHECK(has(exported(d.path("off.json"), to, d.path(std::string("off.") + to)).err,
              "cannot express --offload optimizer,params"));
  }
}

TEST_CASE("export: unfused gradient accumulation, DeepSpeed's per-submodule gathers, torchtitan's DDP, the launcher") {
  Dir d;
  // Megatron-LM's --no-gradient-accumulation-fusion and NeMo's gradient_accumulation_fusion: false, read back.
  plan({"--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--global-batch", "64", "--no-fused-grad-accumulation"},
       d.path("nf.json"));
  const Export m = exported(d.path("nf.json"), "megatron", d.path("nf.sh"));
  CHECK(has(m.text, "--no-gradient-accumulation-fusion"));
  CHECK(m.err.empty());
  CHECK(import_json({d.path("nf.sh")})["plan"]["training"]["fused_grad_accumulation"] == false);
  const Export n = exported(d.path("nf.json"), "nemo", d.path("nf.yaml"));
  CHECK(has(n.text, "gradient_accumulation_fusion: false"));
  CHECK(import_json({d.path("nf.yaml"), "--model", "llama3-8b"})["plan"]["training"]["fused_grad_accumulation"] == false);
  // DeepSpeed's ZeRO-3 gathers per submodule: a whole-layer plan is warned, as the Megatron export warns.
  plan({"--model", "llama3-8b", "--gpus", "16", "--zero", "3", "--global-batch", "64"}, d.path("z3.json"));
  CHECK(has(exported(d.path("z3.json"), "deepspeed", d.path("z3.ds.json")).err,
            "cannot express ZeRO-3 gathering whole layers (DeepSpeed's ZeRO-3 gathers per submodule"));
  // torchtitan's unsharded data parallelism is DDP, on a 1-D mesh only.
  const Export t = exported(d.path("nf.json"), "torchtitan", d.path("nf.toml"));
  CHECK(has(t.err, "data parallelism without sharding beside tp, pp or cp"));
  CHECK(has(t.text, "# parplan: not expressible: data parallelism without sharding"));
  // Every warning is a comment too, those added after the others (the recompute ones) included.
  plan({"--model", "llama3-8b", "--gpus", "8", "--zero", "3", "--fsdp2", "--recompute", "selective", "--global-batch",
        "64"},
       d.path("sel.json"));
  const Export sel = exported(d.path("sel.json"), "torchtitan", d.path("sel.toml"));
  CHECK(has(sel.err, "recompute selective (Megatron's attention-core recompute)"));
  CHECK(has(sel.text, "# parplan: not expressible: recompute selective (Megatron's attention-core recompute)"));
  CHECK(has(sel.text, "selective_ac_option = \"op\""));
  // On MoE or latent-attention layers parplan does not model torchtitan's per-op policy: written as full, with the
  // module list in the warning, so the config reads back (as full recompute).
  plan({"--model", "deepseek-v3", "--gpus", "256", "--pp", "8", "--ep", "32", "--global-batch", "256", "--recompute",
        "selective", "--recompute-modules", "mla_up_proj,moe_act", "--distributed-optimizer"},
       d.path("moe.json"));
  const Export moe = exported(d.path("moe.json"), "torchtitan", d.path("moe.toml"));
  CHECK(has(moe.err, "recompute selective of moe_act,mla_up_proj (Megatron-Core's module recompute): written as full"));
  CHECK(has(moe.text, "mode = \"full\""));
  const auto back = run_parplan({"import", d.path("moe.toml"), "--json"}, {}, 60);
  CAPTURE(back.err);
  REQUIRE(back.exit_code == 0);
  CHECK(nlohmann::json::parse(back.out)["plan"]["parallel"]["recompute"] == "full");
  // NeMo takes the vocabulary from its tokenizer: said at the top and on stderr, as every value not written.
  const Export nemo = exported(d.path("sel.json"), "nemo", d.path("sel.yaml"));
  CHECK(has(nemo.err, "not written to the nemo config: vocabulary 128256: NeMo takes it from model.tokenizer"));
  CHECK(has(nemo.text, "# parplan: not written: vocabulary 128256"));
  // torchrun starts as many processes on every node: 12 GPUs of 8-GPU nodes are one node of 12, warned.
  plan({"--model", "llama3-8b", "--gpus", "12", "--tp", "2", "--global-batch", "60", "--micro-batch", "1"},
       d.path("g12.json"));
  const Export g = exported(d.path("g12.json"), "megatron", d.path("g12.sh"));
  CHECK(has(g.text, "torchrun --nproc_per_node 12 --nnodes 1"));
  CHECK(has(g.err, "cannot express 12 GPUs on 8-GPU nodes (not whole nodes)"));
  // A ZeRO stage is Megatron-DeepSpeed's argument: said in a comment, read back as written.
  plan({"--model", "llama3-8b", "--gpus", "16", "--zero", "1", "--global-batch", "64"}, d.path("z1.json"));
  CHECK(has(exported(d.path("z1.json"), "megatron", d.path("z1.sh")).text,
            "# --zero-stage is Megatron-DeepSpeed's argument (Megatron-LM has none"));
  // --to names the formats export writes.
  const auto bad = run_parplan({"export", "--plan", d.path("z1.json"), "--to", "Megatron"}, {}, 60);
  CHECK(bad.exit_code == 2);
  CHECK(has(bad.err, "--to: unknown format 'Megatron' (use megatron, nemo, torchtitan, deepspeed)"));
}
