// Failure messages for the CUDA / cuBLAS / NCCL check macros, and GPU detection that never throws.
#include "runtime/cuda/check.hpp"

#include <fmt/core.h>

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

CudaAvailability detect() {
  CudaAvailability a;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    a.reason = fmt::format("no usable GPU: cudaGetDeviceCount failed: {} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
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
