// Published-run validation: field mapping, free-text rules, skip reasons, strict schema, and the accuracy regression
// on the vendored file (validation/published-runs.json).
#include <doctest/doctest.h>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "planner/cost/cost_model.hpp"
#include "planner/cost/layout.hpp"
#include "planner/spec/config.hpp"
#include "planner/spec/error.hpp"
#include "planner/validation/validation.hpp"
#include "planner/vendored_runs.hpp"

using namespace parplan;

namespace {

const ProfileSet& profiles() {
  static const ProfileSet p = ProfileSet::embedded();
  return p;
}

nlohmann::json base_row() {
  return nlohmann::json::parse(R"J({
    "id": "r1", "model": "GPT", "run_type": "benchmark",
    "source": "Korthikanti et al. 2022, 'Reducing Activation Recomputation' (arXiv:2205.05198)",
    "source_locator": "Table 5",
    "arch": {"layers": 96, "hidden": 12288, "heads": 96, "kv_heads": 96, "ffn": 49152, "ffn_type": "GeLU MLP (4h)",
             "vocab": 51200, "seq_len": 2048, "params_B": 175, "arch_notes": null},
    "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 64, "gpus_per_node": 8,
                 "intra_node": "NVLink3 + NVSwitch", "inter_node_per_node": "8 x 200 Gb/s HDR InfiniBand = 1.6 Tb/s",
                 "system": "Selene"},
    "parallel": {"tp": 8, "pp": 8, "dp": 1, "cp": 1, "ep": null, "sequence_parallel": true,
                 "vpp_chunks_per_stage": 3, "zero_stage": 0, "fsdp": null, "micro_batch": 1,
                 "global_batch_seqs": 64, "grad_accum": 64, "parallel_notes": null},
    "precision": "mixed precision (16-bit; paper does not say FP16 vs BF16)",
    "recompute": "selective + sequence parallelism",
    "measured": {"tflops_per_gpu": null, "tflops_basis": null, "mfu": 0.514, "hfu": 0.528, "pct_of_peak": null,
                 "iter_time_s": 13.75, "tokens_per_s_total": null, "tokens_per_s_per_gpu": null,
                 "samples_per_s": null, "aggregate_pflops": null, "memory_per_gpu_GB": 60.5, "other": null},
    "derived": {"tokens_per_s_total": 9533},
    "confidence": "high", "notes": null})J");
}

MappedRun map_one(const nlohmann::json& row) {
  const nlohmann::json arr = nlohmann::json::array({row});
  auto runs = load_published_runs(arr.dump(), "runs.json", profiles());
  REQUIRE(runs.size() == 1);
  return runs.front();
}

bool has_reason(const MappedRun& r, std::string_view what) { return r.skip_reason().find(what) != std::string::npos; }
bool has_note(const MappedRun& r, std::string_view what) {
  return std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) { return n.find(what) != std::string::npos; });
}

}  // namespace

TEST_CASE("validation: every field of a Korthikanti row maps onto the plan") {
  const MappedRun r = map_one(base_row());
  REQUIRE(r.scored());
  const Plan& p = *r.plan;
  CHECK(r.source_key == "Korthikanti et al. 2022");
  CHECK(r.gpu_type == "A100-SXM4-80GB");
  CHECK(p.model.layers == 96);
  CHECK(p.model.hidden == 12288);
  CHECK(p.model.heads == 96);
  CHECK(p.model.kv_heads == 96);
  CHECK(p.model.ffn_hidden == 49152);
  CHECK(p.model.ffn_type == FfnType::gelu);
  CHECK(p.model.vocab == 51200);
  CHECK(p.seq_len() == 2048);
  CHECK(p.cluster.name == "dgx-a100");
  CHECK(p.num_gpus == 64);
  CHECK(p.parallel.tp == 8);
  CHECK(p.parallel.pp == 8);
  CHECK(p.parallel.dp == 1);
  CHECK(p.parallel.vpp == 3);
  CHECK(p.parallel.schedule == Schedule::interleaved);
  CHECK(p.parallel.sequence_parallel);
  CHECK(p.parallel.micro_batch == 1);
  CHECK(p.parallel.num_microbatches == 64);
  CHECK(p.parallel.recompute == Recompute::selective);
  CHECK(p.parallel.zero_stage == 0);
  CHECK(p.training.precision == Precision::fp16);
  CHECK_FALSE(p.training.grad_fp32);
  CHECK(p.training.attention == AttentionKernel::unfused);  // source year 2022
  CHECK(p.parallel.async_tp_backward);                      // source year 2022: asynchronous TP all-reduce
  CHECK(p.training.fused_grad_accumulation);                // source year 2022: fused weight-gradient accumulation
  CHECK(p.parallel.overlap_dp_comm);
  CHECK_FALSE(p.parallel.overlap_tp_comm);
  CHECK(p.training.global_batch == 64);
  REQUIRE(r.measured_step_time_s);
  CHECK(*r.measured_step_time_s == doctest::Approx(13.75));
  CHECK_FALSE(r.step_time_derived);
  REQUIRE(r.measured_memory_bytes);
  CHECK(*r.measured_memory_bytes == doctest::Approx(60.5e9));
}

TEST_CASE("validation: a 2021 Megatron-LM row maps to blocking TP backward and a separate accumulation pass") {
  nlohmann::json row = base_row();
  row["source"] = "Narayanan et al. 2021, 'Efficient Large-Scale Language Model Training' (SC21)";
  const MappedRun r = map_one(row);
  REQUIRE(r.scored());
  CHECK_FALSE(r.plan->parallel.async_tp_backward);
  CHECK_FALSE(r.plan->training.fused_grad_accumulation);
  bool noted = false;
  for (const std::string& n : r.notes) noted = noted || n == "gradient accumulation: separate pass (source year 2021)";
  CHECK(noted);
  // The same row from 2022 is fused, and the separate pass is what makes the 2021 prediction slower.
  const MappedRun r22 = map_one(base_row());
  CHECK(r22.plan->training.fused_grad_accumulation);
  Plan fused = *r.plan;
  fused.training.fused_grad_accumulation = true;
  CHECK(estimate(*r.plan).time.step_s > estimate(fused).time.step_s);
}

TEST_CASE("validation: FSDP, SwiGLU, bf16, derived time, zero_stage from fsdp, flash from the notes") {
  nlohmann::json row = base_row();
  row["source"] = "mosaicml/llm-foundry scripts/train/benchmarking/README.md";
  row["arch"]["ffn_type"] = "SwiGLU";
  row["arch"]["kv_heads"] = 8;
  row["arch"]["arch_notes"] = "FlashAttention (attn_impl: flash)";
  row["hardware"]["gpu"] = "H100 (SXM, 80GB)";
  row["parallel"] = {{"tp", 1}, {"pp", 1}, {"dp", 64}, {"zero_stage", nullptr}, {"fsdp", true}, {"micro_batch", 2},
                     {"global_batch_seqs", 256}, {"sequence_parallel", nullptr}};
  row["precision"] = "amp_bf16";
  row["recompute"] = "full activation checkpointing";
  row["measured"]["iter_time_s"] = nullptr;
  row["derived"] = {{"iter_time_s", 2.5}, {"iter_time_formula", "t = tokens / throughput"}};
  const MappedRun r = map_one(row);
  REQUIRE(r.scored());
  const Plan& p = *r.plan;
  CHECK(r.source_key == "mosaicml/llm-foundry");
  CHECK(r.gpu_type == "H100-SXM5-80GB");
  CHECK(p.cluster.name == "dgx-h100");
  CHECK(p.model.ffn_type == FfnType::swiglu);
  CHECK(p.model.kv_heads == 8);
  CHECK(p.parallel.zero_stage == 3);
  CHECK(p.parallel.schedule == Schedule::one_f_one_b);
  CHECK(p.parallel.num_microbatches == 2);
  CHECK(p.parallel.recompute == Recompute::full);
  CHECK(p.training.precision == Precision::bf16);
  CHECK_FALSE(p.training.grad_fp32);  // FSDP reduces in the training dtype
  CHECK_FALSE(p.parallel.fsdp2);      // llm-foundry's FSDP (2023) is FSDP1: flat parameters, no per-parameter copies
  CHECK(p.training.attention == AttentionKernel::flash);
  CHECK(r.step_time_derived);
  CHECK(*r.measured_step_time_s == doctest::Approx(2.5));
  // torchtitan's FSDP2 reduces in fp32 (MixedPrecisionPolicy reduce_dtype = training.mixed_precision_reduce, default
  // float32), as torchao's benchmarks on it do; the torchtitan importer assumes the same default.
  for (const char* source : {"pytorch/torchtitan docs/performance.md", "pytorch/ao torchtitan-based float8 benchmark"}) {
    row["source"] = source;
    CAPTURE(source);
    CHECK(map_one(row).plan->training.grad_fp32);
    CHECK(map_one(row).plan->parallel.fsdp2);  // torchtitan shards with FSDP2 (zero3.hpp fsdp2_copy_bytes)
  }
}

TEST_CASE("validation: free-text rules") {
  FfnType f{};
  CHECK(map_ffn_type("GeLU MLP (expansion 4)", f));
  CHECK(f == FfnType::gelu);
  CHECK(map_ffn_type("ReLU MLP (4h)", f));
  CHECK(f == FfnType::gelu);
  CHECK(map_ffn_type("SwiGLU (2/3*4h)", f));
  CHECK(f == FfnType::swiglu);
  for (const char* gated : {"GLU", "Swish-GLU", "ReGLU"}) {  // any GLU: three matrices
    f = FfnType::gelu;
    CHECK(map_ffn_type(gated, f));
    CHECK(f == FfnType::swiglu);
  }
  CHECK_FALSE(map_ffn_type("mixture", f));
  CHECK_FALSE(map_ffn_type("SiLU", f));  // gated or not is not said

  Precision p{};
  CHECK(map_precision("FP8 (Transformer Engine)", p));
  CHECK(p == Precision::fp8);
  CHECK(map_precision("BF16 (--bf16, BF16Optimizer)", p));
  CHECK(p == Precision::bf16);
  CHECK(map_precision("FP16 mixed precision (--fp16)", p));
  CHECK(p == Precision::fp16);
  CHECK(map_precision("mixed precision (16-bit)", p));
  CHECK(p == Precision::fp16);
  p = Precision::bf16;
  CHECK(map_precision("mixed precision (16-bit; paper does not say FP16 vs BF16)", p));
  CHECK(p == Precision::fp16);
  p = Precision::bf16;
  CHECK(map_precision("mixed precision", p));  // no dtype named: the 16-bit rule
  CHECK(p == Precision::fp16);
  CHECK(map_precision("BF16 mixed precision", p));
  CHECK(p == Precision::bf16);
  CHECK_FALSE(map_precision("not stated (BF16 basis inferred)", p));
  p = Precision::bf16;
  CHECK_FALSE(map_precision("NVFP4 (BF16 for the last layers)", p));  // not read as bf16
  CHECK(p == Precision::bf16);
  CHECK(names_sub_fp8("NVFP4"));
  CHECK(names_sub_fp8("MXFP4 / MXFP6 GEMMs"));
  CHECK(names_sub_fp8("fp4"));
  CHECK_FALSE(names_sub_fp8("BF16 with FP64 reductions"));  // fp64 names no fp6 format
  CHECK_FALSE(names_sub_fp8("MXFP8 (--fp8-recipe mxfp8 e4m3)"));

  Recompute rc{};
  CHECK(map_recompute("full (--checkpoint-activations, every layer)", rc));
  CHECK(rc == Recompute::full);
  CHECK(map_recompute("selective + sequence parallelism", rc));
  CHECK(rc == Recompute::selective);
  CHECK(map_recompute("full activation checkpointing", rc));
  CHECK(rc == Recompute::full);
  CHECK(map_recompute("activation checkpointing", rc));
  CHECK(rc == Recompute::full);
  CHECK(map_recompute("none", rc));
  CHECK(rc == Recompute::none);
  rc = Recompute::full;
  CHECK(map_recompute("No", rc));
  CHECK(rc == Recompute::none);
  CHECK_FALSE(map_recompute("-", rc));  // a table's blank: unstated (validation.cpp states_nothing), not "none"
  for (const char* op : {"selective per-op activation checkpointing (per-op SAC)", "selective op AC",
                         "selective activation checkpointing (preset: selective_ac_option='op', per-op SAC)"}) {
    CHECK(map_recompute(op, rc));
    CHECK(rc == Recompute::selective_op);
  }
  CHECK_FALSE(map_recompute("partial checkpointing (saves expensive activations)", rc));
  // torchtitan's layer-wise selective AC: full recompute of every 2nd layer (validation.cpp sets recompute_layers).
  CHECK(map_recompute("selective layer AC", rc));
  CHECK(rc == Recompute::full);
  CHECK(names_layer_ac("selective layer AC"));
  CHECK_FALSE(names_layer_ac("selective op AC"));

  // Megatron-Core's --recompute-modules as the rows state them.
  std::vector<std::string> rc_notes;
  CHECK(to_string(map_recompute_modules("selective: norm, act (layernorm, moe_act)", &rc_notes)) == "layernorm,moe_act");
  CHECK(to_string(map_recompute_modules("selective: norm, act, shared_expert")) == "layernorm,moe_act,shared_experts");
  CHECK(to_string(map_recompute_modules("selective: mla_up_proj, mlp")) == "mla_up_proj,mlp");
  CHECK(map_recompute_modules("selective + sequence parallelism").is_default());  // lists none: {core_attn}
  CHECK(map_recompute_modules("selective layer AC").is_default());
  // Modules named in prose (the DeepSeek-V3 report Sec. 3.2.3): Megatron-Core's selective granularity over them.
  const char* deepseek = "RMSNorm and MLA up-projection recomputed in backward (Sec. 3.2.3)";
  CHECK(map_recompute(deepseek, rc));
  CHECK(rc == Recompute::selective);
  rc_notes.clear();
  CHECK(to_string(map_recompute_modules(deepseek, &rc_notes)) == "layernorm,mla_up_proj");
  REQUIRE(rc_notes.size() == 1);
  CHECK(rc_notes[0] == "recompute modules layernorm,mla_up_proj (named in the text)");
  CHECK_FALSE(map_recompute("RMSNorm and MLA up-projection", rc));  // names modules, not that they are recomputed
  rc_notes.clear();
  CHECK(to_string(map_recompute_modules(
            "selective: mla_up_proj; fine-grained activation offloading (expert_fc1); optimizer-state offload", &rc_notes)) ==
        "mla_up_proj");
  // The fine-grained offloading clause is map_offload_modules()'s and the optimizer offload map_optimizer_offload()'s:
  // nothing is left unmodelled.
  REQUIRE(rc_notes.size() == 1);
  CHECK(rc_notes[0] == "recompute modules mla_up_proj");
  CHECK(map_optimizer_offload("selective: mla_up_proj; fine-grained activation offloading (expert_fc1); optimizer-state offload"));
  for (const char* text : {"--optimizer-cpu-offload --optimizer-offload-fraction 1.0", "Optimizer CPU offload",
                           "ZeRO-2 with offload_optimizer to CPU", "optimizer state offload; selective: mlp"}) {
    CAPTURE(text);
    CHECK(map_optimizer_offload(text));
  }
  CHECK_FALSE(map_optimizer_offload("fine-grained activation offloading (expert_fc1)"));
  CHECK_FALSE(map_optimizer_offload("distributed optimizer"));
  rc_notes.clear();
  CHECK(to_string(map_recompute_modules("optimizer state offload; selective: mlp; paged stash", &rc_notes)) == "mlp");
  REQUIRE(rc_notes.size() == 2);
  CHECK(rc_notes[1] == "recompute: 'paged stash' not modelled (priced without it)");
  // Megatron-Core's fine-grained activation offloading (--offload-modules) as the rows state it, beside the recompute
  // modules, which still read from the "selective:" list.
  const char* qwen3 = "selective: moe_act, layernorm; fine-grained activation offloading (expert_fc1, moe_act)";
  rc_notes.clear();
  CHECK(to_string(map_recompute_modules(qwen3, &rc_notes)) == "layernorm,moe_act");
  REQUIRE(rc_notes.size() == 1);  // nothing left unmodelled
  CHECK(to_string(map_offload_modules(qwen3, &rc_notes)) == "expert_fc1,moe_act");
  CHECK(rc_notes.back() == "offload modules expert_fc1,moe_act (fine-grained activation offloading)");
  CHECK(to_string(map_offload_modules(
            "selective: mla_up_proj; fine-grained activation offloading (expert_fc1); optimizer-state offload")) ==
        "expert_fc1");
  CHECK(map_offload_modules("selective: moe_act, layernorm").empty());
  rc_notes.clear();
  CHECK(to_string(map_offload_modules("Fine-grained activation offloading (core_attn, expert_fc1)", &rc_notes)) ==
        "expert_fc1");
  REQUIRE(rc_notes.size() == 2);
  CHECK(rc_notes[1] == "offload modules: 'core_attn' not modelled (priced without it)");
  rc_notes.clear();
  CHECK(map_recompute_modules("selective: everything", &rc_notes).is_default());
  REQUIRE(rc_notes.size() == 2);
  CHECK(rc_notes[1] == "recompute: 'everything' names no recompute module, ignored");

  CHECK(map_gpu("H100 (SXM, 80GB presumed)", profiles()) == "H100-SXM5-80GB");
  CHECK(map_gpu("H100-SXM 80GB HBM3 (700 W)", profiles()) == "H100-SXM5-80GB");
  CHECK(map_gpu("A100-80GB", profiles()) == "A100-SXM4-80GB");
  CHECK(map_gpu("A100-40GB", profiles()) == "A100-SXM4-40GB");
  CHECK(map_gpu("a100", profiles()) == "A100-SXM4-80GB");  // a profile alias
  std::string why;
  CHECK(map_gpu("A100-class SXM", profiles(), &why).empty());
  CHECK(why.find("40 or 80 GB") != std::string::npos);
  CHECK(map_gpu("H100 PCIe", profiles(), &why).empty());
  CHECK(why.find("PCIe/NVL variant") != std::string::npos);
  CHECK(map_gpu("H100 NVL 94GB", profiles(), &why).empty());
  CHECK(why.find("PCIe/NVL variant") != std::string::npos);
  // The 96 GB HBM2e, 500 W H100 SXM (torchtitan's Grand Teton H100s): NVL appears only as the bound of its peak.
  CHECK(map_gpu("H100 SXM 96GB HBM2e (500 W power limit; lower-TDP variant, between SXM and NVL per torchtitan footnote)",
                profiles()) == "H100-SXM5-96GB-HBM2e");
  CHECK(map_gpu("H100 SXM HBM2e 94/95 GB, lower-TDP variant ('between SXM and NVL'; exact peak unknown per torchtitan "
                "footnote)",
                profiles()) == "H100-SXM5-96GB-HBM2e");
  CHECK(map_gpu("h100-96gb", profiles()) == "H100-SXM5-96GB-HBM2e");  // an alias
  // "NVLink" is no NVL variant: the H800 text names its link.
  CHECK(map_gpu("H800 (SXM, NVLink 160 GB/s)", profiles()) == "H800");
  CHECK(map_gpu("AMD MI300X", profiles()) == "MI300X");
  CHECK(map_gpu("MI300X", profiles()) == "MI300X");
  CHECK(map_gpu("B300", profiles()) == "B300");
  CHECK(map_gpu("HGX B300", profiles()) == "B300");
  CHECK(map_gpu("AMD MI250X", profiles(), &why).empty());
  CHECK(why.find("unknown GPU") != std::string::npos);
  // Grace-Blackwell racks: "GB200" holds "b200" and "NVL72" holds "nvl", so these come first.
  CHECK(map_gpu("NVIDIA GB200 NVL72", profiles()) == "GB200");
  CHECK(map_gpu("GB300 (Blackwell Ultra)", profiles()) == "GB300");
  CHECK(map_gpu("B200 (HGX, 1000 W)", profiles()) == "B200");
  // A power limit without its wattage: the clocks, and so the peak, are unknown (torchao's B200 table).
  CHECK(map_gpu("B200 (power limited; limit not stated)", profiles(), &why).empty());
  CHECK(why.find("power limit it does not state in watts") != std::string::npos);
  CHECK(map_gpu("H100 SXM (power-capped)", profiles(), &why).empty());
  // A wattage below the board's own (B200: 1000 W) runs at clocks no profile holds; at it, the profile.
  CHECK(map_gpu("B200 (power limit 750W)", profiles(), &why).empty());
  CHECK(why.find("power limit no profile describes") != std::string::npos);
  CHECK(map_gpu("B200 (power limit 1000 W)", profiles()) == "B200");
  CHECK(map_gpu("H100 SXM5 96GB HBM2e (500 W power limit)", profiles()) == "H100-SXM5-96GB-HBM2e");
  // Grace Hopper and the 94 / 96 GB H100s other than the HBM2e SXM have no profile (GH200 holds "h200").
  CHECK(map_gpu("GH200 96GB", profiles(), &why).empty());
  CHECK(why.find("GH200") != std::string::npos);
  CHECK(map_gpu("H100 94GB", profiles(), &why).empty());
  CHECK(map_gpu("H100 SXM 96GB", profiles(), &why).empty());
  CHECK(map_gpu("NVIDIA H100 80GB HBM3", profiles()) == "H100-SXM5-80GB");
  // The HGX Blackwell boards' NVLink domain in their names is no PCIe NVL card.
  CHECK(map_gpu("HGX B200 NVL8", profiles()) == "B200");
  CHECK(map_gpu("HGX B300 NVL16", profiles()) == "B300");
  CHECK(map_gpu("H200 NVL", profiles(), &why).empty());

  CHECK(inter_node_Bps_per_gpu("8 x 200 Gb/s HDR InfiniBand (Mellanox) = 1.6 Tb/s", 8) == doctest::Approx(25e9));
  CHECK(inter_node_Bps_per_gpu("RoCE, 400 Gb/s per GPU (8 x 400 Gb/s per server)", 8) == doctest::Approx(50e9));
  CHECK(inter_node_Bps_per_gpu("1600 Gb/s node-node (RoCE)", 8) == doctest::Approx(25e9));
  // A capital B is bytes (the Megatron-Core MoE ModelZoo table: "8x50 GB/s (8x400 Gb/s)" per node = 50 GB/s per GPU).
  CHECK(inter_node_Bps_per_gpu("InfiniBand 8x50 GB/s (8x400 Gb/s)", 8) == doctest::Approx(50e9));
  // Vendor tables' other spellings of 8 NICs of 400 Gb/s on an 8-GPU node: 50 GB/s per GPU each.
  for (const char* text : {"8x ConnectX-7 400Gb/s", "8 \xc3\x97 400 Gb/s InfiniBand", "400 Gb/s NDR per GPU",
                           "400 Gb/s/GPU", "NDR 400 Gb/s x 8", "InfiniBand NDR 400G x8", "RoCE 8x400G"}) {
    CAPTURE(text);
    CHECK(inter_node_Bps_per_gpu(text, 8) == doctest::Approx(50e9));
  }
  // An NVLink figure is the scale-up domain's, not the inter-node network's.
  CHECK(inter_node_Bps_per_gpu("NVLink 5 (1.8 TB/s per GPU) within the rack; 4 x 800 Gb/s IB", 4) ==
        doctest::Approx(100e9));
  CHECK(inter_node_Bps_per_gpu("InfiniBand (50 GB/s per GPU per report)", 8) == doctest::Approx(50e9));
  // Omni-Path without a figure: 100 Gb/s per link (the only generation shipped), 4 links per 8-GPU node.
  CHECK(inter_node_Bps_per_gpu("4 x Omni-Path (OPA) links; per-link speed not stated", 8) == doctest::Approx(6.25e9));
  CHECK(inter_node_Bps_per_gpu("Omni-Path", 8) == doctest::Approx(100e9 / 8 / 8));
  CHECK(inter_node_Bps_per_gpu("Ethernet, speed not stated", 8) == 0.0);
  // A port speed written "400G" is Gb/s: four NDR ports on an 8-GPU node, 25 GB/s per GPU. A G inside a word
  // ("400GbE") is not read as one.
  CHECK(inter_node_Bps_per_gpu("4x NDR 400G (one per 2 GPUs)", 8) == doctest::Approx(25e9));
  CHECK(inter_node_Bps_per_gpu("400GbE RoCE", 8) == 0.0);
  // Fuzz finding (2026-11-22): a unit at the very end of the text ("= 1.6 Tb/s") read past the end.
  CHECK(inter_node_Bps_per_gpu("4 x 200 Gb/non-s HDR InfiniBand = 1.6 Tb/s", 8) == doctest::Approx(25e9));
  CHECK(inter_node_Bps_per_gpu("1.6 Tb/s", 8) == doctest::Approx(25e9));
  CHECK(std::isfinite(inter_node_Bps_per_gpu(std::string(400, '9') + " x 200 Gb/s", 8)));
  // A digit run longer than int64 in a GPU name is capped, not overflowed (UBSan).
  CHECK(map_gpu("A100 99999999999999999999999 GB", profiles(), &why).empty());

  CHECK(map_attention("Narayanan et al. 2021 (arXiv:2104.04473)", "") == AttentionKernel::unfused);
  CHECK(map_attention("Llama Team, AI@Meta 2024", "") == AttentionKernel::flash);
  CHECK(map_attention("mosaicml/llm-foundry", "ALiBi, FlashAttention") == AttentionKernel::flash);
  CHECK(map_attention("bigscience-workshop/bigscience", "Megatron-DeepSpeed; ZeRO-1") == AttentionKernel::unfused);
  // The Zero Bubble fork (Megatron-LM 2023, no --use-flash-attn) is unfused whatever the source's year says; the
  // same source without the fork named falls to the year rule (2024: flash).
  const std::string zb_source = "Qi, Wan, Huang, Lin (Sea AI Lab), 'Zero Bubble Pipeline Parallelism', ICLR 2024";
  CHECK(map_attention(zb_source, "Megatron-LM fork (sail-sg/zero-bubble-pipeline-parallelism).") ==
        AttentionKernel::unfused);
  CHECK(map_attention(zb_source, "") == AttentionKernel::flash);
  // Backward TP collectives: blocking before Megatron-LM's asynchronous all-reduce (2021 sources, Megatron-DeepSpeed).
  std::string note;
  CHECK_FALSE(map_async_tp_backward("Narayanan et al. 2021 (arXiv:2104.04473)", "", &note));
  CHECK(note.find("blocking") != std::string::npos);
  CHECK(map_async_tp_backward("Korthikanti et al. 2022 (arXiv:2205.05198)", ""));
  CHECK_FALSE(map_async_tp_backward("bigscience-workshop/bigscience", "Megatron-DeepSpeed; BF16Optimizer"));
  CHECK(map_async_tp_backward("mosaicml/llm-foundry", "FSDP"));
  // torchtitan's DTensor TP: every collective an autograd node, whatever the year (its async TP is a separate rule).
  note.clear();
  CHECK_FALSE(map_async_tp_backward("pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md", "", &note));
  CHECK(note.find("DTensor") != std::string::npos);
  CHECK_FALSE(map_async_tp_backward("pytorch/ao torchtitan-based float8 benchmark", "FSDP2"));
  // torchtitan's DTensor collectives on the sequence dim 1 copy the whole tensor; Megatron's dim-0 ones do not.
  note.clear();
  CHECK(map_tp_collective_copies("pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md", "", &note));
  CHECK(note.find("dim 1") != std::string::npos);
  CHECK_FALSE(map_tp_collective_copies("Korthikanti et al. 2022 (arXiv:2205.05198)", ""));
  CHECK_FALSE(map_tp_collective_copies("NVIDIA/Megatron-LM", "Megatron-Core"));
  // Gradient accumulation: a separate pass per microbatch before Megatron-LM's fused weight-gradient GEMM (2021
  // sources, Megatron-DeepSpeed); fused for 2022+ sources and when no year is stated.
  note.clear();
  CHECK_FALSE(map_grad_accumulation_fusion("Narayanan et al. 2021 (arXiv:2104.04473)", "", &note));
  CHECK(note == "gradient accumulation: separate pass (source year 2021)");
  CHECK(map_grad_accumulation_fusion("Korthikanti et al. 2022 (arXiv:2205.05198)", "", &note));
  CHECK(note == "gradient accumulation: fused into the weight-gradient GEMM (source year 2022)");
  CHECK_FALSE(map_grad_accumulation_fusion("bigscience-workshop/bigscience", "Megatron-DeepSpeed; BF16Optimizer", &note));
  CHECK(note.find("Megatron-DeepSpeed") != std::string::npos);
  CHECK(map_grad_accumulation_fusion("mosaicml/llm-foundry", "FSDP", &note));
  CHECK(note.find("no year stated") != std::string::npos);

  // Communication overlap stated in the notes.
  std::vector<std::string> notes;
  ParallelConfig pc;
  map_comm_overlap("DDP impl=local; interleaved schedule", "", pc, &notes);
  CHECK_FALSE(pc.overlap_dp_comm);
  CHECK(notes.size() == 1);
  pc = ParallelConfig{};
  map_comm_overlap("DDP impl=torch; non-interleaved 1F1B", "", pc, nullptr);
  CHECK(pc.overlap_dp_comm);
  map_comm_overlap("batch kept at 280", "gradient all-reduce NOT overlapped.", pc, nullptr);
  CHECK_FALSE(pc.overlap_dp_comm);
  pc = ParallelConfig{};
  pc.pp = 12;
  pc.tp = 4;
  map_comm_overlap("Megatron-DeepSpeed; ZeRO-1", "", pc, nullptr);
  CHECK_FALSE(pc.overlap_dp_comm);  // DeepSpeed PipelineEngine reduces after the flush
  CHECK_FALSE(pc.p2p_scatter_gather);  // and sends whole activations
  pc = ParallelConfig{};
  map_comm_overlap("Megatron-DeepSpeed; ZeRO-1", "", pc, nullptr);
  CHECK(pc.overlap_dp_comm);  // pp 1: the DeepSpeed engine's bucketed reduction
  CHECK(pc.p2p_scatter_gather);
  map_comm_overlap("--overlap-grad-reduce --overlap-param-gather --tp-comm-overlap", "", pc, nullptr);
  CHECK(pc.overlap_tp_comm);
  CHECK(pc.overlap_dp_comm);
  // NeMo's key and plain words name the same userbuffers overlap; torchtitan's async TP is micro-pipelined TP (with
  // sequence parallelism on a dense model), not that overlap.
  for (const char* text : {"tp_comm_overlap: true", "TP comm overlap on"}) {
    pc = ParallelConfig{};
    map_comm_overlap(text, "", pc, nullptr);
    CHECK(pc.overlap_tp_comm);
  }
  pc = ParallelConfig{};
  pc.tp = 8;
  notes.clear();
  map_comm_overlap("FSDP 8 x TP 8", "", pc, &notes, "async TP, torch.compile");
  CHECK_FALSE(pc.overlap_tp_comm);
  CHECK_FALSE(pc.micropipeline_tp);  // without sequence parallelism there is nothing to split
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "TP collectives: async TP stated, not modelled here (priced as blocking TP collectives)");
  pc.sequence_parallel = true;
  notes.clear();
  map_comm_overlap("FSDP 8 x TP 8", "", pc, &notes, "async TP, torch.compile");
  CHECK(pc.micropipeline_tp);
  CHECK_FALSE(pc.overlap_tp_comm);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "TP collectives: micro-pipelined with their GEMMs (async TP stated)");
  pc.micropipeline_tp = false;
  map_comm_overlap("FSDP 8 x TP 8", "", pc, nullptr, "async TP", true);  // a MoE model
  CHECK_FALSE(pc.micropipeline_tp);
  pc.sequence_parallel = false;
  // Parallel notes shared by a table's rows ("async TP only in the third row") state it for no row in particular.
  notes.clear();
  map_comm_overlap("global batch = local batch x dp; async TP only in the third row", "", pc, &notes, "Float8");
  CHECK(notes.empty());
  // NeMo's key with the value false states no overlap.
  pc = ParallelConfig{};
  map_comm_overlap("tp_comm_overlap: false", "", pc, nullptr);
  CHECK_FALSE(pc.overlap_tp_comm);
  map_comm_overlap("tp_comm_overlap=False; sequence_parallel", "", pc, nullptr);
  CHECK_FALSE(pc.overlap_tp_comm);
  pc = ParallelConfig{};
  notes.clear();
  map_comm_overlap("HybridEP; TE CUDA graphs attn/moe_router/moe_preprocess", "", pc, &notes);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "CUDA graphs: stated, not modelled (host launch overhead is not priced)");

  // ZeRO-3 gather unit: DeepSpeed's per-linear fetch where the row names DeepSpeed or "ZeRO-3" without FSDP.
  for (const auto& [pn, notes_text, unit] : std::vector<std::tuple<std::string, std::string, Zero3GatherUnit>>{
           {"ZeRO-3, no model parallelism", "Pure ZeRO-3 data parallel (DeepSpeed)", Zero3GatherUnit::linear},
           {"ZeRO-3, no model parallelism", "", Zero3GatherUnit::linear},
           {"PyTorch FSDP FULL_SHARD (ZeRO-3 equivalent)", "", Zero3GatherUnit::layer},
           {"Fully Sharded Data Parallel + Megatron-LM tensor parallelism", "", Zero3GatherUnit::layer},
           {"sharded", "DeepSpeed stage 3", Zero3GatherUnit::linear},
           {"sharded", "", Zero3GatherUnit::layer}}) {
    pc = ParallelConfig{};
    pc.zero_stage = 3;
    notes.clear();
    map_comm_overlap(pn, notes_text, pc, &notes);
    CAPTURE(pn);
    CHECK(pc.zero3_gather_unit == unit);
    CHECK(notes.size() == (unit == Zero3GatherUnit::linear ? 1u : 0u));
  }
  pc = ParallelConfig{};
  pc.zero_stage = 1;
  map_comm_overlap("ZeRO-1", "DeepSpeed", pc, nullptr);
  CHECK(pc.zero3_gather_unit == Zero3GatherUnit::layer);  // only ZeRO-3 gathers parameters

  CHECK(source_key("Narayanan et al. 2021, 'Efficient Large-Scale'") == "Narayanan et al. 2021");
  CHECK(source_key("NVIDIA/Megatron-LM README 'Performance'") == "NVIDIA/Megatron-LM");
}

TEST_CASE("validation: unmappable rows are skipped with every reason, never guessed") {
  nlohmann::json row = base_row();
  row["parallel"]["micro_batch"] = nullptr;
  row["parallel"]["grad_accum"] = nullptr;  // else the micro-batch follows from it
  row["parallel"]["tp"] = nullptr;
  row["arch"]["kv_heads"] = nullptr;
  row["hardware"]["gpu"] = "A100-class SXM";
  row["measured"]["iter_time_s"] = nullptr;
  row["recompute"] = "partial checkpointing";
  MappedRun r = map_one(row);
  CHECK_FALSE(r.scored());
  CHECK_FALSE(r.plan);
  CHECK(has_reason(r, "parallel.micro_batch not stated"));
  CHECK(has_reason(r, "parallel.tp not stated"));
  CHECK(has_reason(r, "arch.kv_heads not stated"));
  CHECK(has_reason(r, "40 or 80 GB"));
  CHECK(has_reason(r, "no iteration time"));
  CHECK(has_reason(r, "partial checkpointing"));

  // A GEMM format below 8 bits is no parplan precision: its row is skipped naming it, never read as its "BF16" rest.
  for (const char* text : {"NVFP4 (TE NVFP4BlockScaling; BF16 for the last 4 layers)", "MXFP4", "FP4 with FP8 attention",
                           "mxfp6 e3m2"}) {
    CAPTURE(text);
    row = base_row();
    row["precision"] = text;
    r = map_one(row);
    CHECK_FALSE(r.scored());
    CHECK(has_reason(r, "below 8 bits"));
  }
  // DeepSeek-V3's DualPipe (stated in the parallel notes) over pp P x dp D runs DualPipeV's op sequence over P / 2
  // stages and 2 D pipelines: priced so, on the same GPUs and global batch. An odd pp has no halving: skipped.
  row = base_row();
  const int64_t pp = row["parallel"]["pp"].get<int64_t>(), dp = row["parallel"]["dp"].get<int64_t>();
  REQUIRE(pp % 2 == 0);
  row["parallel"]["vpp_chunks_per_stage"] = nullptr;
  row["parallel"]["parallel_notes"] = "DualPipe bidirectional schedule, ZeRO-1 DP";
  r = map_one(row);
  REQUIRE_MESSAGE(r.plan.has_value(), r.skip_reason());
  CHECK(r.plan->parallel.schedule == Schedule::dualpipe_v);
  CHECK(r.plan->parallel.pp == pp / 2);
  CHECK(r.plan->parallel.dp == 2 * dp);
  CHECK(r.plan->parallel.gpus() == pp * dp * r.plan->parallel.tp * r.plan->parallel.cp);
  const std::string halved = fmt::format("DualPipe over pp {} x dp {} priced as dualpipe-v over pp {} x dp {}", pp, dp,
                                         pp / 2, 2 * dp);
  CHECK(std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) { return n.find(halved) == 0; }));
  CHECK(r.plan->parallel.num_microbatches == row["parallel"]["global_batch_seqs"].get<int64_t>() / dp / 2);
  row["parallel"]["global_batch_seqs"] = 63;  // 63 microbatches: not two equal directions
  CHECK(has_reason(map_one(row), "schedule DualPipe with 63 microbatches per pipeline"));
  row["parallel"]["pp"] = 3;
  CHECK(has_reason(map_one(row), "schedule DualPipe over pp 3: priced as DualPipeV over half the stages"));
  // DualPipeV (one pipeline in a V) is parplan's dualpipe-v.
  row = base_row();
  row["parallel"]["vpp_chunks_per_stage"] = nullptr;
  row["parallel"]["parallel_notes"] = "PP8 with the DualPipeV schedule";
  r = map_one(row);
  CHECK(r.scored());
  REQUIRE(r.plan.has_value());
  CHECK(r.plan->parallel.schedule == Schedule::dualpipe_v);
  // Stated in measured.other.schedule too; a schedule field that says another one beside such notes is a skip.
  row["parallel"]["parallel_notes"] = nullptr;
  row["measured"]["other"] = {{"schedule", "DualPipeV"}};
  r = map_one(row);
  REQUIRE(r.plan.has_value());
  CHECK(r.plan->parallel.schedule == Schedule::dualpipe_v);
  row["parallel"]["parallel_notes"] = "PP8 with the DualPipeV schedule";
  row["measured"]["other"] = {{"schedule", "ZB-V"}};
  r = map_one(row);
  CHECK_FALSE(r.scored());
  CHECK(has_reason(r, "parallel notes say DualPipeV, measured.other.schedule says ZB-V"));

  // Recompute null: full only when the FLOP basis is Narayanan Eq. 3 (counts the recompute pass).
  row = base_row();
  row["recompute"] = nullptr;
  CHECK(has_reason(map_one(row), "recompute not stated"));
  row["measured"]["tflops_basis"] = "paper Eq.3 FLOPs (recompute-inclusive)";
  r = map_one(row);
  REQUIRE(r.scored());
  CHECK(r.plan->parallel.recompute == Recompute::full);

  // A valid row without an iteration time is still predicted (memory), but not scored.
  row = base_row();
  row["measured"]["iter_time_s"] = nullptr;
  r = map_one(row);
  CHECK(r.plan);
  CHECK_FALSE(r.scored());

  // Inconsistent mesh and batch: reasons from validate() and the batch rule.
  row = base_row();
  row["hardware"]["num_gpus"] = 128;
  CHECK(has_reason(map_one(row), "GPU"));
  row = base_row();
  row["parallel"]["micro_batch"] = 2;
  row["parallel"]["global_batch_seqs"] = 63;
  CHECK(has_reason(map_one(row), "not a multiple"));
}

TEST_CASE("validation: mixture-of-experts fields of the 2024-25 schema map or name what is not modelled") {
  // The base row with the 2024-25 schema's MoE fields.
  auto moe_row = [](int experts, int top_k, int shared, int dense, int moe_ffn, const char* attention) {
    nlohmann::json row = base_row();
    row["arch"].update({{"experts", experts}, {"top_k", top_k}, {"shared_experts", shared}, {"dense_layers", dense},
                        {"moe_ffn", moe_ffn}, {"attention", attention}});
    return row;
  };
  nlohmann::json row = moe_row(8, 2, 0, 0, 49152, "GQA/MHA");
  row["arch"]["ffn_type"] = "SwiGLU MoE (8 experts, top-2)";
  row["parallel"]["ep"] = 1;
  MappedRun r = map_one(row);
  REQUIRE(r.scored());
  CHECK(r.plan->model.experts == 8);
  CHECK(r.plan->model.top_k == 2);

  // Dense rows of the modern file state experts 1 and null MoE fields: a dense model.
  row = base_row();
  row["arch"]["experts"] = 1;
  row["arch"]["top_k"] = nullptr;
  r = map_one(row);
  REQUIRE(r.scored());
  CHECK_FALSE(r.plan->model.is_moe());

  // Shared experts, leading dense layers (their FFN from "dense ... ffn N"), MLA (its ranks from the notes) and a
  // head width stated as kv_channels map onto the model.
  row = moe_row(256, 8, 1, 3, 2048, "MLA");
  row["arch"]["ffn"] = 2048;
  row["arch"]["kv_heads"] = nullptr;
  row["arch"]["ffn_type"] = "SwiGLU MoE (256 routed + 1 shared expert, top-8); first 3 layers dense SwiGLU ffn 18432";
  row["arch"]["arch_notes"] = "DeepSeek-V3; MLA q_lora 1536, kv_lora 512, qk_head 128 + rope 64, v_head 128";
  row["parallel"]["ep"] = 1;
  r = map_one(row);
  REQUIRE(r.scored());
  const ModelSpec& m = r.plan->model;
  CHECK(m.shared_experts == 1);
  CHECK(m.dense_layers == 3);
  CHECK(m.dense_ffn_hidden == 18432);
  CHECK(m.q_lora_rank == 1536);
  CHECK(m.kv_lora_rank == 512);
  CHECK(m.head_dim() == 128);
  CHECK(m.qk_rope_head_dim == 64);
  CHECK(m.v_head_dim() == 128);
  CHECK(m.kv_heads == m.heads);
  row["arch"]["arch_notes"] = "MLA (kv compression 512, query compression 1536, head dim 128, decoupled RoPE 64)";
  r = map_one(row);
  REQUIRE(r.scored());
  CHECK(r.plan->model.q_lora_rank == 1536);
  CHECK(r.plan->model.qk_rope_head_dim == 64);
  // arch.ffn beside a different arch.moe_ffn is the dense MLP's width: the leading dense layers' where ffn_type does
  // not state one (DeepSeek-V3 transcribed with ffn 18432, moe_ffn 2048).
  row["arch"]["ffn"] = 18432;
  row["arch"]["ffn_type"] = "SwiGLU MoE (256 routed + 1 shared expert, top-8)";
  r = map_one(row);
  REQUIRE(r.scored());
  CHECK(r.plan->model.ffn_hidden == 2048);
  CHECK(r.plan->model.dense_layers == 3);
  CHECK(r.plan->model.dense_ffn_hidden == 18432);
  row = base_row();
  row["arch"]["arch_notes"] = "Qwen3-style; kv_channels 256";  // heads of 256 on hidden 12288 / 96 heads = 128
  r = map_one(row);
  REQUIRE(r.scored());
  CHECK(r.plan->model.head_dim() == 256);
  CHECK(r.plan->model.q_dim() == 2 * r.plan->model.hidden);
  row["arch"]["arch_notes"] = "Qwen3-style; head_dim 256";  // Hugging Face's name for it
  CHECK(map_one(row).plan->model.head_dim() == 256);
  // Every layer MoE with a dense width beside the experts': the experts' width, the other noted as unused.
  row = moe_row(8, 2, 0, 0, 1536, "GQA/MHA");
  row["arch"]["ffn_type"] = "SwiGLU MoE (8 experts, top-2)";
  row["parallel"]["ep"] = 1;
  r = map_one(row);  // base_row()'s ffn 49152 beside moe_ffn 1536
  REQUIRE(r.scored());
  CHECK(r.plan->model.ffn_hidden == 1536);
  bool noted = false;
  for (const auto& n : r.notes) noted = noted || n.starts_with("arch.ffn 49152: the dense MLP width, unused");
  CHECK(noted);

  // The recipes' dispatcher and all-to-all overlap, from their parallel notes.
  row = moe_row(8, 2, 0, 0, 49152, "GQA/MHA");
  row["arch"]["ffn_type"] = "SwiGLU MoE (8 experts, top-2)";
  row["parallel"]["dp"] = 1;
  row["parallel"]["ep"] = 1;
  r = map_one(row);
  REQUIRE(r.scored());
  CHECK(r.plan->parallel.moe_dispatcher == MoeDispatcher::alltoall);
  CHECK_FALSE(r.plan->parallel.overlap_ep_comm);
  row["hardware"]["num_gpus"] = 512;
  row["parallel"]["dp"] = 8;
  row["parallel"]["ep"] = 8;
  row["parallel"]["global_batch_seqs"] = 512;
  row["parallel"]["parallel_notes"] = "EDP=1, ETP=1; dispatcher DeepEP; +1F1B EP A2A overlap";
  r = map_one(row);
  REQUIRE(r.scored());
  CHECK(r.plan->parallel.moe_dispatcher == MoeDispatcher::deepep);
  CHECK(r.plan->parallel.overlap_ep_comm);
  // The recipes' own wording: "DeepEP" and NVIDIA's HybridEP (its hierarchical dispatch, one copy per node over the
  // NIC) are the deepep dispatcher; "alltoall dispatcher" and "dispatcher A2A (NCCL all-to-all)" NCCL's all-to-all.
  for (const char* notes : {"ETP=1; DeepEP; EP A2A overlap; MTP 1", "ETP=1; HybridEP; TE CUDA graphs attn"}) {
    row["parallel"]["parallel_notes"] = notes;
    r = map_one(row);
    REQUIRE(r.scored());
    CHECK_MESSAGE(r.plan->parallel.moe_dispatcher == MoeDispatcher::deepep, notes);
  }
  for (const char* notes : {"ETP=1; alltoall dispatcher; forced load balancing", "dispatcher A2A (NCCL all-to-all)"}) {
    row["parallel"]["parallel_notes"] = notes;
    r = map_one(row);
    REQUIRE(r.scored());
    CHECK_MESSAGE(r.plan->parallel.moe_dispatcher == MoeDispatcher::alltoall, notes);
  }

  // Node-limited routing a row states: one router group per node of the ep group, M chosen, where the group spans
  // more than M nodes (64 experts, top-8, at most 2 nodes; ep 64 over the tp x dp ranks of 8 nodes).
  row = moe_row(64, 8, 0, 0, 1536, "GQA/MHA");
  row["hardware"]["num_gpus"] = 512;
  row["parallel"].update({{"dp", 8}, {"ep", 64}, {"global_batch_seqs", 512}, {"parallel_notes", "ETP=1; DeepEP"}});
  row["arch"]["ffn_type"] = "SwiGLU MoE (64 experts, top-8, node-limited routing <=2 nodes)";
  r = map_one(row);
  REQUIRE(r.scored());
  const int64_t ep_nodes = group_domain_split(r.plan->parallel, GroupKind::ep, r.plan->cluster).domains;
  REQUIRE(ep_nodes > 2);
  CHECK(r.plan->model.router_groups == ep_nodes);
  CHECK(r.plan->model.router_group_top_k == 2);
  row["arch"]["ffn_type"] = fmt::format("SwiGLU MoE (64 experts, top-8, node-limited routing <={} nodes)", ep_nodes);
  r = map_one(row);  // the group spans no more nodes than the limit: nothing to limit
  REQUIRE(r.scored());
  CHECK(r.plan->model.router_groups == 0);
  CHECK(r.plan->model.router_group_top_k == 0);

  // What the cost model does not represent is a skip reason naming the field, never a silent approximation.
  r = map_one(moe_row(256, 8, 1, 3, 2048, "MLA"));
  CHECK_FALSE(r.scored());
  // (arch.ffn 49152 beside moe_ffn 2048 is the dense layers' width, so that is stated.)
  CHECK_FALSE(has_reason(r, "arch.dense_layers"));
  CHECK(has_reason(r, "arch.attention MLA: arch_notes do not state"));
  row = moe_row(256, 8, 1, 3, 2048, "GQA/MHA");
  row["arch"]["ffn"] = 2048;  // the experts' width only: the dense layers' is nowhere
  CHECK(has_reason(map_one(row), "arch.dense_layers 3: the dense layers' FFN width is not stated"));
  row = moe_row(256, 8, 1, 0, 49152, "MLA");
  row["arch"]["arch_notes"] = "MLA q_lora 1536, kv_lora 512, qk_head 128 + rope 64; MTP 1 layer enabled";
  r = map_one(row);
  CHECK_FALSE(has_reason(r, "MTP"));  // one multi-token prediction module (ModelSpec::mtp_layers)
  REQUIRE(r.scored());
  CHECK(r.plan->model.mtp_layers == 1);
  row["arch"]["arch_notes"] = "MLA q_lora 1536, kv_lora 512, qk_head 128 + rope 64; MTP depth 2";
  r = map_one(row);
  CHECK_FALSE(has_reason(r, "MTP"));
  REQUIRE(r.scored());
  CHECK(r.plan->model.mtp_layers == 2);
  row["arch"]["arch_notes"] = "MLA q_lora 1536, kv_lora 512, qk_head 128 + rope 64; MTP enabled";
  CHECK(has_reason(map_one(row), "MTP: the number of multi-token prediction modules is not stated"));
  row = base_row();
  row["arch"]["attention"] = "hybrid linear attention";
  CHECK(has_reason(map_one(row), "linear attention"));
  // State-space and recurrent layers (Nemotron-H's Mamba, RWKV) have no attention core to price: a skip, in the
  // attention field or the notes, never a transformer's count.
  row["arch"]["attention"] = "hybrid Mamba-Transformer";
  CHECK(has_reason(map_one(row), "arch: state-space or recurrent layers ('hybrid mamba-transformer') are not modelled"));
  row["arch"]["attention"] = "GQA";
  row["arch"]["arch_notes"] = "Mamba-2 layers interleaved with attention";
  CHECK(has_reason(map_one(row), "state-space or recurrent layers"));
  row = base_row();
  row["arch"]["experts"] = 8;
  row["arch"]["top_k"] = 9;
  CHECK(has_reason(map_one(row), "arch.top_k 9 exceeds arch.experts 8"));
  row["arch"]["top_k"] = nullptr;
  CHECK(has_reason(map_one(row), "arch.top_k not stated"));

  // The fp8 recipe from the precision text.
  CHECK(map_fp8_recipe("MXFP8 (--fp8-recipe mxfp8 e4m3; fp8 param gather)") == Fp8Recipe::mxfp8);
  CHECK(map_fp8_recipe("FP8 blockwise (--fp8-recipe blockwise e4m3)") == Fp8Recipe::blockwise);
  CHECK(map_fp8_recipe("FP8 mixed precision (E4M3 fine-grained 1x128 / 128x128 scaling)") == Fp8Recipe::blockwise);
  CHECK(map_fp8_recipe("Float8 rowwise with bf16 all-gather") == Fp8Recipe::rowwise);
  CHECK(map_fp8_recipe("Float8 tensorwise (torchao)") == Fp8Recipe::tensorwise);
  std::vector<std::string> notes;
  // NVIDIA's performance-table abbreviations of the Transformer Engine recipes.
  CHECK(map_fp8_recipe("FP8-DS") == Fp8Recipe::delayed);
  CHECK(map_fp8_recipe("FP8-MX") == Fp8Recipe::mxfp8);
  CHECK(map_fp8_recipe("FP8-CS", &notes) == Fp8Recipe::tensorwise);
  CHECK(map_fp8_recipe("FP8 (Float8BlockScaling, block scaling)") == Fp8Recipe::blockwise);
  CHECK(map_fp8_recipe("FP8 (Float8BlockScaling)") == Fp8Recipe::blockwise);
  CHECK(map_fp8_recipe("MXFP8 (MXFP8BlockScaling)") == Fp8Recipe::mxfp8);
  // Transformer Engine's Float8CurrentScaling is the tensorwise recipe, named (no "not named" note).
  CHECK(map_fp8_recipe("FP8 current scaling (Float8CurrentScaling)", &notes) == Fp8Recipe::tensorwise);
  CHECK(notes.empty());
  CHECK(map_fp8_recipe("Float8 (torchao Float8Linear on nn.Linear)", &notes) == Fp8Recipe::tensorwise);
  CHECK(notes.size() == 1);

  // torchao's "Float8" names fp8.
  Precision p = Precision::bf16;
  CHECK(map_precision("Float8 rowwise (torchao)", p));
  CHECK(p == Precision::fp8);
}

// The 2024-25 file (validation/published-runs-modern.json) loads: every row is either scored or skipped with a
// stated reason (unknown GPUs such as GB300 are skip reasons, not errors).
TEST_CASE("validation: every row of validation/published-runs-modern.json is scored or has a reason") {
  const std::vector<MappedRun> runs = test::vendored_runs("published-runs-modern.json");
  CHECK(runs.size() == 162);
  int64_t scored = 0;
  for (const MappedRun& r : runs) {
    CHECK_MESSAGE((r.scored() || !r.skip_reasons.empty()), r.id);
    scored += r.scored() ? 1 : 0;
    if (r.gpu_text.find("MI300X") != std::string::npos) CHECK(r.gpu_type == "MI300X");
    if (r.gpu_text.find("HBM2e") != std::string::npos) CHECK(r.gpu_type == "H100-SXM5-96GB-HBM2e");
    if (r.gpu_text.find("H800") != std::string::npos) CHECK(r.gpu_type == "H800");
    // GB200 / GB300 rows (4-GPU trays of an NVL72 rack) find their GPU and cluster profiles.
    if (r.gpu_text == "GB200" || r.gpu_text == "GB300") {
      CAPTURE(r.id);
      CHECK(r.gpu_type == r.gpu_text);
      CHECK_FALSE(has_reason(r, "no cluster profile"));
      CHECK_FALSE(has_reason(r, "unknown GPU"));
    }
  }
  CHECK(scored >= 14);  // docs/accuracy.md "The 2024-25 runs"
  // Async TP is noted on the rows whose technique states it, not on the rows beside them whose shared parallel notes
  // say "async TP only in the third row" (torchtitan 2024-08, 405B on 128 GPUs: bf16, float8, float8 + async TP).
  const std::string async_note = "TP collectives: micro-pipelined with their GEMMs (async TP stated)";
  int64_t noted = 0;
  for (const MappedRun& r : runs) {
    const bool says = std::find(r.notes.begin(), r.notes.end(), async_note) != r.notes.end();
    noted += says ? 1 : 0;
    if (r.id == "torchtitan_h100hbm2e_202408_llama31_405b_128gpu_bf16" ||
        r.id == "torchtitan_h100hbm2e_202408_llama31_405b_128gpu_float8" ||
        r.id == "torchtitan_h100_202506_llama3_8b_64gpu_bf16_vanillatp") {
      CAPTURE(r.id);
      CHECK_FALSE(says);
    }
    if (r.id == "torchtitan_h100hbm2e_202408_llama31_405b_128gpu_float8_asynctp" ||
        r.id == "torchtitan_h100_202506_llama3_8b_64gpu_bf16_asynctp") {
      CAPTURE(r.id);
      CHECK(says);
      REQUIRE(r.plan);
      CHECK(r.plan->parallel.micropipeline_tp);
    }
  }
  CHECK(noted > 2);
}

// The DeepSeek-V3 report's own run (2048 H800s, DualPipe over pp 16, ep 64, fp8): priced as dualpipe-v over pp 8 x
// dp 256, the layers 3/2 on stage 0 and 4/4 elsewhere (embedding, loss and MTP module one layer's slot each: 64
// slots over 16 chunks), the report's overlapped all-to-alls and fp8 activation cache; with the cache it fits the
// H800's 80 GB, as the run did (its micro-batch, unstated, is the search's).
TEST_CASE("validation: the DeepSeek-V3 report's DualPipe run maps, with its fp8 activation cache, and fits") {
  const std::vector<MappedRun> runs = test::vendored_runs("published-runs-modern.json", Unstated::search);
  const auto it = std::find_if(runs.begin(), runs.end(),
                               [](const MappedRun& r) { return r.id == "deepseek_v3_pretrain_2048xh800"; });
  REQUIRE(it != runs.end());
  REQUIRE(it->scored());
  const Plan& p = *it->plan;
  CHECK(p.parallel.schedule == Schedule::dualpipe_v);
  CHECK(p.parallel.pp == 8);
  CHECK(p.parallel.dp == 256);
  CHECK(p.parallel.ep == 64);
  CHECK(format_stage_layout(p.parallel.stage_layout) == "3/2,4/4,4/4,4/4,4/4,4/4,4/4,4/4");
  CHECK(p.parallel.overlap_ep_comm);
  CHECK(p.parallel.moe_dispatcher == MoeDispatcher::deepep);
  CHECK(p.training.fp8_activation_cache);
  // "node-limited routing <=4 nodes": one router group per node of the ep group (8), 4 chosen.
  CHECK(p.model.router_groups == 8);
  CHECK(p.model.router_group_top_k == 4);
  CHECK(std::find_if(it->notes.begin(), it->notes.end(), [](const std::string& n) {
          return n.starts_with("node-limited routing (at most 4 nodes a token): 4 of 8 router groups");
        }) != it->notes.end());
  const Estimate e = estimate(p);
  CHECK(e.fits);
  Plan unlimited = p;  // the limit lowers DeepEP's InfiniBand bytes, so the step
  unlimited.model.router_groups = unlimited.model.router_group_top_k = 0;
  CHECK(estimate(unlimited).time.step_s > e.time.step_s);
  Plan stored = p;  // without the report's cache the same layout holds more than the H800's memory
  stored.training.fp8_activation_cache = false;
  CHECK_FALSE(estimate(stored).fits);
}

namespace {

// A Zero Bubble row (Qi et al. 2023 Table 4, as the 2024-25 file holds it): GPT-3-like shape without FFN, vocabulary
// or kv heads; precision and recompute not stated; the schedule in measured.other.
nlohmann::json zero_bubble_row(const std::string& schedule) {
  nlohmann::json row = base_row();
  row["source"] = "Qi, Wan, Huang, Lin (Sea AI Lab), 'Zero Bubble Pipeline Parallelism', arXiv:2401.10241";
  row["arch"] = {{"layers", 22}, {"hidden", 2304}, {"heads", 24}, {"kv_heads", nullptr}, {"ffn", nullptr},
                 {"ffn_type", nullptr}, {"vocab", nullptr}, {"seq_len", 1024}, {"params_B", 1.5},
                 {"arch_notes", "'models analogous to GPT-3'. First and last pipeline stages hold one fewer transformer "
                                "layer than the others."},
                 {"experts", 1}};
  row["hardware"]["num_gpus"] = 8;
  row["parallel"] = {{"tp", 1}, {"pp", 8}, {"dp", 1}, {"micro_batch", 6}, {"global_batch_seqs", 144}};
  row["precision"] = "not stated";
  row["recompute"] = "not stated";
  row["measured"] = {{"iter_time_s", nullptr}, {"memory_per_gpu_GB", 30},
                     {"other", {{"samples_per_gpu_per_s", 11.8}, {"schedule", schedule}}}};
  row["derived"] = {{"iter_time_s", 1.5254}};
  row["notes"] = "Precision/recompute/vocab not stated in paper; Megatron-LM fork (sail-sg/zero-bubble-pipeline-parallelism).";
  return row;
}

MappedRun map_one_with(const nlohmann::json& row, Unstated mode) {
  auto runs = load_published_runs(nlohmann::json::array({row}).dump(), "runs.json", profiles(), mode);
  REQUIRE(runs.size() == 1);
  return runs.front();
}

// A Llama 3-shaped recipe row (GQA with 8 KV heads, SwiGLU, vocabulary 128256, sequence 8192, untied output) on
// `gpus` H100s, in fp8 with Transformer Engine's delayed scaling; the mesh is the caller's.
nlohmann::json llama3_recipe_row(const char* source, int64_t layers, int64_t hidden, int64_t heads, int64_t ffn,
                                 double params_B, int64_t gpus) {
  nlohmann::json row = base_row();
  row["source"] = source;
  row["arch"] = {{"layers", layers}, {"hidden", hidden}, {"heads", heads}, {"kv_heads", 8}, {"ffn", ffn},
                 {"ffn_type", "SwiGLU"}, {"vocab", 128256}, {"seq_len", 8192}, {"params_B", params_B},
                 {"arch_notes", "untied output layer"}};
  row["hardware"] = {{"gpu", "H100-SXM5-80GB"}, {"num_gpus", gpus}, {"gpus_per_node", 8}};
  row["precision"] = "FP8 (delayed scaling)";
  return row;
}

bool assumed(const MappedRun& r, std::string_view what) {
  for (const auto& a : r.assumed) {
    if (a.find(what) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("validation: --unstated strict skips what a row does not state, search takes and lists it") {
  const nlohmann::json row = zero_bubble_row("1F1B");
  const MappedRun strict = map_one_with(row, Unstated::strict);
  CHECK_FALSE(strict.scored());
  CHECK(has_reason(strict, "arch.vocab not stated"));
  CHECK(strict.assumed.empty());

  const MappedRun r = map_one_with(row, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->model.kv_heads == 24);
  CHECK(r.plan->model.ffn_hidden == 4 * 2304);
  CHECK(r.plan->model.ffn_type == FfnType::gelu);
  CHECK(r.plan->model.vocab == 51200);
  CHECK(r.plan->training.precision == Precision::fp16);
  CHECK(assumed(r, "arch.vocab = 51200"));
  CHECK(assumed(r, "precision = fp16"));
  // The open recompute is the fastest mode that fits: this 1.5B model fits without recompute, which is fastest.
  CHECK(r.plan->parallel.recompute == Recompute::none);
  CHECK(assumed(r, "recompute = none (the fastest that fits"));
  // Stated values stay as stated.
  CHECK(r.plan->parallel.micro_batch == 6);
  CHECK(r.plan->parallel.num_microbatches == 24);

  // An open micro-batch: the fastest that fits among those dividing the global batch over dp.
  nlohmann::json open_mb = row;
  open_mb["parallel"]["micro_batch"] = nullptr;
  CHECK(has_reason(map_one_with(open_mb, Unstated::strict), "parallel.micro_batch not stated"));
  const MappedRun m = map_one_with(open_mb, Unstated::search);
  REQUIRE_MESSAGE(m.scored(), m.skip_reason());
  CHECK(144 % (m.plan->parallel.micro_batch * m.plan->parallel.num_microbatches) == 0);
  CHECK(assumed(m, "parallel.micro_batch = "));
  const Estimate chosen = estimate(*m.plan);
  CHECK(chosen.fits);
  for (int64_t b : {1, 2, 3, 4, 6, 8, 9, 12, 16, 18, 24, 36, 48, 72, 144}) {  // every divisor of 144: none faster
    Plan c = *m.plan;
    c.parallel.micro_batch = b;
    c.parallel.num_microbatches = 144 / b;
    if (!validate(c).ok()) continue;
    const Estimate e = estimate(c);
    if (e.fits) CHECK(e.time.step_s >= chosen.time.step_s);
  }

  // Shape assumptions are for GPT-3-style rows, and a vocabulary for rows shaped like a model profile: another
  // model's unstated vocabulary stays a skip reason.
  nlohmann::json other = row;
  other["arch"]["arch_notes"] = "Mixtral-like";
  CHECK(has_reason(map_one_with(other, Unstated::search), "arch.vocab not stated"));
}

// fp8 weights (Megatron-Core --fp8-param-gather, torchao's float8 all-gather) are off by default in both stacks: a
// searched fp8 row that neither states nor denies them takes them only when no plan fits with 16-bit weights.
TEST_CASE("validation: search takes fp8 weights only for an fp8 row that fits no other way") {
  nlohmann::json row = llama3_recipe_row("NVIDIA recipe (Llama 3 8B, fp8)", 32, 4096, 32, 14336, 8.03, 8);
  row["parallel"] = {{"tp", 1}, {"pp", 1}, {"dp", 4}, {"cp", 2}, {"zero_stage", 1}, {"micro_batch", 1},
                     {"global_batch_seqs", 128}, {"parallel_notes", "distributed optimizer"}};
  row["recompute"] = "none";
  row["measured"] = {{"iter_time_s", 9.0}};

  const MappedRun strict = map_one_with(row, Unstated::strict);
  REQUIRE_MESSAGE(strict.scored(), strict.skip_reason());
  CHECK_FALSE(strict.plan->training.fp8_param_gather);
  CHECK_FALSE(estimate(*strict.plan).fits);  // 16-bit weights, their fp8 copy, fp32 gradients: over 80 GB

  const MappedRun r = map_one_with(row, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->training.fp8_param_gather);
  CHECK(estimate(*r.plan).fits);
  CHECK(assumed(r, "fp8 weights held and gathered"));

  // A row that says its weights are gathered in 16 bits keeps them.
  nlohmann::json denied = row;
  denied["precision"] = "FP8 (delayed scaling; bf16 all-gather)";
  const MappedRun d = map_one_with(denied, Unstated::search);
  REQUIRE_MESSAGE(d.scored(), d.skip_reason());
  CHECK_FALSE(d.plan->training.fp8_param_gather);
  CHECK_FALSE(assumed(d, "fp8 weights"));

  // A row that fits with 16-bit weights (sequence 4096) keeps the default.
  nlohmann::json fits = row;
  fits["arch"]["seq_len"] = 4096;
  const MappedRun f = map_one_with(fits, Unstated::search);
  REQUIRE_MESSAGE(f.scored(), f.skip_reason());
  CHECK_FALSE(f.plan->training.fp8_param_gather);
  CHECK(estimate(*f.plan).fits);
}

// Optimizer sharding: "fsdp": false denies FSDP, not the distributed optimizer the parallel notes name; a row that
// names none (zero_stage null, notes silent) keeps the stacks' default, the states replicated, unless no plan fits
// that way, where search takes the distributed optimizer. Llama 3 70B at tp 4, pp 4 (vpp 5), cp 2 on 64 H100s in
// fp8: about 88 GiB a GPU with the Adam states replicated, 69 GiB with them sharded over dp x cp.
TEST_CASE("validation: optimizer sharding from the notes, or by search where nothing fits without it") {
  nlohmann::json row = llama3_recipe_row("NVIDIA recipe (Llama 3 70B, fp8)", 80, 8192, 64, 28672, 70.6, 64);
  row["parallel"] = {{"tp", 4}, {"pp", 4}, {"dp", 2}, {"cp", 2}, {"sequence_parallel", true},
                     {"vpp_chunks_per_stage", 5}, {"zero_stage", nullptr}, {"fsdp", false}, {"micro_batch", 1},
                     {"global_batch_seqs", 128}, {"parallel_notes", "distributed optimizer; TP comm overlap"}};
  row["recompute"] = "none";
  row["measured"] = {{"iter_time_s", 12.0}};

  const MappedRun named = map_one_with(row, Unstated::strict);
  REQUIRE_MESSAGE(named.scored(), named.skip_reason());
  CHECK(named.plan->parallel.zero_stage == 1);
  CHECK(has_note(named, "ZeRO-1 from the parallel notes (distributed optimizer"));
  CHECK(estimate(*named.plan).fits);

  nlohmann::json param_gather = row;
  param_gather["parallel"]["parallel_notes"] = "--overlap-grad-reduce --overlap-param-gather";
  const MappedRun pg = map_one_with(param_gather, Unstated::strict);
  REQUIRE_MESSAGE(pg.scored(), pg.skip_reason());
  CHECK(pg.plan->parallel.zero_stage == 1);
  CHECK(has_note(pg, "--overlap-param-gather needs Megatron-LM's distributed optimizer"));

  nlohmann::json silent = row;
  silent["parallel"]["parallel_notes"] = "TP comm overlap";
  const MappedRun strict = map_one_with(silent, Unstated::strict);
  REQUIRE_MESSAGE(strict.scored(), strict.skip_reason());
  CHECK(strict.plan->parallel.zero_stage == 0);
  CHECK_FALSE(estimate(*strict.plan).fits);
  const MappedRun searched = map_one_with(silent, Unstated::search);
  REQUIRE_MESSAGE(searched.scored(), searched.skip_reason());
  CHECK(searched.plan->parallel.zero_stage == 1);
  CHECK(estimate(*searched.plan).fits);
  CHECK(assumed(searched, "ZeRO-1 (the distributed optimizer): no plan fits with the optimizer states replicated"));
  CHECK_FALSE(searched.plan->training.fp8_param_gather);  // ZeRO-1 alone fits: fp8 weights not taken

  // A row that fits with the states replicated (tp 8, pp 8 on 256 GPUs) keeps them; a stated ZeRO 0 is kept.
  nlohmann::json roomy = silent;
  roomy["hardware"]["num_gpus"] = 256;
  roomy["parallel"].update({{"tp", 8}, {"pp", 8}, {"dp", 2}, {"vpp_chunks_per_stage", 5}, {"global_batch_seqs", 128}});
  const MappedRun kept = map_one_with(roomy, Unstated::search);
  REQUIRE_MESSAGE(kept.scored(), kept.skip_reason());
  CHECK(kept.plan->parallel.zero_stage == 0);
  CHECK(estimate(*kept.plan).fits);
  CHECK_FALSE(assumed(kept, "ZeRO-1"));
  nlohmann::json stated = silent;
  stated["parallel"]["zero_stage"] = 0;
  const MappedRun zero0 = map_one_with(stated, Unstated::search);
  REQUIRE_MESSAGE(zero0.scored(), zero0.skip_reason());
  CHECK(zero0.plan->parallel.zero_stage == 0);
  CHECK_FALSE(assumed(zero0, "ZeRO-1"));
}

// A vendor table that lists tp, pp and cp but not dp, or the gradient-accumulation steps but not the micro-batch:
// both follow by arithmetic (dp = GPUs / (tp pp cp); micro-batch = global batch / (dp x steps)), in either mode.
TEST_CASE("validation: dp and micro-batch follow from the GPUs and the accumulation steps a row states") {
  nlohmann::json row = llama3_recipe_row("NVIDIA recipe (Llama 3 70B, fp8)", 80, 8192, 64, 28672, 70.6, 64);
  row["parallel"] = {{"tp", 4}, {"pp", 4}, {"dp", nullptr}, {"cp", 2}, {"sequence_parallel", true},
                     {"vpp_chunks_per_stage", 5}, {"zero_stage", 1}, {"micro_batch", nullptr}, {"grad_accum", 64},
                     {"global_batch_seqs", 128}};
  row["recompute"] = "none";
  row["measured"] = {{"iter_time_s", 12.0}};
  const MappedRun r = map_one_with(row, Unstated::strict);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->parallel.dp == 2);
  CHECK(r.plan->parallel.micro_batch == 1);
  CHECK(r.plan->parallel.num_microbatches == 64);
  CHECK(has_note(r, "parallel.dp 2 = 64 GPUs / (tp 4 x pp 4 x cp 2) (parallel.dp null)"));
  CHECK(has_note(r, "parallel.micro_batch 1 = global batch 128 / (dp 2 x grad_accum 64)"));
  // GPUs that tp x pp x cp does not divide leave dp unstated.
  row["hardware"]["num_gpus"] = 60;
  CHECK(has_reason(map_one_with(row, Unstated::strict), "parallel.dp not stated"));
}

// What a recipe leaves to the stack it ran on: sequence parallelism flagged at tp 1 (Megatron-LM turns it off), an
// interleaved split that only Megatron's embedding/loss accounting makes even, an ep the data-parallel ranks alone
// cannot hold (Megatron-Core's parallel folding, etp 1), and MLA ranks a DeepSeek-V3-shaped row does not repeat.
// Search takes each (listed as assumed); strict names what is missing, except the SP flag, which changes nothing.
TEST_CASE("validation: search maps what a recipe leaves to its stack") {
  // Llama 3 405B (126 layers) at tp 8, pp 8, vpp 8 on 512 H100s, fp8, from a source that names no stack.
  nlohmann::json row =
      llama3_recipe_row("Vendor performance table (Llama 3.1 405B)", 126, 16384, 128, 53248, 405, 512);
  row["parallel"] = {{"tp", 8}, {"pp", 8}, {"dp", 4}, {"cp", 2}, {"sequence_parallel", true},
                     {"vpp_chunks_per_stage", 8}, {"zero_stage", 1}, {"micro_batch", 1}, {"global_batch_seqs", 256}};
  row["recompute"] = "full";
  row["measured"] = {{"iter_time_s", 20.0}};
  CHECK(has_reason(map_one_with(row, Unstated::strict), "--account-for-embedding-in-pipeline-split"));
  MappedRun r = map_one_with(row, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->parallel.embedding_in_pipeline_split);
  CHECK(r.plan->parallel.loss_in_pipeline_split);
  CHECK(assumed(r, "pipeline split: 126 layers + embedding + loss in 64 chunks"));
  // A NeMo source runs Megatron-Core: its split, stated by the stack, in either mode.
  row["source"] = "NVIDIA NeMo performance summary (Llama 3.1 405B)";
  r = map_one_with(row, Unstated::strict);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->parallel.embedding_in_pipeline_split);
  CHECK_FALSE(assumed(r, "pipeline split"));

  // Mixtral 8x7B at tp 1 with the recipe's SP flag on, ep 8 over dp 16: SP off, in either mode.
  nlohmann::json moe = base_row();
  moe["source"] = "Vendor performance table (Mixtral 8x7B)";
  moe["arch"] = {{"layers", 32}, {"hidden", 4096}, {"heads", 32}, {"kv_heads", 8}, {"ffn", 14336},
                 {"ffn_type", "SwiGLU MoE (8 experts, top-2)"}, {"vocab", 32000}, {"seq_len", 4096}, {"params_B", 46.7},
                 {"experts", 8}, {"top_k", 2}, {"shared_experts", 0}, {"dense_layers", 0}, {"moe_ffn", 14336},
                 {"arch_notes", "untied output layer"}};
  moe["hardware"] = {{"gpu", "H100-SXM5-80GB"}, {"num_gpus", 64}, {"gpus_per_node", 8}};
  moe["parallel"] = {{"tp", 1}, {"pp", 4}, {"dp", 16}, {"cp", 1}, {"ep", 8}, {"sequence_parallel", true},
                     {"vpp_chunks_per_stage", 8}, {"zero_stage", 1}, {"micro_batch", 1}, {"global_batch_seqs", 256}};
  moe["precision"] = "BF16";
  moe["recompute"] = "none";
  moe["measured"] = {{"iter_time_s", 3.0}};
  r = map_one_with(moe, Unstated::strict);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK_FALSE(r.plan->parallel.sequence_parallel);
  CHECK(has_note(r, "sequence parallelism at tp 1: off"));

  // Llama 4 Maverick-like routing at tp 4, ep 128 over dp 64: valid only folded (ep x etp over tp x dp = 256).
  moe["arch"].update({{"experts", 128}, {"top_k", 1}, {"ffn_type", "SwiGLU MoE (128 experts, top-1)"}});
  moe["hardware"]["num_gpus"] = 256;
  moe["parallel"].update({{"tp", 4}, {"pp", 1}, {"dp", 64}, {"ep", 128}, {"vpp_chunks_per_stage", nullptr},
                          {"global_batch_seqs", 1024}});
  CHECK(has_reason(map_one_with(moe, Unstated::strict), "ep 128 must divide the experts (128) and dp (64)"));
  r = map_one_with(moe, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->parallel.etp == 1);
  CHECK(assumed(r, "etp = 1 (ep 128 does not divide dp 64"));

  // DeepSeek-V3's shape with "MLA" and no ranks: those of the deepseek-v3 profile, searched.
  nlohmann::json ds = moe;
  ds["arch"] = {{"layers", 61}, {"hidden", 7168}, {"heads", 128}, {"kv_heads", nullptr}, {"ffn", 18432},
                {"ffn_type", "SwiGLU MoE (256 routed + 1 shared, top-8)"}, {"vocab", 129280}, {"seq_len", 4096},
                {"params_B", 671}, {"experts", 256}, {"top_k", 8}, {"shared_experts", 1}, {"dense_layers", 3},
                {"moe_ffn", 2048}, {"attention", "MLA"}, {"arch_notes", "DeepSeek-V3"}};
  ds["hardware"]["num_gpus"] = 1024;
  ds["parallel"].update({{"tp", 2}, {"pp", 16}, {"dp", 32}, {"ep", 64}, {"global_batch_seqs", 8192}});
  CHECK(has_reason(map_one_with(ds, Unstated::strict), "arch.attention MLA: arch_notes do not state"));
  r = map_one_with(ds, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->model.q_lora_rank == 1536);
  CHECK(r.plan->model.kv_lora_rank == 512);
  CHECK(r.plan->model.head_dim() == 128);
  CHECK(r.plan->model.qk_rope_head_dim == 64);
  CHECK(r.plan->model.v_head_dim() == 128);
  CHECK(r.plan->model.kv_heads == 128);
  CHECK(assumed(r, "arch MLA: q_lora_rank 1536, kv_lora_rank 512, head width 128 + rope 64 (the deepseek-v3 profile"));
  // A table's blank recompute ("-") is unstated: strict names it, search opens it.
  nlohmann::json blank = moe;
  blank["recompute"] = "-";
  CHECK(has_reason(map_one_with(blank, Unstated::strict), "recompute '-' is not none/selective/full"));
  r = map_one_with(blank, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(assumed(r, "recompute = "));

  // Another shape (60 layers) matches no MLA profile: still a skip reason.
  ds["arch"]["layers"] = 60;
  CHECK(has_reason(map_one_with(ds, Unstated::search), "arch.attention MLA: arch_notes do not state"));
}

// torchtitan's pipeline defaults (validation.cpp torchtitan_pipeline_defaults, torchtitan_split): pp microbatches
// per step, 2 stages per rank for Interleaved 1F1B, and its split points (126 layers over 16 stages: 7, 8 x 14, 7).
TEST_CASE("validation: torchtitan rows take torchtitan's pipeline defaults where they leave them unstated") {
  nlohmann::json row = base_row();
  row["source"] = "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md (torchtitan team, Dec 2024)";
  row["arch"]["layers"] = 126;
  row["hardware"]["num_gpus"] = 512;
  row["parallel"].update({{"tp", 8}, {"pp", 8}, {"dp", 8}, {"micro_batch", nullptr}, {"vpp_chunks_per_stage", nullptr},
                          {"global_batch_seqs", 256}, {"grad_accum", nullptr},
                          {"parallel_notes", "TP 8 within node; PP schedule: Interleaved 1F1B; micro-batch not stated"}});
  CHECK(has_reason(map_one_with(row, Unstated::strict), "parallel.micro_batch not stated"));
  MappedRun r = map_one_with(row, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->parallel.micro_batch == 4);  // 256 / dp 8 / pp 8
  CHECK(r.plan->parallel.num_microbatches == 8);
  CHECK(r.plan->parallel.schedule == Schedule::interleaved);
  CHECK(r.plan->parallel.vpp == 2);
  CHECK(assumed(r, "parallel.micro_batch = 4 (torchtitan's default"));
  CHECK(assumed(r, "parallel.vpp_chunks_per_stage = 2 (torchtitan's default"));
  const std::vector<std::vector<int64_t>> looped = {{7, 8}, {8, 8}, {8, 8}, {8, 8}, {8, 8}, {8, 8}, {8, 8}, {8, 7}};
  CHECK(r.plan->parallel.stage_layout == looped);

  row["parallel"]["parallel_notes"] = "PP schedule: 1F1B";
  r = map_one_with(row, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->parallel.schedule == Schedule::one_f_one_b);
  const std::vector<std::vector<int64_t>> single = {{15}, {16}, {16}, {16}, {16}, {16}, {16}, {15}};
  CHECK(r.plan->parallel.stage_layout == single);
  row["parallel"]["micro_batch"] = 2;  // a stated micro-batch stays
  r = map_one_with(row, Unstated::search);
  REQUIRE(r.scored());
  CHECK(r.plan->parallel.micro_batch == 2);
  CHECK_FALSE(assumed(r, "torchtitan"));

  // Other stacks' rows: the micro-batch is searched, never torchtitan's default.
  row["source"] = "Korthikanti et al. 2022";
  row["arch"]["layers"] = 128;
  row["parallel"]["micro_batch"] = nullptr;
  r = map_one_with(row, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK_FALSE(assumed(r, "torchtitan"));
  CHECK(r.plan->parallel.stage_layout.empty());
}

TEST_CASE("validation: search takes an unstated vocabulary from the model profile of the row's shape") {
  nlohmann::json row = base_row();  // Mixtral 8x22B's shape (the mixtral-8x22b profile), vocabulary unstated
  row["arch"] = {{"layers", 56}, {"hidden", 6144}, {"heads", 48}, {"kv_heads", 8}, {"ffn", 16384},
                 {"ffn_type", "SwiGLU MoE (8 experts, top-2)"}, {"vocab", nullptr}, {"seq_len", 4096},
                 {"experts", 8}, {"top_k", 2}};
  row["hardware"]["gpu"] = "H100";
  row["hardware"]["num_gpus"] = 128;
  row["parallel"] = {{"tp", 2}, {"pp", 8}, {"dp", 8}, {"ep", 8}, {"sequence_parallel", true}, {"micro_batch", 1},
                     {"global_batch_seqs", 256}, {"vpp_chunks_per_stage", nullptr}};
  row["precision"] = "bf16";
  row["recompute"] = "none";
  CHECK(has_reason(map_one_with(row, Unstated::strict), "arch.vocab not stated"));
  const MappedRun r = map_one_with(row, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->model.vocab == 32768);  // mistralai/Mixtral-8x22B-v0.1 config.json
  CHECK(assumed(r, "arch.vocab = 32768 (the mixtral-8x22b profile"));
  // A stated kv_heads that differs from every profile: no profile has the shape, nothing is assumed.
  row["arch"]["kv_heads"] = 16;
  CHECK(has_reason(map_one_with(row, Unstated::search), "arch.vocab not stated"));
}

TEST_CASE("validation: search takes unstated GPUs per node from the GPU's cluster profiles; strict skips") {
  nlohmann::json row = base_row();
  row["hardware"]["gpus_per_node"] = nullptr;
  const MappedRun strict = map_one_with(row, Unstated::strict);
  CHECK(has_reason(strict, "hardware.gpus_per_node not stated"));
  CHECK(strict.assumed.empty());
  for (const auto& [gpu, cluster] : {std::pair{"A100-SXM4-80GB", "dgx-a100"}, {"H100", "dgx-h100"}, {"B300", "dgx-b300"},
                                     {"H800", "dgx-h800"}, {"AMD MI300X", "mi300x-oam"}}) {
    row["hardware"]["gpu"] = gpu;
    const MappedRun r = map_one_with(row, Unstated::search);
    CHECK_MESSAGE(!has_reason(r, "gpus_per_node"), gpu, ": ", r.skip_reason());
    CHECK_MESSAGE(assumed(r, std::string("hardware.gpus_per_node = 8 (the node of every ") + r.gpu_type), gpu);
    if (r.plan) CHECK(r.plan->cluster.name == cluster);
  }
  // Cluster profiles with that GPU disagreeing on the node size: nothing is assumed.
  ProfileSet mixed = ProfileSet::embedded();
  mixed.add(R"({"kind":"cluster","name":"h100-quad","gpu":"H100-SXM5-80GB","gpus_per_node":4,)"
            R"("intra_node":{"bandwidth_GBps":450},"inter_node":{"bandwidth_GBps":50}})",
            "quad.json");
  row["hardware"]["gpu"] = "H100";
  const auto runs = load_published_runs(nlohmann::json::array({row}).dump(), "runs.json", mixed, Unstated::search);
  REQUIRE(runs.size() == 1);
  CHECK(has_reason(runs.front(), "hardware.gpus_per_node not stated"));
}

TEST_CASE("validation: the Zero Bubble rows' schedule and uneven first / last stages") {
  MappedRun r = map_one_with(zero_bubble_row("1F1B"), Unstated::search);
  REQUIRE(r.scored());
  CHECK(r.plan->parallel.schedule == Schedule::one_f_one_b);
  CHECK(r.plan->parallel.first_stage_layers == 2);  // 22 layers over 8 stages: 2 + 6 x 3 + 2
  CHECK(r.plan->parallel.last_stage_layers == 2);
  r = map_one_with(zero_bubble_row("ZB-1p"), Unstated::search);
  REQUIRE(r.scored());
  CHECK(r.plan->parallel.schedule == Schedule::zero_bubble);
  // 1F1B-I with one layer per chunk (vpp 3 = a middle stage's layers): the embedding and the loss take the place of a
  // layer in the first stage's first chunk and the last stage's last chunk (an explicit per-chunk layout).
  nlohmann::json interleaved = zero_bubble_row("1F1B-I");
  interleaved["parallel"]["vpp_chunks_per_stage"] = 3;
  r = map_one_with(interleaved, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->parallel.schedule == Schedule::interleaved);
  CHECK(r.plan->parallel.vpp == 3);
  CHECK(format_stage_layout(r.plan->parallel.stage_layout) == "0/1/1,1/1/1,1/1/1,1/1/1,1/1/1,1/1/1,1/1/1,1/1/0");
  CHECK(r.plan->parallel.first_stage_layers == 0);
  r = map_one_with(zero_bubble_row("ZB-2p"), Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->parallel.schedule == Schedule::zb_2p);
  CHECK(r.plan->parallel.vpp == 1);
  CHECK_FALSE(r.plan->parallel.post_validation);
  // The rows that state Zero Bubble's optimizer post-validation run it; a 1F1B row stating it stays without.
  nlohmann::json pv = zero_bubble_row("ZB-2p");
  pv["parallel"]["parallel_notes"] = "pure pipeline parallelism; optimizer post-validation";
  r = map_one_with(pv, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->parallel.post_validation);
  auto noted = [](const MappedRun& m, std::string_view text) {
    return std::any_of(m.notes.begin(), m.notes.end(), [&](const std::string& n) { return n.starts_with(text); });
  };
  CHECK(noted(r, "optimizer post-validation (stated): a step in a continuous run"));
  // A ZB-1p row stating it: priced as before (only ZB-2p drops its warm-up fill), and its note says so.
  pv = zero_bubble_row("ZB-1p");
  pv["parallel"]["parallel_notes"] = "pure pipeline parallelism; optimizer post-validation";
  r = map_one_with(pv, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->parallel.schedule == Schedule::zero_bubble);
  CHECK(noted(r, "optimizer post-validation (stated): zb-h1's step does not change with it"));
  CHECK_FALSE(noted(r, "optimizer post-validation (stated): a step in a continuous run"));
  pv = zero_bubble_row("1F1B");
  pv["parallel"]["parallel_notes"] = "optimizer post-validation";
  CHECK_FALSE(map_one_with(pv, Unstated::search).plan->parallel.post_validation);
  // ZB-V (vpp 2 as the rows state it) with one layer per chunk: 14 layers + embedding + loss in 16 chunks; the V puts
  // the first and the last chunk on stage 0, which holds the embedding and the output layer and no transformer layer.
  nlohmann::json v_row = zero_bubble_row("ZB-V");
  v_row["arch"]["layers"] = 14;
  v_row["parallel"]["vpp_chunks_per_stage"] = 2;
  r = map_one_with(v_row, Unstated::search);
  REQUIRE_MESSAGE(r.scored(), r.skip_reason());
  CHECK(r.plan->parallel.schedule == Schedule::zb_v);
  CHECK(r.plan->parallel.chunks_per_stage() == 2);
  CHECK(r.plan->parallel.output_stage() == 0);
  CHECK(format_stage_layout(r.plan->parallel.stage_layout) == "0/0,1/1,1/1,1/1,1/1,1/1,1/1,1/1");
  // The 22-layer row splits 2 + 6 x 3 + 2: odd stages do not halve into the V's chunks, a reason not a crash.
  nlohmann::json odd = zero_bubble_row("ZB-V");
  odd["parallel"]["vpp_chunks_per_stage"] = 2;
  CHECK(has_reason(map_one_with(odd, Unstated::search),
                   "schedule zb-v places 2 chunks on every stage (its V), so every stage's layers must be even"));
  CHECK(has_reason(map_one_with(zero_bubble_row("ZB-H2"), Unstated::search),
                   "schedule ZB-H2 is not modelled (1F1B, 1F1B-I, ZB-H1, ZB-2p, ZB-V and DualPipeV are)"));
}

// Qi et al. 2023 Table 4, the 1.5B model on 8 stages, 1F1B at 2 and 4 microbatches of 6: 11 and 18 GB. Stage 1 (3
// layers) holds min(m, 7) microbatches, so each extra layer-microbatch costs (18 - 11) / 6 = 1.17 GB, Korthikanti et
// al.'s unfused sbh(34 + 5as/h) = 1.24 GB; flash attention's 34 sbh (0.48 GB) is 2.4x too small.
TEST_CASE("validation: the Zero Bubble rows store unfused attention's scores, as their memory growth measures") {
  nlohmann::json row = zero_bubble_row("1F1B");
  auto stage1_activations = [&](int64_t microbatches) {
    row["parallel"]["global_batch_seqs"] = 6 * microbatches;
    const MappedRun r = map_one_with(row, Unstated::search);
    REQUIRE_MESSAGE(r.scored(), r.skip_reason());
    CHECK(r.plan->training.attention == AttentionKernel::unfused);
    CHECK(r.plan->parallel.recompute == Recompute::none);
    return stage_memory(*r.plan, 1).activations;
  };
  const double per_layer_microbatch = (stage1_activations(4) - stage1_activations(2)) / (2 * 3);
  const double s = 1024, b = 6, h = 2304, a = 24;
  CHECK(per_layer_microbatch == doctest::Approx(s * b * h * (34 + 5 * a * s / h)).epsilon(1e-9));
  CHECK(per_layer_microbatch == doctest::Approx((18e9 - 11e9) / 6).epsilon(0.07));
}

TEST_CASE("validation: strict schema errors name the JSON path; a row's own skip the row, the file's fail the load") {
  auto fails_with = [](const nlohmann::json& doc, std::string_view what) {
    try {
      load_published_runs(doc.dump(), "runs.json", profiles());
    } catch (const InputError& e) {
      const std::string msg = e.what();
      CHECK_MESSAGE(msg.find(what) != std::string::npos, msg);
      return true;
    }
    return false;
  };
  // The bad row is skipped with the error as its reason ("not read: ..."); a good row beside it is still scored.
  auto skips_with = [](const nlohmann::json& bad, std::string_view what) {
    nlohmann::json good = base_row();
    good["id"] = "good";
    const std::vector<MappedRun> runs = load_published_runs(nlohmann::json::array({bad, good}).dump(), "runs.json", profiles());
    REQUIRE(runs.size() == 2);
    CHECK(runs[1].scored());
    CHECK_FALSE(runs[0].scored());
    CHECK_MESSAGE(runs[0].skip_reason().find(what) != std::string::npos, runs[0].skip_reason());
    return runs[0].skip_reason().starts_with("not read: runs.json: /0/");
  };
  nlohmann::json row = base_row();
  row["parallel"]["tp_size"] = 8;
  CHECK(skips_with(row, "runs.json: /0/parallel/tp_size: unknown key"));
  row = base_row();
  row["parallel"]["tp"] = "8";
  CHECK(skips_with(row, "/0/parallel/tp: expected an integer"));
  row = base_row();
  row["measured"]["iter_time_s"] = -1;
  CHECK(skips_with(row, "/0/measured/iter_time_s"));
  row = base_row();
  row["derived"]["iter_time_s"] = "fast";
  row["measured"]["iter_time_s"] = nullptr;
  CHECK(skips_with(row, "/0/derived/iter_time_s"));
  CHECK(fails_with(nlohmann::json::array({base_row(), base_row()}), "/1/id: duplicate run id 'r1'"));
  CHECK(fails_with(nlohmann::json::object(), "expected a JSON array"));
  row = base_row();
  row["measured"]["other"] = {{"peak_memory_GiB", -3}};
  CHECK(skips_with(row, "/0/measured/other/peak_memory_GiB: expected a number"));
  row["measured"]["other"] = {{"peak_memory_GiB", "77"}};
  CHECK(skips_with(row, "/0/measured/other/peak_memory_GiB: expected a number"));
  row = base_row();
  row.erase("arch");
  CHECK(skips_with(row, "/0/arch: missing required key"));
}

// torchtitan prints its peak in GiB (the caching allocator's max reserved bytes); the rows keep it as printed in
// measured.other.peak_memory_GiB, and validate compares in bytes (2^30 per GiB), measured.memory_per_gpu_GB first.
TEST_CASE("validation: the peak memory torchtitan prints, in GiB") {
  nlohmann::json row = base_row();
  row["measured"]["memory_per_gpu_GB"] = nullptr;
  row["measured"]["other"] = {{"peak_memory_GiB", 77.0}, {"technique", "FSDP + torch.compile"}};
  MappedRun r = map_one(row);
  REQUIRE(r.measured_memory_bytes);
  CHECK(*r.measured_memory_bytes == doctest::Approx(77.0 * 1073741824.0));
  row["measured"]["memory_per_gpu_GB"] = 60.5;  // the schema's field wins
  r = map_one(row);
  CHECK(*r.measured_memory_bytes == doctest::Approx(60.5e9));
  row["measured"]["memory_per_gpu_GB"] = nullptr;
  row["measured"]["other"] = {{"technique", "FSDP"}};  // no peak printed
  CHECK_FALSE(map_one(row).measured_memory_bytes);

  const RatioSummary s = summarize_ratios({0.5, 1.0, 0.9});
  CHECK(s.count == 3);
  CHECK(s.min == doctest::Approx(0.5));
  CHECK(s.max == doctest::Approx(1.0));
  CHECK(s.mean == doctest::Approx(0.8));
  CHECK(summarize_ratios({}).count == 0);
}

// torchtitan's 2024 loss_fn (train.py@9dec370): F.cross_entropy on pred.float(), not compiled; its 2025 benchmarks
// compile the loss with the model, and the other stacks fuse it.
TEST_CASE("validation: torchtitan's 2024 rows map to the eager cross entropy") {
  std::string note;
  CHECK_FALSE(map_fused_cross_entropy("pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md (torchtitan team, "
                                      "Dec 2024; torch 1963fc8, torchao eab345c, torchtitan 9dec370)", &note));
  CHECK(note.find("F.cross_entropy") != std::string::npos);
  CHECK_FALSE(map_fused_cross_entropy("pytorch/torchtitan docs/performance.md 'Llama 3 performance numbers' (64 A100 "
                                      "80GB, FSDP2), Apr 2024"));
  CHECK(map_fused_cross_entropy("pytorch/torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md (Trainy on "
                                "WhiteFiber, June 2025; torchtitan e7c0cae)"));
  CHECK(map_fused_cross_entropy("pytorch/ao torchtitan-based float8/MX training e2e benchmark (Llama3-8B, single node, 8 GPUs)"));
  CHECK(map_fused_cross_entropy("Korthikanti et al. 2022, Table 5"));
  nlohmann::json row = base_row();
  row["source"] = "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md (torchtitan team, Dec 2024)";
  const MappedRun eager = map_one(row), fused = map_one(base_row());
  REQUIRE(eager.plan);
  REQUIRE(fused.plan);
  CHECK_FALSE(eager.plan->training.fused_cross_entropy);
  CHECK(fused.plan->training.fused_cross_entropy);
}

// Uncompiled element-wise ops (eager_elementwise.hpp): rows that state they ran without torch.compile, and
// torchtitan's 2024 rows that state nothing (its presets' compile = false); rows that state torch.compile and every
// other stack keep the fused count.
TEST_CASE("validation: rows run without torch.compile map to uncompiled element-wise ops") {
  const std::string dec24 = "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md (torchtitan team, Dec 2024)";
  const std::string apr24 = "pytorch/torchtitan docs/performance.md 'Llama 3 performance numbers' (64 A100 80GB, FSDP2), Apr 2024";
  std::string note;
  CHECK_FALSE(map_compiled_elementwise(dec24, "FSDP (eager)", "", &note));
  CHECK(note.find("(eager)") != std::string::npos);
  CHECK(map_compiled_elementwise(dec24, "FSDP + torch.compile", ""));
  CHECK(map_compiled_elementwise(dec24, "FSDP + torch.compile + Float8", ""));
  CHECK_FALSE(map_compiled_elementwise(apr24, "FSDP2 1D", "torch.compile not used (preset compile=false)."));
  CHECK_FALSE(map_compiled_elementwise(apr24, "FSDP2 1D", ""));  // 2024 torchtitan, nothing stated: its preset
  CHECK(map_compiled_elementwise("pytorch/torchtitan docs/performance.md (405B on 128 H100), PR #554/#556 (Aug 2024)",
                                 "2D FSDP+TP, optimizations: None",
                                 "Per-row torch.compile not stated (preset has compile=true)."));
  CHECK_FALSE(map_compiled_elementwise("someone's fork", "FSDP", "trained without torch.compile"));
  CHECK(map_compiled_elementwise("pytorch/torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md (June 2025)",
                                 "FSDP + torch.compile + Float8", ""));
  CHECK(map_compiled_elementwise("pytorch/ao torchtitan-based float8/MX training e2e benchmark (2024)", "", ""));
  CHECK(map_compiled_elementwise("Korthikanti et al. 2022, Table 5", "", ""));
  CHECK(map_compiled_elementwise("MosaicML llm-foundry benchmarks (2023)", "", ""));

  nlohmann::json row = base_row();
  row["source"] = dec24;
  row["measured"]["other"] = {{"technique", "FSDP (eager)"}};
  const MappedRun eager = map_one(row);
  row["measured"]["other"] = {{"technique", "FSDP + torch.compile"}};
  const MappedRun compiled = map_one(row), base = map_one(base_row());
  REQUIRE(eager.plan);
  REQUIRE(compiled.plan);
  REQUIRE(base.plan);
  CHECK_FALSE(eager.plan->training.compiled_elementwise);
  CHECK(compiled.plan->training.compiled_elementwise);
  CHECK(base.plan->training.compiled_elementwise);
}

TEST_CASE("validation: summary statistics") {
  const ErrorSummary s = summarize({0.1, -0.2, 0.05, -0.01}, {"a", "b", "c", "d"});
  CHECK(s.count == 4);
  CHECK(s.mean_abs == doctest::Approx(0.09));
  CHECK(s.median_abs == doctest::Approx(0.075));
  CHECK(s.worst_abs == doctest::Approx(0.2));
  CHECK(s.worst_id == "b");
  CHECK(s.mean_signed == doctest::Approx(-0.015));
}

// Accuracy regression on the shared file. Targets (issue 4): all 45 rows mean <= 6%, worst <= 15%; the 8 Korthikanti
// et al. 2022 Table 5 rows mean <= 3%, worst <= 8%. The bounds below are the current measured values plus a small
// margin (docs/accuracy.md), so any regression fails; where the target is not met yet the test says so.
TEST_CASE("validation: accuracy on validation/published-runs.json") {
  const std::vector<MappedRun> runs = test::vendored_runs("published-runs.json");
  const ValidationReport rep = score_runs(runs);
  CHECK(runs.size() >= 67);
  CHECK(rep.overall.count == 45);
  MESSAGE("all: mean ", rep.overall.mean_abs, " worst ", rep.overall.worst_abs, " (", rep.overall.worst_id, ")");
  CHECK(rep.overall.mean_abs <= 0.045);   // target 0.06 (met: 0.043; the MosaicML H100 rows dominate, docs/accuracy.md)
  CHECK(rep.overall.worst_abs <= 0.20);   // target 0.15 (not met: the MosaicML H100 rows, 13B 0.193)
  std::vector<double> errs;
  std::vector<std::string> ids;
  for (const RunResult& r : rep.rows) {
    const std::string& id = r.run->id;
    if (r.run->scored() && id.rfind("korthikanti22_", 0) == 0 && id.find("_dp8_") == std::string::npos) {
      errs.push_back(r.error);
      ids.push_back(id);
    }
  }
  const ErrorSummary k = summarize(errs, ids);
  MESSAGE("Korthikanti: mean ", k.mean_abs, " worst ", k.worst_abs, " (", k.worst_id, ")");
  CHECK(k.count == 8);
  CHECK(k.mean_abs <= 0.023);  // target 0.03 (met: 0.021)
  CHECK(k.worst_abs <= 0.042); // target 0.08 (met: 0.041)
  for (const auto& [gpu, s] : rep.by_gpu) {
    MESSAGE(gpu, ": mean ", s.mean_abs, " worst ", s.worst_abs);
    // The A100 rows (both profiles fitted to these rows) are all within the worst-row target; the H100 rows are not.
    if (gpu == "A100-SXM4-80GB") CHECK(s.mean_abs <= 0.037);
    if (gpu == "A100-SXM4-80GB") CHECK(s.worst_abs <= 0.15);  // 0.148, 529.6B ZeRO-3 micro-batch 4
    if (gpu == "A100-SXM4-40GB") CHECK(s.worst_abs <= 0.15);  // 0.106
    if (gpu == "A100-SXM4-40GB") CHECK(s.mean_abs <= 0.04);
  }
}

// torchtitan's "selective layer AC" (every 2nd block fully checkpointed, the preset selective_ac_option "2"): full
// recompute of half of each chunk's layers. The Korthikanti row's mesh: 96 layers over pp 8 x vpp 3 = 4 per chunk,
// so 2 of each chunk's 4, stated among the assumed values.
TEST_CASE("validation: selective layer AC maps to full recompute of every 2nd layer (recompute_layers)") {
  nlohmann::json row = base_row();
  row["recompute"] = "selective layer AC";
  const MappedRun r = map_one(row);
  REQUIRE(r.scored());
  CHECK(r.plan->parallel.recompute == Recompute::full);
  CHECK(r.plan->parallel.recompute_layers == 2);
  bool said = false;
  for (const std::string& a : r.assumed) said = said || a.find("selective_ac_option '2'") != std::string::npos;
  CHECK(said);
}

// Vendor tables print a throughput, not a step time: the step follows from the global batch, the sequence length and
// the GPU count, taken in the order total tokens/s, tokens/s per GPU, samples/s, and marked derived.
TEST_CASE("validation: a row with a throughput and no iteration time is scored from global batch x seq / throughput") {
  const double tokens = 64.0 * 2048.0;  // base_row(): global batch 64, seq 2048, 64 GPUs
  nlohmann::json row = base_row();
  row["measured"]["iter_time_s"] = nullptr;
  row["measured"]["tokens_per_s_per_gpu"] = 150.0;
  MappedRun r = map_one(row);
  REQUIRE(r.scored());
  CHECK(r.step_time_derived);
  CHECK(*r.measured_step_time_s == doctest::Approx(tokens / (150.0 * 64)));
  row["measured"]["tokens_per_s_total"] = 9533.0;  // the total wins over the per-GPU figure
  r = map_one(row);
  CHECK(*r.measured_step_time_s == doctest::Approx(tokens / 9533.0));
  row["measured"]["tokens_per_s_total"] = nullptr;
  row["measured"]["tokens_per_s_per_gpu"] = nullptr;
  row["measured"]["samples_per_s"] = 4.0;
  r = map_one(row);
  CHECK(*r.measured_step_time_s == doctest::Approx(64.0 / 4.0));
  // A stated iteration time is kept as measured.
  row["measured"]["iter_time_s"] = 13.75;
  r = map_one(row);
  CHECK_FALSE(r.step_time_derived);
  CHECK(*r.measured_step_time_s == 13.75);
}

// A field that names a feature only to deny it ("no FP8", "activation checkpointing: none", "A2A overlap disabled")
// maps to its absence, not to the feature: the words around the phrase, within its clause, decide.
TEST_CASE("validation: denied phrases map to the feature's absence (recompute, fp8, overlaps)") {
  Recompute rc = Recompute::selective;
  for (const char* none : {"no activation checkpointing", "activation checkpointing: none", "activation checkpointing off",
                           "none (no checkpointing)", "recompute disabled", "no full recompute", "disabled"}) {
    CAPTURE(none);
    REQUIRE(map_recompute(none, rc));
    CHECK(rc == Recompute::none);
  }
  for (const auto& [text, want] : {std::pair<const char*, Recompute>{"full recompute, uniform, 1 layer", Recompute::full},
                                   {"activation checkpointing: selective (core attention)", Recompute::selective},
                                   {"selective (not full)", Recompute::selective},
                                   {"full activation checkpointing", Recompute::full}}) {
    CAPTURE(text);
    REQUIRE(map_recompute(text, rc));
    CHECK(rc == want);
  }
  Precision p = Precision::fp8;
  for (const char* bf16 : {"BF16 (FP8 disabled)", "BF16; no FP8", "BF16 (not FP8)", "bf16, fp8 off"}) {
    CAPTURE(bf16);
    REQUIRE(map_precision(bf16, p));
    CHECK(p == Precision::bf16);
  }
  CHECK(map_precision("FP8 (delayed scaling), BF16 master weights", p));
  CHECK(p == Precision::fp8);
  // PyTorch's dtype names.
  CHECK(map_precision("torch.bfloat16 autocast", p));
  CHECK(p == Precision::bf16);
  CHECK(map_precision("float16 (AMP)", p));
  CHECK(p == Precision::fp16);
  // The MoE recipes' notes: "no EP A2A overlap" and "A2A overlap disabled" leave the all-to-alls blocking.
  nlohmann::json row = base_row();
  row["arch"].update({{"experts", 8}, {"top_k", 2}, {"moe_ffn", 49152}, {"attention", "GQA/MHA"}});
  row["arch"]["ffn_type"] = "SwiGLU MoE (8 experts, top-2)";
  row["parallel"]["dp"] = 8;
  row["parallel"]["pp"] = 1;
  row["parallel"]["vpp_chunks_per_stage"] = nullptr;
  row["parallel"]["ep"] = 8;
  row["parallel"]["global_batch_seqs"] = 64;
  row["hardware"]["num_gpus"] = 64;
  for (const auto& [notes, overlap] : {std::pair<const char*, bool>{"ETP=1; 1F1B EP A2A overlap", true},
                                       {"ETP=1; no EP A2A overlap", false},
                                       {"ETP=1; A2A overlap disabled", false}}) {
    CAPTURE(notes);
    row["parallel"]["parallel_notes"] = notes;
    const MappedRun r = map_one(row);
    REQUIRE(r.plan);
    CHECK(r.plan->parallel.overlap_ep_comm == overlap);
  }
}

// The fp8 recipes as vendor tables spell them, and the default of the stack that ran an unnamed one.
TEST_CASE("validation: fp8 recipe spellings, and an unnamed recipe as its stack's default") {
  for (const auto& [text, want] : {std::pair<const char*, Fp8Recipe>{"FP8 DS", Fp8Recipe::delayed},
                                   {"FP8_DS", Fp8Recipe::delayed},
                                   {"MX-FP8", Fp8Recipe::mxfp8},
                                   {"FP8 MX", Fp8Recipe::mxfp8},
                                   {"FP8 (128x128 blocks)", Fp8Recipe::blockwise},
                                   {"FP8 subchannel scaling", Fp8Recipe::blockwise},
                                   {"FP8 CS", Fp8Recipe::tensorwise},
                                   {"FP8 row-wise", Fp8Recipe::rowwise}}) {
    CAPTURE(text);
    CHECK(map_fp8_recipe(text) == want);
  }
  std::vector<std::string> notes;
  CHECK(map_fp8_recipe("FP8", &notes, true) == Fp8Recipe::delayed);  // Megatron-Core's --fp8-recipe default
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "fp8 recipe not named: delayed (Megatron-Core / Transformer Engine's default)");
  CHECK(map_fp8_recipe("FP8", nullptr, false) == Fp8Recipe::tensorwise);  // torchao's
  // A Megatron-Core row without a recipe maps to delayed scaling.
  nlohmann::json row = base_row();
  row["source"] = "NVIDIA Megatron-LM performance table (Megatron-Core)";
  row["precision"] = "FP8";
  row["hardware"]["gpu"] = "H100-SXM5-80GB";
  const MappedRun r = map_one(row);
  REQUIRE(r.plan);
  CHECK(r.plan->training.fp8_recipe == Fp8Recipe::delayed);
}

// Null structured fields take what the parallel notes state (each noted), rather than a silent default.
TEST_CASE("validation: parallel notes give ep, etp, sequence parallelism and the optimizer sharding a null field lacks") {
  nlohmann::json row = base_row();
  row["arch"].update({{"experts", 128}, {"top_k", 8}, {"moe_ffn", 1536}, {"attention", "GQA/MHA"}});
  row["arch"]["ffn_type"] = "SwiGLU MoE (128 experts, top-8)";
  row["parallel"].update({{"tp", 2}, {"pp", 1}, {"dp", 32}, {"vpp_chunks_per_stage", nullptr}, {"ep", nullptr},
                          {"sequence_parallel", nullptr}, {"zero_stage", nullptr}, {"global_batch_seqs", 64}});
  for (const char* notes : {"EP8, ETP1, SP on, distributed optimizer", "EP=8; ETP: 1; sequence parallel enabled; ZeRO-1",
                            "--expert-model-parallel-size 8 --expert-tensor-parallel-size 1 --sequence-parallel "
                            "--use-distributed-optimizer"}) {
    CAPTURE(notes);
    row["parallel"]["parallel_notes"] = notes;
    const MappedRun r = map_one(row);
    CAPTURE(r.skip_reason());
    REQUIRE(r.plan);
    CHECK(r.plan->parallel.ep == 8);
    CHECK(r.plan->parallel.etp == 1);
    CHECK(r.plan->parallel.sequence_parallel);
    CHECK(r.plan->parallel.zero_stage == 1);
  }
  row["parallel"]["parallel_notes"] = "EP8, ETP=1, SP on, FSDP";
  CHECK(map_one(row).plan->parallel.zero_stage == 3);
  row["parallel"]["parallel_notes"] = "EP8, ETP=1, SP on, HSDP (hybrid sharding)";
  CHECK(has_reason(map_one(row), "HSDP"));
  // A stated field wins over the notes, and a denied phrase states nothing.
  row["parallel"].update({{"ep", 4}, {"zero_stage", 0}, {"sequence_parallel", true}});
  row["parallel"]["parallel_notes"] = "EP8; no distributed optimizer";
  const MappedRun stated = map_one(row);
  REQUIRE(stated.plan);
  CHECK(stated.plan->parallel.ep == 4);
  CHECK(stated.plan->parallel.zero_stage == 0);
}

// Free-text spellings of vendor tables: a gated SiLU MLP is SwiGLU; "AC: none" and "N/A" are no recompute; a GPU
// count in the source is not its year (the attention rule reads the first 20xx year).
TEST_CASE("validation: gated SiLU, recompute none spellings, and a GPU count in the source that is not a year") {
  FfnType f = FfnType::gelu;
  for (const char* text : {"SiLU gated MLP", "gated SiLU", "Swish-gated FFN"}) {
    CAPTURE(text);
    REQUIRE(map_ffn_type(text, f));
    CHECK(f == FfnType::swiglu);
  }
  Recompute rc = Recompute::full;
  for (const char* text : {"AC: none", "N/A", "activation checkpointing: off"}) {
    CAPTURE(text);
    REQUIRE(map_recompute(text, rc));
    CHECK(rc == Recompute::none);
  }
  AttentionKernel a = map_attention("Vendor benchmark on 2016 MI300X GPUs (2025)", "");
  CHECK(a != AttentionKernel::unfused);  // 2025, not 2016: FlashAttention-era
  CHECK(map_attention("Megatron-LM 2021 paper", "") == AttentionKernel::unfused);
}

// Attention as model cards write it: a null kv_heads with the notes' KV head count or "MHA"; MLA spelled out with
// Hugging Face's config names; "no MTP" is none.
TEST_CASE("validation: kv heads, MLA and MTP from the model card's own words") {
  nlohmann::json row = base_row();
  row["arch"]["kv_heads"] = nullptr;
  row["arch"]["arch_notes"] = "GQA (8 KV heads)";
  MappedRun r = map_one(row);
  REQUIRE(r.plan);
  CHECK(r.plan->model.kv_heads == 8);
  row["arch"]["arch_notes"] = "num_key_value_heads 16";
  CHECK(map_one(row).plan->model.kv_heads == 16);
  row["arch"]["arch_notes"] = "MHA";
  CHECK(map_one(row).plan->model.kv_heads == 96);
  row = base_row();
  row["arch"].update({{"experts", 256}, {"top_k", 8}, {"shared_experts", 1}, {"moe_ffn", 2048},
                      {"attention", "Multi-head Latent Attention"}});
  row["arch"]["ffn_type"] = "SwiGLU MoE (256 routed + 1 shared, top-8)";
  row["arch"]["arch_notes"] =
      "q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128; no MTP";
  row["parallel"]["ep"] = 1;
  r = map_one(row);
  CAPTURE(r.skip_reason());
  REQUIRE(r.plan);
  CHECK(r.plan->model.kv_lora_rank == 512);
  CHECK(r.plan->model.q_lora_rank == 1536);
  CHECK(r.plan->model.qk_rope_head_dim == 64);
  CHECK(r.plan->model.head_dim() == 128);
  CHECK(r.plan->model.mtp_layers == 0);
}

TEST_CASE("validation: HSDP and sliding-window attention are skip reasons; torchtitan's option=op is per-op recompute") {
  nlohmann::json row = base_row();
  row["parallel"]["fsdp"] = true;
  row["parallel"]["parallel_notes"] = "HSDP: FSDP within each node, replicated across nodes";
  CHECK(has_reason(map_one(row), "HSDP"));
  row = base_row();
  row["arch"]["arch_notes"] = "sliding window attention on every other layer";
  CHECK(has_reason(map_one(row), "sliding window size not stated"));
  Recompute rc = Recompute::none;
  REQUIRE(map_recompute("selective, selective_ac_option=op", rc));
  CHECK(rc == Recompute::selective_op);
}

// HSDP stated with a degree is priced: the replicas from the replicate degree, else dp over the shard degree; HSDP
// without either, or with degrees that do not split dp, stays a skip reason saying what is missing.
TEST_CASE("validation: HSDP with its replicate or shard degree in the parallel notes is priced") {
  nlohmann::json row = base_row();
  row["parallel"].update({{"tp", 8}, {"pp", 1}, {"dp", 8}, {"vpp_chunks_per_stage", nullptr}, {"zero_stage", nullptr},
                          {"global_batch_seqs", 64}, {"grad_accum", 8}});
  row["recompute"] = "full";
  for (const char* notes :
       {"HSDP (replicate 4, shard 2)", "hybrid shard over 2 GPUs", "HSDP, data_parallel_replicate_degree = 4"}) {
    CAPTURE(notes);
    row["parallel"]["parallel_notes"] = notes;
    const MappedRun r = map_one(row);
    CAPTURE(r.skip_reason());
    REQUIRE(r.plan);
    CHECK(r.plan->parallel.dp_replicate == 4);
    CHECK(r.plan->parallel.dp_shard() == 2);
    CHECK(r.plan->parallel.zero_stage == 3);  // HSDP shards as FSDP within each replica
  }
  row["parallel"]["parallel_notes"] = "HSDP: FSDP within each node, replicated across nodes";
  CHECK(has_reason(map_one(row), "without a replicate or shard degree it can read"));
  row["parallel"]["parallel_notes"] = "HSDP (replicate 4, shard 4)";
  CHECK(has_reason(map_one(row), "HSDP replicate 4 x shard 4 does not split dp 8"));
  row["parallel"]["parallel_notes"] = "HSDP (replicate 8)";  // one rank per shard group: nothing sharded
  CHECK(has_reason(map_one(row), "dp_replicate 8 = dp with cp 1 leaves one rank per shard group"));
}

// An NVL72 rack written as one 72-GPU node maps onto the rack-scale cluster (4 GPUs per tray, 72 per NVLink domain).
TEST_CASE("validation: gpus_per_node 72 on GB200 is the NVL72 NVLink domain") {
  nlohmann::json row = base_row();
  row["hardware"]["gpu"] = "GB200 NVL72";
  row["hardware"]["gpus_per_node"] = 72;
  row["hardware"]["inter_node_per_node"] = nullptr;
  const MappedRun r = map_one(row);
  CAPTURE(r.skip_reason());
  REQUIRE(r.plan);
  CHECK(r.plan->cluster.name == "gb200-nvl72");
  CHECK(r.plan->cluster.gpus_per_node == 4);
  bool noted = false;
  for (const auto& n : r.notes) noted = noted || n.starts_with("hardware.gpus_per_node 72: the NVLink domain of gb200-nvl72");
  CHECK(noted);
}

// HSDP stated in the vocabulary of the frameworks (PyTorch FSDP1's HYBRID_SHARD, torchtitan's degree keys,
// Megatron-Core's distributed optimizer instances) or with the degree before its word ("2 replicas", "4-way
// sharding") is priced with its replicas; a hybrid sharding whose degree cannot be read, or a degree below 1, is a
// skip naming it; denials do not map.
TEST_CASE("validation: HSDP named by framework vocabulary, degrees before their word, and invalid degrees") {
  nlohmann::json row = base_row();
  row["parallel"].update({{"tp", 8}, {"pp", 1}, {"dp", 8}, {"vpp_chunks_per_stage", nullptr}, {"zero_stage", nullptr},
                          {"global_batch_seqs", 64}, {"grad_accum", 8}});
  row["recompute"] = "full";
  // Each statement of 2 replicas, and the ZeRO stage it names: FSDP's full sharding 3, _HYBRID_SHARD_ZERO2 2,
  // Megatron's distributed optimizer instances 1.
  struct Stated {
    const char* notes;
    int zero;
  };
  for (const auto& [notes, zero] :
       {Stated{"FSDP HYBRID_SHARD (replicate 2, shard 4)", 3}, Stated{"ShardingStrategy.HYBRID_SHARD with 2 replicas", 3},
        Stated{"data_parallel_replicate_degree = 2, data_parallel_shard_degree = 4", 3},
        Stated{"dp_replicate=2 dp_shard=4", 3}, Stated{"hybrid sharding: 2 replicas", 3},
        Stated{"2 replicas of 4-GPU FSDP (HSDP)", 3}, Stated{"HSDP with 4-way sharding and 2-way replication", 3},
        Stated{"HSDP (replicate 2, shard -1)", 3}, Stated{"_HYBRID_SHARD_ZERO2 (replicate 2)", 2},
        Stated{"distributed optimizer, --num-distributed-optimizer-instances 2", 1},
        Stated{"Megatron distributed optimizer instances 2", 1}}) {
    CAPTURE(notes);
    row["parallel"]["parallel_notes"] = notes;
    const MappedRun r = map_one(row);
    CAPTURE(r.skip_reason());
    REQUIRE(r.plan);
    CHECK(r.plan->parallel.dp_replicate == 2);
    CHECK(r.plan->parallel.zero_stage == zero);
  }
  row["parallel"]["parallel_notes"] = "FSDP HYBRID_SHARD within each node";
  CHECK(has_reason(map_one(row), "without a replicate or shard degree it can read"));
  row["parallel"]["parallel_notes"] = "HSDP 2x4";
  CHECK(has_reason(map_one(row), "without a replicate or shard degree it can read"));
  row["parallel"]["parallel_notes"] = "HSDP (replicate 0, shard 4)";
  CHECK(has_reason(map_one(row), "HSDP replicate degree 0 is not a degree"));
  row["parallel"]["parallel_notes"] = "HSDP (replicate -2, shard 4)";
  CHECK(has_reason(map_one(row), "HSDP replicate degree -2 is not a degree"));
  row["parallel"]["parallel_notes"] = "HSDP (shard 8)";
  REQUIRE(map_one(row).plan);
  bool one_replica = false;
  for (const auto& n : map_one(row).notes) {
    one_replica = one_replica || n.find("as 1 replica of 8 sharded ranks") != std::string::npos;
  }
  CHECK(one_replica);
  for (const char* notes : {"no HSDP, FSDP", "HSDP disabled; FSDP", "FSDP, HYBRID_SHARD: off",
                            "FSDP (no dp_replicate)"}) {
    CAPTURE(notes);
    row["parallel"]["parallel_notes"] = notes;
    const MappedRun r = map_one(row);
    CAPTURE(r.skip_reason());
    REQUIRE(r.plan);
    CHECK(r.plan->parallel.dp_replicate == 1);
  }
}
