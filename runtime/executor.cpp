// Executes per-rank programs: persistent slots once, then warm-up and measured steps with per-op events.
#include "runtime/executor.hpp"

#include <algorithm>
#include <fmt/core.h>
#include <memory>

#include "planner/spec/error.hpp"
#include "runtime/fill_pattern.hpp"

namespace parplan::runtime {
namespace {

Buffer sub(Buffer b, int64_t offset, int64_t bytes) {
  if (offset < 0 || bytes < 0 || offset + bytes > b.bytes) {
    throw BackendError(fmt::format("executor: region [{}, {}) outside a buffer of {} bytes", offset, offset + bytes, b.bytes));
  }
  return Buffer{static_cast<unsigned char*>(b.ptr) + offset, bytes};
}

// Moves `traffic` bytes (read + write) through `b`: copies between its two halves.
void touch(Device& dev, Buffer b, int64_t traffic) {
  const int64_t half = b.bytes / 2;
  if (half <= 0) return;
  for (int64_t left = traffic / 2; left > 0;) {
    const int64_t n = std::min(left, half);
    dev.memory_op(Buffer{b.ptr, half}, Buffer{static_cast<unsigned char*>(b.ptr) + half, half}, n);
    left -= n;
  }
}

}  // namespace

size_t exchange_end(const std::vector<Op>& ops, size_t i) {
  size_t j = i + 1;
  if (ops[i].kind == OpKind::p2p) {
    while (j < ops.size() && ops[j].kind == OpKind::p2p && ops[j].group == ops[i].group) ++j;
  }
  return j;
}

namespace {

class RankExecutor {
 public:
  RankExecutor(Device& dev, const Program& prog, const ExecOptions& opt, RankRun& out, bool reports)
      : dev_(dev), prog_(prog), opt_(opt), out_(out), reports_(reports), bufs_(prog.slots.size()) {}

  void run() {
    out_.rank = prog_.rank;
    out_.stage = prog_.stage;
    if (!opt_.rank_local) {
      for (int g = 0; g < kNumGroups; ++g) comms_[g] = dev_.split(prog_.colors[g], static_cast<int>(prog_.rank));
    }
    for (size_t i = 0; i < prog_.slots.size(); ++i) {
      if (!prog_.slots[i].persistent) continue;
      bufs_[i] = dev_.allocate(prog_.slots[i].bytes);  // filled: weights and scratch are GEMM operands
      if (is_allowance(prog_.slots[i].kind)) out_.allowance_bytes += prog_.slots[i].bytes;
    }
    dev_.synchronize();
    const int total = opt_.warmup + opt_.steps;
    auto progress = [&](int done, bool warmup, double seconds) {
      if (reports_ && opt_.on_step) opt_.on_step(done, total, warmup, seconds);
    };
    for (int s = 0; s < opt_.warmup; ++s) progress(s + 1, true, step(nullptr));
    dev_.reset_peak();
    for (int s = 0; s < opt_.steps; ++s) {
      out_.step_ops.emplace_back(prog_.ops.size());
      out_.step_s.push_back(step(&out_.step_ops.back()));
      progress(opt_.warmup + s + 1, false, out_.step_s.back());
    }
    const MemoryStats m = dev_.memory_stats();
    out_.peak_bytes = m.peak_allocated_bytes;
    out_.pool_reserved_peak_bytes = m.pool_reserved_peak_bytes;
    out_.device_total_bytes = m.device_total_bytes;
    out_.collectives = dev_.collective_log();
    for (Buffer& b : bufs_) {
      dev_.free(b);
      b = {};
    }
    dev_.synchronize();
  }

 private:
  // When an op ran, as the events around it (measured: false for bookkeeping ops and rank-local exchanges).
  struct Span {
    Event a, b;
    bool measured;
  };

  Buffer slot(int i) const { return bufs_.at(static_cast<size_t>(i)); }

  // One step; returns its time and fills `times` (one entry per op) when given.
  double step(std::vector<OpTime>* times) {
    dev_.reset_events();
    dev_.clear_collective_log();
    std::vector<Span> spans(prog_.ops.size(), Span{{}, {}, false});
    std::vector<Event> overlapped;
    const Event start = dev_.record(Stream::compute);
    Event cursor = start;  // the latest event on the compute stream, for bookkeeping ops
    const auto& ops = prog_.ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      if (op.wait_for >= 0 && !opt_.rank_local) {
        // An overlapped collective this op consumes (Megatron's asynchronous TP backward): join it here.
        dev_.wait(Stream::compute, spans[static_cast<size_t>(op.wait_for)].b);
        cursor = dev_.record(Stream::compute);
      }
      switch (op.kind) {
        case OpKind::alloc:
          // Per-microbatch stashes: not GEMM operands, and a fill inside the measured step would cost time that
          // training does not spend (a framework's allocator does not initialise memory).
          bufs_[static_cast<size_t>(op.slot)] = dev_.allocate(prog_.slots[static_cast<size_t>(op.slot)].bytes, Fill::none);
          cursor = dev_.record(Stream::compute);
          spans[i] = {cursor, cursor, false};
          break;
        case OpKind::free:
          dev_.free(slot(op.slot));
          bufs_[static_cast<size_t>(op.slot)] = {};
          cursor = dev_.record(Stream::compute);
          spans[i] = {cursor, cursor, false};
          break;
        case OpKind::gemm: {
          const GemmShape g = fill_scaled(op.gemm);  // keeps reused outputs finite (fill_pattern.hpp)
          Buffer scratch = slot(op.c_slot);
          Buffer a = sub(scratch, 0, g.a_bytes()), c = sub(scratch, g.a_bytes(), g.c_bytes());
          Buffer b = op.b_slot == op.c_slot ? sub(scratch, g.a_bytes() + g.c_bytes(), g.b_bytes()) : sub(slot(op.b_slot), 0, g.b_bytes());
          const Event e0 = dev_.record(Stream::compute);
          dev_.gemm(g, a, b, c);
          cursor = dev_.record(Stream::compute);
          spans[i] = {e0, cursor, true};
          break;
        }
        case OpKind::memory: {
          const Event e0 = dev_.record(Stream::compute);
          touch(dev_, slot(op.slot), op.bytes);
          cursor = dev_.record(Stream::compute);
          spans[i] = {e0, cursor, true};
          break;
        }
        case OpKind::collective:
        case OpKind::p2p: {
          // Consecutive p2p ops on one group form one grouped exchange (send_forward_recv_backward).
          const size_t j = exchange_end(ops, i);
          const Span span = opt_.rank_local ? Span{cursor, cursor, false} : exchange(i, j, cursor, overlapped);
          for (size_t k = i; k < j; ++k) spans[k] = span;
          i = j - 1;
          break;
        }
      }
    }
    for (Event e : overlapped) dev_.wait(Stream::compute, e);
    const Event end = dev_.record(Stream::compute);
    dev_.synchronize();
    const double compute_end = dev_.elapsed_s(start, end);
    if (!times && !opt_.rank_local) return compute_end;  // a warm-up step: only its time
    std::vector<OpTime> local;
    std::vector<OpTime>& t = times ? *times : local;
    op_times(spans, start, t);
    return opt_.rank_local ? place_predicted_communication(ops, t, compute_end) : compute_end;
  }

  // Issues ops [i, j) as one exchange on the communication stream once the compute stream reaches `cursor`; returns
  // its span. The compute stream waits for its end (moving `cursor`), or, when it overlaps, the step's end does.
  Span exchange(size_t i, size_t j, Event& cursor, std::vector<Event>& overlapped) {
    const auto& ops = prog_.ops;
    const Op& op = ops[i];
    dev_.wait(Stream::comm, cursor);
    const Event e0 = dev_.record(Stream::comm);
    Communicator& comm = *comms_[static_cast<int>(op.group)];
    if (op.kind == OpKind::p2p) {
      std::vector<P2POp> group;
      for (size_t k = i; k < j; ++k) {
        group.push_back(P2POp{ops[k].collective == CollectiveKind::send, ops[k].peer, sub(slot(ops[k].slot), 0, ops[k].bytes),
                              ops[k].count, ops[k].dtype});
      }
      comm.p2p(group);
    } else {
      collective(comm, op);
    }
    const Event e1 = dev_.record(Stream::comm);
    if (op.overlap) {
      overlapped.push_back(e1);
    } else {
      dev_.wait(Stream::compute, e1);
      cursor = dev_.record(Stream::compute);
    }
    return {e0, e1, true};
  }

  // Each op's start and end in seconds from the step's `start` event.
  void op_times(const std::vector<Span>& spans, Event start, std::vector<OpTime>& t) {
    t.resize(spans.size());
    for (size_t i = 0; i < spans.size(); ++i) {
      t[i].start_s = dev_.elapsed_s(start, spans[i].a);
      t[i].end_s = dev_.elapsed_s(start, spans[i].b);
      t[i].measured = spans[i].measured;
    }
  }

  void collective(Communicator& comm, const Op& op) {
    Buffer base = sub(slot(op.slot), op.offset, op.bytes);
    const int64_t per = op.count * element_bytes(op.dtype);
    switch (op.collective) {
      case CollectiveKind::all_reduce:
        comm.all_reduce(base, base, op.count, op.dtype);
        return;
      case CollectiveKind::all_gather:
        comm.all_gather(sub(base, comm.rank() * per, per), base, op.count, op.dtype);
        return;
      case CollectiveKind::reduce_scatter:
        comm.reduce_scatter(base, sub(base, comm.rank() * per, per), op.count, op.dtype);
        return;
      case CollectiveKind::all_to_all:  // out of place: the receive half follows the send half in the slot
        comm.all_to_all(base, sub(slot(op.slot), op.offset + op.bytes, op.bytes), op.count, op.dtype);
        return;
      case CollectiveKind::barrier:
        comm.barrier();
        return;
      case CollectiveKind::send:
      case CollectiveKind::recv:
        break;
    }
    throw BackendError(fmt::format("executor: {} is not a collective", to_string(op.collective)));
  }

  Device& dev_;
  const Program& prog_;
  const ExecOptions& opt_;
  RankRun& out_;
  bool reports_;  // this rank calls opt_.on_step
  std::vector<Buffer> bufs_;
  std::unique_ptr<Communicator> comms_[kNumGroups];
};

}  // namespace

double place_predicted_communication(const std::vector<Op>& ops, std::vector<OpTime>& times, double compute_end_s) {
  if (times.size() != ops.size()) throw BackendError("place_predicted_communication: one time per op");
  double shift = 0;       // predicted waiting added to the compute stream so far
  double comm_free = 0;   // when the virtual communication stream is next free
  double step_end = 0;    // the latest overlapped collective's end (the step's end waits for it)
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.wait_for >= 0) {  // this op joins an earlier overlapped collective
      const double now = times[i].start_s + shift, ready = times[static_cast<size_t>(op.wait_for)].end_s;
      if (ready > now) shift += ready - now;
    }
    if (op.kind != OpKind::collective && op.kind != OpKind::p2p) {
      times[i].start_s += shift;
      times[i].end_s += shift;
      continue;
    }
    const size_t j = exchange_end(ops, i);
    double duration = 0;
    for (size_t k = i; k < j; ++k) duration = std::max(duration, ops[k].predicted_s);
    const double now = times[i].start_s + shift, begin = std::max(now, comm_free), finish = begin + duration;
    comm_free = finish;
    for (size_t k = i; k < j; ++k) times[k] = OpTime{begin, finish, false};
    if (op.overlap) {
      step_end = std::max(step_end, finish);
    } else {
      shift += finish - now;  // the compute stream waits for it
    }
    i = j - 1;
  }
  return std::max(compute_end_s + shift, step_end);
}

RunResult execute(World& world, const std::vector<Program>& programs, const ExecOptions& opt) {
  if (opt.steps < 1 || opt.warmup < 0) throw InputError(fmt::format("--steps must be >= 1 and --warmup >= 0 (got {} and {})", opt.steps, opt.warmup));
  if (opt.rank_local ? programs.size() != 1 || world.size() != 1 : static_cast<int>(programs.size()) != world.size()) {
    throw BackendError(fmt::format("executor: {} programs for a world of {} ranks{}", programs.size(), world.size(),
                                   opt.rank_local ? " (rank-local mode runs one program on one rank)" : ""));
  }
  RunResult r;
  r.ranks.resize(programs.size());
  world.run([&](Device& dev) {
    const size_t i = opt.rank_local ? 0 : static_cast<size_t>(dev.rank());
    RankExecutor(dev, programs[i], opt, r.ranks[i], i == 0).run();
  });
  r.step_s.assign(static_cast<size_t>(opt.steps), 0.0);
  for (const RankRun& rr : r.ranks) {
    for (size_t s = 0; s < rr.step_s.size(); ++s) r.step_s[s] = std::max(r.step_s[s], rr.step_s[s]);
  }
  std::vector<int> idx(r.step_s.size());
  for (size_t s = 0; s < idx.size(); ++s) idx[s] = static_cast<int>(s);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return r.step_s[static_cast<size_t>(a)] < r.step_s[static_cast<size_t>(b)]; });
  r.median_step = idx[idx.size() / 2];
  return r;
}

}  // namespace parplan::runtime
