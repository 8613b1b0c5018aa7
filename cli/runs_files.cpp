// Published-runs files read by validate and calibrate --from-runs (see runs_files.hpp).
#include "cli/runs_files.hpp"

#include <fmt/core.h>
#include <map>

#include "cli/io.hpp"
#include "planner/spec/error.hpp"

namespace parplan::cli {

std::vector<MappedRun> load_runs_files(const std::vector<std::string>& files, const ProfileSet& profiles,
                                       Unstated unstated, const std::string& flag) {
  std::vector<MappedRun> runs;
  std::map<std::string, std::string> seen;  // id -> file
  for (const std::string& file : files) {
    for (MappedRun& r : load_published_runs(read_file(file, flag), file, profiles, unstated)) {
      if (const auto [it, fresh] = seen.emplace(r.id, file); !fresh) {
        throw InputError(fmt::format("{}: run id '{}' is in {} and {}", flag, excerpt(r.id), it->second, file));
      }
      runs.push_back(std::move(r));
    }
  }
  return runs;
}

Unstated parse_unstated(const std::string& text) {
  if (text == "strict") return Unstated::strict;
  if (text == "search") return Unstated::search;
  throw InputError(fmt::format("--unstated: '{}' is not strict or search", excerpt(text)));
}

}  // namespace parplan::cli
