// Renderings of `parplan check` results (see check_report.hpp).
#include "cli/check_report.hpp"

#include <fmt/core.h>

#include "cli/render.hpp"
#include "cli/text.hpp"

namespace parplan::cli {
namespace {

int failures(const std::vector<PlanCheck>& checks) {
  int n = 0;
  for (const PlanCheck& c : checks) n += c.result.pass ? 0 : 1;
  return n;
}

std::string baseline_note(const PlanCheck& c) { return c.baseline_missing ? " (no baseline entry yet)" : ""; }

nlohmann::json delta_json(const std::optional<TermDelta>& d) {
  if (!d) return nullptr;
  return {{"term", d->term}, {"stage", d->stage}, {"before", d->before}, {"after", d->after}};
}

// Markdown table cell: no line breaks, pipes escaped, HTML neutralised.
std::string md_cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '|': out += "\\|"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '`': out += "'"; break;
      case '\r':
      case '\n': out += ' '; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string xml_escape(std::string_view s) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_char_length(s, i);
    if (n != 1) {
      // Bytes that are not UTF-8 (a plan file named in Latin-1) would make the document not well-formed; U+FFFE and
      // U+FFFF are not XML characters.
      const std::string_view ch = s.substr(i, n);
      out += n == 0 || ch == "\xEF\xBF\xBE" || ch == "\xEF\xBF\xBF" ? kReplacement : ch;
      i += n == 0 ? 1 : n;
      continue;
    }
    const char ch = s[i++];
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n': out += "&#10;"; break;  // kept inside attributes too
      case '\r': out += "&#13;"; break;
      case '\t': out += "&#9;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          out += kReplacement;  // XML 1.0 cannot carry these, not even as character references
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::string workflow_escape_data(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '%': out += "%25"; break;
      case '\r': out += "%0D"; break;
      case '\n': out += "%0A"; break;
      default: out += c;
    }
  }
  return out;
}

std::string workflow_escape_property(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '%': out += "%25"; break;
      case '\r': out += "%0D"; break;
      case '\n': out += "%0A"; break;
      case ':': out += "%3A"; break;
      case ',': out += "%2C"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_check_text(const std::vector<PlanCheck>& checks) {
  std::string s;
  for (const PlanCheck& c : checks) {
    s += fmt::format("{} {}: {}{}\n", c.result.pass ? "PASS" : "FAIL", printable(c.path), c.result.summary,
                     baseline_note(c));
    for (const GateResult& g : c.result.gates) {
      if (!g.pass) s += fmt::format("  {}: {}\n", to_string(g.gate), g.message);
    }
  }
  const int failed = failures(checks);
  s += fmt::format("{} plan{} checked: {} passed, {} failed\n", checks.size(), checks.size() == 1 ? "" : "s",
                   static_cast<int>(checks.size()) - failed, failed);
  return s;
}

nlohmann::json check_to_json(const std::vector<PlanCheck>& checks) {
  nlohmann::json plans = nlohmann::json::array();
  for (const PlanCheck& c : checks) {
    const CheckResult& r = c.result;
    nlohmann::json gates = nlohmann::json::array();
    for (const GateResult& g : r.gates) {
      gates.push_back({{"gate", std::string(to_string(g.gate))},
                       {"pass", g.pass},
                       {"value", g.value},
                       {"limit", g.limit},
                       {"message", g.message}});
    }
    plans.push_back({{"plan", c.path},
                     {"pass", r.pass},
                     {"summary", r.summary},
                     {"peak_bytes", r.peak_bytes},
                     {"peak_stage", r.peak_stage},
                     {"capacity_bytes", r.capacity_bytes},
                     {"budget_bytes", r.budget_bytes},
                     {"limit_bytes", r.limit_bytes},
                     {"margin_bytes", r.margin_bytes},
                     {"largest_term", r.largest_term},
                     {"host_bytes_per_node", r.host_bytes_per_node},
                     {"host_capacity_bytes", r.host_capacity_bytes},
                     {"host_fits", r.host_fits},
                     {"step_s", r.now.step_s},
                     {"mfu", r.mfu},
                     {"bubble_fraction", r.bubble_fraction},
                     {"dp_comm_fraction", r.dp_comm_fraction},
                     {"gates", std::move(gates)},
                     {"baseline_key", c.key},
                     {"baseline_missing", c.baseline_missing},
                     {"memory_moved", delta_json(r.memory_moved)},
                     {"time_moved", delta_json(r.time_moved)}});
  }
  const int failed = failures(checks);
  return {{"parplan_check", 1},
          {"pass", failed == 0},
          {"passed", static_cast<int>(checks.size()) - failed},
          {"failed", failed},
          {"plans", std::move(plans)}};
}

std::string render_junit(const std::vector<PlanCheck>& checks) {
  const int failed = failures(checks);
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += fmt::format("<testsuites name=\"parplan check\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n", checks.size(), failed);
  s += fmt::format("  <testsuite name=\"parplan check\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\">\n",
                   checks.size(), failed);
  for (const PlanCheck& c : checks) {
    s += fmt::format("    <testcase classname=\"parplan.check\" name=\"{}\" file=\"{}\" time=\"0\">\n", xml_escape(c.path),
                     xml_escape(c.path));
    if (!c.result.pass) {
      std::string first, all;
      for (const GateResult& g : c.result.gates) {
        if (g.pass) continue;
        const std::string line = fmt::format("{}: {}", to_string(g.gate), g.message);
        if (first.empty()) first = line;
        all += line + "\n";
      }
      s += fmt::format("      <failure type=\"{}\" message=\"{}\">{}</failure>\n", xml_escape(first.substr(0, first.find(':'))),
                       xml_escape(first), xml_escape(all));
    }
    s += fmt::format("      <system-out>{}</system-out>\n", xml_escape(c.result.summary + baseline_note(c)));
    s += "    </testcase>\n";
  }
  s += "  </testsuite>\n</testsuites>\n";
  return s;
}

std::string render_github_annotations(const std::vector<PlanCheck>& checks) {
  std::string s;
  for (const PlanCheck& c : checks) {
    for (const GateResult& g : c.result.gates) {
      if (g.pass) continue;
      s += fmt::format("::error file={},title={}::{}\n", workflow_escape_property(printable(c.path)),
                       workflow_escape_property(fmt::format("parplan check: {}", to_string(g.gate))),
                       workflow_escape_data(fmt::format("{}: {}\n{}", printable(c.path), g.message, c.result.summary)));
    }
  }
  return s;
}

std::string render_markdown_summary(const std::vector<PlanCheck>& checks) {
  const int failed = failures(checks);
  std::string s = failed == 0 ? (checks.size() == 1 ? std::string("## parplan check: the plan passes\n\n")
                                                    : fmt::format("## parplan check: all {} plans pass\n\n", checks.size()))
                              : fmt::format("## parplan check: {} of {} plans failed\n\n", failed, checks.size());
  s += "| | Plan | Peak (stage) | Limit | Margin | Step | MFU | Failed gates |\n";
  s += "|---|---|---:|---:|---:|---:|---:|---|\n";
  for (const PlanCheck& c : checks) {
    const CheckResult& r = c.result;
    std::string details;
    for (const GateResult& g : r.gates) {
      if (g.pass) continue;
      if (!details.empty()) details += "; ";
      details += fmt::format("{}: {}", to_string(g.gate), g.message);
    }
    s += fmt::format("| {} | {} | {} ({}) | {} | {}{} | {} | {} | {} |\n", r.pass ? "✅" : "❌", md_cell(printable(c.path)),
                     fmt_bytes(r.peak_bytes), r.peak_stage, fmt_bytes(r.limit_bytes), r.margin_bytes >= 0 ? "+" : "",
                     fmt_bytes(r.margin_bytes), fmt_seconds(r.now.step_s), fmt_percent(r.mfu),
                     md_cell(details));
  }
  s += "\n";
  return s;
}

}  // namespace parplan::cli
