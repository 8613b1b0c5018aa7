// `parplan calibrate`: measure GEMM, memory bandwidth and collectives; write a GPU (and cluster) profile.
//
// Extension hook: other calibration sources (e.g. `--from-runs`, in their own cli/ file) register with
// calibrate_hooks() at static-initialisation time. A hook adds its options to the calibrate subcommand and returns
// a function that, after parsing, either handles the command (returns an exit code) or declines (std::nullopt), in
// which case the next hook, and finally the measurement sweep, runs. Declare it in your file as:
//   namespace parplan::cli {
//   using CalibrateHook = std::function<std::function<std::optional<int>()>(CLI::App&)>;
//   std::vector<CalibrateHook>& calibrate_hooks();
//   }
#include <ctime>
#include <fmt/core.h>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/calibrate_from_runs.hpp"
#include "cli/command.hpp"
#include "cli/io.hpp"
#include "cli/plan_options.hpp"
#include "cli/render.hpp"
#include "planner/spec/error.hpp"
#include "planner/spec/spec_json.hpp"
#include "runtime/calibrate.hpp"

namespace parplan::cli {

using CalibrateHook = std::function<std::function<std::optional<int>()>(CLI::App&)>;
std::vector<CalibrateHook>& calibrate_hooks() {
  static std::vector<CalibrateHook> hooks;
  return hooks;
}

namespace {

struct CalibrateOptions {
  std::string backend = "cuda";
  std::string out, cluster_out;
  std::string gpu = "H100-SXM5-80GB", cluster = "dgx-h100";
  std::string name;
  int ranks = 0;
  bool json = false;
};

std::string today() {
  std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

// Prints what calibrate measured: --json's document, or the text report on `report`.
void print_calibration(const runtime::CalibrationResult& r, const GpuSpec& g, const std::vector<runtime::GemmFit>& fits,
                       const CalibrateOptions& o, std::FILE* report) {
  if (o.json) {
    nlohmann::json j = {{"device", r.device}, {"ranks", r.ranks}, {"hbm_bandwidth_Bps", r.hbm_bandwidth_Bps},
                        {"gemm", nlohmann::json::array()}, {"collectives", nlohmann::json::array()},
                        {"gemm_fit", nlohmann::json::array()}, {"peak_fraction", g.gemm.peak_fraction}};
    for (const auto& f : fits) {
      j["gemm_fit"].push_back({{"dtype", std::string(to_string(f.dtype))}, {"points", f.points}, {"peak_fraction", f.peak_fraction},
                               {"mean_abs_error", f.mean_abs_error}, {"max_abs_error", f.max_abs_error},
                               {"best_fraction", f.best_fraction}});
    }
    for (const auto& p : r.gemm) j["gemm"].push_back({{"dtype", std::string(to_string(p.dtype))}, {"m", p.m}, {"n", p.n}, {"k", p.k}, {"seconds", p.seconds}, {"flops_per_s", p.flops_per_s}});
    for (const auto& p : r.collectives) {
      j["collectives"].push_back({{"kind", std::string(runtime::to_string(p.kind))}, {"ranks", p.ranks}, {"bytes", p.bytes},
                                  {"seconds", p.seconds}, {"algbw_Bps", p.algbw_Bps}, {"busbw_Bps", p.busbw_Bps}});
    }
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print(report, "parplan calibrate on {} ({} rank(s)); profile written to {}\n\n", r.device, r.ranks, o.out);
  Table gt({"dtype", "m x n x k", "time", "TFLOP/s"}, 1);
  for (const auto& p : r.gemm) {
    gt.add({std::string(to_string(p.dtype)), fmt::format("{} x {} x {}", p.m, p.n, p.k), fmt_seconds(p.seconds),
            fmt::format("{:.2f}", p.flops_per_s / 1e12)});
  }
  fmt::print(report, "{}\nmemory bandwidth (copy, read + write): {:.1f} GB/s\n\n", gt.render(), r.hbm_bandwidth_Bps / 1e9);
  for (const auto& f : fits) {
    fmt::print(report,
               "gemm.peak_fraction fit, {}: {:.3f} over {} GEMMs (mean |error| {:.1f}%, max {:.1f}%; best measured "
               "{:.3f} of peak){}\n",
               to_string(f.dtype), f.peak_fraction, f.points, 100 * f.mean_abs_error, 100 * f.max_abs_error,
               f.best_fraction, runtime::profile_gemm_fit(fits) == &f ? ": written to the profile" : "");
  }
  if (!fits.empty()) fmt::print(report, "\n");
  if (!r.collectives.empty()) {
    Table ct({"collective", "size", "time", "algbw GB/s", "busbw GB/s"}, 1);
    for (const auto& p : r.collectives) {
      ct.add({std::string(runtime::to_string(p.kind)), fmt_bytes(static_cast<double>(p.bytes)), fmt_seconds(p.seconds),
              fmt::format("{:.2f}", p.algbw_Bps / 1e9), fmt::format("{:.2f}", p.busbw_Bps / 1e9)});
    }
    fmt::print(report, "{}", ct.render());
  }
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  app.add_option("--backend", o->backend, "cuda or host")->check(CLI::IsMember({"cuda", "host"}))->capture_default_str();
  app.add_option("--out", o->out, "Write the measured GPU profile (JSON, the planner's profile schema)");
  app.add_option("--cluster-out", o->cluster_out, "Also write a cluster profile fitted from the all-reduce sweep (needs >= 2 ranks)");
  app.add_option("--gpu", o->gpu, "GPU profile whose datasheet peaks the fitted fractions refer to");
  app.add_option("--cluster", o->cluster, "Cluster profile the measured cluster profile starts from");
  app.add_option("--name", o->name, "Name of the written profile (default: <gpu>-measured-<date>; with --from-runs the base GPU profile's name)");
  app.add_option("--ranks", o->ranks, "Ranks for the collective sweep (default: all local GPUs; host: 2)")->check(CLI::Range(1, 1024));
  app.add_flag("--json", o->json, "Print the measurements as JSON");
  std::vector<std::function<std::optional<int>()>> hooks;
  for (const auto& h : calibrate_hooks()) hooks.push_back(h(app));
  return [o, hooks]() -> int {
    for (const auto& h : hooks) {
      if (auto rc = h()) return *rc;
    }
    // Every flag is checked before anything is measured or written.
    const std::vector<OutputFlag> outputs = check_calibrate_outputs(o->out, o->cluster_out, o->json);
    const ProfileSet profiles = load_profiles(ModelOptions{});
    const GpuSpec& base = profiles.gpu(o->gpu, "--gpu");
    const ClusterSpec* cluster = o->cluster_out.empty() ? nullptr : &profiles.cluster(o->cluster, "--cluster");
    const bool host = o->backend == "host";
    int ranks = o->ranks;
    int gpus = -1;  // detected when --ranks is not given on --backend cuda
    if (ranks == 0 && !host) gpus = runtime::detect_cuda().device_count;
    if (ranks == 0) ranks = host ? 2 : std::max(1, gpus);
    // The host backend runs every rank as a thread of this process over in-memory collectives: measured on 2 cores,
    // 16 ranks 1.1 s, 64 ranks 5.6 s and 0.56 GB, 256 ranks past a minute. Its sweep is for tests and examples.
    constexpr int kMaxHostRanks = 64;
    if (host && ranks > kMaxHostRanks) {
      throw InputError(fmt::format("--ranks: {} ranks on --backend host (at most {}: every rank is a thread of this "
                                   "process)",
                                   ranks, kMaxHostRanks));
    }
    if (cluster != nullptr && ranks < 2 && gpus != 0) {  // with no GPU at all, the backend's error says so
      throw InputError(fmt::format("--cluster-out: needs >= 2 ranks for the all-reduce sweep ({} rank{}; --ranks N)",
                                   ranks, ranks == 1 ? "" : "s"));
    }
    std::unique_ptr<runtime::World> world = host ? runtime::make_host_world(ranks) : runtime::make_cuda_world(ranks);
    const runtime::CalibrationResult r = runtime::calibrate(*world, runtime::default_calibrate_options(!host));
    const std::string name = o->name.empty() ? fmt::format("{}-measured-{}", host ? "host" : base.name, today()) : o->name;
    std::vector<runtime::GemmFit> fits;
    const GpuSpec g = runtime::measured_gpu(base, r, host, name, &fits);
    nlohmann::json gj = to_json(g);
    gj["kind"] = "gpu";
    nlohmann::json cj;
    if (cluster != nullptr) {
      cj = to_json(runtime::measured_cluster(*cluster, r, name + "-cluster", name));
      cj["kind"] = "cluster";
    }
    write_profile_pair(o->out, gj, o->cluster_out, cj);
    print_calibration(r, g, fits, *o, report_stream(outputs));
    return kOk;
  };
}

const RegisterCommand reg{{"calibrate", "Measure GEMM, memory and collective speeds; write a measured profile", 70, setup}};

}  // namespace
}  // namespace parplan::cli
