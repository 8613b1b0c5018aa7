// Text that parplan prints from its input (paths, names, values): one line, valid UTF-8, bounded.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace parplan::cli {

// The length of the well-formed UTF-8 character starting at s[i] (1 to 4), or 0 when the bytes there are not one
// (a stray continuation byte, a truncated or overlong sequence, a surrogate, past U+10FFFF).
size_t utf8_char_length(std::string_view s, size_t i);

// `s` for a line of text: control characters written as escapes (\n, \r, \t, \xNN, C1 controls as \u0085) and
// bytes that are not UTF-8 as \xNN, so that a name or path echoed from the input cannot end the line it is on,
// start a new one (a GitHub Actions `::error` workflow command, say) or leave a terminal mid-sequence.
std::string printable(std::string_view s);

}  // namespace parplan::cli
