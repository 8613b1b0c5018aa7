// Published-run validation: predicting each mapped row with the cost model and summarising the errors.
#include <algorithm>
#include <cmath>
#include <map>

#include "planner/cost/cost_model.hpp"
#include "planner/validation/validation.hpp"

namespace parplan {

ErrorSummary summarize(const std::vector<double>& signed_errors, const std::vector<std::string>& ids) {
  ErrorSummary s;
  s.count = static_cast<int64_t>(signed_errors.size());
  if (s.count == 0) return s;
  std::vector<double> abs_errors;
  abs_errors.reserve(signed_errors.size());
  for (size_t i = 0; i < signed_errors.size(); ++i) {
    const double a = std::fabs(signed_errors[i]);
    abs_errors.push_back(a);
    s.mean_abs += a;
    s.mean_signed += signed_errors[i];
    if (a > s.worst_abs || s.worst_id.empty()) {
      s.worst_abs = a;
      s.worst_id = i < ids.size() ? ids[i] : "";
    }
  }
  s.mean_abs /= static_cast<double>(s.count);
  s.mean_signed /= static_cast<double>(s.count);
  std::sort(abs_errors.begin(), abs_errors.end());
  s.median_abs = quantile_sorted(abs_errors, 0.5);
  return s;
}

double quantile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double f = pos - static_cast<double>(lo);
  return (1.0 - f) * sorted[lo] + f * sorted[hi];  // f 0.5: exactly the mean of the two, as a median takes it
}

RatioSummary summarize_ratios(const std::vector<double>& ratios) {
  RatioSummary s;
  s.count = static_cast<int64_t>(ratios.size());
  if (s.count == 0) return s;
  s.min = *std::min_element(ratios.begin(), ratios.end());
  s.max = *std::max_element(ratios.begin(), ratios.end());
  for (double x : ratios) s.mean += x / static_cast<double>(s.count);
  return s;
}

ValidationReport score_runs(const std::vector<MappedRun>& runs) {
  ValidationReport rep;
  rep.rows.reserve(runs.size());
  std::vector<double> all;
  std::vector<std::string> all_ids;
  std::map<std::string, std::pair<std::vector<double>, std::vector<std::string>>> by_source, by_gpu;
  std::map<std::string, std::vector<double>> memory_ratios;
  for (const MappedRun& r : runs) {
    RunResult res;
    res.run = &r;
    if (r.plan) {
      const Estimate e = estimate(*r.plan);
      res.predicted_step_time_s = e.time.step_s;
      res.predicted_peak_memory_bytes = e.peak_memory_bytes;
      res.fits = e.fits;
      res.time = e.time;
    }
    if (r.scored()) {
      res.error = (res.predicted_step_time_s - *r.measured_step_time_s) / *r.measured_step_time_s;
      all.push_back(res.error);
      all_ids.push_back(r.id);
      auto& s = by_source[r.source_key];
      s.first.push_back(res.error);
      s.second.push_back(r.id);
      auto& g = by_gpu[r.gpu_type];
      g.first.push_back(res.error);
      g.second.push_back(r.id);
      if (r.measured_memory_bytes) memory_ratios[r.source_key].push_back(res.predicted_peak_memory_bytes / *r.measured_memory_bytes);
    } else {
      ++rep.skipped;
    }
    rep.rows.push_back(res);
  }
  rep.overall = summarize(all, all_ids);
  for (const auto& [k, v] : by_source) rep.by_source.emplace_back(k, summarize(v.first, v.second));
  for (const auto& [k, v] : by_gpu) rep.by_gpu.emplace_back(k, summarize(v.first, v.second));
  for (const auto& [k, v] : memory_ratios) rep.memory_by_source.emplace_back(k, summarize_ratios(v));
  return rep;
}

}  // namespace parplan
