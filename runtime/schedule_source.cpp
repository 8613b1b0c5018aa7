// Interim stage orders (GPipe, 1F1B) until simulator/schedule.hpp provides the single definition; see the header.
#include "runtime/schedule_source.hpp"

#include <algorithm>
#include <fmt/core.h>

#include "planner/error.hpp"

namespace parplan::runtime {

std::vector<ScheduleStep> stage_schedule(const Plan& plan, int64_t stage) {
  const int64_t p = plan.parallel.pp, m = plan.parallel.num_microbatches;
  std::vector<ScheduleStep> out;
  switch (plan.parallel.schedule) {
    case Schedule::gpipe:
      // GPipe (Huang et al. 2019): all forwards, then all backwards.
      for (int64_t f = 0; f < m; ++f) out.push_back({Phase::forward, f, 0});
      for (int64_t b = 0; b < m; ++b) out.push_back({Phase::backward, b, 0});
      return out;
    case Schedule::one_f_one_b: {
      // 1F1B (Narayanan et al. 2021, Sec. 2.2): min(p - stage - 1, m) warm-up forwards, then alternate.
      const int64_t warm = std::min(p - stage - 1, m);
      int64_t f = 0, b = 0;
      for (; f < warm; ++f) out.push_back({Phase::forward, f, 0});
      while (f < m) {
        out.push_back({Phase::forward, f++, 0});
        out.push_back({Phase::backward, b++, 0});
      }
      while (b < m) out.push_back({Phase::backward, b++, 0});
      return out;
    }
    case Schedule::interleaved:
    case Schedule::zero_bubble:
      break;
  }
  throw InputError(fmt::format("run: the {} schedule needs the simulator's schedule order (simulator/schedule.hpp), "
                               "which the runtime does not have yet; use gpipe or 1f1b",
                               to_string(plan.parallel.schedule)));
}

}  // namespace parplan::runtime
