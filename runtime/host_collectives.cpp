// Shared-memory collectives between rank threads. Ring algorithms are written in "pull" form: at each step a
// rank reads one chunk out of its left neighbour's buffer (that is the neighbour "sending" it), with a barrier
// between steps so no chunk is read while it is written. Bytes are counted as the sender's.
#include "runtime/host_collectives.hpp"

#include <chrono>
#include <cstring>
#include <fmt/core.h>

#include "planner/spec/error.hpp"
#include "runtime/host_numeric.hpp"

namespace parplan::runtime::host {
namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

void check_buffer(Buffer b, int64_t bytes, const char* what, const char* which) {
  if (bytes > 0 && (b.ptr == nullptr || b.bytes < bytes)) {
    throw BackendError(fmt::format("host {}: {} buffer holds {} bytes, the operation needs {}", what, which, b.bytes, bytes));
  }
}

// dst[first..first+n) += src[first..first+n) in `dtype`, accumulated in float.
void add_range(void* dst, const void* src, int64_t first, int64_t n, DType dtype, std::vector<float>& x,
               std::vector<float>& y) {
  x.resize(static_cast<size_t>(n));
  y.resize(static_cast<size_t>(n));
  load_range(dst, first, n, dtype, x.data());
  load_range(src, first, n, dtype, y.data());
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
  store_range(dst, first, n, dtype, x.data());
}

unsigned char* bytes_at(void* p, int64_t off) { return static_cast<unsigned char*>(p) + off; }
const unsigned char* bytes_at(const void* p, int64_t off) { return static_cast<const unsigned char*>(p) + off; }

}  // namespace

void Rendezvous::arrive_and_wait(const char* what) {
  std::unique_lock lock(mu_);
  if (abort_->load()) throw BackendError(fmt::format("host {}: aborted because another rank failed", what));
  const uint64_t gen = generation_;
  if (++arrived_ == n_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  while (generation_ == gen) {
    cv_.wait_for(lock, std::chrono::milliseconds(20));
    if (generation_ == gen && abort_->load()) {
      throw BackendError(fmt::format("host {}: aborted because another rank failed", what));
    }
  }
}

HostGroup::HostGroup(int size_, int color_, const std::atomic<bool>* abort_)
    : size(size_), color(color_), abort(abort_), barrier(size_, abort_), send_ptrs(size_), work_ptrs(size_),
      sent(static_cast<size_t>(size_)) {}

std::pair<int64_t, int64_t> ring_chunk(int64_t count, int n, int c) {
  const int64_t base = count / n, extra = count % n;
  const int64_t begin = c * base + std::min<int64_t>(c, extra);
  return {begin, begin + base + (c < extra ? 1 : 0)};
}

void HostCommunicator::finish(CollectiveKind kind, int64_t payload_bytes, const char* what) {
  sync(what);
  CollectiveRecord r;
  r.kind = kind;
  r.comm_color = g_->color;
  r.group_size = g_->size;
  r.payload_bytes = payload_bytes;
  r.bytes_sent = g_->sent[rank_].exchange(0);
  log_->push_back(r);
}

void HostCommunicator::all_reduce(Buffer send, Buffer recv, int64_t count, DType dtype) {
  const int64_t es = element_bytes(dtype), n_bytes = count * es;
  check_buffer(send, n_bytes, "all_reduce", "send");
  check_buffer(recv, n_bytes, "all_reduce", "recv");
  const int n = g_->size, r = rank_, left = mod(r - 1, n);
  if (n_bytes > 0 && send.ptr != recv.ptr) std::memmove(recv.ptr, send.ptr, static_cast<size_t>(n_bytes));
  g_->work_ptrs[r] = recv.ptr;
  sync("all_reduce");
  std::vector<float> x, y;
  // Reduce-scatter phase: at step s, pull chunk (r-1-s) from the left and add it in; rank r ends owning chunk r+1.
  for (int s = 0; s < n - 1; ++s) {
    auto [b, e] = ring_chunk(count, n, mod(r - 1 - s, n));
    add_range(recv.ptr, g_->work_ptrs[left], b, e - b, dtype, x, y);
    g_->sent[left] += (e - b) * es;
    sync("all_reduce");
  }
  // All-gather phase: at step s, copy the completed chunk (r-s) from the left.
  for (int s = 0; s < n - 1; ++s) {
    auto [b, e] = ring_chunk(count, n, mod(r - s, n));
    if (e > b) std::memcpy(bytes_at(recv.ptr, b * es), bytes_at(g_->work_ptrs[left], b * es), static_cast<size_t>((e - b) * es));
    g_->sent[left] += (e - b) * es;
    sync("all_reduce");
  }
  finish(CollectiveKind::all_reduce, n_bytes, "all_reduce");
}

void HostCommunicator::all_gather(Buffer send, Buffer recv, int64_t count_per_rank, DType dtype) {
  const int n = g_->size, r = rank_, left = mod(r - 1, n);
  const int64_t block = count_per_rank * element_bytes(dtype);
  check_buffer(send, block, "all_gather", "send");
  check_buffer(recv, block * n, "all_gather", "recv");
  if (block > 0) std::memmove(bytes_at(recv.ptr, r * block), send.ptr, static_cast<size_t>(block));
  g_->work_ptrs[r] = recv.ptr;
  sync("all_gather");
  // At step s, pull block (r-1-s) from the left neighbour, which received it at step s-1 (or owns it at s=0).
  for (int s = 0; s < n - 1; ++s) {
    const int c = mod(r - 1 - s, n);
    if (block > 0) std::memcpy(bytes_at(recv.ptr, c * block), bytes_at(g_->work_ptrs[left], c * block), static_cast<size_t>(block));
    g_->sent[left] += block;
    sync("all_gather");
  }
  finish(CollectiveKind::all_gather, block * n, "all_gather");
}

void HostCommunicator::reduce_scatter(Buffer send, Buffer recv, int64_t count_per_rank, DType dtype) {
  const int n = g_->size, r = rank_, left = mod(r - 1, n);
  const int64_t es = element_bytes(dtype), block = count_per_rank * es;
  check_buffer(send, block * n, "reduce_scatter", "send");
  check_buffer(recv, block, "reduce_scatter", "recv");
  // Partial sums live in a private copy of the send buffer (NCCL likewise reduces into its own staging buffers).
  std::vector<unsigned char> scratch(static_cast<size_t>(block * n));
  if (block > 0) std::memcpy(scratch.data(), send.ptr, scratch.size());
  g_->work_ptrs[r] = scratch.data();
  sync("reduce_scatter");
  // At step s, pull block (r-2-s) from the left and add it in; after n-1 steps block r holds the full sum.
  std::vector<float> x, y;
  for (int s = 0; s < n - 1; ++s) {
    const int c = mod(r - 2 - s, n);
    add_range(scratch.data(), g_->work_ptrs[left], c * count_per_rank, count_per_rank, dtype, x, y);
    g_->sent[left] += block;
    sync("reduce_scatter");
  }
  if (block > 0) std::memcpy(recv.ptr, scratch.data() + r * block, static_cast<size_t>(block));
  finish(CollectiveKind::reduce_scatter, block * n, "reduce_scatter");
}

void HostCommunicator::all_to_all(Buffer send, Buffer recv, int64_t count_per_peer, DType dtype) {
  const int n = g_->size, r = rank_;
  const int64_t block = count_per_peer * element_bytes(dtype);
  check_buffer(send, block * n, "all_to_all", "send");
  check_buffer(recv, block * n, "all_to_all", "recv");
  g_->send_ptrs[r] = send.ptr;
  sync("all_to_all");
  // Direct exchange: block r of every peer's send buffer lands in block `peer` of this rank's recv buffer.
  for (int peer = 0; peer < n; ++peer) {
    if (block > 0) std::memcpy(bytes_at(recv.ptr, peer * block), bytes_at(g_->send_ptrs[peer], r * block), static_cast<size_t>(block));
    if (peer != r) g_->sent[peer] += block;
  }
  finish(CollectiveKind::all_to_all, block * n, "all_to_all");
}

void HostCommunicator::p2p(std::span<const P2POp> ops) {
  // Eager protocol: sends copy into the peer's mailbox and return; receives wait for their message. So any
  // order of sends and receives across ranks completes.
  for (const P2POp& op : ops) {
    if (op.peer < 0 || op.peer >= g_->size || op.peer == rank_) {
      throw BackendError(fmt::format("host p2p: peer {} is not another rank of a group of {}", op.peer, g_->size));
    }
    const int64_t bytes = op.count * element_bytes(op.dtype);
    check_buffer(op.buf, bytes, op.is_send ? "send" : "recv", "message");
    if (!op.is_send) continue;
    std::vector<unsigned char> msg(static_cast<size_t>(bytes));
    if (bytes > 0) std::memcpy(msg.data(), op.buf.ptr, msg.size());
    {
      std::lock_guard lock(g_->mail_mu);
      g_->mail[{rank_, op.peer}].push_back(std::move(msg));
    }
    g_->mail_cv.notify_all();
    log_->push_back({CollectiveKind::send, g_->color, g_->size, bytes, bytes});
  }
  for (const P2POp& op : ops) {
    if (op.is_send) continue;
    const int64_t bytes = op.count * element_bytes(op.dtype);
    std::vector<unsigned char> msg;
    {
      std::unique_lock lock(g_->mail_mu);
      auto& q = g_->mail[{op.peer, rank_}];
      while (q.empty()) {
        if (g_->abort->load()) throw BackendError("host recv: aborted because another rank failed");
        g_->mail_cv.wait_for(lock, std::chrono::milliseconds(20));
      }
      msg = std::move(q.front());
      q.pop_front();
    }
    if (static_cast<int64_t>(msg.size()) != bytes) {
      throw BackendError(fmt::format("host recv: expected {} bytes from group rank {}, the matching send carried {}",
                                     bytes, op.peer, msg.size()));
    }
    if (bytes > 0) std::memcpy(op.buf.ptr, msg.data(), msg.size());
    log_->push_back({CollectiveKind::recv, g_->color, g_->size, bytes, 0});
  }
}

void HostCommunicator::barrier() {
  sync("barrier");
  log_->push_back({CollectiveKind::barrier, g_->color, g_->size, 0, 0});
}

}  // namespace parplan::runtime::host
