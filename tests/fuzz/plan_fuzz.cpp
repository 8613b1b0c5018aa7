// libFuzzer target: the Plan document (plan_from_text), then validate() and, for a valid plan, the full estimate.
// Oracle: InputError (with a message) or a plan whose estimate has finite, positive memory and step time; no other
// exception, no sanitizer report. Profile names resolve against the embedded profiles.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "planner/spec/config.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/spec/error.hpp"
#include "planner/spec/plan_json.hpp"
#include "planner/spec/profiles.hpp"

namespace {
bool finite_positive(double x) { return std::isfinite(x) && x > 0; }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const parplan::ProfileSet profiles = parplan::ProfileSet::embedded();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  parplan::Plan plan;
  try {
    plan = parplan::plan_from_text(text, profiles, "fuzz.json");
  } catch (const parplan::InputError& e) {
    if (*e.what() == '\0') std::abort();
    return 0;
  }
  if (!parplan::validate(plan, {true}).ok()) return 0;
  const parplan::Estimate e = parplan::estimate(plan);
  if (!finite_positive(e.peak_memory_bytes) || !finite_positive(e.time.step_s) || !std::isfinite(e.time.mfu)) {
    std::abort();
  }
  return 0;
}
