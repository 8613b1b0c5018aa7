// parplan entry point: builds the CLI from the registered subcommands and maps errors to exit codes.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <fmt/core.h>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "cli/command.hpp"
#include "cli/io.hpp"
#include "cli/text.hpp"
#include "planner/spec/error.hpp"
#include "runtime/backend.hpp"

namespace {
// Error messages echo user input (file names, JSON strings): control characters and bytes that are not UTF-8 are
// escaped so that every error stays on exactly one line of stderr, and the line is bounded (each echoed excerpt of
// input already is: parplan::excerpt; this bounds what a message could still hold, such as several long paths).
constexpr size_t kMaxErrorBytes = 4096;
std::string one_line(std::string_view s) { return parplan::excerpt(parplan::cli::printable(s), kMaxErrorBytes); }

// One error line on stderr. std::fputs, not fmt::print: when stderr cannot be written (closed, /dev/full) the error
// must still end in its exit code, and fmt::print would throw from inside the handler.
void report(const std::string& line) {
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}
using parplan::cli::Runner;

// --version: the version, and which CUDA backend `run` / `calibrate --backend cuda` would load (found, not loaded).
void add_version_flag(CLI::App& app) {
  app.set_version_flag(
      "--version",
      [] {
        std::string why;
        const std::string plugin = parplan::runtime::find_cuda_plugin(&why);
        return "parplan 0.1.0\nCUDA backend: " + (plugin.empty() ? "none: " + why : plugin);
      },
      "Print the version and the CUDA backend plugin run would load, and exit");
}

// Adds every registered subcommand to `app` in its --help order; returns each one's runner.
std::vector<std::pair<CLI::App*, Runner>> add_commands(CLI::App& app) {
  using parplan::cli::Command;
  auto commands = parplan::cli::command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return a.order < b.order || (a.order == b.order && a.name < b.name); });
  std::vector<std::pair<CLI::App*, Runner>> runners;
  for (const auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    runners.emplace_back(sub, c.setup(*sub));
  }
  return runners;
}

// The error line for an unknown first word: CLI11 reports an unknown first word, an unknown word after a command
// that has subcommands (profiles frobnicate) and an unknown option before any command (--helpx) all as "A
// subcommand is required"; this names the word instead. Empty when the words are known.
std::string unknown_word_error(CLI::App& app, int argc, char** argv) {
  if (argc > 1 && argv[1][0] == '-') {
    const std::string_view a = argv[1];
    if (a != "-h" && a != "--help" && a != "--version" && !a.starts_with("--help=")) {
      return fmt::format("parplan: error: unknown option '{}' (use --help, --version or a subcommand)\n",
                         one_line(parplan::excerpt(a)));
    }
  }
  // argv[1] among the commands, then argv[2] among that command's subcommands (when it has any).
  CLI::App* parent = &app;
  for (int i = 1; i <= 2 && i < argc && argv[i][0] != '-' && parent != nullptr; ++i) {
    const auto subs = parent->get_subcommands({});
    if (subs.empty()) break;
    CLI::App* next = nullptr;
    std::string known;
    for (CLI::App* sub : subs) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      if (sub->get_name() == argv[i]) next = sub;
    }
    if (next == nullptr) {
      return fmt::format("parplan: error: {}unknown subcommand '{}' (known: {})\n",
                         i == 1 ? "" : std::string(argv[1]) + ": ", one_line(parplan::excerpt(argv[i])), known);
    }
    parent = next;
  }
  return "";
}

// CLI11's parse error in parplan's words where CLI11's own would mislead: a repeated flag ("At Most 1 required but
// received 2") and an integer flag's value CLI11 could not read as one, which its range check reports as out of range
// ("--gpus: Value 08 not in range ...": CLI11 reads 08 as octal, 8.0 not at all). `command`: argv[1].
std::string parse_error_text(const CLI::App& app, std::string_view command, std::string msg) {
  constexpr std::string_view kRepeated = ": At Most 1 required but received ";
  if (const size_t at = msg.find(kRepeated); at != std::string::npos) {
    return fmt::format("{}: given {} times: give it once", msg.substr(0, at), msg.substr(at + kRepeated.size()));
  }
  constexpr std::string_view kValue = ": Value ", kRange = " not in range ";
  const size_t v = msg.find(kValue), r = msg.find(kRange);
  if (v != std::string::npos && r != std::string::npos && r > v && msg.starts_with("--")) {
    const std::string value = msg.substr(v + kValue.size(), r - v - kValue.size());
    const CLI::Option* op = nullptr;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() == command) op = sub->get_option_no_throw(msg.substr(0, v));
    }
    // CLI11 reads an integer flag's 08 as octal and 8.0 or 1e9 not at all, and reports either as out of range.
    if (op && parplan::cli::is_integer_option(*op) && !parplan::cli::is_decimal_integer(value)) {
      const bool number = parplan::cli::is_decimal_number(value);
      const double x = number ? std::strtod(value.c_str(), nullptr) : 0.0;
      const bool whole = number && std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e15;
      const std::string why = whole                  ? fmt::format(" (write its digits: {:.0f})", x)
                              : number               ? " (a whole number is needed)"
                              : value.starts_with("0") ? " (0x and 0b are not read)"
                                                     : "";
      return fmt::format("{}: {} is not a decimal integer{}", msg.substr(0, v), value, why);
    }
  }
  return msg;
}

// Parses the command line; the exit code when that ends the run (help, version, a parse error), else none.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    report(fmt::format("parplan: error: {}\n", parse_error_text(app, argc > 1 ? argv[1] : "", one_line(e.what()))));
    return parplan::cli::kBadInput;
  } catch (const parplan::InputError& e) {  // thrown by option validators / callbacks
    report(fmt::format("parplan: error: {}\n", one_line(e.what())));
    return parplan::cli::kBadInput;
  }
  return std::nullopt;
}

// The first option, in `app` or its nested subcommands, given an empty value (-o '', --schedule ''): bad input, not
// "not given". Empty when there is none.
std::string option_with_empty_value(const CLI::App& app) {
  std::string empty_flag;
  std::function<void(const CLI::App*)> find_empty = [&](const CLI::App* a) {
    for (const CLI::Option* op : a->get_options()) {
      if (op->count() == 0 || op->get_type_size() == 0) continue;  // not given, or a flag
      for (const std::string& v : op->results()) {
        if (v.empty() && empty_flag.empty()) empty_flag = op->get_name();
      }
    }
    for (const CLI::App* sub : a->get_subcommands()) find_empty(sub);
  };
  find_empty(&app);
  return empty_flag;
}

// Runs the parsed subcommand, mapping the errors it throws to their exit codes.
int run_parsed_command(const std::vector<std::pair<CLI::App*, Runner>>& runners) {
  using namespace parplan::cli;
  try {
    for (auto& [sub, run] : runners) {
      if (!sub->parsed()) continue;
      const int rc = run();
      finish_stdout();  // a failed write to stdout (a full disk, a closed stdout) is exit 3, whatever the command did
      return rc;
    }
    return kBadInput;
  } catch (const parplan::InputError& e) {
    report(fmt::format("parplan: error: {}\n", one_line(e.what())));
    return kBadInput;
  } catch (const OutputError& e) {
    report(fmt::format("parplan: error: {}\n", one_line(e.what())));
    return kBackendFailure;
  } catch (const std::system_error& e) {
    // fmt::print on a stream that cannot be written ("cannot write to file: ..."): stdout, as stderr then fails too.
    const bool write = std::string_view(e.what()).starts_with("cannot write");
    report(write ? fmt::format("parplan: error: stdout: cannot write: {}\n", one_line(e.code().message()))
                 : fmt::format("parplan: internal error: {}\n", one_line(e.what())));
    return kBackendFailure;
  } catch (const parplan::BackendError& e) {
    report(fmt::format("parplan: backend error: {}\n", one_line(e.what())));
    return kBackendFailure;
  } catch (const std::bad_alloc&) {
    report("parplan: error: out of host memory\n");
    return kBackendFailure;
  } catch (const std::exception& e) {
    report(fmt::format("parplan: internal error: {}\n", one_line(e.what())));
    return kBackendFailure;
  }
}
}  // namespace

int main(int argc, char** argv) {
  using namespace parplan::cli;
  install_output_cleanup();  // temporary output files are removed on SIGINT / SIGTERM
  CLI::App app{"parplan: plan, simulate and run parallelism strategies for large-model training"};
  app.require_subcommand(1);
  add_version_flag(app);
  const auto runners = add_commands(app);
  if (const std::string e = unknown_word_error(app, argc, argv); !e.empty()) {
    report(e);
    return kBadInput;
  }
  if (const std::optional<int> code = parse_command_line(app, argc, argv)) return *code;
  if (const std::string flag = option_with_empty_value(app); !flag.empty()) {
    report(fmt::format("parplan: error: {}: empty value\n", flag));
    return kBadInput;
  }
  if (const std::string e = parplan::cli::non_decimal_option(app); !e.empty()) {
    report(fmt::format("parplan: error: {}\n", one_line(e)));
    return kBadInput;
  }
  return run_parsed_command(runners);
}
