// GEMM, bandwidth and collective sweeps timed with backend events; fitting profile fields from them.
#include "runtime/calibrate.hpp"

#include <algorithm>
#include <fmt/core.h>

#include "planner/collectives.hpp"
#include "planner/error.hpp"
#include "runtime/collective_bytes.hpp"
#include "runtime/fill_pattern.hpp"

namespace parplan::runtime {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Times `fn` (warm-up once, then opt.iterations times) on `stream`; the median in seconds.
template <typename F>
double time_median(Device& dev, Stream stream, int iterations, F&& fn) {
  fn();
  dev.synchronize();
  std::vector<double> t;
  for (int i = 0; i < iterations; ++i) {
    dev.reset_events();
    const Event a = dev.record(stream);
    fn();
    const Event b = dev.record(stream);
    dev.synchronize();
    t.push_back(dev.elapsed_s(a, b));
  }
  return median(t);
}

}  // namespace

CalibrateOptions default_calibrate_options(bool gpu) {
  CalibrateOptions o;
  if (gpu) {
    o.gemm_sizes = {1024, 2048, 4096, 8192};
    o.gemm_dtypes = {DType::bf16, DType::fp16, DType::fp8, DType::fp32};
    o.hbm_bytes = int64_t{1} << 30;
    for (int64_t s = int64_t{1} << 20; s <= int64_t{256} << 20; s *= 4) o.collective_bytes.push_back(s);
  } else {
    o.gemm_sizes = {64, 128, 256};
    o.gemm_dtypes = {DType::fp32, DType::bf16};
    o.hbm_bytes = int64_t{64} << 20;
    for (int64_t s = int64_t{64} << 10; s <= int64_t{4} << 20; s *= 4) o.collective_bytes.push_back(s);
    o.iterations = 3;
  }
  return o;
}

double CalibrationResult::best_flops(DType d) const {
  double best = 0;
  for (const GemmPoint& p : gemm) {
    if (p.dtype == d) best = std::max(best, p.flops_per_s);
  }
  return best;
}

CalibrationResult calibrate(World& world, const CalibrateOptions& opt) {
  if (opt.iterations < 1) throw InputError("calibrate: iterations must be >= 1");
  CalibrationResult out;
  out.ranks = world.size();
  world.run([&](Device& dev) {
    const bool lead = dev.rank() == 0;
    if (lead) out.device = dev.info().name;
    if (lead) {
      for (DType d : opt.gemm_dtypes) {
        if (d == DType::fp8 && !dev.info().supports_fp8) continue;
        for (int64_t n : opt.gemm_sizes) {
          // Operands hold the fill pattern (random data: GEMMs on zeros run faster), scaled as the executor's.
          const GemmShape s = fill_scaled(GemmShape{n, n, n, 1, d, true, false});
          Buffer a = dev.allocate(s.a_bytes()), b = dev.allocate(s.b_bytes()), c = dev.allocate(s.c_bytes());
          const double t = time_median(dev, Stream::compute, opt.iterations, [&] { dev.gemm(s, a, b, c); });
          out.gemm.push_back({d, n, n, n, t, t > 0 ? static_cast<double>(s.flops()) / t : 0.0});
          for (Buffer x : {a, b, c}) dev.free(x);
        }
      }
      Buffer buf = dev.allocate(opt.hbm_bytes);
      const int64_t half = opt.hbm_bytes / 2;
      const double t = time_median(dev, Stream::compute, opt.iterations, [&] {
        dev.memory_op(Buffer{buf.ptr, half}, Buffer{static_cast<unsigned char*>(buf.ptr) + half, half}, half);
      });
      out.hbm_bandwidth_Bps = t > 0 ? 2.0 * static_cast<double>(half) / t : 0.0;
      dev.free(buf);
    }
    const int n = dev.world_size();
    if (n < 2) return;
    auto comm = dev.split(0, dev.rank());
    for (int64_t S : opt.collective_bytes) {
      const int64_t count = S / 4 / n * n;  // fp32 elements, divisible by the group
      const int64_t bytes = count * 4;
      Buffer buf = dev.allocate(bytes);
      const int64_t per = count / n;
      auto point = [&](CollectiveKind kind, double t) {
        if (!lead) return;
        const double algbw = t > 0 ? static_cast<double>(bytes) / t : 0.0;
        out.collectives.push_back({kind, n, bytes, t, algbw, algbw * bus_bandwidth_factor(kind, n)});
      };
      point(CollectiveKind::all_reduce,
            time_median(dev, Stream::comm, opt.iterations, [&] { comm->all_reduce(buf, buf, count, DType::fp32); }));
      Buffer mine{static_cast<unsigned char*>(buf.ptr) + dev.rank() * per * 4, per * 4};
      point(CollectiveKind::all_gather,
            time_median(dev, Stream::comm, opt.iterations, [&] { comm->all_gather(mine, buf, per, DType::fp32); }));
      point(CollectiveKind::reduce_scatter,
            time_median(dev, Stream::comm, opt.iterations, [&] { comm->reduce_scatter(buf, mine, per, DType::fp32); }));
      // Send/recv between ranks 0 and 1; the others take part in a barrier only.
      const double t = time_median(dev, Stream::comm, opt.iterations, [&] {
        if (dev.rank() < 2) {
          P2POp op{dev.rank() == 0, 1 - dev.rank(), buf, count, DType::fp32};
          comm->p2p(std::span(&op, 1));
        }
      });
      point(CollectiveKind::send, t);
      comm->barrier();
      dev.free(buf);
    }
  });
  return out;
}

GpuSpec measured_gpu(const GpuSpec& base, const CalibrationResult& r, bool host, const std::string& name) {
  GpuSpec g = base;
  g.name = name;
  if (host) {
    for (int i = 0; i < kNumDTypes; ++i) {
      const double f = r.best_flops(static_cast<DType>(i));
      g.peak_flops[static_cast<size_t>(i)] = f;
    }
    if (g.peak(DType::tf32) == 0) g.peak_flops[static_cast<size_t>(DType::tf32)] = g.peak(DType::fp32);
    if (g.peak(DType::fp16) == 0) g.peak_flops[static_cast<size_t>(DType::fp16)] = g.peak(DType::bf16);
    if (g.peak(DType::fp8) == 0) g.peak_flops[static_cast<size_t>(DType::fp8)] = g.peak(DType::bf16);
    g.gemm.peak_fraction = 1.0;
    g.hbm_bandwidth_Bps = r.hbm_bandwidth_Bps;
    g.hbm_efficiency = 1.0;
  } else {
    const double bf16 = r.best_flops(DType::bf16);
    if (bf16 > 0 && base.peak(DType::bf16) > 0) g.gemm.peak_fraction = std::min(1.0, bf16 / base.peak(DType::bf16));
    if (r.hbm_bandwidth_Bps > 0 && base.hbm_bandwidth_Bps > 0) {
      g.hbm_efficiency = std::min(1.0, r.hbm_bandwidth_Bps / base.hbm_bandwidth_Bps);
    }
  }
  g.source = fmt::format("parplan calibrate on {} ({} rank(s)); {}", r.device, r.ranks,
                         host ? "host backend: measured CPU rates as peaks" : "peaks from " + base.name + ", fractions fitted");
  return g;
}

ClusterSpec measured_cluster(const ClusterSpec& base, const CalibrationResult& r, const std::string& name,
                             const std::string& gpu_name) {
  ClusterSpec c = base;
  c.name = name;
  c.gpu = gpu_name;
  const CollectivePoint* small = nullptr;
  const CollectivePoint* large = nullptr;
  for (const CollectivePoint& p : r.collectives) {
    if (p.kind != CollectiveKind::all_reduce) continue;
    if (!small || p.bytes < small->bytes) small = &p;
    if (!large || p.bytes > large->bytes) large = &p;
  }
  if (!large) throw BackendError("calibrate: a cluster profile needs the all-reduce sweep over at least 2 ranks");
  if (c.intra_node.bandwidth_Bps > 0) c.intra_node.efficiency = std::min(1.0, large->busbw_Bps / c.intra_node.bandwidth_Bps);
  // The profile reader accepts efficiencies >= 0.01 (spec_json.cpp); a slow fabric (the host backend, a sanitizer
  // build) is written as its measured bandwidth at efficiency 1 instead: the same effective bandwidth, a readable file.
  if (c.intra_node.efficiency < 0.01) {
    c.intra_node.bandwidth_Bps = large->busbw_Bps;
    c.intra_node.efficiency = 1.0;
  }
  const int64_t steps = latency_steps(Collective::all_reduce, large->ranks);
  if (steps > 0) c.intra_node.latency_s = small->seconds / static_cast<double>(steps);
  c.source = fmt::format("parplan calibrate on {} x {}: all-reduce busbw {:.1f} GB/s at {} bytes", r.ranks, r.device,
                         large->busbw_Bps / 1e9, large->bytes);
  return c;
}

}  // namespace parplan::runtime
