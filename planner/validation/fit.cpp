// Profile fitting to measured runs (method in fit.hpp and docs/accuracy.md).
#include "planner/validation/fit.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>

#include "planner/cost/cost_model.hpp"
#include "planner/spec/error.hpp"

namespace parplan {

std::vector<FitField> default_fit_fields() {
  // GPU compute fields only: link efficiencies come from nccl-tests bus bandwidths (hardware-reference.json) and are
  // fitted only when asked (--fit-fields), since a few runs cannot separate them from the compute fields.
  return {{"gemm.peak_fraction", 0.3, 0.95}, {"gemm.attention_fraction", 0.1, 0.9}, {"hbm_efficiency", 0.3, 1.0},
          {"gemm.kernel_overhead_us", 1.0, 20.0}};
}

FitField fit_field(const std::string& name, const std::string& flag) {
  for (const FitField& f : default_fit_fields()) {
    if (f.name == name) return f;
  }
  if (name == "intra_node.efficiency" || name == "inter_node.efficiency") return {name, 0.3, 1.0};
  if (name == "inter_node.latency_us") return {name, 0.0, 100.0};
  throw InputError(fmt::format("{}: unknown field '{}' (known: gemm.peak_fraction, gemm.attention_fraction, "
                               "hbm_efficiency, gemm.kernel_overhead_us, intra_node.efficiency, inter_node.efficiency, "
                               "inter_node.latency_us)",
                               flag, name));
}

double get_field(const GpuSpec& g, const ClusterSpec& c, const std::string& name) {
  if (name == "gemm.peak_fraction") return g.gemm.peak_fraction;
  if (name == "gemm.attention_fraction") return g.gemm.attention_fraction;
  if (name == "gemm.kernel_overhead_us") return g.gemm.kernel_overhead_s * 1e6;
  if (name == "hbm_efficiency") return g.hbm_efficiency;
  if (name == "intra_node.efficiency") return c.intra_node.efficiency;
  if (name == "inter_node.efficiency") return c.inter_node.efficiency;
  if (name == "inter_node.latency_us") return c.inter_node.latency_s * 1e6;
  throw InputError(fmt::format("fit: unknown field '{}'", name));
}

void set_field(GpuSpec& g, ClusterSpec& c, const std::string& name, double value) {
  if (name == "gemm.peak_fraction") {
    g.gemm.peak_fraction = value;
  } else if (name == "gemm.attention_fraction") {
    g.gemm.attention_fraction = value;
  } else if (name == "gemm.kernel_overhead_us") {
    g.gemm.kernel_overhead_s = value * 1e-6;
  } else if (name == "hbm_efficiency") {
    g.hbm_efficiency = value;
  } else if (name == "intra_node.efficiency") {
    c.intra_node.efficiency = value;
  } else if (name == "inter_node.efficiency") {
    c.inter_node.efficiency = value;
  } else if (name == "inter_node.latency_us") {
    c.inter_node.latency_s = value * 1e-6;
  } else {
    throw InputError(fmt::format("fit: unknown field '{}'", name));
  }
}

std::vector<double> run_errors(const std::vector<const MappedRun*>& runs, const GpuSpec& gpu, const ClusterSpec& cluster,
                               const std::vector<FitField>& fields) {
  std::vector<double> errors;
  errors.reserve(runs.size());
  for (const MappedRun* r : runs) {
    Plan plan = *r->plan;
    // Only the fitted fields change: a row keeps its own link bandwidths (e.g. stated in its link text).
    for (const FitField& f : fields) set_field(plan.gpu, plan.cluster, f.name, get_field(gpu, cluster, f.name));
    const double t = estimate(plan).time.step_s;
    errors.push_back((t - *r->measured_step_time_s) / *r->measured_step_time_s);
  }
  return errors;
}

namespace {

std::vector<std::string> ids_of(const std::vector<const MappedRun*>& runs) {
  std::vector<std::string> ids;
  for (const MappedRun* r : runs) ids.push_back(r->id);
  return ids;
}

double objective(const std::vector<double>& errors, double worst_weight) {
  double sum = 0, worst = 0;
  for (double e : errors) {
    sum += std::fabs(e);
    worst = std::max(worst, std::fabs(e));
  }
  return errors.empty() ? 0.0 : sum / static_cast<double>(errors.size()) + worst_weight * worst;
}

// Coordinate descent: each field in turn minimised by golden-section search over its bounds, the others held.
void descend(const std::vector<const MappedRun*>& rows, GpuSpec& g, ClusterSpec& c, const FitOptions& opt) {
  auto f = [&](const std::string& name, double x) {
    GpuSpec gg = g;
    ClusterSpec cc = c;
    set_field(gg, cc, name, x);
    return objective(run_errors(rows, gg, cc, opt.fields), opt.worst_weight);
  };
  for (int sweep = 0; sweep < opt.sweeps; ++sweep) {
    for (const FitField& field : opt.fields) {
      const double best =
          golden_section_min([&](double x) { return f(field.name, x); }, field.lo, field.hi, opt.golden_steps).x;
      // Keep the current value unless the search found a strictly better one (the objective is not unimodal).
      const double current = get_field(g, c, field.name);
      if (f(field.name, best) < f(field.name, current)) set_field(g, c, field.name, best);
    }
  }
}

}  // namespace

void fit_fields(const std::vector<const MappedRun*>& rows, GpuSpec& gpu, ClusterSpec& cluster, const FitOptions& opt) {
  descend(rows, gpu, cluster, opt);
}

GoldenMin golden_section_min(const std::function<double(double)>& f, double lo, double hi, int steps, double tol) {
  const double phi = (std::sqrt(5.0) - 1.0) / 2.0;
  double a = lo, b = hi;
  double x1 = b - phi * (b - a), x2 = a + phi * (b - a);
  double f1 = f(x1), f2 = f(x2);
  for (int i = 0; i < steps && b - a > tol; ++i) {
    if (f1 <= f2) {
      b = x2;
      x2 = x1;
      f2 = f1;
      x1 = b - phi * (b - a);
      f1 = f(x1);
    } else {
      a = x1;
      x1 = x2;
      f1 = f2;
      x2 = a + phi * (b - a);
      f2 = f(x2);
    }
  }
  return f1 <= f2 ? GoldenMin{x1, f1} : GoldenMin{x2, f2};
}

FitResult fit_profiles(const std::vector<MappedRun>& runs, const GpuSpec& base, const FitOptions& opt) {
  const std::string& arch = base.architecture_or_name();
  std::vector<const MappedRun*> rows;
  for (const MappedRun& r : runs) {
    if (r.scored() && r.plan->gpu.architecture_or_name() == arch) rows.push_back(&r);
  }
  const std::string what = arch == base.name ? base.name : fmt::format("{} ({})", arch, base.name);
  if (rows.size() < 2) {
    throw InputError(fmt::format("--from-runs: {} scored run(s) on {}; fitting needs at least 2", rows.size(), what));
  }
  std::sort(rows.begin(), rows.end(), [](const MappedRun* a, const MappedRun* b) { return a->id < b->id; });
  FitResult res;
  res.gpu = base;
  const auto own = std::find_if(rows.begin(), rows.end(), [&](const MappedRun* r) { return r->gpu_type == base.name; });
  res.cluster = opt.cluster_profile.value_or((own != rows.end() ? *own : rows.front())->plan->cluster);
  const bool cluster_fields = std::any_of(opt.fields.begin(), opt.fields.end(), [](const FitField& f) {
    return f.name.starts_with("intra_node.") || f.name.starts_with("inter_node.");
  });
  for (const MappedRun* r : rows) {
    // Link fields are one cluster's; GPU fields carry over clusters (each row keeps its own links).
    if (cluster_fields && r->plan->cluster.name != res.cluster.name) {
      throw InputError(fmt::format("--from-runs: the {} runs map to clusters {} and {}; fit one cluster at a time",
                                   what, res.cluster.name, r->plan->cluster.name));
    }
  }
  for (const FitField& f : opt.fields) res.before.emplace_back(f.name, get_field(res.gpu, res.cluster, f.name));

  // Held-out check: fit on the even positions of the id-sorted rows, score the odd ones.
  std::vector<const MappedRun*> fit_rows, held;
  for (size_t i = 0; i < rows.size(); ++i) (i % 2 == 0 ? fit_rows : held).push_back(rows[i]);
  res.fit_ids = ids_of(fit_rows);
  res.heldout_ids = ids_of(held);
  res.heldout_before = summarize(run_errors(held, res.gpu, res.cluster, opt.fields), res.heldout_ids);
  GpuSpec hg = res.gpu;
  ClusterSpec hc = res.cluster;
  descend(fit_rows, hg, hc, opt);
  res.heldout_after = summarize(run_errors(held, hg, hc, opt.fields), res.heldout_ids);

  // The profile written: fitted on every row.
  const std::vector<std::string> all_ids = ids_of(rows);
  res.error_before = summarize(run_errors(rows, res.gpu, res.cluster, opt.fields), all_ids);
  descend(rows, res.gpu, res.cluster, opt);
  res.error_after = summarize(run_errors(rows, res.gpu, res.cluster, opt.fields), all_ids);
  for (const FitField& f : opt.fields) res.after.emplace_back(f.name, get_field(res.gpu, res.cluster, f.name));
  return res;
}

}  // namespace parplan
