// `parplan calibrate --from-runs FILE`: fit a GPU / cluster profile's efficiency fields to measured runs.
// Registered as a calibrate hook (cli/calibrate.cpp's calibrate_hooks()); no edit of calibrate.cpp is needed.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/io.hpp"

namespace parplan::cli {

struct CalibrateFromRunsOptions {
  std::vector<std::string> runs;     // --from-runs FILE... (a run id once over all of them)
  std::string unstated = "strict";   // --unstated strict | search
  std::string gpu;                   // --gpu (empty: the only GPU type in the runs)
  std::string cluster;               // --cluster (empty, or the runs' cluster: the one fitted and written)
  std::string out, cluster_out;      // --out, --cluster-out
  std::string name;                  // --name (default: the base profile's name, so --profile FILE overrides it)
  std::vector<std::string> fields;   // --fit-fields (default: every field of default_fit_fields())
  std::vector<std::string> profiles; // --profile FILE (repeatable)
  bool json = false;
};

// Runs the fit and writes the profile(s); returns the exit code. Throws InputError on bad input.
int calibrate_from_runs(const CalibrateFromRunsOptions& o);

// calibrate's outputs (both modes), checked before anything is measured or fitted: --out is required, both paths
// can be written, and no two of --out, --cluster-out and --json's document name one destination. Returns them.
std::vector<OutputFlag> check_calibrate_outputs(const std::string& out, const std::string& cluster_out, bool json);

// Writes the GPU profile to `out` and, when `cluster_out` is given, the cluster profile: both or neither.
void write_profile_pair(const std::string& out, const nlohmann::json& gpu, const std::string& cluster_out,
                        const nlohmann::json& cluster);

}  // namespace parplan::cli
