// Strict block-YAML subset reader (see yaml.hpp).
#include "cli/interop/yaml.hpp"

#include <fmt/core.h>
#include <set>

#include "cli/text.hpp"
#include "planner/spec/error.hpp"

namespace parplan::cli {
namespace {

struct Line {
  size_t number = 0;
  size_t indent = 0;
  std::string text;  // without indentation, comment and trailing blanks
};

// The position of a comment ('#' at the start or after a blank, outside quotes) in `s`, or npos.
size_t comment_start(std::string_view s) {
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      if (i == 0 || s[i - 1] == ' ' || s[i - 1] == '[' || s[i - 1] == ',' || s[i - 1] == ':') quote = c;
    } else if (c == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
      return i;
    }
  }
  return std::string_view::npos;
}

class Reader {
 public:
  Reader(std::string_view text, const std::string& path) : path_(path) { split(text); }

  std::vector<YamlLeaf> read() {
    if (!lines_.empty()) {
      if (lines_[0].indent != 0) fail(lines_[0].number, "the document does not start at column 1");
      block(0, "");
      if (at_ < lines_.size()) fail(lines_[at_].number, "unexpected indentation");
    }
    return std::move(leaves_);
  }

 private:
  [[noreturn]] void fail(size_t line, std::string_view what) const {
    throw InputError(fmt::format("{}:{}: {}", path_, line, what));
  }

  void split(std::string_view text) {
    size_t number = 0;
    for (size_t b = 0; b <= text.size();) {
      size_t e = text.find('\n', b);
      if (e == std::string_view::npos) e = text.size();
      std::string_view s = text.substr(b, e - b);
      ++number;
      b = e + 1;
      if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
      for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = utf8_char_length(s, i);
        if (n == 0) fail(number, "bytes that are not UTF-8");
        if ((c < 0x20 && c != '\t') || c == 0x7F) fail(number, "a control character");
        i += n;
      }
      size_t indent = 0;
      while (indent < s.size() && s[indent] == ' ') ++indent;
      std::string_view rest = s.substr(indent);
      rest = rest.substr(0, comment_start(rest));
      while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
      if (rest.empty()) continue;
      if (rest.front() == '\t') fail(number, "a tab in the indentation (YAML indents with spaces)");
      if (rest == "---" && lines_.empty() && leaves_.empty() && !seen_document_) {
        seen_document_ = true;
        continue;
      }
      if (rest == "---" || rest == "...") fail(number, "several documents in one file are not supported");
      if (rest.front() == '%') fail(number, "YAML directives are not supported");
      lines_.push_back({number, indent, std::string(rest)});
      if (e == text.size()) break;
    }
  }

  static bool is_item(const std::string& t) { return t == "-" || t.starts_with("- "); }

  // The block at `indent` starting at the current line: a list when it starts with "- ", else a mapping.
  void block(size_t indent, const std::string& path) {
    struct Depth {  // nesting is bounded: "- - - - ..." on one line would otherwise recurse once per dash
      size_t& d;
      explicit Depth(size_t& depth) : d(++depth) {}
      ~Depth() { --d; }
    } guard(depth_);
    if (depth_ > kMaxDepth) fail(lines_[at_].number, fmt::format("nesting deeper than {} levels", kMaxDepth));
    if (is_item(lines_[at_].text)) {
      list(indent, path);
    } else {
      mapping(indent, path);
    }
  }

  // The value after "key:" (or "-") on line `l`, or the block on the lines below it.
  void value_of(const Line& l, std::string_view rest, size_t indent, const std::string& path, bool list_may_align) {
    if (!rest.empty()) {
      scalar(l.number, rest, path);
      return;
    }
    const bool below = at_ < lines_.size() && lines_[at_].indent > indent;
    const bool aligned_list = list_may_align && at_ < lines_.size() && lines_[at_].indent == indent && is_item(lines_[at_].text);
    if (below || aligned_list) {
      block(lines_[at_].indent, path);
    } else {
      leaves_.push_back({path, "", l.number, false});
    }
  }

  void mapping(size_t indent, const std::string& prefix) {
    std::set<std::string> keys;
    while (at_ < lines_.size() && lines_[at_].indent == indent && !is_item(lines_[at_].text)) {
      const Line l = lines_[at_++];
      size_t colon = std::string::npos;
      std::string key;
      if (l.text.front() == '"' || l.text.front() == '\'') {
        const size_t close = l.text.find(l.text.front(), 1);
        if (close == std::string::npos) fail(l.number, "a key without its closing quote");
        key = l.text.substr(1, close - 1);
        colon = close + 1 < l.text.size() && l.text[close + 1] == ':' ? close + 1 : std::string::npos;
      } else {
        for (size_t i = 0; i < l.text.size(); ++i) {
          if (l.text[i] == ':' && (i + 1 == l.text.size() || l.text[i + 1] == ' ')) {
            colon = i;
            break;
          }
        }
        if (colon != std::string::npos) key = l.text.substr(0, colon);
      }
      if (colon == std::string::npos) fail(l.number, fmt::format("expected 'key: value', not '{}'", excerpt(l.text)));
      if (key.empty()) fail(l.number, "an empty key");
      if (key == "<<" || key.front() == '?' || key.front() == '&' || key.front() == '!') {
        fail(l.number, fmt::format("key '{}': merge keys, complex keys, anchors and tags are not supported", excerpt(key)));
      }
      if (!keys.insert(key).second) fail(l.number, fmt::format("key '{}' is given twice in one mapping", excerpt(key)));
      std::string_view rest = std::string_view(l.text).substr(colon + 1);
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      value_of(l, rest, indent, prefix.empty() ? key : prefix + "." + key, true);
    }
    if (at_ < lines_.size() && lines_[at_].indent > indent) fail(lines_[at_].number, "unexpected indentation");
  }

  void list(size_t indent, const std::string& prefix) {
    for (size_t n = 0; at_ < lines_.size() && lines_[at_].indent == indent && is_item(lines_[at_].text); ++n) {
      Line& l = lines_[at_];
      const std::string path = fmt::format("{}[{}]", prefix, n);
      const size_t skip = l.text.find_first_not_of(' ', 1);
      const std::string rest = skip == std::string::npos ? "" : l.text.substr(skip);
      const bool is_map = !rest.empty() && rest.front() != '"' && rest.front() != '\'' && rest.front() != '[' &&
                          (rest.find(": ") != std::string::npos || rest.back() == ':');
      if (is_map || is_item(rest)) {
        // "- key: value": a mapping (or list) whose first line starts after the dash.
        l.indent += skip;
        l.text = rest;
        block(l.indent, path);
        continue;
      }
      ++at_;
      value_of(l, rest, indent, path, false);
    }
    if (at_ < lines_.size() && lines_[at_].indent > indent) fail(lines_[at_].number, "unexpected indentation");
  }

  void scalar(size_t line, std::string_view v, const std::string& path) {
    const char c = v.front();
    if (c == '"' || c == '\'') {
      if (v.size() < 2 || v.back() != c) fail(line, fmt::format("key '{}': a string without its closing quote", excerpt(path)));
      const std::string_view inner = v.substr(1, v.size() - 2);
      if (c == '"' && inner.find('\\') != std::string_view::npos) {
        fail(line, fmt::format("key '{}': escapes in double-quoted strings are not supported", excerpt(path)));
      }
      leaves_.push_back({path, std::string(inner), line, true});
      return;
    }
    if (c == '&' || c == '*' || c == '!') fail(line, fmt::format("key '{}': anchors, aliases and tags are not supported", excerpt(path)));
    if (c == '|' || c == '>') fail(line, fmt::format("key '{}': multi-line strings are not supported", excerpt(path)));
    if (c == '{' && v != "{}") fail(line, fmt::format("key '{}': flow mappings are not supported (write a block mapping)", excerpt(path)));
    if (c == '[' && (v.back() != ']' || v.find('[', 1) != std::string_view::npos || v.find('{') != std::string_view::npos)) {
      fail(line, fmt::format("key '{}': only one-line flow lists of scalars are supported", excerpt(path)));
    }
    if (c == '@' || c == '`') fail(line, fmt::format("key '{}': a plain scalar cannot start with '{}'", excerpt(path), c));
    leaves_.push_back({path, std::string(v), line, false});
  }

  const std::string& path_;
  std::vector<Line> lines_;
  std::vector<YamlLeaf> leaves_;
  size_t at_ = 0, depth_ = 0;
  bool seen_document_ = false;
  static constexpr size_t kMaxDepth = 64;
};

}  // namespace

std::vector<YamlLeaf> read_yaml(std::string_view text, const std::string& path) { return Reader(text, path).read(); }

}  // namespace parplan::cli
