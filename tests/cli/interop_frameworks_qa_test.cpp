// The torchtitan TOML, DeepSpeed JSON, NeMo YAML and Megatron-LM --yaml-cfg readers: HSDP read (torchtitan, Megatron)
// and DeepSpeed's hpZ refused, torchtitan's accumulation under pipelining refused, torchtitan's
// activation-checkpointing and schedule defaults, dotted TOML keys, DeepSpeed's overlap_comm and offload, NeMo's
// overlap_grad_sync and NeMo 2 layout, --seq beside --from.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/run_helper.hpp"

using parplan::test::import_json;
using parplan::test::run_parplan;
using parplan::test::ScratchDir;

namespace {

struct Qa {
  ScratchDir dir;
  std::string file(const std::string& name, const std::string& text) {
    const std::string f = (dir.path / name).string();
    parplan::test::write_text(f, text);
    return f;
  }
};

// The error line of a refused import (exit 2, one line).
std::string refused(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"import"};
  all.insert(all.end(), args.begin(), args.end());
  const auto r = run_parplan(all, {}, 60);
  CAPTURE(r.out);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find('\n') == r.err.size() - 1);
  return r.err;
}

bool has(const nlohmann::json& list, const std::string& line) {
  for (const auto& l : list) {
    if (l.get<std::string>() == line) return true;
  }
  return false;
}

const std::string kLlama8b = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n";

}  // namespace

TEST_CASE("import: torchtitan HSDP (replicate > 1 with FSDP shards) is ZeRO-3 over the shard group, replicated") {
  Qa q;
  const std::string hsdp = q.file("hsdp.toml", kLlama8b +
                                                   "[training]\nlocal_batch_size = 2\nseq_len = 8192\n"
                                                   "[parallelism]\ndata_parallel_replicate_degree = 2\n"
                                                   "data_parallel_shard_degree = 4\n");
  const auto h = import_json({hsdp, "--gpus", "8"});
  CHECK(h["plan"]["parallel"]["dp"] == 8);
  CHECK(h["plan"]["parallel"]["dp_replicate"] == 2);
  CHECK(h["plan"]["parallel"]["zero_stage"] == 3);
  CHECK(h["plan"]["parallel"]["fsdp2"] == true);
  // Exported back: the same two degrees.
  const std::string plan = q.file("hsdp.json", h["plan"].dump());
  const auto titan = run_parplan({"export", "--plan", plan, "--to", "torchtitan"}, {}, 60);
  CHECK(titan.exit_code == 0);
  CHECK(titan.out.find("data_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 4\n") != std::string::npos);
  // shard -1 (the GPUs left) with replicate 2 is HSDP too: 16 GPUs, 2 replicas of 8.
  const std::string rest = q.file("rest.toml", kLlama8b + "[parallelism]\ndata_parallel_replicate_degree = 2\n");
  const auto r = import_json({rest, "--gpus", "16"});
  CHECK(r["plan"]["parallel"]["dp"] == 16);
  CHECK(r["plan"]["parallel"]["dp_replicate"] == 2);
  // A rest of one shard rank with cp 1 is torchtitan's DDP, as shard 1 is: dp 2, no ZeRO, no replicas.
  const auto d = import_json({rest, "--gpus", "2"});
  CHECK(d["plan"]["parallel"]["dp"] == 2);
  CHECK(d["plan"]["parallel"]["zero_stage"] == 0);
  CHECK_FALSE(d["plan"]["parallel"].contains("dp_replicate"));
  // Replication alone is DDP: dp 2, no ZeRO.
  const std::string ddp = q.file("ddp.toml", kLlama8b +
                                                 "[parallelism]\ndata_parallel_replicate_degree = 2\n"
                                                 "data_parallel_shard_degree = 1\n");
  const auto j = import_json({ddp, "--gpus", "2"});
  CHECK(j["plan"]["parallel"]["dp"] == 2);
  CHECK(j["plan"]["parallel"]["zero_stage"] == 0);
  CHECK_FALSE(j["plan"]["parallel"].contains("dp_replicate"));
}

TEST_CASE("import: Megatron-LM --num-distributed-optimizer-instances is HSDP; DeepSpeed's hpZ is refused") {
  Qa q;
  const std::string sh = q.file("train.sh", "torchrun pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
                                            "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 "
                                            "--micro-batch-size 1 --global-batch-size 64 --bf16 "
                                            "--use-distributed-optimizer --num-distributed-optimizer-instances 4\n");
  const auto m = import_json({sh, "--gpus", "64"});
  CHECK(m["plan"]["parallel"]["dp"] == 64);
  CHECK(m["plan"]["parallel"]["dp_replicate"] == 4);
  CHECK(m["plan"]["parallel"]["distributed_optimizer"] == true);
  const std::string plan = q.file("m.json", m["plan"].dump());
  const auto back = run_parplan({"export", "--plan", plan, "--to", "megatron"}, {}, 60);
  CHECK(back.out.find("--num-distributed-optimizer-instances 4") != std::string::npos);
  // Without the distributed optimizer Megatron-Core has no instances to replicate: refused naming the flag.
  const std::string plain = q.file("plain.sh", "torchrun pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
                                               "--num-attention-heads 32 --seq-length 4096 "
                                               "--max-position-embeddings 4096 --micro-batch-size 1 "
                                               "--global-batch-size 64 --bf16 "
                                               "--num-distributed-optimizer-instances 4\n");
  CHECK(refused({plain, "--gpus", "64"}).find("--dp-replicate") != std::string::npos);
  const std::string ds = q.file("ds.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": )"
                                           R"({"stage": 3, "zero_hpz_partition_size": 8}})");
  CHECK(refused({ds, "--model", "llama3-8b", "--gpus", "64"}).find(
            "/zero_optimization/zero_hpz_partition_size: 8: ZeRO++ hierarchical partitioning") != std::string::npos);
  // MiCS (ZeRO-3 within groups of mics_shard_size, replicated across them) is refused naming the key, not priced as
  // ZeRO-3 over all ranks; -1 (DeepSpeed's default, off) is accepted, and the hierarchical gather flag alone noted.
  const std::string mics = q.file("mics.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": )"
                                               R"({"stage": 3, "mics_shard_size": 8}})");
  CHECK(refused({mics, "--model", "llama3-8b", "--gpus", "256"}).find(
            "/zero_optimization/mics_shard_size: 8: MiCS (ZeRO-3 sharded within groups of N ranks") !=
        std::string::npos);
  const std::string off = q.file("off.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": )"
                                             R"({"stage": 3, "mics_shard_size": -1, )"
                                             R"("mics_hierarchical_params_gather": true}})");
  const auto o = import_json({off, "--model", "llama3-8b", "--gpus", "64"});
  CHECK(o["plan"]["parallel"]["zero_stage"] == 3);
  CHECK(has(o["ignored"], "/zero_optimization/mics_hierarchical_params_gather true: no effect without MiCS "
                          "(mics_shard_size)"));
}

TEST_CASE("import: torchtitan with pp > 1 and gradient accumulation is refused naming the global batch") {
  Qa q;
  auto config = [&](int global) {
    return q.file("pp" + std::to_string(global) + ".toml",
                  "[model]\nname = \"llama3\"\nflavor = \"70B\"\n[training]\nlocal_batch_size = 8\n"
                  "global_batch_size = " + std::to_string(global) + "\nseq_len = 8192\n[parallelism]\n"
                  "data_parallel_shard_degree = 8\ntensor_parallel_degree = 8\npipeline_parallel_degree = 4\n"
                  "pipeline_parallel_microbatch_size = 1\npipeline_parallel_schedule = \"1F1B\"\n"
                  "[activation_checkpoint]\nmode = \"full\"\n");
  };
  const std::string acc = config(256);
  CHECK(refused({acc, "--gpus", "256"}) ==
        "parplan: error: " + acc +
            ": training.global_batch_size (line 6): global batch 256 is 4 accumulation steps of local batch 8 x dp 8, "
            "each its own torchtitan pipeline schedule of 8 microbatches with its own bubble, which parplan does not "
            "model (it would price one schedule of 32): make the global batch 64 (local x dp), or the local batch "
            "(training.local_batch_size (line 5)) 32\n");
  // estimate --from refuses it too.
  CHECK(run_parplan({"estimate", "--from", acc, "--gpus", "256"}, {}, 60).exit_code == 2);
  // Without accumulation, one schedule of local / mb microbatches.
  const auto j = import_json({config(64), "--gpus", "256"});
  CHECK(j["plan"]["parallel"]["num_microbatches"] == 8);
  CHECK(j["plan"]["parallel"]["micro_batch"] == 1);
  CHECK(j["plan"]["training"]["global_batch"] == 64);
}

TEST_CASE("import: torchtitan's activation checkpointing default is selective with option \"2\"") {
  Qa q;
  const std::string why = "--recompute full: activation_checkpoint.mode not given (torchtitan default: selective with "
                          "selective_ac_option \"2\", every 2nd block fully checkpointed)";
  // A dense model without the section: every 2nd of llama3-8b's 32 layers, priced as the first 16.
  const auto dense = import_json({q.file("dense.toml", kLlama8b), "--gpus", "8"});
  CHECK(dense["plan"]["parallel"]["recompute"] == "full");
  CHECK(dense["plan"]["parallel"]["recompute_layers"] == 16);
  CHECK(has(dense["assumed"], why));
  // mode "selective" alone is the same plan.
  const auto sel = import_json({q.file("sel.toml", kLlama8b + "[activation_checkpoint]\nmode = \"selective\"\n"), "--gpus", "8"});
  CHECK(sel["plan"]["parallel"] == dense["plan"]["parallel"]);
  // A MoE / MLA model without the section imports (61 layers: the first 30).
  const auto moe = import_json({q.file("dsv3.toml", "[model]\nname = \"deepseek_v3\"\nflavor = \"671B\"\n[parallelism]\n"
                                                 "expert_parallel_degree = 8\n"),
                             "--gpus", "64"});
  CHECK(moe["plan"]["parallel"]["recompute"] == "full");
  CHECK(moe["plan"]["parallel"]["recompute_layers"] == 30);
  CHECK(has(moe["assumed"], why));
}

TEST_CASE("import: torchtitan's pipeline_parallel_schedule has no effect at pp 1; at pp > 1 refusals name it") {
  Qa q;
  const std::string pp1 = q.file("pp1.toml", kLlama8b + "[parallelism]\npipeline_parallel_degree = 1\n"
                                                        "pipeline_parallel_schedule = \"Interleaved1F1B\"\n");
  const auto j = import_json({pp1, "--gpus", "8"});
  CHECK(j["plan"]["parallel"]["schedule"] == "1f1b");
  CHECK(has(j["ignored"], "parallelism.pipeline_parallel_schedule (line 6): no effect with pipeline_parallel_degree 1 "
                          "(torchtitan builds no pipeline)"));
  // pp 4: Interleaved1F1B is 2 stages per rank.
  auto pp4 = [&](const std::string& name, const std::string& schedule, int local) {
    return q.file(name, kLlama8b + "[training]\nlocal_batch_size = " + std::to_string(local) +
                            "\n[parallelism]\npipeline_parallel_degree = 4\npipeline_parallel_schedule = \"" +
                            schedule + "\"\n");
  };
  const auto il = import_json({pp4("il.toml", "Interleaved1F1B", 8), "--gpus", "8"});
  CHECK(il["plan"]["parallel"]["schedule"] == "interleaved");
  CHECK(il["plan"]["parallel"]["vpp"] == 2);
  CHECK(il["from_file"]["--vpp"]["origin"] ==
        "parallelism.pipeline_parallel_schedule (line 8) (torchtitan: 2 stages per rank for a multi-stage schedule)");
  // 2 microbatches on 4 stages cannot interleave: the refusal names the key, not --vpp alone.
  const std::string few = pp4("few.toml", "Interleaved1F1B", 2);
  CHECK(refused({few, "--gpus", "8"}).find("(from parallelism.pipeline_parallel_schedule (line 8) (torchtitan: 2 "
                                           "stages per rank for a multi-stage schedule))\n") != std::string::npos);
  // The V schedules: ZBVZeroBubble and DualPipeV, 2 stages per rank in a V (parplan's zb-v and dualpipe-v; their W
  // passes need the activations, so without full activation checkpointing, torchtitan's default).
  auto v4 = [&](const std::string& name, const std::string& schedule, int local) {
    return q.file(name, kLlama8b + "[training]\nlocal_batch_size = " + std::to_string(local) +
                            "\n[activation_checkpoint]\nmode = \"none\"\n[parallelism]\npipeline_parallel_degree = 4\n"
                            "pipeline_parallel_schedule = \"" + schedule + "\"\n");
  };
  const auto zbv = import_json({v4("zbv.toml", "ZBVZeroBubble", 8), "--gpus", "8"});
  CHECK(zbv["plan"]["parallel"]["schedule"] == "zb-v");
  const std::string dpv_toml = v4("dpv.toml", "DualPipeV", 8);
  const auto dpv = import_json({dpv_toml, "--gpus", "8"});
  CHECK(dpv["plan"]["parallel"]["schedule"] == "dualpipe-v");
  // And back: torchtitan's export names the V schedule, without a warning about it.
  const auto back = run_parplan({"export", "--from", dpv_toml, "--gpus", "8", "--to", "torchtitan"}, {}, 60);
  CHECK(back.exit_code == 0);
  CHECK(back.out.find("pipeline_parallel_schedule = \"DualPipeV\"") != std::string::npos);
  CHECK(back.err.find("schedule dualpipe-v") == std::string::npos);
  // DualPipeV's order needs 2 pp microbatches: 4 on 4 stages is refused naming the key.
  const std::string dpv_few = v4("dpv_few.toml", "DualPipeV", 4);
  CHECK(refused({dpv_few, "--gpus", "8"}).find("schedule dualpipe-v on 4 stages needs at least 2 pp = 8 microbatches") !=
        std::string::npos);
  const std::string other = pp4("other.toml", "LoopedBFS", 8);
  CHECK(refused({other, "--gpus", "8"}) == "parplan: error: " + other +
                                               ": parallelism.pipeline_parallel_schedule (line 8): 'LoopedBFS' is "
                                               "not modelled (GPipe, 1F1B, Interleaved1F1B, ZBVZeroBubble, DualPipeV "
                                               "are)\n");
}

TEST_CASE("import: DeepSpeed's overlap_comm false is --no-overlap-dp; none given, DeepSpeed's default by stage") {
  Qa q;
  auto ds = [&](const std::string& name, const std::string& zero) {
    return import_json({q.file(name, "{\"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true}, "
                                  "\"zero_optimization\": " + zero + "}"),
                     "--gpus", "8", "--model", "llama3-8b"});
  };
  const auto off = ds("off.json", "{\"stage\": 2, \"overlap_comm\": false}");
  CHECK(off["plan"]["parallel"]["overlap_dp_comm"] == false);
  CHECK(off["from_file"]["--no-overlap-dp"]["origin"] == "/zero_optimization/overlap_comm");
  const auto on = ds("on.json", "{\"stage\": 2, \"overlap_comm\": true}");
  CHECK(on["plan"]["parallel"]["overlap_dp_comm"] == true);
  const auto z2 = ds("z2.json", "{\"stage\": 2}");
  CHECK(z2["plan"]["parallel"]["overlap_dp_comm"] == false);
  CHECK(has(z2["assumed"], "--no-overlap-dp: no /zero_optimization/overlap_comm (DeepSpeed default false below stage 3)"));
  const auto z3 = ds("z3.json", "{\"stage\": 3}");
  CHECK(z3["plan"]["parallel"]["overlap_dp_comm"] == true);
  CHECK(has(z3["assumed"], "overlapped gradient reduction: no /zero_optimization/overlap_comm (DeepSpeed default true "
                           "at stage 3)"));
}

TEST_CASE("import: DeepSpeed's bf16 / fp16 enabled is read as a boolean; 'auto' and other values are refused") {
  Qa q;
  auto ds = [&](const std::string& name, const std::string& precision) {
    return q.file(name, "{\"train_micro_batch_size_per_gpu\": 1, " + precision + ", \"zero_optimization\": {\"stage\": 1}}");
  };
  const auto fp16 = import_json({ds("fp16.json", R"("fp16": {"enabled": true, "loss_scale": 0})"), "--gpus", "8",
                                 "--model", "llama3-8b"});
  CHECK(fp16["plan"]["training"]["precision"] == "fp16");
  CHECK(fp16["from_file"]["--precision"]["origin"] == "/fp16/enabled");
  CHECK(has(fp16["ignored"], "/fp16/loss_scale: not modelled"));
  const auto off = import_json({ds("off.json", R"("fp16": {"enabled": false})"), "--gpus", "8", "--model", "llama3-8b"});
  CHECK(has(off["assumed"], "--precision bf16: neither /bf16/enabled nor /fp16/enabled (DeepSpeed's default is fp32, "
                            "which parplan does not model)"));
  // The Hugging Face Trainer's "auto" is resolved by the Trainer, not in the file: read as absent it priced bf16.
  CHECK(refused({ds("auto.json", R"("fp16": {"enabled": "auto"})"), "--gpus", "8", "--model", "llama3-8b"})
            .find("/fp16/enabled: must be true or false, not \"auto\" ('auto' is the Hugging Face Trainer's") !=
        std::string::npos);
  CHECK(refused({ds("one.json", R"("bf16": {"enabled": 1})"), "--gpus", "8", "--model", "llama3-8b"})
            .find("/bf16/enabled: must be true or false, not 1") != std::string::npos);
  CHECK(refused({ds("flat.json", R"("bf16": true)"), "--gpus", "8", "--model", "llama3-8b"})
            .find("/bf16: must be an object such as {\"enabled\": true}, not true") != std::string::npos);
}

TEST_CASE("import: torchtitan's mixed_precision_param given is read from the file, not listed as assumed") {
  Qa q;
  const std::string base = kLlama8b + "[training]\nlocal_batch_size = 1\nseq_len = 8192\n";
  const auto given = import_json({q.file("mp.toml", base + "mixed_precision_param = \"bfloat16\"\n"), "--gpus", "8"});
  CHECK(given["from_file"]["--precision"]["origin"] == "training.mixed_precision_param (line 7)");
  for (const auto& a : given["assumed"]) CHECK(a.get<std::string>().find("--precision") == std::string::npos);
  const auto left = import_json({q.file("none.toml", base), "--gpus", "8"});
  CHECK(has(left["assumed"], "--precision bf16: training.mixed_precision_param not given (torchtitan default bfloat16)"));
}

TEST_CASE("import: NeMo's trainer.precision 32 or a -true form is refused naming it, not priced as mixed bf16") {
  Qa q;
  const std::string nemo = parplan::test::read_text(std::string(PARPLAN_TEST_DIR) + "/cli/data/interop/nemo_gpt.yaml");
  const size_t at = nemo.find("precision: bf16-mixed");
  REQUIRE(at != std::string::npos);
  // 32 / 64: fp32 / fp64 training; bf16-true / 16-true: 16-bit weights without fp32 master copies (Lightning).
  for (const char* prec : {"32", "32-true", "64", "bf16-true", "16-true"}) {
    CAPTURE(prec);
    std::string text = nemo;
    text.replace(at, std::string("precision: bf16-mixed").size(), std::string("precision: ") + prec);
    CHECK(refused({q.file("fp32.yaml", text)}).find(std::string("trainer.precision (line 7): precision '") + prec +
                                                   "' is not modelled") != std::string::npos);
  }
}

TEST_CASE("import: NeMo's optim.overlap_grad_sync false is --no-overlap-dp") {
  Qa q;
  // distributed_fused_adam overlaps unless overlap_grad_sync is false.
  const std::string nemo = "trainer:\n  devices: 8\n  num_nodes: 1\n  precision: bf16-mixed\nmodel:\n"
                           "  micro_batch_size: 1\n  global_batch_size: 64\n  encoder_seq_length: 4096\n"
                           "  num_layers: 32\n  hidden_size: 4096\n  num_attention_heads: 32\n"
                           "  optim:\n    name: distributed_fused_adam\n";
  const auto sync = import_json({q.file("sync.yaml", nemo + "    overlap_grad_sync: false\n")});
  CHECK(sync["plan"]["parallel"]["overlap_dp_comm"] == false);
  CHECK(sync["plan"]["parallel"]["distributed_optimizer"] == true);
  CHECK(sync["from_file"]["--no-overlap-dp"]["origin"] == "model.optim.overlap_grad_sync (line 14)");
  const auto dflt = import_json({q.file("dflt.yaml", nemo)});
  CHECK(dflt["plan"]["parallel"]["overlap_dp_comm"] == true);
}

TEST_CASE("import: DeepSpeed offload_optimizer / offload_param to the CPU are --offload; NVMe is refused") {
  Qa q;
  auto ds = [&](const std::string& name, const std::string& zero) {
    return q.file(name, "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 8, "
                        "\"bf16\": {\"enabled\": true}, \"zero_optimization\": " + zero + "}");
  };
  const auto both = import_json({ds("both.json", "{\"stage\": 3, \"offload_optimizer\": {\"device\": \"cpu\", "
                                              "\"pin_memory\": true}, \"offload_param\": {\"device\": \"cpu\"}}"),
                              "--gpus", "8", "--model", "llama3-8b"});
  CHECK(both["plan"]["parallel"]["offload"] == "optimizer,params");
  CHECK(both["from_file"]["--offload"]["origin"] ==
        "/zero_optimization/offload_optimizer/device and /zero_optimization/offload_param/device");
  CHECK(has(both["ignored"], "/zero_optimization/offload_optimizer/pin_memory: not modelled"));
  const auto none = import_json({ds("none.json", "{\"stage\": 2, \"offload_optimizer\": {\"device\": \"none\"}}"),
                              "--gpus", "8", "--model", "llama3-8b"});
  CHECK_FALSE(none["plan"]["parallel"].contains("offload"));
  const std::string nvme = ds("nvme.json", "{\"stage\": 3, \"offload_param\": {\"device\": \"nvme\"}}");
  CHECK(refused({nvme, "--gpus", "8", "--model", "llama3-8b"}) ==
        "parplan: error: " + nvme +
            ": /zero_optimization/offload_param/device: 'nvme': offload to NVMe is not modelled (device cpu, to host "
            "memory, is: --offload)\n");
}

TEST_CASE("import: Megatron-LM --yaml-cfg fp8 is the fp8 format; its recipe is read") {
  Qa q;
  const auto j = import_json({q.file("fp8.yaml", "language_model:\n  num_layers: 32\n  hidden_size: 4096\n"
                                              "  num_attention_heads: 32\n  seq_length: 4096\n  fp8: hybrid\n"
                                              "  fp8_recipe: delayed\nmodel_parallel:\n"
                                              "  tensor_model_parallel_size: 2\nmicro_batch_size: 1\n"
                                              "global_batch_size: 64\nbf16: true\n"),
                           "--gpus", "8"});
  CHECK(j["plan"]["training"]["precision"] == "fp8");
  CHECK(j["from_file"]["--precision"]["origin"] == "language_model.fp8 (line 6)");
  CHECK(j["from_file"]["--fp8-recipe"]["origin"] == "language_model.fp8_recipe (line 7)");
  CHECK(j["ignored"].empty());
}

TEST_CASE("import: a NeMo 2 config's trainer.strategy, model.config and data are read") {
  Qa q;
  const auto j = import_json({q.file("nemo2.yaml",
                                  "trainer:\n  devices: 8\n  num_nodes: 4\n  strategy:\n"
                                  "    tensor_model_parallel_size: 4\n    pipeline_model_parallel_size: 2\n"
                                  "    context_parallel_size: 2\n    sequence_parallel: true\n  plugins:\n"
                                  "    precision: bf16-mixed\nmodel:\n  config:\n    num_layers: 32\n"
                                  "    hidden_size: 4096\n    ffn_hidden_size: 14336\n    num_attention_heads: 32\n"
                                  "    num_query_groups: 8\n    seq_length: 8192\ndata:\n  seq_length: 8192\n"
                                  "  global_batch_size: 512\n  micro_batch_size: 1\n")});
  const auto& p = j["plan"]["parallel"];
  CHECK(j["plan"]["num_gpus"] == 32);
  CHECK(p["tp"] == 4);
  CHECK(p["pp"] == 2);
  CHECK(p["cp"] == 2);
  CHECK(p["sequence_parallel"] == true);
  CHECK(j["plan"]["training"]["global_batch"] == 512);
  CHECK(j["plan"]["training"]["seq_len"] == 8192);
  CHECK(j["plan"]["model"]["kv_heads"] == 8);
  CHECK(j["from_file"]["--tp"]["origin"] == "trainer.strategy.tensor_model_parallel_size (line 5)");
  CHECK(j["from_file"]["--global-batch"]["origin"] == "data.global_batch_size (line 21)");
  CHECK(j["ignored"].empty());
}

TEST_CASE("import, check and export take --seq beside --from; DeepSpeed's sequence length from --seq") {
  Qa q;
  const std::string noseq = q.file("noseq.yaml", "language_model:\n  num_layers: 32\n  hidden_size: 4096\n"
                                                 "  num_attention_heads: 32\nmicro_batch_size: 1\n"
                                                 "global_batch_size: 64\nbf16: true\n");
  CHECK(refused({noseq, "--gpus", "16"}) ==
        "parplan: error: " + noseq + ": the sequence length is not in the file: give it there (or --seq N)\n");
  CHECK(import_json({noseq, "--gpus", "16", "--seq", "4096"})["plan"]["training"]["seq_len"] == 4096);
  const auto c = run_parplan({"check", "--from", noseq, "--gpus", "16", "--seq", "4096", "--tp", "4"}, {}, 60);
  CHECK(c.exit_code == 0);
  CHECK(c.out.starts_with("PASS " + noseq + ": peak "));
  const auto e = run_parplan({"export", "--from", noseq, "--gpus", "16", "--seq", "4096", "--to", "nemo"}, {}, 60);
  CHECK(e.exit_code == 0);
  CHECK(e.out.find("encoder_seq_length: 4096") != std::string::npos);
  const std::string ds = q.file("ds.json", "{\"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true}}");
  CHECK(import_json({ds, "--gpus", "8", "--model", "llama3-8b", "--seq", "2048"})["plan"]["training"]["seq_len"] == 2048);
}

TEST_CASE("import: torchtitan TOML dotted keys and integers with underscores") {
  Qa q;
  const auto j = import_json({q.file("dotted.toml", "model.name = \"llama3\"\nmodel.flavor = \"8B\"\n[training]\n"
                                                 "seq_len = 4_096\nlocal_batch_size = 2\n"),
                           "--gpus", "8"});
  CHECK(j["plan"]["model"]["name"] == "llama3-8b");
  CHECK(j["plan"]["training"]["seq_len"] == 4096);
  CHECK(j["from_file"]["--seq"]["origin"] == "training.seq_len (line 4)");
  // An underscore not between two digits is not a TOML number.
  const std::string bad = q.file("bad.toml", kLlama8b + "[training]\nseq_len = 4096_\n");
  CHECK(refused({bad, "--gpus", "8"}) == "parplan: error: " + bad +
                                             ": training.seq_len (line 5) takes -1 or a non-negative integer below "
                                             "10^18, not 4096_\n");
}

// torchtitan shards whenever cp > 1 (FSDP over the dp_shard x cp ranks): replicate R with shard 1 or -1 and cp 2 is
// HSDP with the cp ranks as the shard group (dp_replicate = dp), the same plan either way; with cp 1 both are DDP.
TEST_CASE("import: torchtitan replicate R with shard 1 or -1 imports the same, HSDP over cp when cp > 1") {
  Qa q;
  auto toml = [&](const std::string& name, const std::string& shard, int cp, int rep) {
    return q.file(name, kLlama8b + "[training]\nlocal_batch_size = 1\nseq_len = 8192\n[parallelism]\n"
                                   "data_parallel_replicate_degree = " + std::to_string(rep) + "\n" + shard +
                            "context_parallel_degree = " + std::to_string(cp) + "\n");
  };
  const auto one = import_json({toml("one.toml", "data_parallel_shard_degree = 1\n", 2, 128), "--gpus", "256"});
  const auto rest = import_json({toml("rest.toml", "data_parallel_shard_degree = -1\n", 2, 128), "--gpus", "256"});
  for (const auto* j : {&one, &rest}) {
    CHECK((*j)["plan"]["parallel"]["dp"] == 128);
    CHECK((*j)["plan"]["parallel"]["cp"] == 2);
    CHECK((*j)["plan"]["parallel"]["dp_replicate"] == 128);
    CHECK((*j)["plan"]["parallel"]["zero_stage"] == 3);
  }
  CHECK(one["plan"]["parallel"] == rest["plan"]["parallel"]);
  // Without replicas, shard 1 with cp 2 is FSDP over the 2 cp ranks.
  const auto fsdp_cp = import_json({toml("cp.toml", "data_parallel_shard_degree = 1\n", 2, 1), "--gpus", "2"});
  CHECK(fsdp_cp["plan"]["parallel"]["zero_stage"] == 3);
  // cp 1: shard 1 and shard -1 leaving one rank are both DDP.
  const auto ddp1 = import_json({toml("d1.toml", "data_parallel_shard_degree = 1\n", 1, 256), "--gpus", "256"});
  const auto ddp2 = import_json({toml("d2.toml", "data_parallel_shard_degree = -1\n", 1, 256), "--gpus", "256"});
  for (const auto* j : {&ddp1, &ddp2}) {
    CHECK((*j)["plan"]["parallel"]["dp"] == 256);
    CHECK((*j)["plan"]["parallel"]["zero_stage"] == 0);
    CHECK_FALSE((*j)["plan"]["parallel"].contains("dp_replicate"));
  }
  // The native CLI: dp_replicate = dp with cp 2 is HSDP over the cp ranks; with cp 1 it is refused.
  const auto e = run_parplan({"estimate", "--model", "llama3-8b", "--gpus", "16", "--cp", "8", "--zero", "3",
                              "--dp-replicate", "2", "--json"}, {}, 60);
  CHECK(e.exit_code == 0);
  CHECK(nlohmann::json::parse(e.out)["time"]["hsdp"]["shard_group"] == 8);
}

// NeMo passes Megatron-Core's DDP and optimizer config: num_distributed_optimizer_instances (model.optim., model., or
// NeMo 2's trainer.strategy.ddp.) is read as Megatron-LM's flag, HSDP replicas of the distributed optimizer.
TEST_CASE("import: NeMo num_distributed_optimizer_instances is the distributed optimizer's HSDP replicas") {
  Qa q;
  const std::string head = "trainer:\n  devices: 8\n  num_nodes: 8\n  precision: bf16-mixed\n"
                           "model:\n  micro_batch_size: 1\n  global_batch_size: 64\n  tensor_model_parallel_size: 8\n"
                           "  encoder_seq_length: 4096\n  num_layers: 32\n  hidden_size: 4096\n"
                           "  num_attention_heads: 32\n";
  for (const std::string& tail :
       {std::string("  optim:\n    name: distributed_fused_adam\n    num_distributed_optimizer_instances: 4\n"),
        std::string("  num_distributed_optimizer_instances: 4\n  optim:\n    name: distributed_fused_adam\n")}) {
    CAPTURE(tail);
    const auto j = import_json({q.file("nemo.yaml", head + tail), "--model", "llama3-8b"});
    CHECK(j["plan"]["parallel"]["dp"] == 8);
    CHECK(j["plan"]["parallel"]["dp_replicate"] == 4);
    CHECK(j["plan"]["parallel"]["distributed_optimizer"] == true);
  }
}

// torchtitan replicates only FSDP: the export of a ZeRO-2 HSDP plan writes DDP over dp and warns naming the replicas.
TEST_CASE("export: torchtitan warns on the replicas of an HSDP plan it writes as DDP") {
  Qa q;
  const auto e = run_parplan({"estimate", "--model", "llama3-8b", "--gpus", "256", "--zero", "2", "--dp-replicate", "4",
                              "-o", (q.dir.path / "p.json").string()}, {}, 60);
  REQUIRE(e.exit_code == 0);
  const auto x = run_parplan({"export", "--plan", (q.dir.path / "p.json").string(), "--to", "torchtitan"}, {}, 60);
  CHECK(x.exit_code == 0);
  CHECK(x.err.find("--dp-replicate 4 (HSDP replicas of a plan that does not shard with FSDP") != std::string::npos);
}

// torchtitan takes -1 (the rest) for the shard degree only: a replicate degree of -1 is refused as below 1.
TEST_CASE("import: torchtitan's replicate degree -1 is refused as below 1, the shard degree's -1 is the rest") {
  Qa q;
  const std::string rep = q.file("rep.toml", kLlama8b + "[parallelism]\ndata_parallel_replicate_degree = -1\n");
  const std::string err = refused({rep, "--gpus", "8"});
  CHECK(err.find("data_parallel_replicate_degree (line 5) must be at least 1") != std::string::npos);
  CHECK(err.find("shard") == std::string::npos);
  const std::string shard = q.file("shard.toml", kLlama8b + "[parallelism]\ndata_parallel_shard_degree = 0\n");
  CHECK(refused({shard, "--gpus", "8"}).find("data_parallel_shard_degree (line 5) must be -1 (the GPUs left) or at "
                                              "least 1") != std::string::npos);
}
