// Human quantity parsing (see units.hpp).
#include "planner/spec/units.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fmt/core.h>
#include <string>

#include "planner/spec/error.hpp"

namespace parplan {

std::string ascii_lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}
namespace {

// Splits "1.3T" into 1.3 and "T"; throws when the number part is not a finite number.
double split_number(std::string_view text, std::string_view flag, std::string_view& suffix) {
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  const char* begin = s.data() + i;
  const char* end = s.data() + s.size();
  double v = 0;
  auto [ptr, ec] = std::from_chars(begin, end, v);
  if (ec != std::errc() || ptr == begin || !std::isfinite(v)) {
    throw InputError(fmt::format("{}: '{}' is not a number", flag, excerpt(text)));
  }
  suffix = text.substr(static_cast<size_t>(ptr - s.data()), static_cast<size_t>(end - ptr));
  return v;
}

}  // namespace

double parse_count(std::string_view text, std::string_view flag) {
  std::string_view suffix;
  double v = split_number(text, flag, suffix);
  double scale = 1;
  if (suffix.empty()) {
    scale = 1;
  } else if (suffix == "K" || suffix == "k") {
    scale = 1e3;
  } else if (suffix == "M" || suffix == "m") {
    scale = 1e6;
  } else if (suffix == "B" || suffix == "b" || suffix == "G" || suffix == "g") {
    scale = 1e9;
  } else if (suffix == "T" || suffix == "t") {
    scale = 1e12;
  } else {
    throw InputError(fmt::format("{}: unknown suffix '{}' in '{}' (use K, M, B or T)", flag, excerpt(suffix), excerpt(text)));
  }
  v *= scale;
  if (!(v > 0) || !std::isfinite(v)) throw InputError(fmt::format("{}: '{}' must be positive", flag, excerpt(text)));
  return v;
}

int64_t parse_bytes(std::string_view text, std::string_view flag) {
  std::string_view suffix;
  double v = split_number(text, flag, suffix);
  double scale = 1;
  struct Unit {
    std::string_view name;
    double scale;
  };
  // A size without a unit is refused rather than read as bytes: "--memory 72" meant GiB, not 72 bytes.
  if (suffix.empty()) {
    throw InputError(fmt::format("{}: '{}' has no unit: give one, e.g. {}GiB (or {}B for bytes)", flag, excerpt(text),
                                 excerpt(text), excerpt(text)));
  }
  static constexpr Unit units[] = {{"B", 1},      {"KB", 1e3},   {"MB", 1e6},    {"GB", 1e9},
                                   {"TB", 1e12}, {"KiB", 1024.}, {"MiB", 1048576.}, {"GiB", 1073741824.},
                                   {"TiB", 1099511627776.}};
  bool found = false;
  for (const auto& u : units) {
    if (u.name == suffix) {
      scale = u.scale;
      found = true;
    }
  }
  if (!found) throw InputError(fmt::format("{}: unknown unit '{}' in '{}' (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", flag, excerpt(suffix), excerpt(text)));
  v *= scale;
  if (!(v >= 1) || v > 9e18) throw InputError(fmt::format("{}: '{}' must be at least 1 byte and below 8 EiB", flag, excerpt(text)));
  return static_cast<int64_t>(v);
}

double parse_seconds(std::string_view text, std::string_view flag) {
  std::string_view suffix;
  double v = split_number(text, flag, suffix);
  if (suffix == "ms") {
    v /= 1e3;
  } else if (suffix == "us") {
    v /= 1e6;
  } else if (suffix == "min") {
    v *= 60;
  } else if (!suffix.empty() && suffix != "s") {
    throw InputError(fmt::format("{}: unknown unit '{}' in '{}' (use s, ms, us or min)", flag, excerpt(suffix), excerpt(text)));
  }
  if (!(v > 0) || !std::isfinite(v)) throw InputError(fmt::format("{}: '{}' must be positive and finite", flag, excerpt(text)));
  return v;
}

}  // namespace parplan
