// Explaining a search: a one-line reason for each ranked plan (what it trades against the winner) and, when nothing
// fits, the memory floor of the model states (ZeRO bytes fully sharded) and the GPU count that floor needs.
#pragma once
#include <cstdint>
#include <string>

#include "planner/search/search.hpp"

namespace parplan {

// Why `c` ranks at `rank` (1-based) under `o`, against the winner `first`.
std::string rank_reason(const Candidate& c, const Candidate& first, int64_t rank, Objective o);
// The same after `suggest --simulate` re-ranked the plans by simulated step time (`sim_c`, `sim_first`, seconds).
std::string simulated_rank_reason(const Candidate& c, const Candidate& first, int64_t rank, double sim_c,
                                  double sim_first);

// Model-state memory with the states sharded over every GPU (ZeRO-3 x tp x pp: the least any mesh can hold).
struct StateFloor {
  double params = 0;               // total parameters
  double bytes_per_param = 0;      // weights + gradients + optimizer (model_states.hpp)
  double fp8_copy_bytes_per_param = 0;  // of which fp8 weight copies kept beside the 16-bit weights (not gathered in fp8)
  double total_bytes = 0;          // params x bytes_per_param
  double per_gpu_bytes = 0;        // total / gpus
  double fixed_bytes_per_gpu = 0;  // CUDA context + workspace (held whatever the mesh)
  double capacity_bytes = 0;       // the GPU's memory
  double limit_bytes = 0;          // what a plan may use of it (the request's budget less its headroom)
  bool fits = false;               // per_gpu + fixed <= limit (activations not counted)
  int64_t min_gpus = 0;            // smallest count for which the sharded states + fixed memory fit the limit
  // The same with 16-bit gradients (2 + 2 + 12 = 16 bytes per parameter with Adam).
  double bytes_per_param_16bit_grads = 0, per_gpu_bytes_16bit_grads = 0;
};
StateFloor state_floor(const SearchRequest& req, int64_t gpus);

}  // namespace parplan
