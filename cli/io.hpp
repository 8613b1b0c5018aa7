// Output helpers: atomic file writes (temp file + rename) so no half-written file is ever left behind.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace parplan::cli {

// Writes `content` to `path` atomically; "-" writes to stdout. Throws InputError naming `flag` and the path.
void write_file_atomic(const std::string& path, std::string_view content, std::string_view flag);

// Throws InputError naming `flag` unless `path` could be created: its directory exists and it is not a directory.
// Commands that work for a while call it first, so a bad output path fails before the work, with nothing written.
void require_writable(const std::string& path, std::string_view flag);

// Whether two output paths name the same destination: both stdout ("-", /dev/stdout, /dev/fd/1...), or the same file
// (after following links, dangling ones too, and resolving relative parts).
bool same_output(const std::string& a, const std::string& b);

// Whether an output path writes to stdout: "-", or a name that resolves where /dev/stdout does.
bool is_stdout(const std::string& path);

// Throws InputError naming `flag` when `path` writes to stdout and --json (`json`) prints a document there too.
void refuse_second_stdout_document(const std::string& path, bool json, std::string_view flag);

// `path` with its symbolic links followed by hand (a dangling link gives the file it would create); nullopt for a
// loop or an unreadable link.
std::optional<std::filesystem::path> follow_links(const std::string& path);

// Whether two existing files are one (the same spelling, or the same inode under two names).
bool same_file(const std::string& a, const std::string& b);

// Profile names and aliases compare without regard to case ("h100" names "H100-SXM5-80GB"'s alias).
bool same_name(std::string_view a, std::string_view b);
// The spelling same_name compares: lower case.
std::string lower_name(std::string_view s);

// Reads a whole file; throws InputError naming `flag` and the path when it cannot be read. The path is remembered
// as an input of this process (see refuse_replacing_input).
std::string read_file(const std::string& path, std::string_view flag);

// Throws InputError naming `flag` when `path` is a file this process read as the input of another flag (writing it
// would replace that input: --trace onto the --plan, --out onto --from-runs). An output may replace the input of its
// own flag (check --baseline --update-baseline). write_file_atomic checks it; commands writing several outputs call
// it for all of them first, so that none is written when one is refused.
void refuse_replacing_input(const std::string& path, std::string_view flag);

}  // namespace parplan::cli
