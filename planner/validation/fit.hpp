// Fitting the named efficiency fields of a GPU profile (and its cluster's links) to measured runs: a deterministic
// bounded coordinate descent (golden-section search per field), with a held-out check (fit on half, score the rest).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "planner/spec/spec.hpp"
#include "planner/validation/validation.hpp"

namespace parplan {

// A fitted field (default: the GPU compute fields; link fields on request): "gemm.peak_fraction",
// "gemm.attention_fraction", "gemm.kernel_overhead_us", "hbm_efficiency", "intra_node.efficiency",
// "inter_node.efficiency", "inter_node.latency_us", with its search bounds.
struct FitField {
  std::string name;
  double lo = 0, hi = 1;
};
std::vector<FitField> default_fit_fields();
// Bounds of a known field name; throws InputError naming `flag` for an unknown one.
FitField fit_field(const std::string& name, const std::string& flag);

double get_field(const GpuSpec& g, const ClusterSpec& c, const std::string& name);
void set_field(GpuSpec& g, ClusterSpec& c, const std::string& name, double value);

struct FitOptions {
  std::vector<FitField> fields = default_fit_fields();
  int sweeps = 3;          // coordinate-descent passes over the fields
  int golden_steps = 30;   // golden-section iterations per field and pass
  double worst_weight = 0.25;  // objective = mean |error| + worst_weight * worst |error|
  // The cluster profile the fit starts from and returns, with only the fitted fields changed: the runs' cluster as
  // its profile gives it (a row's plan may carry a link bandwidth read from the row's hardware text). Unset: the
  // first row's cluster.
  std::optional<ClusterSpec> cluster_profile;
};

struct FitResult {
  GpuSpec gpu;          // the fitted GPU profile
  ClusterSpec cluster;  // the fitted cluster profile (links of the runs' cluster)
  std::vector<std::pair<std::string, double>> before, after;  // field values
  ErrorSummary error_before, error_after;    // on all rows of the GPU type
  ErrorSummary heldout_before, heldout_after;  // on the held-out half, before / after fitting on the other half
  std::vector<std::string> fit_ids, heldout_ids;  // the split (sorted ids; even positions fit, odd held out)
};

// Fits `fields` of the GPU profile `base` (and of the cluster profile its runs map to) to the scored rows of `runs`
// on every GPU of its architecture (GpuSpec::architecture; each row keeps its own peaks and links, only the fitted
// fields are shared). Link fields need the rows on one cluster. Throws InputError when fewer than 2 rows are scored.
FitResult fit_profiles(const std::vector<MappedRun>& runs, const GpuSpec& base, const FitOptions& opt = {});

// Fits `opt.fields` of `gpu` and `cluster` to `rows` (scored runs) by the coordinate descent above, in place.
void fit_fields(const std::vector<const MappedRun*>& rows, GpuSpec& gpu, ClusterSpec& cluster, const FitOptions& opt);

// Golden-section search for a minimum of `f` on [lo, hi]: `steps` narrowing steps at most, stopping early once the
// bracket is no wider than `tol`. Returns the better of the two final probes and its value.
struct GoldenMin {
  double x = 0, f = 0;
};
GoldenMin golden_section_min(const std::function<double(double)>& f, double lo, double hi, int steps, double tol = 0);

// Step-time errors of the scored rows of `gpu_name` with the GPU and cluster fields replaced.
std::vector<double> run_errors(const std::vector<const MappedRun*>& runs, const GpuSpec& gpu, const ClusterSpec& cluster,
                               const std::vector<FitField>& fields);

}  // namespace parplan
