// Chrome trace event JSON (chrome://tracing, Perfetto) of a Timeline: a process per stage, a thread per stream,
// flow arrows from each p2p send to its receiver, and the stored activations as a counter track.
// Deterministic: the same Timeline gives byte-identical text (fixed-precision numbers, fixed order).
#pragma once
#include <string>

#include "simulator/timeline.hpp"

namespace parplan::sim {

// Display name of an event, e.g. "F3" (forward of microbatch 3), "B3.1" (backward, chunk 1), "DP bucket".
std::string event_name(const TimelineEvent& e, bool with_chunk);

// Whether any event belongs to a chunk other than 0 (interleaved): names then carry the chunk ("F3.1").
bool has_chunks(const Timeline& t);

std::string chrome_trace_json(const Timeline& t);

}  // namespace parplan::sim
