// NCCL collectives and grouped point-to-point for the cuda backend, each call checked, each one logged.
#include "runtime/cuda/nccl_comm.hpp"

#include <fmt/core.h>

#include "planner/spec/error.hpp"
#include "runtime/collective_bytes.hpp"
#include "runtime/cuda/cuda_device.hpp"

namespace parplan::runtime::cuda {

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::fp32:
    case DType::tf32:
      return ncclFloat32;
    case DType::bf16:
      return ncclBfloat16;
    case DType::fp16:
      return ncclFloat16;
    case DType::fp8:
      return ncclFloat8e4m3;
  }
  throw BackendError("nccl: unknown dtype");
}

NcclCommunicator::NcclCommunicator(CudaDevice& dev, ncclComm_t comm, int color) : dev_(dev), comm_(comm), color_(color) {
  PARPLAN_NCCL_CHECK(comm_, ncclCommUserRank(comm_, &rank_));
  PARPLAN_NCCL_CHECK(comm_, ncclCommCount(comm_, &size_));
  PARPLAN_CUDA_CHECK(cudaMalloc(&scratch_, 4));
  dev_.attach(this);
}

NcclCommunicator::~NcclCommunicator() {
  dev_.detach(this);
  if (scratch_) (void)cudaFree(scratch_);
  if (comm_) (void)ncclCommDestroy(comm_);
}

void NcclCommunicator::abort() noexcept {
  if (comm_) (void)ncclCommAbort(comm_);
  comm_ = nullptr;
}

ncclComm_t NcclCommunicator::live(const char* what) const {
  if (!comm_) throw BackendError(fmt::format("nccl {}: communicator (colour {}) was aborted", what, color_));
  return comm_;
}

void NcclCommunicator::record(CollectiveKind kind, int64_t payload_bytes) {
  dev_.log().push_back({kind, color_, size_, payload_bytes, ring_bytes_sent(kind, payload_bytes, size_)});
}

void NcclCommunicator::all_reduce(Buffer send, Buffer recv, int64_t count, DType dtype) {
  ncclComm_t c = live("all_reduce");
  PARPLAN_NCCL_CHECK(c, ncclAllReduce(send.ptr, recv.ptr, static_cast<size_t>(count), nccl_type(dtype), ncclSum, c,
                                      dev_.stream(Stream::comm)));
  record(CollectiveKind::all_reduce, count * element_bytes(dtype));
}

void NcclCommunicator::all_gather(Buffer send, Buffer recv, int64_t count_per_rank, DType dtype) {
  ncclComm_t c = live("all_gather");
  PARPLAN_NCCL_CHECK(c, ncclAllGather(send.ptr, recv.ptr, static_cast<size_t>(count_per_rank), nccl_type(dtype), c,
                                      dev_.stream(Stream::comm)));
  record(CollectiveKind::all_gather, count_per_rank * size_ * element_bytes(dtype));
}

void NcclCommunicator::reduce_scatter(Buffer send, Buffer recv, int64_t count_per_rank, DType dtype) {
  ncclComm_t c = live("reduce_scatter");
  PARPLAN_NCCL_CHECK(c, ncclReduceScatter(send.ptr, recv.ptr, static_cast<size_t>(count_per_rank), nccl_type(dtype),
                                          ncclSum, c, dev_.stream(Stream::comm)));
  record(CollectiveKind::reduce_scatter, count_per_rank * size_ * element_bytes(dtype));
}

void NcclCommunicator::all_to_all(Buffer send, Buffer recv, int64_t count_per_peer, DType dtype) {
  ncclComm_t c = live("all_to_all");
  cudaStream_t st = dev_.stream(Stream::comm);
  const int64_t block = count_per_peer * element_bytes(dtype);
  // One NCCL group of a send and a receive per peer, as nccl-tests' alltoall runs it (every NCCL version has
  // ncclSend / ncclRecv): block p of `send` goes to group rank p, block p of `recv` comes from it.
  PARPLAN_NCCL_CHECK(c, ncclGroupStart());
  try {
    for (int peer = 0; peer < size_; ++peer) {
      PARPLAN_NCCL_CHECK(c, ncclSend(static_cast<const char*>(send.ptr) + peer * block, static_cast<size_t>(count_per_peer),
                                     nccl_type(dtype), peer, c, st));
      PARPLAN_NCCL_CHECK(c, ncclRecv(static_cast<char*>(recv.ptr) + peer * block, static_cast<size_t>(count_per_peer),
                                     nccl_type(dtype), peer, c, st));
    }
  } catch (...) {
    (void)ncclGroupEnd();
    throw;
  }
  PARPLAN_NCCL_CHECK(c, ncclGroupEnd());
  record(CollectiveKind::all_to_all, count_per_peer * size_ * element_bytes(dtype));
}

void NcclCommunicator::p2p(std::span<const P2POp> ops) {
  ncclComm_t c = live("p2p");
  cudaStream_t st = dev_.stream(Stream::comm);
  // One NCCL group: opposite sends between two stages are matched together instead of deadlocking.
  PARPLAN_NCCL_CHECK(c, ncclGroupStart());
  try {
    for (const P2POp& op : ops) {
      if (op.is_send) {
        PARPLAN_NCCL_CHECK(c, ncclSend(op.buf.ptr, static_cast<size_t>(op.count), nccl_type(op.dtype), op.peer, c, st));
      } else {
        PARPLAN_NCCL_CHECK(c, ncclRecv(op.buf.ptr, static_cast<size_t>(op.count), nccl_type(op.dtype), op.peer, c, st));
      }
    }
  } catch (...) {
    (void)ncclGroupEnd();
    throw;
  }
  PARPLAN_NCCL_CHECK(c, ncclGroupEnd());
  for (const P2POp& op : ops) {
    const int64_t bytes = op.count * element_bytes(op.dtype);
    dev_.log().push_back({op.is_send ? CollectiveKind::send : CollectiveKind::recv, color_, size_, bytes, op.is_send ? bytes : 0});
  }
}

void NcclCommunicator::barrier() {
  ncclComm_t c = live("barrier");
  PARPLAN_NCCL_CHECK(c, ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, c, dev_.stream(Stream::comm)));
  dev_.synchronize();
  dev_.log().push_back({CollectiveKind::barrier, color_, size_, 0, 0});
}

}  // namespace parplan::runtime::cuda
