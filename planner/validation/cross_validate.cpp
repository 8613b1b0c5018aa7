// Leave-one-source-out scoring (see cross_validate.hpp).
#include "planner/validation/cross_validate.hpp"

#include <fmt/core.h>
#include <map>
#include <set>

namespace parplan {
namespace {

// The left-out family's rows on one GPU type, scored with the fields of that GPU's architecture fitted on the other
// families' rows (every GPU type of the architecture, each row keeping its own peaks and links).
std::vector<double> score_left_out(const std::vector<const MappedRun*>& left_out, const std::vector<const MappedRun*>& others,
                                   const FitOptions& opt, int min_fit_rows, std::string& fit_note) {
  const MappedRun& first = *left_out.front();
  GpuSpec gpu = first.plan->gpu;
  ClusterSpec cluster = first.plan->cluster;
  const std::string& arch = gpu.architecture_or_name();
  const std::string label = arch == first.gpu_type ? first.gpu_type : fmt::format("{} ({})", first.gpu_type, arch);
  if (static_cast<int>(others.size()) >= min_fit_rows) {
    fit_fields(others, gpu, cluster, opt);  // from the shipped values; each row keeps its own link figures
    std::string values;
    for (const FitField& f : opt.fields) {
      values += fmt::format("{}{} {:.3f}", values.empty() ? "" : ", ", f.name, get_field(gpu, cluster, f.name));
    }
    fit_note = fmt::format("{}: fitted on {} rows of other sources: {}", label, others.size(), values);
  } else {
    fit_note = fmt::format("{}: shipped profile ({} row(s) of other sources, fitting needs {})", label, others.size(),
                           min_fit_rows);
  }
  return run_errors(left_out, gpu, cluster, opt.fields);
}

}  // namespace

CrossValidation cross_validate(const std::vector<MappedRun>& runs, const FitOptions& opt, int min_fit_rows) {
  CrossValidation cv;
  for (const FitField& f : opt.fields) cv.fields.push_back(f.name);
  std::map<std::string, std::map<std::string, std::vector<const MappedRun*>>> by_family_gpu;  // family -> gpu -> rows
  std::map<std::string, std::vector<const MappedRun*>> by_arch;  // architecture -> rows
  for (const MappedRun& r : runs) {
    if (!r.scored()) continue;
    by_family_gpu[r.source_key][r.gpu_type].push_back(&r);
    by_arch[r.plan->gpu.architecture_or_name()].push_back(&r);
  }
  std::vector<double> all, all_shipped;
  std::vector<std::string> all_ids;
  for (const auto& [family, gpus] : by_family_gpu) {
    FamilyScore fs;
    fs.family = family;
    std::vector<double> errs, shipped;
    std::vector<std::string> ids;
    for (const auto& [gpu, rows] : gpus) {
      std::vector<const MappedRun*> others;
      for (const MappedRun* r : by_arch[rows.front()->plan->gpu.architecture_or_name()]) {
        if (r->source_key != family) others.push_back(r);
      }
      std::string note;
      const std::vector<double> e = score_left_out(rows, others, opt, min_fit_rows, note);
      fs.fits.push_back(std::move(note));
      const std::vector<double> s = run_errors(rows, rows.front()->plan->gpu, rows.front()->plan->cluster, {});
      for (size_t i = 0; i < rows.size(); ++i) {
        cv.rows.push_back({rows[i], e[i]});
        errs.push_back(e[i]);
        shipped.push_back(s[i]);
        ids.push_back(rows[i]->id);
      }
    }
    fs.out_of_sample = summarize(errs, ids);
    fs.shipped = summarize(shipped, ids);
    all.insert(all.end(), errs.begin(), errs.end());
    all_shipped.insert(all_shipped.end(), shipped.begin(), shipped.end());
    all_ids.insert(all_ids.end(), ids.begin(), ids.end());
    cv.families.push_back(std::move(fs));
  }
  cv.overall = summarize(all, all_ids);
  cv.overall_shipped = summarize(all_shipped, all_ids);
  return cv;
}

}  // namespace parplan
