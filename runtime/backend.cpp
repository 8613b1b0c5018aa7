// Seam helpers shared by every backend, and the cuda entry points of a build without CUDA.
#include "runtime/backend.hpp"

#ifdef PARPLAN_CUDA_PLUGIN
#include <dlfcn.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "planner/spec/error.hpp"

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

std::vector<std::string> cuda_plugin_candidates(const char* env_value, const std::string& exe) {
  std::vector<std::string> out;
#ifdef PARPLAN_CUDA_PLUGIN
  namespace fs = std::filesystem;
  if (env_value && *env_value) return {env_value};  // the user's choice: no silent fallback to another build
  const auto add = [&](const fs::path& p) {
    const std::string s = p.lexically_normal().string();
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  const fs::path built(PARPLAN_CUDA_PLUGIN);
  const fs::path name = built.filename();
  if (!exe.empty()) {
    const fs::path dir = fs::path(exe).parent_path();
    add(dir / name);
    add(dir / PARPLAN_CUDA_PLUGIN_INSTALL_DIR / name);  // relative to bin/, or absolute
  }
  add(built);
#else
  (void)env_value;
  (void)exe;
#endif
  return out;
}

std::string find_cuda_plugin(std::string* why) {
#ifdef PARPLAN_CUDA_PLUGIN
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const char* env = std::getenv("PARPLAN_CUDA_PLUGIN");
  const std::vector<std::string> c = cuda_plugin_candidates(env, ec ? std::string() : exe.string());
  std::string looked;
  for (const std::string& p : c) {
    // Absolute: dlopen searches the library path, not the working directory, for a name without a slash.
    if (std::filesystem::is_regular_file(p, ec)) return std::filesystem::absolute(p, ec).lexically_normal().string();
    looked += (looked.empty() ? "" : ", ") + p;
  }
  if (why) {
    *why = (env && *env) ? "PARPLAN_CUDA_PLUGIN=" + std::string(env) + " is not a file"
                         : "the CUDA backend plugin is not installed (looked for " + looked +
                               "; set PARPLAN_CUDA_PLUGIN to its path)";
  }
#else
  if (why) *why = "parplan was built without the CUDA backend (PARPLAN_WITH_CUDA=OFF or CUDA/NCCL not found)";
#endif
  return {};
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
    std::string why;
    const std::string path = find_cuda_plugin(&why);
    if (path.empty()) {
      p.error = "no usable GPU: " + why;
      return p;
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* err = dlerror();
      p.error = "no usable GPU: cannot load the CUDA backend " + path + ": " + (err ? err : "dlopen failed");
      return p;
    }
    p.detect = reinterpret_cast<void (*)(CudaAvailability*)>(dlsym(h, "parplan_cuda_detect"));
    p.make_world = reinterpret_cast<World* (*)(int, std::string*)>(dlsym(h, "parplan_cuda_make_world"));
    if (!p.detect || !p.make_world) p.error = "no usable GPU: " + path + " is not a parplan CUDA backend (no entry points)";
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
  std::string why;
  find_cuda_plugin(&why);
  a.reason = "no usable GPU: " + why;
  return a;
}

std::unique_ptr<World> make_cuda_world(int) { throw BackendError(detect_cuda().reason); }
#endif

}  // namespace parplan::runtime
