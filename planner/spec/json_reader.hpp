// Strict JSON object reader: typed, range-checked getters that name the JSON path in every error, and
// finish() rejects keys nobody asked for. Errors are InputError("<file>: <path>: <what>").
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "planner/spec/error.hpp"
#include "planner/spec/spec.hpp"

namespace parplan {

class JsonReader {
 public:
  // `where` names the document (a file path or "plan"); `path` is the JSON pointer of this object.
  JsonReader(const nlohmann::json& j, std::string where, std::string path = "");

  bool has(std::string_view key) const;
  int64_t get_int(std::string_view key, int64_t min, int64_t max);
  int64_t get_int(std::string_view key, int64_t fallback, int64_t min, int64_t max);
  double get_double(std::string_view key, double min, double max);
  double get_double(std::string_view key, double fallback, double min, double max);
  bool get_bool(std::string_view key);
  bool get_bool(std::string_view key, bool fallback);
  std::string get_string(std::string_view key);
  std::string get_string(std::string_view key, std::string fallback);
  template <typename E>
  E get_enum(std::string_view key, E fallback) {
    if (!has(key)) return fallback;
    std::string s = get_string(key);
    E out;
    if (!parse_enum(s, out)) fail(key, "unknown value '" + excerpt(s) + "'");
    return out;
  }
  JsonReader object(std::string_view key);
  const nlohmann::json& raw(std::string_view key);  // marks the key as used
  // Rejects every key that was not read.
  void finish() const;
  [[noreturn]] void fail(std::string_view key, std::string_view what) const;
  std::string path_of(std::string_view key) const;
  const std::string& where() const { return where_; }

 private:
  const nlohmann::json* find(std::string_view key);
  const nlohmann::json& j_;
  std::string where_, path_;
  std::set<std::string, std::less<>> used_;
};

// Parses text as JSON; a syntax error becomes InputError naming `where` and the byte offset.
nlohmann::json parse_json_text(std::string_view text, std::string_view where);

}  // namespace parplan
