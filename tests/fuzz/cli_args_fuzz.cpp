// libFuzzer target: CLI argument vectors. The input is split at newlines into argv; the app is built from the
// subcommand registry exactly as cli/main.cpp does and parsed. Cheap subcommands (estimate, profiles) also run,
// unless an option that writes a file was given. Oracle: only CLI11 errors and InputError escape.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "planner/spec/error.hpp"

namespace {

// True when `app` or one of its parsed subcommands got an option that names an output file.
bool writes_files(const CLI::App& app) {
  for (const CLI::Option* o : app.get_options()) {
    const std::string& n = o->get_name();
    if (o->count() > 0 && (n.find("out") != std::string::npos || n.find("trace") != std::string::npos ||
                           n.find("svg") != std::string::npos || n.find("write") != std::string::npos)) {
      return true;
    }
  }
  for (const CLI::App* sub : app.get_subcommands()) {
    if (writes_files(*sub)) return true;
  }
  return false;
}

int run_once(std::vector<std::string> args) {
  using namespace parplan::cli;
  CLI::App app{"parplan"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, Runner>> runners;
  for (const Command& c : command_registry()) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    runners.emplace_back(sub, c.setup(*sub));
  }
  std::reverse(args.begin(), args.end());  // CLI11's vector form takes the arguments in reverse order
  try {
    app.parse(args);
  } catch (const CLI::Error&) {
    return 2;
  } catch (const parplan::InputError&) {
    return 2;
  }
  if (writes_files(app)) return 0;
  for (auto& [sub, run] : runners) {
    if (!sub->parsed()) continue;
    const std::string name = sub->get_name();
    if (name != "estimate" && name != "profiles") return 0;
    try {
      return run();
    } catch (const parplan::InputError&) {
      return 2;
    }
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Subcommands print their results; keep libFuzzer's stderr readable. Any relative path lands in a scratch dir.
  if (!std::freopen("/dev/null", "w", stdout)) std::abort();
  char dir[] = "/tmp/parplan-fuzz-XXXXXX";
  if (!mkdtemp(dir) || chdir(dir) != 0) std::abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  if (!cur.empty()) args.push_back(cur);
  if (args.size() > 64) return 0;
  run_once(std::move(args));
  return 0;
}
