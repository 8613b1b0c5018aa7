// libFuzzer target: training-framework configs (cli/interop: Megatron-LM launch scripts and YAML args, NeMo YAML,
// torchtitan TOML, DeepSpeed JSON, nanotron YAML). The first byte picks the reader (or, past the last, the format
// guess); the rest is the file. Oracle: import_framework returns, or throws InputError with a message.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "cli/interop/framework.hpp"
#include "planner/spec/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using parplan::cli::Framework;
  if (size == 0) return 0;
  constexpr Framework kFormats[] = {Framework::megatron, Framework::nemo, Framework::torchtitan, Framework::deepspeed,
                                    Framework::nanotron};
  const size_t pick = data[0] % (std::size(kFormats) + 1);
  const std::optional<Framework> format = pick < std::size(kFormats) ? std::optional(kFormats[pick]) : std::nullopt;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const char* path = pick == 2 ? "fuzz.toml" : pick == 3 ? "fuzz.json" : pick == 0 ? "fuzz.sh" : "fuzz.yaml";
  try {
    const parplan::cli::Imported im = parplan::cli::import_framework(text, path, format);
    (void)im;
  } catch (const parplan::InputError& e) {
    if (*e.what() == '\0') std::abort();
  }
  return 0;
}
