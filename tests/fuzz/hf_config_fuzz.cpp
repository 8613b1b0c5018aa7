// libFuzzer target: a Hugging Face config.json read as a model shape (cli/interop/hf_config.hpp), as `--model
// config.json` reads it. Oracle: a document that is not a config is told apart; a config either gives a model with a
// finite, positive parameter count or throws InputError with a message; nothing else escapes.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cli/interop/hf_config.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/spec/error.hpp"
#include "planner/spec/json_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json j = parplan::parse_json_text(text, "config.json");
    if (!parplan::cli::is_hf_config(j)) return 0;
    const parplan::cli::HfModel m = parplan::cli::model_from_hf_config(j, "config.json");
    if (!(parplan::total_params(m.model) > 0)) std::abort();
  } catch (const parplan::InputError& e) {
    if (*e.what() == '\0') std::abort();
  }
  return 0;
}
