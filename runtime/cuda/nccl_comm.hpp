// An NCCL communicator behind the seam's Communicator: collectives and grouped send/recv on the comm stream.
#pragma once
#include "runtime/backend.hpp"
#include "runtime/cuda/check.hpp"

namespace parplan::runtime::cuda {

class CudaDevice;

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(CudaDevice& dev, ncclComm_t comm, int color);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int color() const override { return color_; }
  void all_reduce(Buffer send, Buffer recv, int64_t count, DType dtype) override;
  void all_gather(Buffer send, Buffer recv, int64_t count_per_rank, DType dtype) override;
  void reduce_scatter(Buffer send, Buffer recv, int64_t count_per_rank, DType dtype) override;
  void all_to_all(Buffer send, Buffer recv, int64_t count_per_peer, DType dtype) override;
  void p2p(std::span<const P2POp> ops) override;
  void barrier() override;

  ncclComm_t handle() const { return comm_; }
  // ncclCommAbort; later calls throw instead of touching the communicator.
  void abort() noexcept;

 private:
  ncclComm_t live(const char* what) const;
  void record(CollectiveKind kind, int64_t payload_bytes);
  CudaDevice& dev_;
  ncclComm_t comm_;
  int color_, rank_ = 0, size_ = 1;
  void* scratch_ = nullptr;  // 4 bytes for barrier()
};

// NCCL's element type for `d`; throws BackendError for types NCCL cannot reduce.
ncclDataType_t nccl_type(DType d);

}  // namespace parplan::runtime::cuda
