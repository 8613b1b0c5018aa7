// A plan written as a training framework's config (the inverse of framework.hpp's readers): the Megatron-LM launch
// command (torchrun ... pretrain_gpt.py and its arguments), a NeMo YAML, a torchtitan TOML job config or a DeepSpeed
// JSON config, with each framework's exact option names (docs/interop.md). What the framework cannot express, and
// what the export does not write, is a comment in the output and a line in `warnings` / `not_written`.
#pragma once
#include <string>
#include <vector>

#include "cli/interop/framework.hpp"
#include "planner/spec/spec.hpp"

namespace parplan::cli {

struct Exported {
  std::string text;
  std::vector<std::string> warnings;  // one line each: what the framework cannot express
  std::vector<std::string> not_written;  // one line each: what it could express but the export leaves to the user
};

// `source` names the plan in the header comment. nanotron is not written (InputError).
Exported export_plan(const Plan& plan, Framework to, const std::string& source);

}  // namespace parplan::cli
