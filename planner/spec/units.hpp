// Parsing of human quantities at the input boundary: counts ("175e9", "175B", "1.3T", "350M") and byte sizes
// ("80GiB", "72GB", "512MiB", "512B"; a size without a unit is refused). Errors name the flag.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace parplan {

// The text with ASCII letters lower-cased (for matching free text and names without regard to case).
std::string ascii_lower(std::string_view s);

double parse_count(std::string_view text, std::string_view flag);
int64_t parse_bytes(std::string_view text, std::string_view flag);
// Durations: "12s", "850ms", "1.5" (seconds).
double parse_seconds(std::string_view text, std::string_view flag);

}  // namespace parplan
