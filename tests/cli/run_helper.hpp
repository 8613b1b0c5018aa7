// Test helper: runs the parplan binary with arguments, captures stdout, stderr and the exit code (with a timeout),
// and compares output with golden files (PARPLAN_UPDATE_GOLDEN=1 rewrites them instead).
#pragma once
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace parplan::test {

// A fresh, empty scratch directory per test case (removed by the destructor).
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "parplan-bad-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path)) names.push_back(e.path().filename().string());
    return names;
  }
  // The path of `name` in the directory, and the same after writing `text` there (its directories created).
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::filesystem::create_directories((path / name).parent_path());
    std::ofstream(file(name), std::ios::binary) << text;
    return file(name);
  }
};

struct RunResult {
  int exit_code = -1;  // -1: killed by a signal or timed out
  bool timed_out = false;
  std::string out, err;
};

// The argv and environment of one parplan process: PARPLAN_EXE with `args`, this process's environment plus `env`
// ("K=V"). Built in place (the pointer arrays point into the strings).
struct SpawnArgs {
  std::vector<std::string> argv_s{PARPLAN_EXE}, env_s;
  std::vector<char*> argv, envp;
  SpawnArgs(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (char** e = environ; *e; ++e) env_s.emplace_back(*e);
    env_s.insert(env_s.end(), env.begin(), env.end());
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  SpawnArgs(const SpawnArgs&) = delete;
  SpawnArgs& operator=(const SpawnArgs&) = delete;
};

// Starts PARPLAN_EXE with `args` without waiting: stdin from /dev/null, stdout and stderr to the files `out` and
// `err` (created or truncated; "/dev/full" makes every write to stdout fail). Returns the pid.
inline pid_t spawn_parplan(const std::vector<std::string>& args, const std::string& out, const std::string& err) {
  const SpawnArgs a(args, {});
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, PARPLAN_EXE, &fa, nullptr, a.argv.data(), a.envp.data());
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE_MESSAGE(rc == 0, "posix_spawn failed for " << PARPLAN_EXE);
  return pid;
}

// Waits for a spawned process for up to `timeout_s` seconds (then kills it). Its exit code, or -1 when a signal
// ended it (its number in *signal) or it timed out.
inline int wait_parplan(pid_t pid, int timeout_s, int* signal = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(2000);
  }
  if (signal != nullptr) *signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs PARPLAN_EXE with `args`; `env` entries ("K=V") are added to the environment; stdin is /dev/null.
inline RunResult run_parplan(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                             int timeout_s = 120) {
  const SpawnArgs a(args, env);
  int out_pipe[2], err_pipe[2];
  REQUIRE(pipe(out_pipe) == 0);
  REQUIRE(pipe(err_pipe) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  posix_spawn_file_actions_addclose(&fa, out_pipe[0]);
  posix_spawn_file_actions_addclose(&fa, err_pipe[0]);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, PARPLAN_EXE, &fa, nullptr, a.argv.data(), a.envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(out_pipe[1]);
  close(err_pipe[1]);
  RunResult r;
  REQUIRE_MESSAGE(rc == 0, "posix_spawn failed for " << PARPLAN_EXE);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) < 0) break;
    for (auto& f : fds) {
      if (f.fd < 0 || !(f.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(f.fd, buf, sizeof buf);
      if (n <= 0) {
        close(f.fd);
        f.fd = -1;
        --open_fds;
      } else {
        (f.fd == out_pipe[0] ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = (!r.timed_out && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Compares `actual` with tests/cli/golden/<name>; with PARPLAN_UPDATE_GOLDEN=1 rewrites the golden file instead.
inline void check_golden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(PARPLAN_TEST_DIR) + "/cli/golden/" + name;
  if (const char* u = std::getenv("PARPLAN_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    MESSAGE("updated golden file " << path);
    return;
  }
  const std::string expected = read_text(path);
  REQUIRE_MESSAGE(!expected.empty(), "missing golden file " << path << " (run with PARPLAN_UPDATE_GOLDEN=1)");
  CHECK_MESSAGE(actual == expected, "output differs from " << path
                                                            << "; if the change is intended, regenerate with "
                                                               "PARPLAN_UPDATE_GOLDEN=1 ctest -R <test>");
}

// Number of lines in s (a trailing newline does not start a new line).
inline int line_count(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  if (!s.empty() && s.back() != '\n') ++n;
  return n;
}

// `parplan import --json ARGS...`, which must succeed: its JSON document.
inline nlohmann::json import_json(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"import", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_parplan(args, {}, 60);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace parplan::test
