// Subcommand registry: each cli/<name>.cpp registers one subcommand at static-initialisation time.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>
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

// An integer written in decimal: an optional sign, then 0 or digits without a leading zero (surrounding blanks
// allowed). CLI11 reads 010 as octal (8) and 0x10 as hex (16); parplan's integers are decimal.
bool is_decimal_integer(std::string_view v);
// Whether an option takes an integer (CLI11's type name INT / UINT ...).
bool is_integer_option(const CLI::Option& op);
// A number written in decimal: an optional sign, digits with an optional fraction, an optional exponent (1.5, .5,
// 2e-3). CLI11 reads 0x10 as 16 and inf / nan as numbers; parplan's numbers are decimal.
bool is_decimal_number(std::string_view v);
// Whether an option takes a floating-point number (CLI11's type name FLOAT).
bool is_number_option(const CLI::Option& op);
// The first integer or number option of `app` or its subcommands given a value that is not decimal, as an error
// message ("--gpus: 010 is not a decimal integer ...", "--bucket-mb: 0x10 is not a decimal number ..."), or empty.
std::string non_decimal_option(const CLI::App& app);

struct RegisterCommand {
  explicit RegisterCommand(Command c) { command_registry().push_back(std::move(c)); }
};

}  // namespace parplan::cli
