// Terminal rendering of a Timeline for small cases: one line per stage, one character per time slice.
#pragma once
#include <string>

#include "simulator/timeline.hpp"

namespace parplan::sim {

// `width` characters of timeline per stage (>= 10). Forward: microbatch digit (mod 10); backward: letter a..z
// (microbatch mod 26); W: weight gradient; r: recompute; ~: exposed comm; >: blocking send; O: optimizer;
// '.': idle. A legend line follows.
std::string render_ascii(const Timeline& t, int width = 100);

}  // namespace parplan::sim
