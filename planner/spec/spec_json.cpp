// JSON (de)serialisers of the specs (units and limits documented in docs/profiles.md).
#include "planner/spec/spec_json.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <fmt/core.h>

namespace parplan {
namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr int64_t kMaxDim = 10'000'000;
constexpr double kMaxParams = 1e15;  // 1000x the largest published dense model
}  // namespace

namespace {
// The JSON path of a model's MoE routing error (moe_routing_error): the field it names, or for a dense model the
// first of the fields it has set.
const char* moe_routing_path(MoeRoutingError::Field f, const ModelSpec& m) {
  using Field = MoeRoutingError::Field;
  if (f == Field::not_moe) {
    f = m.capacity_factor != 0   ? Field::capacity_factor
        : m.imbalance != 1.0     ? Field::imbalance
        : m.router_groups != 0   ? Field::router_groups
                                 : Field::router_group_top_k;
  }
  switch (f) {
    case Field::capacity_factor: return "moe/capacity_factor";
    case Field::imbalance: return "moe/imbalance";
    case Field::router_groups: return "moe/router_groups";
    default: return "moe/router_group_top_k";
  }
}

// The MoE layer kinds and multi-head latent attention: fields that need each other.
template <typename Bad>
void check_moe_and_mla(const ModelSpec& m, const Bad& bad) {
  if (!m.is_moe()) {
    for (auto [key, value] : {std::pair<std::string_view, int64_t>{"shared_experts", m.shared_experts},
                              {"dense_layers", m.dense_layers}, {"dense_ffn_hidden", m.dense_ffn_hidden}}) {
      if (value != 0) bad(key, fmt::format("{} is for MoE models; this one has experts 1", value));
    }
  }
  if (m.dense_layers >= m.layers && m.dense_layers > 0) {
    bad("dense_layers", fmt::format("{} dense layers leave none of the {} layers MoE", m.dense_layers, m.layers));
  }
  if (m.moe_layer_step > 1 && !m.is_moe()) {
    bad("interleave_moe_layer_step", fmt::format("{} is for MoE models; this one has experts 1", m.moe_layer_step));
  }
  if (m.is_moe() && m.moe_layers() < 1) {
    bad("interleave_moe_layer_step", fmt::format("every {}th of the {} layers after the {} leading dense ones is MoE: "
                                                 "none is", m.moe_layer_step, m.layers - m.dense_layers, m.dense_layers));
  }
  if ((m.dense_layer_count() > 0) != (m.dense_ffn_hidden > 0)) {
    bad(m.dense_layer_count() > 0 ? "dense_ffn_hidden" : "dense_layers",
        "dense layers (dense_layers, interleave_moe_layer_step) and dense_ffn_hidden go together (the dense layers "
        "and their MLP width)");
  }
  if (const MoeRoutingError e = moe_routing_error(m); e.field != MoeRoutingError::Field::none) {
    // A dense model with routing settings: the one it has set (imbalance when the capacity is dropless).
    bad(moe_routing_path(e.field, m), e.message);
  }
  if (!m.is_mla()) {
    for (auto [key, value] : {std::pair<std::string_view, int64_t>{"q_lora_rank", m.q_lora_rank},
                              {"qk_rope_head_dim", m.qk_rope_head_dim}, {"v_head_dim", m.v_head_dim_override}}) {
      if (value != 0) bad(key, fmt::format("{} is for multi-head latent attention, which needs kv_lora_rank", value));
    }
  } else if (m.kv_heads != m.heads) {
    bad("kv_heads", fmt::format("multi-head latent attention gives every head its keys and values: kv_heads {} must "
                                "equal heads {}", m.kv_heads, m.heads));
  }
}
// Sliding-window attention (ModelSpec::sliding_window): sliding_window_error's rules, at the field's path.
template <typename Bad>
void check_window(const ModelSpec& m, const Bad& bad) {
  if (const SlidingWindowError e = sliding_window_error(m); e.field != SlidingWindowError::Field::none) {
    bad(e.field == SlidingWindowError::Field::window ? "sliding_window" : "sliding_window_pattern", e.message);
  }
}
}  // namespace

void check_model(const ModelSpec& m, const std::string& where, const std::string& path) {
  auto bad = [&](std::string_view key, std::string_view what) {
    throw InputError(fmt::format("{}: {}/{}: {}", where, path, key, what));
  };
  if (m.head_dim_override == 0 && m.hidden % m.heads != 0) {
    bad("heads", fmt::format("{} heads do not divide hidden {} (set head_dim when heads x head_dim != hidden)", m.heads,
                             m.hidden));
  }
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0) {
    bad("kv_heads", fmt::format("{} kv heads must divide the {} heads", m.kv_heads, m.heads));
  }
  if (m.top_k > m.experts) bad("top_k", fmt::format("top_k {} exceeds the {} experts", m.top_k, m.experts));
  check_moe_and_mla(m, bad);
  check_window(m, bad);
  // Every field may be in range while the product is absurd; bound the parameter count (an upper bound, in double)
  // so the 64-bit counts of model_shape.cpp cannot overflow.
  const double h = std::max(static_cast<double>(m.hidden), static_cast<double>(m.heads) *
                                                                static_cast<double>(m.head_dim() + m.qk_rope_head_dim +
                                                                                    m.v_head_dim_override));
  const double f = static_cast<double>(std::max(m.ffn_hidden, m.dense_ffn_hidden));
  const double per_layer = 4.0 * h * (h + 3.0) + static_cast<double>(m.experts + m.shared_experts + 1) *
                                                     (3.0 * h * f + 2.0 * f + 2.0 * h);
  const double params = static_cast<double>(m.layers) * per_layer +
                        2.0 * h * static_cast<double>(m.vocab + m.seq_len + 1);
  if (params > kMaxParams) {
    throw InputError(fmt::format("{}: {}: the model has about {:.3g} parameters, above the supported {:.0e}", where,
                                 path.empty() ? "/" : path, params, kMaxParams));
  }
}

ModelSpec model_from_json(JsonReader& r) {
  ModelSpec m;
  m.name = r.get_string("name");
  m.layers = r.get_int("layers", 1, 100'000);
  m.hidden = r.get_int("hidden", 1, kMaxDim);
  m.heads = r.get_int("heads", 1, kMaxDim);
  m.kv_heads = r.get_int("kv_heads", m.heads, 1, kMaxDim);
  m.ffn_hidden = r.get_int("ffn_hidden", 1, kMaxDim);
  m.ffn_type = r.get_enum("ffn_type", FfnType::gelu);
  m.vocab = r.get_int("vocab", 1, 100'000'000);
  m.seq_len = r.get_int("seq_len", 1, 100'000'000);
  m.tied_embeddings = r.get_bool("tied_embeddings", true);
  m.bias = r.get_bool("bias", true);
  m.dropout = r.get_bool("dropout", true);
  m.norm = r.get_enum("norm", NormType::layernorm);
  m.position = r.get_enum("position", PositionEmbedding::learned);
  m.head_dim_override = r.get_int("head_dim", 0, 1, kMaxDim);
  m.q_lora_rank = r.get_int("q_lora_rank", 0, 1, kMaxDim);
  m.kv_lora_rank = r.get_int("kv_lora_rank", 0, 1, kMaxDim);
  m.qk_rope_head_dim = r.get_int("qk_rope_head_dim", 0, 1, kMaxDim);
  m.v_head_dim_override = r.get_int("v_head_dim", 0, 1, kMaxDim);
  m.experts = r.get_int("experts", 1, 1, 65'536);
  m.top_k = r.get_int("top_k", 1, 1, 65'536);
  m.shared_experts = r.get_int("shared_experts", 0, 0, 65'536);
  m.dense_layers = r.get_int("dense_layers", 0, 0, 100'000);
  m.dense_ffn_hidden = r.get_int("dense_ffn_hidden", 0, 1, kMaxDim);
  m.moe_layer_step = r.get_int("interleave_moe_layer_step", 1, 1, 100'000);
  m.mtp_layers = r.get_int("mtp_layers", 0, 0, 100);
  if (r.has("moe")) {
    JsonReader moe = r.object("moe");
    if (moe.has("capacity_factor") && moe.raw("capacity_factor").is_string()) {
      if (moe.get_string("capacity_factor") != "none") moe.fail("capacity_factor", "expected \"none\" (dropless) or a number >= 1");
    } else {
      m.capacity_factor = moe.get_double("capacity_factor", 0.0, 1.0, 65'536.0);
    }
    m.imbalance = moe.get_double("imbalance", 1.0, 1.0, 65'536.0);
    m.router_groups = moe.get_int("router_groups", 0, 2, 65'536);
    m.router_group_top_k = moe.get_int("router_group_top_k", 0, 1, 65'536);
    moe.finish();
  }
  m.causal = r.get_bool("causal", true);
  m.sliding_window = r.get_int("sliding_window", 0, 1, 100'000'000);
  m.sliding_window_pattern = r.get_int("sliding_window_pattern", 0, 0, 100'000);
  m.source = r.get_string("source", "");
  const std::string self = r.path_of("");  // this object's pointer and a '/'
  check_model(m, r.where(), self.substr(0, self.size() - 1));
  return m;
}

GpuSpec gpu_from_json(JsonReader& r) {
  GpuSpec g;
  g.name = r.get_string("name");
  if (r.has("architecture")) {
    g.architecture = r.get_string("architecture");
    if (g.architecture.empty() || g.architecture.size() > 64) r.fail("architecture", "expected 1 to 64 characters");
  }
  JsonReader peak = r.object("peak_tflops");
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto dt = static_cast<DType>(i);
    const double tflops = peak.get_double(to_string(dt), 0.0, 0.0, 1e6);
    // 0 = not supported; a positive peak must be at least 1 MFLOP/s: 5e-324 was read and priced steps at infinity.
    // (The floor stays far below what any device measures: the host backend's bf16 GEMM in the ASan+UBSan build
    // measures 0.91-1.0 GFLOP/s, and calibrate writes what it measures.)
    if (tflops > 0 && tflops < 1e-6) peak.fail(to_string(dt), "expected 0 (not supported) or 1e-06 to 1e6 TFLOP/s");
    g.peak_flops[static_cast<size_t>(i)] = tflops * 1e12;
  }
  peak.finish();
  if (!(g.peak(DType::bf16) > 0) && !(g.peak(DType::fp16) > 0)) {
    r.fail("peak_tflops", "needs a positive bf16 or fp16 peak");
  }
  g.memory_bytes = static_cast<int64_t>(r.get_double("memory_GiB", 0.001, 1e6) * kGiB);
  g.hbm_bandwidth_Bps = r.get_double("hbm_bandwidth_GBps", 0.001, 1e7) * 1e9;
  g.hbm_efficiency = r.get_double("hbm_efficiency", 0.8, 0.01, 1.0);
  g.mx_block_scaling = r.get_bool("mx_block_scaling", false);
  if (r.has("gemm")) {
    JsonReader ge = r.object("gemm");
    g.gemm.peak_fraction = ge.get_double("peak_fraction", g.gemm.peak_fraction, 0.01, 1.0);
    g.gemm.sm_count = ge.get_int("sm_count", g.gemm.sm_count, 1, 100'000);
    g.gemm.tile_m = ge.get_int("tile_m", g.gemm.tile_m, 1, 4096);
    g.gemm.tile_n = ge.get_int("tile_n", g.gemm.tile_n, 1, 4096);
    g.gemm.kernel_overhead_s = ge.get_double("kernel_overhead_us", g.gemm.kernel_overhead_s * 1e6, 0.0, 1e5) * 1e-6;
    g.gemm.attention_fraction = ge.get_double("attention_fraction", g.gemm.attention_fraction, 0.01, 1.0);
    g.gemm.attention_backward_fraction = ge.get_double("attention_backward_fraction", 0.0, 0.0, 1.0);
    g.gemm.flash2_fraction = ge.get_double("flash2_fraction", 0.0, 0.0, 1.0);
    g.gemm.flash2_backward_fraction = ge.get_double("flash2_backward_fraction", 0.0, 0.0, 1.0);
    g.gemm.fp8_efficiency = ge.get_double("fp8_efficiency", g.gemm.fp8_efficiency, 0.05, 2.0);
    g.gemm.grouped_tile_overhead_s = ge.get_double("grouped_tile_overhead_us", 0.0, 0.0, 1e4) * 1e-6;
    g.gemm.attention_tile_overhead = ge.get_double("attention_tile_overhead", 0.0, 0.0, 1e3);
    ge.finish();
  }
  g.cuda_context_bytes = static_cast<int64_t>(r.get_double("cuda_context_MiB", 0.0, 0.0, 1e6) * kMiB);
  g.workspace_bytes = static_cast<int64_t>(r.get_double("workspace_MiB", 0.0, 0.0, 1e6) * kMiB);
  g.comm_buffer_bytes_per_group = static_cast<int64_t>(r.get_double("comm_buffer_MiB_per_group", 0.0, 0.0, 1e6) * kMiB);
  g.fragmentation_fraction = r.get_double("fragmentation_fraction", 0.0, 0.0, 1.0);
  g.source = r.get_string("source", "");
  return g;
}

namespace {
LinkSpec link_from_json(JsonReader r) {
  LinkSpec l;
  l.bandwidth_Bps = r.get_double("bandwidth_GBps", 1e-6, 1e7) * 1e9;
  l.latency_s = r.get_double("latency_us", 0.0, 0.0, 1e6) * 1e-6;
  l.efficiency = r.get_double("efficiency", 1.0, 0.01, 1.0);
  if (r.has("nvls_efficiency")) l.nvls_efficiency = r.get_double("nvls_efficiency", 0.01, 1.0);
  r.finish();
  return l;
}
nlohmann::json link_to_json(const LinkSpec& l) {
  nlohmann::json j = {{"bandwidth_GBps", l.bandwidth_Bps / 1e9}, {"latency_us", l.latency_s * 1e6}, {"efficiency", l.efficiency}};
  if (l.nvls_efficiency > 0) j["nvls_efficiency"] = l.nvls_efficiency;
  return j;
}
}  // namespace

ClusterSpec cluster_from_json(JsonReader& r) {
  ClusterSpec c;
  c.name = r.get_string("name");
  c.gpu = r.get_string("gpu");
  c.gpus_per_node = r.get_int("gpus_per_node", 1, 1'000'000);
  if (r.has("nvlink_domain_gpus")) {
    c.nvlink_domain_gpus = r.get_int("nvlink_domain_gpus", 1, 1'000'000);
    if (c.nvlink_domain_gpus % c.gpus_per_node != 0) {
      r.fail("nvlink_domain_gpus", fmt::format("must be a multiple of gpus_per_node ({})", c.gpus_per_node));
    }
  }
  c.intra_node = link_from_json(r.object("intra_node"));
  c.inter_node = link_from_json(r.object("inter_node"));
  if (r.has("host_link")) c.host_link = link_from_json(r.object("host_link"));
  c.host_adam_params_per_s = r.get_double("host_adam_Gparams_per_s", kCpuAdamParamsPerS / 1e9, 1e-6, 1e6) * 1e9;
  c.host_memory_bytes = static_cast<int64_t>(r.get_double("host_memory_GiB", 0.0, 0.0, 1e9) * kGiB);
  c.source = r.get_string("source", "");
  return c;
}

namespace {
// parallel.stage_layers: an array with an entry per stage, each a layer count or an array of its chunks' counts
// (ParallelConfig::stage_layout); the counts' sums and sizes are checked by validate().
std::vector<std::vector<int64_t>> stage_layout_from_json(JsonReader& r) {
  const nlohmann::json& a = r.raw("stage_layers");
  if (!a.is_array() || a.empty() || a.size() > 1'000'000) r.fail("stage_layers", "must be a non-empty array");
  std::vector<std::vector<int64_t>> out;
  const auto count = [&](const nlohmann::json& x, const std::string& at) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > 100'000'000) {
      r.fail(at, "must be a layer count (a non-negative integer) or an array of them (one per chunk)");
    }
    return x.get<int64_t>();
  };
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string at = fmt::format("stage_layers/{}", i);
    std::vector<int64_t>& st = out.emplace_back();
    if (a[i].is_array()) {
      if (a[i].empty() || a[i].size() > 1024) r.fail(at, "must list 1 to 1024 chunk layer counts");
      for (size_t c = 0; c < a[i].size(); ++c) st.push_back(count(a[i][c], fmt::format("{}/{}", at, c)));
    } else {
      st.push_back(count(a[i], at));
    }
  }
  return out;
}

// parallel.recompute_modules: Megatron-Core's --recompute-modules, an array of module names (recompute selective).
RecomputeModules recompute_modules_from_json(JsonReader& r, Recompute recompute) {
  const nlohmann::json& a = r.raw("recompute_modules");
  if (!a.is_array() || a.empty()) r.fail("recompute_modules", "must be a non-empty array of module names");
  if (recompute != Recompute::selective) r.fail("recompute_modules", "needs recompute \"selective\"");
  RecomputeModules out;
  out.bits = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    RecomputeModule m{};
    if (!a[i].is_string() || !parse_recompute_module(a[i].get<std::string>(), m) || out.has(m)) {
      r.fail(fmt::format("recompute_modules/{}", i),
             "must be one of core_attn, layernorm, moe_act, mla_up_proj, mlp, moe, shared_experts, each at most once");
    }
    out.add(m);
  }
  return out;
}

// parallel.offload_modules: Megatron-Core's --offload-modules (with --fine-grained-activation-offloading), an array
// of module names; spec.hpp OffloadModules.
OffloadModules offload_modules_from_json(JsonReader& r) {
  const nlohmann::json& a = r.raw("offload_modules");
  if (!a.is_array() || a.empty()) r.fail("offload_modules", "must be a non-empty array of module names");
  OffloadModules out;
  for (size_t i = 0; i < a.size(); ++i) {
    OffloadModule m{};
    const std::string name = a[i].is_string() ? a[i].get<std::string>() : "";
    if (is_unpriced_offload_module(name)) {
      r.fail(fmt::format("offload_modules/{}", i),
             fmt::format("'{}' is not modelled (parplan prices expert_fc1 and moe_act)", excerpt(name)));
    }
    if (!parse_offload_module(name, m) || out.has(m)) {
      r.fail(fmt::format("offload_modules/{}", i), "must be one of expert_fc1, moe_act, each at most once");
    }
    out.add(m);
  }
  return out;
}
}  // namespace

ParallelConfig parallel_from_json(JsonReader& r) {
  ParallelConfig p;
  constexpr int64_t kMax = 100'000'000;
  p.dp = r.get_int("dp", 1, kMax);
  p.tp = r.get_int("tp", 1, kMax);
  p.pp = r.get_int("pp", 1, kMax);
  p.cp = r.get_int("cp", 1, 1, kMax);
  p.ep = r.get_int("ep", 1, 1, kMax);
  p.vpp = r.get_int("vpp", 1, 1, 1024);
  p.micro_batch = r.get_int("micro_batch", 1, 1, kMax);
  p.num_microbatches = r.get_int("num_microbatches", 1, 1, kMax);
  p.schedule = r.get_enum("schedule", Schedule::one_f_one_b);
  p.recompute = r.get_enum("recompute", Recompute::none);
  if (r.has("recompute_modules")) p.recompute_modules = recompute_modules_from_json(r, p.recompute);
  if (r.has("offload_modules")) p.offload_modules = offload_modules_from_json(r);
  if (r.has("recompute_layers")) {
    p.recompute_layers = r.get_int("recompute_layers", 0, 1'000'000);
    if (p.recompute_layers > 0 && p.recompute != Recompute::full) r.fail("recompute_layers", "needs recompute \"full\"");
  }
  p.sequence_parallel = r.get_bool("sequence_parallel", false);
  p.zero_stage = static_cast<int>(r.get_int("zero_stage", 0, 0, 3));
  p.zero3_gather_unit = r.get_enum("zero3_gather_unit", Zero3GatherUnit::layer);
  p.distributed_optimizer = r.get_bool("distributed_optimizer", false);
  p.dp_replicate = r.get_int("dp_replicate", 1, 1, kMax);
  if (p.dp % p.dp_replicate != 0) {
    r.fail("dp_replicate", fmt::format("{} does not divide dp {}", p.dp_replicate, p.dp));
  }
  if (r.has("offload")) {
    const std::string offload = r.get_string("offload");
    if (!parse_offload(offload, p.offload)) {
      r.fail("offload", fmt::format("unknown value '{}' (use {})", excerpt(offload), kOffloadChoices));
    }
  }
  p.overlap_dp_comm = r.get_bool("overlap_dp_comm", true);
  p.overlap_tp_comm = r.get_bool("overlap_tp_comm", false);
  p.async_tp_backward = r.get_bool("async_tp_backward", true);
  p.tp_collective_copies = r.get_bool("tp_collective_copies", false);
  p.micropipeline_tp = r.get_bool("micropipeline_tp", false);
  p.p2p_scatter_gather = r.get_bool("p2p_scatter_gather", true);
  p.overlap_cp_comm = r.get_bool("overlap_cp_comm", true);
  p.overlap_p2p_comm = r.get_bool("overlap_p2p_comm", false);
  p.post_validation = r.get_bool("post_validation", false);
  p.fsdp2 = r.get_bool("fsdp2", false);
  p.moe_dispatcher = r.get_enum("moe_dispatcher", MoeDispatcher::alltoall);
  p.overlap_ep_comm = r.get_bool("overlap_ep_comm", false);
  p.etp = r.get_int("etp", 0, 0, kMax);
  p.first_stage_layers = r.get_int("first_stage_layers", 0, 0, kMax);
  p.last_stage_layers = r.get_int("last_stage_layers", 0, 0, kMax);
  p.embedding_in_pipeline_split = r.get_bool("embedding_in_pipeline_split", false);
  p.loss_in_pipeline_split = r.get_bool("loss_in_pipeline_split", false);
  if (r.has("stage_layers")) p.stage_layout = stage_layout_from_json(r);
  if (p.gpus() > kMaxMeshGpus) r.fail("dp", fmt::format("dp*tp*pp*cp exceeds {} GPUs", kMaxMeshGpus));
  return p;
}

TrainingSpec training_from_json(JsonReader& r) {
  TrainingSpec t;
  t.precision = r.get_enum("precision", Precision::bf16);
  t.global_batch = r.get_int("global_batch", 1, kMaxGlobalBatch);
  t.seq_len = r.get_int("seq_len", 0, 0, 100'000'000);
  t.attention = r.get_enum("attention", AttentionKernel::flash);
  t.fp8_recipe = r.get_enum("fp8_recipe", Fp8Recipe::tensorwise);
  t.grad_fp32 = r.get_bool("grad_fp32", true);
  t.fp8_param_gather = r.get_bool("fp8_param_gather", false);
  t.fp8_tp_gather = r.get_bool("fp8_tp_gather", false);
  t.adam_moments = r.get_enum("adam_moments_dtype", DType::fp32);
  t.fp8_saved_inputs = r.get_bool("fp8_saved_inputs", true);
  t.fp8_activation_cache = r.get_bool("fp8_activation_cache", false);
  if (t.adam_moments == DType::tf32) r.fail("adam_moments_dtype", "tf32 is a compute mode, not a storage dtype (fp32, bf16, fp16, fp8)");
  t.fused_grad_accumulation = r.get_bool("fused_grad_accumulation", true);
  t.fused_cross_entropy = r.get_bool("fused_cross_entropy", true);
  t.compiled_elementwise = r.get_bool("compiled_elementwise", true);
  t.dp_bucket_bytes = static_cast<int64_t>(r.get_double("dp_bucket_MB", 40.0, 0.001, 1e6) * 1e6);
  return t;
}

nlohmann::json to_json(const ModelSpec& m) {
  nlohmann::json j = {{"kind", "model"},         {"name", m.name},
          {"layers", m.layers},      {"hidden", m.hidden},
          {"heads", m.heads},        {"kv_heads", m.kv_heads},
          {"ffn_hidden", m.ffn_hidden}, {"ffn_type", to_string(m.ffn_type)},
          {"vocab", m.vocab},        {"seq_len", m.seq_len},
          {"tied_embeddings", m.tied_embeddings}, {"bias", m.bias},
          {"dropout", m.dropout},    {"norm", to_string(m.norm)},
          {"position", to_string(m.position)},    {"experts", m.experts},
          {"top_k", m.top_k},        {"causal", m.causal},
          {"source", m.source}};
  // The fields that default to 0 are written only when set, so documents of models without them stay as they were.
  for (auto [key, value] : {std::pair<const char*, int64_t>{"head_dim", m.head_dim_override},
                            {"q_lora_rank", m.q_lora_rank}, {"kv_lora_rank", m.kv_lora_rank},
                            {"qk_rope_head_dim", m.qk_rope_head_dim}, {"v_head_dim", m.v_head_dim_override},
                            {"shared_experts", m.shared_experts}, {"dense_layers", m.dense_layers},
                            {"dense_ffn_hidden", m.dense_ffn_hidden}, {"mtp_layers", m.mtp_layers},
                            {"sliding_window", m.sliding_window}, {"sliding_window_pattern", m.sliding_window_pattern}}) {
    if (value != 0) j[key] = value;
  }
  if (m.moe_layer_step != 1) j["interleave_moe_layer_step"] = m.moe_layer_step;
  if (m.capacity_factor > 0 || m.imbalance != 1.0 || m.router_groups > 0) {
    j["moe"] = {{"capacity_factor", m.capacity_factor > 0 ? nlohmann::json(m.capacity_factor) : nlohmann::json("none")},
                {"imbalance", m.imbalance}};
    if (m.router_groups > 0) {
      j["moe"]["router_groups"] = m.router_groups;
      j["moe"]["router_group_top_k"] = m.router_group_top_k;
    }
  }
  return j;
}

namespace {
// The shortest decimal that the parser reads back (value * unit, truncated) as the same byte count: a profile's
// 79.65 GiB is written as 79.65, not as 79.6499999994412.
double shortest_units(int64_t bytes, double unit) {
  const double exact = static_cast<double>(bytes) / unit;
  for (int digits = 1; digits <= 17; ++digits) {
    const double v = std::strtod(fmt::format("{:.{}g}", exact, digits).c_str(), nullptr);
    if (static_cast<int64_t>(v * unit) == bytes) return v;
  }
  // With a unit that is not a power of two no decimal may read back exactly (0.001001 MB x 1e6 = 1000.99...): the
  // next doubles up do.
  double v = exact;
  for (int step = 0; step < 64 && static_cast<int64_t>(v * unit) < bytes; ++step) {
    v = std::nextafter(v, std::numeric_limits<double>::infinity());
  }
  return v;
}

// A module set's names in their fixed order, as a JSON array (RecomputeModules, OffloadModules: a bit per Module).
template <typename Set, typename Module>
nlohmann::json module_names_json(Set set, int count) {
  nlohmann::json names = nlohmann::json::array();
  for (int i = 0; i < count; ++i) {
    if (set.has(static_cast<Module>(i))) names.push_back(to_string(Set{static_cast<uint8_t>(1u << i)}));
  }
  return names;
}
}  // namespace

nlohmann::json to_json(const GpuSpec& g) {
  nlohmann::json peak = nlohmann::json::object();
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto dt = static_cast<DType>(i);
    peak[std::string(to_string(dt))] = g.peak(dt) / 1e12;
  }
  nlohmann::json j = {{"kind", "gpu"},
          {"name", g.name},
          {"peak_tflops", peak},
          {"memory_GiB", shortest_units(g.memory_bytes, kGiB)},
          {"hbm_bandwidth_GBps", g.hbm_bandwidth_Bps / 1e9},
          {"hbm_efficiency", g.hbm_efficiency},
          {"mx_block_scaling", g.mx_block_scaling},
          {"gemm",
           {{"peak_fraction", g.gemm.peak_fraction},
            {"sm_count", g.gemm.sm_count},
            {"tile_m", g.gemm.tile_m},
            {"tile_n", g.gemm.tile_n},
            {"kernel_overhead_us", g.gemm.kernel_overhead_s * 1e6},
            {"attention_fraction", g.gemm.attention_fraction},
            {"attention_backward_fraction", g.gemm.attention_backward_fraction},
            {"flash2_fraction", g.gemm.flash2_fraction},
            {"flash2_backward_fraction", g.gemm.flash2_backward_fraction},
            {"fp8_efficiency", g.gemm.fp8_efficiency},
            {"grouped_tile_overhead_us", g.gemm.grouped_tile_overhead_s * 1e6},
            {"attention_tile_overhead", g.gemm.attention_tile_overhead}}},
          {"cuda_context_MiB", shortest_units(g.cuda_context_bytes, kMiB)},
          {"workspace_MiB", shortest_units(g.workspace_bytes, kMiB)},
          {"comm_buffer_MiB_per_group", shortest_units(g.comm_buffer_bytes_per_group, kMiB)},
          {"fragmentation_fraction", g.fragmentation_fraction},
          {"source", g.source}};
  if (!g.architecture.empty()) j["architecture"] = g.architecture;
  return j;
}

nlohmann::json to_json(const ClusterSpec& c) {
  nlohmann::json j = {{"kind", "cluster"},
          {"name", c.name},
          {"gpu", c.gpu},
          {"gpus_per_node", c.gpus_per_node},
          {"intra_node", link_to_json(c.intra_node)},
          {"inter_node", link_to_json(c.inter_node)},
          {"source", c.source}};
  if (c.nvlink_domain() != c.gpus_per_node) j["nvlink_domain_gpus"] = c.nvlink_domain();
  if (c.host_link.bandwidth_Bps > 0) j["host_link"] = link_to_json(c.host_link);
  j["host_adam_Gparams_per_s"] = c.host_adam_params_per_s / 1e9;
  if (c.host_memory_bytes > 0) j["host_memory_GiB"] = shortest_units(c.host_memory_bytes, kGiB);
  return j;
}

nlohmann::json to_json(const ParallelConfig& p) {
  nlohmann::json j = {{"dp", p.dp},
          {"tp", p.tp},
          {"pp", p.pp},
          {"cp", p.cp},
          {"ep", p.ep},
          {"vpp", p.vpp},
          {"micro_batch", p.micro_batch},
          {"num_microbatches", p.num_microbatches},
          {"schedule", to_string(p.schedule)},
          {"recompute", to_string(p.recompute)},
          {"sequence_parallel", p.sequence_parallel},
          {"zero_stage", p.zero_stage},
          {"zero3_gather_unit", to_string(p.zero3_gather_unit)},
          {"distributed_optimizer", p.distributed_optimizer},
          {"overlap_dp_comm", p.overlap_dp_comm},
          {"overlap_tp_comm", p.overlap_tp_comm},
          {"async_tp_backward", p.async_tp_backward},
          {"tp_collective_copies", p.tp_collective_copies},
          {"micropipeline_tp", p.micropipeline_tp},
          {"p2p_scatter_gather", p.p2p_scatter_gather},
          {"overlap_cp_comm", p.overlap_cp_comm},
          {"overlap_p2p_comm", p.overlap_p2p_comm},
          {"post_validation", p.post_validation},
          {"fsdp2", p.fsdp2},
          {"moe_dispatcher", to_string(p.moe_dispatcher)},
          {"overlap_ep_comm", p.overlap_ep_comm},
          {"etp", p.etp},
          {"first_stage_layers", p.first_stage_layers},
          {"last_stage_layers", p.last_stage_layers},
          {"embedding_in_pipeline_split", p.embedding_in_pipeline_split},
          {"loss_in_pipeline_split", p.loss_in_pipeline_split}};
  if (p.dp_replicate > 1) j["dp_replicate"] = p.dp_replicate;  // omitted: 1 (the documents before HSDP)
  if (p.recompute_layers > 0) j["recompute_layers"] = p.recompute_layers;  // omitted: 0 (every layer)
  if (p.offload.any()) j["offload"] = to_string(p.offload);  // omitted: none (the documents before offload)
  if (!p.recompute_modules.is_default()) {  // omitted: {core_attn} (the documents before recompute_modules)
    j["recompute_modules"] = module_names_json<RecomputeModules, RecomputeModule>(p.recompute_modules, kNumRecomputeModules);
  }
  if (!p.offload_modules.empty()) {  // omitted: none (the documents before offload_modules)
    j["offload_modules"] = module_names_json<OffloadModules, OffloadModule>(p.offload_modules, kNumOffloadModules);
  }
  if (!p.stage_layout.empty()) {
    nlohmann::json layout = nlohmann::json::array();
    for (const std::vector<int64_t>& st : p.stage_layout) {
      layout.push_back(st.size() == 1 ? nlohmann::json(st[0]) : nlohmann::json(st));
    }
    j["stage_layers"] = std::move(layout);
  }
  return j;
}

nlohmann::json to_json(const TrainingSpec& t) {
  return {{"precision", to_string(t.precision)},
          {"global_batch", t.global_batch},
          {"seq_len", t.seq_len},
          {"attention", to_string(t.attention)},
          {"fp8_recipe", to_string(t.fp8_recipe)},
          {"grad_fp32", t.grad_fp32},
          {"fp8_param_gather", t.fp8_param_gather},
          {"fp8_tp_gather", t.fp8_tp_gather},
          {"adam_moments_dtype", to_string(t.adam_moments)},
          {"fp8_saved_inputs", t.fp8_saved_inputs},
          {"fp8_activation_cache", t.fp8_activation_cache},
          {"fused_grad_accumulation", t.fused_grad_accumulation},
          {"fused_cross_entropy", t.fused_cross_entropy},
          {"compiled_elementwise", t.compiled_elementwise},
          {"dp_bucket_MB", shortest_units(t.dp_bucket_bytes, 1e6)}};
}

}  // namespace parplan
