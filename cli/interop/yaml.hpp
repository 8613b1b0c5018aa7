// A strict reader of the YAML that training frameworks write their configs in (NeMo, nanotron, Megatron-LM's
// --yaml-cfg): block mappings and block lists by indentation (spaces), plain and quoted scalars, one-line flow lists
// and empty flow mappings, comments, LF or CRLF line ends. What YAML has beyond that (anchors, aliases, tags,
// multi-line scalars, flow mappings with entries, several documents, tabs in indentation) is an InputError
// "<path>:<line>: <what>", never a guess.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace parplan::cli {

// One scalar (or one-line flow list, or null) of the document, with its dotted path: "model.optim.lr",
// list elements as "data.data_prefix[0]", "data_stages[1].name".
struct YamlLeaf {
  std::string path;
  std::string value;  // the scalar, quotes removed; a flow list as written ("[1, 2]"); empty for null
  size_t line = 0;    // 1-based
  bool quoted = false;
};

std::vector<YamlLeaf> read_yaml(std::string_view text, const std::string& path);

}  // namespace parplan::cli
