// Profile registry: GPU, cluster and model profiles from the embedded profiles/ tree, overridable by user files.
// Every profile file is one JSON object with "kind": "gpu" | "cluster" | "model", a "name" and optional "aliases".
// Names match case-insensitively; a user file with the same name replaces the embedded profile.
#pragma once
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "planner/spec/spec.hpp"

namespace parplan {

class ProfileSet {
 public:
  // The profiles compiled into the binary.
  static ProfileSet embedded();

  // Adds one profile from JSON text; `where` names the file in errors. Returns the kind. A profile sharing a name or
  // alias with an earlier one of its kind replaces it, taking over all of its names and aliases.
  std::string add(std::string_view text, const std::string& where);

  const GpuSpec* find_gpu(std::string_view name) const;
  const ClusterSpec* find_cluster(std::string_view name) const;
  const ModelSpec* find_model(std::string_view name) const;
  // Like find_*, but throws InputError naming `flag` and listing the known names.
  const GpuSpec& gpu(std::string_view name, std::string_view flag) const;
  const ClusterSpec& cluster(std::string_view name, std::string_view flag) const;
  const ModelSpec& model(std::string_view name, std::string_view flag) const;

  struct Entry {
    std::string kind, name, where;
    std::vector<std::string> aliases;
    size_t index = 0;       // position among the profiles of its kind
    bool embedded = false;  // compiled in (else a --profile file)
    // The earlier entries this one replaced (they answered to one of its names or aliases), each with a name they
    // shared: (entry index, lower-case name).
    std::vector<std::pair<size_t, std::string>> replaced;
  };
  const std::vector<Entry>& entries() const { return entries_; }
  // The spec an entry added (whatever a later entry overrides).
  const GpuSpec& gpu_of(const Entry& e) const { return gpus_.at(e.index).spec; }
  const ClusterSpec& cluster_of(const Entry& e) const { return clusters_.at(e.index).spec; }
  const ModelSpec& model_of(const Entry& e) const { return models_.at(e.index).spec; }
  // The entry's names (lower case: its name first, its aliases, and those it took over from a profile it replaced)
  // that still resolve to it.
  std::vector<std::string> live_keys(const Entry& e) const;

 private:
  template <typename T>
  struct Named {
    T spec;
    std::vector<std::string> keys;  // lower-case name + aliases, as the file gives them
    size_t group = 0;               // the group of names it answered to when added (KeyIndex)
    size_t entry = 0;               // its index in entries_
  };
  // The names of one kind. A profile answers to a group of names: its own, and the whole group of every earlier
  // profile it shares a name with (it replaces them). Groups only merge, so each name belongs to one group and each
  // group to the latest profile that took it: look-ups and additions are linear in the names involved, whatever the
  // number of profiles.
  struct KeyIndex {
    std::unordered_map<std::string, size_t> group_of;         // name -> group
    std::vector<std::vector<std::string>> groups;             // group -> names (emptied when merged into another)
    std::vector<size_t> owner;                                // group -> the profile (index of its kind) answering
    std::unordered_map<std::string, size_t> first_seen;       // name -> order it was first given (display order)
  };
  // Adds a profile answering to `keys` (its own names) and to the groups they belong to; returns Entry::replaced.
  template <typename T>
  std::vector<std::pair<size_t, std::string>> claim(std::vector<Named<T>>& v, KeyIndex& ix, T spec,
                                                    std::vector<std::string> keys);
  template <typename T>
  std::vector<std::string> live(const std::vector<Named<T>>& v, const KeyIndex& ix, size_t index) const;
  std::vector<Named<GpuSpec>> gpus_;
  std::vector<Named<ClusterSpec>> clusters_;
  std::vector<Named<ModelSpec>> models_;
  KeyIndex gpu_keys_, cluster_keys_, model_keys_;
  std::vector<Entry> entries_;
};

// Validates a profile document without adding it anywhere (`parplan profiles validate FILE`). Returns the kind.
std::string validate_profile(std::string_view text, const std::string& where);

}  // namespace parplan
