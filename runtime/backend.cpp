// Seam helpers shared by every backend, and the cuda entry points of a build without CUDA.
#include "runtime/backend.hpp"

#include "planner/error.hpp"

namespace parplan::runtime {

std::string_view to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_reduce:
      return "all_reduce";
    case CollectiveKind::all_gather:
      return "all_gather";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::all_to_all:
      return "all_to_all";
    case CollectiveKind::send:
      return "send";
    case CollectiveKind::recv:
      return "recv";
    case CollectiveKind::barrier:
      return "barrier";
  }
  return "?";
}

#ifndef PARPLAN_HAVE_CUDA
CudaAvailability detect_cuda() {
  CudaAvailability a;
  a.reason = "no usable GPU: parplan was built without the CUDA backend (PARPLAN_WITH_CUDA=OFF or CUDA/NCCL not found)";
  return a;
}

std::unique_ptr<World> make_cuda_world(int) { throw BackendError(detect_cuda().reason); }
#endif

}  // namespace parplan::runtime
