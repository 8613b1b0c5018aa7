// A plan written as a training framework's config (the inverse of framework.hpp's readers): the Megatron-LM launch
// command (torchrun ... pretrain_gpt.py and its arguments), a NeMo YAML, a torchtitan TOML job config or a DeepSpeed
// JSON config, with each framework's exact option names (docs/interop.md). What the framework cannot express, and
// what the export does not write, is a comment in the output and a line in `warnings` / `not_written`.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "cli/interop/framework.hpp"
#include "planner/spec/spec.hpp"

namespace parplan::cli {

struct Exported {
  std::string text;
  std::vector<std::string> warnings;  // one line each: what the framework cannot express
  std::vector<std::string> not_written;  // one line each: what it could express but the export leaves to the user
};

// `source` names the plan in the header comment. `to` is one written_framework returns (nanotron: std::logic_error).
Exported export_plan(const Plan& plan, Framework to, const std::string& source);

// The format `value` names (export --to, suggest --emit) as one export_plan writes. An InputError naming `flag` for
// nanotron (read by import, not written) and for any other name.
Framework written_framework(const std::string& value, std::string_view flag);

}  // namespace parplan::cli
