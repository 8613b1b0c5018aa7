// Framework names, format detection and the shared bookkeeping of the config readers (see framework.hpp).
#include "cli/interop/framework.hpp"

#include <cctype>
#include <fmt/core.h>

#include "planner/spec/error.hpp"

namespace parplan::cli {

std::string_view framework_name(Framework f) {
  switch (f) {
    case Framework::megatron: return "megatron";
    case Framework::nemo: return "nemo";
    case Framework::torchtitan: return "torchtitan";
    case Framework::deepspeed: return "deepspeed";
    case Framework::nanotron: return "nanotron";
  }
  return "";
}

std::string_view framework_document(Framework f) {
  switch (f) {
    case Framework::megatron: return "a Megatron-LM launch script or YAML args";
    case Framework::nemo: return "a NeMo YAML config";
    case Framework::torchtitan: return "a torchtitan TOML job config";
    case Framework::deepspeed: return "a DeepSpeed JSON config";
    case Framework::nanotron: return "a nanotron YAML config";
  }
  return "";
}

std::optional<Framework> parse_framework(const std::string& value, std::string_view flag) {
  if (value == "auto") return std::nullopt;
  for (Framework f : {Framework::megatron, Framework::nemo, Framework::torchtitan, Framework::deepspeed, Framework::nanotron}) {
    if (value == framework_name(f)) return f;
  }
  throw InputError(fmt::format("{}: unknown format '{}' (use {})", flag, excerpt(value), kFrameworkChoices));
}

void Imported::set(const std::string& flag, const std::string& value, const std::string& origin, const std::string& where) {
  const auto [it, fresh] = flags.emplace(flag, Setting{value, origin, ""});
  if (fresh || it->second.value == value) return;
  throw InputError(fmt::format("{}: {} says {} but {} says {}: give one", where, it->second.origin,
                               it->second.value.empty() ? "on" : it->second.value, origin, value.empty() ? "on" : value));
}

void Imported::assume(const std::string& flag, const std::string& value, const std::string& why) {
  if (has(flag)) return;
  flags[flag] = Setting{value, "assumed: " + why, ""};
  assumed.push_back(fmt::format("{}{}{}: {}", flag, value.empty() ? "" : " ", value, why));
}

std::optional<int64_t> decimal(std::string_view s) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  if (s.size() > 1 && s[0] == '0') return std::nullopt;
  int64_t v = 0;
  for (const char c : s) v = v * 10 + (c - '0');
  return v;
}

std::string dashed(std::string s) {
  for (char& c : s) c = c == '_' ? '-' : c;
  return s;
}

namespace {

bool ends_with(const std::string& s, std::string_view e) { return s.size() >= e.size() && s.ends_with(e); }

// The YAML flavour from the top-level keys that only one of the frameworks writes.
std::optional<Framework> guess_yaml(std::string_view text) {
  auto top = [&](std::string_view key) {
    const std::string k = std::string(key) + ":";
    return text.starts_with(k) || text.find("\n" + k) != std::string_view::npos;
  };
  if (top("trainer") || top("exp_manager")) return Framework::nemo;
  if (top("parallelism") || top("tokens") || top("general")) return Framework::nanotron;
  if (text.find("tensor_model_parallel_size") != std::string_view::npos || top("language_model") || top("model_parallel")) {
    return Framework::megatron;
  }
  return std::nullopt;
}

// A word "pretrain_<name>.py" in `text` (the Megatron-LM entry points).
bool runs_pretrain(std::string_view text) {
  for (size_t at = text.find("pretrain_"); at != std::string_view::npos; at = text.find("pretrain_", at + 1)) {
    size_t e = at + 9;
    while (e < text.size() && (std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '_')) ++e;
    if (text.substr(e, 3) == ".py") return true;
  }
  return false;
}

}  // namespace

std::optional<Framework> guess_framework(std::string_view text, const std::string& path) {
  size_t b = 0;
  while (b < text.size() && (text[b] == ' ' || text[b] == '\t' || text[b] == '\n' || text[b] == '\r')) ++b;
  const std::string_view body = text.substr(b);
  if (body.starts_with("{")) return Framework::deepspeed;
  if (body.starts_with("#!")) return Framework::megatron;
  if (ends_with(path, ".yaml") || ends_with(path, ".yml")) return guess_yaml(text);
  if (runs_pretrain(text)) return Framework::megatron;
  // TOML: a [table] header line; YAML: "key:" lines.
  if (body.starts_with("[") || text.find("\n[") != std::string_view::npos) return Framework::torchtitan;
  if (auto y = guess_yaml(text)) return y;
  if (ends_with(path, ".sh") || ends_with(path, ".bash")) return Framework::megatron;
  if (ends_with(path, ".toml")) return Framework::torchtitan;
  if (ends_with(path, ".json")) return Framework::deepspeed;
  return std::nullopt;
}

Imported import_framework(std::string_view text, const std::string& path, std::optional<Framework> format) {
  const std::optional<Framework> looks = guess_framework(text, path);
  const bool yaml = ends_with(path, ".yaml") || ends_with(path, ".yml");
  if (!format) {
    if (!looks) {
      throw InputError(fmt::format("{}: cannot tell the format (not a launch script, JSON, TOML or a NeMo / nanotron / "
                                   "Megatron YAML): give --format ({})", path, kFrameworkChoices));
    }
    format = looks;
  } else if (looks && *looks != *format) {
    throw InputError(fmt::format("--format {}: '{}' looks like {}, not {} (give --format {})", framework_name(*format),
                                 path, framework_document(*looks), framework_document(*format), framework_name(*looks)));
  }
  switch (*format) {
    case Framework::megatron:
      return yaml || (!runs_pretrain(text) && text.find(": ") != std::string_view::npos)
                 ? import_megatron_yaml(text, path)
                 : import_megatron_script(text, path);
    case Framework::nemo: return import_nemo(text, path);
    case Framework::torchtitan: return import_torchtitan(text, path);
    case Framework::deepspeed: return import_deepspeed(text, path);
    case Framework::nanotron: return import_nanotron(text, path);
  }
  return {};
}

}  // namespace parplan::cli
