// CudaDevice: pool allocations with exact peak accounting, cuBLAS/cuBLASLt GEMMs, copies as memory-bound ops,
// CUDA events for timing, NCCL world communicator and ncclCommSplit, and an abortable synchronize.
#include "runtime/cuda/cuda_device.hpp"

#include <chrono>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <fmt/core.h>
#include <thread>

#include "planner/spec/error.hpp"
#include "runtime/cuda/nccl_comm.hpp"
#include "runtime/fill_pattern.hpp"
#include "runtime/gemm_layout.hpp"

namespace parplan::runtime::cuda {
namespace {

// 16 MiB of pattern on the device (outside the pool: not counted as allocated bytes, like the cuBLASLt workspace).
constexpr int64_t kFillPatternBytes = int64_t{16} << 20;

}  // namespace

struct CudaDevice::LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~LtPlan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

CudaDevice::CudaDevice(int ordinal, int rank, int world_size, const ncclUniqueId& id, const std::atomic<bool>* abort)
    : ordinal_(ordinal), rank_(rank), world_size_(world_size), abort_(abort) {
  bind();
  cudaDeviceProp prop{};
  PARPLAN_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal_));
  info_.name = prop.name;
  info_.compute_capability = prop.major * 10 + prop.minor;
  info_.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info_.supports_fp8 = info_.compute_capability >= 89;  // Ada (8.9) and Hopper (9.0) and later
  PARPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  PARPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = ordinal_;
  PARPLAN_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
  uint64_t keep = UINT64_MAX;  // never hand memory back to the driver between synchronizations
  PARPLAN_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));
  PARPLAN_CUBLAS_CHECK(cublasCreate(&blas_));
  PARPLAN_CUBLAS_CHECK(cublasSetStream(blas_, compute_));
  PARPLAN_CUBLAS_CHECK(cublasLtCreate(&lt_));
  PARPLAN_CUDA_CHECK(cudaMalloc(&lt_workspace_, lt_workspace_bytes_));
  static const std::vector<uint16_t> pattern = fill_pattern(static_cast<size_t>(kFillPatternBytes / 2));
  PARPLAN_CUDA_CHECK(cudaMalloc(&fill_src_, static_cast<size_t>(kFillPatternBytes)));
  PARPLAN_CUDA_CHECK(cudaMemcpy(fill_src_, pattern.data(), static_cast<size_t>(kFillPatternBytes), cudaMemcpyHostToDevice));
  PARPLAN_NCCL_CHECK(nullptr, ncclCommInitRank(&world_comm_, world_size_, id, rank_));
}

CudaDevice::~CudaDevice() {
  (void)cudaSetDevice(ordinal_);
  for (auto& [key, plan] : lt_plans_) delete plan;
  if (world_comm_) (void)(abort_->load() ? ncclCommAbort(world_comm_) : ncclCommDestroy(world_comm_));
  for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
  for (auto& [p, bytes] : live_) (void)cudaFreeAsync(p, compute_);
  if (compute_) (void)cudaStreamSynchronize(compute_);
  if (pool_) (void)cudaMemPoolDestroy(pool_);
  if (lt_workspace_) (void)cudaFree(lt_workspace_);
  if (fill_src_) (void)cudaFree(fill_src_);
  if (lt_) (void)cublasLtDestroy(lt_);
  if (blas_) (void)cublasDestroy(blas_);
  if (comm_) (void)cudaStreamDestroy(comm_);
  if (compute_) (void)cudaStreamDestroy(compute_);
}

void CudaDevice::bind() const { PARPLAN_CUDA_CHECK(cudaSetDevice(ordinal_)); }

void CudaDevice::fill(void* p, int64_t bytes) {
  auto* dst = static_cast<unsigned char*>(p);
  const auto* src = static_cast<const unsigned char*>(fill_src_);
  // Start offsets differ between allocations (multiples of 256 bytes), so two operands do not hold the same data.
  const int64_t offset = static_cast<int64_t>((fills_++ * 40'503u) % static_cast<uint64_t>(kFillPatternBytes / 256)) * 256;
  const int64_t first = std::min(bytes, kFillPatternBytes - offset);
  PARPLAN_CUDA_CHECK(cudaMemcpyAsync(dst, src + offset, static_cast<size_t>(first), cudaMemcpyDeviceToDevice, compute_));
  int64_t done = first;
  if (done < bytes && offset > 0) {
    const int64_t n = std::min(bytes - done, offset);  // the pattern's head completes one period
    PARPLAN_CUDA_CHECK(cudaMemcpyAsync(dst + done, src, static_cast<size_t>(n), cudaMemcpyDeviceToDevice, compute_));
    done += n;
  }
  while (done < bytes) {  // the buffer's filled prefix is a whole number of periods: copy it onwards, doubling
    const int64_t n = std::min(bytes - done, done);
    PARPLAN_CUDA_CHECK(cudaMemcpyAsync(dst + done, dst, static_cast<size_t>(n), cudaMemcpyDeviceToDevice, compute_));
    done += n;
  }
}

Buffer CudaDevice::allocate(int64_t bytes, Fill how) {
  if (bytes < 0) throw BackendError(fmt::format("cuda allocate: negative size {}", bytes));
  if (bytes == 0) return {};
  void* p = nullptr;
  PARPLAN_CUDA_CHECK(cudaMallocFromPoolAsync(&p, static_cast<size_t>(bytes), pool_, compute_));
  if (how == Fill::pattern) fill(p, bytes);
  // Work on the comm stream may use the buffer next: order it after the allocation.
  Event e = record(Stream::compute);
  wait(Stream::comm, e);
  live_[p] = bytes;
  allocated_ += bytes;
  peak_ = std::max(peak_, allocated_);
  return {p, bytes};
}

void CudaDevice::free(Buffer b) {
  if (!b.ptr) return;
  auto it = live_.find(b.ptr);
  if (it == live_.end()) throw BackendError("cuda free: buffer was not allocated by this device");
  // The comm stream may still read the buffer: the free waits for it.
  Event e = record(Stream::comm);
  wait(Stream::compute, e);
  PARPLAN_CUDA_CHECK(cudaFreeAsync(b.ptr, compute_));
  allocated_ -= it->second;
  live_.erase(it);
}

MemoryStats CudaDevice::memory_stats() const {
  MemoryStats m;
  m.allocated_bytes = allocated_;
  m.peak_allocated_bytes = peak_;
  uint64_t reserved_high = 0;
  PARPLAN_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &reserved_high));
  m.pool_reserved_peak_bytes = static_cast<int64_t>(reserved_high);
  size_t free_b = 0, total_b = 0;
  PARPLAN_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  m.device_free_bytes = static_cast<int64_t>(free_b);
  m.device_total_bytes = static_cast<int64_t>(total_b);
  return m;
}

void CudaDevice::reset_peak() {
  peak_ = allocated_;
  uint64_t zero = 0;  // the only value these attributes accept: resets the high-water marks to current use
  PARPLAN_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero));
  PARPLAN_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero));
}

void CudaDevice::upload(Buffer dst, const void* src, int64_t bytes) {
  if (bytes <= 0) return;
  if (dst.bytes < bytes) throw BackendError(fmt::format("cuda upload: {} bytes into a buffer of {}", bytes, dst.bytes));
  PARPLAN_CUDA_CHECK(cudaMemcpyAsync(dst.ptr, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, compute_));
  synchronize();
}

void CudaDevice::download(void* dst, Buffer src, int64_t bytes) {
  if (bytes <= 0) return;
  if (src.bytes < bytes) throw BackendError(fmt::format("cuda download: {} bytes from a buffer of {}", bytes, src.bytes));
  synchronize();  // the comm stream may have produced the data
  PARPLAN_CUDA_CHECK(cudaMemcpyAsync(dst, src.ptr, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, compute_));
  synchronize();
}

namespace {

cudaDataType_t blas_type(DType d) {
  switch (d) {
    case DType::fp32:
    case DType::tf32:
      return CUDA_R_32F;
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::fp16:
      return CUDA_R_16F;
    case DType::fp8:
      return CUDA_R_8F_E4M3;
  }
  return CUDA_R_32F;
}

void need(Buffer b, int64_t bytes, const char* which) {
  if (bytes > 0 && (!b.ptr || b.bytes < bytes)) {
    throw BackendError(fmt::format("cuda gemm: operand {} holds {} bytes, the shape needs {}", which, b.bytes, bytes));
  }
}

}  // namespace

void CudaDevice::gemm(const GemmShape& s, Buffer a, Buffer b, Buffer c) {
  need(a, s.a_bytes(), "A");
  need(b, s.b_bytes(), "B");
  need(c, s.c_bytes(), "C");
  if (s.dtype == DType::fp8) return gemm_fp8(s, a, b, c);
  const ColumnMajorGemm g = to_column_major(s);
  const float alpha = s.alpha, beta = s.accumulate ? 1.0f : 0.0f;
  const cudaDataType_t t = blas_type(s.dtype);
  const cublasComputeType_t compute = s.dtype == DType::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cublasOperation_t opa = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (s.batch == 1) {
    PARPLAN_CUBLAS_CHECK(cublasGemmEx(blas_, opa, CUBLAS_OP_N, static_cast<int>(g.m), static_cast<int>(g.n),
                                      static_cast<int>(g.k), &alpha, b.ptr, t, static_cast<int>(g.lda), a.ptr, t,
                                      static_cast<int>(g.ldb), &beta, c.ptr, t, static_cast<int>(g.ldc), compute,
                                      CUBLAS_GEMM_DEFAULT));
  } else {
    PARPLAN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        blas_, opa, CUBLAS_OP_N, static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), &alpha, b.ptr, t,
        static_cast<int>(g.lda), g.stride_a, a.ptr, t, static_cast<int>(g.ldb), g.stride_b, &beta, c.ptr, t,
        static_cast<int>(g.ldc), g.stride_c, static_cast<int>(s.batch), compute, CUBLAS_GEMM_DEFAULT));
  }
}

void CudaDevice::gemm_fp8(const GemmShape& s, Buffer a, Buffer b, Buffer c) {
  if (!info_.supports_fp8) {
    throw BackendError(fmt::format("cuda gemm: fp8 needs compute capability >= 8.9; {} is {}.{}", info_.name,
                                   info_.compute_capability / 10, info_.compute_capability % 10));
  }
  if (!s.b_transposed) throw BackendError("cuda gemm: fp8 (cuBLASLt) needs B stored [n, k] (the TN layout)");
  const ColumnMajorGemm g = to_column_major(s);
  auto key = std::make_tuple(s.m, s.n, s.k, s.batch, s.accumulate);
  LtPlan*& plan = lt_plans_[key];
  if (!plan) {
    auto p = std::make_unique<LtPlan>();
    PARPLAN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    PARPLAN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    PARPLAN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    PARPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_8F_E4M3, static_cast<uint64_t>(g.k), static_cast<uint64_t>(g.m), g.lda));
    PARPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_8F_E4M3, static_cast<uint64_t>(g.k), static_cast<uint64_t>(g.n), g.ldb));
    PARPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_16BF, static_cast<uint64_t>(g.m), static_cast<uint64_t>(g.n), g.ldc));
    if (s.batch > 1) {
      const int32_t batch = static_cast<int32_t>(s.batch);
      const std::pair<cublasLtMatrixLayout_t, int64_t> layouts[] = {{p->a, g.stride_a}, {p->b, g.stride_b}, {p->c, g.stride_c}};
      for (const auto& [layout, stride] : layouts) {
        PARPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
        PARPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    PARPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &lt_workspace_bytes_, sizeof lt_workspace_bytes_);
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulAlgoGetHeuristic(lt_, p->op, p->a, p->b, p->c, p->c, pref, 1, &result, &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    PARPLAN_CUBLAS_CHECK(st);
    if (found == 0) {
      throw BackendError(fmt::format("cublasLtMatmulAlgoGetHeuristic: no fp8 algorithm for m={} n={} k={} batch={}", s.m,
                                     s.n, s.k, s.batch));
    }
    p->algo = result.algo;
    plan = p.release();
  }
  const float alpha = s.alpha, beta = s.accumulate ? 1.0f : 0.0f;
  PARPLAN_CUBLAS_CHECK(cublasLtMatmul(lt_, plan->op, &alpha, b.ptr, plan->a, a.ptr, plan->b, &beta, c.ptr, plan->c,
                                      c.ptr, plan->c, &plan->algo, lt_workspace_, lt_workspace_bytes_, compute_));
}

void CudaDevice::memory_op(Buffer src, Buffer dst, int64_t bytes) {
  if (bytes <= 0) return;
  if (src.bytes < bytes || dst.bytes < bytes) {
    throw BackendError(fmt::format("cuda memory_op: {} bytes requested, buffers hold {} and {}", bytes, src.bytes, dst.bytes));
  }
  PARPLAN_CUDA_CHECK(cudaMemcpyAsync(dst.ptr, src.ptr, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, compute_));
}

Event CudaDevice::record(Stream s) {
  if (next_event_ == events_.size()) {
    cudaEvent_t e = nullptr;
    PARPLAN_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  PARPLAN_CUDA_CHECK(cudaEventRecord(events_[next_event_], stream(s)));
  return Event{static_cast<int32_t>(next_event_++)};
}

void CudaDevice::wait(Stream s, Event e) {
  if (e.id < 0 || static_cast<size_t>(e.id) >= next_event_) throw BackendError(fmt::format("cuda event {}: not recorded", e.id));
  PARPLAN_CUDA_CHECK(cudaStreamWaitEvent(stream(s), events_[static_cast<size_t>(e.id)], 0));
}

double CudaDevice::elapsed_s(Event from, Event to) {
  for (Event e : {from, to}) {
    if (e.id < 0 || static_cast<size_t>(e.id) >= next_event_) throw BackendError(fmt::format("cuda event {}: not recorded", e.id));
  }
  float ms = 0.0f;
  PARPLAN_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[static_cast<size_t>(from.id)], events_[static_cast<size_t>(to.id)]));
  return static_cast<double>(ms) * 1e-3;
}

void CudaDevice::poll_comm_errors() {
  ncclResult_t r = ncclSuccess;
  PARPLAN_NCCL_CHECK(world_comm_, ncclCommGetAsyncError(world_comm_, &r));
  PARPLAN_NCCL_CHECK(world_comm_, r);
  for (NcclCommunicator* c : comms_) {
    if (!c->handle()) continue;
    PARPLAN_NCCL_CHECK(c->handle(), ncclCommGetAsyncError(c->handle(), &r));
    PARPLAN_NCCL_CHECK(c->handle(), r);
  }
}

void CudaDevice::synchronize() {
  // Poll instead of blocking in cudaStreamSynchronize, so a failed peer (abort flag) or an NCCL async error
  // ends the wait: the communicators are aborted and the error is thrown (nccl-tests' testStreamSynchronize).
  for (;;) {
    bool done = true;
    for (cudaStream_t s : {compute_, comm_}) {
      cudaError_t e = cudaStreamQuery(s);
      if (e == cudaErrorNotReady) {
        done = false;
      } else {
        PARPLAN_CUDA_CHECK(e);
      }
    }
    if (done) return;
    if (abort_->load()) {
      abort_communicators();
      throw BackendError("cuda synchronize: aborted because another rank failed");
    }
    try {
      poll_comm_errors();
    } catch (...) {
      abort_communicators();
      throw;
    }
    std::this_thread::yield();
  }
}

std::unique_ptr<Communicator> CudaDevice::split(int color, int key) {
  if (!world_comm_) throw BackendError("nccl split: the world communicator was aborted");
  ncclComm_t c = nullptr;
  PARPLAN_NCCL_CHECK(world_comm_, ncclCommSplit(world_comm_, color, key, &c, nullptr));
  return std::make_unique<NcclCommunicator>(*this, c, color);
}

void CudaDevice::abort_communicators() noexcept {
  for (NcclCommunicator* c : comms_) c->abort();
  if (world_comm_) (void)ncclCommAbort(world_comm_);
  world_comm_ = nullptr;
}

}  // namespace parplan::runtime::cuda
