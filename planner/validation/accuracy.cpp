// Out-of-sample accuracy per plan family (see accuracy.hpp).
#include "planner/validation/accuracy.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "planner/spec/json_reader.hpp"

namespace parplan {

std::string_view embedded_accuracy_json();  // generated from validation/accuracy.json (cmake/EmbedProfiles.cmake)

std::string_view precision_family(Precision p) { return p == Precision::fp8 ? "fp8" : "16-bit"; }

namespace {
struct Errors {
  std::vector<double> errors;
  std::vector<std::string> ids;
  std::set<std::string> gpus;
};

FamilyAccuracy family_of(const Errors& e) {
  const ErrorSummary s = summarize(e.errors, e.ids);
  std::vector<double> ratios;  // measured / predicted = 1 / (1 + (predicted - measured) / measured)
  for (double x : e.errors) ratios.push_back(1.0 / (1.0 + x));
  std::sort(ratios.begin(), ratios.end());
  FamilyAccuracy f;
  f.runs = s.count;
  f.mean_abs = s.mean_abs;
  f.median_abs = s.median_abs;
  f.worst_abs = s.worst_abs;
  f.ratio_p10 = quantile_sorted(ratios, 0.1);
  f.ratio_median = quantile_sorted(ratios, 0.5);
  f.ratio_p90 = quantile_sorted(ratios, 0.9);
  return f;
}
}  // namespace

std::vector<FamilyAccuracy> accuracy_table(const CrossValidation& cv) {
  std::map<std::pair<std::string, std::string>, Errors> by_gpu, by_arch;  // (gpu or architecture, precision)
  std::map<std::string, std::string> arch_of;  // gpu -> its architecture ("" when none)
  for (const OutOfSampleRow& row : cv.rows) {
    const std::string precision(precision_family(row.run->plan->training.precision));
    const std::string& arch = row.run->plan->gpu.architecture;
    arch_of[row.run->gpu_type] = arch;
    auto add = [&](Errors& e) {
      e.errors.push_back(row.error);
      e.ids.push_back(row.run->id);
      e.gpus.insert(row.run->gpu_type);
    };
    add(by_gpu[{row.run->gpu_type, precision}]);
    if (!arch.empty()) add(by_arch[{arch, precision}]);
  }
  std::vector<FamilyAccuracy> table;
  for (const auto& [key, e] : by_gpu) {
    FamilyAccuracy f = family_of(e);
    f.gpu = key.first;
    f.architecture = arch_of[key.first];
    f.precision = key.second;
    table.push_back(std::move(f));
  }
  for (const auto& [key, e] : by_arch) {
    FamilyAccuracy f = family_of(e);
    f.architecture = key.first;
    f.gpus.assign(e.gpus.begin(), e.gpus.end());
    f.precision = key.second;
    table.push_back(std::move(f));
  }
  return table;
}

nlohmann::json ratios_json(const FamilyAccuracy& f, double scale) {
  return {{"p10", scale * f.ratio_p10}, {"median", scale * f.ratio_median}, {"p90", scale * f.ratio_p90}};
}

nlohmann::json accuracy_to_json(const std::vector<FamilyAccuracy>& table, std::string_view command) {
  nlohmann::json families = nlohmann::json::array();
  for (const FamilyAccuracy& f : table) {
    nlohmann::json j = {{"precision", f.precision},
                        {"runs", f.runs},
                        {"mean_abs_error", f.mean_abs},
                        {"median_abs_error", f.median_abs},
                        {"worst_abs_error", f.worst_abs},
                        {"measured_over_predicted", ratios_json(f)}};
    if (!f.gpu.empty()) j["gpu"] = f.gpu;
    if (!f.architecture.empty()) j["architecture"] = f.architecture;
    if (f.gpu.empty()) j["gpus"] = f.gpus;
    families.push_back(std::move(j));
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
    if (f.has("gpu")) {
      a.gpu = f.get_string("gpu");
      if (f.has("architecture")) a.architecture = f.get_string("architecture");
    } else {  // an architecture's family
      a.architecture = f.get_string("architecture");
      const nlohmann::json& gpus = f.raw("gpus");
      if (!gpus.is_array() || gpus.empty()) f.fail("gpus", "expected a non-empty array of GPU profile names");
      for (const auto& g : gpus) {
        if (!g.is_string()) f.fail("gpus", "expected a non-empty array of GPU profile names");
        a.gpus.push_back(g.get<std::string>());
      }
    }
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

namespace {
const std::vector<FamilyAccuracy>& shipped_table() {
  static const std::vector<FamilyAccuracy> table =
      accuracy_from_json(embedded_accuracy_json(), "validation/accuracy.json (compiled in)");
  return table;
}

std::optional<FamilyAccuracy> find_family(std::string_view gpu, std::string_view architecture, std::string_view precision) {
  for (const FamilyAccuracy& f : shipped_table()) {
    const bool same = gpu.empty() ? f.gpu.empty() && f.architecture == architecture : f.gpu == gpu;
    if (same && f.precision == precision) return f;
  }
  return std::nullopt;
}
}  // namespace

std::optional<FamilyAccuracy> shipped_accuracy(std::string_view gpu, Precision p) {
  if (gpu.empty()) return std::nullopt;
  return find_family(gpu, "", precision_family(p));
}

std::optional<FamilyAccuracy> shipped_family(const FamilyAccuracy& like) {
  return find_family(like.gpu, like.architecture, like.precision);
}

std::optional<FamilyAccuracy> plan_accuracy(const GpuSpec& gpu, Precision p) {
  if (auto own = shipped_accuracy(gpu.name, p)) return own;
  if (gpu.architecture.empty()) return std::nullopt;
  return find_family("", gpu.architecture, precision_family(p));
}

}  // namespace parplan
