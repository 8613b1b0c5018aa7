// Output helpers: atomic file writes (temp file + rename) so no half-written file is ever left behind.
#pragma once
#include <filesystem>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace parplan::cli {

// An output that failed for a reason other than its path: the disk is full (ENOSPC, EDQUOT), an I/O error, stdout
// cannot be written. main() reports it in one line and exits 3; a bad output path stays an InputError (exit 2).
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One file a command writes: its path ("-" is stdout), what goes in it, and the flag that named it.
struct OutputFile {
  std::string path;
  std::string_view content;
  std::string flag;
};

// Writes `files` all or nothing. Every path is checked first (refuse_replacing_input, require_writable, links
// followed); then each file is written to a temporary file of its own beside its target (created exclusively under
// an unpredictable name, never through a link), stdout and devices such as /dev/null are written in place, and last
// the temporaries are renamed onto their targets with SIGINT, SIGTERM, SIGHUP and SIGPIPE held back. When any step
// fails the temporaries are removed and the targets already renamed get their old contents back (or are removed
// when they were new). Throws InputError naming the flag and the path (exit 2), or OutputError for a full disk or an
// I/O error (exit 3).
void write_files_atomic(const std::vector<OutputFile>& files);

// write_files_atomic for one file.
void write_file_atomic(const std::string& path, std::string_view content, std::string_view flag);

// Installs the handler that removes this process's temporary output files (and lock files) on SIGINT, SIGTERM,
// SIGHUP and SIGPIPE and then dies of the signal as before; a signal the process was started ignoring stays ignored.
// main() calls it first.
void install_output_cleanup();

// Holds an exclusive lock (flock) on a lock file beside `path` (its links followed) from construction to
// destruction, for a read-modify-write of `path` by several processes at once (check --update-baseline). The lock
// file, `.parplan-<hash of the name>.lock`, is removed on release; nothing is locked for stdout or a device.
class FileLock {
 public:
  FileLock(const std::string& path, std::string_view flag);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
  std::string lock_path_;
  void* slot_ = nullptr;  // the signal-cleanup registry entry of the lock file
};

// One output of a command for refuse_shared_outputs: the flag and its path (empty: not given; "-": stdout).
struct OutputFlag {
  std::string flag;
  std::string path;
};

// The --json document, as an output: stdout when `json` is set, else not given.
OutputFlag json_output(bool json);

// Throws InputError naming both flags when two given outputs name one destination: both stdout ("-", /dev/stdout,
// --json's document), or one file (after following links, or the same inode under two names). Both on one device
// other than stdout (/dev/null twice) is allowed. Every command with two or more outputs calls it before its work.
void refuse_shared_outputs(const std::vector<OutputFlag>& outputs);

// Where a command prints its text report: stderr when one of `outputs` is a document on stdout, else stdout.
std::FILE* report_stream(const std::vector<OutputFlag>& outputs);

// Flushes stdout; throws OutputError ("stdout: cannot write: ...") when it or an earlier write to it failed.
void finish_stdout();

// Throws InputError naming `flag` unless `path` could be created: its directory exists and it is not a directory.
// Commands that work for a while call it first, so a bad output path fails before the work, with nothing written.
void require_writable(const std::string& path, std::string_view flag);

// Whether two output paths name the same destination: both stdout ("-", /dev/stdout, /dev/fd/1...), or the same file
// (after following links, dangling ones too, and resolving relative parts).
bool same_output(const std::string& a, const std::string& b);

// Whether an output path writes to stdout: "-", or a name that resolves where /dev/stdout does.
bool is_stdout(const std::string& path);

// `path` with its symbolic links followed by hand (a dangling link gives the file it would create); nullopt for a
// loop or an unreadable link.
std::optional<std::filesystem::path> follow_links(const std::string& path);

// Whether two existing files are one (the same spelling, or the same inode under two names).
bool same_file(const std::string& a, const std::string& b);

// A 16-digit hex digest (FNV-1a, 64 bits) of `s`: a short, stable name for a long one.
std::string short_hash(std::string_view s);

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
