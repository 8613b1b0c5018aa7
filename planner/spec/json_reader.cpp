// Strict JSON object reader (see json_reader.hpp).
#include "planner/spec/json_reader.hpp"

#include <cmath>
#include <fmt/core.h>
#include <unordered_set>

namespace parplan {

JsonReader::JsonReader(const nlohmann::json& j, std::string where, std::string path)
    : j_(j), where_(std::move(where)), path_(std::move(path)) {
  if (!j_.is_object()) {
    throw InputError(fmt::format("{}: {}: expected a JSON object", where_, path_.empty() ? "/" : path_));
  }
}

std::string JsonReader::path_of(std::string_view key) const { return fmt::format("{}/{}", path_, excerpt(key)); }

void JsonReader::fail(std::string_view key, std::string_view what) const {
  throw InputError(fmt::format("{}: {}: {}", where_, path_of(key), what));
}

bool JsonReader::has(std::string_view key) const { return j_.find(std::string(key)) != j_.end(); }

const nlohmann::json* JsonReader::find(std::string_view key) {
  auto it = j_.find(std::string(key));
  if (it == j_.end()) return nullptr;
  used_.insert(std::string(key));
  return &*it;
}

const nlohmann::json& JsonReader::raw(std::string_view key) {
  const nlohmann::json* v = find(key);
  if (!v) fail(key, "missing required key");
  return *v;
}

int64_t JsonReader::get_int(std::string_view key, int64_t min, int64_t max) {
  const nlohmann::json& v = raw(key);
  int64_t x = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) fail(key, "integer too large");
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double f = v.get<double>();
    if (!std::isfinite(f) || f != std::floor(f) || std::fabs(f) > 9.0e18) fail(key, "expected an integer");
    x = static_cast<int64_t>(f);
  } else {
    fail(key, fmt::format("expected an integer, got {}", v.type_name()));
  }
  if (x < min || x > max) fail(key, fmt::format("{} is out of range [{}, {}]", x, min, max));
  return x;
}

int64_t JsonReader::get_int(std::string_view key, int64_t fallback, int64_t min, int64_t max) {
  return has(key) ? get_int(key, min, max) : fallback;
}

double JsonReader::get_double(std::string_view key, double min, double max) {
  const nlohmann::json& v = raw(key);
  if (!v.is_number()) fail(key, fmt::format("expected a number, got {}", v.type_name()));
  const double x = v.get<double>();
  if (!std::isfinite(x)) fail(key, "must be finite");
  if (x < min || x > max) fail(key, fmt::format("{} is out of range [{}, {}]", x, min, max));
  return x;
}

double JsonReader::get_double(std::string_view key, double fallback, double min, double max) {
  return has(key) ? get_double(key, min, max) : fallback;
}

bool JsonReader::get_bool(std::string_view key) {
  const nlohmann::json& v = raw(key);
  if (!v.is_boolean()) fail(key, fmt::format("expected true or false, got {}", v.type_name()));
  return v.get<bool>();
}

bool JsonReader::get_bool(std::string_view key, bool fallback) { return has(key) ? get_bool(key) : fallback; }

std::string JsonReader::get_string(std::string_view key) {
  const nlohmann::json& v = raw(key);
  if (!v.is_string()) fail(key, fmt::format("expected a string, got {}", v.type_name()));
  return v.get<std::string>();
}

std::string JsonReader::get_string(std::string_view key, std::string fallback) {
  return has(key) ? get_string(key) : fallback;
}

JsonReader JsonReader::object(std::string_view key) { return JsonReader(raw(key), where_, path_of(key)); }

void JsonReader::finish() const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (!used_.count(it.key())) {
      throw InputError(fmt::format("{}: {}: unknown key", where_, path_of(it.key())));
    }
  }
}

namespace {

// The SAX events of nlohmann's DOM builder, plus what parplan refuses: a key given twice in one object (nlohmann keeps
// the last: "tp": 8 then "tp": 4 would read as 4), nesting deeper than kMaxDepth (no parplan document nests deeper
// than a few levels). The JSON path of the value being read is kept for the error.
// nlohmann's callback parser (json::parse with a parser_callback_t) rescans the enclosing object or array at the end
// of every nested value, quadratic in its width: 65,536 `{}` members took minutes. This builder is linear.
class StrictDomBuilder {
 public:
  using json = nlohmann::json;
  StrictDomBuilder(json& out, std::string_view where) : dom_(out, true), where_(where) {}

  bool null() { return value(dom_.null()); }
  bool boolean(bool v) { return value(dom_.boolean(v)); }
  bool number_integer(json::number_integer_t v) { return value(dom_.number_integer(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return value(dom_.number_unsigned(v)); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return value(dom_.number_float(v, s)); }
  bool string(json::string_t& v) { return value(dom_.string(v)); }
  bool binary(json::binary_t& v) { return value(dom_.binary(v)); }
  bool start_object(std::size_t n) { return open(false) && dom_.start_object(n); }
  bool start_array(std::size_t n) { return open(true) && dom_.start_array(n); }
  bool end_object() { return close() && dom_.end_object(); }
  bool end_array() { return close() && dom_.end_array(); }
  bool key(json::string_t& k) {
    Frame& f = stack_.back();
    if (!f.keys.insert(k).second) throw InputError(fmt::format("{}: {}: duplicate key", where_, path(k)));
    f.key = k;
    return dom_.key(k);
  }
  template <class Exception>
  bool parse_error(std::size_t byte, const std::string& /*token*/, const Exception& ex) {
    if (ex.id == 406) throw InputError(fmt::format("{}: malformed JSON: a number is out of range", where_));
    if (std::string_view(ex.what()).find("; expected end of input") != std::string_view::npos) trailing(byte);
    throw InputError(fmt::format("{}: malformed JSON at byte {}", where_, byte));
  }
  // Text after the document: nlohmann stops at a NUL byte as at the end of the input, so "{}\0garbage" parsed.
  [[noreturn]] void trailing(std::size_t byte) const {
    throw InputError(fmt::format("{}: malformed JSON at byte {}: text after the JSON document (only whitespace may "
                                 "follow it)",
                                 where_, byte));
  }

 private:
  static constexpr size_t kMaxDepth = 256;
  struct Frame {
    bool array = false;
    size_t index = 0;                      // arrays: the element being parsed
    std::string key;                       // objects: the key being parsed (for the path)
    std::unordered_set<std::string> keys;  // objects: the keys seen
  };
  bool open(bool array) {
    if (stack_.size() >= kMaxDepth) {
      throw InputError(fmt::format("{}: JSON nested deeper than {} levels", where_, kMaxDepth));
    }
    stack_.push_back(Frame{array, 0, {}, {}});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return value(true);
  }
  bool value(bool ok) {
    if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
    return ok;
  }
  // The JSON path of `last` inside the innermost object (each key cut to an excerpt).
  std::string path(const std::string& last) const {
    std::string out;
    for (size_t i = 0; i + 1 < stack_.size(); ++i) {
      out.push_back('/');
      out.append(stack_[i].array ? std::to_string(stack_[i].index) : excerpt(stack_[i].key));
    }
    out.push_back('/');
    out.append(excerpt(last));
    return out;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::string_view where_;
  std::vector<Frame> stack_;
};

}  // namespace

nlohmann::json parse_json_text(std::string_view text, std::string_view where) {
  nlohmann::json out;
  StrictDomBuilder sax(out, where);
  nlohmann::json::sax_parse(text.begin(), text.end(), &sax);
  // A NUL byte outside a string ends nlohmann's input; inside one it is a syntax error. After a document that parsed,
  // the first NUL is where the trailing bytes begin.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) sax.trailing(nul + 1);
  return out;
}

}  // namespace parplan
