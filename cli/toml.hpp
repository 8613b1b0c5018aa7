// A strict reader of the TOML that parplan reads (check --config, TOML plans): top-level `key = value` lines with
// strings, integers (4_096 too), floats, booleans and arrays of them (over several lines too), comments, LF or CRLF
// line ends, all as TOML 1.0 writes them. What TOML has beyond that (tables, dotted keys, inline tables, nested arrays,
// multi-line strings) and what TOML refuses (a key without a value, text after a value, CR alone as a line end, bytes
// that are not UTF-8) is an InputError "<path>:<line>: <what>" naming the key where there is one.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace parplan::cli {

struct TomlValue {
  enum class Kind { none, string, integer, number, boolean, array, other };
  Kind kind = Kind::none;  // none: nothing after '='; other: a word TOML-parplan does not read (0x10, inf, a date)
  std::string raw;         // the value as written (for messages)
  std::string text;        // strings: the text, escapes resolved; numbers and booleans: as written
  std::vector<TomlValue> items;  // arrays: the elements (never arrays themselves)
};

struct TomlItem {
  std::string key;  // quotes removed
  size_t line = 0;  // 1-based
  TomlValue value;
};

// The items of `text` in document order; `path` names the file in errors. With `tables`, `[name]` (and `[a.b]`)
// headers and dotted keys (`a.b = 1`) are read too, the keys after a header "name.key" (torchtitan's job configs);
// arrays of tables are not.
std::vector<TomlItem> read_toml(std::string_view text, const std::string& path, bool tables = false);

}  // namespace parplan::cli
