// Error types shared by every layer: bad input (exit 2) and backend failures (exit 3).
#pragma once
#include <stdexcept>
#include <string>

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

// A runtime / backend failure (CUDA, NCCL, host backend): the message names the call and the library's text.
class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace parplan
