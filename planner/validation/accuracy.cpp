// Out-of-sample accuracy per plan family (see accuracy.hpp).
#include "planner/validation/accuracy.hpp"

#include <algorithm>
#include <map>

#include "planner/spec/json_reader.hpp"

namespace parplan {

std::string_view embedded_accuracy_json();  // generated from validation/accuracy.json (cmake/EmbedProfiles.cmake)

std::string_view precision_family(Precision p) { return p == Precision::fp8 ? "fp8" : "16-bit"; }

std::vector<FamilyAccuracy> accuracy_table(const CrossValidation& cv) {
  std::map<std::pair<std::string, std::string>, std::pair<std::vector<double>, std::vector<std::string>>> by_family;
  for (const OutOfSampleRow& row : cv.rows) {
    auto& f = by_family[{row.run->gpu_type, std::string(precision_family(row.run->plan->training.precision))}];
    f.first.push_back(row.error);
    f.second.push_back(row.run->id);
  }
  std::vector<FamilyAccuracy> table;
  for (const auto& [key, errors] : by_family) {
    const ErrorSummary s = summarize(errors.first, errors.second);
    std::vector<double> ratios;  // measured / predicted = 1 / (1 + (predicted - measured) / measured)
    for (double e : errors.first) ratios.push_back(1.0 / (1.0 + e));
    std::sort(ratios.begin(), ratios.end());
    table.push_back({key.first, key.second, s.count, s.mean_abs, s.median_abs, s.worst_abs,
                     quantile_sorted(ratios, 0.1), quantile_sorted(ratios, 0.5), quantile_sorted(ratios, 0.9)});
  }
  return table;
}

nlohmann::json ratios_json(const FamilyAccuracy& f, double scale) {
  return {{"p10", scale * f.ratio_p10}, {"median", scale * f.ratio_median}, {"p90", scale * f.ratio_p90}};
}

nlohmann::json accuracy_to_json(const std::vector<FamilyAccuracy>& table, std::string_view command) {
  nlohmann::json families = nlohmann::json::array();
  for (const FamilyAccuracy& f : table) {
    families.push_back({{"gpu", f.gpu},
                        {"precision", f.precision},
                        {"runs", f.runs},
                        {"mean_abs_error", f.mean_abs},
                        {"median_abs_error", f.median_abs},
                        {"worst_abs_error", f.worst_abs},
                        {"measured_over_predicted", ratios_json(f)}});
  }
  return {{"parplan_accuracy", 1}, {"command", std::string(command)}, {"families", families}};
}

std::vector<FamilyAccuracy> accuracy_from_json(std::string_view text, const std::string& where) {
  const nlohmann::json j = parse_json_text(text, where);
  JsonReader r(j, where, "");
  if (r.get_int("parplan_accuracy", 1, 1) != 1) r.fail("parplan_accuracy", "expected 1");
  r.get_string("command");
  std::vector<FamilyAccuracy> table;
  const nlohmann::json& families = r.raw("families");
  if (!families.is_array()) r.fail("families", "expected an array");
  for (size_t i = 0; i < families.size(); ++i) {
    JsonReader f(families[i], where, "/families/" + std::to_string(i));
    FamilyAccuracy a;
    a.gpu = f.get_string("gpu");
    a.precision = f.get_string("precision");
    a.runs = f.get_int("runs", 1, 1'000'000);
    a.mean_abs = f.get_double("mean_abs_error", 0, 1e6);
    a.median_abs = f.get_double("median_abs_error", 0, 1e6);
    a.worst_abs = f.get_double("worst_abs_error", 0, 1e6);
    JsonReader ratio = f.object("measured_over_predicted");
    a.ratio_p10 = ratio.get_double("p10", 1e-6, 1e6);
    a.ratio_median = ratio.get_double("median", 1e-6, 1e6);
    a.ratio_p90 = ratio.get_double("p90", 1e-6, 1e6);
    ratio.finish();
    if (!(a.ratio_p10 <= a.ratio_median && a.ratio_median <= a.ratio_p90)) {
      f.fail("measured_over_predicted", "expected p10 <= median <= p90");
    }
    f.finish();
    table.push_back(std::move(a));
  }
  r.finish();
  return table;
}

std::optional<FamilyAccuracy> shipped_accuracy(std::string_view gpu, Precision p) {
  static const std::vector<FamilyAccuracy> table =
      accuracy_from_json(embedded_accuracy_json(), "validation/accuracy.json (compiled in)");
  const std::string_view family = precision_family(p);
  for (const FamilyAccuracy& f : table) {
    if (f.gpu == gpu && f.precision == family) return f;
  }
  return std::nullopt;
}

}  // namespace parplan
