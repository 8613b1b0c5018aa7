// Renderings of `parplan check` results: text lines, JSON, JUnit XML, GitHub Actions workflow commands and the
// Markdown job summary, with the escaping each format needs. A plan path is shown through cli::printable (control
// characters and bytes that are not UTF-8 escaped) in every line of text, annotation and summary: a path holding a
// line break and `::error ...` cannot inject a workflow command.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "planner/check/check.hpp"

namespace parplan::cli {

struct PlanCheck {
  std::string path;  // the plan file as given
  std::string key;   // its baseline key: the plan's name or "content:<hash>" (cli/check_inputs.hpp)
  CheckResult result;
  bool baseline_missing = false;  // --baseline given but the file has no entry for this plan
};

// One summary line per plan ("PASS path: ..." / "FAIL path: ..."), each failed gate indented below, and a total.
std::string render_check_text(const std::vector<PlanCheck>& checks);
nlohmann::json check_to_json(const std::vector<PlanCheck>& checks);
std::string render_junit(const std::vector<PlanCheck>& checks);
// ::error file=<path>,title=parplan check: <gate>::<message> for each failed gate.
std::string render_github_annotations(const std::vector<PlanCheck>& checks);
std::string render_markdown_summary(const std::vector<PlanCheck>& checks);

// Escaping for each format.
// & < > " ' escaped; what XML 1.0 cannot carry (bytes that are not UTF-8, control characters) becomes U+FFFD.
std::string xml_escape(std::string_view s);
std::string workflow_escape_data(std::string_view s);   // % \r \n
std::string workflow_escape_property(std::string_view s);  // % \r \n : ,

}  // namespace parplan::cli
