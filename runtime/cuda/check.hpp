// Check macros for CUDA, cuBLAS and NCCL calls: a failure throws BackendError with the expression, file:line and
// the library's own message (in the style of llm.c's cudaCheck and nccl-tests' NCCLCHECK).
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

namespace parplan::runtime::cuda {

void check_cuda(cudaError_t e, const char* expr, const char* file, int line);
void check_cublas(cublasStatus_t s, const char* expr, const char* file, int line);
// `comm` (may be null) adds ncclGetLastError's detail to the message.
void check_nccl(ncclResult_t r, ncclComm_t comm, const char* expr, const char* file, int line);

}  // namespace parplan::runtime::cuda

#include "runtime/backend.hpp"

namespace parplan::runtime::cuda {

// The plugin's entry points (runtime/backend.cpp loads them): GPU detection that never throws, and the world.
CudaAvailability detect();
std::unique_ptr<World> make_world(int ranks);

}  // namespace parplan::runtime::cuda

#define PARPLAN_CUDA_CHECK(expr) ::parplan::runtime::cuda::check_cuda((expr), #expr, __FILE__, __LINE__)
#define PARPLAN_CUBLAS_CHECK(expr) ::parplan::runtime::cuda::check_cublas((expr), #expr, __FILE__, __LINE__)
#define PARPLAN_NCCL_CHECK(comm, expr) ::parplan::runtime::cuda::check_nccl((expr), (comm), #expr, __FILE__, __LINE__)
