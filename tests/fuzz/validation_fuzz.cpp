// libFuzzer target: validation-run files (load_published_runs, the validation/published-runs.json schema (validation/README.md)),
// then score_runs on whatever maps. Oracle: InputError or a report whose predictions for scored rows are finite.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "planner/spec/error.hpp"
#include "planner/spec/profiles.hpp"
#include "planner/validation/validation.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const parplan::ProfileSet profiles = parplan::ProfileSet::embedded();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<parplan::MappedRun> runs;
  try {
    runs = parplan::load_published_runs(text, "fuzz.json", profiles);
  } catch (const parplan::InputError& e) {
    if (*e.what() == '\0') std::abort();
    return 0;
  }
  const parplan::ValidationReport report = parplan::score_runs(runs);
  for (const parplan::RunResult& r : report.rows) {
    if (r.run && r.run->scored() &&
        (!std::isfinite(r.predicted_step_time_s) || !(r.predicted_step_time_s > 0) || !std::isfinite(r.error))) {
      std::abort();
    }
  }
  return 0;
}
