// Subcommand registry: each cli/<name>.cpp registers one subcommand at static-initialisation time.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace parplan::cli {

// Exit codes shared by every subcommand.
enum ExitCode : int { kOk = 0, kCheckFailed = 1, kBadInput = 2, kBackendFailure = 3 };

// setup() adds the subcommand's options to `app` and returns the function that runs it.
using Runner = std::function<int()>;
struct Command {
  std::string name;
  std::string help;
  int order;  // position in `parplan --help`
  std::function<Runner(CLI::App& app)> setup;
};

std::vector<Command>& command_registry();

struct RegisterCommand {
  explicit RegisterCommand(Command c) { command_registry().push_back(std::move(c)); }
};

}  // namespace parplan::cli
