// A Hugging Face transformers config.json as a model shape: `--model config.json` (docs/interop.md, "Hugging Face
// config.json"). The decoder-only families whose configs name every width parplan prices: llama, mistral, mixtral,
// qwen2, qwen2_moe, qwen3, qwen3_moe, deepseek_v2, deepseek_v3. Another model_type, or a key of these whose value
// parplan cannot price (a non-gated activation, MoE layers not after the leading dense ones, Qwen's windowed layers),
// is an InputError naming the file and the key.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/spec/spec.hpp"

namespace parplan::cli {

// Whether a JSON document is a Hugging Face config: an object with model_type and no parplan profile kind.
bool is_hf_config(const nlohmann::json& j);

struct HfModel {
  ModelSpec model;
  std::vector<std::string> assumed;  // what the config does not say and parplan took ("seq 4096: ...")
  std::vector<std::string> ignored;  // keys read and not priced ("attention_bias: ..."), and keys not read
};

// The model shape `j` (from `path`) describes, checked as a model profile is (check_model).
HfModel model_from_hf_config(const nlohmann::json& j, const std::string& path);

}  // namespace parplan::cli
