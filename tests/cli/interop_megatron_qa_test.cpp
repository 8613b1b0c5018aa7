// The Megatron-LM launch-script reader on the scripts of the interop QA pass: impossible shapes refused naming the
// option, bash statements (an environment prefix, several on a line, conditionals), Megatron-LM's own argument rules
// (GQA only with --group-query-attention, vpp from the pp that runs), and the replacements of the command line.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/run_helper.hpp"

using parplan::test::import_json;
using parplan::test::run_parplan;
using parplan::test::ScratchDir;

namespace {

const std::string kDir = std::string(PARPLAN_TEST_DIR) + "/cli/data/interop/";
const std::string kShape = "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
                           "--global-batch-size 128 --bf16";

struct Script {
  ScratchDir dir;
  std::string path = (dir.path / "train.sh").string();
  explicit Script(const std::string& text) { parplan::test::write_text(path, "#!/bin/bash\n" + text); }
};

// Exit 2 with one line that holds `want`.
void refused(const std::vector<std::string>& args, const std::string& want) {
  const auto r = run_parplan(args, {}, 60);
  CAPTURE(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find(want) != std::string::npos);
  CHECK(r.err.find('\n') == r.err.size() - 1);
}

bool has_line(const nlohmann::json& lines, const std::string& want) {
  for (const auto& l : lines) {
    if (l.get<std::string>() == want) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("import: a model shape a Plan document could not hold is refused naming the script's option and line") {
  const std::pair<const char*, const char*> cases[] = {
      {"--num-attention-heads 0", "--num-attention-heads (line 3) is 0 (a model size is at least 1)"},
      {"--hidden-size 0", "--hidden-size (line 3) is 0 (a model size is at least 1)"},
      {"--ffn-hidden-size 0", "--ffn-hidden-size (line 3) is 0"},
      {"--num-layers 0", "--num-layers (line 3) is 0"},
      {"--vocab-size 0", "--vocab-size (line 3) is 0"},
      {"--kv-channels 0", "--kv-channels (line 3) is 0"},
      {"--group-query-attention --num-query-groups 0", "--num-query-groups (line 3) is 0"},
      {"--group-query-attention --num-query-groups 5", "--num-query-groups (line 3): 5 kv heads must divide the 32 heads"},
      {"--multi-latent-attention --kv-lora-rank 0", "--kv-lora-rank (line 3) is 0"},
      {"--num-experts 4 --moe-router-topk 8", "--moe-router-topk (line 3): top_k 8 exceeds the 4 experts"},
      {"--vocab-size 999999999999", "--vocab-size (line 3): 999999999999 is out of range"},
  };
  for (const auto& [extra, want] : cases) {
    CAPTURE(extra);
    // The shape options come after the base ones, so a valid size is not given twice.
    std::string base = "--seq-length 4096 --global-batch-size 128 --bf16";
    for (const char* opt : {"--num-layers 32", "--hidden-size 4096", "--num-attention-heads 32"}) {
      if (std::string(extra).find(std::string(opt).substr(0, std::string(opt).find(' '))) == std::string::npos) {
        base += std::string(" ") + opt;
      }
    }
    Script s("torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \\\n    " + base + " " + extra + "\n");
    refused({"import", s.path}, s.path + ": " + want);
    refused({"estimate", "--from", s.path}, want);  // was SIGFPE for heads 0
    refused({"check", "--from", s.path}, want);
  }
}

TEST_CASE("import: NeMo and nanotron shapes go through the same checks") {
  ScratchDir dir;
  const std::string nemo = (dir.path / "nemo.yaml").string(), nano = (dir.path / "nano.yaml").string();
  parplan::test::write_text(nemo, "trainer:\n  devices: 8\n  num_nodes: 1\n  precision: bf16\nmodel:\n"
                                  "  num_layers: 4\n  hidden_size: 1024\n  num_attention_heads: 0\n"
                                  "  encoder_seq_length: 2048\n  global_batch_size: 8\n");
  refused({"import", nemo}, nemo + ": model.num_attention_heads (line 8) is 0 (a model size is at least 1)");
  parplan::test::write_text(nano, "general:\n  project: x\nparallelism:\n  dp: 8\n  tp: 1\n  pp: 1\nmodel:\n"
                                  "  model_config:\n    num_hidden_layers: 4\n    hidden_size: 1024\n"
                                  "    num_attention_heads: 16\n    num_key_value_heads: 3\n    intermediate_size: 4096\n"
                                  "    vocab_size: 32000\ntokens:\n  sequence_length: 2048\n");
  refused({"import", nano}, nano + ": the model shape's kv_heads: 3 kv heads must divide the 16 heads");
}

TEST_CASE("import: a launch line with an environment prefix is the command; the prefix sets no variable") {
  Script s("GPUS_PER_NODE=8\nNNODES=2\nTP=4\n"
           "CUDA_DEVICE_MAX_CONNECTIONS=1 TP=2 torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \\\n"
           "    --tensor-model-parallel-size $TP " + kShape + "\n");
  const auto j = import_json({s.path});
  CHECK(j["plan"]["num_gpus"] == 16);
  CHECK(j["plan"]["parallel"]["tp"] == 4);  // bash expands $TP before the prefix applies
}

TEST_CASE("import: every assignment on a line is read (TP=1; PP=4 and A=1 B=2)") {
  Script s("PP=2\nTP=1; PP=4\nCP=1 EP=1\nexport X=8 Y=2\n"
           "torchrun --nproc_per_node $X --nnodes $Y pretrain_gpt.py --tensor-model-parallel-size $TP "
           "--pipeline-model-parallel-size $PP --context-parallel-size $CP --expert-model-parallel-size $EP " + kShape + "\n");
  const auto j = import_json({s.path});
  CHECK(j["plan"]["num_gpus"] == 16);
  CHECK(j["plan"]["parallel"]["pp"] == 4);
  CHECK(j["plan"]["parallel"]["tp"] == 1);
  CHECK(j["from_file"]["--pp"]["origin"] == "--pipeline-model-parallel-size (line 6)");
}

TEST_CASE("import: a value set only inside a conditional is refused naming it; a conditional the command does not use is skipped") {
  const std::string cmd = "torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py --tensor-model-parallel-size $TP " + kShape + "\n";
  {
    Script s("MODEL=8b\nTP=2\nif [ \"$MODEL\" = \"8b\" ]; then\n  TP=1\nelse\n  TP=8\nfi\n" + cmd);
    refused({"import", s.path}, "--tensor-model-parallel-size $TP (line 9) is $TP (set only inside the `if` on line 4, which "
                                "may not run): flatten the script or give --tp N");
    CHECK(import_json({s.path, "--tp", "1"})["plan"]["parallel"]["tp"] == 1);  // the command line gives it
  }
  {
    Script s("if [ -n \"$X\" ]; then TP=1; else TP=8; fi\n" + cmd);
    refused({"import", s.path}, "(set only inside the `if` on line 2, which may not run)");
  }
  {
    Script s("TP=2\ncase \"$M\" in\n  8b) TP=1 ;;\n  *) TP=8 ;;\nesac\n" + cmd);
    refused({"import", s.path}, "$TP (set only inside the `case` on line 3, which may not run)");
  }
  {
    Script s("TP=2\n[ -z \"$Y\" ] && TP=4\n" + cmd);
    refused({"import", s.path}, "$TP (set only after the `&&` on line 3, which may not run)");
  }
  {
    Script s("LAYERS=32\nfor L in 1 2; do LAYERS=$L; done\nTP=1\n"
             "torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size $TP --num-layers $LAYERS "
             "--hidden-size 4096 --num-attention-heads 32 --seq-length 4096\n");
    refused({"import", s.path}, "--num-layers $LAYERS (line 5) is $LAYERS (set only inside the `for` on line 3, which may "
                                "not run): flatten the script");
  }
  {
    Script s("ARGS=(--bf16)\nif [ -n \"$FP8\" ]; then\n  ARGS+=(--fp8-format hybrid)\nfi\n"
             "torchrun --nproc_per_node 8 pretrain_gpt.py \"${ARGS[@]}\" --num-layers 32 --hidden-size 4096 "
             "--num-attention-heads 32 --seq-length 4096\n");
    refused({"import", s.path}, "'$ARGS' (line 6) is $ARGS (set only inside the `if` on line 3, which may not run): "
                                "flatten the script");
  }
  {
    Script s("if true; then\n  " + cmd + "fi\n");
    refused({"import", s.path}, "pretrain_gpt.py (line 3) is inside the `if` on line 2, which may not run: flatten the "
                                "script to the command that runs");
  }
  {
    Script s("run() {\n  " + cmd + "}\nrun\n");
    refused({"import", s.path}, "pretrain_gpt.py (line 3) is inside the function run on line 2, which may not run");
  }
  {  // conditionals that set nothing the command reads
    Script s("TP=2\nif [ -d \"$CKPT\" ]; then echo resume; else OTHER=1; fi\nfor i in 1 2; do echo $i; done\n"
             "case \"$M\" in\n  a) echo a ;;\n  *) X=2 ;;\nesac\n" + cmd);
    const auto j = import_json({s.path});
    CHECK(j["plan"]["parallel"]["tp"] == 2);
    CHECK(j["ignored"].empty());
  }
}

TEST_CASE("import: --num-query-groups without --group-query-attention is multi-head attention, listed as ignored") {
  Script mha("torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --num-query-groups 8 " + kShape + "\n");
  const auto j = import_json({mha.path});
  CHECK(j["plan"]["model"]["kv_heads"] == 32);
  CHECK(has_line(j["ignored"], "--num-query-groups (line 2): read only with --group-query-attention (Megatron-LM's "
                               "attention is multi-head without it)"));
  Script gqa("torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --group-query-attention --num-query-groups 8 " +
             kShape + "\n");
  const auto g = import_json({gqa.path});
  CHECK(g["plan"]["model"]["kv_heads"] == 8);
  CHECK(g["ignored"].empty());
}

TEST_CASE("import: vpp from --num-layers-per-virtual-pipeline-stage uses the pp that runs, the command line's") {
  const auto j = import_json({kDir + "train_gpt_70b.sh", "--pp", "2"});
  CHECK(j["plan"]["parallel"]["pp"] == 2);
  CHECK(j["plan"]["parallel"]["vpp"] == 8);  // 80 / (2 x 5)
  CHECK(j["from_file"]["--vpp"]["origin"] ==
        "--num-layers-per-virtual-pipeline-stage (line 53), with --pp 2 from the command line");
  CHECK(import_json({kDir + "train_gpt_70b.sh"})["plan"]["parallel"]["vpp"] == 4);

  Script unset("torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py \\\n"
               "    --pipeline-model-parallel-size $PP --num-layers-per-virtual-pipeline-stage 4 " + kShape + "\n");
  refused({"import", unset.path}, "--pipeline-model-parallel-size $PP (line 3) is $PP, which the file does not set: set "
                                  "it in the file or give --pp N");
  CHECK(import_json({unset.path, "--pp", "4"})["plan"]["parallel"]["vpp"] == 2);  // 32 / (4 x 4), not 32 / (1 x 4)
  refused({"import", unset.path, "--pp", "3"}, "--num-layers-per-virtual-pipeline-stage (line 3), with --pp 3 from the "
                                               "command line: 32 layers do not split into pp 3 stages of chunks of 4");
  // The layout string is read against the command line's pp too.
  Script layout("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 14 --hidden-size 2048 --num-attention-heads 16 "
                "--seq-length 2048 --bf16 --pipeline-model-parallel-size 2 --global-batch-size 64 "
                "--pipeline-model-parallel-layout 'Et|(tt|)*6tL'\n");
  const auto l = import_json({layout.path, "--pp", "4"});
  CHECK(l["plan"]["parallel"]["vpp"] == 2);
  CHECK(l["plan"]["parallel"]["stage_layers"] == nlohmann::json::array({{1, 2}, {2, 2}, {2, 2}, {2, 1}}));
  // --model replaces the layers the chunks were counted in.
  refused({"import", kDir + "train_gpt_70b.sh", "--model", "llama3-8b"},
          "--num-layers-per-virtual-pipeline-stage (line 53) counts the file's 80 layers, which --model replaces: give --vpp N");
}

TEST_CASE("import: --no-gradient-accumulation-fusion is --no-fused-grad-accumulation") {
  Script s("torchrun --nproc_per_node 8 pretrain_gpt.py --no-gradient-accumulation-fusion " + kShape + "\n");
  const auto j = import_json({s.path});
  CHECK(j["plan"]["training"]["fused_grad_accumulation"] == false);
  CHECK(j["from_file"]["--no-fused-grad-accumulation"]["origin"] == "--no-gradient-accumulation-fusion (line 2)");
  CHECK(j["ignored"].empty());
}

TEST_CASE("import: torchrun's elastic --nnodes MIN:MAX is refused until --gpus gives the count") {
  Script s("torchrun --nproc_per_node 8 --nnodes 1:4 pretrain_gpt.py " + kShape + "\n");
  refused({"import", s.path}, "the launcher's GPU count is 1:4 (--nnodes, line 2: a range of nodes, known only at run "
                              "time), which the file does not set: set it in the file or give --gpus N");
  CHECK(import_json({s.path, "--gpus", "32"})["plan"]["num_gpus"] == 32);
}

TEST_CASE("import: every unset variable in an array gets the unset-variable error") {
  Script s("ARGS=(--tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP)\n"
           "torchrun --nproc_per_node 8 pretrain_gpt.py \"${ARGS[@]}\" " + kShape + "\n");
  refused({"import", s.path, "--tp", "2"}, "--pipeline-model-parallel-size $PP (line 2) is $PP, which the file does not "
                                           "set: set it in the file or give --pp N");
  const auto j = import_json({s.path, "--tp", "2", "--pp", "2"});
  CHECK(j["plan"]["parallel"]["pp"] == 2);
  CHECK(j["replaced"].size() == 2);
}

TEST_CASE("import: a shape option given twice with two values is refused naming both lines") {
  Script s("MODEL_ARGS=\"--num-layers 32 --hidden-size 4096 --num-attention-heads 32\"\n"
           "torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \\\n    $MODEL_ARGS \\\n"
           "    --seq-length 4096 --global-batch-size 128 --bf16 \\\n    --num-layers 80\n");
  refused({"import", s.path}, "--num-layers (line 4) says 32 but --num-layers (line 6) says 80: give one");
  Script same("torchrun --nproc_per_node 8 pretrain_gpt.py " + kShape + " --num-layers 32\n");
  CHECK(import_json({same.path})["plan"]["model"]["layers"] == 32);
}

TEST_CASE("import, check, estimate: --model beside a file is listed as replacing the file's model") {
  const auto r = run_parplan({"import", kDir + "llama3_8b.toml", "--gpus", "32", "--model", "llama3-70b"}, {}, 60);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("--model llama3-8b  <-") == std::string::npos);
  CHECK(r.out.find("replaced by the command line (1):\n  --model llama3-70b (command line) replaces llama3-8b from "
                   "model.name (line 7) / model.flavor (line 8)\n") != std::string::npos);
  Script s("torchrun --nproc_per_node 8 pretrain_gpt.py " + kShape + "\n");
  const auto m = run_parplan({"import", s.path, "--model", "llama3-8b"}, {}, 60);
  CHECK(m.exit_code == 0);
  CHECK(m.out.find("model shape  <-") == std::string::npos);
  CHECK(m.out.find("--model llama3-8b (command line) replaces the file's model shape (32 layers, hidden 4096) from "
                   "--num-layers / --hidden-size / --num-attention-heads") != std::string::npos);
  for (const char* cmd : {"check", "estimate"}) {
    const auto c = run_parplan({cmd, "--from", s.path, "--model", "llama3-8b"}, {}, 60);
    CAPTURE(c.err);
    CHECK(c.exit_code == 1);  // priced: llama3-8b with Adam on 8 GPUs without a sharded optimizer does not fit
    CHECK(c.err.find("1 replaced by the command line") != std::string::npos);
  }
}

TEST_CASE("import: small errors name the script's option, and shell words after the command are not options") {
  Script mb("torchrun --nproc_per_node 8 pretrain_gpt.py " + kShape + " --micro-batch-size 0\n");
  refused({"import", mb.path}, "--micro-batch: Value 0 not in range 1 to 100000000 (from --micro-batch-size (line 2))");
  refused({"import", "/nonexistent/train.sh"}, "import: cannot read '/nonexistent/train.sh'");
  Script noise("torchrun --nproc_per_node 8 pretrain_gpt.py " + kShape + " \\\n"
               "    --rampup-batch-size 16 16 5859375 2>&1 | tee train.log\n");
  const auto j = import_json({noise.path});
  CHECK(j["ignored"] == nlohmann::json::array({"--rampup-batch-size 16 16 5859375 (line 3): not modelled"}));
  Script redirect("torchrun --nproc_per_node 8 pretrain_gpt.py " + kShape + " > train.log 2> err.log &\nwait\n");
  CHECK(import_json({redirect.path})["ignored"].empty());
}

TEST_CASE("import: Megatron-DeepSpeed's --zero-stage 3 gathers per submodule, as the DeepSpeed import reads stage 3") {
  Script s("torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py " + kShape + " --zero-stage 3\n");
  const auto j = import_json({s.path});
  CHECK(j["plan"]["parallel"]["zero_stage"] == 3);
  CHECK(j["plan"]["parallel"]["zero3_gather_unit"] == "linear");
  CHECK(j["from_file"]["--zero3-gather-unit"]["origin"] ==
        "--zero-stage (line 2) (Megatron-DeepSpeed gathers per submodule)");
  Script one("torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py " + kShape + " --zero-stage 1\n");
  CHECK(import_json({one.path})["plan"]["parallel"]["zero3_gather_unit"] == "layer");
}
