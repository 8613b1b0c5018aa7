// The cuda backend's Device: a dedicated stream-ordered memory pool, compute and comm streams, CUDA events,
// cuBLAS / cuBLASLt GEMMs and NCCL communicators split from the world communicator.
#pragma once
#include <atomic>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/cuda/check.hpp"

namespace parplan::runtime::cuda {

class NcclCommunicator;

class CudaDevice final : public Device {
 public:
  // Binds the calling thread to GPU `ordinal`, creates streams, pool and handles, and joins the world NCCL
  // communicator (collective over all ranks: every rank constructs its device at the same time).
  CudaDevice(int ordinal, int rank, int world_size, const ncclUniqueId& id, const std::atomic<bool>* abort);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  DeviceInfo info() const override { return info_; }
  Buffer allocate(int64_t bytes, Fill fill = Fill::pattern) override;
  void free(Buffer b) override;
  MemoryStats memory_stats() const override;
  void reset_peak() override;
  void upload(Buffer dst, const void* src, int64_t bytes) override;
  void download(void* dst, Buffer src, int64_t bytes) override;
  void gemm(const GemmShape& s, Buffer a, Buffer b, Buffer c) override;
  void memory_op(Buffer src, Buffer dst, int64_t bytes) override;
  Event record(Stream s) override;
  void wait(Stream s, Event e) override;
  double elapsed_s(Event from, Event to) override;
  void synchronize() override;
  void reset_events() override { next_event_ = 0; }
  std::unique_ptr<Communicator> split(int color, int key) override;
  const std::vector<CollectiveRecord>& collective_log() const override { return log_; }
  void clear_collective_log() override { log_.clear(); }

  // Makes the calling thread current on this GPU (each world thread calls it before use).
  void bind() const;
  cudaStream_t stream(Stream s) const { return s == Stream::compute ? compute_ : comm_; }
  std::vector<CollectiveRecord>& log() { return log_; }
  // ncclCommAbort on every live communicator of this rank (world and splits); they become unusable.
  void abort_communicators() noexcept;
  void attach(NcclCommunicator* c) { comms_.insert(c); }
  void detach(NcclCommunicator* c) { comms_.erase(c); }

 private:
  void gemm_fp8(const GemmShape& s, Buffer a, Buffer b, Buffer c);
  // Writes the fill pattern into [p, p + bytes) on the compute stream: one copy from the device-resident
  // pattern (starting at a per-allocation offset), then doubling device-to-device copies inside the buffer.
  void fill(void* p, int64_t bytes);
  void poll_comm_errors();

  int ordinal_, rank_, world_size_;
  const std::atomic<bool>* abort_;
  DeviceInfo info_;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* lt_workspace_ = nullptr;
  size_t lt_workspace_bytes_ = 32u << 20;
  void* fill_src_ = nullptr;  // kFillPatternBytes of fill_pattern() words, uploaded once
  uint64_t fills_ = 0;        // allocations filled so far (picks each one's start offset in the pattern)
  ncclComm_t world_comm_ = nullptr;
  std::map<void*, int64_t> live_;
  int64_t allocated_ = 0, peak_ = 0;
  std::vector<cudaEvent_t> events_;
  size_t next_event_ = 0;
  std::set<NcclCommunicator*> comms_;
  std::vector<CollectiveRecord> log_;
  // cuBLASLt fp8 plans by (m, n, k, batch, accumulate): descriptors and the heuristic's algorithm.
  struct LtPlan;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>, LtPlan*> lt_plans_;
};

}  // namespace parplan::runtime::cuda
