// Terminal rendering helpers: human units (GiB, ms, %) and aligned text tables.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace parplan::cli {

std::string fmt_bytes(double bytes);     // "74.21 GiB"
std::string fmt_seconds(double s);       // "13.21 s", "812.4 ms", "35.0 us"
std::string fmt_percent(double frac);    // "12.3%"
std::string fmt_count(double n);         // "174.6B", "1.3T", "350M"
std::string count_of(int64_t n, std::string_view noun);  // "1 GPU", "64 GPUs" (the plural adds an s)

class Table {
 public:
  // The first `left_columns` columns are left-aligned (text), the rest right-aligned (numbers).
  explicit Table(std::vector<std::string> header, size_t left_columns = 1)
      : header_(std::move(header)), left_(left_columns) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  size_t left_;
};

}  // namespace parplan::cli
