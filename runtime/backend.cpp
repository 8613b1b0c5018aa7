// Seam helpers shared by every backend, and the cuda entry points of a build without CUDA.
#include "runtime/backend.hpp"

#ifdef PARPLAN_CUDA_PLUGIN
#include <dlfcn.h>
#endif

#include <string>

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

#ifdef PARPLAN_CUDA_PLUGIN
// The CUDA backend is a plugin (runtime/cuda, linked with cuBLAS, cuBLASLt and NCCL), loaded on first use: a
// binary linked with those libraries spends about 0.35 s in their loading and initialisers at every start, which
// every command that never touches a GPU would pay (`suggest` went from 10 ms to 360 ms).
namespace {
struct CudaPlugin {
  void (*detect)(CudaAvailability*) = nullptr;
  World* (*make_world)(int, std::string*) = nullptr;
  std::string error;  // why it could not be loaded
};

const CudaPlugin& cuda_plugin() {
  static const CudaPlugin plugin = [] {
    CudaPlugin p;
    void* h = dlopen(PARPLAN_CUDA_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = dlerror();
      p.error = std::string("no usable GPU: cannot load the CUDA backend ") + PARPLAN_CUDA_PLUGIN + ": " +
                (why ? why : "dlopen failed");
      return p;
    }
    p.detect = reinterpret_cast<void (*)(CudaAvailability*)>(dlsym(h, "parplan_cuda_detect"));
    p.make_world = reinterpret_cast<World* (*)(int, std::string*)>(dlsym(h, "parplan_cuda_make_world"));
    if (!p.detect || !p.make_world) p.error = std::string("the CUDA backend ") + PARPLAN_CUDA_PLUGIN + " lacks its entry points";
    return p;
  }();
  return plugin;
}
}  // namespace

CudaAvailability detect_cuda() {
  const CudaPlugin& p = cuda_plugin();
  CudaAvailability a;
  if (!p.error.empty()) {
    a.reason = p.error;
    return a;
  }
  p.detect(&a);
  return a;
}

std::unique_ptr<World> make_cuda_world(int ranks) {
  const CudaPlugin& p = cuda_plugin();
  if (!p.error.empty()) throw BackendError(p.error);
  std::string error;
  World* w = p.make_world(ranks, &error);
  if (!w) throw BackendError(error);
  return std::unique_ptr<World>(w);
}
#else
CudaAvailability detect_cuda() {
  CudaAvailability a;
  a.reason = "no usable GPU: parplan was built without the CUDA backend (PARPLAN_WITH_CUDA=OFF or CUDA/NCCL not found)";
  return a;
}

std::unique_ptr<World> make_cuda_world(int) { throw BackendError(detect_cuda().reason); }
#endif

}  // namespace parplan::runtime
