// The memory a plan may use on one GPU: the GPU's capacity, or a smaller budget, less the memory to keep free.
// check's and suggest's --memory and --headroom both mean this.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace parplan {

// Required free memory per GPU: a fraction of the budget and/or absolute bytes (both apply when both are set).
struct Headroom {
  double fraction = 0;  // 0.1 = keep 10% of the budget free
  int64_t bytes = 0;
};

struct MemoryLimit {
  double capacity_bytes = 0;  // the GPU's memory
  double budget_bytes = 0;    // min(--memory, capacity)
  double headroom_bytes = 0;  // kept free of the budget
  double limit_bytes = 0;     // budget - headroom: a plan's peak must not exceed this (<= 0: nothing can fit)
};

// `budget_bytes`: the --memory budget (default and upper bound: the capacity).
MemoryLimit memory_limit(double capacity_bytes, std::optional<int64_t> budget_bytes, const Headroom& headroom);

// An InputError naming --headroom when the headroom leaves nothing of the budget of `gpu`.
void refuse_empty_limit(const MemoryLimit& m, std::string_view gpu);

}  // namespace parplan
