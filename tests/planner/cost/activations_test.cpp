// Tests for planner/activations: each mode pinned to Korthikanti et al. 2022 Table 2 (GPT-3 175B shapes).
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/cost/activations.hpp"
#include "planner/test_plans.hpp"

using namespace parplan;

namespace {
const double s = 2048, b = 1, h = 12288, a = 96, t = 8;
ActivationShape shape(int64_t tp, bool sp, Recompute r) {
  ActivationShape x;
  x.micro_batch = 1;
  x.seq = 2048;
  x.tp = tp;
  x.sequence_parallel = sp;
  x.recompute = r;
  x.attention = AttentionKernel::unfused;
  x.bytes_per_element = 2;
  return x;
}
}  // namespace

TEST_CASE("Korthikanti 2022 Table 2: activation bytes per layer for every mode") {
  const ModelSpec& m = test::profiles().model("gpt3-175b", "t");
  const double sbh = s * b * h;
  CHECK(layer_activation_bytes(m, shape(1, false, Recompute::none)).total ==
        doctest::Approx(sbh * (34 + 5 * a * s / h)).epsilon(1e-12));
  CHECK(layer_activation_bytes(m, shape(8, false, Recompute::none)).total ==
        doctest::Approx(sbh * (10 + 24 / t + 5 * a * s / (h * t))).epsilon(1e-12));
  CHECK(layer_activation_bytes(m, shape(8, true, Recompute::none)).total ==
        doctest::Approx(sbh / t * (34 + 5 * a * s / h)).epsilon(1e-12));
  CHECK(layer_activation_bytes(m, shape(8, false, Recompute::selective)).total ==
        doctest::Approx(sbh * (10 + 24 / t)).epsilon(1e-12));
  CHECK(layer_activation_bytes(m, shape(8, true, Recompute::selective)).total ==
        doctest::Approx(sbh * 34 / t).epsilon(1e-12));
  CHECK(layer_activation_bytes(m, shape(8, false, Recompute::full)).total == doctest::Approx(2 * sbh).epsilon(1e-12));
  CHECK(layer_activation_bytes(m, shape(8, true, Recompute::full)).total == doctest::Approx(2 * sbh / t).epsilon(1e-12));
}

TEST_CASE("Korthikanti 2022: for 175B, sequence parallel + selective recompute cut per-layer activations 5.4x vs tp alone") {
  // Sec. 5: the 5as/h term (= 5*96*2048/12288 = 80) dominates; SP + selective cut memory 5x versus tp alone.
  const ModelSpec& m = test::profiles().model("gpt3-175b", "t");
  const double tp_only = layer_activation_bytes(m, shape(8, false, Recompute::none)).total;
  const double best = layer_activation_bytes(m, shape(8, true, Recompute::selective)).total;
  CHECK(tp_only / best == doctest::Approx((10 + 3 + 10) / (34.0 / 8)).epsilon(1e-9));
  CHECK(tp_only / best > 5.0);
}

TEST_CASE("flash attention, GQA, SwiGLU and context parallel generalise the terms") {
  const ModelSpec& m = test::profiles().model("llama3-70b", "t");  // no dropout, GQA 64/8, SwiGLU 28672
  ActivationShape x = shape(8, true, Recompute::none);
  x.seq = 8192;
  x.attention = AttentionKernel::flash;
  const LayerActivationBytes r = layer_activation_bytes(m, x);
  const double sbh = 8192.0 * 8192.0;
  CHECK(r.replicated == doctest::Approx(sbh * 8 / 8));  // 4 x 2 bytes, no masks, /t with SP
  CHECK(r.tp_sharded == doctest::Approx(sbh * 2 * (1 + 2 * 0.125 + 1 + 3 * 3.5) / 8));
  CHECK(r.attention_core == doctest::Approx(4.0 * 64 * 8192 / 8));
  ActivationShape c = x;
  c.cp = 2;
  CHECK(layer_activation_bytes(m, c).total == doctest::Approx(r.total / 2));
}

TEST_CASE("output layer holds fp32 logits 4sbV/t") {
  const ModelSpec& m = test::profiles().model("gpt3-175b", "t");
  ActivationShape x = shape(8, true, Recompute::selective);
  CHECK(output_layer_activation_bytes(m, x) == doctest::Approx(4 * s * b * h / t + 4 * s * b * 51200 / t));
}

// PyTorch's F.cross_entropy on fp32 logits (torchtitan's 2024 loss_fn): beside the saved log-probabilities, nll_loss's
// backward writes a zeroed fp32 gradient of the logits' size and log_softmax's backward a new one, both alive at once:
// 2 x 4 bytes x tokens x vocab / tp. Llama 3 8B at local batch 2 x 8192 tokens (the torchtitan 8-GPU FSDP rows):
// 2 x 4 x 16384 x 128256 = 16,810,770,432 bytes; a fused cross entropy (Megatron's) holds nothing more.
TEST_CASE("eager cross entropy: its backward holds two more fp32 tokens x vocab tensors") {
  const ModelSpec m = test::profiles().model("llama3-8b", "test");
  REQUIRE(m.vocab == 128256);
  ActivationShape x = shape(1, false, Recompute::selective_op);
  x.seq = 8192;
  x.micro_batch = 2;
  CHECK(loss_backward_working_set_bytes(m, x) == 0.0);  // fused: the default
  x.fused_cross_entropy = false;
  CHECK(loss_backward_working_set_bytes(m, x) == doctest::Approx(16'810'770'432.0));
  x.tp = 8;  // vocab-parallel: each rank holds its vocab shard
  x.cp = 2;  // context parallel: each rank holds its tokens
  CHECK(loss_backward_working_set_bytes(m, x) == doctest::Approx(16'810'770'432.0 / 16));
}

// The same, measured: bench/gpu/loss_memory.py on an H100 (bench/gpu/results/h100-2026-11-26/loss_memory.json) ran
// torchtitan's eager loss (bf16 logits, .float(), F.cross_entropy) and recorded what the forward keeps (the fp32
// log-probabilities, 4 bytes per token and vocabulary entry) and the backward's peak above the inputs: the peak less what
// was kept is the working set modelled here, at each measured token count.
TEST_CASE("eager cross entropy: the modelled backward working set is the one measured on an H100") {
  std::ifstream in(std::string(PARPLAN_SOURCE_DIR) + "/bench/gpu/results/h100-2026-11-26/loss_memory.json");
  REQUIRE(in.good());
  const nlohmann::json j = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& p : j["points"]) {
    if (p["compiled"].get<bool>()) continue;  // torchtitan's 2024 loss ran uncompiled
    ModelSpec m = test::profiles().model("llama3-8b", "test");
    m.vocab = p["vocab"].get<int64_t>();
    ActivationShape x = shape(1, false, Recompute::selective_op);
    x.seq = p["tokens"].get<int64_t>();
    x.micro_batch = 1;
    x.fused_cross_entropy = false;
    const double measured = p["backward_peak_bytes"].get<double>() - p["kept_bytes"].get<double>();
    CAPTURE(x.seq);
    CHECK(loss_backward_working_set_bytes(m, x) == doctest::Approx(measured).epsilon(0.01));
    CHECK(p["kept_bytes"].get<double>() == doctest::Approx(4.0 * static_cast<double>(x.seq) * m.vocab).epsilon(0.01));
    ++checked;
  }
  CHECK(checked == 4);
}

TEST_CASE("selective-op keeps the layer input, every other matmul's output and attention's, as measured on an H200") {
  // bench/gpu/results/h200-2026-11-26/layers.json: a Llama 3 layer at 8192 tokens under torch.compile with torchtitan's
  // per-op policy kept 386,925,568 B (8B) and 757,072,896 B (70B) beside its input.
  for (const auto& [name, kept] : {std::pair<const char*, double>{"llama3-8b", 386925568.0}, {"llama3-70b", 757072896.0}}) {
    const ModelSpec m = test::profiles().model(name, "t");
    ActivationShape a;
    a.seq = 8192;
    a.attention = AttentionKernel::flash2;
    a.recompute = Recompute::selective_op;
    const double input = 8192.0 * static_cast<double>(m.hidden) * 2.0;
    CHECK(layer_activation_bytes(m, a).total - input == doctest::Approx(kept).epsilon(0.002));
    // SwiGLU: wq, wv and w1 kept (w2, the last, is not); with the attention output and its log-sum-exp.
    CHECK(selective_op_saved_width(m) == static_cast<double>(m.q_dim() + m.v_width() + m.ffn_hidden + m.context_dim()));
    // The backward rebuilds the rest of the layer at once.
    ActivationShape none = a;
    none.recompute = Recompute::none;
    CHECK(recompute_working_set_bytes(m, a) ==
          doctest::Approx(layer_activation_bytes(m, none).total - layer_activation_bytes(m, a).total));
  }
}

TEST_CASE("uncompiled element-wise ops keep 25h more bytes per token and layer, 2h under per-op AC, as measured") {
  // bench/gpu/results/h200-2026-11-26/layers.json, saved_activation_bytes of one Llama 3 layer at 8192 tokens, eager
  // minus torch.compile: 8B 2,014,381,056 - 1,175,520,256 (no AC) and 454,034,432 - 386,925,568 (per-op AC); 70B
  // 4,028,695,552 - 2,350,973,952 and 891,290,624 - 757,072,896.
  struct Point {
    const char* model;
    Recompute recompute;
    double measured;
  };
  for (const Point& p : {Point{"llama3-8b", Recompute::none, 2014381056.0 - 1175520256.0},
                         Point{"llama3-8b", Recompute::selective_op, 454034432.0 - 386925568.0},
                         Point{"llama3-70b", Recompute::none, 4028695552.0 - 2350973952.0},
                         Point{"llama3-70b", Recompute::selective_op, 891290624.0 - 757072896.0}}) {
    const ModelSpec m = test::profiles().model(p.model, "t");
    ActivationShape compiled;
    compiled.seq = 8192;
    compiled.attention = AttentionKernel::flash2;
    compiled.recompute = p.recompute;
    ActivationShape eager = compiled;
    eager.eager_elementwise = true;
    CAPTURE(p.model);
    CAPTURE(static_cast<int>(p.recompute));
    const LayerActivationBytes e = layer_activation_bytes(m, eager);
    CHECK(e.total - layer_activation_bytes(m, compiled).total == doctest::Approx(p.measured).epsilon(1e-9));
    CHECK(e.eager == doctest::Approx(p.measured).epsilon(1e-9));
    // 25h = 8h (two RMSNorms) + 4 (q + k) + 2f + 2 (2q - k - v) + 2h, whatever the GQA ratio; 2h = the last term.
    const double h = static_cast<double>(m.hidden);
    CHECK(p.measured == doctest::Approx(8192.0 * h * (p.recompute == Recompute::none ? 25.0 : 2.0)));
  }
  // Full recompute keeps only the layer input, eager or not; compiled plans keep no eager term.
  const ModelSpec m = test::profiles().model("llama3-8b", "t");
  ActivationShape full;
  full.seq = 8192;
  full.recompute = Recompute::full;
  ActivationShape full_eager = full;
  full_eager.eager_elementwise = true;
  CHECK(layer_activation_bytes(m, full_eager).total == layer_activation_bytes(m, full).total);
  CHECK(layer_activation_bytes(m, full).eager == 0.0);
}

// Transformer Engine's fp8 GEMMs keep their quantized inputs for the weight gradients (linear.py, layernorm_linear.py,
// grouped_linear.py): per token of a Llama 3 8B layer (h 4096, f 14336, GQA 8 of 32 heads) the QKV input (h), the MLP
// input (h) and the down-projection input (f) drop from 2 bytes to 1, and the out-projection keeps a 1-byte copy of
// its input beside the 2-byte attention output: 2 h + f - h = 18432 bytes fewer.
TEST_CASE("fp8 with Transformer Engine: the GEMM inputs kept for the backward are fp8") {
  const ModelSpec m = test::profiles().model("llama3-8b", "test");
  ActivationShape a;
  a.seq = 8192;
  a.attention = AttentionKernel::flash;
  const double bf16 = layer_activation_bytes(m, a).total;
  a.fp8_saved_inputs = true;
  const double fp8 = layer_activation_bytes(m, a).total;
  CHECK(bf16 - fp8 == doctest::Approx(8192.0 * (2 * 4096 + 14336 - 4096)));
  // A MoE layer: each routed copy's permuted input (h) and down-projection input (f) in fp8; the router's input stays.
  const ModelSpec moe = test::profiles().model("mixtral-8x7b", "test");
  ActivationShape b;
  b.seq = 4096;
  b.attention = AttentionKernel::flash;
  b.moe_tokens = 4096;
  b.moe_dispatched = b.moe_expert_copies = 4096 * 2;
  const double moe16 = layer_activation_bytes(moe, b).total;
  b.fp8_saved_inputs = true;
  const double moe8 = layer_activation_bytes(moe, b).total;
  const double h = 4096, f = 14336, T = 4096;
  CHECK(moe16 - moe8 == doctest::Approx(T * (h + 2 * f - h) + 2 * T * h));
}

namespace {
// A small MLA + MoE layer (activations.hpp recompute_module_bytes): h 1024, 8 heads of 128 (+32 rotary), latents
// 256 / 128, SwiGLU experts of 512, top-2 of 8 at load 1.5, one shared expert.
ModelSpec small_mla_moe() {
  ModelSpec m;
  m.name = "small-mla-moe";
  m.layers = 4;
  m.hidden = 1024;
  m.heads = m.kv_heads = 8;
  m.ffn_hidden = 512;
  m.ffn_type = FfnType::swiglu;
  m.vocab = 1000;
  m.dropout = false;
  m.experts = 8;
  m.top_k = 2;
  m.shared_experts = 1;
  m.q_lora_rank = 256;
  m.kv_lora_rank = 128;
  m.qk_rope_head_dim = 32;
  return m;
}
ActivationShape small_shape(RecomputeModules mods) {
  ActivationShape x;
  x.seq = 64;
  x.tp = 2;
  x.sequence_parallel = true;
  x.recompute = Recompute::selective;
  x.modules = mods;
  x.attention = AttentionKernel::flash;
  x.moe_load = 1.5;
  x.moe_tokens = 32, x.moe_dispatched = 64, x.moe_expert_copies = 96;
  return x;
}
RecomputeModules mods(std::initializer_list<RecomputeModule> list) {
  RecomputeModules r;
  r.bits = 0;
  for (RecomputeModule m : list) r.add(m);
  return r;
}
}  // namespace

TEST_CASE("Megatron-Core recompute modules: each module's bytes, term by term") {
  using M = RecomputeModule;
  const ModelSpec m = small_mla_moe();
  const double sbh = 64.0 * 1024.0;  // s b h, 2-byte activations, tp 2 with SP
  const RecomputeModuleBytes b = recompute_module_bytes(m, small_shape({}));
  CHECK(b.core_attn == doctest::Approx(4.0 * 8 * 64 / 2));          // the flash LSE
  CHECK(b.norm_qkv == doctest::Approx(sbh * 2 / 2));                 // MLA's input norm output, /t with SP
  CHECK(b.norm_mlp == doctest::Approx(sbh * 2 / 2));                 // the MoE layer's pre-MLP norm output
  CHECK(b.act_routed == doctest::Approx(sbh * 2 * 0.5 * 3 / 2));     // f/h = 0.5 per copy, 2 x 1.5 copies
  CHECK(b.act_shared == doctest::Approx(sbh * 2 * 0.5 * 1 / 2));
  CHECK(b.mla_up_proj == doctest::Approx(sbh * 2 * (1280 + 1280 + 1024) / 1024.0 / 2));  // Q, K at 160, V at 128 per head
  CHECK(b.mlp == 0);                                                 // a MoE layer: mlp does not apply
  CHECK(b.moe_routed == doctest::Approx(3 * b.act_routed));          // SwiGLU: fc1 out (2f) + fc2 in (f)
  CHECK(b.moe_shared == doctest::Approx(3 * b.act_shared));
  CHECK(b.moe_routing == doctest::Approx(96 * 1024 * 2 + 32 * 8 * 4 + 64 * 12.0));

  ActivationShape none = small_shape({});
  none.recompute = Recompute::none;
  const LayerActivationBytes all = layer_activation_bytes(m, none);
  const auto stored = [&](RecomputeModules r) { return layer_activation_bytes(m, small_shape(r)).total; };
  // The default, {core_attn}, is today's selective: the attention core dropped, exactly.
  CHECK(stored(RecomputeModules{}) == all.replicated + all.tp_sharded + all.moe_routing);
  CHECK(stored(mods({M::layernorm, M::moe_act})) ==
        doctest::Approx(all.total - 2 * b.norm_qkv - b.act_routed - b.act_shared).epsilon(1e-12));
  CHECK(stored(mods({M::mla_up_proj})) == doctest::Approx(all.total - b.mla_up_proj).epsilon(1e-12));
  // moe covers moe_act and shared_experts: their terms are dropped once.
  CHECK(stored(mods({M::moe, M::moe_act, M::shared_experts})) ==
        doctest::Approx(all.total - b.moe_routed - b.moe_shared - b.moe_routing).epsilon(1e-12));
  CHECK(stored(mods({M::shared_experts, M::moe_act})) ==
        doctest::Approx(all.total - b.moe_shared - b.act_routed).epsilon(1e-12));
  CHECK(stored(mods({M::mlp})) == all.total);  // no dense MLP in a MoE layer
  // The working set is the largest module rebuilt at once.
  CHECK(recompute_working_set_bytes(m, small_shape(mods({M::layernorm, M::moe_act}))) == doctest::Approx(b.act_routed));
  CHECK(recompute_working_set_bytes(m, small_shape(mods({M::moe, M::core_attn}))) ==
        doctest::Approx(b.moe_routed + b.moe_shared + b.moe_routing));
  CHECK(recompute_working_set_bytes(m, small_shape(RecomputeModules{})) == doctest::Approx(b.core_attn));
  // fp8 with Transformer Engine: the GEMM inputs are kept as 1-byte copies, and the modules drop those; the router's
  // input (the pre-MLP norm output) stays 16-bit.
  ActivationShape fp8 = small_shape({});
  fp8.fp8_saved_inputs = true;
  const RecomputeModuleBytes q = recompute_module_bytes(m, fp8);
  CHECK(q.norm_qkv == doctest::Approx(b.norm_qkv / 2));
  CHECK(q.norm_mlp == doctest::Approx(b.norm_mlp));
  CHECK(q.act_routed == doctest::Approx(b.act_routed / 2));
  CHECK(q.moe_routed == doctest::Approx(b.moe_routed * 5.0 / 6.0));  // 2 f at 2 bytes + f at 1
}

TEST_CASE("Megatron-Core fine-grained activation offloading: each module's offloaded bytes, by hand") {
  // small_mla_moe at s 64, b 1, tp 2 (SP), bf16, top-2 at load 1.5, f 512: 64 x 2 x 1.5 = 192 routed copies a
  // microbatch, split over tp 2 in the experts' f (the activation terms) - and small_shape's 96 expert copies for the
  // experts' fc1 input (moe_expert_copies, moe_token_copies() in a plan).
  //   expert_fc1 = 96 copies x h 1024 x 2 bytes                  = 196,608 B
  //   moe_act    = 192 copies x 2 f 1024 / tp 2 x 2 bytes        = 196,608 B (SwiGLU's fc1 output, gate and up)
  const ModelSpec m = small_mla_moe();
  ActivationShape a = small_shape(mods({RecomputeModule::core_attn}));
  CHECK(offloaded_module_bytes(m, a) == 0);  // none listed
  a.offload_modules.add(OffloadModule::expert_fc1);
  CHECK(offloaded_module_bytes(m, a) == doctest::Approx(96.0 * 1024 * 2));
  a.offload_modules.add(OffloadModule::moe_act);
  CHECK(offloaded_module_bytes(m, a) == doctest::Approx(96.0 * 1024 * 2 + 192.0 * 1024 / 2 * 2));
  // The same terms layer_activation_bytes() stores: fc1's input is moe_routing's first term, moe_act's input the fc1
  // output, the routed experts' stored terms less their fc2 input (act_routed).
  const RecomputeModuleBytes b = recompute_module_bytes(m, a);
  CHECK(offloaded_module_bytes(m, a) ==
        doctest::Approx(b.moe_routing - 32.0 * 8 * 4 - 64.0 * 12 + b.moe_routed - b.act_routed).epsilon(1e-12));
  // moe_act recomputed too: the recompute drops the activation's output, the offload moves its input - both apply.
  ActivationShape both = a;
  both.modules.add(RecomputeModule::moe_act);
  CHECK(offloaded_module_bytes(m, both) == doctest::Approx(offloaded_module_bytes(m, a)));
  // fp8 (Transformer Engine): fc1 keeps its 1-byte copy; the activation's input stays 16-bit.
  ActivationShape fp8 = a;
  fp8.fp8_saved_inputs = true;
  CHECK(offloaded_module_bytes(m, fp8) == doctest::Approx(96.0 * 1024 * 1 + 192.0 * 1024 / 2 * 2));
  // The moe module checkpoints the whole MoE layer (its experts store nothing), full recompute the layer: nothing.
  ActivationShape moe = a;
  moe.modules.add(RecomputeModule::moe);
  CHECK(offloaded_module_bytes(m, moe) == 0);
  ActivationShape full = a;
  full.recompute = Recompute::full;
  CHECK(offloaded_module_bytes(m, full) == 0);
  ModelSpec dense = m;
  dense.experts = 1, dense.top_k = 1, dense.shared_experts = 0;
  CHECK(offloaded_module_bytes(dense, a) == 0);  // no experts
}

TEST_CASE("Megatron-Core recompute modules on a dense layer: mlp drops the MLP and its input; moe does nothing") {
  using M = RecomputeModule;
  ModelSpec m = small_mla_moe();
  m.experts = 1, m.top_k = 1, m.shared_experts = 0;
  m.q_lora_rank = m.kv_lora_rank = m.qk_rope_head_dim = 0;  // standard attention: its norms are fused (no layernorm)
  const double sbh = 64.0 * 1024.0;
  ActivationShape none = small_shape({});
  none.recompute = Recompute::none;
  const double all = layer_activation_bytes(m, none).total;
  const RecomputeModuleBytes b = recompute_module_bytes(m, none);
  CHECK(b.mlp == doctest::Approx(sbh * 2 / 2 + 3 * sbh * 2 * 0.5 / 2));  // the norm output + SwiGLU's 3 f terms, /t
  CHECK(b.norm_qkv == 0);
  CHECK(b.norm_mlp == 0);
  CHECK(layer_activation_bytes(m, small_shape(mods({M::mlp}))).total == doctest::Approx(all - b.mlp).epsilon(1e-12));
  for (M x : {M::layernorm, M::moe_act, M::mla_up_proj, M::moe, M::shared_experts}) {
    CHECK(layer_activation_bytes(m, small_shape(mods({x}))).total == all);
  }
}

TEST_CASE("DeepSeek-V3's fp8 activation cache: fp8 SwiGLU inputs, no fc2 input, one attention-output copy") {
  // DeepSeek-AI 2024, arXiv:2412.19437, Sec. 3.3.3: the experts' SwiGLU inputs cached in fp8 with the output
  // recomputed; the out-projection's input (the attention output) cached once, in E5M6, for the attention backward
  // too. A MoE layer of DeepSeek-V3 at tp 1, 4096 tokens, fp8 with Transformer Engine's 1-byte GEMM inputs
  // (A = 2, G = 1), balanced routing: 8 routed + 1 shared copies of f = 2048 per token, context width 128 x 128.
  const ModelSpec& v3 = test::profiles().model("deepseek-v3", "t");
  ActivationShape te;
  te.seq = 4096;
  te.attention = AttentionKernel::flash;
  te.fp8_saved_inputs = true;
  te.moe_tokens = 4096, te.moe_dispatched = 8 * 4096, te.moe_expert_copies = 8 * 4096;
  ActivationShape cache = te;
  cache.fp8_activation_cache = true;
  const double tokens = 4096.0;
  // Per token: the experts keep 2 f x 1 byte instead of 2 f x A + f x G (3 bytes per FFN element less, 9 copies), and
  // the attention output drops its separate fp8 copy (1 byte per element of 128 x 128).
  const double saved_per_token = 3.0 * 2048 * 9 + 1.0 * 128 * 128;  // 71,680 bytes
  CHECK(layer_activation_bytes(v3, te).total - layer_activation_bytes(v3, cache).total ==
        doctest::Approx(saved_per_token * tokens).epsilon(1e-12));
  // moe_act finds no activation output to drop under the cache; moe drops what the experts still keep, the fp8 2 f.
  using M = RecomputeModule;
  te.recompute = cache.recompute = Recompute::selective;
  te.modules = cache.modules = mods({M::moe_act});
  CHECK(recompute_module_bytes(v3, cache).act_routed == 0);
  CHECK(recompute_module_bytes(v3, cache).act_shared == 0);
  CHECK(recompute_module_bytes(v3, te).act_routed == doctest::Approx(tokens * 2048 * 8 * 1.0));
  CHECK(recompute_module_bytes(v3, cache).moe_routed == doctest::Approx(tokens * 2048 * 8 * 2.0));  // the fp8 2 f
  // A dense layer keeps its MLP as without the cache; only the attention output's fp8 copy goes.
  ModelSpec dense = v3;
  dense.experts = 1, dense.top_k = 1, dense.shared_experts = 0, dense.ffn_hidden = 18432;
  ActivationShape dense_te = te, dense_cache = cache;
  dense_te.recompute = dense_cache.recompute = Recompute::none;
  CHECK(layer_activation_bytes(dense, dense_te).total - layer_activation_bytes(dense, dense_cache).total ==
        doctest::Approx(128.0 * 128 * tokens).epsilon(1e-12));
}
