// libFuzzer target: one model / GPU / cluster profile document through ProfileSet::add (strict JSON reader).
// Oracle: any input either adds a profile or throws InputError with a message; nothing else escapes,
// and an accepted model has a finite, positive parameter count.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "planner/spec/error.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/spec/profiles.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  parplan::ProfileSet set;
  try {
    const std::string kind = set.add(text, "fuzz.json");
    if (kind == "model") {
      const parplan::ModelSpec& m = *set.find_model(set.entries().back().name);
      const auto n = parplan::total_params(m);
      if (n <= 0) std::abort();
    }
  } catch (const parplan::InputError& e) {
    if (*e.what() == '\0') std::abort();
  }
  return 0;
}
