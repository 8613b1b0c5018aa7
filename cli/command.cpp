// Subcommand registry storage.
#include "cli/command.hpp"

#include <fmt/core.h>

namespace parplan::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}

bool is_decimal_integer(std::string_view v) {
  const size_t a = v.find_first_not_of(" \t"), b = v.find_last_not_of(" \t");
  if (a == std::string_view::npos) return false;
  v = v.substr(a, b - a + 1);
  if (v.front() == '+' || v.front() == '-') v.remove_prefix(1);
  if (v.empty() || (v.front() == '0' && v.size() > 1)) return false;
  return v.find_first_not_of("0123456789") == std::string_view::npos;
}

bool is_integer_option(const CLI::Option& op) {
  const std::string type = op.get_type_name();
  return type.starts_with("INT") || type.starts_with("UINT");
}

std::string non_decimal_integer_option(const CLI::App& app) {
  for (const CLI::Option* op : app.get_options()) {
    if (op->count() == 0 || !is_integer_option(*op)) continue;
    for (const std::string& v : op->results()) {
      if (!is_decimal_integer(v)) {
        return fmt::format("{}: {} is not a decimal integer (leading zeros, 0x and 0b are not read)", op->get_name(), v);
      }
    }
  }
  for (const CLI::App* sub : app.get_subcommands()) {
    if (std::string e = non_decimal_integer_option(*sub); !e.empty()) return e;
  }
  return "";
}

}  // namespace parplan::cli
