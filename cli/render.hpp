// Terminal rendering helpers: human units (GiB, ms, %) and aligned text tables.
#pragma once
#include <string>
#include <vector>

namespace parplan::cli {

std::string fmt_bytes(double bytes);     // "74.21 GiB"
std::string fmt_seconds(double s);       // "13.21 s", "812.4 ms", "35.0 us"
std::string fmt_percent(double frac);    // "12.3%"
std::string fmt_count(double n);         // "174.6B", "1.3T", "350M"

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // Columns after the first are right-aligned.
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace parplan::cli
