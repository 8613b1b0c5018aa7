// Profile registry (see profiles.hpp).
#include "planner/spec/profiles.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/core.h>
#include <unordered_set>

#include "planner/spec/embedded_profiles.hpp"
#include "planner/spec/json_reader.hpp"
#include "planner/spec/spec_json.hpp"

#include "planner/spec/units.hpp"

namespace parplan {
namespace {

template <typename V, typename I>
auto lookup(const V& v, const I& ix, std::string_view name) -> decltype(&v.front().spec) {
  const auto it = ix.group_of.find(ascii_lower(name));
  return it == ix.group_of.end() ? nullptr : &v[ix.owner[it->second]].spec;
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

// The names of a kind for an error line: the first kMaxKnownNames in order, then how many more (2,000 --profile files
// would make a line of 400 KB).
constexpr size_t kMaxKnownNames = 30;
template <typename V>
std::string known_names(const V& v) {
  std::vector<std::string> names;
  for (const auto& n : v) names.push_back(n.keys.front());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::string out;
  for (size_t i = 0; i < names.size() && i < kMaxKnownNames; ++i) out += (out.empty() ? "" : ", ") + names[i];
  if (names.size() > kMaxKnownNames) out += fmt::format(" and {} more: parplan profiles list", names.size() - kMaxKnownNames);
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
  std::vector<std::pair<size_t, std::string>> replaced;
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
    keys.push_back(ascii_lower(name));
    for (auto& a : aliases) keys.push_back(ascii_lower(a));
    replaced = claim(gpus_, gpu_keys_, std::move(g), std::move(keys));
  } else if (kind == "cluster") {
    ClusterSpec c = cluster_from_json(r);
    name = c.name;
    r.finish();
    keys.push_back(ascii_lower(name));
    for (auto& a : aliases) keys.push_back(ascii_lower(a));
    replaced = claim(clusters_, cluster_keys_, std::move(c), std::move(keys));
  } else if (kind == "model") {
    ModelSpec m = model_from_json(r);
    name = m.name;
    r.finish();
    keys.push_back(ascii_lower(name));
    for (auto& a : aliases) keys.push_back(ascii_lower(a));
    replaced = claim(models_, model_keys_, std::move(m), std::move(keys));
  } else {
    r.fail("kind", fmt::format("unknown kind '{}' (expected gpu, cluster or model)", excerpt(kind)));
  }
  check_profile_name(r, "name", name);
  const size_t index = kind == "gpu" ? gpus_.size() - 1 : kind == "cluster" ? clusters_.size() - 1 : models_.size() - 1;
  entries_.push_back({kind, name, where, aliases, index, false, std::move(replaced)});
  return kind;
}

template <typename T>
std::vector<std::pair<size_t, std::string>> ProfileSet::claim(std::vector<Named<T>>& v, KeyIndex& ix, T spec,
                                                              std::vector<std::string> keys) {
  const size_t me = v.size();
  // The groups this profile's names belong to: it takes them all over; the largest absorbs the others.
  std::vector<size_t> taken;
  std::unordered_set<size_t> seen;
  std::vector<std::pair<size_t, std::string>> replaced;  // the entry answering to each group, with the name shared
  for (const std::string& k : keys) {
    const auto it = ix.group_of.find(k);
    if (it == ix.group_of.end() || !seen.insert(it->second).second) continue;
    taken.push_back(it->second);
    replaced.emplace_back(v[ix.owner[it->second]].entry, k);
  }
  size_t group = ix.groups.size();
  for (const size_t g : taken) {
    if (group == ix.groups.size() || ix.groups[g].size() > ix.groups[group].size()) group = g;
  }
  if (group == ix.groups.size()) {
    ix.groups.emplace_back();
    ix.owner.push_back(me);
  }
  for (const size_t g : taken) {
    if (g == group) continue;
    for (std::string& k : ix.groups[g]) {
      ix.group_of[k] = group;
      ix.groups[group].push_back(std::move(k));
    }
    ix.groups[g] = {};
  }
  for (const std::string& k : keys) {
    if (ix.group_of.emplace(k, group).second) {
      ix.groups[group].push_back(k);
      ix.first_seen.emplace(k, ix.first_seen.size());
    }
  }
  ix.owner[group] = me;
  v.push_back({std::move(spec), std::move(keys), group, entries_.size()});
  return replaced;
}

// Its own names first, as its file gives them, then those it took over in the order they were first given.
template <typename T>
std::vector<std::string> ProfileSet::live(const std::vector<Named<T>>& v, const KeyIndex& ix, size_t index) const {
  const Named<T>& n = v.at(index);
  if (ix.owner[n.group] != index) return {};  // a later profile took its names
  std::vector<std::string> out;
  std::unordered_set<std::string> mine;
  for (const std::string& k : n.keys) {
    if (mine.insert(k).second) out.push_back(k);
  }
  std::vector<std::string> others;
  for (const std::string& k : ix.groups[n.group]) {
    if (!mine.count(k)) others.push_back(k);
  }
  std::sort(others.begin(), others.end(),
            [&](const std::string& a, const std::string& b) { return ix.first_seen.at(a) < ix.first_seen.at(b); });
  out.insert(out.end(), others.begin(), others.end());
  return out;
}

std::vector<std::string> ProfileSet::live_keys(const Entry& e) const {
  return e.kind == "gpu"       ? live(gpus_, gpu_keys_, e.index)
         : e.kind == "cluster" ? live(clusters_, cluster_keys_, e.index)
                               : live(models_, model_keys_, e.index);
}

const GpuSpec* ProfileSet::find_gpu(std::string_view name) const { return lookup(gpus_, gpu_keys_, name); }
const ClusterSpec* ProfileSet::find_cluster(std::string_view name) const {
  return lookup(clusters_, cluster_keys_, name);
}
const ModelSpec* ProfileSet::find_model(std::string_view name) const { return lookup(models_, model_keys_, name); }

const GpuSpec& ProfileSet::gpu(std::string_view name, std::string_view flag) const {
  if (const GpuSpec* g = find_gpu(name)) return *g;
  throw InputError(fmt::format("{}: unknown GPU '{}' (known: {})", flag, excerpt(name), known_names(gpus_)));
}
const ClusterSpec& ProfileSet::cluster(std::string_view name, std::string_view flag) const {
  if (const ClusterSpec* c = find_cluster(name)) return *c;
  throw InputError(fmt::format("{}: unknown cluster '{}' (known: {})", flag, excerpt(name), known_names(clusters_)));
}
const ModelSpec& ProfileSet::model(std::string_view name, std::string_view flag) const {
  if (const ModelSpec* m = find_model(name)) return *m;
  throw InputError(fmt::format("{}: unknown model '{}' (known: {})", flag, excerpt(name), known_names(models_)));
}

std::string validate_profile(std::string_view text, const std::string& where) {
  ProfileSet scratch;
  return scratch.add(text, where);
}

}  // namespace parplan
