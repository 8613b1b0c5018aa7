// Hugging Face config.json -> ModelSpec (hf_config.hpp; the key names are those of transformers' configuration
// classes: LlamaConfig, MistralConfig, MixtralConfig, Qwen2Config, Qwen2MoeConfig, Qwen3Config, Qwen3MoeConfig,
// DeepseekV2Config, DeepseekV3Config).
#include "cli/interop/hf_config.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/core.h>
#include <optional>
#include <set>
#include <string_view>

#include "planner/spec/error.hpp"
#include "planner/spec/json_reader.hpp"
#include "planner/spec/spec_json.hpp"

namespace parplan::cli {
namespace {
constexpr int64_t kMaxDim = 10'000'000;
// The training sequence length parplan takes when the command line gives none: max_position_embeddings is the
// context limit a model was extended to (Llama 3.1: 131072), not the length it trains at.
constexpr int64_t kAssumedSeq = 4096;

constexpr std::string_view kFamilies[] = {"llama",     "mistral", "mixtral",     "qwen2",      "qwen2_moe",
                                          "qwen3",     "qwen3_moe", "deepseek_v2", "deepseek_v3"};
// Keys that change nothing parplan prices (token ids, initialisation, norm epsilon, rotary base and scaling, the
// router's scoring and loss coefficients, inference settings).
constexpr std::string_view kNotPriced[] = {
    "architectures", "auto_map", "_name_or_path", "torch_dtype", "dtype", "transformers_version", "bos_token_id",
    "eos_token_id", "pad_token_id", "initializer_range", "rms_norm_eps", "rope_theta", "rope_scaling", "use_cache",
    "pretraining_tp", "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "norm_topk_prob",
    "routed_scaling_factor", "scoring_func", "topk_method", "aux_loss_alpha", "seq_aux", "ep_size",
    "quantization_config", "max_position_embeddings", "model_type", "rope_interleave", "qk_head_dim"};

// Reads the config's keys with JsonReader's range checks; null counts as absent (configs write "q_lora_rank": null).
class HfReader {
 public:
  HfReader(const nlohmann::json& j, const std::string& path) : j_(j), r_(j, path) {}
  bool has(std::string_view key) const { return j_.contains(key) && !j_.at(std::string(key)).is_null(); }
  int64_t need(std::string_view key, int64_t lo, int64_t hi) {
    read_.insert(std::string(key));
    if (!has(key)) r_.fail(key, "missing: needed for the model's shape");
    return r_.get_int(key, lo, hi);
  }
  std::optional<int64_t> opt(std::string_view key, int64_t lo, int64_t hi) {
    read_.insert(std::string(key));
    if (!has(key)) return std::nullopt;
    return r_.get_int(key, lo, hi);
  }
  bool flag(std::string_view key, bool fallback) {
    read_.insert(std::string(key));
    return has(key) ? r_.get_bool(key) : fallback;
  }
  double number(std::string_view key, double fallback) {
    read_.insert(std::string(key));
    return has(key) ? r_.get_double(key, 0.0, 1.0) : fallback;
  }
  std::string text(std::string_view key) {
    read_.insert(std::string(key));
    return has(key) ? r_.get_string(key) : std::string();
  }
  const nlohmann::json& raw(std::string_view key) {
    read_.insert(std::string(key));
    return j_.at(std::string(key));
  }
  [[noreturn]] void fail(std::string_view key, std::string_view what) const { r_.fail(key, what); }
  // The keys neither read nor known to change nothing parplan prices.
  std::vector<std::string> unread() const {
    std::vector<std::string> out;
    for (const auto& [key, value] : j_.items()) {
      if (read_.contains(key) || std::find(std::begin(kNotPriced), std::end(kNotPriced), key) != std::end(kNotPriced)) {
        continue;
      }
      out.push_back(key);
    }
    return out;
  }

 private:
  const nlohmann::json& j_;
  JsonReader r_;
  std::set<std::string, std::less<>> read_;
};

// Layers [0, d) of mlp_only_layers as the leading dense layers; any other list is refused.
int64_t leading_dense(HfReader& r, std::string_view key) {
  if (!r.has(key)) return 0;
  const nlohmann::json& list = r.raw(key);
  if (!list.is_array()) r.fail(key, "expected a list of layer indices");
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_number_integer() || list[i].get<int64_t>() != static_cast<int64_t>(i)) {
      r.fail(key, "parplan prices dense layers before the MoE ones only (a list 0, 1, .., d - 1)");
    }
  }
  return static_cast<int64_t>(list.size());
}

// The experts: each family's names for their count, width, shared experts, dense layers and routing groups.
void read_moe(HfReader& r, const std::string& type, ModelSpec& m, HfModel& out) {
  const bool deepseek = type.starts_with("deepseek"), qwen = type.starts_with("qwen");
  const int64_t dense_ffn = m.ffn_hidden;  // intermediate_size: the dense MLP's width in the MoE families
  if (type == "mixtral") {
    m.experts = r.need("num_local_experts", 1, 65'536);
  } else {
    m.experts = r.need(deepseek ? "n_routed_experts" : "num_experts", 1, 65'536);
    m.ffn_hidden = r.need("moe_intermediate_size", 1, kMaxDim);
  }
  m.top_k = r.need("num_experts_per_tok", 1, m.experts);
  if (deepseek) {
    m.shared_experts = r.opt("n_shared_experts", 0, 65'536).value_or(0);
    m.dense_layers = r.opt("first_k_dense_replace", 0, m.layers - 1).value_or(0);
    if (r.opt("moe_layer_freq", 1, 100'000).value_or(1) != 1) {
      r.fail("moe_layer_freq", "parplan prices every layer after the first_k_dense_replace ones as MoE (1)");
    }
    const int64_t groups = r.opt("n_group", 1, 65'536).value_or(1);
    const int64_t chosen = r.opt("topk_group", 1, groups).value_or(groups);
    if (groups > 1 && chosen < groups) {
      m.router_groups = groups;
      m.router_group_top_k = chosen;
      // The routing rules (planner/spec), named by this file's keys rather than a model profile's JSON path.
      if (const MoeRoutingError e = moe_routing_error(m); e.field != MoeRoutingError::Field::none) {
        r.fail(e.field == MoeRoutingError::Field::router_groups ? "n_group" : "topk_group", e.message);
      }
    }
    m.mtp_layers = r.opt("num_nextn_predict_layers", 0, 100).value_or(0);
  } else if (qwen) {
    m.moe_layer_step = r.opt("decoder_sparse_step", 1, m.layers).value_or(1);
    m.dense_layers = leading_dense(r, "mlp_only_layers");
    if (m.dense_layers > 0 && m.moe_layer_step > 1) {  // Qwen counts the step from layer 0, parplan after the dense
      r.fail("mlp_only_layers", "with decoder_sparse_step above 1 is not modelled (give one of the two)");
    }
    if (const auto shared = r.opt("shared_expert_intermediate_size", 1, kMaxDim); shared && type == "qwen2_moe") {
      if (*shared % m.ffn_hidden != 0) {
        r.fail("shared_expert_intermediate_size", fmt::format("{} is not a multiple of moe_intermediate_size {} "
                                                              "(parplan prices shared experts of the experts' width)",
                                                              *shared, m.ffn_hidden));
      }
      m.shared_experts = *shared / m.ffn_hidden;
      out.ignored.push_back("shared_expert_intermediate_size: the shared expert's sigmoid gate is not priced");
    }
  }
  if (m.dense_layers > 0 || m.moe_layer_step > 1) m.dense_ffn_hidden = dense_ffn;
}

// Multi-head latent attention (DeepSeek-V2/V3): the ranks and the head widths.
void read_mla(HfReader& r, ModelSpec& m) {
  m.kv_lora_rank = r.need("kv_lora_rank", 1, kMaxDim);
  m.q_lora_rank = r.opt("q_lora_rank", 1, kMaxDim).value_or(0);
  m.head_dim_override = r.need("qk_nope_head_dim", 1, kMaxDim);
  m.qk_rope_head_dim = r.need("qk_rope_head_dim", 1, kMaxDim);
  m.v_head_dim_override = r.need("v_head_dim", 1, kMaxDim);
  m.kv_heads = m.heads;  // every head has its keys and values (num_key_value_heads, where given, says the same)
}

// Sliding windows: Mistral's on every layer; Qwen's (use_sliding_window, on the layers from max_window_layers) are
// refused, as are layer_types other than full attention.
void read_window(HfReader& r, const std::string& type, ModelSpec& m) {
  if (type == "mistral" || type == "mixtral") {
    if (const auto w = r.opt("sliding_window", 1, 100'000'000)) m.sliding_window = *w;
    return;
  }
  if (r.flag("use_sliding_window", false)) {
    r.fail("use_sliding_window", "Qwen's windowed layers (from max_window_layers) are not modelled");
  }
  r.opt("sliding_window", 1, 100'000'000);  // used only with use_sliding_window
  r.opt("max_window_layers", 0, 100'000);
  if (r.has("layer_types")) {
    const nlohmann::json& kinds = r.raw("layer_types");
    if (!kinds.is_array() || std::any_of(kinds.begin(), kinds.end(), [](const nlohmann::json& k) {
          return !k.is_string() || k.get<std::string>() != "full_attention";
        })) {
      r.fail("layer_types", "parplan reads configs whose layers are all full_attention");
    }
  }
}
}  // namespace

bool is_hf_config(const nlohmann::json& j) { return j.is_object() && j.contains("model_type") && !j.contains("kind"); }

HfModel model_from_hf_config(const nlohmann::json& j, const std::string& path) {
  HfReader r(j, path);
  HfModel out;
  const std::string type = r.text("model_type");
  if (std::find(std::begin(kFamilies), std::end(kFamilies), type) == std::end(kFamilies)) {
    r.fail("model_type", fmt::format("'{}' is not a family parplan reads (llama, mistral, mixtral, qwen2, qwen2_moe, "
                                     "qwen3, qwen3_moe, deepseek_v2, deepseek_v3); write a model profile "
                                     "(docs/profiles.md)", excerpt(type)));
  }
  ModelSpec& m = out.model;
  m.name = r.text("_name_or_path");
  if (m.name.empty()) {  // a download's folder names the model (".../Qwen3-30B-A3B/config.json"), else the file
    const std::filesystem::path file(path);
    const bool generic = file.filename() == "config.json" && !file.parent_path().filename().empty();
    m.name = (generic ? file.parent_path().filename() : file.stem()).string();
  }
  m.source = fmt::format("Hugging Face config {} (model_type {})", path, type);
  m.layers = r.need("num_hidden_layers", 1, 100'000);
  m.hidden = r.need("hidden_size", 1, kMaxDim);
  m.heads = r.need("num_attention_heads", 1, kMaxDim);
  m.kv_heads = r.opt("num_key_value_heads", 1, m.heads).value_or(m.heads);
  if (m.heads % m.kv_heads != 0) {
    r.fail("num_key_value_heads", fmt::format("{} does not divide num_attention_heads {}", m.kv_heads, m.heads));
  }
  if (const auto head = r.opt("head_dim", 1, kMaxDim); head && (m.hidden % m.heads != 0 || *head != m.hidden / m.heads)) {
    m.head_dim_override = *head;
  }
  m.ffn_hidden = r.need("intermediate_size", 1, kMaxDim);
  m.vocab = r.need("vocab_size", 1, 100'000'000);
  m.tied_embeddings = r.flag("tie_word_embeddings", true);  // transformers' PretrainedConfig default
  if (const std::string act = r.text("hidden_act"); act != "silu" && act != "swish") {
    r.fail("hidden_act", fmt::format("'{}': parplan prices these families' gated MLP with SiLU (SwiGLU)", excerpt(act)));
  }
  m.ffn_type = FfnType::swiglu;
  m.norm = NormType::rmsnorm;
  m.position = PositionEmbedding::rotary;
  m.bias = r.flag("attention_bias", false) || r.flag("mlp_bias", false);
  if (m.bias) out.ignored.push_back("attention_bias / mlp_bias: priced as biases on every linear layer");
  if (type == "qwen2" || type == "qwen2_moe") out.ignored.push_back("Qwen2's query/key/value biases are not priced");
  m.dropout = r.number("attention_dropout", 0.0) > 0 || r.number("hidden_dropout", 0.0) > 0;
  if (type.starts_with("deepseek")) read_mla(r, m);
  if (type == "mixtral" || type.ends_with("_moe") || type.starts_with("deepseek")) read_moe(r, type, m, out);
  read_window(r, type, m);
  m.seq_len = kAssumedSeq;
  out.assumed.push_back(fmt::format("seq {} (give --seq: the config's max_position_embeddings{} is the context limit, "
                                    "not a training length)",
                                    kAssumedSeq, r.has("max_position_embeddings")
                                                     ? fmt::format(" {}", j.at("max_position_embeddings").dump())
                                                     : std::string()));
  for (const std::string& key : r.unread()) out.ignored.push_back(key + ": not read");
  check_model(m, path);
  return out;
}

}  // namespace parplan::cli
