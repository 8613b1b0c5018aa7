// Expansion of a pipeline schedule and per-stage costs into the task graph of one step (see task_graph.hpp).
#include "simulator/task_graph.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "planner/cost/cost_model.hpp"

namespace parplan::sim {

const char* to_string(StreamKind k) {
  switch (k) {
    case StreamKind::compute: return "compute";
    case StreamKind::tp: return "tp";
    case StreamKind::cp: return "cp";
    case StreamKind::pp: return "pp";
    case StreamKind::dp: return "dp";
    case StreamKind::host: return "host";
    case StreamKind::ep: return "ep";
  }
  return "?";
}

namespace {

// What a pipeline op of `kind` costs on a chunk: its compute, exposed comm (of which `offload_s` is the wait for
// activation offload copies) and overlapped (shadow) comm.
struct OpShape {
  EventCategory cat = EventCategory::forward;
  double main_s = 0, comm_s = 0, tp_ov = 0, cp_ov = 0, ep = 0, offload_s = 0;
  // The exposed collectives (layer_comm), the rest of comm_s (exactly 0 where the offload wait is all of it).
  double layer_comm_s() const { return std::max(0.0, comm_s - offload_s); }
};
OpShape op_shape(const ChunkCosts& cc, OpKind kind) {
  const double offload_backward = cc.exposed_offload_s - cc.exposed_offload_forward_s;
  switch (kind) {
    case OpKind::forward:
      return {EventCategory::forward, cc.forward_s, cc.forward_comm_s, cc.tp_overlapped_forward_s,
              cc.cp_overlapped_forward_s, cc.ep_forward_s, cc.exposed_offload_forward_s};
    case OpKind::backward:
      return {EventCategory::backward, cc.backward_input_s + cc.backward_weight_s, cc.backward_comm_s,
              cc.tp_overlapped_backward_s, cc.cp_overlapped_backward_s, cc.ep_backward_s, offload_backward};
    case OpKind::backward_input:
      return {EventCategory::backward_input, cc.backward_input_s, cc.backward_comm_s, cc.tp_overlapped_backward_s,
              cc.cp_overlapped_backward_s, cc.ep_backward_s, offload_backward};
    case OpKind::backward_weight:
      return {EventCategory::backward_weight, cc.backward_weight_s, 0, 0, 0, 0, 0};
  }
  return {};
}
bool is_backward_pass(OpKind k) { return k == OpKind::backward || k == OpKind::backward_input; }
// A backward pass recomputes its forward first (full or selective recompute).
bool recomputes_before(const ChunkCosts& cc, OpKind k) {
  return is_backward_pass(k) && (cc.recompute_s > 0 || cc.recompute_comm_s > 0);
}
// Tasks of one recompute part (StageEmitter::recompute()): the recompute, its TP shadow (first part only),
// its exposed comm.
int64_t recompute_tasks(const ChunkCosts& cc, bool first_part) {
  return 1 + (first_part && cc.tp_overlapped_forward_s > 0 && cc.recompute_comm_s > 0 ? 1 : 0) +
         (cc.recompute_comm_s > 0 ? 1 : 0);
}
// A pass after which a microbatch's gradients of the chunk are complete.
bool completes_gradients(OpKind k) { return k == OpKind::backward || k == OpKind::backward_weight; }

// How an op releases DP gradient buckets, and the pieces its main task is split into. The op that makes a chunk's
// gradients final releases the chunk's buckets as it produces them (one piece per bucket). ZeRO-2/3 reduce-scatter
// every microbatch's gradients: each completing op releases them in up to one piece per layer (FSDP / DeepSpeed
// reduce each layer's gradients after its backward), issued in link order.
struct Release {
  bool chunk_final = false, microbatch = false;
  int64_t pieces = 1;
};
Release release_of(const StageCosts& sc, bool dp_overlap, bool completes, bool final_of_chunk, int64_t chunk_buckets) {
  Release r;
  r.chunk_final = dp_overlap && sc.dp_buckets > 0 && !sc.dp_per_microbatch && final_of_chunk;
  r.microbatch = dp_overlap && sc.dp_buckets > 0 && sc.dp_per_microbatch && completes;
  r.pieces = r.chunk_final ? std::max<int64_t>(1, chunk_buckets)
             : r.microbatch ? std::clamp<int64_t>(sc.layers_per_chunk, 1, sc.dp_buckets)
                            : 1;
  return r;
}

// The ZeRO-3 gathers task a pass puts on the DP link (0 or 1).
double zero3_gather_s(const ChunkCosts& cc, OpKind k) {
  if (k == OpKind::forward) return cc.zero3_gather_forward_s;
  return is_backward_pass(k) ? cc.zero3_gather_recompute_s + cc.zero3_gather_backward_s : 0.0;
}

struct Builder {
  const PipelineSchedule& s;
  const StepCosts& c;
  StepGraph out;
  // Per stage, per op index: the task that ends the op (its last piece) and the task downstream ops wait for
  // (the p2p transfer when the result leaves the stage, else the op itself).
  std::vector<std::vector<int32_t>> op_end, op_out;
  std::vector<int32_t> links;  // stage * 2 + tier
  int64_t next_flow = 0;

  Builder(const PipelineSchedule& sched, const StepCosts& costs) : s(sched), c(costs) {}

  int32_t stream(int64_t stage, StreamKind k) const {
    return out.stage_stream[static_cast<size_t>(stage * kNumStreamKinds + static_cast<int>(k))];
  }

  int32_t task(double d, int64_t stage, StreamKind k, EventCategory cat, int32_t mb, int32_t chunk, int32_t link = -1) {
    const int32_t t = out.graph.add_task(d, stream(stage, k), link);
    TaskInfo ti;
    ti.stage = static_cast<int32_t>(stage);
    ti.stream = k;
    ti.category = cat;
    ti.microbatch = mb;
    ti.chunk = chunk;
    out.info.push_back(ti);
    return t;
  }
  int32_t shadow(int32_t anchor, double d, int64_t stage, StreamKind k, EventCategory cat, int32_t mb, int32_t chunk) {
    const int32_t t = out.graph.add_shadow(anchor, d, stream(stage, k));
    TaskInfo ti;
    ti.stage = static_cast<int32_t>(stage);
    ti.stream = k;
    ti.category = cat;
    ti.microbatch = mb;
    ti.chunk = chunk;
    out.info.push_back(ti);
    return t;
  }

  // Index of the last backward-type op of each chunk on a stage (its gradients are final after it).
  std::vector<int64_t> final_backward(int64_t stage) const {
    std::vector<int64_t> f(static_cast<size_t>(s.chunks), -1);
    const auto& o = s.order[static_cast<size_t>(stage)];
    const bool split = std::any_of(o.begin(), o.end(), [](const PipeOp& x) { return x.kind == OpKind::backward_weight; });
    for (size_t k = 0; k < o.size(); ++k) {
      const OpKind kind = o[k].kind;
      if (kind == OpKind::backward || (split ? kind == OpKind::backward_weight : kind == OpKind::backward_input)) {
        f[static_cast<size_t>(o[k].chunk)] = static_cast<int64_t>(k);
      }
    }
    return f;
  }

  void build() {
    const int64_t p = s.stages;
    if (static_cast<int64_t>(c.stages.size()) != p) throw std::invalid_argument("build_step_graph: stage count mismatch");
    size_t ops = 0;
    for (const auto& o : s.order) ops += o.size();
    out.graph.reserve(ops * 3 + 64, ops * 4 + 64);
    out.info.reserve(ops * 3 + 64);
    for (int64_t i = 0; i < p; ++i) {
      if (static_cast<int64_t>(c.stages[static_cast<size_t>(i)].chunks.size()) != s.chunks) {
        throw std::invalid_argument("build_step_graph: chunk count mismatch");
      }
      for (int k = 0; k < kNumStreamKinds; ++k) {
        const auto kind = static_cast<StreamKind>(k);
        out.stage_stream.push_back(out.graph.add_stream(kind == StreamKind::compute || kind == StreamKind::dp));
      }
      links.push_back(out.graph.add_link());
      links.push_back(out.graph.add_link());
    }
    op_end.resize(static_cast<size_t>(p));
    op_out.resize(static_cast<size_t>(p));
    out.optimizer_task.assign(static_cast<size_t>(p), -1);
    out.optimizer_end_task.assign(static_cast<size_t>(p), -1);
    out.first_gather_task.assign(static_cast<size_t>(p), -1);
    out.last_gather_task.assign(static_cast<size_t>(p), -1);
    out.embedding_task.assign(static_cast<size_t>(p), -1);
    out.embedding_after_bucket.assign(static_cast<size_t>(p), -1);

    // Pass 1: every stage's ops in order (tasks on ordered streams are appended in execution order).
    std::vector<std::vector<int32_t>> op_begin(static_cast<size_t>(p));
    embedding_after_compute_.assign(static_cast<size_t>(p), -1);
    for (int64_t i = 0; i < p; ++i) emit_stage(i, op_begin[static_cast<size_t>(i)]);
    // The tied-embedding all-reduce joins the first and the last stage: each side waits for the other's predecessors.
    const size_t last_stage = static_cast<size_t>(p - 1);
    if (p > 1 && out.embedding_task[0] >= 0 && out.embedding_task[last_stage] >= 0) {
      for (const auto& [side, other] : {std::pair{size_t{0}, last_stage}, std::pair{last_stage, size_t{0}}}) {
        for (const int32_t after : {embedding_after_compute_[other], out.embedding_after_bucket[other]}) {
          if (after >= 0) out.graph.add_dep(after, out.embedding_task[side]);
        }
      }
    }

    // Pass 2: cross-stage dependencies (producer output -> consumer's first task), via a dense
    // (kind, microbatch, chunk) -> op index table per stage.
    lookups_.resize(static_cast<size_t>(p));
    for (int64_t i = 0; i < p; ++i) {
      const auto& o = s.order[static_cast<size_t>(i)];
      auto& where = lookups_[static_cast<size_t>(i)];
      where.assign(static_cast<size_t>(4 * s.microbatches * s.chunks), -1);
      for (size_t k = 0; k < o.size(); ++k) where[key(o[k])] = static_cast<int32_t>(k);
    }
    for (int64_t i = 0; i < p; ++i) {
      const auto& o = s.order[static_cast<size_t>(i)];
      for (size_t k = 0; k < o.size(); ++k) {
        const CrossDep d = cross_stage_dependency(s, i, o[k]);
        if (!d.exists || d.stage == i) continue;  // same-stage order already holds
        const int32_t j = lookup(d.stage, d.op);
        if (j < 0) throw std::logic_error("build_step_graph: schedule lacks a producer op");
        out.graph.add_dep(op_out[static_cast<size_t>(d.stage)][static_cast<size_t>(j)],
                          op_begin[static_cast<size_t>(i)][k]);
      }
    }
  }

  std::vector<std::vector<int32_t>> lookups_;
  // Per stage: the last compute task its tied-embedding all-reduce waits for (-1: none; the task and its last bucket
  // are in out.embedding_task / embedding_after_bucket).
  std::vector<int32_t> embedding_after_compute_;
  size_t key(const PipeOp& x) const {
    return static_cast<size_t>((static_cast<int64_t>(x.kind) * s.microbatches + x.microbatch) * s.chunks + x.chunk);
  }
  int32_t lookup(int64_t stage, const PipeOp& x) const { return lookups_[static_cast<size_t>(stage)][key(x)]; }

  // Stage i's tasks (StageEmitter below); `begin` receives each op's first task.
  void emit_stage(int64_t i, std::vector<int32_t>& begin);
};

// One stage's tasks as Builder::emit_stage lays them out: its ops in schedule order (each op's compute pieces,
// overlapped collectives, exposed comm and p2p send), then the DP gradient buckets, the tied-embedding all-reduce,
// the optimizer and the parameter all-gather. It holds what the ops leave for those: the last compute task (ordered
// streams need no explicit edges) and the DP buckets released so far.
class StageEmitter {
 public:
  StageEmitter(Builder& b, int64_t i)
      : b_(b),
        s_(b.s),
        c_(b.c),
        i_(i),
        sc_(b.c.stages[static_cast<size_t>(i)]),
        virtual_stages_(b.s.virtual_stages()),
        pp_link_(b.links[static_cast<size_t>(i * 2 + sc_.pp_tier)]),
        dp_link_(b.links[static_cast<size_t>(i * 2 + sc_.dp_tier)]) {}

  // Every op of the stage in order; records its first task (`begin`), last task and output task (Builder).
  void emit_ops(std::vector<int32_t>& begin) {
    const auto& o = s_.order[static_cast<size_t>(i_)];
    auto& end = b_.op_end[static_cast<size_t>(i_)];
    auto& outp = b_.op_out[static_cast<size_t>(i_)];
    begin.reserve(o.size());
    end.reserve(o.size());
    outp.reserve(o.size());
    const std::vector<int64_t> fin = b_.final_backward(i_);
    for (size_t k = 0; k < o.size(); ++k) {
      OpTasks ot{o[k], sc_.chunks[static_cast<size_t>(o[k].chunk)]};
      emit_passes(ot, fin[static_cast<size_t>(o[k].chunk)] == static_cast<int64_t>(k));
      const int32_t result = send_result(ot.op, ot.last);
      begin.push_back(ot.first);
      end.push_back(ot.last);
      outp.push_back(result);
    }
  }

  // DP gradient buckets on the stage's ordered dp stream (ZeRO-2/3 with overlap: issued with the ops, as each
  // microbatch's backward produces them).
  void emit_dp_buckets() {
    if (sc_.dp_buckets <= 0) return;
    if (sc_.dp_per_microbatch) {
      if (!c_.dp_overlap) {
        for (int64_t mb = 0; mb < mb_completed_; ++mb) {
          for (int64_t b = 0; b < sc_.dp_buckets; ++b) bucket(prev_compute_);
        }
      }
    } else if (c_.dp_overlap) {
      for (int32_t after : bucket_ready_) bucket(after);
    } else {
      for (int64_t b = 0; b < sc_.dp_buckets; ++b) bucket(prev_compute_);
    }
  }

  // After the stage's DP reduction (Megatron-Core finalize_model_grads order), on the same dp stream. It is one
  // all-reduce between the first and the last stage: build() makes each side also wait for the other's
  // predecessors, so both start when the later one is ready.
  void emit_embedding_all_reduce() {
    if (sc_.embedding_grad_s > 0) {
      const int32_t t = b_.task(sc_.embedding_grad_s, i_, StreamKind::dp, EventCategory::dp_comm, -1, 0, pp_link_);
      if (prev_compute_ >= 0) b_.out.graph.add_dep(prev_compute_, t);
      if (last_bucket_ >= 0) b_.out.graph.add_dep(last_bucket_, t);
      b_.embedding_after_compute_[static_cast<size_t>(i_)] = prev_compute_;
      b_.out.embedding_task[static_cast<size_t>(i_)] = t;
      b_.out.embedding_after_bucket[static_cast<size_t>(i_)] = last_bucket_;
      last_bucket_ = t;
    }
  }

  // The optimizer on the compute stream after the last DP task, then the sharded optimizer's all-gather of the
  // updated parameters, one piece per bucket.
  void emit_optimizer_and_gather() {
    // Optimizer offload: the gradient copy to the host, the host's step, the parameter copy back, one after another.
    const int32_t down = sc_.grad_to_host_s > 0
                             ? b_.task(sc_.grad_to_host_s, i_, StreamKind::compute, EventCategory::host_copy, -1, 0)
                             : -1;
    if (down >= 0 && last_bucket_ >= 0) b_.out.graph.add_dep(last_bucket_, down);
    int32_t opt = b_.task(sc_.optimizer_s, i_, StreamKind::compute, EventCategory::optimizer, -1, 0);
    if (down >= 0) b_.out.graph.add_dep(down, opt);
    if (last_bucket_ >= 0) b_.out.graph.add_dep(last_bucket_, opt);
    const int32_t first_opt = opt;
    if (sc_.params_to_gpu_s > 0) {
      const int32_t up = b_.task(sc_.params_to_gpu_s, i_, StreamKind::compute, EventCategory::host_copy, -1, 0);
      b_.out.graph.add_dep(opt, up);
      opt = up;  // the step ends, and the parameter all-gather starts, when the parameters are back
    }
    b_.out.optimizer_task[static_cast<size_t>(i_)] = down >= 0 ? down : first_opt;
    b_.out.optimizer_end_task[static_cast<size_t>(i_)] = opt;
    if (sc_.param_gather_s > 0 && sc_.dp_buckets > 0) {
      const int64_t n = sc_.dp_buckets;
      for (int64_t b = 0; b < n; ++b) {
        const int32_t g = b_.task(sc_.param_gather_s / static_cast<double>(n), i_, StreamKind::dp,
                                  EventCategory::dp_comm, -1, 0, dp_link_);
        b_.out.graph.add_dep(opt, g);
        if (b == 0) b_.out.first_gather_task[static_cast<size_t>(i_)] = g;
        b_.out.last_gather_task[static_cast<size_t>(i_)] = g;
      }
    }
  }

 private:
  // One op being emitted: its chunk's costs and its first and last compute tasks.
  struct OpTasks {
    const PipeOp& op;
    const ChunkCosts& cc;
    int32_t first = -1, last = -1;
  };

  Builder& b_;
  const PipelineSchedule& s_;
  const StepCosts& c_;
  const int64_t i_;
  const StageCosts& sc_;
  const int64_t virtual_stages_;
  const int32_t pp_link_, dp_link_;
  int32_t prev_compute_ = -1;          // last task on the compute stream
  std::vector<int32_t> bucket_ready_;  // tasks after which a DP bucket may start (overlap on)
  int64_t mb_completed_ = 0;           // ZeRO-2/3 without overlap: microbatches whose gradients await reduction
  int32_t last_bucket_ = -1;

  // Buckets per chunk: the stage's buckets spread over its chunks (planner chunk_buckets).
  int64_t buckets_of_chunk(int64_t ch) const { return chunk_buckets(sc_.dp_buckets, s_.chunks, ch); }

  // One DP gradient bucket on the dp stream, after task `after` (-1: no edge).
  void bucket(int32_t after) {
    const int32_t b = b_.task(sc_.dp_bucket_s, i_, StreamKind::dp, EventCategory::dp_comm, -1, 0, dp_link_);
    b_.out.info.back().bytes = sc_.dp_bucket_bytes;
    if (after >= 0) b_.out.graph.add_dep(after, b);
    last_bucket_ = b;
  }

  // ZeRO-3: a pass's parameter all-gathers occupy the DP link from the start of the pass (FSDP prefetches them a
  // layer ahead), so the gradient reduce-scatters queue behind them on the ordered dp stream: the link the
  // closed form shares between the two (cost_model.cpp). The compute stream does not wait for this task; the
  // gathers' exposed part is already in the op's layer_comm.
  void gathers_on_link(double s_link, int32_t mb, int32_t chunk) {
    if (s_link <= 0) return;
    const int32_t g = b_.task(s_link, i_, StreamKind::dp, EventCategory::zero3_gather, mb, chunk, dp_link_);
    if (prev_compute_ >= 0) b_.out.graph.add_dep(prev_compute_, g);
  }

  // A task of the op on the compute stream.
  int32_t add(OpTasks& ot, double d, EventCategory cat) {
    const int32_t t = b_.task(d, i_, StreamKind::compute, cat, ot.op.microbatch, ot.op.chunk);
    b_.out.info.back().costs = &ot.cc;
    if (ot.first < 0) ot.first = t;
    ot.last = t;
    prev_compute_ = t;
    return t;
  }

  // A `share` of the op's recompute and its exposed comm, with the TP shadow on the first part.
  void recompute(OpTasks& ot, double share, bool first_part) {
    const ChunkCosts& cc = ot.cc;
    const int32_t r = add(ot, cc.recompute_s * share, EventCategory::recompute);
    if (first_part && cc.tp_overlapped_forward_s > 0 && cc.recompute_comm_s > 0) {
      b_.shadow(r, cc.tp_overlapped_forward_s, i_, StreamKind::tp, EventCategory::tp_comm, ot.op.microbatch,
                ot.op.chunk);
    }
    if (cc.recompute_comm_s > 0) add(ot, cc.recompute_comm_s * share, EventCategory::layer_comm);
  }

  // The op's passes: its ZeRO-3 gathers on the DP link, recompute, main task in pieces (releasing DP buckets),
  // overlapped TP / CP collectives on their streams and exposed comm. `final_of_chunk`: the chunk's gradients are
  // final after this op.
  void emit_passes(OpTasks& ot, bool final_of_chunk) {
    const PipeOp& op = ot.op;
    const ChunkCosts& cc = ot.cc;
    const OpShape sh = op_shape(cc, op.kind);
    gathers_on_link(zero3_gather_s(cc, op.kind), static_cast<int32_t>(op.microbatch), static_cast<int32_t>(op.chunk));
    const bool completes = completes_gradients(op.kind);
    const Release rel = release_of(sc_, c_.dp_overlap, completes, final_of_chunk, buckets_of_chunk(op.chunk));
    const int64_t pieces = rel.pieces;
    // Recompute before the backward; in a split op, layer by layer with it (checkpointing recomputes each layer's
    // forward just before that layer's backward), so the released reductions also run beside recompute.
    const bool recomputes = recomputes_before(cc, op.kind);
    if (recomputes && pieces == 1) recompute(ot, 1.0, true);
    int32_t main_first = -1;
    for (int64_t piece = 0; piece < pieces; ++piece) {
      if (recomputes && pieces > 1) recompute(ot, 1.0 / static_cast<double>(pieces), piece == 0);
      const int32_t t = add(ot, sh.main_s / static_cast<double>(pieces), sh.cat);
      b_.out.info.back().last_piece = piece == pieces - 1;
      if (main_first < 0) main_first = t;
      if (rel.chunk_final && buckets_of_chunk(op.chunk) > 0) bucket_ready_.push_back(t);
      if (rel.microbatch) {
        // Buckets of this piece: the microbatch's dp_buckets spread over the pieces (the first take the rest).
        const int64_t n = sc_.dp_buckets / pieces + (piece < sc_.dp_buckets % pieces ? 1 : 0);
        for (int64_t b = 0; b < n; ++b) bucket(t);
      }
    }
    if (sh.tp_ov > 0) {
      b_.shadow(main_first, sh.tp_ov, i_, StreamKind::tp, EventCategory::tp_comm, op.microbatch, op.chunk);
    }
    if (sh.cp_ov > 0) {
      b_.shadow(main_first, sh.cp_ov, i_, StreamKind::cp, EventCategory::cp_comm, op.microbatch, op.chunk);
    }
    if (sh.ep > 0) {  // the pass's expert dispatch and combine on the ep group (their exposed part: layer_comm)
      b_.shadow(main_first, sh.ep, i_, StreamKind::ep, EventCategory::ep_comm, op.microbatch, op.chunk);
    }
    if (cc.host_copy_s > 0 && (op.kind == OpKind::forward || is_backward_pass(op.kind))) {
      b_.shadow(main_first, cc.host_copy_s, i_, StreamKind::host, EventCategory::host_copy, op.microbatch, op.chunk);
    }
    if (sh.layer_comm_s() > 0) add(ot, sh.layer_comm_s(), EventCategory::layer_comm);
    // Activation offload: the wait for this pass's copies where they outlast it (the "host copies (exposed)" term).
    if (sh.offload_s > 0) add(ot, sh.offload_s, EventCategory::host_copy);
    // ZeRO-2/3 without overlap: a microbatch's gradients are reduced after the stage's last compute (emit_dp_buckets).
    if (sc_.dp_per_microbatch && sc_.dp_buckets > 0 && completes && !c_.dp_overlap) ++mb_completed_;
  }

  // The task downstream ops wait for: when the result leaves the stage (activations to the next virtual stage,
  // gradients to the previous one; not ZB-V's turn, virtual stages p - 1 and p on the last stage) its p2p transfer,
  // else the op's last task.
  int32_t send_result(const PipeOp& op, int32_t last) {
    const int64_t vs = s_.virtual_stage(i_, op.chunk);
    const bool sends =
        (op.kind == OpKind::forward && vs < virtual_stages_ - 1) || (is_backward_pass(op.kind) && vs > 0);
    if (!sends) return last;
    const int64_t dst_vs = op.kind == OpKind::forward ? vs + 1 : vs - 1;
    const int32_t peer = static_cast<int32_t>(s_.stage_of(dst_vs));
    if (peer == i_) return last;
    int32_t x;
    if (c_.p2p_blocking) {
      x = b_.task(c_.p2p_s, i_, StreamKind::compute, EventCategory::pp_comm, op.microbatch, op.chunk, pp_link_);
      prev_compute_ = x;
    } else {
      x = b_.task(c_.p2p_s, i_, StreamKind::pp, EventCategory::pp_comm, op.microbatch, op.chunk, pp_link_);
      b_.out.graph.add_dep(last, x);
    }
    b_.out.info.back().peer_stage = peer;
    b_.out.info.back().bytes = c_.p2p_bytes;
    b_.out.info.back().flow = b_.next_flow++;
    return x;
  }
};

void Builder::emit_stage(int64_t i, std::vector<int32_t>& begin) {
  StageEmitter e(*this, i);
  e.emit_ops(begin);
  e.emit_dp_buckets();
  e.emit_embedding_all_reduce();
  e.emit_optimizer_and_gather();
}

}  // namespace

int64_t count_step_tasks(int64_t p, int64_t m, int64_t v, bool split_backward, const StepCosts& c, int64_t limit) {
  const std::vector<OpKind> kinds = split_backward
                                        ? std::vector<OpKind>{OpKind::forward, OpKind::backward_input, OpKind::backward_weight}
                                        : std::vector<OpKind>{OpKind::forward, OpKind::backward};
  const OpKind final_kind = split_backward ? OpKind::backward_weight : OpKind::backward;
  const int64_t V = p * v;
  // Summed in double: m x buckets can pass 64 bits for absurd plans; exact below 2^53, far above any limit.
  double tasks = 0;
  const auto lim = static_cast<double>(limit);
  for (int64_t i = 0; i < p && i < static_cast<int64_t>(c.stages.size()) && tasks <= lim; ++i) {
    const StageCosts& sc = c.stages[static_cast<size_t>(i)];
    for (int64_t ch = 0; ch < v && ch < static_cast<int64_t>(sc.chunks.size()); ++ch) {
      const ChunkCosts& cc = sc.chunks[static_cast<size_t>(ch)];
      const int64_t vs = ch * p + i;
      const int64_t b = sc.dp_buckets, chunk_buckets = b / v + (ch < b % v ? 1 : 0);
      for (const OpKind k : kinds) {
        // Tasks of one op of this kind, as StageEmitter adds them, with `final_of_chunk` for the op after
        // which the chunk's gradients are final.
        auto op_tasks = [&](bool final_of_chunk) -> double {
          const OpShape sh = op_shape(cc, k);
          const Release rel = release_of(sc, c.dp_overlap, completes_gradients(k), final_of_chunk, chunk_buckets);
          const auto pieces = static_cast<double>(rel.pieces);
          double n = (zero3_gather_s(cc, k) > 0 ? 1 : 0) + pieces;
          if (recomputes_before(cc, k)) {
            n += static_cast<double>(recompute_tasks(cc, true)) + (pieces - 1) * static_cast<double>(recompute_tasks(cc, false));
          }
          if (rel.microbatch) n += static_cast<double>(sc.dp_buckets);
          n += (sh.tp_ov > 0 ? 1 : 0) + (sh.cp_ov > 0 ? 1 : 0) + (sh.ep > 0 ? 1 : 0) + (sh.layer_comm_s() > 0 ? 1 : 0) +
               (sh.offload_s > 0 ? 1 : 0);
          const bool sends = (k == OpKind::forward && vs < V - 1) || (is_backward_pass(k) && vs > 0);
          return n + (sends ? 1 : 0);
        };
        const auto md = static_cast<double>(m);
        tasks += k == final_kind && m > 0 ? (md - 1) * op_tasks(false) + op_tasks(true) : md * op_tasks(false);
      }
    }
    const auto buckets = static_cast<double>(sc.dp_buckets);
    if (sc.dp_buckets > 0) {
      // ZeRO-2/3 without overlap: every microbatch's buckets after the stage's last compute (with overlap they are
      // the ops' own, above); otherwise the step's buckets once.
      if (sc.dp_per_microbatch) {
        if (!c.dp_overlap) tasks += static_cast<double>(m) * static_cast<double>(v) * buckets;
      } else {
        tasks += buckets;
      }
      if (sc.param_gather_s > 0) tasks += buckets;
    }
    // the embedding all-reduce, the optimizer and its host copies
    tasks += (sc.embedding_grad_s > 0 ? 1 : 0) + 1 + (sc.grad_to_host_s > 0 ? 1 : 0) + (sc.params_to_gpu_s > 0 ? 1 : 0);
  }
  return tasks > 9e18 ? INT64_MAX : static_cast<int64_t>(tasks);
}

std::vector<ZbVOpTimes> zb_v_op_times(const StepCosts& costs) {
  const auto p = static_cast<int64_t>(costs.stages.size());
  std::vector<ZbVOpTimes> r(costs.stages.size());
  for (int64_t i = 0; i < p; ++i) {
    const std::vector<ChunkCosts>& chunks = costs.stages[static_cast<size_t>(i)].chunks;
    for (int64_t c = 0; c < 2 && c < static_cast<int64_t>(chunks.size()); ++c) {
      const ChunkCosts& cc = chunks[static_cast<size_t>(c)];
      const auto send = [&](ChunkOp::Kind k) { return costs.p2p_blocking && zb_v_sends(p, i, c, k) ? costs.p2p_s : 0.0; };
      const auto pass = [&](OpKind k) {
        const OpShape sh = op_shape(cc, k);
        return (recomputes_before(cc, k) ? cc.recompute_s + cc.recompute_comm_s : 0.0) + sh.main_s + sh.comm_s;
      };
      ZbVOpTimes& o = r[static_cast<size_t>(i)];
      const auto ci = static_cast<size_t>(c);
      o.forward[ci] = pass(OpKind::forward) + send(ChunkOp::Kind::forward);
      o.backward_input[ci] = pass(OpKind::backward_input) + send(ChunkOp::Kind::backward_input);
      o.backward_weight[ci] = pass(OpKind::backward_weight);
    }
  }
  return r;
}

StepGraph build_step_graph(const PipelineSchedule& s, const StepCosts& costs) {
  Builder b(s, costs);
  b.build();
  return std::move(b.out);
}

}  // namespace parplan::sim
