// Subcommand registry storage.
#include "cli/command.hpp"

#include <fmt/core.h>

#include "planner/spec/error.hpp"

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

bool is_decimal_number(std::string_view v) {
  const size_t a = v.find_first_not_of(" \t"), b = v.find_last_not_of(" \t");
  if (a == std::string_view::npos) return false;
  v = v.substr(a, b - a + 1);
  if (v.front() == '+' || v.front() == '-') v.remove_prefix(1);
  const size_t e = v.find_first_of("eE");
  const std::string_view mantissa = v.substr(0, e);
  const size_t dot = mantissa.find('.');
  const std::string_view digits = dot == std::string_view::npos ? mantissa : mantissa.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? std::string_view{} : mantissa.substr(dot + 1);
  auto all_digits = [](std::string_view d) { return d.find_first_not_of("0123456789") == std::string_view::npos; };
  if (digits.size() + fraction.size() == 0 || !all_digits(digits) || !all_digits(fraction)) return false;
  if (e == std::string_view::npos) return true;
  std::string_view exponent = v.substr(e + 1);
  if (!exponent.empty() && (exponent.front() == '+' || exponent.front() == '-')) exponent.remove_prefix(1);
  return !exponent.empty() && all_digits(exponent);
}

bool is_number_option(const CLI::Option& op) { return op.get_type_name().starts_with("FLOAT"); }

std::string non_decimal_option(const CLI::App& app) {
  for (const CLI::Option* op : app.get_options()) {
    if (op->count() == 0) continue;
    for (const std::string& v : op->results()) {
      if (is_integer_option(*op) && !is_decimal_integer(v)) {
        return fmt::format("{}: {} is not a decimal integer (leading zeros, 0x and 0b are not read)", op->get_name(),
                           excerpt(v));
      }
      if (is_number_option(*op) && !is_decimal_number(v)) {
        return fmt::format("{}: {} is not a decimal number (hexadecimal, inf and nan are not read)", op->get_name(),
                           excerpt(v));
      }
    }
  }
  for (const CLI::App* sub : app.get_subcommands()) {
    if (std::string e = non_decimal_option(*sub); !e.empty()) return e;
  }
  return "";
}

}  // namespace parplan::cli
