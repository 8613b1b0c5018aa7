// Substring test shared by the runs-file reader (validation.cpp) and its free-text mapping rules
// (validation_rules.cpp).
#pragma once
#include <string_view>

namespace parplan::validation_text {

inline bool has(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

}  // namespace parplan::validation_text
