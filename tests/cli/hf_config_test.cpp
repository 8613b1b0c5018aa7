// --model CONFIG.json with a Hugging Face config (cli/interop/hf_config.hpp): the fixtures in tests/cli/data/hf/ hold
// the keys of the published config.json files of Llama 3 8B, Mixtral 8x7B, Qwen3-30B-A3B and DeepSeek-V3 (values
// as their model cards give them); each reads back as the shipped profile's shape, field for field.
#include <doctest/doctest.h>
#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/run_helper.hpp"

using parplan::test::run_parplan;
using parplan::test::ScratchDir;

namespace {

const std::string kDir = std::string(PARPLAN_TEST_DIR) + "/cli/data/hf/";

// estimate --json's plan.model for `model` (a profile name or a file) on `gpus` GPUs with the extra flags.
nlohmann::json estimated_model(const std::string& model, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"estimate", "--model", model, "--gpus", "64", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_parplan(args, {}, 60);
  REQUIRE_MESSAGE(!r.out.empty(), r.err);  // exit 1 when the plan does not fit; the JSON is written either way
  return nlohmann::json::parse(r.out)["plan"]["model"];
}

// The report's text with its line wrapping undone (every run of white space one space).
std::string flat(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool space = c == ' ' || c == '\n';
    if (!space || out.empty() || out.back() != ' ') out += space ? ' ' : c;
  }
  return out;
}

}  // namespace

TEST_CASE("--model config.json: Hugging Face configs read as the shipped profiles' shapes") {
  const std::pair<const char*, const char*> cases[] = {{"llama3-8b.json", "llama3-8b"},
                                                       {"mixtral-8x7b.json", "mixtral-8x7b"},
                                                       {"qwen3-30b-a3b.json", "qwen3-30b-a3b"},
                                                       {"deepseek-v3.json", "deepseek-v3"}};
  for (const auto& [file, profile] : cases) {
    INFO(file);
    nlohmann::json got = estimated_model(kDir + file, {"--seq", "4096"}), want = estimated_model(profile, {"--seq", "4096"});
    CHECK(got["source"].get<std::string>().starts_with("Hugging Face config "));
    for (const char* k : {"name", "source", "aliases"}) {
      got.erase(k);
      want.erase(k);
    }
    CHECK(got.dump() == want.dump());
  }
  // DeepSeek-V3's node-limited routing and MTP module come from n_group / topk_group and num_nextn_predict_layers.
  const nlohmann::json ds = estimated_model(kDir + "deepseek-v3.json");
  CHECK(ds["moe"]["router_groups"] == 8);
  CHECK(ds["moe"]["router_group_top_k"] == 4);
  CHECK(ds["mtp_layers"] == 1);
  CHECK(ds["dense_layers"] == 3);
  CHECK(ds["dense_ffn_hidden"] == 18432);
}

TEST_CASE("--model config.json: what the config does not say is printed as assumed") {
  const auto r = run_parplan({"estimate", "--model", kDir + "llama3-8b.json", "--gpus", "8"}, {}, 60);
  CHECK(r.exit_code != 2);  // 1 where the plan does not fit: the report is printed either way
  CHECK(flat(r.out).find("assumed: seq 4096 (give --seq: the config's max_position_embeddings 8192 is the context "
                         "limit") != std::string::npos);
  CHECK(estimated_model(kDir + "llama3-8b.json")["seq_len"] == 4096);
  CHECK(estimated_model(kDir + "llama3-8b.json")["name"] == "llama3-8b");  // no _name_or_path: the file's stem
  CHECK(estimated_model(kDir + "llama3-8b.json", {"--seq", "8192"})["seq_len"] == 8192);
  const auto with_seq = run_parplan({"estimate", "--model", kDir + "llama3-8b.json", "--gpus", "8", "--seq", "8192"}, {}, 60);
  CHECK(with_seq.out.find("assumed: seq") == std::string::npos);
}

TEST_CASE("--model config.json: keys parplan cannot price are refused naming the file and key, others listed") {
  ScratchDir dir;
  const nlohmann::json base = nlohmann::json::parse(parplan::test::read_text(kDir + "qwen3-30b-a3b.json"));
  auto run_with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = base;
    edit(j);
    const std::string file = (dir.path / "config.json").string();
    parplan::test::write_text(file, j.dump());
    return run_parplan({"estimate", "--model", file, "--gpus", "64"}, {}, 60);
  };
  const std::pair<std::function<void(nlohmann::json&)>, std::string> bad[] = {
      {[](nlohmann::json& j) { j["model_type"] = "gpt2"; }, "/model_type: 'gpt2' is not a family parplan reads"},
      {[](nlohmann::json& j) { j.erase("hidden_size"); }, "/hidden_size: missing: needed for the model's shape"},
      {[](nlohmann::json& j) { j["hidden_size"] = -1; }, "/hidden_size"},
      {[](nlohmann::json& j) { j["hidden_size"] = "2048"; }, "/hidden_size"},
      {[](nlohmann::json& j) { j["num_experts_per_tok"] = 200; }, "/num_experts_per_tok"},
      {[](nlohmann::json& j) { j["hidden_act"] = "gelu"; }, "/hidden_act: 'gelu': parplan prices these families' gated MLP"},
      {[](nlohmann::json& j) { j["use_sliding_window"] = true; }, "/use_sliding_window: Qwen's windowed layers"},
      {[](nlohmann::json& j) { j["mlp_only_layers"] = {3, 7}; }, "/mlp_only_layers: parplan prices dense layers before"},
      {[](nlohmann::json& j) { j["layer_types"] = {"sliding_attention"}; }, "/layer_types: parplan reads configs"},
      {[](nlohmann::json& j) {
         j["mlp_only_layers"] = {0};
         j["decoder_sparse_step"] = 2;
       },
       "/mlp_only_layers: with decoder_sparse_step above 1 is not modelled"},
      {[](nlohmann::json& j) { j["num_key_value_heads"] = 5; }, "/num_key_value_heads: 5 does not divide"},
  };
  for (const auto& [edit, want] : bad) {
    const auto r = run_with(edit);
    INFO(want);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("config.json: " + want.substr(0, 1)) != std::string::npos);
    CHECK(r.err.find(want) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  // DeepSeek's routing groups are checked by the model's rules and named by the config's own keys.
  const nlohmann::json v3 = nlohmann::json::parse(parplan::test::read_text(kDir + "deepseek-v3.json"));
  const std::pair<std::function<void(nlohmann::json&)>, std::string> bad_groups[] = {
      {[](nlohmann::json& j) { j["n_group"] = 7; }, "/n_group: 7 does not divide the 256 experts"},
      {[](nlohmann::json& j) {
         j["n_group"] = 64;
         j["topk_group"] = 1;
       },
       "/topk_group: 1 groups of 4 experts hold fewer than top_k = 8 experts"},
  };
  for (const auto& [edit, want] : bad_groups) {
    nlohmann::json j = v3;
    edit(j);
    const std::string file = (dir.path / "config.json").string();
    parplan::test::write_text(file, j.dump());
    const auto r = run_parplan({"estimate", "--model", file, "--gpus", "256"}, {}, 60);
    INFO(want);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("config.json: " + want) != std::string::npos);
    CHECK(r.err.find("/moe/") == std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  // A key parplan does not read is listed, not silently dropped; leading dense layers map.
  const auto listed = run_with([](nlohmann::json& j) {
    j["some_new_option"] = 1;
    j["mlp_only_layers"] = {0, 1};
  });
  CHECK(listed.exit_code != 2);
  CHECK(flat(listed.out).find("not priced: some_new_option: not read") != std::string::npos);
  CHECK(listed.out.find("mlp_only_layers") == std::string::npos);
  CHECK(estimated_model((dir.path / "config.json").string())["dense_layers"] == 2);
  // A download's folder names the model when the file is config.json.
  std::filesystem::create_directories(dir.path / "Qwen3-30B-A3B");
  parplan::test::write_text((dir.path / "Qwen3-30B-A3B" / "config.json").string(), base.dump());
  CHECK(estimated_model((dir.path / "Qwen3-30B-A3B" / "config.json").string())["name"] == "Qwen3-30B-A3B");
}
