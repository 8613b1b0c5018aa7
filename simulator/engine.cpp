// The discrete-event engine (see engine.hpp): a binary heap of (time, sequence) events over an index-based graph.
#include "simulator/engine.hpp"

#include <algorithm>
#include <fmt/core.h>
#include <stdexcept>

namespace parplan::sim {

int32_t TaskGraph::add_stream(bool ordered) {
  stream_ordered_.push_back(ordered ? 1 : 0);
  stream_tasks_.emplace_back();
  return static_cast<int32_t>(stream_ordered_.size() - 1);
}

int32_t TaskGraph::add_link() { return links_++; }

int32_t TaskGraph::add_task(double duration_s, int32_t stream, int32_t link) {
  const auto id = static_cast<int32_t>(duration_.size());
  duration_.push_back(duration_s);
  stream_.push_back(stream);
  link_.push_back(link);
  anchor_.push_back(-1);
  if (stream_ordered_[static_cast<size_t>(stream)]) stream_tasks_[static_cast<size_t>(stream)].push_back(id);
  return id;
}

int32_t TaskGraph::add_shadow(int32_t anchor, double duration_s, int32_t stream) {
  const auto id = static_cast<int32_t>(duration_.size());
  duration_.push_back(duration_s);
  stream_.push_back(stream);
  link_.push_back(-1);
  anchor_.push_back(anchor);
  shadows_.push_back(id);
  return id;
}

void TaskGraph::add_dep(int32_t before, int32_t after) { deps_.emplace_back(before, after); }

void TaskGraph::reserve(size_t tasks, size_t deps) {
  duration_.reserve(tasks);
  stream_.reserve(tasks);
  link_.reserve(tasks);
  anchor_.reserve(tasks);
  deps_.reserve(deps);
}

namespace {
struct Event {
  double t;
  uint64_t seq;
  int32_t task;
  uint32_t version;
};
// Min-heap on (t, seq): the std heap functions build a max-heap, so the comparison is reversed.
struct Later {
  bool operator()(const Event& a, const Event& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
};
}  // namespace

struct EngineRun {
  const TaskGraph& g;
  const EngineOptions& opt;
  TaskTimes out;
  std::vector<int32_t> pending, succ_begin, succ, head, shadow_begin, shadows;
  std::vector<uint8_t> busy, ready;
  std::vector<uint32_t> version;
  std::vector<double> remaining;             // transfers under contention: seconds of work left at full bandwidth
  std::vector<std::vector<int32_t>> active;  // per link: running transfers
  std::vector<double> link_t;                // per link: when the remaining work was last brought up to date
  std::vector<Event> heap;
  uint64_t seq = 0;
  size_t done = 0;

  EngineRun(const TaskGraph& graph, const EngineOptions& o) : g(graph), opt(o) {}

  void push(double t, int32_t task, uint32_t ver) {
    heap.push_back({t, seq++, task, ver});
    std::push_heap(heap.begin(), heap.end(), Later{});
  }

  // Brings the remaining work of the transfers on `link` up to `now` at the current equal share.
  void advance_link(int32_t link, double now) {
    auto& a = active[static_cast<size_t>(link)];
    const double dt = now - link_t[static_cast<size_t>(link)];
    if (!a.empty() && dt > 0) {
      const double share = dt / static_cast<double>(a.size());
      for (int32_t t : a) remaining[static_cast<size_t>(t)] = std::max(0.0, remaining[static_cast<size_t>(t)] - share);
    }
    link_t[static_cast<size_t>(link)] = now;
  }
  void retime_link(int32_t link, double now) {
    const auto& a = active[static_cast<size_t>(link)];
    const double n = static_cast<double>(a.size());
    for (int32_t t : a) push(now + remaining[static_cast<size_t>(t)] * n, t, ++version[static_cast<size_t>(t)]);
  }

  void start(int32_t t, double now) {
    const auto ti = static_cast<size_t>(t);
    out.start_s[ti] = now;
    const int32_t link = g.link_[ti];
    if (link >= 0 && opt.contention) {
      advance_link(link, now);
      active[static_cast<size_t>(link)].push_back(t);
      remaining[ti] = g.duration_[ti];
      retime_link(link, now);
    } else {
      push(now + g.duration_[ti], t, version[ti]);
    }
    for (int32_t k = shadow_begin[ti]; k < shadow_begin[ti + 1]; ++k) {
      const auto s = static_cast<size_t>(shadows[static_cast<size_t>(k)]);
      out.start_s[s] = now;
      out.end_s[s] = now + g.duration_[s];
      out.makespan_s = std::max(out.makespan_s, out.end_s[s]);
      ++done;
    }
  }

  void try_stream(int32_t s, double now) {
    const auto si = static_cast<size_t>(s);
    if (busy[si]) return;
    const auto& q = g.stream_tasks_[si];
    if (static_cast<size_t>(head[si]) >= q.size()) return;
    const int32_t t = q[static_cast<size_t>(head[si])];
    if (!ready[static_cast<size_t>(t)]) return;
    busy[si] = 1;
    start(t, now);
  }

  void become_ready(int32_t t, double now) {
    ready[static_cast<size_t>(t)] = 1;
    const int32_t s = g.stream_[static_cast<size_t>(t)];
    if (g.stream_ordered_[static_cast<size_t>(s)]) {
      try_stream(s, now);
    } else {
      start(t, now);
    }
  }

  void finish(int32_t t, double now) {
    const auto ti = static_cast<size_t>(t);
    out.end_s[ti] = now;
    out.makespan_s = std::max(out.makespan_s, now);
    ++done;
    const int32_t link = g.link_[ti];
    if (link >= 0 && opt.contention) {
      advance_link(link, now);
      auto& a = active[static_cast<size_t>(link)];
      a.erase(std::find(a.begin(), a.end(), t));
      retime_link(link, now);
    }
    const int32_t s = g.stream_[ti];
    const bool ordered = g.stream_ordered_[static_cast<size_t>(s)] != 0;
    if (ordered) {
      busy[static_cast<size_t>(s)] = 0;
      ++head[static_cast<size_t>(s)];
    }
    for (int32_t k = succ_begin[ti]; k < succ_begin[ti + 1]; ++k) {
      const int32_t n = succ[static_cast<size_t>(k)];
      if (--pending[static_cast<size_t>(n)] == 0) become_ready(n, now);
    }
    if (ordered) try_stream(s, now);
  }

  void build_csr() {
    const size_t n = g.size();
    succ_begin.assign(n + 1, 0);
    for (const auto& [a, b] : g.deps_) {
      ++succ_begin[static_cast<size_t>(a) + 1];
      ++pending[static_cast<size_t>(b)];
    }
    for (size_t i = 0; i < n; ++i) succ_begin[i + 1] += succ_begin[i];
    succ.resize(g.deps_.size());
    std::vector<int32_t> fill(succ_begin.begin(), succ_begin.end() - 1);
    for (const auto& [a, b] : g.deps_) succ[static_cast<size_t>(fill[static_cast<size_t>(a)]++)] = b;
    shadow_begin.assign(n + 1, 0);
    for (int32_t s : g.shadows_) ++shadow_begin[static_cast<size_t>(g.anchor_[static_cast<size_t>(s)]) + 1];
    for (size_t i = 0; i < n; ++i) shadow_begin[i + 1] += shadow_begin[i];
    shadows.resize(g.shadows_.size());
    fill.assign(shadow_begin.begin(), shadow_begin.end() - 1);
    for (int32_t s : g.shadows_) {
      shadows[static_cast<size_t>(fill[static_cast<size_t>(g.anchor_[static_cast<size_t>(s)])]++)] = s;
    }
  }

  void run() {
    const size_t n = g.size();
    out.start_s.assign(n, 0.0);
    out.end_s.assign(n, 0.0);
    pending.assign(n, 0);
    version.assign(n, 0);
    ready.assign(n, 0);
    remaining.assign(n, 0.0);
    busy.assign(g.streams(), 0);
    head.assign(g.streams(), 0);
    active.assign(g.links(), {});
    link_t.assign(g.links(), 0.0);
    build_csr();
    heap.reserve(n / 4 + 64);
    for (size_t i = 0; i < n; ++i) {
      if (g.anchor_[i] < 0 && pending[i] == 0) become_ready(static_cast<int32_t>(i), 0.0);
    }
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), Later{});
      const Event e = heap.back();
      heap.pop_back();
      ++out.events;
      if (e.version != version[static_cast<size_t>(e.task)]) continue;  // superseded by a re-timing
      finish(e.task, e.t);
    }
    if (done != n) {
      throw std::logic_error(fmt::format("simulator: {} of {} tasks never ran (dependency cycle or stream order "
                                         "contradicting the dependencies)", n - done, n));
    }
  }
};

TaskTimes run(const TaskGraph& g, const EngineOptions& opt) {
  EngineRun r(g, opt);
  r.run();
  return std::move(r.out);
}

}  // namespace parplan::sim
