// The memory limit of one GPU (see memory_budget.hpp).
#include "planner/spec/memory_budget.hpp"

#include <algorithm>
#include <fmt/core.h>

#include "planner/spec/error.hpp"

namespace parplan {

MemoryLimit memory_limit(double capacity_bytes, std::optional<int64_t> budget_bytes, const Headroom& headroom) {
  MemoryLimit m;
  m.capacity_bytes = capacity_bytes;
  m.budget_bytes = budget_bytes ? std::min(static_cast<double>(*budget_bytes), capacity_bytes) : capacity_bytes;
  m.headroom_bytes = m.budget_bytes * headroom.fraction + static_cast<double>(headroom.bytes);
  m.limit_bytes = m.budget_bytes - m.headroom_bytes;
  return m;
}

void refuse_empty_limit(const MemoryLimit& m, std::string_view gpu) {
  if (m.limit_bytes > 0) return;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  throw InputError(fmt::format("--headroom: {:.2f} GiB leaves nothing of the {:.2f} GiB {} of {}", m.headroom_bytes / kGiB,
                               m.budget_bytes / kGiB, m.budget_bytes < m.capacity_bytes ? "budget" : "memory", gpu));
}

}  // namespace parplan
