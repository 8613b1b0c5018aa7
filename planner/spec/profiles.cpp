// Profile registry (see profiles.hpp).
#include "planner/spec/profiles.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/core.h>
#include <unordered_set>

#include "planner/spec/embedded_profiles.hpp"
#include "planner/spec/json_reader.hpp"
#include "planner/spec/spec_json.hpp"

namespace parplan {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}

template <typename V>
auto lookup(const V& v, std::string_view name) -> decltype(&v.front().spec) {
  const std::string key = lower(name);
  for (auto it = v.rbegin(); it != v.rend(); ++it) {  // later (user) profiles win
    if (std::find(it->keys.begin(), it->keys.end(), key) != it->keys.end()) return &it->spec;
  }
  return nullptr;
}

// A profile that shares a name or alias with an earlier one of its kind replaces it: it answers to all of the earlier
// profile's names and aliases too (overriding "H100-SXM5-80GB" also takes "h100").
template <typename V>
void inherit_keys(const V& earlier, std::vector<std::string>& keys) {
  std::unordered_set<std::string> have(keys.begin(), keys.end());
  for (const auto& n : earlier) {
    const bool shares = std::any_of(n.keys.begin(), n.keys.end(), [&](const std::string& k) { return have.count(k) > 0; });
    if (!shares) continue;
    for (const std::string& k : n.keys) {
      if (have.insert(k).second) keys.push_back(k);
    }
  }
}

// A profile name or alias: printable text of reasonable length (it is echoed in tables and one-line errors).
void check_profile_name(const JsonReader& r, std::string_view key, std::string_view name) {
  if (name.empty()) r.fail(key, "empty name");
  if (name.size() > 200) r.fail(key, fmt::format("a name of {} bytes (at most 200)", name.size()));
  for (const char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) r.fail(key, "a control character in a name");
  }
}
constexpr size_t kMaxAliases = 1000;

template <typename V>
std::string known_names(const V& v) {
  std::vector<std::string> names;
  for (const auto& n : v) names.push_back(n.keys.front());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

ProfileSet ProfileSet::embedded() {
  ProfileSet set;
  for (const auto& f : embedded_profiles()) set.add(f.content, "profiles/" + std::string(f.path));
  for (Entry& e : set.entries_) e.embedded = true;
  return set;
}

std::string ProfileSet::add(std::string_view text, const std::string& where) {
  const nlohmann::json j = parse_json_text(text, where);
  JsonReader r(j, where);
  const std::string kind = r.get_string("kind");
  std::vector<std::string> keys;
  std::vector<std::string> aliases;
  if (r.has("aliases")) {
    const nlohmann::json& a = r.raw("aliases");
    if (!a.is_array()) r.fail("aliases", "expected an array of strings");
    if (a.size() > kMaxAliases) r.fail("aliases", fmt::format("{} aliases (at most {})", a.size(), kMaxAliases));
    for (const auto& x : a) {
      if (!x.is_string()) r.fail("aliases", "expected an array of strings");
      aliases.push_back(x.get<std::string>());
      check_profile_name(r, "aliases", aliases.back());
    }
  }
  std::string name;
  if (kind == "gpu") {
    GpuSpec g = gpu_from_json(r);
    name = g.name;
    r.finish();
    keys.push_back(lower(name));
    for (auto& a : aliases) keys.push_back(lower(a));
    inherit_keys(gpus_, keys);
    gpus_.push_back({std::move(g), keys});
  } else if (kind == "cluster") {
    ClusterSpec c = cluster_from_json(r);
    name = c.name;
    r.finish();
    keys.push_back(lower(name));
    for (auto& a : aliases) keys.push_back(lower(a));
    inherit_keys(clusters_, keys);
    clusters_.push_back({std::move(c), keys});
  } else if (kind == "model") {
    ModelSpec m = model_from_json(r);
    name = m.name;
    r.finish();
    keys.push_back(lower(name));
    for (auto& a : aliases) keys.push_back(lower(a));
    inherit_keys(models_, keys);
    models_.push_back({std::move(m), keys});
  } else {
    r.fail("kind", fmt::format("unknown kind '{}' (expected gpu, cluster or model)", kind));
  }
  check_profile_name(r, "name", name);
  const size_t index = kind == "gpu" ? gpus_.size() - 1 : kind == "cluster" ? clusters_.size() - 1 : models_.size() - 1;
  entries_.push_back({kind, name, where, aliases, index, false});
  return kind;
}

std::vector<std::string> ProfileSet::live_keys(const Entry& e) const {
  const std::vector<std::string>& names = e.kind == "gpu"       ? gpus_.at(e.index).keys
                                          : e.kind == "cluster" ? clusters_.at(e.index).keys
                                                                : models_.at(e.index).keys;
  std::vector<std::string> live;
  for (const std::string& n : names) {
    const bool mine = e.kind == "gpu"       ? find_gpu(n) == &gpu_of(e)
                      : e.kind == "cluster" ? find_cluster(n) == &cluster_of(e)
                                            : find_model(n) == &model_of(e);
    if (mine) live.push_back(n);
  }
  return live;
}

const GpuSpec* ProfileSet::find_gpu(std::string_view name) const { return lookup(gpus_, name); }
const ClusterSpec* ProfileSet::find_cluster(std::string_view name) const { return lookup(clusters_, name); }
const ModelSpec* ProfileSet::find_model(std::string_view name) const { return lookup(models_, name); }

const GpuSpec& ProfileSet::gpu(std::string_view name, std::string_view flag) const {
  if (const GpuSpec* g = find_gpu(name)) return *g;
  throw InputError(fmt::format("{}: unknown GPU '{}' (known: {})", flag, name, known_names(gpus_)));
}
const ClusterSpec& ProfileSet::cluster(std::string_view name, std::string_view flag) const {
  if (const ClusterSpec* c = find_cluster(name)) return *c;
  throw InputError(fmt::format("{}: unknown cluster '{}' (known: {})", flag, name, known_names(clusters_)));
}
const ModelSpec& ProfileSet::model(std::string_view name, std::string_view flag) const {
  if (const ModelSpec* m = find_model(name)) return *m;
  throw InputError(fmt::format("{}: unknown model '{}' (known: {})", flag, name, known_names(models_)));
}

std::string validate_profile(std::string_view text, const std::string& where) {
  ProfileSet scratch;
  return scratch.add(text, where);
}

}  // namespace parplan
