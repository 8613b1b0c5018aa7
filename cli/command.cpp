// Subcommand registry storage.
#include "cli/command.hpp"

namespace parplan::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}

}  // namespace parplan::cli
