// The host backend's collectives: ring all-reduce / all-gather / reduce-scatter, direct all-to-all and eager
// point-to-point over shared memory between rank threads, with the bytes each rank sends counted as they move.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/backend.hpp"

namespace parplan::runtime::host {

// A reusable barrier for `n` threads that gives up (throws BackendError) once `abort` is set, so a failure on
// one rank never leaves the others waiting forever (the host analogue of ncclCommAbort).
class Rendezvous {
 public:
  Rendezvous(int n, const std::atomic<bool>* abort) : n_(n), abort_(abort) {}
  void arrive_and_wait(const char* what);

 private:
  int n_;
  const std::atomic<bool>* abort_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

// State shared by the members of one communicator.
struct HostGroup {
  HostGroup(int size, int color, const std::atomic<bool>* abort);
  int size;
  int color;
  const std::atomic<bool>* abort;
  Rendezvous barrier;
  // Per-member pointers published for the collective in flight.
  std::vector<const void*> send_ptrs;
  std::vector<void*> work_ptrs;
  // Bytes read out of each member's buffers by its peers during the collective in flight.
  std::vector<std::atomic<int64_t>> sent;
  // Eager point-to-point mailboxes keyed by (src, dst) group ranks.
  std::mutex mail_mu;
  std::condition_variable mail_cv;
  std::map<std::pair<int, int>, std::deque<std::vector<unsigned char>>> mail;
};

class HostCommunicator final : public Communicator {
 public:
  HostCommunicator(std::shared_ptr<HostGroup> g, int rank, std::vector<CollectiveRecord>* log)
      : g_(std::move(g)), rank_(rank), log_(log) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size; }
  int color() const override { return g_->color; }
  void all_reduce(Buffer send, Buffer recv, int64_t count, DType dtype) override;
  void all_gather(Buffer send, Buffer recv, int64_t count_per_rank, DType dtype) override;
  void reduce_scatter(Buffer send, Buffer recv, int64_t count_per_rank, DType dtype) override;
  void all_to_all(Buffer send, Buffer recv, int64_t count_per_peer, DType dtype) override;
  void p2p(std::span<const P2POp> ops) override;
  void barrier() override;

 private:
  void sync(const char* what) { g_->barrier.arrive_and_wait(what); }
  // Ends a collective: waits for every member, then takes this rank's sent-bytes counter and logs the record.
  void finish(CollectiveKind kind, int64_t payload_bytes, const char* what);
  std::shared_ptr<HostGroup> g_;
  int rank_;
  std::vector<CollectiveRecord>* log_;
};

// Element range [begin, end) of chunk `c` when `count` elements are split into `n` near-equal chunks
// (the first count % n chunks hold one more element), as NCCL's ring splits a buffer.
std::pair<int64_t, int64_t> ring_chunk(int64_t count, int n, int c);

}  // namespace parplan::runtime::host
