// Error types shared by every layer: bad input (exit 2) and backend failures (exit 3).
#pragma once
#include <stdexcept>
#include <string>

namespace parplan {

// Bad user input: a flag, a file or a JSON path holds something parplan cannot use.
// The message is one line and names the flag or the path (e.g. "model.json: /layers: must be > 0").
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A runtime / backend failure (CUDA, NCCL, host backend): the message names the call and the library's text.
class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace parplan
