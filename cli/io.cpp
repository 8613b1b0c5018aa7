// Atomic file output and checked file input for the CLI.
#include "cli/io.hpp"

#include <algorithm>
#include <atomic>
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
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "planner/spec/error.hpp"

namespace parplan::cli {

namespace {
struct InputRead {
  std::string path, flag;
};
std::mutex g_inputs_mutex;
std::vector<InputRead> g_inputs;  // every file read_file has read, with the flag that named it

}  // namespace

// ---- Temporary output files removed on a signal ----
//
// A fixed registry the signal handler can read without allocating or locking: slots of paths, in chunks allocated
// when needed and never freed. A slot's state is 0 (free), 1 (being filled) or 2 (a file to remove).
namespace {
constexpr size_t kSlotPathBytes = 4096;  // PATH_MAX: a longer path cannot be created anyway
struct CleanupSlot {
  std::atomic<int> state{0};
  char path[kSlotPathBytes];
};
struct CleanupChunk {
  CleanupSlot slots[64];
  std::atomic<CleanupChunk*> next{nullptr};
};
CleanupChunk g_cleanup;
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
std::atomic<int> g_held{0};  // > 0 while a SignalsHeld is alive (a rename batch is under way)

CleanupSlot* register_cleanup(const std::string& path) {
  if (path.size() >= kSlotPathBytes) return nullptr;
  for (CleanupChunk* c = &g_cleanup;;) {
    for (CleanupSlot& slot : c->slots) {
      int free_state = 0;
      if (slot.state.compare_exchange_strong(free_state, 1)) {
        std::memcpy(slot.path, path.c_str(), path.size() + 1);
        slot.state.store(2);
        return &slot;
      }
    }
    CleanupChunk* next = c->next.load();
    if (next == nullptr) {
      auto* fresh = new CleanupChunk;  // reachable from g_cleanup for the life of the process
      if (c->next.compare_exchange_strong(next, fresh)) {
        next = fresh;
      } else {
        delete fresh;
      }
    }
    c = next;
  }
}

void unregister_cleanup(CleanupSlot* slot) {
  if (slot != nullptr) slot->state.store(0);
}

// The handler: only async-signal-safe calls (nanosleep, unlink, signal, raise) and lock-free atomics. The signal is
// blocked while it runs, so the raise() is delivered, with the default action, when it returns. A signal delivered
// to another thread while this one holds signals back (a rename batch) waits for the batch to end.
void remove_outputs_and_die(int sig) {
  while (g_held.load() > 0) {
    const timespec pause{0, 1'000'000};
    ::nanosleep(&pause, nullptr);
  }
  for (CleanupChunk* c = &g_cleanup; c != nullptr; c = c->next.load()) {
    for (CleanupSlot& slot : c->slots) {
      if (slot.state.load() == 2) ::unlink(slot.path);
    }
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Holds the cleanup signals back for its lifetime (a rename batch, a temporary's creation and registration): blocked
// on this thread, and a handler running on another thread waits.
struct SignalsHeld {
  sigset_t old{};
  SignalsHeld() {
    sigset_t set;
    sigemptyset(&set);
    for (const int sig : kCleanupSignals) sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, &old);
    g_held.fetch_add(1);
  }
  ~SignalsHeld() {
    g_held.fetch_sub(1);
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;
};

mode_t process_umask() {
  static const mode_t mask = [] {
    const mode_t m = ::umask(0);
    ::umask(m);
    return m;
  }();
  return mask;
}

// Writes all of `content` to `fd`; 0, or the errno of the failing call.
int write_fd(int fd, std::string_view content) {
  for (size_t at = 0; at < content.size();) {
    const ssize_t n = ::write(fd, content.data() + at, std::min(content.size() - at, size_t{1} << 30));
    if (n < 0 && errno != EINTR) return errno;
    if (n == 0) return EIO;  // no progress: not expected of a file or a device
    if (n > 0) at += static_cast<size_t>(n);
  }
  return 0;
}

namespace fs = std::filesystem;

enum class Sink { stdout_stream, device, file };

// One file of a write_files_atomic batch, from its checks to its commit.
struct Pending {
  const OutputFile* file = nullptr;
  Sink sink = Sink::file;
  fs::path target;              // links followed
  std::string temp;             // the temporary beside it, once created
  CleanupSlot* slot = nullptr;  // its registry entry
  bool renamed = false;         // the temporary is in place
  bool exchanged = false;       // ... and the temporary's name now holds the target's old contents
};

[[noreturn]] void throw_write_error(const OutputFile& f, int err) {
  const std::string what = fmt::format("{}: cannot write '{}': {}", f.flag, f.path, std::strerror(err));
  if (err == ENOSPC || err == EDQUOT || err == EIO || err == EFBIG) throw OutputError(what);
  throw InputError(what);
}

// Checks one output before anything is written: the checks write_file_atomic has always made.
Pending check_output(const OutputFile& f) {
  refuse_replacing_input(f.path, f.flag);
  Pending p;
  p.file = &f;
  if (f.path.empty()) throw InputError(fmt::format("{}: empty output path", f.flag));
  if (is_stdout(f.path)) {
    p.sink = Sink::stdout_stream;
    return p;
  }
  // A symbolic link is followed: the file it names is replaced, not the link.
  const std::optional<fs::path> resolved = follow_links(f.path);
  if (!resolved) throw InputError(fmt::format("{}: cannot resolve the link '{}'", f.flag, f.path));
  p.target = *resolved;
  require_writable(p.target.string(), f.flag);  // not a directory, not a FIFO or other special file, its directory exists
  std::error_code ec;
  // A device such as /dev/null: written in place (renaming a file onto it would replace the node).
  if (fs::is_character_file(fs::status(p.target, ec))) p.sink = Sink::device;
  return p;
}

void remove_temps(std::vector<Pending>& batch) {
  for (Pending& p : batch) {
    if (p.temp.empty()) continue;
    ::unlink(p.temp.c_str());
    unregister_cleanup(p.slot);
    p.temp.clear();
    p.slot = nullptr;
  }
}

// Creates `p`'s temporary beside its target, exclusively under an unpredictable name (mkostemp: O_CREAT | O_EXCL,
// so a link planted at the name is never followed), registered for removal on a signal, and writes the contents.
// The target's name plus a suffix could pass the file system's 255-byte limit; the temporary has a short name.
int write_temp(Pending& p) {
  std::string name = (p.target.parent_path() / ".parplan-XXXXXX").string();
  int fd = -1;
  {
    const SignalsHeld held;  // created and registered together: a signal between them would leave the file
    fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd < 0) return errno;
    p.temp = name;
    p.slot = register_cleanup(name);
  }
  int err = ::fchmod(fd, 0666 & ~process_umask()) == 0 ? 0 : errno;  // the mode a new file gets (mkostemp: 0600)
  if (err == 0) err = write_fd(fd, p.file->content);
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

// Writes a device or stdout in place; 0 or an errno.
int write_in_place(const Pending& p) {
  if (p.sink == Sink::stdout_stream) {
    const std::string_view c = p.file->content;
    errno = 0;
    if (std::fwrite(c.data(), 1, c.size(), stdout) != c.size() || std::fflush(stdout) != 0) return errno ? errno : EIO;
    return 0;
  }
  const int fd = ::open(p.target.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return errno;
  int err = write_fd(fd, p.file->content);
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

// Puts the temporary of `p` in place: exchanged with an existing target (so that a later failure can put the old
// file back), renamed when the target is new or the file system cannot exchange. 0 or an errno.
int put_in_place(Pending& p) {
  if (::renameat2(AT_FDCWD, p.temp.c_str(), AT_FDCWD, p.target.c_str(), RENAME_EXCHANGE) == 0) {
    p.renamed = p.exchanged = true;
    return 0;
  }
  if (errno != ENOENT && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) return errno;
  if (std::rename(p.temp.c_str(), p.target.c_str()) != 0) return errno;
  p.renamed = true;
  return 0;
}

// Undoes put_in_place for every file of `batch` already in place: the old contents back, or a new file removed.
void roll_back(std::vector<Pending>& batch) {
  for (Pending& p : batch) {
    if (!p.renamed) continue;
    if (p.exchanged) {
      ::renameat2(AT_FDCWD, p.temp.c_str(), AT_FDCWD, p.target.c_str(), RENAME_EXCHANGE);
    } else {
      ::unlink(p.target.c_str());
    }
    p.renamed = p.exchanged = false;
  }
}
}  // namespace

void install_output_cleanup() {
  for (const int sig : kCleanupSignals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;  // nohup, a background job
    struct sigaction sa {};
    sa.sa_handler = remove_outputs_and_die;
    sigemptyset(&sa.sa_mask);
    for (const int other : kCleanupSignals) sigaddset(&sa.sa_mask, other);  // one cleanup at a time
    ::sigaction(sig, &sa, nullptr);
  }
  process_umask();  // read once now, while this process has one thread
}

void write_files_atomic(const std::vector<OutputFile>& files) {
  std::vector<Pending> batch;
  for (const OutputFile& f : files) batch.push_back(check_output(f));
  auto fail = [&](const Pending& p, int err) {
    roll_back(batch);
    remove_temps(batch);
    if (p.sink == Sink::stdout_stream) {
      throw OutputError(fmt::format("{}: cannot write to stdout: {}", p.file->flag, std::strerror(err)));
    }
    throw_write_error(*p.file, err);
  };
  for (Pending& p : batch) {
    if (p.sink != Sink::file) continue;
    if (const int err = write_temp(p)) fail(p, err);
  }
  for (Pending& p : batch) {
    if (p.sink == Sink::file) continue;
    if (const int err = write_in_place(p)) fail(p, err);
  }
  const SignalsHeld held;  // every rename, or (on a failure) none: a signal waits until the batch is done
  for (Pending& p : batch) {
    if (p.sink != Sink::file) continue;
    if (const int err = put_in_place(p)) fail(p, err);
  }
  remove_temps(batch);  // the exchanged targets' old contents; a renamed temporary's name is gone already
}

void write_file_atomic(const std::string& path, std::string_view content, std::string_view flag) {
  write_files_atomic({{path, content, std::string(flag)}});
}

void require_writable(const std::string& path, std::string_view flag) {
  if (path.empty() || is_stdout(path)) return;
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

OutputFlag json_output(bool json) { return {"--json", json ? "-" : ""}; }

void refuse_shared_outputs(const std::vector<OutputFlag>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      const OutputFlag& a = outputs[i];
      const OutputFlag& b = outputs[j];
      if (a.path.empty() || b.path.empty()) continue;
      const bool a_stdout = is_stdout(a.path), b_stdout = is_stdout(b.path);
      if (a_stdout && b_stdout) {
        if (a.flag == "--json" || b.flag == "--json") {
          const OutputFlag& f = a.flag == "--json" ? b : a;
          throw InputError(fmt::format("{}: '{}' (stdout) and --json would both print a document; give {} a file",
                                       f.flag, f.path, f.flag));
        }
        throw InputError(fmt::format("{} and {}: both name stdout ('{}', '{}'); give one of them a file", a.flag,
                                     b.flag, a.path, b.path));
      }
      if (a_stdout || b_stdout || !same_output(a.path, b.path)) continue;
      std::error_code ec;
      if (std::filesystem::is_character_file(output_target(a.path), ec)) continue;  // /dev/null twice
      throw InputError(fmt::format("{} and {}: both name '{}' (one would replace the other); give two paths", a.flag,
                                   b.flag, a.path));
    }
  }
}

std::FILE* report_stream(const std::vector<OutputFlag>& outputs) {
  for (const OutputFlag& o : outputs) {
    if (o.flag != "--json" && !o.path.empty() && is_stdout(o.path)) return stderr;
  }
  return stdout;
}

void finish_stdout() {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const int err = errno != 0 ? errno : EIO;
    std::clearerr(stdout);
    throw OutputError(fmt::format("stdout: cannot write: {}", std::strerror(err)));
  }
}

std::string short_hash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, 64 bits
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return fmt::format("{:016x}", h);
}

FileLock::FileLock(const std::string& path, std::string_view flag) {
  namespace fs = std::filesystem;
  if (path.empty() || is_stdout(path)) return;
  const std::optional<fs::path> target = follow_links(path);
  std::error_code ec;
  if (!target || fs::is_character_file(*target, ec)) return;  // an unresolvable link fails when written
  lock_path_ = (target->parent_path() / (".parplan-" + short_hash(target->filename().string()) + ".lock")).string();
  auto fail = [&](const char* what) {
    const int err = errno;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    throw InputError(fmt::format("{}: cannot {} the lock file '{}' beside '{}': {}", flag, what, lock_path_, path,
                                 std::strerror(err)));
  };
  for (;;) {
    fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ < 0) fail("create");
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) fail("lock");
    }
    // The holder before this one removes the file it locked as it releases it: the lock is ours only when the file
    // locked is still the one named.
    struct stat locked {}, named {};
    if (::fstat(fd_, &locked) == 0 && ::stat(lock_path_.c_str(), &named) == 0 && locked.st_dev == named.st_dev &&
        locked.st_ino == named.st_ino) {
      break;
    }
    ::close(fd_);
  }
  const SignalsHeld held;
  slot_ = register_cleanup(lock_path_);  // registered once held: a waiting process must not remove the holder's file
}

FileLock::~FileLock() {
  if (fd_ < 0) return;
  const SignalsHeld held;  // removed and unregistered together: a signal between them would remove the next holder's
  ::unlink(lock_path_.c_str());
  unregister_cleanup(static_cast<CleanupSlot*>(slot_));
  ::close(fd_);
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
