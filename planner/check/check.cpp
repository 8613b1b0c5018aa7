// CI gates for one plan (see check.hpp): memory with headroom, performance floors, baseline regression.
#include "planner/check/check.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fmt/core.h>
#include <limits>

#include "planner/spec/error.hpp"
#include "planner/spec/json_reader.hpp"
#include "planner/spec/units.hpp"

namespace parplan {

const std::array<std::string_view, kNumMemoryTerms> kMemoryTerms = {
    "weights",   "grads",        "optimizer",    "activations", "recompute_working_set", "zero3_buffers",
    "workspace", "comm_buffers", "cuda_context", "fragmentation"};

namespace {

std::array<double, kNumMemoryTerms> memory_terms(const StageMemory& m) {
  return {m.weights,   m.grads,        m.optimizer,    m.activations, m.recompute_working_set, m.zero3_buffers,
          m.workspace, m.comm_buffers, m.cuda_context, m.fragmentation};
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / kGiB); }
std::string signed_gib(double bytes) { return fmt::format("{:+.2f} GiB", bytes / kGiB); }
// Percentages keep two significant digits when they are below 0.1% (so a tiny non-zero value is not shown as 0.0%).
std::string pct(double frac) {
  const double v = frac * 100;
  return v != 0 && std::fabs(v) < 0.1 ? fmt::format("{:.2g}%", v) : fmt::format("{:.1f}%", v);
}
// Host memory is sized in TiB on large nodes, as estimate prints it.
std::string host_size(double bytes) {
  constexpr double kTiB = kGiB * 1024.0;
  return bytes >= kTiB ? fmt::format("{:.2f} TiB", bytes / kTiB) : gib(bytes);
}
std::string secs(double s) { return std::fabs(s) >= 1 ? fmt::format("{:.2f} s", s) : fmt::format("{:.1f} ms", s * 1e3); }
std::string signed_secs(double s) {
  return std::fabs(s) >= 1 ? fmt::format("{:+.2f} s", s) : fmt::format("{:+.1f} ms", s * 1e3);
}

// Relative growth after/before - 1; a zero baseline counts as infinite growth when anything appeared.
double growth(double before, double after) {
  if (before > 0) return after / before - 1;
  return after > 0 ? std::numeric_limits<double>::infinity() : 0;
}

// The (stage, term) whose bytes grew most. Stage-by-stage when the stage count is unchanged; otherwise the peak
// stages are compared with each other.
std::optional<TermDelta> memory_growth(const PlanSnapshot& before, const PlanSnapshot& now) {
  auto stage_of = [](const PlanSnapshot& s, int64_t i) -> const std::array<double, kNumMemoryTerms>* {
    if (i < 0 || static_cast<size_t>(i) >= s.stage_memory_bytes.size()) return nullptr;
    return &s.stage_memory_bytes[static_cast<size_t>(i)];
  };
  std::optional<TermDelta> best;
  auto consider = [&](const std::array<double, kNumMemoryTerms>& b, const std::array<double, kNumMemoryTerms>& a,
                      int64_t stage) {
    for (int t = 0; t < kNumMemoryTerms; ++t) {
      const double d = a[static_cast<size_t>(t)] - b[static_cast<size_t>(t)];
      if (d > 0 && (!best || d > best->after - best->before)) {
        best = TermDelta{std::string(kMemoryTerms[static_cast<size_t>(t)]), stage, b[static_cast<size_t>(t)],
                         a[static_cast<size_t>(t)]};
      }
    }
  };
  if (before.stage_memory_bytes.size() == now.stage_memory_bytes.size()) {
    for (size_t i = 0; i < now.stage_memory_bytes.size(); ++i) {
      consider(before.stage_memory_bytes[i], now.stage_memory_bytes[i], static_cast<int64_t>(i));
    }
  } else if (stage_of(before, before.peak_stage) && stage_of(now, now.peak_stage)) {
    consider(*stage_of(before, before.peak_stage), *stage_of(now, now.peak_stage), now.peak_stage);
  }
  return best;
}

std::optional<TermDelta> time_growth(const PlanSnapshot& before, const PlanSnapshot& now) {
  std::optional<TermDelta> best;
  for (int t = 0; t < kNumTimeTerms; ++t) {
    const double b = before.time_s[static_cast<size_t>(t)], a = now.time_s[static_cast<size_t>(t)];
    if (a - b > 0 && (!best || a - b > best->after - best->before)) {
      best = TermDelta{std::string(kTimeTerms[static_cast<size_t>(t)]), now.slowest_stage, b, a};
    }
  }
  return best;
}

std::string describe_memory_move(const TermDelta& d) {
  return fmt::format("{} on stage {} grew most: {} -> {} ({})", d.term, d.stage, gib(d.before), gib(d.after),
                     signed_gib(d.after - d.before));
}

// Whether the time regression compares time per token: both snapshots know their tokens per step.
bool per_token(const PlanSnapshot& before, const PlanSnapshot& now) {
  return before.tokens_per_step > 0 && now.tokens_per_step > 0;
}

// The baseline's step time and time terms scaled to the current tokens per step (time per token x tokens now), so
// that they compare with now's seconds; unchanged when the baseline does not know its tokens per step.
PlanSnapshot per_current_tokens(const PlanSnapshot& before, const PlanSnapshot& now) {
  PlanSnapshot s = before;
  if (!per_token(before, now)) return s;
  const double scale = now.tokens_per_step / before.tokens_per_step;
  s.step_s *= scale;
  for (double& t : s.time_s) t *= scale;
  s.tokens_per_step = now.tokens_per_step;
  return s;
}

std::string describe_time_regression(const PlanSnapshot& before, const PlanSnapshot& now, double growth_frac,
                                     double allowed) {
  if (!per_token(before, now)) {
    return fmt::format("step time {} vs baseline {} ({:+.1f}%, allowed {:+.1f}%; the baseline has no tokens_per_step)",
                       secs(now.step_s), secs(before.step_s), growth_frac * 100, allowed * 100);
  }
  auto per_tok = [](const PlanSnapshot& x) { return fmt::format("{:.3g} us", x.step_s / x.tokens_per_step * 1e6); };
  std::string msg = fmt::format("time per token {} vs baseline {} ({:+.1f}%, allowed {:+.1f}%)", per_tok(now),
                                per_tok(before), growth_frac * 100, allowed * 100);
  msg += before.tokens_per_step == now.tokens_per_step
             ? fmt::format("; step time {} vs {}", secs(now.step_s), secs(before.step_s))
             : fmt::format("; step time {} for {:.0f} tokens vs {} for {:.0f}", secs(now.step_s), now.tokens_per_step,
                           secs(before.step_s), before.tokens_per_step);
  return msg;
}

std::string describe_time_move(const TermDelta& d) {
  return fmt::format("{} grew most: {} -> {} ({}; slowest stage {})", d.term, secs(d.before), secs(d.after),
                     signed_secs(d.after - d.before), d.stage);
}

// The memory gate: the GPU peak against the limit, and any offloaded states against the node's host memory.
GateResult memory_gate(const CheckResult& r, double headroom_bytes) {
  const bool gpu_ok = r.margin_bytes >= 0;
  GateResult g{Gate::memory, gpu_ok && r.host_fits, r.peak_bytes, r.limit_bytes, {}};
  std::string limit_desc = fmt::format("limit {}", gib(r.limit_bytes));
  if (headroom_bytes > 0 || r.budget_bytes < r.capacity_bytes) {
    limit_desc += fmt::format(" = {} {} - {} headroom", r.budget_bytes < r.capacity_bytes ? "budget" : "capacity",
                              gib(r.budget_bytes), gib(headroom_bytes));
  }
  g.message = gpu_ok ? fmt::format("peak {} on stage {} is {} under the {}", gib(r.peak_bytes), r.peak_stage,
                                    gib(r.margin_bytes), limit_desc)
                     : fmt::format("peak {} on stage {} is {} over the {}; largest term {}", gib(r.peak_bytes),
                                   r.peak_stage, gib(-r.margin_bytes), limit_desc, r.largest_term);
  if (!r.host_fits) {
    g.message += fmt::format("{} the offloaded states need {} per node, above its {} of host memory",
                             gpu_ok ? ", but" : "; and", host_size(r.host_bytes_per_node), host_size(r.host_capacity_bytes));
  }
  return g;
}

}  // namespace

std::string_view to_string(Gate g) {
  switch (g) {
    case Gate::memory: return "memory";
    case Gate::bubble: return "bubble";
    case Gate::dp_comm: return "dp_comm";
    case Gate::mfu: return "mfu";
    case Gate::step_time: return "step_time";
    case Gate::memory_regression: return "memory_regression";
    case Gate::time_regression: return "time_regression";
    case Gate::baseline: return "baseline";
  }
  return "?";
}

double tokens_per_step(const Plan& plan) {
  return static_cast<double>(plan.training.global_batch) * static_cast<double>(plan.seq_len());
}

PlanSnapshot snapshot(const Estimate& e, double tokens) {
  PlanSnapshot s;
  s.tokens_per_step = tokens;
  s.peak_memory_bytes = e.peak_memory_bytes;
  s.peak_stage = e.peak_stage;
  for (const StageMemory& m : e.memory) s.stage_memory_bytes.push_back(memory_terms(m));
  s.step_s = e.time.step_s;
  s.time_s = time_terms(e.time);
  s.slowest_stage = e.time.slowest_stage;
  s.host_bytes_per_node = e.host_bytes_per_node;
  return s;
}

CheckResult check_plan(const Plan& plan, const Estimate& e, const CheckLimits& lim, const PlanSnapshot* baseline) {
  CheckResult r;
  r.now = snapshot(e, tokens_per_step(plan));
  r.capacity_bytes = e.capacity_bytes > 0 ? e.capacity_bytes : static_cast<double>(plan.gpu.memory_bytes);
  const MemoryLimit m = memory_limit(r.capacity_bytes, lim.memory_bytes, lim.headroom);
  refuse_empty_limit(m, plan.gpu.name);
  r.budget_bytes = m.budget_bytes;
  r.limit_bytes = m.limit_bytes;
  r.peak_bytes = e.peak_memory_bytes;
  r.peak_stage = e.peak_stage;
  r.margin_bytes = r.limit_bytes - r.peak_bytes;
  r.host_bytes_per_node = e.host_bytes_per_node;
  r.host_capacity_bytes = static_cast<double>(plan.cluster.host_memory_bytes);
  r.host_fits = e.host_fits;

  // Largest term on the peak stage.
  if (static_cast<size_t>(e.peak_stage) < r.now.stage_memory_bytes.size()) {
    const auto& terms = r.now.stage_memory_bytes[static_cast<size_t>(e.peak_stage)];
    const auto it = std::max_element(terms.begin(), terms.end());
    r.largest_term = fmt::format("{} {}", kMemoryTerms[static_cast<size_t>(it - terms.begin())], gib(*it));
  }

  r.gates.push_back(memory_gate(r, m.headroom_bytes));

  const TimeBreakdown& t = e.time;
  const double bubble = t.bubble_fraction();
  const double dp_comm = t.step_s > 0 ? t.dp_comm_exposed_s / t.step_s : 0;
  r.mfu = t.mfu;
  r.bubble_fraction = bubble;
  r.dp_comm_fraction = dp_comm;
  if (lim.max_bubble_fraction) {
    const bool ok = bubble <= *lim.max_bubble_fraction;
    r.gates.push_back({Gate::bubble, ok, bubble, *lim.max_bubble_fraction,
                       fmt::format("pipeline bubble {} of the step ({}) {} the maximum {}", pct(bubble), secs(t.bubble_s),
                                   ok ? "is within" : "exceeds", pct(*lim.max_bubble_fraction))});
  }
  if (lim.max_dp_comm_fraction) {
    const bool ok = dp_comm <= *lim.max_dp_comm_fraction;
    r.gates.push_back({Gate::dp_comm, ok, dp_comm, *lim.max_dp_comm_fraction,
                       fmt::format("exposed DP communication {} of the step ({}) {} the maximum {}", pct(dp_comm),
                                   secs(t.dp_comm_exposed_s), ok ? "is within" : "exceeds",
                                   pct(*lim.max_dp_comm_fraction))});
  }
  if (lim.min_mfu) {
    const bool ok = t.mfu >= *lim.min_mfu;
    r.gates.push_back({Gate::mfu, ok, t.mfu, *lim.min_mfu,
                       fmt::format("MFU {} is {} the minimum {}", pct(t.mfu), ok ? "at or above" : "below",
                                   pct(*lim.min_mfu))});
  }
  if (lim.max_step_s) {
    const bool ok = t.step_s <= *lim.max_step_s;
    r.gates.push_back({Gate::step_time, ok, t.step_s, *lim.max_step_s,
                       fmt::format("step time {} {} the maximum {}", secs(t.step_s), ok ? "is within" : "exceeds",
                                   secs(*lim.max_step_s))});
  }

  if (baseline) {
    r.memory_moved = memory_growth(*baseline, r.now);
    const PlanSnapshot base_now = per_current_tokens(*baseline, r.now);
    r.time_moved = time_growth(base_now, r.now);
    const double mg = growth(baseline->peak_memory_bytes, r.now.peak_memory_bytes);
    bool mem_ok = mg <= lim.max_memory_regression;
    std::string msg = fmt::format("peak memory {} vs baseline {} ({:+.1f}%, allowed {:+.1f}%)", gib(r.now.peak_memory_bytes),
                                  gib(baseline->peak_memory_bytes), mg * 100, lim.max_memory_regression * 100);
    if (r.memory_moved) msg += "; " + describe_memory_move(*r.memory_moved);
    double value = mg;
    // Offload: the node's host memory is gated the same way, where the baseline kept it and either offloads.
    const double host_before = baseline->host_bytes_per_node.value_or(0.0), host_now = r.now.host_bytes_per_node.value_or(0.0);
    if (baseline->host_bytes_per_node && (host_before > 0 || host_now > 0)) {
      const double hg = host_before > 0 ? growth(host_before, host_now) : std::numeric_limits<double>::infinity();
      mem_ok = mem_ok && hg <= lim.max_memory_regression;
      if (std::isfinite(hg)) value = std::max(value, hg);  // newly offloading: fails, the value stays the GPU's
      msg += host_before > 0 ? fmt::format("; host memory {} per node vs baseline {} ({:+.1f}%)", host_size(host_now),
                                           host_size(host_before), hg * 100)
                             : fmt::format("; host memory {} per node, none in the baseline", host_size(host_now));
    }
    r.gates.push_back({Gate::memory_regression, mem_ok, value, lim.max_memory_regression, std::move(msg)});

    const double tg = growth(base_now.step_s, r.now.step_s);
    const bool time_ok = tg <= lim.max_time_regression;
    msg = describe_time_regression(*baseline, r.now, tg, lim.max_time_regression);
    if (r.time_moved) msg += "; " + describe_time_move(*r.time_moved);
    r.gates.push_back({Gate::time_regression, time_ok, tg, lim.max_time_regression, std::move(msg)});
  }

  for (const GateResult& g : r.gates) r.pass = r.pass && g.pass;

  // Summary line: margin, stage, term; time figures; what moved against the baseline.
  r.summary = r.margin_bytes >= 0
                  ? fmt::format("peak {} on stage {}, {} under the {} limit", gib(r.peak_bytes), r.peak_stage,
                                gib(r.margin_bytes), gib(r.limit_bytes))
                  : fmt::format("peak {} on stage {}, {} OVER the {} limit", gib(r.peak_bytes), r.peak_stage,
                                gib(-r.margin_bytes), gib(r.limit_bytes));
  r.summary += fmt::format(" (largest term {})", r.largest_term);
  if (!r.host_fits) {
    r.summary += fmt::format("; host memory {} per node OVER its {}", host_size(r.host_bytes_per_node),
                             host_size(r.host_capacity_bytes));
  }
  r.summary += fmt::format("; step {}, MFU {}, bubble {}, DP comm {}", secs(t.step_s), pct(t.mfu), pct(bubble),
                           pct(dp_comm));
  if (baseline) {
    r.summary += fmt::format("; vs baseline: memory {:+.1f}%", growth(baseline->peak_memory_bytes, r.peak_bytes) * 100);
    if (r.memory_moved) {
      r.summary += fmt::format(" ({} on stage {} {})", r.memory_moved->term, r.memory_moved->stage,
                               signed_gib(r.memory_moved->after - r.memory_moved->before));
    }
    r.summary += fmt::format(", {} {:+.1f}%", per_token(*baseline, r.now) ? "time per token" : "step time",
                             growth(per_current_tokens(*baseline, r.now).step_s, r.now.step_s) * 100);
    if (r.time_moved) {
      r.summary += fmt::format(" ({} {})", r.time_moved->term, signed_secs(r.time_moved->after - r.time_moved->before));
    }
  }
  return r;
}

// ---- baseline document ----

nlohmann::json snapshot_to_json(const PlanSnapshot& s) {
  nlohmann::json j;
  j["peak_memory_bytes"] = s.peak_memory_bytes;
  j["peak_stage"] = s.peak_stage;
  j["step_s"] = s.step_s;
  j["slowest_stage"] = s.slowest_stage;
  if (s.tokens_per_step > 0) j["tokens_per_step"] = s.tokens_per_step;
  if (s.host_bytes_per_node) j["host_bytes_per_node"] = *s.host_bytes_per_node;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& m : s.stage_memory_bytes) {
    nlohmann::json st = nlohmann::json::object();
    for (size_t i = 0; i < m.size(); ++i) st[std::string(kMemoryTerms[i])] = m[i];
    stages.push_back(std::move(st));
  }
  j["stage_memory_bytes"] = std::move(stages);
  nlohmann::json time = nlohmann::json::object();
  for (size_t i = 0; i < s.time_s.size(); ++i) time[std::string(kTimeTerms[i])] = s.time_s[i];
  j["time_s"] = std::move(time);
  return j;
}

nlohmann::json baseline_to_json(const Baseline& b) {
  nlohmann::json plans = nlohmann::json::object();
  for (const auto& [key, snap] : b) plans[key] = snapshot_to_json(snap);
  return nlohmann::json{{"parplan_check_baseline", kBaselineFormatVersion}, {"plans", std::move(plans)}};
}

namespace {

// JSON pointer token escaping (RFC 6901): '~' -> "~0", '/' -> "~1".
std::string pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

constexpr double kMaxValue = 1e30;

PlanSnapshot snapshot_from_json(const nlohmann::json& j, const std::string& where, const std::string& path) {
  JsonReader r(j, where, path);
  PlanSnapshot s;
  // A plan always holds some memory and takes some time: zero would make every regression ratio infinite.
  s.peak_memory_bytes = r.get_double("peak_memory_bytes", 1.0, kMaxValue);
  s.peak_stage = r.get_int("peak_stage", 0, 1'000'000);
  s.step_s = r.get_double("step_s", 1e-12, kMaxValue);
  s.slowest_stage = r.get_int("slowest_stage", 0, 1'000'000);
  // Optional: baselines written before the time-per-token gate lack it (their time gate compares step time).
  if (r.has("tokens_per_step")) s.tokens_per_step = r.get_double("tokens_per_step", 1.0, kMaxValue);
  // Optional: baselines written before host memory was kept lack it (their host memory is not gated).
  if (r.has("host_bytes_per_node")) s.host_bytes_per_node = r.get_double("host_bytes_per_node", 0, kMaxValue);
  const nlohmann::json& stages = r.raw("stage_memory_bytes");
  if (!stages.is_array()) r.fail("stage_memory_bytes", "expected an array of objects");
  for (size_t i = 0; i < stages.size(); ++i) {
    JsonReader st(stages[i], where, fmt::format("{}/stage_memory_bytes/{}", path, i));
    std::array<double, kNumMemoryTerms> m{};
    for (size_t t = 0; t < m.size(); ++t) m[t] = st.get_double(kMemoryTerms[t], 0, kMaxValue);
    st.finish();
    s.stage_memory_bytes.push_back(m);
  }
  if (s.stage_memory_bytes.empty()) r.fail("stage_memory_bytes", "expected at least one stage");
  if (static_cast<size_t>(s.peak_stage) >= s.stage_memory_bytes.size()) {
    r.fail("peak_stage", fmt::format("stage {} is past the last stage ({} stages in stage_memory_bytes)", s.peak_stage,
                                     s.stage_memory_bytes.size()));
  }
  JsonReader time = r.object("time_s");
  for (size_t t = 0; t < s.time_s.size(); ++t) {
    // Optional: baselines written before activation offload lack its term (their plans had none: 0).
    s.time_s[t] = kTimeTerms[t] == "offload_exposed" ? time.get_double(kTimeTerms[t], 0.0, 0, kMaxValue)
                                                     : time.get_double(kTimeTerms[t], 0, kMaxValue);
  }
  time.finish();
  r.finish();
  return s;
}

}  // namespace

Baseline baseline_from_text(std::string_view text, const std::string& where) {
  const nlohmann::json j = parse_json_text(text, where);
  JsonReader r(j, where);
  r.get_int("parplan_check_baseline", kBaselineFormatVersion, kBaselineFormatVersion);
  const nlohmann::json& plans = r.raw("plans");
  if (!plans.is_object()) r.fail("plans", "expected an object keyed by plan name");
  Baseline b;
  for (auto it = plans.begin(); it != plans.end(); ++it) {
    b[it.key()] = snapshot_from_json(it.value(), where, "/plans/" + excerpt(pointer_token(it.key())));
  }
  r.finish();
  return b;
}

double parse_fraction(std::string_view text, std::string_view flag) {
  std::string_view s = text;
  double scale = 1;
  if (!s.empty() && s.back() == '%') {
    s.remove_suffix(1);
    scale = 0.01;
  }
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  v *= scale;
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v) || v < 0 || v > 1) {
    throw InputError(fmt::format("{}: '{}' must be a fraction in [0, 1] or a percentage such as 20%", flag, excerpt(text)));
  }
  return v;
}

Headroom parse_headroom(std::string_view text, std::string_view flag) {
  Headroom h;
  const bool has_unit = text.find_first_of("BKMGTib") != std::string_view::npos;
  if (has_unit) {
    h.bytes = parse_bytes(text, flag);
  } else {
    h.fraction = parse_fraction(text, flag);
    if (h.fraction >= 1) throw InputError(fmt::format("{}: '{}' leaves no memory (use a fraction below 1)", flag, excerpt(text)));
  }
  return h;
}

}  // namespace parplan
