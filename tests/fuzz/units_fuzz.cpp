// libFuzzer target: the human-quantity parsers (parse_count, parse_bytes, parse_seconds) behind --params, --memory
// and friends. Oracle: InputError naming the flag, or a finite positive value.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "planner/spec/error.hpp"
#include "planner/spec/units.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const double c = parplan::parse_count(text, "--params");
    if (!std::isfinite(c) || !(c > 0)) std::abort();
  } catch (const parplan::InputError& e) {
    if (std::string_view(e.what()).rfind("--params", 0) != 0) std::abort();
  }
  try {
    if (parplan::parse_bytes(text, "--memory") <= 0) std::abort();
  } catch (const parplan::InputError& e) {
    if (std::string_view(e.what()).rfind("--memory", 0) != 0) std::abort();
  }
  try {
    const double s = parplan::parse_seconds(text, "--time");
    if (!std::isfinite(s) || !(s > 0)) std::abort();
  } catch (const parplan::InputError& e) {
    if (std::string_view(e.what()).rfind("--time", 0) != 0) std::abort();
  }
  return 0;
}
