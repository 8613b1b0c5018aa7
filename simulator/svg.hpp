// SVG picture of a Timeline: stages down, time across; forward and backward coloured by microbatch (forward light,
// backward dark), communication hatched, with a time axis and a legend.
#pragma once
#include <string>

#include "simulator/timeline.hpp"

namespace parplan::sim {

std::string render_svg(const Timeline& t, const std::string& title);

}  // namespace parplan::sim
