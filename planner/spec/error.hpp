// Error types shared by every layer: bad input (exit 2) and backend failures (exit 3).
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace parplan {

// Bad user input: a flag, a file or a JSON path holds something parplan cannot use.
// The message is one line and names the flag or the path (e.g. "model.json: /layers: must be > 0").
// A NUL echoed from the input (a JSON "\u0000") is written as \x00: what() is a C string and would end there.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(escape_nul(what)) {}
  explicit InputError(const char* what) : std::runtime_error(what) {}

 private:
  static std::string escape_nul(const std::string& s) {
    if (s.find('\0') == std::string::npos) return s;
    std::string r;
    for (const char c : s) {
      if (c == '\0') {
        r += "\\x00";
      } else {
        r += c;
      }
    }
    return r;
  }
};

// Input echoed in a message (a JSON key or value, a TOML value, a name from a file): at most `max` bytes, cut at a
// UTF-8 character boundary, then "...". Every message that quotes input goes through it, so an error stays one short
// line whatever the input holds (a 50 MB JSON key, a file that is not the document it was given as).
constexpr size_t kExcerptBytes = 80;
inline std::string excerpt(std::string_view s, size_t max = kExcerptBytes) {
  if (s.size() <= max) return std::string(s);
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // not inside a multi-byte character
  return std::string(s.substr(0, n)) + "...";
}

// A runtime / backend failure (CUDA, NCCL, host backend): the message names the call and the library's text.
class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace parplan
