// Terminal rendering helpers: human units (GiB, ms, %), counts with their noun, aligned text tables, and prose
// wrapped to the terminal width every report keeps to by default.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace parplan {
struct Plan;
struct ClusterSpec;
}

namespace parplan::cli {

// The width text reports keep to by default; --wide lifts it.
inline constexpr size_t kTextWidth = 120;
inline constexpr const char* kWideHelp = "Print long lines whole (by default they wrap at 120 columns)";

std::string fmt_bytes(double bytes);     // "74.21 GiB"
std::string fmt_seconds(double s);       // "13.21 s", "812.4 ms", "35.0 us"
std::string fmt_percent(double frac);    // "12.3%"
std::string fmt_count(double n);         // "174.6B", "1.3T", "350M"
std::string count_of(int64_t n, std::string_view noun);  // "1 GPU", "64 GPUs", "8 microbatches"
// What a plan's MFU is measured against: "the bf16 dense peak (989 TFLOP/s per GPU)" (its GEMM precision's).
std::string mfu_basis(const Plan& plan);
// A cluster's node and NVLink domain: "8 GPUs/node", or "4 GPUs/node, 72 per NVLink domain" where they differ.
std::string node_shape(const ClusterSpec& c);

// Every line of `text` longer than `width` broken at spaces (a word longer than the line at the width); the
// continuation lines are indented two more than the line they continue.
std::string wrap_lines(std::string_view text, size_t width = kTextWidth);

class Table {
 public:
  // The first `left_columns` columns are left-aligned (text), the rest right-aligned (numbers).
  explicit Table(std::vector<std::string> header, size_t left_columns = 1)
      : header_(std::move(header)), left_(left_columns) {}
  // A row; a non-empty `note` goes on the lines under it, indented (note_indent()) and wrapped to the width.
  void add(std::vector<std::string> row, std::string note = "") {
    rows_.push_back(std::move(row));
    notes_.push_back(std::move(note));
  }
  // Where notes start: by default under the second column.
  void note_indent(size_t columns) { note_indent_ = columns; }
  // Lines of at most `max_width` columns (0: no limit) where the table can: the widest text columns narrow to fit and
  // their cells wrap at spaces onto more lines.
  std::string render(size_t max_width = 0) const;

 private:
  std::vector<size_t> fitted_widths(size_t max_width) const;

  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::string> notes_;
  size_t left_;
  size_t note_indent_ = SIZE_MAX;
};

}  // namespace parplan::cli
