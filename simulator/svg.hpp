// SVG picture of a Timeline: stages down, time across; forward and backward coloured by microbatch (forward light,
// backward dark), communication hatched, with a time axis and a legend. A step of many microbatches is drawn as its
// fill, a few steady cycles, an elision mark saying how many microbatches it hides, and the drain.
#pragma once
#include <string>

#include "simulator/simulate.hpp"
#include "simulator/timeline.hpp"

namespace parplan::sim {

struct SvgOptions {
  const SimSummary* summary = nullptr;  // given: the bubble and communication fractions are printed under the legend
  bool elide = true;                    // false: every microbatch drawn, however many
};

// More microbatches than this and the steady state is elided (when it holds at least kSvgMinElided microbatches).
inline constexpr int kSvgElideAbove = 32;
inline constexpr int kSvgMinElided = 8;

std::string render_svg(const Timeline& t, const std::string& title, const SvgOptions& options = {});

// "step fractions (stage 1, the busiest): bubble 5.1%, TP comm 2.0%, ...": the fractions the picture prints.
std::string svg_fractions_line(const SimSummary& s);

}  // namespace parplan::sim
