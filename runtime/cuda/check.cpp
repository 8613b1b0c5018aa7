// Failure messages for the CUDA / cuBLAS / NCCL check macros, and GPU detection that never throws.
#include "runtime/cuda/check.hpp"

#include <fmt/core.h>
#include <string>

#include "planner/spec/error.hpp"
#include "runtime/backend.hpp"

namespace parplan::runtime {
namespace cuda {

void check_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return;
  throw BackendError(fmt::format("{} failed at {}:{}: {} ({})", expr, file, line, cudaGetErrorString(e), cudaGetErrorName(e)));
}

void check_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw BackendError(fmt::format("{} failed at {}:{}: {} ({})", expr, file, line, cublasGetStatusString(s),
                                 cublasGetStatusName(s)));
}

void check_nccl(ncclResult_t r, ncclComm_t comm, const char* expr, const char* file, int line) {
  if (r == ncclSuccess) return;
  const char* last = ncclGetLastError(comm);
  throw BackendError(fmt::format("{} failed at {}:{}: {}{}{}", expr, file, line, ncclGetErrorString(r),
                                 last && *last ? ": " : "", last ? last : ""));
}

namespace {

// Why cudaGetDeviceCount failed, in words a user can act on: no driver at all (a machine without a GPU), a driver
// that sees no device, a driver older than this build's runtime; else the runtime's own message.
std::string no_gpu_reason(cudaError_t e) {
  int driver = 0, runtime = 0;
  (void)cudaDriverGetVersion(&driver);  // 0: no driver library could be loaded
  (void)cudaRuntimeGetVersion(&runtime);
  const auto version = [](int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); };
  const std::string call = fmt::format("cudaGetDeviceCount: {}", cudaGetErrorName(e));
  if (e == cudaErrorInsufficientDriver && driver == 0) {
    return fmt::format("no usable GPU: this machine has no NVIDIA driver (no libcuda to load; {})", call);
  }
  if (e == cudaErrorInsufficientDriver) {
    return fmt::format("no usable GPU: the NVIDIA driver supports CUDA {}, older than this build's CUDA {} runtime "
                       "(update the driver; {})",
                       version(driver), version(runtime), call);
  }
  if (e == cudaErrorNoDevice) return fmt::format("no usable GPU: the NVIDIA driver sees no CUDA device ({})", call);
  return fmt::format("no usable GPU: cudaGetDeviceCount failed: {} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
}

}  // namespace

CudaAvailability detect() {
  CudaAvailability a;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    a.reason = no_gpu_reason(e);
    (void)cudaGetLastError();  // clear the non-sticky error so later calls start clean
    return a;
  }
  if (n == 0) {
    a.reason = "no usable GPU: cudaGetDeviceCount found 0 devices";
    return a;
  }
  a.available = true;
  a.device_count = n;
  return a;
}

}  // namespace cuda

}  // namespace parplan::runtime
