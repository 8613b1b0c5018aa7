// GEMM, bandwidth and collective sweeps timed with backend events; fitting profile fields from them.
#include "runtime/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>
#include <set>
#include <tuple>

#include "planner/cost/collectives.hpp"
#include "planner/spec/error.hpp"
#include "planner/validation/fit.hpp"
#include "planner/cost/gemm.hpp"
#include "runtime/collective_bytes.hpp"
#include "runtime/fill_pattern.hpp"

namespace parplan::runtime {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Times `fn` (`warmups` untimed launches, then `iterations` timed ones) on `stream`; the median in seconds.
template <typename F>
double time_median(Device& dev, Stream stream, int iterations, F&& fn, int warmups = 1) {
  for (int i = 0; i < warmups; ++i) fn();
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

// Appends `c` unless the same shape and layout is already listed.
void add_unique(std::vector<GemmCase>& v, const GemmCase& c) {
  for (const GemmCase& x : v) {
    if (x.m == c.m && x.n == c.n && x.k == c.k && x.b_transposed == c.b_transposed) return;
  }
  v.push_back(c);
}

}  // namespace

std::vector<GemmCase> layer_gemm_cases(int64_t tokens, int64_t hidden, int64_t ffn, int64_t tp) {
  if (tokens <= 0 || hidden <= 0 || ffn <= 0 || tp <= 0) throw InputError("layer_gemm_cases: sizes must be positive");
  const int64_t nk[4][2] = {{3 * hidden / tp, hidden}, {hidden, hidden / tp}, {ffn / tp, hidden}, {hidden, ffn / tp}};
  std::vector<GemmCase> out;
  for (const auto& [n, k] : nk) {
    if (n <= 0 || k <= 0) continue;
    add_unique(out, {tokens, n, k, true});    // forward: Y[T,n] = X[T,k] W^T
    add_unique(out, {tokens, k, n, false});   // input gradient: dX[T,k] = dY[T,n] W
    add_unique(out, {n, k, tokens, false});   // weight gradient: dW[n,k] = dY^T X
  }
  return out;
}

CalibrateOptions default_calibrate_options(bool gpu) {
  CalibrateOptions o;
  if (gpu) {
    o.gemm_sizes = {1024, 2048, 4096, 8192};
    o.gemm_dtypes = {DType::bf16, DType::fp16, DType::fp8, DType::fp32};
    // Transformer layers at hidden 4096 / 8192 / 12288 (MLP 4x, 3.5x, 4x), tp 1 / 2 / 8, 2048..8192 tokens per
    // microbatch: 277 distinct shapes (forward, input and weight gradient), 0.38 PFLOP per dtype; on an H100 the
    // whole calibrate (squares, both dtypes' shapes at 12 launches each, copies) took 16 s.
    const int64_t layers[3][2] = {{4096, 16384}, {8192, 28672}, {12288, 49152}};
    for (int64_t tokens : {2048, 4096, 8192}) {
      for (const auto& [h, ffn] : layers) {
        for (int64_t tp : {1, 2, 8}) {
          for (const GemmCase& c : layer_gemm_cases(tokens, h, ffn, tp)) add_unique(o.gemm_shapes, c);
        }
      }
    }
    o.shape_dtypes = {DType::bf16, DType::fp16};
    o.gemm_warmups = 2;
    o.gemm_iterations = 10;
    o.hbm_bytes = int64_t{1} << 30;
    for (int64_t s = int64_t{1} << 20; s <= int64_t{256} << 20; s *= 4) o.collective_bytes.push_back(s);
  } else {
    o.gemm_sizes = {64, 128, 256};
    o.gemm_dtypes = {DType::fp32, DType::bf16};
    o.gemm_shapes = layer_gemm_cases(64, 64, 256, 2);  // 12 small shapes: the same code path as on a GPU
    o.shape_dtypes = {DType::bf16};
    o.gemm_warmups = 1;
    o.gemm_iterations = 3;
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
  if (opt.iterations < 1 || opt.gemm_iterations < 1) throw InputError("calibrate: iterations must be >= 1");
  if (opt.gemm_warmups < 0) throw InputError("calibrate: gemm_warmups must be >= 0");
  CalibrationResult out;
  out.ranks = world.size();
  world.run([&](Device& dev) {
    const bool lead = dev.rank() == 0;
    if (lead) out.device = dev.info().name;
    if (lead) {
      // The points: squares in every dtype, then the training-like shapes in the fit's dtypes.
      std::vector<GemmShape> shapes;
      for (DType d : opt.gemm_dtypes) {
        if (d == DType::fp8 && !dev.info().supports_fp8) continue;
        for (int64_t n : opt.gemm_sizes) shapes.push_back(GemmShape{n, n, n, 1, d, true, false});
      }
      for (DType d : opt.shape_dtypes) {
        if (d == DType::fp8 && !dev.info().supports_fp8) continue;
        for (const GemmCase& c : opt.gemm_shapes) shapes.push_back(GemmShape{c.m, c.n, c.k, 1, d, c.b_transposed, false});
      }
      // One buffer per operand, sized for the largest point and reused: operands hold the fill pattern (random
      // data: GEMMs on zeros run faster) and only C is written, so A and B stay random.
      int64_t a_max = 0, b_max = 0, c_max = 0;
      for (const GemmShape& s : shapes) {
        a_max = std::max(a_max, s.a_bytes());
        b_max = std::max(b_max, s.b_bytes());
        c_max = std::max(c_max, s.c_bytes());
      }
      if (!shapes.empty()) {
        Buffer a = dev.allocate(a_max), b = dev.allocate(b_max), c = dev.allocate(c_max);
        for (const GemmShape& shape : shapes) {
          const GemmShape s = fill_scaled(shape);  // alpha scaled as the executor's GEMMs
          const Buffer av{a.ptr, s.a_bytes()}, bv{b.ptr, s.b_bytes()}, cv{c.ptr, s.c_bytes()};
          const double t = time_median(dev, Stream::compute, opt.gemm_iterations, [&] { dev.gemm(s, av, bv, cv); },
                                       opt.gemm_warmups);
          out.gemm.push_back(
              {s.dtype, s.m, s.n, s.k, t, t > 0 ? static_cast<double>(s.flops()) / t : 0.0, s.b_transposed});
        }
        for (Buffer x : {a, b, c}) dev.free(x);
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

GemmFit fit_gemm_peak_fraction(const std::vector<GemmPoint>& points, const GpuSpec& gpu, DType d, double lo,
                               double hi) {
  if (!(lo > 0) || !(hi >= lo)) throw InputError("fit_gemm_peak_fraction: bounds must satisfy 0 < lo <= hi");
  GemmFit fit;
  fit.dtype = d;
  fit.peak_fraction = gpu.gemm.peak_fraction;
  std::vector<const GemmPoint*> used;
  for (const GemmPoint& p : points) {
    if (p.dtype == d && p.seconds > 0 && std::isfinite(p.seconds) && p.m > 0 && p.n > 0 && p.k > 0) used.push_back(&p);
  }
  fit.points = static_cast<int>(used.size());
  if (used.empty() || !(gpu.peak(d) > 0)) return fit;
  for (const GemmPoint* p : used) fit.best_fraction = std::max(fit.best_fraction, p->flops_per_s / gpu.peak(d));

  GpuSpec g = gpu;
  g.gemm.fp8_efficiency = 1.0;  // the fitted fraction is d's own, fp8 included
  auto objective = [&](double x) {
    g.gemm.peak_fraction = x;
    double sum = 0;
    for (const GemmPoint* p : used) {
      const double r = std::log(gemm_time_s(g, d, p->m, p->n, p->k) / p->seconds);
      sum += r * r;
    }
    return sum / static_cast<double>(used.size());
  };
  // Grid scan (the objective need not be unimodal over the whole range: memory-bound points are flat in x), then
  // golden-section search inside the best grid cell's neighbours.
  const int steps = std::max(1, static_cast<int>(std::ceil((hi - lo) / 0.005)));
  const double h = (hi - lo) / steps;
  double best_x = lo, best_f = objective(lo), worst_f = best_f;
  for (int i = 1; i <= steps; ++i) {
    const double x = lo + h * i, f = objective(x);
    worst_f = std::max(worst_f, f);
    if (f < best_f) best_x = x, best_f = f;
  }
  if (worst_f > best_f) {  // flat: no point depends on the fraction (all memory- or overhead-bound); keep gpu's
    const GoldenMin m = golden_section_min(objective, std::max(lo, best_x - h), std::min(hi, best_x + h), 60, 1e-9);
    fit.peak_fraction = m.f < best_f ? m.x : best_x;
  }
  g.gemm.peak_fraction = fit.peak_fraction;
  double sum = 0;
  for (const GemmPoint* p : used) {
    const double e = gemm_time_s(g, d, p->m, p->n, p->k) / p->seconds - 1.0;
    fit.errors.push_back(e);
    sum += std::fabs(e);
    fit.max_abs_error = std::max(fit.max_abs_error, std::fabs(e));
  }
  fit.mean_abs_error = sum / static_cast<double>(used.size());
  return fit;
}

std::vector<GemmFit> fit_gemm_peak_fractions(const std::vector<GemmPoint>& points, const GpuSpec& gpu) {
  std::vector<GemmFit> fits;
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType d = static_cast<DType>(i);
    if (!(gpu.peak(d) > 0)) continue;
    GemmFit f = fit_gemm_peak_fraction(points, gpu, d);
    if (f.points > 0) fits.push_back(std::move(f));
  }
  return fits;
}

const GemmFit* profile_gemm_fit(const std::vector<GemmFit>& fits) {
  for (DType d : {DType::bf16, DType::fp16}) {
    for (const GemmFit& f : fits) {
      if (f.dtype == d && f.points > 0) return &f;
    }
  }
  return nullptr;
}

GpuSpec measured_gpu(const GpuSpec& base, const CalibrationResult& r, bool host, const std::string& name,
                     std::vector<GemmFit>* fits_out) {
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
    // The host GEMM is a loop over the whole output, not a grid of tiles over streaming multiprocessors: the base
    // GPU's tile and wave shape would charge every small CPU GEMM for a whole GPU wave (a 4-layer test model
    // predicted 15.3 s against 1.5 s measured). One "SM" with 1 x 1 tiles makes the wave efficiency 1, and a call
    // costs no launch overhead beyond its measured rate. The GPU's fixed costs per wave of a grouped (MoE expert) GEMM
    // and per attention tile go too: with 1 x 1 tiles every output element would be a wave (a tiny MoE plan predicted
    // 1.81 s against 25 ms measured).
    g.gemm.sm_count = 1;
    g.gemm.tile_m = 1;
    g.gemm.tile_n = 1;
    g.gemm.kernel_overhead_s = 0.0;
    g.gemm.grouped_tile_overhead_s = 0.0;
    g.gemm.attention_tile_overhead = 0.0;
    g.hbm_bandwidth_Bps = r.hbm_bandwidth_Bps;
    g.hbm_efficiency = 1.0;
  } else {
    if (r.hbm_bandwidth_Bps > 0 && base.hbm_bandwidth_Bps > 0) {
      g.hbm_efficiency = std::min(1.0, r.hbm_bandwidth_Bps / base.hbm_bandwidth_Bps);
    }
    // Fitted under the measured hbm_efficiency: the model's roofline is part of what the fraction must reproduce.
    const std::vector<GemmFit> fits = fit_gemm_peak_fractions(r.gemm, g);
    std::string fitted = "fractions fitted";
    if (const GemmFit* f = profile_gemm_fit(fits)) {
      g.gemm.peak_fraction = f->peak_fraction;
      fitted = fmt::format("gemm.peak_fraction {:.3f} fitted to the {} {} GEMMs of the sweep (mean |error| {:.1f}%, best "
                           "measured {:.3f} of peak)",
                           f->peak_fraction, f->points, to_string(f->dtype), 100 * f->mean_abs_error, f->best_fraction);
    }
    g.source = fmt::format("parplan calibrate on {} ({} rank(s)); peaks from {}, {}", r.device, r.ranks, base.name, fitted);
    if (fits_out) *fits_out = fits;
    return g;
  }
  g.source = fmt::format("parplan calibrate on {} ({} rank(s)); host backend: measured CPU rates as peaks", r.device, r.ranks);
  return g;
}

ClusterSpec measured_cluster(const ClusterSpec& base, const CalibrationResult& r, const std::string& name,
                             const std::string& gpu_name) {
  ClusterSpec c = base;
  c.name = name;
  c.gpu = gpu_name;
  // The link's efficiency and latency describe the ring, which NCCL runs for the all-gather; its all-reduce may take
  // NVLink SHARP instead (480 against 370 GB/s busbw on 8 H100), so the ring is fitted to the all-gather sweep where
  // there is one, and the all-reduce then fits nvls_efficiency (collectives.hpp) when it beat the ring.
  auto sweep = [&](CollectiveKind kind) {
    std::pair<const CollectivePoint*, const CollectivePoint*> ends{nullptr, nullptr};
    for (const CollectivePoint& p : r.collectives) {
      if (p.kind != kind || p.ranks < 2 || p.seconds <= 0) continue;
      if (!ends.first || p.bytes < ends.first->bytes) ends.first = &p;
      if (!ends.second || p.bytes > ends.second->bytes) ends.second = &p;
    }
    return ends;
  };
  const auto [ar_small, ar_large] = sweep(CollectiveKind::all_reduce);
  if (!ar_large) throw BackendError("calibrate: a cluster profile needs the all-reduce sweep over at least 2 ranks");
  const auto [ag_small, ag_large] = sweep(CollectiveKind::all_gather);
  const bool ring_from_gather = ag_large != nullptr;
  const CollectivePoint* small = ring_from_gather ? ag_small : ar_small;
  const CollectivePoint* large = ring_from_gather ? ag_large : ar_large;
  const Collective ring_kind = ring_from_gather ? Collective::all_gather : Collective::all_reduce;
  if (c.intra_node.bandwidth_Bps > 0) c.intra_node.efficiency = std::min(1.0, large->busbw_Bps / c.intra_node.bandwidth_Bps);
  // The profile reader accepts efficiencies >= 0.01 (spec_json.cpp); a slow fabric (the host backend, a sanitizer
  // build) is written as its measured bandwidth at efficiency 1 instead: the same effective bandwidth, a readable file.
  if (c.intra_node.efficiency < 0.01) {
    c.intra_node.bandwidth_Bps = large->busbw_Bps;
    c.intra_node.efficiency = 1.0;
  }
  const int64_t steps = latency_steps(ring_kind, large->ranks);
  if (steps > 0) c.intra_node.latency_s = small->seconds / static_cast<double>(steps);
  // Fitted to an all-reduce alone, the ring already reproduces it: no NVLS on top.
  c.intra_node.nvls_efficiency = 0;
  std::string nvls;
  if (ring_from_gather) {
    // NVLS where the measured all-reduce beat the fitted ring by more than 2% (a fabric without it, or NCCL choosing the
    // ring, leaves none), its efficiency from the all-reduce's time (nvls_efficiency_for, collectives.hpp).
    // (c.intra_node has no NVLS yet, so collective_time_s gives the ring.)
    const double S = static_cast<double>(ar_large->bytes);
    const double ring_s = collective_time_s(Collective::all_reduce, S, ar_large->ranks, c.intra_node);
    const double fitted = nvls_efficiency_for(S, ar_large->ranks, c.intra_node, ar_large->seconds);
    if (ar_large->seconds < 0.98 * ring_s && fitted > 0) {
      c.intra_node.nvls_efficiency = std::clamp(fitted, 0.01, 1.0);
      nvls = fmt::format("; all-reduce busbw {:.1f} GB/s (NVLS, nvls_efficiency {:.3f})", ar_large->busbw_Bps / 1e9,
                         c.intra_node.nvls_efficiency);
    }
  }
  c.source = fmt::format("parplan calibrate on {} x {}: {} busbw {:.1f} GB/s at {} bytes{}", r.ranks, r.device,
                         ring_from_gather ? "all-gather" : "all-reduce", large->busbw_Bps / 1e9, large->bytes, nvls);
  return c;
}

}  // namespace parplan::runtime
