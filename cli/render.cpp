// Terminal rendering helpers (see render.hpp).
#include "cli/render.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>

namespace parplan::cli {

std::string fmt_bytes(double bytes) {
  const double a = std::fabs(bytes);
  if (a >= 1024.0 * 1024 * 1024 * 1024) return fmt::format("{:.2f} TiB", bytes / (1024.0 * 1024 * 1024 * 1024));
  if (a >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024));
  if (a >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
  if (a >= 1024.0) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{:.0f} B", bytes);
}

std::string fmt_seconds(double s) {
  const double a = std::fabs(s);
  if (a >= 1.0) return fmt::format("{:.3f} s", s);
  if (a >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

std::string fmt_percent(double frac) { return fmt::format("{:.1f}%", frac * 100.0); }

std::string fmt_count(double n) {
  if (n >= 1e12) return fmt::format("{:.3g}T", n / 1e12);
  if (n >= 1e9) return fmt::format("{:.4g}B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.4g}M", n / 1e6);
  return fmt::format("{:.0f}", n);
}

std::string count_of(int64_t n, std::string_view noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); }

std::string Table::render() const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], r[i].size());
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    std::string l;
    for (size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < r.size() ? r[i] : "";
      if (i) l += "  ";
      if (i < left_) {
        l += cell + std::string(width[i] - cell.size(), ' ');
      } else {
        l += std::string(width[i] - cell.size(), ' ') + cell;
      }
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(header_);
  size_t total = 0;
  for (size_t w : width) total += w;
  out += std::string(total + 2 * (width.size() - 1), '-') + "\n";
  for (const auto& r : rows_) line(r);
  return out;
}

}  // namespace parplan::cli
