// Benchmark of the plan search: full evaluations per second on one core, `parplan suggest` end to end (process
// start to exit, fork/exec of the binary), 1T on 16,384 GPUs with every knob, threads 1 vs 2 (results compared).
// Usage: bench_search [path/to/parplan]   (default: ../cli/parplan next to this executable). Results: bench/README.md.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "planner/cost/cost_model.hpp"
#include "planner/cost/model_shape.hpp"
#include "planner/spec/profiles.hpp"
#include "planner/search/search.hpp"

extern char** environ;
using namespace parplan;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

SearchRequest request(const ProfileSet& ps, bool one_t) {
  SearchRequest r;
  r.model = one_t ? ps.model("megatron-1t", "bench") : infer_gpt_shape(175e9);
  r.gpu = ps.gpu("h100-sxm5-80gb", "bench");
  r.cluster = ps.cluster("dgx-h100", "bench");
  r.gpus = one_t ? 16384 : 64;
  r.training.global_batch = (int64_t{1} << 22) / r.model.seq_len;  // 4 Mi tokens: the CLI default up to 2,048 GPUs
  r.training.seq_len = r.model.seq_len;
  r.threads = 1;
  return r;
}

// Median wall time of running `parplan args...` (fork/exec, stdout/stderr to /dev/null).
double run_binary(const std::string& exe, std::vector<std::string> args, int reps) {
  args.insert(args.begin(), exe);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    const auto t0 = Clock::now();
    if (posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ) != 0) return -1;
    int status = 0;
    waitpid(pid, &status, 0);
    t.push_back(since(t0));
    posix_spawn_file_actions_destroy(&fa);
    if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) return -1;
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

bool same(const SearchResult& a, const SearchResult& b) {
  if (a.candidates != b.candidates || a.evaluated != b.evaluated || a.top.size() != b.top.size()) return false;
  for (size_t i = 0; i < a.top.size(); ++i) {
    if (a.top[i].time.step_s != b.top[i].time.step_s || a.top[i].parallel.dp != b.top[i].parallel.dp ||
        a.top[i].parallel.tp != b.top[i].parallel.tp || a.top[i].parallel.pp != b.top[i].parallel.pp) {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string exe = argc > 1 ? argv[1]
                                   : (std::filesystem::canonical("/proc/self/exe").parent_path().parent_path() / "cli" /
                                      "parplan").string();
  const ProfileSet ps = ProfileSet::embedded();

  // 1. Full evaluations per second, one thread. A full evaluation = validate() + peak memory of the plan + the whole
  //    step-time breakdown (every stage, bubble, DP tail, MFU). The GPU gets unlimited memory so every valid
  //    candidate is fully evaluated; the time includes enumeration and the rejected candidates.
  std::printf("1. full configuration evaluations per second, 1 thread (every valid candidate estimated)\n");
  for (bool one_t : {false, true}) {
    SearchRequest r = request(ps, one_t);
    r.gpu.memory_bytes = int64_t{1} << 50;
    double best = 1e300;
    SearchResult res;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      res = search(r);
      best = std::min(best, since(t0));
    }
    std::printf("   %-22s %9lld candidates, %8lld full evaluations in %.4f s: %.2fM evaluations/s (%.2fM candidates/s)\n",
                one_t ? "1T on 16384 GPUs" : "175B on 64 GPUs", static_cast<long long>(res.candidates),
                static_cast<long long>(res.evaluated), best, res.evaluated / best / 1e6, res.candidates / best / 1e6);
  }
  {
    SearchRequest r = request(ps, false);
    Plan p = candidate_plan(r, Candidate{});
    p.parallel.tp = 8, p.parallel.pp = 8, p.parallel.dp = 1, p.parallel.num_microbatches = 2048;
    p.num_gpus = 64;
    const int n = 200000;
    double acc = 0;
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) acc += estimate(p).time.step_s;
    std::printf("   reference: one uncached estimate() (175B, tp 8 pp 8) %.2f us (checksum %.3g)\n", since(t0) / n * 1e6, acc);
  }

  // 2. / 3. In-process search times with the real memory limits, threads 1 and 2, results compared.
  std::printf("2. search in process (H100-80GB, default knobs), threads 1 vs 2\n");
  for (bool one_t : {false, true}) {
    SearchRequest r = request(ps, one_t);
    SearchResult res[2];
    double t[2];
    for (int k = 0; k < 2; ++k) {
      r.threads = k + 1;
      t[k] = 1e300;
      for (int i = 0; i < 3; ++i) {
        const auto t0 = Clock::now();
        res[k] = search(r);
        t[k] = std::min(t[k], since(t0));
      }
    }
    std::printf("   %-22s %9lld candidates, %6lld fit: 1 thread %.4f s, 2 threads %.4f s, identical: %s\n",
                one_t ? "1T on 16384 GPUs" : "175B on 64 GPUs", static_cast<long long>(res[0].candidates),
                static_cast<long long>(res[0].evaluated), t[0], t[1], same(res[0], res[1]) ? "yes" : "NO");
  }

  // 4. End to end: the parplan process from start to exit.
  std::printf("3. end to end (%s, median of 11 runs)\n", exe.c_str());
  const double e175 = run_binary(exe, {"suggest", "--params", "175e9", "--gpus", "64"}, 11);
  const double e175j = run_binary(exe, {"suggest", "--params", "175e9", "--gpus", "64", "--json"}, 11);
  const double e1t1 = run_binary(exe, {"suggest", "--model", "megatron-1t", "--gpus", "16384", "--threads", "1"}, 11);
  const double e1t2 = run_binary(exe, {"suggest", "--model", "megatron-1t", "--gpus", "16384", "--threads", "2"}, 11);
  const double e1tx = run_binary(exe, {"suggest", "--model", "megatron-1t", "--gpus", "16384", "--explain"}, 5);
  // ZB-V is searched only when listed: its order is an event-driven list schedule over every op (pipeline.hpp).
  const double e175v = run_binary(exe, {"suggest", "--params", "175e9", "--gpus", "64", "--schedule", "1f1b,zb-v"}, 11);
  const double e1tv =
      run_binary(exe, {"suggest", "--model", "megatron-1t", "--gpus", "16384", "--schedule", "1f1b,zb-v", "--threads", "1"}, 3);
  std::printf("   suggest --params 175e9 --gpus 64              %.4f s\n", e175);
  std::printf("   suggest --params 175e9 --gpus 64 --json       %.4f s\n", e175j);
  std::printf("   suggest --model megatron-1t --gpus 16384 -t1  %.4f s\n", e1t1);
  std::printf("   suggest --model megatron-1t --gpus 16384 -t2  %.4f s\n", e1t2);
  std::printf("   suggest --model megatron-1t --gpus 16384 --explain  %.4f s\n", e1tx);
  std::printf("   suggest --params 175e9 --gpus 64 --schedule 1f1b,zb-v  %.4f s\n", e175v);
  std::printf("   suggest --model megatron-1t --gpus 16384 --schedule 1f1b,zb-v -t1  %.4f s\n", e1tv);
  return e175 < 0 || e1t1 < 0 ? 1 : 0;
}
