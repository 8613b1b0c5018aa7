// A deterministic discrete-event engine: tasks on streams (in-order queues like CUDA streams, or unordered pools),
// dependency edges, and links whose bandwidth is shared by the transfers running on them at the same time.
// Events are ordered by (time, sequence number), so the same graph always gives the same times.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace parplan::sim {

// Index-based task graph. Build it once, run it as often as needed.
class TaskGraph {
 public:
  // An ordered stream runs its tasks one at a time in insertion order; an unordered stream starts each task as soon
  // as its dependencies are met (any number at once).
  int32_t add_stream(bool ordered);
  // A link: transfers on it share its bandwidth equally (processor sharing) when contention is on.
  int32_t add_link();
  // A task of `duration_s` (for a transfer: its time alone on the link) on `stream`, optionally using `link`.
  int32_t add_task(double duration_s, int32_t stream, int32_t link = -1);
  // A task that starts when `anchor` starts and occupies `stream` for `duration_s`; it gates nothing and waits for
  // nothing else (an overlapped collective whose exposed part is already in the anchor's stream).
  int32_t add_shadow(int32_t anchor, double duration_s, int32_t stream);
  // `after` cannot start before `before` has ended.
  void add_dep(int32_t before, int32_t after);
  void reserve(size_t tasks, size_t deps);

  size_t size() const { return duration_.size(); }
  size_t streams() const { return stream_ordered_.size(); }
  size_t links() const { return static_cast<size_t>(links_); }
  int32_t stream_of(int32_t t) const { return stream_[static_cast<size_t>(t)]; }
  double duration(int32_t t) const { return duration_[static_cast<size_t>(t)]; }

 private:
  friend struct EngineRun;
  std::vector<double> duration_;
  std::vector<int32_t> stream_, link_, anchor_;
  std::vector<uint8_t> stream_ordered_;
  std::vector<std::vector<int32_t>> stream_tasks_;  // ordered streams: tasks in order
  std::vector<std::pair<int32_t, int32_t>> deps_;
  std::vector<int32_t> shadows_;
  int32_t links_ = 0;
};

struct EngineOptions {
  bool contention = true;  // share link bandwidth among concurrent transfers; off: every transfer at full speed
};

struct TaskTimes {
  std::vector<double> start_s, end_s;
  double makespan_s = 0;
  int64_t events = 0;  // events processed (one per task completion, plus re-timings under contention)
};

// Runs the graph. Throws std::logic_error when some task can never start (a dependency cycle, or an ordered
// stream whose order contradicts the dependencies): a bug in whoever built the graph, never bad user input.
TaskTimes run(const TaskGraph& g, const EngineOptions& opt = {});

}  // namespace parplan::sim
