// The host backend: CPU threads as ranks, exact allocation accounting, a real CPU GEMM and memory-bound ops,
// wall-clock timing events (host ops are synchronous, so both "streams" run in program order).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fmt/core.h>
#include <map>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "planner/spec/error.hpp"
#include "runtime/backend.hpp"
#include "runtime/host_collectives.hpp"
#include "runtime/host_gemm.hpp"

namespace parplan::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// What every rank of a host world shares: the abort flag, a world barrier and the split() table.
struct HostShared {
  explicit HostShared(int n) : size(n), barrier(n, &abort), split_color(n), split_key(n), split_groups(n) {}
  int size;
  std::atomic<bool> abort{false};
  host::Rendezvous barrier;
  std::vector<int> split_color, split_key;
  std::vector<std::shared_ptr<host::HostGroup>> split_groups;  // indexed by world rank, filled by group leaders
};

class HostDevice final : public Device {
 public:
  HostDevice(int rank, std::shared_ptr<HostShared> shared) : rank_(rank), shared_(std::move(shared)) {}
  ~HostDevice() override {
    for (auto& [p, bytes] : live_) std::free(p);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return shared_->size; }
  DeviceInfo info() const override {
    DeviceInfo d;
    d.name = fmt::format("host CPU ({} hardware threads)", std::thread::hardware_concurrency());
    d.memory_bytes = physical_bytes(_SC_PHYS_PAGES);
    d.supports_fp8 = true;  // emulated
    return d;
  }

  Buffer allocate(int64_t bytes, Fill = Fill::pattern) override {  // always zero-filled
    if (bytes < 0) throw BackendError(fmt::format("host allocate: negative size {}", bytes));
    if (bytes == 0) return {};
    const size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw BackendError(fmt::format("host allocate: out of memory allocating {} bytes", bytes));
    std::memset(p, 0, rounded);
    live_[p] = bytes;
    allocated_ += bytes;
    peak_ = std::max(peak_, allocated_);
    return {p, bytes};
  }
  void free(Buffer b) override {
    if (!b.ptr) return;
    auto it = live_.find(b.ptr);
    if (it == live_.end()) throw BackendError("host free: buffer was not allocated by this device");
    allocated_ -= it->second;
    std::free(it->first);
    live_.erase(it);
  }
  MemoryStats memory_stats() const override {
    MemoryStats m;
    m.allocated_bytes = allocated_;
    m.peak_allocated_bytes = peak_;
    m.pool_reserved_peak_bytes = peak_;
    m.device_total_bytes = physical_bytes(_SC_PHYS_PAGES);
    m.device_free_bytes = physical_bytes(_SC_AVPHYS_PAGES);
    return m;
  }
  void reset_peak() override { peak_ = allocated_; }
  void upload(Buffer dst, const void* src, int64_t bytes) override {
    if (bytes <= 0) return;
    if (dst.bytes < bytes) throw BackendError(fmt::format("host upload: {} bytes into a buffer of {}", bytes, dst.bytes));
    std::memcpy(dst.ptr, src, static_cast<size_t>(bytes));
  }
  void download(void* dst, Buffer src, int64_t bytes) override {
    if (bytes <= 0) return;
    if (src.bytes < bytes) throw BackendError(fmt::format("host download: {} bytes from a buffer of {}", bytes, src.bytes));
    std::memcpy(dst, src.ptr, static_cast<size_t>(bytes));
  }

  void gemm(const GemmShape& s, Buffer a, Buffer b, Buffer c) override {
    if (s.m < 0 || s.n < 0 || s.k < 0 || s.batch < 1) {
      throw BackendError(fmt::format("host gemm: bad shape m={} n={} k={} batch={}", s.m, s.n, s.k, s.batch));
    }
    need(a, s.a_bytes(), "A");
    need(b, s.b_bytes(), "B");
    need(c, s.c_bytes(), "C");
    host::gemm(s, a.ptr, b.ptr, c.ptr);
  }
  void memory_op(Buffer src, Buffer dst, int64_t bytes) override {
    if (bytes <= 0) return;
    if (src.bytes < bytes || dst.bytes < bytes) {
      throw BackendError(fmt::format("host memory_op: {} bytes requested, buffers hold {} and {}", bytes, src.bytes, dst.bytes));
    }
    std::memmove(dst.ptr, src.ptr, static_cast<size_t>(bytes));
  }

  Event record(Stream) override {
    events_.push_back(Clock::now());
    return Event{static_cast<int32_t>(events_.size() - 1)};
  }
  void wait(Stream, Event e) override { at(e); }
  double elapsed_s(Event from, Event to) override { return std::chrono::duration<double>(at(to) - at(from)).count(); }
  void synchronize() override {}
  void reset_events() override { events_.clear(); }

  std::unique_ptr<Communicator> split(int color, int key) override {
    HostShared& sh = *shared_;
    sh.split_color[rank_] = color;
    sh.split_key[rank_] = key;
    sh.barrier.arrive_and_wait("split");
    // Members of my colour ordered by (key, world rank); the first world rank of the colour builds the group.
    std::vector<std::pair<int, int>> members;
    for (int r = 0; r < sh.size; ++r) {
      if (sh.split_color[r] == color) members.emplace_back(sh.split_key[r], r);
    }
    std::sort(members.begin(), members.end());
    int leader = sh.size, my_index = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      leader = std::min(leader, members[i].second);
      if (members[i].second == rank_) my_index = static_cast<int>(i);
    }
    if (leader == rank_) {
      sh.split_groups[rank_] = std::make_shared<host::HostGroup>(static_cast<int>(members.size()), color, &sh.abort);
    }
    sh.barrier.arrive_and_wait("split");
    auto group = sh.split_groups[leader];
    sh.barrier.arrive_and_wait("split");
    if (leader == rank_) sh.split_groups[rank_].reset();
    return std::make_unique<host::HostCommunicator>(std::move(group), my_index, &log_);
  }

  const std::vector<CollectiveRecord>& collective_log() const override { return log_; }
  void clear_collective_log() override { log_.clear(); }

 private:
  static int64_t physical_bytes(int which) {
    long pages = sysconf(which), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
  }
  static void need(Buffer b, int64_t bytes, const char* which) {
    if (bytes > 0 && (!b.ptr || b.bytes < bytes)) {
      throw BackendError(fmt::format("host gemm: operand {} holds {} bytes, the shape needs {}", which, b.bytes, bytes));
    }
  }
  Clock::time_point at(Event e) const {
    if (e.id < 0 || static_cast<size_t>(e.id) >= events_.size()) throw BackendError(fmt::format("host event {}: not recorded", e.id));
    return events_[static_cast<size_t>(e.id)];
  }

  int rank_;
  std::shared_ptr<HostShared> shared_;
  std::map<void*, int64_t> live_;
  int64_t allocated_ = 0, peak_ = 0;
  std::vector<Clock::time_point> events_;
  std::vector<CollectiveRecord> log_;
};

class HostWorld final : public World {
 public:
  explicit HostWorld(int n) : shared_(std::make_shared<HostShared>(n)) {
    for (int r = 0; r < n; ++r) devices_.push_back(std::make_unique<HostDevice>(r, shared_));
  }
  int size() const override { return shared_->size; }
  int local_ranks() const override { return shared_->size; }
  void run(const std::function<void(Device&)>& fn) override {
    shared_->abort = false;
    std::mutex mu;
    std::exception_ptr first;
    std::vector<std::thread> threads;
    threads.reserve(devices_.size());
    for (auto& d : devices_) {
      threads.emplace_back([&, dev = d.get()] {
        try {
          fn(*dev);
        } catch (...) {
          std::lock_guard lock(mu);
          if (!first) first = std::current_exception();
          shared_->abort = true;
        }
      });
    }
    for (auto& t : threads) t.join();
    if (first) std::rethrow_exception(first);
  }

 private:
  std::shared_ptr<HostShared> shared_;
  std::vector<std::unique_ptr<HostDevice>> devices_;
};

}  // namespace

std::unique_ptr<World> make_host_world(int ranks) {
  if (ranks < 1) throw BackendError(fmt::format("host backend: {} ranks requested, need at least 1", ranks));
  return std::make_unique<HostWorld>(ranks);
}

}  // namespace parplan::runtime
