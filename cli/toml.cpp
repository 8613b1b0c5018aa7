// Strict TOML subset reader (see toml.hpp).
#include "cli/toml.hpp"

#include <fmt/core.h>

#include "cli/text.hpp"
#include "planner/spec/error.hpp"

namespace parplan::cli {
namespace {

bool is_bare_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// TOML 1.0 decimal numbers: [+-] then 0 or a digit run without a leading zero; a float adds .digits and / or an
// exponent (underscores between digits are removed before: without_digit_underscores). Hex / octal / binary, inf and
// nan are TOML too, but not read here (Kind::other).
TomlValue::Kind number_kind(std::string_view t) {
  size_t i = !t.empty() && (t[0] == '+' || t[0] == '-') ? 1 : 0;
  const size_t int_begin = i;
  while (i < t.size() && is_digit(t[i])) ++i;
  if (i == int_begin || (t[int_begin] == '0' && i - int_begin > 1)) return TomlValue::Kind::other;
  bool fraction = false, exponent = false;
  if (i < t.size() && t[i] == '.') {
    const size_t b = ++i;
    while (i < t.size() && is_digit(t[i])) ++i;
    if (i == b) return TomlValue::Kind::other;
    fraction = true;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    const size_t b = i;
    while (i < t.size() && is_digit(t[i])) ++i;
    if (i == b) return TomlValue::Kind::other;
    exponent = true;
  }
  if (i != t.size()) return TomlValue::Kind::other;
  return fraction || exponent ? TomlValue::Kind::number : TomlValue::Kind::integer;
}

// `t` without the underscores TOML allows between two digits (4_096); `t` unchanged when an underscore stands
// elsewhere (then not a number TOML reads).
std::string without_digit_underscores(const std::string& t) {
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] != '_') {
      out += t[i];
    } else if (i == 0 || i + 1 == t.size() || !is_digit(t[i - 1]) || !is_digit(t[i + 1])) {
      return t;
    }
  }
  return out;
}

void append_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Reader {
 public:
  Reader(std::string_view text, const std::string& path, bool tables) : s_(text), path_(path), tables_(tables) {}

  std::vector<TomlItem> read() {
    std::vector<TomlItem> items;
    for (;;) {
      skip_blanks();
      if (at_end()) return items;
      if (newline()) continue;
      if (peek() == '#') {
        comment();
        continue;
      }
      if (peek() == '[' && !tables_) section();
      if (peek() == '[') {
        table_header();
        continue;
      }
      items.push_back(item());
      items.back().key.insert(0, prefix_);
    }
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw InputError(fmt::format("{}:{}: {}", path_, line_, what));
  }
  bool at_end() const { return i_ >= s_.size(); }
  char peek(size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : '\0'; }
  void skip_blanks() {
    while (!at_end() && (peek() == ' ' || peek() == '\t')) ++i_;
  }
  // Consumes a line end (LF or CRLF); false when there is none here. A CR alone is not a TOML line end.
  bool newline() {
    if (peek() == '\r') {
      if (peek(1) != '\n') fail("a carriage return without a line feed (TOML lines end in LF or CRLF)");
      ++i_;
    }
    if (peek() != '\n') return false;
    ++i_;
    ++line_;
    return true;
  }
  bool at_line_end() const { return at_end() || peek() == '\n' || peek() == '\r' || peek() == '#'; }
  // One character of text in a comment or string: UTF-8, no control character but tab. Returns its length.
  size_t text_char(std::string_view where) {
    const auto c = static_cast<unsigned char>(peek());
    const size_t n = utf8_char_length(s_, i_);
    if (n == 0) fail(fmt::format("bytes that are not UTF-8 in {}", where));
    if ((c < 0x20 && c != '\t') || c == 0x7F) fail(fmt::format("a control character in {}", where));
    return n;
  }
  void comment() {
    ++i_;
    while (!at_end() && peek() != '\n' && peek() != '\r') i_ += text_char("a comment");
  }
  // Comments and line ends inside an array.
  void skip_array_space() {
    for (;;) {
      skip_blanks();
      if (peek() == '#') {
        comment();
      } else if (at_end() || !newline()) {
        return;
      }
    }
  }
  [[noreturn]] void section() {
    const size_t end = s_.find_first_of("]\r\n", i_);
    const bool closed = end != std::string_view::npos && s_[end] == ']';
    const std::string_view header = s_.substr(i_, closed ? end + 1 - i_ : std::min(end, s_.size()) - i_);
    fail(fmt::format("section {} (sections are not supported; use top-level keys)", excerpt(header)));
  }

  // A `[name]` or `[a.b]` header line: the keys after it are "name.key" (tables mode).
  void table_header() {
    ++i_;
    if (peek() == '[') fail("arrays of tables ([[...]]) are not supported");
    prefix_.clear();
    for (;;) {
      skip_blanks();
      prefix_ += key() + ".";
      skip_blanks();
      if (peek() != '.') break;
      ++i_;
    }
    if (peek() != ']') fail("expected ']' at the end of the table header");
    ++i_;
    skip_blanks();
    if (peek() == '#') comment();
    if (!at_end() && !newline()) fail("text after the table header");
  }

  std::string key() {
    if (peek() == '"' || peek() == '\'') return quoted(peek()).text;
    const size_t b = i_;
    while (!at_end() && is_bare_key_char(peek())) ++i_;
    if (i_ == b) fail("expected a key = value line");
    return std::string(s_.substr(b, i_ - b));
  }

  TomlItem item() {
    TomlItem it;
    it.line = line_;
    it.key = key();
    skip_blanks();
    while (peek() == '.') {  // a dotted key (model.name = ...): the key "model.name" in tables mode
      ++i_;
      skip_blanks();
      const std::string part = key();
      it.key += '.';
      it.key += part;
      skip_blanks();
      if (!tables_) {
        fail(fmt::format("unknown key '{}' (sections are not supported; use top-level keys)",
                         excerpt(it.key)));
      }
    }
    if (at_line_end()) fail(fmt::format("key '{}' has no value (write {} = value)", excerpt(it.key), excerpt(it.key)));
    if (peek() != '=') fail(fmt::format("expected '=' after key '{}'", excerpt(it.key)));
    ++i_;
    skip_blanks();
    const std::string_view name = it.key;
    it.value = at_line_end() ? TomlValue{} : value(name, true);
    skip_blanks();
    if (peek() == '#') comment();
    if (!at_end() && !newline()) fail(fmt::format("text after the value of key '{}'", excerpt(it.key)));
    return it;
  }

  TomlValue value(std::string_view key, bool top) {
    const size_t b = i_;
    TomlValue v;
    if (peek() == '"' || peek() == '\'') {
      v = quoted(peek());
    } else if (peek() == '[') {
      if (!top) fail(fmt::format("key '{}': nested arrays are not supported", excerpt(key)));
      v = array(key);
    } else if (peek() == '{') {
      fail(fmt::format("key '{}': inline tables are not supported", excerpt(key)));
    } else {
      while (!at_end() && !at_line_end() && peek() != ' ' && peek() != '\t' && peek() != ',' && peek() != ']') ++i_;
      v.text = std::string(s_.substr(b, i_ - b));
      if (v.text == "true" || v.text == "false") {
        v.kind = TomlValue::Kind::boolean;
      } else {
        const std::string digits = without_digit_underscores(v.text);
        v.kind = number_kind(digits);
        if (v.kind != TomlValue::Kind::other) v.text = digits;
      }
    }
    v.raw = std::string(s_.substr(b, i_ - b));
    return v;
  }

  TomlValue array(std::string_view key) {
    TomlValue v;
    v.kind = TomlValue::Kind::array;
    ++i_;
    for (;;) {
      skip_array_space();
      if (at_end()) fail(fmt::format("key '{}': an array without its closing ']'", excerpt(key)));
      if (peek() == ']') break;
      if (peek() == ',') fail(fmt::format("key '{}': an empty element in the array", excerpt(key)));
      v.items.push_back(value(key, false));
      skip_array_space();
      if (peek() == ',') {
        ++i_;
      } else if (peek() != ']') {
        fail(fmt::format("key '{}': expected ',' or ']' in the array", excerpt(key)));
      }
    }
    ++i_;
    return v;
  }

  // A basic ("...", escapes resolved) or literal ('...') string on one line.
  TomlValue quoted(char q) {
    if (peek(1) == q && peek(2) == q) fail("multi-line strings are not supported");
    TomlValue v;
    v.kind = TomlValue::Kind::string;
    ++i_;
    for (;;) {
      if (at_end() || peek() == '\n' || peek() == '\r') fail("a string without its closing quote");
      if (peek() == q) break;
      if (q == '"' && peek() == '\\') {
        escape(v.text);
        continue;
      }
      const size_t n = text_char("a string");
      v.text.append(s_.substr(i_, n));
      i_ += n;
    }
    ++i_;
    return v;
  }

  void escape(std::string& out) {
    const char c = peek(1);
    i_ += 2;
    switch (c) {
      case 'b': out += '\b'; return;
      case 't': out += '\t'; return;
      case 'n': out += '\n'; return;
      case 'f': out += '\f'; return;
      case 'r': out += '\r'; return;
      case '"': out += '"'; return;
      case '\\': out += '\\'; return;
      case 'u':
      case 'U': break;
      default:
        fail("an unknown escape sequence in a string (TOML has \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX)");
    }
    const size_t digits = c == 'u' ? 4 : 8;
    unsigned cp = 0;
    for (size_t k = 0; k < digits; ++k, ++i_) {
      const char h = peek();
      const int d = is_digit(h)                ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
      if (d < 0) fail(fmt::format("\\{} takes {} hexadecimal digits", c, digits));
      cp = cp * 16 + static_cast<unsigned>(d);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("an escape that is not a Unicode scalar value");
    append_utf8(out, cp);
  }

  std::string_view s_;
  const std::string& path_;
  bool tables_ = false;
  std::string prefix_;  // "table." in tables mode after a header
  size_t i_ = 0, line_ = 1;
};

}  // namespace

std::vector<TomlItem> read_toml(std::string_view text, const std::string& path, bool tables) {
  return Reader(text, path, tables).read();
}

}  // namespace parplan::cli
