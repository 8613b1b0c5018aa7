// Atomic file output and checked file input for the CLI.
#include "cli/io.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <vector>
#include <fmt/core.h>
#include <sstream>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "planner/spec/error.hpp"

namespace parplan::cli {

namespace {
struct InputRead {
  std::string path, flag;
};
std::mutex g_inputs_mutex;
std::vector<InputRead> g_inputs;  // every file read_file has read, with the flag that named it

// Writes all of `content` to `path` (created or truncated); false on failure, with errno set by the failing call.
bool write_all(const char* path, std::string_view content) {
  std::FILE* f = std::fopen(path, "wb");
  if (!f) return false;
  const bool written = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  return std::fclose(f) == 0 && written;
}
}  // namespace

void write_file_atomic(const std::string& path, std::string_view content, std::string_view flag) {
  refuse_replacing_input(path, flag);
  if (path == "-") {
    std::fwrite(content.data(), 1, content.size(), stdout);
    std::fflush(stdout);
    return;
  }
  if (path.empty()) throw InputError(fmt::format("{}: empty output path", flag));
  namespace fs = std::filesystem;
  std::error_code ec;
  // A symbolic link is followed: the file it names is replaced, not the link.
  const std::optional<fs::path> resolved = follow_links(path);
  if (!resolved) throw InputError(fmt::format("{}: cannot resolve the link '{}'", flag, path));
  const fs::path& p = *resolved;
  require_writable(p.string(), flag);  // not a directory, not a FIFO or other special file, its directory exists
  auto fail = [&](int err) {
    throw InputError(fmt::format("{}: cannot write '{}': {}", flag, path, std::strerror(err)));
  };
  if (fs::is_character_file(fs::status(p, ec))) {
    // A device such as /dev/null or /dev/stdout: written in place (renaming a file onto it would replace the node).
    if (!write_all(p.c_str(), content)) fail(errno);
    return;
  }
  // The temporary file sits beside the target (rename stays within one file system) under a short name of its own:
  // the target's name plus a suffix could pass the file system's 255-byte limit.
  const std::string tmp = (p.parent_path() / (".parplan-" + std::to_string(::getpid()) + ".tmp")).string();
  if (!write_all(tmp.c_str(), content) || std::rename(tmp.c_str(), p.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    fail(err);
  }
}

void require_writable(const std::string& path, std::string_view flag) {
  if (path.empty() || path == "-") return;
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(st)) throw InputError(fmt::format("{}: '{}' is a directory", flag, path));
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st) && !std::filesystem::is_character_file(st)) {
    throw InputError(fmt::format("{}: '{}' exists and is not a regular file", flag, path));
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
    throw InputError(fmt::format("{}: cannot write '{}': directory '{}' does not exist", flag, path, dir.string()));
  }
}

std::string read_file(const std::string& path, std::string_view flag) {
  // Opened without blocking: a named FIFO with no writer would block open() (and read()) forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("{}: cannot read '{}': {}", flag, path, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw InputError(fmt::format("{}: cannot read '{}': {}", flag, path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw InputError(fmt::format("{}: '{}' is a directory", flag, path));
  if (S_ISFIFO(st.st_mode)) {
    // An anonymous pipe (a shell's <(...), /dev/stdin from a pipe) was made with its writer and ends; a named FIFO
    // may never get one. /proc names an anonymous pipe "pipe:[inode]".
    char target[64] = {};
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = ::readlink(self.c_str(), target, sizeof target - 1);
    if (n <= 0 || std::string_view(target, static_cast<size_t>(n)).rfind("pipe:", 0) != 0) {
      throw InputError(fmt::format("{}: '{}' is a named pipe (FIFO), which may never be written; give a regular file "
                                   "or a shell pipe such as <(...)",
                                   flag, path));
    }
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    throw InputError(fmt::format("{}: cannot read '{}': {}", flag, path, std::strerror(errno)));
  }
  {
    const std::lock_guard<std::mutex> lock(g_inputs_mutex);
    g_inputs.push_back({path, std::string(flag)});
  }
  // Bounded read: an input such as /dev/zero or a runaway pipe must end in an error, not exhaust memory.
  constexpr size_t kMaxInputBytes = size_t{64} << 20;
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      throw InputError(fmt::format("{}: cannot read '{}': {}", flag, path, std::strerror(errno)));
    }
    text.append(buf, static_cast<size_t>(got));
    if (text.size() > kMaxInputBytes) throw InputError(fmt::format("{}: '{}' is larger than 64 MiB", flag, path));
  }
  return text;
}

namespace {
// The file a name ends up writing: links followed (a dangling one names its target), then made absolute and
// normalised.
std::filesystem::path output_target(const std::string& p) {
  namespace fs = std::filesystem;
  const std::optional<fs::path> r = follow_links(p);
  std::error_code ec;
  const fs::path q = fs::weakly_canonical(fs::absolute(r ? *r : fs::path(p), ec), ec);
  return ec ? fs::path(p).lexically_normal() : q.lexically_normal();
}
}  // namespace

void refuse_replacing_input(const std::string& path, std::string_view flag) {
  if (path.empty() || is_stdout(path)) return;
  std::error_code ec;
  if (std::filesystem::is_character_file(path, ec)) return;  // written in place (/dev/null), nothing is replaced
  std::vector<InputRead> inputs;
  {
    const std::lock_guard<std::mutex> lock(g_inputs_mutex);
    inputs = g_inputs;
  }
  for (const InputRead& in : inputs) {
    if (in.flag != flag && same_output(path, in.path)) {
      throw InputError(fmt::format("{}: '{}' is the {} input; writing it would replace that file", flag, path, in.flag));
    }
  }
}

bool is_stdout(const std::string& path) {
  return path == "-" || (!path.empty() && output_target(path) == output_target("/dev/stdout"));
}

void refuse_second_stdout_document(const std::string& path, bool json, std::string_view flag) {
  if (json && is_stdout(path)) {
    throw InputError(fmt::format("{}: '-' (stdout) and --json would both print a document; give {} a file", flag, flag));
  }
}

bool same_output(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  if (is_stdout(a) || is_stdout(b)) return is_stdout(a) && is_stdout(b);
  const std::filesystem::path ta = output_target(a), tb = output_target(b);
  std::error_code ec;
  return ta == tb || std::filesystem::equivalent(ta, tb, ec);
}

std::optional<std::filesystem::path> follow_links(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p(path);
  for (int hops = 0; fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    const fs::path target = fs::read_symlink(p, ec);
    if (ec || hops == 40) return std::nullopt;
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  return p;
}

bool same_file(const std::string& a, const std::string& b) {
  if (a == b) return true;
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec);
}

std::string lower_name(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

bool same_name(std::string_view a, std::string_view b) { return lower_name(a) == lower_name(b); }

}  // namespace parplan::cli
