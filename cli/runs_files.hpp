// Published-runs files as validate and calibrate --from-runs read them: several files, mapped in order, a run id once
// over all of them; --unstated strict | search.
#pragma once
#include <string>
#include <vector>

#include "planner/spec/profiles.hpp"
#include "planner/validation/validation.hpp"

namespace parplan::cli {

// `flag` names the option in errors (a repeated id, an unreadable file).
std::vector<MappedRun> load_runs_files(const std::vector<std::string>& files, const ProfileSet& profiles,
                                       Unstated unstated, const std::string& flag);

// "strict" or "search"; anything else is an InputError naming --unstated.
Unstated parse_unstated(const std::string& text);

}  // namespace parplan::cli
