// Output helpers: atomic file writes (temp file + rename) so no half-written file is ever left behind.
#pragma once
#include <string>
#include <string_view>

namespace parplan::cli {

// Writes `content` to `path` atomically; "-" writes to stdout. Throws InputError naming `flag` and the path.
void write_file_atomic(const std::string& path, std::string_view content, std::string_view flag);

// Reads a whole file; throws InputError naming `flag` and the path when it cannot be read.
std::string read_file(const std::string& path, std::string_view flag);

}  // namespace parplan::cli
