// Terminal rendering helpers (see render.hpp).
#include "cli/render.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>
#include <utility>

#include "planner/spec/spec.hpp"

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

std::string count_of(int64_t n, std::string_view noun) {
  const bool es = noun.ends_with("ch") || noun.ends_with("sh") || noun.ends_with('s') || noun.ends_with('x');
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : es ? "es" : "s");
}

std::string node_shape(const ClusterSpec& c) {
  const int64_t d = c.nvlink_domain();
  return d == c.gpus_per_node ? fmt::format("{} GPUs/node", c.gpus_per_node)
                              : fmt::format("{} GPUs/node, {} per NVLink domain", c.gpus_per_node, d);
}

std::string mfu_basis(const Plan& plan) {
  const DType d = plan.gemm_dtype();
  return fmt::format("the {} dense peak ({:.0f} TFLOP/s per GPU)", to_string(d), plan.gpu.peak(d) / 1e12);
}

namespace {

// `text` in pieces of at most `width` characters, broken at spaces where it can be.
std::vector<std::string> break_words(std::string_view text, size_t width) {
  std::vector<std::string> lines;
  std::string line;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find(' ', at), text.size());
    std::string_view word = text.substr(at, end - at);
    at = end + 1;
    while (word.size() > width) {  // a word longer than the line: cut it at the width
      if (!line.empty()) lines.push_back(std::exchange(line, ""));
      lines.emplace_back(word.substr(0, width));
      word.remove_prefix(width);
    }
    if (!line.empty() && line.size() + 1 + word.size() > width) lines.push_back(std::exchange(line, ""));
    if (!line.empty()) line += ' ';
    line += word;
  }
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

// One line of `text` wrapped: the first piece at the line's own indent, the rest two further in (a line indented
// too far to leave 8 columns stays as it is).
void wrap_line(std::string_view line, size_t width, std::string& out) {
  const size_t indent = std::min(line.find_first_not_of(' '), line.size());
  const size_t more = indent + 2;
  if (line.size() <= width || more + 8 > width) {
    out.append(line);
    out += '\n';
    return;
  }
  const std::vector<std::string> pieces = break_words(line.substr(indent), width - more);
  for (size_t i = 0; i < pieces.size(); ++i) out += std::string(i == 0 ? indent : more, ' ') + pieces[i] + '\n';
}

}  // namespace

std::string wrap_lines(std::string_view text, size_t width) {
  std::string out;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    wrap_line(text.substr(at, end - at), width, out);
    at = end + 1;
  }
  if (!text.empty() && text.back() != '\n') out.pop_back();
  return out;
}

std::vector<size_t> Table::fitted_widths(size_t max_width) const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], r[i].size());
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  size_t total = 2 * (width.size() - 1);
  for (size_t w : width) total += w;
  // Narrow the widest text column until the table fits, none below its header or 8 columns.
  while (max_width > 0 && total > max_width) {
    size_t widest = width.size();
    for (size_t i = 0; i < std::min(left_, width.size()); ++i) {
      const size_t floor = std::max<size_t>(header_[i].size(), 8);
      if (width[i] > floor && (widest == width.size() || width[i] > width[widest])) widest = i;
    }
    if (widest == width.size()) break;
    const size_t floor = std::max<size_t>(header_[widest].size(), 8);
    const size_t cut = std::min(total - max_width, width[widest] - floor);
    width[widest] -= cut;
    total -= cut;
  }
  return width;
}

std::string Table::render(size_t max_width) const {
  const std::vector<size_t> width = fitted_widths(max_width);
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    std::vector<std::vector<std::string>> cells(width.size());
    size_t height = 1;
    for (size_t i = 0; i < width.size(); ++i) {
      cells[i] = break_words(i < r.size() ? r[i] : "", width[i]);
      height = std::max(height, cells[i].size());
    }
    for (size_t k = 0; k < height; ++k) {
      std::string l;
      for (size_t i = 0; i < width.size(); ++i) {
        const std::string cell = k < cells[i].size() ? cells[i][k] : "";
        if (i) l += "  ";
        const std::string pad(width[i] - std::min(width[i], cell.size()), ' ');
        l += i < left_ ? cell + pad : pad + cell;
      }
      while (!l.empty() && l.back() == ' ') l.pop_back();
      out += l + "\n";
    }
  };
  line(header_);
  size_t total = 0;
  for (size_t w : width) total += w;
  out += std::string(total + 2 * (width.size() - 1), '-') + "\n";
  const size_t indent = note_indent_ != SIZE_MAX ? note_indent_ : width.empty() ? 0 : width[0] + 2;
  for (size_t i = 0; i < rows_.size(); ++i) {
    line(rows_[i]);
    if (!notes_[i].empty()) out += wrap_lines(std::string(indent, ' ') + notes_[i] + "\n", max_width ? max_width : SIZE_MAX);
  }
  return out;
}

}  // namespace parplan::cli
