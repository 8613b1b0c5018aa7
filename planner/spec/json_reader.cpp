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

std::string JsonReader::path_of(std::string_view key) const { return fmt::format("{}/{}", path_, key); }

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

nlohmann::json parse_json_text(std::string_view text, std::string_view where) {
  // nlohmann keeps the last of two equal keys; a document that says "tp": 8 and "tp": 4 is an error here, reported
  // with its JSON path. Nesting is capped (no parplan document nests deeper than a few levels).
  constexpr int kMaxDepth = 256;
  struct Frame {
    bool array = false;
    size_t index = 0;                     // arrays: the element being parsed
    std::string key;                      // objects: the key being parsed (for the path)
    std::unordered_set<std::string> keys;  // objects: the keys seen (a set: wide objects stay linear)
  };
  std::vector<Frame> stack;
  auto path = [&](const std::string& last) {
    std::string out;
    for (size_t i = 0; i + 1 < stack.size(); ++i) {
      out.push_back('/');
      out.append(stack[i].array ? std::to_string(stack[i].index) : stack[i].key);
    }
    out.push_back('/');
    out.append(last);
    return out;
  };
  auto element_done = [&] {
    if (!stack.empty() && stack.back().array) ++stack.back().index;
  };
  const nlohmann::json::parser_callback_t cb = [&](int depth, nlohmann::json::parse_event_t event,
                                                   nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (depth > kMaxDepth) throw InputError(fmt::format("{}: JSON nested deeper than {} levels", where, kMaxDepth));
    switch (event) {
      case E::object_start:
      case E::array_start:
        stack.push_back(Frame{event == E::array_start, 0, {}, {}});
        break;
      case E::key: {
        Frame& f = stack.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) throw InputError(fmt::format("{}: {}: duplicate key", where, path(f.key)));
        break;
      }
      case E::object_end:
      case E::array_end:
        stack.pop_back();
        element_done();
        break;
      case E::value:
        element_done();
        break;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), cb);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("{}: malformed JSON at byte {}", where, e.byte));
  } catch (const nlohmann::json::exception&) {  // out_of_range: a number such as 1e309 overflows a double
    throw InputError(fmt::format("{}: malformed JSON: a number is out of range", where));
  }
}

}  // namespace parplan
