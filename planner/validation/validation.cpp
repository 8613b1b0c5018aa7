// Published-run validation: schema reading and the mapping of each row onto a Plan (rules in docs/accuracy.md).
#include "planner/validation/validation.hpp"
#include "planner/validation/text_match.hpp"

#include <algorithm>
#include <numeric>
#include <cctype>
#include <cmath>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <set>

#include "planner/cost/layout.hpp"
#include "planner/spec/config.hpp"
#include "planner/spec/error.hpp"
#include "planner/spec/json_reader.hpp"

#include "planner/spec/units.hpp"

namespace parplan {
namespace {

using nlohmann::json;

using validation_text::has;
using validation_text::states;

// A strict view of one JSON object of a row: known keys only, typed, null = absent.
class Obj {
 public:
  Obj(const json& j, std::string where, std::string path, std::initializer_list<std::string_view> keys)
      : j_(j), where_(std::move(where)), path_(std::move(path)) {
    if (!j_.is_object()) fail("", fmt::format("expected an object, got {}", j_.type_name()));
    std::set<std::string_view> known(keys);
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!known.count(it.key())) fail(it.key(), "unknown key");
    }
  }
  [[noreturn]] void fail(std::string_view key, std::string_view what) const {
    throw InputError(fmt::format("{}: {}{}{}: {}", where_, path_, key.empty() ? "" : "/", excerpt(key), what));
  }
  const json* get(std::string_view key) const {
    auto it = j_.find(std::string(key));
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  std::optional<int64_t> integer(std::string_view key, int64_t min, int64_t max) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    double x = 0;
    if (v->is_number_integer() && !(v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{1} << 53)) {
      x = static_cast<double>(v->get<int64_t>());
    } else if (v->is_number_float()) {
      x = v->get<double>();
      if (!std::isfinite(x) || x != std::floor(x)) fail(key, "expected an integer");
    } else {
      fail(key, fmt::format("expected an integer or null, got {}", v->type_name()));
    }
    if (x < static_cast<double>(min) || x > static_cast<double>(max)) {
      fail(key, fmt::format("{} is out of range [{}, {}]", x, min, max));
    }
    return static_cast<int64_t>(x);
  }
  std::optional<double> number(std::string_view key, double min, double max) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) fail(key, fmt::format("expected a number or null, got {}", v->type_name()));
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < min || x > max) fail(key, fmt::format("{} is out of range [{}, {}]", x, min, max));
    return x;
  }
  std::optional<bool> boolean(std::string_view key) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail(key, fmt::format("expected true, false or null, got {}", v->type_name()));
    return v->get<bool>();
  }
  std::string text(std::string_view key) const {  // free text; null / absent = ""
    const json* v = get(key);
    if (!v) return "";
    if (!v->is_string()) fail(key, fmt::format("expected a string or null, got {}", v->type_name()));
    return v->get<std::string>();
  }
  Obj object(std::string_view key, std::initializer_list<std::string_view> keys) const {
    auto it = j_.find(std::string(key));
    if (it == j_.end()) fail(key, "missing required key");
    return Obj(*it, where_, path_ + "/" + std::string(key), keys);
  }
  const std::string& where() const { return where_; }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  std::string where_, path_;
};

constexpr int64_t kMaxCount = 100'000'000;

// What a row leaves unstated. Strict: a skip reason ("X not stated"). Search: the documented assumption, listed in
// MappedRun::assumed, or a knob left open for choose_open_knobs().
struct Gaps {
  MappedRun& r;
  Unstated mode;
  bool open_recompute = false, open_micro_batch = false;
  bool open_fp8_param_gather = false;  // fp8 weights neither stated nor denied (choose_open_knobs)
  bool open_optimizer_sharding = false;  // ZeRO neither stated nor named in the parallel notes (choose_open_knobs)

  bool search() const { return mode == Unstated::search; }
  void missing(std::string_view what) const { r.skip_reasons.push_back(fmt::format("{} not stated", what)); }
  // Search: records "what = value" and returns true. Strict: the skip reason, false.
  bool assume(std::string_view what, std::string_view value) const {
    if (!search()) {
      missing(what);
      return false;
    }
    r.assumed.push_back(fmt::format("{} = {}", what, value));
    return true;
  }
};

}  // namespace

std::string MappedRun::skip_reason() const {
  std::string s;
  for (const auto& r : skip_reasons) s += (s.empty() ? "" : "; ") + r;
  return s;
}

namespace {

// The measured step time (measured.iter_time_s, else derived.iter_time_s) and peak memory of a row. derived is
// free-form (formulas); only derived.iter_time_s is read.
void read_measured(const Obj& top, const Obj& ms, MappedRun& r) {
  ms.number("tflops_per_gpu", 0, 1e6);
  ms.number("mfu", 0, 1.5);
  ms.number("hfu", 0, 1.5);
  r.measured_step_time_s = ms.number("iter_time_s", 1e-9, 1e9);
  if (!r.measured_step_time_s) {
    const json* d = top.get("derived");
    if (d && !d->is_object()) top.fail("derived", fmt::format("expected an object or null, got {}", d->type_name()));
    if (d) {
      auto it = d->find("iter_time_s");
      if (it != d->end() && !it->is_null()) {
        // The same range as measured.iter_time_s: 1 ns .. 1e9 s.
        if (!it->is_number() || !(it->get<double>() >= 1e-9) || !(it->get<double>() <= 1e9)) {
          top.fail("derived/iter_time_s", "expected a number from 1e-9 to 1e9 (seconds) or null");
        }
        r.measured_step_time_s = it->get<double>();
        r.step_time_derived = true;
      }
    }
  }
  // torchtitan and the benchmarks built on it print their peak in GiB ("memory: ...GiB", the caching allocator's max
  // reserved bytes), kept as printed in measured.other.peak_memory_GiB (derived.memory_per_gpu_GB is its conversion);
  // measured.memory_per_gpu_GB, the schema's field, wins where a row has both.
  const json* other = ms.get("other");
  if (other && other->is_object()) {
    auto it = other->find("peak_memory_GiB");
    if (it != other->end() && !it->is_null()) {
      if (!it->is_number() || !(it->get<double>() >= 1e-6) || !(it->get<double>() <= 1e6)) {
        ms.fail("other/peak_memory_GiB", "expected a number from 1e-6 to 1e6 (GiB) or null");
      }
      r.measured_memory_bytes = std::ldexp(it->get<double>(), 30);  // GiB = 2^30 bytes
    }
  }
  if (const auto mem = ms.number("memory_per_gpu_GB", 1e-6, 1e6)) r.measured_memory_bytes = *mem * 1e9;
}

// The integer after the first of `keys` found in `text` (lower-cased notes), skipping spaces, '=' and ':'; e.g.
// "kv_channels 128" -> 128. nullopt when no key is there or no digits follow it.
std::optional<int64_t> number_after(std::string_view text, std::initializer_list<std::string_view> keys) {
  for (std::string_view key : keys) {
    size_t at = text.find(key);
    if (at == std::string_view::npos) continue;
    at += key.size();
    while (at < text.size() && (text[at] == ' ' || text[at] == '=' || text[at] == ':')) ++at;
    int64_t v = 0;
    size_t digits = 0;
    for (; at < text.size() && text[at] >= '0' && text[at] <= '9' && digits < 9; ++at, ++digits) v = v * 10 + (text[at] - '0');
    if (digits > 0) return v;
  }
  return std::nullopt;
}

// Whether lowercase `text` names `word` at a word start, and as a whole word when `whole` (not inside a longer one:
// "swa" is not "swap"), not denied (`denied` false) or denied (true) there.
bool names_word(std::string_view text, std::string_view word, bool denied, bool whole = true) {
  auto letter = [](char c) { return c >= 'a' && c <= 'z'; };
  for (size_t at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
    const size_t end = at + word.size();
    if ((at == 0 || !letter(text[at - 1])) && (!whole || end == text.size() || !letter(text[end])) &&
        validation_text::denied_at(text, at, word.size()) == denied) {
      return true;
    }
  }
  return false;
}

// A window size as a row writes it: digits with ',' between thousands ("4,096") and a "k" for 1024 ("4K": context
// lengths and windows are powers of two), as written; `value` 0 when it is not in [1, kMaxWindow] (negative, 0, or
// above the limit a model document takes).
constexpr int64_t kMaxWindow = 100'000'000;
struct StatedSize {
  int64_t value = 0;
  std::string written;
};

// The size starting at text[i] (a digit, or '-' before one), or nullopt when none starts there or the number is a
// ratio ("5:1") or has a fraction.
std::optional<StatedSize> size_at(std::string_view t, size_t i) {
  const size_t from = i;
  const bool negative = i < t.size() && t[i] == '-';
  if (negative) ++i;
  auto digit = [&](size_t k) { return k < t.size() && t[k] >= '0' && t[k] <= '9'; };
  if (!digit(i)) return std::nullopt;
  double v = 0;
  for (;;) {
    for (; digit(i); ++i) v = v * 10 + (t[i] - '0');
    // A thousands separator: ',' then exactly three digits.
    if (i < t.size() && t[i] == ',' && digit(i + 1) && digit(i + 2) && digit(i + 3) && !digit(i + 4)) {
      ++i;
      continue;
    }
    break;
  }
  if (i < t.size() && (t[i] == ':' || (t[i] == '.' && digit(i + 1)))) return std::nullopt;
  if (i < t.size() && t[i] == 'k' && (i + 1 == t.size() || !(t[i + 1] >= 'a' && t[i + 1] <= 'z'))) {
    v *= 1024;
    ++i;
  }
  StatedSize s;
  s.written = std::string(t.substr(from, i - from));
  s.value = !negative && v >= 1 && v <= static_cast<double>(kMaxWindow) ? static_cast<int64_t>(v) : 0;
  return s;
}

// The window size a row states: the first size after "window" (not a "context window"), "bandwidth" or "local", past
// blanks, '(', '=', ':', '_', '-' and the words "of", "size", "attention", "length", "w"; or before "-token window" /
// "-token sliding window". "sliding window 4096", "SWA (window 128)", "banded window of 128 tokens", "sliding window
// of 4K tokens", "(bandwidth 128)", "alternating local (128) and global attention", "4096-token window".
std::optional<StatedSize> stated_window(std::string_view text) {
  for (std::string_view key : {"window", "bandwidth", "local"}) {
    for (size_t at = text.find(key); at != std::string_view::npos; at = text.find(key, at + 1)) {
      if (key == "window" && at >= 8 && text.substr(at - 8, 8) == "context ") continue;
      size_t i = at + key.size();
      for (bool moved = true; moved && i < text.size();) {
        moved = false;
        if (std::string_view(" (=:_").find(text[i]) != std::string_view::npos ||
            (text[i] == '-' && !(i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '9'))) {
          ++i;
          moved = true;
        }
        for (std::string_view w : {"of", "size", "attention", "length", "w="}) {
          if (text.substr(i).starts_with(w)) {
            i += w.size();
            moved = true;
          }
        }
      }
      if (const auto s = size_at(text, i)) return s;
    }
  }
  for (std::string_view key : {"-token window", "-token sliding window"}) {
    if (const size_t at = text.find(key); at != std::string_view::npos) {
      size_t i = at;
      while (i > 0 && ((text[i - 1] >= '0' && text[i - 1] <= '9') || text[i - 1] == ',' || text[i - 1] == 'k')) --i;
      if (const auto s = size_at(text, i); s && i + s->written.size() == at) return s;
    }
  }
  return std::nullopt;
}

// `text` without its parenthesised sizes (" (4096)", " (4,096)", " (4k)"): what the words around them say, read as
// one clause ("Sliding Window Attention (4096) is not used", "alternating local (128) and global attention").
std::string without_sized_parens(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '(') {
      const size_t close = text.find(')', i);
      const std::string_view inner = close == std::string_view::npos ? "" : text.substr(i + 1, close - i - 1);
      if (!inner.empty() && inner.find_first_not_of("0123456789,k ") == std::string_view::npos) {
        if (!out.empty() && out.back() == ' ') out.pop_back();
        i = close;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

// The phrases that name a local (windowed) attention.
constexpr std::string_view kWindowPhrases[] = {"sliding window", "sliding-window", "banded", "local attention",
                                               "local window", "local:global", "local/global", "local-global",
                                               "local and global attention", "local and global layers",
                                               "local (windowed)"};

// The clause of `text` (between , ; ( ) |) around position `at`.
std::string_view clause_at(std::string_view text, size_t at) {
  const size_t b = text.find_last_of(",;()|", at), e = text.find_first_of(",;()|", at);
  const size_t from = b == std::string_view::npos ? 0 : b + 1, to = e == std::string_view::npos ? text.size() : e;
  return text.substr(from, to - from);
}

// Whether a clause speaks of the attention's layer kinds (local or global, windowed or full).
bool about_attention(std::string_view clause) {
  for (std::string_view w : {"local", "global", "full", "window", "band", "swa", "sliding", "dense attention"}) {
    if (has(clause, w)) return true;
  }
  return false;
}

// Which layers a row's window covers (ModelSpec::sliding_window_pattern) in `plain` (without_sized_parens): a ratio
// of local to global layers N:1 ("5:1 local:global", "local:global 5:1", "global:local 1:5"; Gemma 3's) is N + 1;
// "every other layer", "every second layer" or "alternat..." in a clause about attention ("alternating local and
// global attention", "alternating with full attention") is 2; 0 (every layer) when the text names no other kind of
// layer. A ratio that is not N:1 with N >= 1, or global or full-attention layers or a share of the layers in words
// none of those read ("even layers", "3 of every 4 layers", "every layer but the last"), is a skip reason.
std::optional<int64_t> window_pattern(std::string_view plain, std::vector<std::string>& skip) {
  const size_t local = plain.find("local"), global = plain.find("global");
  if (local != std::string_view::npos && global != std::string_view::npos) {
    for (size_t c = plain.find(':'); c != std::string_view::npos; c = plain.find(':', c + 1)) {
      size_t a = c;
      while (a > 0 && plain[a - 1] >= '0' && plain[a - 1] <= '9') --a;
      size_t b = c + 1;
      while (b < plain.size() && plain[b] >= '0' && plain[b] <= '9') ++b;
      if (a == c || b == c + 1 || c - a > 6 || b - c > 7) continue;
      int64_t x = std::stoll(std::string(plain.substr(a, c - a)));
      int64_t y = std::stoll(std::string(plain.substr(c + 1, b - c - 1)));
      if (global < local) std::swap(x, y);  // "global:local 1:5"
      if (x < 1 || y != 1) {
        skip.push_back(fmt::format("arch: the local:global ratio '{}' of the sliding-window layers is not N:1 with "
                                   "N >= 1",
                                   plain.substr(a, b - a)));
        return std::nullopt;
      }
      return x + 1;
    }
  }
  for (std::string_view w : {"alternat", "every other layer", "every second layer", "every 2nd layer"}) {
    for (size_t at = plain.find(w); at != std::string_view::npos; at = plain.find(w, at + 1)) {
      if (about_attention(clause_at(plain, at))) return 2;
    }
  }
  for (std::string_view w : {"global", "full attention", "full-attention", "full layers", "full causal",
                             "dense attention", "even layer", "odd layer", "of every", "out of", "interleav",
                             "every layer but", "except", "layers 0", "first layer", "last layer"}) {
    if (has(plain, w)) {
      skip.push_back(fmt::format("arch: which layers the sliding window covers is not read (the text names '{}' "
                                 "without an N:1 local:global ratio or an alternation)",
                                 w));
      return std::nullopt;
    }
  }
  return 0;
}

// Sliding-window attention (ModelSpec::sliding_window) as a row's attention text and notes state it: the window's size
// (stated_window) and the layers it covers (window_pattern). A window without its size, with a size out of range,
// or both stated and denied ("no SWA; sliding window 4096 in the ablation only") is a skip reason.
void read_window(std::string_view text, ModelSpec& m, std::vector<std::string>& skip) {
  const std::string plain = without_sized_parens(text);
  bool stated = names_word(plain, "swa", false), denied = names_word(plain, "swa", true);
  for (std::string_view w : kWindowPhrases) {
    stated = stated || names_word(plain, w, false, false);
    denied = denied || names_word(plain, w, true, false);
  }
  if (!stated) return;
  if (denied) {
    skip.push_back("arch: a sliding window is both stated and denied");
    return;
  }
  const std::optional<StatedSize> window = stated_window(text);
  if (!window) {
    skip.push_back("arch: sliding window size not stated");
    return;
  }
  if (window->value == 0) {
    skip.push_back(fmt::format("arch: sliding window {} is out of range [1, {}]", window->written, kMaxWindow));
    return;
  }
  const std::optional<int64_t> pattern = window_pattern(plain, skip);
  if (!pattern) return;
  if (*pattern > m.layers && m.layers > 0) {  // as a model document refuses it (spec_json.cpp check_window)
    skip.push_back(
        fmt::format("arch: a sliding-window pattern of {} is above the model's {} layers", *pattern, m.layers));
    return;
  }
  m.sliding_window = window->value;
  m.sliding_window_pattern = *pattern;
}

// The one model profile `match` accepts; nullptr when none or several do.
template <class Match>
const ModelSpec* unique_model(const ProfileSet& profiles, Match match) {
  const ModelSpec* found = nullptr;
  for (const auto& e : profiles.entries()) {
    const ModelSpec* p = e.kind == "model" ? profiles.find_model(e.name) : nullptr;
    if (!p || p == found || !match(*p)) continue;
    if (found) return nullptr;
    found = p;
  }
  return found;
}

// The one MLA model profile with the row's layers, hidden and heads whose FFN widths (the experts' or the dense
// layers') include one of the row's (`ffn`, `moe_ffn`); nullptr when none or several.
const ModelSpec* mla_profile_like(const ProfileSet& profiles, const ModelSpec& m, std::optional<int64_t> moe_ffn) {
  return unique_model(profiles, [&](const ModelSpec& p) {
    auto widths = [&](int64_t w) { return w > 0 && (w == p.ffn_hidden || w == p.dense_ffn_hidden); };
    return p.is_mla() && p.layers == m.layers && p.hidden == m.hidden && p.heads == m.heads &&
           (widths(m.ffn_hidden) || widths(moe_ffn.value_or(0)));
  });
}

// Multi-head latent attention's ranks and head widths from the row's notes, in the two phrasings the file uses
// ("q_lora 1536, kv_lora 512, qk_head 128 + rope 64, v_head 128"; "kv compression 512, query compression 1536, head
// dim 128, decoupled RoPE 64"). Where the notes do not state them, search takes those of the one MLA model profile
// with the row's layers, hidden, heads and FFN width (`like`: DeepSeek-V3's for its 61 x 7168 shape); else what is
// missing is a skip reason.
void read_mla(std::string_view notes, ModelSpec& m, const ModelSpec* like, MappedRun& r, const Gaps& gaps) {
  // Hugging Face's config names first (q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim).
  const auto q_lora = number_after(notes, {"q_lora_rank", "q_lora", "query compression"});
  const auto kv_lora = number_after(notes, {"kv_lora_rank", "kv_lora", "kv compression"});
  const auto head = number_after(notes, {"qk_nope_head_dim", "qk_head", "head dim"});
  const auto rope = number_after(notes, {"qk_rope_head_dim", "rope", "decoupled rope"});
  if (!q_lora || !kv_lora || !head || !rope) {
    if (like && gaps.search()) {
      m.q_lora_rank = like->q_lora_rank;
      m.kv_lora_rank = like->kv_lora_rank;
      m.head_dim_override = like->head_dim_override;
      m.qk_rope_head_dim = like->qk_rope_head_dim;
      m.v_head_dim_override = like->v_head_dim_override;
      m.kv_heads = m.heads;
      r.assumed.push_back(fmt::format("arch MLA: q_lora_rank {}, kv_lora_rank {}, head width {} + rope {} (the {} "
                                      "profile, whose layers, hidden, heads and ffn the row's match)",
                                      m.q_lora_rank, m.kv_lora_rank, m.head_dim(), m.qk_rope_head_dim, like->name));
      return;
    }
    r.skip_reasons.push_back("arch.attention MLA: arch_notes do not state its ranks and head widths");
    return;
  }
  m.q_lora_rank = *q_lora;
  m.kv_lora_rank = *kv_lora;
  m.head_dim_override = *head;
  m.qk_rope_head_dim = *rope;
  m.v_head_dim_override = number_after(notes, {"v_head_dim", "v_head"}).value_or(0);  // else the head width, as DeepSeek-V3's
  m.kv_heads = m.heads;
}

// The mixture-of-experts fields of a row's arch (experts, top_k, shared_experts, dense_layers, moe_ffn), its
// attention kind, and a head width the notes state as Megatron's kv_channels. Routed experts whose FFN is arch.ffn
// map onto the model's experts and top_k, shared experts and leading dense layers onto its own fields (the dense
// layers' FFN from "dense ... ffn N" in ffn_type or arch_notes); what the cost model does not represent (a per-expert
// FFN size other than arch.ffn, linear attention, an MTP depth the notes do not state) is a skip reason naming the
// field.
void read_moe(const Obj& a, ModelSpec& m, const ProfileSet& profiles, MappedRun& r, const Gaps& gaps) {
  std::vector<std::string>& skip = r.skip_reasons;
  const auto experts = a.integer("experts", 1, 1'000'000), top_k = a.integer("top_k", 1, 1'000'000),
             shared = a.integer("shared_experts", 0, 1'000'000), dense = a.integer("dense_layers", 0, 100'000),
             moe_ffn = a.integer("moe_ffn", 1, 10'000'000);
  const std::string attention = ascii_lower(a.text("attention"));
  const std::string notes = ascii_lower(a.text("arch_notes")), ffn_type = ascii_lower(a.text("ffn_type"));
  // The head width where heads x head width is not the hidden size (Qwen3: 64 heads of 128 on hidden 4096), as
  // Megatron's kv_channels or Hugging Face's head_dim.
  if (const auto kv_channels = number_after(notes, {"kv_channels", "kv channels", "head_dim", "head dim"});
      kv_channels && m.heads > 0) {
    m.head_dim_override = *kv_channels;
  }
  // Linear attention and state-space layers (Qwen3-Next's gated DeltaNet, Mamba in Nemotron-H and Jamba, RWKV) have
  // no softmax attention core and a recurrent cost parplan does not price: a skip, never a transformer's count.
  if (has(attention, "linear")) {
    skip.push_back("arch.attention linear attention is not modelled");
  } else if (const std::string layers_text = attention + " " + notes;
             has(layers_text, "mamba") || has(layers_text, "state space") || has(layers_text, "state-space") ||
             has(layers_text, "deltanet") || has(layers_text, "rwkv")) {
    skip.push_back(fmt::format("arch: state-space or recurrent layers ('{}') are not modelled",
                               excerpt(attention.empty() ? notes : attention)));
  }
  read_window(attention + " " + notes, m, skip);
  if (has(attention, "mla") || has(attention, "latent")) {
    read_mla(notes, m, m.layers > 0 ? mla_profile_like(profiles, m, moe_ffn) : nullptr, r, gaps);
  }
  if (states(notes, "mtp")) {  // not "no MTP"  // "MTP 1 layer", "MTP depth 1": the multi-token prediction modules (ModelSpec::mtp_layers)
    if (const auto mtp = number_after(notes, {"mtp depth", "mtp"}); mtp && *mtp <= 100) {
      m.mtp_layers = *mtp;
    } else {
      skip.push_back("arch_notes MTP: the number of multi-token prediction modules is not stated");
    }
  }
  if (experts.value_or(1) <= 1) return;
  m.experts = *experts;
  if (!top_k) {
    skip.push_back("arch.top_k not stated");
  } else if (*top_k > *experts) {
    skip.push_back(fmt::format("arch.top_k {} exceeds arch.experts {}", *top_k, *experts));
  } else {
    m.top_k = *top_k;
  }
  m.shared_experts = shared.value_or(0);
  // arch.moe_ffn is the experts' width (the schema's "per-expert intermediate size"); an arch.ffn beside it that
  // differs is the dense MLP's (DeepSeek-V3: ffn 18432, moe_ffn 2048), the dense layers' width where ffn_type does not
  // state one.
  const auto ffn = a.integer("ffn", 1, 10'000'000);
  const bool ffn_is_dense = moe_ffn && ffn && *moe_ffn != *ffn;
  if (moe_ffn) m.ffn_hidden = *moe_ffn;
  if (dense.value_or(0) > 0) {
    auto dense_ffn = number_after(ffn_type.substr(std::min(ffn_type.size(), ffn_type.find("dense"))), {"ffn"});
    if (!dense_ffn && ffn_is_dense) dense_ffn = *ffn;
    if (dense_ffn) {
      m.dense_layers = *dense;
      m.dense_ffn_hidden = *dense_ffn;
    } else {
      skip.push_back(fmt::format("arch.dense_layers {}: the dense layers' FFN width is not stated", *dense));
    }
  } else if (ffn_is_dense) {
    r.notes.push_back(fmt::format("arch.ffn {}: the dense MLP width, unused (every layer is MoE: the experts' width is "
                                  "arch.moe_ffn {})",
                                  *ffn, *moe_ffn));
  }
}

// The one model profile with this shape (layers, hidden, heads, FFN width, and kv_heads when stated); nullptr when
// none or several have it.
const ModelSpec* model_with_shape(const ProfileSet& profiles, int64_t layers, int64_t hidden, int64_t heads,
                                  std::optional<int64_t> kv, int64_t ffn) {
  return unique_model(profiles, [&](const ModelSpec& p) {
    return p.layers == layers && p.hidden == hidden && p.heads == heads && p.ffn_hidden == ffn &&
           (!kv || p.kv_heads == *kv);
  });
}

// The model of a row (arch): shape, FFN type, and the Llama-family conventions of SwiGLU models.
ModelSpec read_arch(const Obj& a, const ProfileSet& profiles, MappedRun& r, const Gaps& gaps) {
  std::vector<std::string>& skip = r.skip_reasons;
  ModelSpec m;
  m.name = r.id;
  m.source = r.source;
  const auto layers = a.integer("layers", 1, 100'000), hidden = a.integer("hidden", 1, 10'000'000),
             heads = a.integer("heads", 1, 10'000'000), seq = a.integer("seq_len", 1, 100'000'000);
  auto kv = a.integer("kv_heads", 1, 10'000'000), ffn = a.integer("ffn", 1, 10'000'000),
       vocab = a.integer("vocab", 1, 100'000'000);
  a.number("params_B", 0, 1e6);
  std::string ffn_text = a.text("ffn_type");
  const std::string arch_notes = a.text("arch_notes");
  if (!layers) gaps.missing("arch.layers");
  if (!hidden) gaps.missing("arch.hidden");
  if (!heads) gaps.missing("arch.heads");
  // A GPT-3-style model (arch_notes name GPT-3; Brown et al. 2020) whose shape is not stated in full, searched: multi-head attention, a 4h
  // GeLU MLP, and the GPT-2 BPE vocabulary (50257) padded as parplan's GPT-3 profiles pad it (51200, Megatron-LM).
  const bool gpt3 = gaps.search() && has(ascii_lower(arch_notes), "gpt-3");
  if (!kv && heads && gpt3 && gaps.assume("arch.kv_heads", fmt::format("{} (heads: GPT-3-style MHA)", *heads))) kv = heads;
  if (!ffn && ffn_text.empty() && hidden && gpt3 &&
      gaps.assume("arch.ffn", fmt::format("{} (4h GeLU MLP, GPT-3 style)", 4 * *hidden))) {
    ffn = 4 * *hidden;
    ffn_text = "GeLU MLP (4h)";
  }
  if (!vocab && gpt3 && gaps.assume("arch.vocab", "51200 (GPT-2 BPE padded as Megatron-LM pads it)")) vocab = 51200;
  // Searched, the vocabulary of the model profile with the row's shape (Mixtral 8x22B: its released tokenizer's 32768).
  const ModelSpec* same = !vocab && gaps.search() && layers && hidden && heads && ffn
                              ? model_with_shape(profiles, *layers, *hidden, *heads, kv, *ffn)
                              : nullptr;
  if (same && gaps.assume("arch.vocab", fmt::format("{} (the {} profile, whose layers, hidden, heads, kv_heads and "
                                                    "ffn the row's match)",
                                                    same->vocab, same->name))) {
    vocab = same->vocab;
  }
  // Multi-head latent attention gives every head its own keys and values (read_mla).
  if (!kv && heads && has(ascii_lower(a.text("attention")), "mla")) kv = heads;
  // kv_heads null: the count the notes or the attention field state ("GQA (8 KV heads)", num_key_value_heads 8), or
  // every head's own for multi-head attention ("MHA"); noted.
  if (!kv && heads) {
    const std::string an = ascii_lower(arch_notes + " " + a.text("attention"));
    if (const auto n = number_after(an, {"num_key_value_heads", "kv_heads", "kv heads", "num_query_groups", "query groups"});
        n && *n > 0) {
      kv = *n;
    } else if (const auto g = number_after(an, {"gqa ("}); g && *g > 0 && has(an, "kv")) {
      kv = *g;
    } else if ((states(an, "mha") || states(an, "multi-head attention")) && !has(an, "gqa") && !has(an, "latent")) {
      kv = *heads;
    }
    if (kv) r.notes.push_back(fmt::format("arch.kv_heads {} from the arch notes (arch.kv_heads null)", *kv));
  }
  if (!kv) gaps.missing("arch.kv_heads");
  if (!ffn) gaps.missing("arch.ffn");
  if (!vocab) gaps.missing("arch.vocab");
  if (!seq) gaps.missing("arch.seq_len");
  if (ffn_text.empty()) {
    gaps.missing("arch.ffn_type");
  } else if (!map_ffn_type(ffn_text, m.ffn_type)) {
    skip.push_back(fmt::format("arch.ffn_type '{}' is not a GeLU/ReLU MLP or SwiGLU", excerpt(ffn_text)));
  }
  if (layers && hidden && heads && kv && ffn && vocab && seq) {
    m.layers = *layers;
    m.hidden = *hidden;
    m.heads = *heads;
    m.kv_heads = *kv;
    m.ffn_hidden = *ffn;
    m.vocab = *vocab;
    m.seq_len = *seq;
    if (m.hidden % m.heads != 0 || m.heads % m.kv_heads != 0) {
      skip.push_back(fmt::format("arch: heads {} / kv_heads {} do not divide hidden {}", m.heads, m.kv_heads, m.hidden));
    }
  }
  const std::string an = ascii_lower(arch_notes);
  if (m.ffn_type == FfnType::swiglu) {  // Llama-family conventions: no biases, RMSNorm, rotary, no dropout
    m.bias = false;
    m.norm = NormType::rmsnorm;
    m.position = PositionEmbedding::rotary;
    m.dropout = false;
  }
  if (has(an, "no bias")) m.bias = false;
  if (has(an, "alibi")) m.position = PositionEmbedding::alibi;
  if (has(an, "rotary") || has(an, "rope")) m.position = PositionEmbedding::rotary;
  if (has(an, "untied")) m.tied_embeddings = false;
  read_moe(a, m, profiles, r, gaps);
  return m;
}

// What a row's hardware object gives: GPU count, GPUs per node, the cluster profile with that GPU and node size
// (the last, user-given, one wins), and the inter-node link text.
struct RowHardware {
  std::optional<int64_t> num_gpus, gpus_per_node;
  const ClusterSpec* cluster = nullptr;
  std::string inter_text;
};

// The cluster profiles whose GPU is `gpu_type`, each once (an overridden one as its override), embedded ones first.
std::vector<const ClusterSpec*> clusters_with(const std::string& gpu_type, const ProfileSet& profiles) {
  std::vector<const ClusterSpec*> out;
  for (const auto& e : profiles.entries()) {
    if (e.kind != "cluster") continue;
    const ClusterSpec* c = profiles.find_cluster(e.name);
    const GpuSpec* g = c ? profiles.find_gpu(c->gpu) : nullptr;
    if (g && g->name == gpu_type && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

// Search, GPUs per node unstated: the node size every cluster profile with the row's GPU has (the HGX/DGX 8-GPU
// baseboards of the SXM parts, the 8-GPU MI300X platform); nothing when they disagree or there is none.
std::optional<int64_t> assumed_gpus_per_node(const std::vector<const ClusterSpec*>& clusters, const MappedRun& r,
                                             const Gaps& gaps) {
  if (clusters.empty() || !gaps.search()) return std::nullopt;
  std::string names;
  for (const ClusterSpec* c : clusters) {
    if (c->gpus_per_node != clusters.front()->gpus_per_node) return std::nullopt;
    names += (names.empty() ? "" : ", ") + c->name;
  }
  const int64_t n = clusters.front()->gpus_per_node;
  gaps.assume("hardware.gpus_per_node",
              fmt::format("{} (the node of every {} cluster profile: {})", n, r.gpu_type, names));
  return n;
}

RowHardware read_hardware(const Obj& hw, const ProfileSet& profiles, MappedRun& r, const Gaps& gaps) {
  std::vector<std::string>& skip = r.skip_reasons;
  RowHardware h;
  r.gpu_text = hw.text("gpu");
  h.num_gpus = hw.integer("num_gpus", 1, kMaxCount);
  h.gpus_per_node = hw.integer("gpus_per_node", 1, 1'000'000);
  std::string why;
  r.gpu_type = map_gpu(r.gpu_text, profiles, &why);
  if (r.gpu_type.empty()) skip.push_back(why);
  const std::vector<const ClusterSpec*> clusters = clusters_with(r.gpu_type, profiles);
  if (!h.gpus_per_node) h.gpus_per_node = assumed_gpus_per_node(clusters, r, gaps);
  if (!h.num_gpus) gaps.missing("hardware.num_gpus");
  if (!h.gpus_per_node) gaps.missing("hardware.gpus_per_node");
  h.inter_text = hw.text("inter_node_per_node");
  hw.text("intra_node");
  hw.text("system");
  if (!r.gpu_type.empty() && h.gpus_per_node) {
    for (const ClusterSpec* c : clusters) {
      if (c->gpus_per_node == *h.gpus_per_node) h.cluster = c;  // the last (user) one wins
    }
    // A rack-scale NVLink domain written as the node ("GB200 NVL72", gpus_per_node 72): the cluster whose NVLink
    // domain it is (gb200-nvl72: 4 GPUs per tray, 72 per domain), noted.
    for (const ClusterSpec* c : h.cluster ? std::vector<const ClusterSpec*>{} : clusters) {
      if (c->nvlink_domain_gpus == *h.gpus_per_node && c->nvlink_domain_gpus > c->gpus_per_node) {
        h.cluster = c;
        r.notes.push_back(fmt::format("hardware.gpus_per_node {}: the NVLink domain of {} ({} GPUs per node)",
                                      *h.gpus_per_node, c->name, c->gpus_per_node));
        h.gpus_per_node = c->gpus_per_node;
      }
    }
    if (!h.cluster) {
      skip.push_back(fmt::format("no cluster profile with {} and {} GPUs per node", r.gpu_type, *h.gpus_per_node));
    }
  }
  return h;
}

// torchtitan's pipeline defaults, for its rows that leave them unstated (search only; strict skips them): an unset
// experimental.pipeline_parallel_microbatches runs pp microbatches per step (torchtitan
// parallelisms/pipelining_utils.py build_pipeline_schedule: n_microbatches = the pp degree), so the micro-batch is
// the local batch over pp; multi-stage schedules (Interleaved 1F1B) put 2 stages on each rank (generate_split_points,
// num_stages_per_rank = 2). The rows' notes name both defaults.
void torchtitan_pipeline_defaults(MappedRun& r, const Gaps& gaps, std::string_view lower_notes,
                                  const std::optional<int64_t>& pp, const std::optional<int64_t>& dp,
                                  const std::optional<int64_t>& gbs, std::optional<int64_t>& mb,
                                  std::optional<int64_t>& vpp) {
  if (!has(r.source, "torchtitan") || !gaps.search() || !pp || *pp < 2) return;
  if (!mb && dp && gbs && *gbs % (*dp * *pp) == 0) {
    mb = *gbs / (*dp * *pp);
    r.assumed.push_back(fmt::format("parallel.micro_batch = {} (torchtitan's default: pp = {} microbatches per step)",
                                    *mb, *pp));
  }
  if (!vpp && has(lower_notes, "interleaved 1f1b")) {
    vpp = 2;
    r.assumed.push_back("parallel.vpp_chunks_per_stage = 2 (torchtitan's default for Interleaved 1F1B)");
  }
}

// What a row's parallel object states: the parallel configuration, its global batch, FSDP, SP (when stated) and
// the parallel notes.
struct RowParallel {
  ParallelConfig pc;
  std::optional<int64_t> global_batch;
  std::optional<bool> fsdp, sequence_parallel;
  std::string notes;
};

// The integer a word of lowercase `text` introduces: `word` at a word start (not after a letter or digit), then
// blanks, '=' or ':' and digits ("ep8", "ep = 8", "etp: 1"); with `sign`, an optional '-' before the digits ("shard
// -1", "replicate 0"); nullopt when there is none.
std::optional<int64_t> integer_of_word(std::string_view text, std::string_view word, bool sign) {
  for (size_t at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
    if (at > 0 && std::isalnum(static_cast<unsigned char>(text[at - 1]))) continue;
    size_t i = at + word.size();
    while (i < text.size() && (text[i] == ' ' || text[i] == '=' || text[i] == ':')) ++i;
    const bool negative = sign && i < text.size() && text[i] == '-';
    if (negative) ++i;
    int64_t v = 0;
    size_t digits = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && digits < 9; ++i, ++digits) {
      v = v * 10 + (text[i] - '0');
    }
    if (digits > 0 && (i == text.size() || !std::isalpha(static_cast<unsigned char>(text[i])))) {
      return negative ? -v : v;
    }
  }
  return std::nullopt;
}
// The integer written before a word of lowercase `text`: digits, then "-way" / " way" or nothing, then blanks, then
// `word` ("2 replicas", "4-way sharding", "2-way replication"); nullopt when there is none.
std::optional<int64_t> number_before_word(std::string_view text, std::string_view word) {
  for (size_t at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
    if (at > 0 && std::isalnum(static_cast<unsigned char>(text[at - 1]))) continue;
    size_t i = at;
    while (i > 0 && text[i - 1] == ' ') --i;
    if (i >= 4 && text.substr(i - 3, 3) == "way" && (text[i - 4] == '-' || text[i - 4] == ' ')) i -= 4;
    size_t end = i;
    while (i > 0 && std::isdigit(static_cast<unsigned char>(text[i - 1])) && end - i < 9) --i;
    if (i == end || (i > 0 && (std::isalpha(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '.'))) continue;
    int64_t v = 0;
    for (size_t k = i; k < end; ++k) v = v * 10 + (text[k] - '0');
    return v;
  }
  return std::nullopt;
}

// Whether lowercase parallel notes state HSDP: by name ("HSDP", "hybrid shard(ing)", PyTorch FSDP1's
// ShardingStrategy.HYBRID_SHARD / _HYBRID_SHARD_ZERO2), by torchtitan's replicate degree key
// ("data_parallel_replicate_degree = 2", "dp_replicate=2"), or by Megatron-Core's partial distributed optimizer
// ("--num-distributed-optimizer-instances 2", "distributed optimizer instances"); none of them denied ("no HSDP").
bool states_optimizer_instances(std::string_view pn) {
  return states(pn, "num-distributed-optimizer-instances") || states(pn, "num_distributed_optimizer_instances") ||
         states(pn, "distributed optimizer instances");
}
bool states_hsdp(std::string_view pn) {
  for (std::string_view w : {"hsdp", "hybrid shard", "hybrid_shard", "hybrid-shard", "dp_replicate",
                             "data_parallel_replicate_degree"}) {
    if (states(pn, w)) return true;
  }
  return states_optimizer_instances(pn);
}

// HSDP stated in the parallel notes ("HSDP (replicate 4, shard 64)", "hybrid shard over 8 GPUs", "2 replicas"): the
// replica count (ParallelConfig::dp_replicate) from the replicate degree, else dp over the shard degree (the dp ranks
// of a shard group, torchtitan's data_parallel_shard_degree, which leaves out cp; -1 there is torchtitan's "the rest").
// False, with a skip reason naming what is missing or wrong, when neither degree is read, a degree is below 1, or they
// do not split dp.
bool read_hsdp(const std::string& pn, ParallelConfig& pc, MappedRun& r) {
  auto first = [&](std::initializer_list<std::string_view> after, std::initializer_list<std::string_view> before) {
    std::optional<int64_t> v;
    for (std::string_view w : after) {
      if (!v) v = integer_of_word(pn, w, true);
    }
    for (std::string_view w : before) {
      if (!v) v = number_before_word(pn, w);
    }
    return v;
  };
  auto rep = first({"replicate", "replicas", "replica groups", "dp_replicate", "data_parallel_replicate_degree",
                    "num-distributed-optimizer-instances", "num_distributed_optimizer_instances",
                    "distributed optimizer instances"},
                   {"replicas", "replica groups", "replication", "replicated", "distributed optimizer instances"});
  auto shard = first({"shard", "dp_shard", "data_parallel_shard_degree", "hybrid shard over", "sharded over",
                      "shard group", "mics_shard_size"},
                     {"sharding", "sharded", "shard group"});
  if (shard && *shard == -1) shard.reset();  // torchtitan's "the dp ranks the replicas leave"
  for (const auto& [name, v] : {std::pair{"replicate", rep}, std::pair{"shard", shard}}) {
    if (v && *v < 1) {
      r.skip_reasons.push_back(fmt::format("parallel_notes: HSDP {} degree {} is not a degree (at least 1{})", name,
                                           *v, std::string_view(name) == "shard" ? ", or -1 for the rest" : ""));
      return false;
    }
  }
  if (!rep && !shard) {
    r.skip_reasons.push_back("parallel_notes: HSDP (sharded within replica groups, replicated across them) without a "
                             "replicate or shard degree it can read (e.g. \"HSDP (replicate 4, shard 64)\", \"2 "
                             "replicas\"), which the memory and communication need");
    return false;
  }
  const int64_t replicas = rep ? *rep : (pc.dp % *shard == 0 ? pc.dp / *shard : 0);
  if (replicas < 1 || pc.dp % replicas != 0 || (rep && shard && *rep * *shard != pc.dp)) {
    r.skip_reasons.push_back(fmt::format("parallel_notes: HSDP replicate {} x shard {} does not split dp {}",
                                         rep ? std::to_string(*rep) : "?", shard ? std::to_string(*shard) : "?",
                                         pc.dp));
    return false;
  }
  pc.dp_replicate = replicas;
  if (replicas == 1) {
    r.notes.push_back(fmt::format("HSDP from the parallel notes: dp {} as 1 replica of {} sharded ranks (no "
                                  "replication)", pc.dp, pc.dp));
  } else {
    r.notes.push_back(fmt::format("HSDP from the parallel notes: dp {} as {} replicas of {} sharded ranks", pc.dp,
                                  replicas, pc.dp / replicas));
  }
  return true;
}

// What the parallel notes state where the structured field is null: the expert parallel and expert tensor parallel
// sizes ("EP8, ETP=1", Megatron's --expert-tensor-parallel-size 1), sequence parallelism ("SP on"), and the
// optimizer sharding ("distributed optimizer", "ZeRO-1", "FSDP"; HSDP with its degrees, read_hsdp). Each value taken
// is noted.
void read_parallel_notes(const std::string& pn, const std::optional<int64_t>& ep, std::optional<bool>& sp,
                         const std::optional<int64_t>& zero, const std::optional<bool>& fsdp, ParallelConfig& pc,
                         MappedRun& r) {
  auto first = [&](std::initializer_list<std::string_view> words) -> std::optional<int64_t> {
    for (std::string_view w : words) {
      if (const auto v = integer_of_word(pn, w, false)) return v;
    }
    return std::nullopt;
  };
  if (const auto etp = first({"etp", "expert-tensor-parallel-size", "expert tensor parallel size", "expert_tensor_parallel_size"});
      etp && *etp > 0) {
    pc.etp = *etp;
    r.notes.push_back(fmt::format("etp {} from the parallel notes: Megatron-Core MoE parallel folding", *etp));
  }
  if (!ep) {
    if (const auto e = first({"ep", "expert-model-parallel-size", "expert model parallel size", "expert parallel size"});
        e && *e > 0) {
      pc.ep = *e;
      r.notes.push_back(fmt::format("ep {} from the parallel notes (parallel.ep null)", *e));
    }
  }
  if (!sp && (states(pn, "sequence parallel") || states(pn, "sp on") || states(pn, "sp enabled") ||
              has(pn, "sp=true") || has(pn, "sp: true"))) {
    sp = true;
    r.notes.push_back("sequence parallelism from the parallel notes (parallel.sequence_parallel null)");
  }
  if (has(pn, "cp_comm_type") || has(pn, "cp comm type") || has(pn, "cp-comm-type")) {
    r.notes.push_back("parallel_notes: the CP communication type is stated; CP is priced as ring attention's P2P");
  }
  if (states_hsdp(pn)) {
    if (!read_hsdp(pn, pc, r) || zero || fsdp) return;
    if (states_optimizer_instances(pn)) {  // Megatron-Core's partial distributed optimizer: ZeRO-1 in each instance
      pc.zero_stage = 1;
      r.notes.push_back("ZeRO-1 from the parallel notes (distributed optimizer instances: the distributed optimizer "
                        "within each instance; parallel.zero_stage null)");
      return;
    }
    if (states(pn, "hybrid_shard_zero2")) {  // FSDP1's _HYBRID_SHARD_ZERO2: SHARD_GRAD_OP within each replica
      pc.zero_stage = 2;
      r.notes.push_back("ZeRO-2 from the parallel notes (_HYBRID_SHARD_ZERO2: gradients and optimizer sharded within "
                        "each replica; parallel.zero_stage and fsdp null)");
      return;
    }
    pc.zero_stage = 3;  // HSDP is FSDP within each replica
    r.notes.push_back("ZeRO-3 from the parallel notes (HSDP: FSDP within each replica; parallel.zero_stage and fsdp "
                      "null)");
    return;
  }
  // A stated ZeRO stage or FSDP says it all; "fsdp": false denies FSDP, not a distributed optimizer the notes name.
  if (zero || fsdp.value_or(false)) return;
  if (!fsdp && (states(pn, "fsdp") || states(pn, "zero-3") || states(pn, "zero stage 3") || states(pn, "zero3"))) {
    pc.zero_stage = 3;
    r.notes.push_back("ZeRO-3 from the parallel notes (FSDP / ZeRO-3; parallel.zero_stage and fsdp null)");
  } else if (states(pn, "zero-2") || states(pn, "zero stage 2")) {
    pc.zero_stage = 2;
    r.notes.push_back("ZeRO-2 from the parallel notes (parallel.zero_stage null)");
  } else if (states(pn, "distributed optimizer") || states(pn, "distributed_optimizer") ||
             states(pn, "distributed-optimizer") || states(pn, "zero-1") ||
             states(pn, "zero stage 1")) {
    pc.zero_stage = 1;  // Megatron's distributed optimizer: ZeRO-1's sharding, priced alike
    r.notes.push_back("ZeRO-1 from the parallel notes (distributed optimizer; parallel.zero_stage null)");
  } else if (states(pn, "overlap-param-gather") || states(pn, "overlap_param_gather")) {
    pc.zero_stage = 1;  // Megatron-LM accepts --overlap-param-gather only with --use-distributed-optimizer
    r.notes.push_back("ZeRO-1 from the parallel notes (--overlap-param-gather needs Megatron-LM's distributed "
                      "optimizer; parallel.zero_stage null)");
  }
}

// What the mesh and batch a row states imply of what it leaves out, by arithmetic alone (either mode, noted): the
// data-parallel size as the GPUs over tp x pp x cp (Megatron-LM's data_parallel_size), and the micro-batch as the
// global batch over dp x the gradient-accumulation steps.
void derive_dp_and_micro_batch(int64_t gpus, const std::optional<int64_t>& tp, const std::optional<int64_t>& pp,
                               const std::optional<int64_t>& cp, const std::optional<int64_t>& gbs,
                               const std::optional<int64_t>& grad_accum, std::optional<int64_t>& dp,
                               std::optional<int64_t>& mb, MappedRun& r) {
  if (!dp && tp && pp && gpus > 0) {
    const int64_t model_parallel = *tp * *pp * cp.value_or(1);
    if (gpus % model_parallel == 0) {
      dp = gpus / model_parallel;
      r.notes.push_back(fmt::format("parallel.dp {} = {} GPUs / (tp {} x pp {} x cp {}) (parallel.dp null)", *dp, gpus,
                                    *tp, *pp, cp.value_or(1)));
    }
  }
  if (!mb && dp && gbs && grad_accum && *gbs % (*dp * *grad_accum) == 0) {
    mb = *gbs / (*dp * *grad_accum);
    r.notes.push_back(fmt::format("parallel.micro_batch {} = global batch {} / (dp {} x grad_accum {}) "
                                  "(parallel.micro_batch null)", *mb, *gbs, *dp, *grad_accum));
  }
}

RowParallel read_parallel(const Obj& p, int64_t gpus, MappedRun& r, Gaps& gaps) {
  std::vector<std::string>& skip = r.skip_reasons;
  RowParallel out;
  ParallelConfig& pc = out.pc;
  const auto tp = p.integer("tp", 1, kMaxCount), pp = p.integer("pp", 1, kMaxCount), cp = p.integer("cp", 1, kMaxCount),
             ep = p.integer("ep", 1, kMaxCount), vpp = p.integer("vpp_chunks_per_stage", 1, 1024),
             zero = p.integer("zero_stage", 0, 3), gbs = p.integer("global_batch_seqs", 1, kMaxGlobalBatch);
  std::optional<int64_t> dp = p.integer("dp", 1, kMaxCount), mb = p.integer("micro_batch", 1, kMaxCount),
                         vpp_or_default = vpp;
  derive_dp_and_micro_batch(gpus, tp, pp, cp, gbs, p.integer("grad_accum", 1, kMaxCount), dp, mb, r);
  out.sequence_parallel = p.boolean("sequence_parallel");
  const std::optional<bool> fsdp = out.fsdp = p.boolean("fsdp");
  out.global_batch = gbs;
  out.notes = p.text("parallel_notes");
  torchtitan_pipeline_defaults(r, gaps, ascii_lower(out.notes), pp, dp, gbs, mb, vpp_or_default);
  if (!tp) gaps.missing("parallel.tp");
  if (!pp) gaps.missing("parallel.pp");
  if (!dp) gaps.missing("parallel.dp");
  gaps.open_micro_batch = !mb && gaps.search();
  if (!mb && !gaps.open_micro_batch) gaps.missing("parallel.micro_batch");
  if (!gbs) gaps.missing("parallel.global_batch_seqs");
  pc.tp = tp.value_or(1);
  pc.pp = pp.value_or(1);
  pc.dp = dp.value_or(1);
  pc.cp = cp.value_or(1);
  pc.ep = ep.value_or(1);
  pc.vpp = vpp_or_default.value_or(1);
  pc.schedule = pc.vpp > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
  pc.micro_batch = mb.value_or(1);
  pc.zero_stage = static_cast<int>(zero.value_or(fsdp.value_or(false) ? 3 : 0));
  if (!zero && fsdp.value_or(false)) r.notes.push_back("zero_stage null with fsdp: ZeRO-3");
  read_parallel_notes(ascii_lower(out.notes), ep, out.sequence_parallel, zero, fsdp, pc, r);
  // Optimizer sharding the row neither states nor names stays off (ZeRO 0, the stacks' default); search takes the
  // distributed optimizer only where no plan fits without it (choose_open_knobs).
  gaps.open_optimizer_sharding = gaps.search() && !zero && !fsdp.value_or(false) && pc.zero_stage == 0 &&
                                 pc.dp * pc.cp > 1;
  if (tp && dp && mb && gbs) {
    pc.num_microbatches = microbatches_per_step(*gbs, pc.dp, pc.micro_batch);
    if (pc.num_microbatches == 0) {
      skip.push_back(fmt::format("global batch {} is not a multiple of dp {} x micro_batch {}", *gbs, pc.dp, pc.micro_batch));
      pc.num_microbatches = 1;
    }
  }
  return out;
}

// Sequence parallelism: as stated, else when the recompute text names it ("selective + sequence parallel").
bool sequence_parallel(const std::optional<bool>& stated, std::string_view recompute_text) {
  if (stated) return *stated;
  const std::string rt = ascii_lower(recompute_text);
  return has(rt, "sequence parallel") && !has(rt, "no sequence parallel");
}

// A free-text field that says nothing: "not stated", or a table's blank marks ("-", "?", "unknown"). Search opens
// it as unstated.
bool states_nothing(std::string_view text) {
  std::string t = ascii_lower(text);
  const auto first = t.find_first_not_of(" \t"), last = t.find_last_not_of(" \t");
  t = first == std::string::npos ? "" : t.substr(first, last - first + 1);
  return has(t, "not stated") || t == "-" || t == "?" || t == "unknown" || t == "\u2014" || t == "\u2013";
}

// Precision, recompute (free text, with the FLOP-basis rule), and the software-vintage rules (attention kernel,
// asynchronous TP backward, fused gradient accumulation, communication overlap) of a row.
TrainingSpec read_training(const Obj& top, const Obj& ms, std::string_view recompute_text, std::string_view arch_notes,
                           std::string_view parallel_notes, bool fsdp, bool moe, ParallelConfig& pc, MappedRun& r,
                           Gaps& gaps) {
  std::vector<std::string>& skip = r.skip_reasons;
  TrainingSpec tr;
  const std::string prec_text = top.text("precision");
  std::string note;
  const bool prec_unstated = prec_text.empty() || (gaps.search() && states_nothing(prec_text));
  if (prec_unstated) {
    // The 16-bit rule of map_precision: unnamed mixed precision is Megatron-LM's --fp16.
    if (gaps.assume("precision", "fp16 (mixed precision not named: Megatron-LM --fp16)")) tr.precision = Precision::fp16;
  } else if (!map_precision(prec_text, tr.precision, &note)) {  // refuses a format below 8 bits too
    skip.push_back(names_sub_fp8(prec_text)
                       ? fmt::format("precision '{}' names a GEMM format below 8 bits (fp4/fp6), not modelled",
                                     excerpt(prec_text))
                       : fmt::format("precision '{}' names no fp16/bf16/fp8", excerpt(prec_text)));
  }
  if (!note.empty()) r.notes.push_back(note);
  const bool torchtitan = names_torchtitan_stack(r.source);
  if (tr.precision == Precision::fp8) {
    // Megatron-Core, NeMo and Transformer Engine stacks (named in the source or notes), not torchtitan's torchao.
    const std::string stack = ascii_lower(r.source + " " + prec_text + " " + std::string(parallel_notes));
    const bool te = !torchtitan && (has(stack, "megatron") || has(stack, "nemo") || has(stack, "transformer engine") ||
                                    has(stack, "transformerengine"));
    tr.fp8_recipe = map_fp8_recipe(prec_text, &r.notes, te);
    const std::string gather_text = prec_text + " " + std::string(parallel_notes);
    tr.fp8_param_gather = map_fp8_param_gather(gather_text);
    if (tr.fp8_param_gather) r.notes.push_back("weights gathered in fp8 (stated)");
    gaps.open_fp8_param_gather = gaps.search() && !tr.fp8_param_gather && !denies_fp8_param_gather(gather_text);
    if (torchtitan) {
      tr.fp8_saved_inputs = false;  // torchao's float8 keeps the 16-bit inputs for the backward (activations.hpp)
      r.notes.push_back("fp8 GEMM inputs kept in 16 bits for the backward (torchao float8)");
    }
    // The DeepSeek-V3 report's own training run: its Sec. 3.3.3 low-precision activation storage (activations.hpp).
    if (has(ascii_lower(r.source), "deepseek-v3 technical report")) {
      tr.fp8_activation_cache = true;
      r.notes.push_back("fp8 activation cache (DeepSeek-V3 report Sec. 3.3.3: the experts' SwiGLU inputs in fp8, its "
                        "output recomputed; the attention output kept once, in E5M6)");
    }
  }
  if (const std::optional<DType> moments = map_adam_moments(prec_text)) {
    tr.adam_moments = *moments;
    r.notes.push_back(fmt::format("Adam moments in {} (stated)", to_string(*moments)));
  }
  // Megatron: fp32 gradient accumulation/reduction for bf16, 16-bit for fp16. FSDP / DeepSpeed ZeRO-3 reduce in the
  // training dtype (PyTorch FSDP MixedPrecision reduce_dtype = param_dtype, llm-foundry "PURE"; DeepSpeed fp16), but
  // torchtitan's FSDP2 (and torchao's benchmarks, run on it) reduces in fp32: MixedPrecisionPolicy(reduce_dtype =
  // training.mixed_precision_reduce, default "float32"; torchtitan parallelize, cited from memory), the default the
  // torchtitan importer assumes too. With PP, where FSDP2 defers the gradient sync to the last microbatch, its
  // unsharded gradients accumulate in that reduce dtype (FSDPParam.unsharded_accumulated_grad, cited from memory).
  tr.grad_fp32 = tr.precision != Precision::fp16 && (!fsdp || torchtitan);
  // torchtitan shards with FSDP2 (fully_shard): the copies around its collectives (zero3.hpp fsdp2_copy_bytes).
  if (torchtitan && pc.zero_stage == 3 && pc.zero3_gather_unit == Zero3GatherUnit::layer) {
    pc.fsdp2 = true;
    r.notes.push_back("FSDP2: each all-gather copies out per parameter, each reduce-scatter copies in (torchtitan)");
  }
  const bool rc_unstated = recompute_text.empty() || (gaps.search() && states_nothing(recompute_text));
  if (rc_unstated) {
    // Rule: a row whose FLOP basis is Narayanan 2021 Eq. 3 counts the full-recompute forward pass, so the source
    // ran full recompute. Otherwise the mode is unknown (searched under Unstated::search).
    const std::string basis = ascii_lower(ms.text("tflops_basis"));
    if (has(basis, "eq.3") || has(basis, "eq. 3")) {
      pc.recompute = Recompute::full;
      r.notes.push_back("recompute not stated: full (FLOP basis Narayanan Eq. 3 counts the recompute pass)");
    } else if (gaps.search()) {
      gaps.open_recompute = true;
    } else {
      gaps.missing("recompute");
    }
  } else if (!map_recompute(recompute_text, pc.recompute)) {
    skip.push_back(fmt::format("recompute '{}' is not none/selective/full", excerpt(recompute_text)));
  } else if (pc.recompute == Recompute::selective) {
    pc.recompute_modules = map_recompute_modules(recompute_text, &r.notes);
  }
  if (!rc_unstated) pc.offload_modules = map_offload_modules(recompute_text, &r.notes);
  if (map_optimizer_offload(std::string(recompute_text) + " " + std::string(parallel_notes))) {
    pc.offload.optimizer = true;
    r.notes.push_back("optimizer states on the host, the Adam step on its CPUs (stated; Megatron-Core "
                      "--optimizer-cpu-offload priced as ZeRO-Offload's CPU-Adam)");
  }
  note.clear();
  const std::string row_notes = top.text("notes");
  const std::string row_texts = std::string(arch_notes) + " " + row_notes + " " + std::string(parallel_notes);
  tr.attention = map_attention(r.source, row_texts, &note);
  r.notes.push_back(note);
  note.clear();
  pc.async_tp_backward = map_async_tp_backward(r.source, row_texts, &note);
  if (pc.tp > 1) r.notes.push_back(note);
  note.clear();
  pc.tp_collective_copies = pc.tp > 1 && pc.sequence_parallel && map_tp_collective_copies(r.source, row_texts, &note);
  if (pc.tp_collective_copies) r.notes.push_back(note);
  note.clear();
  // torchtitan's float8 tensorwise TP gathers in fp8 (TrainingSpec::fp8_tp_gather); rowwise keeps 16-bit TP.
  if (pc.tp_collective_copies && tr.torchtitan_fp8_tp_gather(pc)) {
    tr.fp8_tp_gather = true;
    r.notes.push_back("TP all-gathers in fp8 (torchtitan's float8 tensorwise TP: Float8ColwiseParallel, "
                      "Float8RowwiseParallel)");
  }
  tr.fused_grad_accumulation = map_grad_accumulation_fusion(r.source, row_texts, &note);
  r.notes.push_back(note);
  note.clear();
  tr.fused_cross_entropy = map_fused_cross_entropy(r.source, &note);
  if (!note.empty()) r.notes.push_back(note);
  note.clear();
  std::string technique;
  if (const json* other = ms.get("other"); other && other->is_object()) {
    const auto it = other->find("technique");
    if (it != other->end() && it->is_string()) technique = it->get<std::string>();
  }
  tr.compiled_elementwise =
      map_compiled_elementwise(r.source, technique, row_notes + " " + top.text("source_locator"), &note);
  if (!note.empty()) r.notes.push_back(note);
  map_comm_overlap(parallel_notes, row_notes, pc, &r.notes, technique, moe);
  return tr;
}

// torchtitan's pipeline split (parallelisms/pipelining_utils.py generate_split_points, as its 2024 benchmarks ran):
// p v virtual stages (v = 2 per rank for multi-stage schedules) of L layers get b = L / (p v) layers each, and the
// e = L mod (p v) left over go one each to the middle stages from the second on; the last stage takes what remains
// (126 layers, 8 x 2 stages: 7, 8 x 14, 7). Rank s runs virtual stages s, s + p, ... (looped placement). Empty when
// a stage would get no layer.
std::vector<std::vector<int64_t>> torchtitan_split(int64_t layers, int64_t p, int64_t v) {
  const int64_t stages = p * v;
  if (stages < 1 || layers < stages) return {};
  const int64_t base = layers / stages;
  int64_t extra = layers % stages, placed = 0;
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i + 1 < stages; ++i) {
    const int64_t n = i > 0 && extra > 0 ? base + 1 : base;
    extra -= n - base;
    sizes.push_back(n);
    placed += n;
  }
  sizes.push_back(layers - placed);
  std::vector<std::vector<int64_t>> layout(static_cast<size_t>(p), std::vector<int64_t>(static_cast<size_t>(v)));
  for (int64_t c = 0; c < v; ++c) {
    for (int64_t s = 0; s < p; ++s) layout[static_cast<size_t>(s)][static_cast<size_t>(c)] = sizes[static_cast<size_t>(c * p + s)];
  }
  return layout;
}

// Node-limited routing a row states ("node-limited routing <=4 nodes", DeepSeek-V3's ffn_type): each token's experts
// on at most M nodes, run as group-limited routing with as many groups as the expert-parallel group has nodes, M of
// them chosen (ModelSpec::router_groups): DeepSeek-V3's config.json has n_group 8 for its ep 64 over 8 nodes, and
// Megatron-Core's --moe-router-num-groups help says to set it to the expert-parallel nodes for node-limited routing
// (as recalled, not checked against a pinned revision). Where the group spans no more than M nodes (or its nodes do
// not divide the experts) the limit changes nothing and is not set.
void read_node_limited_routing(const std::string& moe_text, Plan& plan, MappedRun& r) {
  const auto limit = number_after(moe_text, {"node-limited routing <", "node-limited routing to at most",
                                             "node-limited routing at most"});
  if (!limit || !plan.model.is_moe() || plan.parallel.ep <= 1) return;
  const int64_t nodes = group_domain_split(plan.parallel, GroupKind::ep, plan.cluster).domains;
  if (nodes <= *limit || plan.model.experts % nodes != 0) return;
  plan.model.router_groups = nodes;
  plan.model.router_group_top_k = *limit;
  if (moe_routing_error(plan.model).field != MoeRoutingError::Field::none) {
    plan.model.router_groups = plan.model.router_group_top_k = 0;
    return;
  }
  r.notes.push_back(fmt::format("node-limited routing (at most {} nodes a token): {} of {} router groups, one per "
                                "node of the ep group (Megatron-Core's node-limited setting)", *limit, *limit, nodes));
}

constexpr const char* kDualPipeVNote =
    "DualPipeV priced as parplan's dualpipe-v order (the DualPipe repository's eight steps, 2 chunks per stage in a V, "
    "2p + 1 chunk-microbatches in flight)";

// DeepSeek-V3's DualPipe (report Sec. 3.2.1): P ranks, each holding stages r and P - 1 - r, fed microbatches from
// both ends. By the DualPipe repository's step formulas, rank r runs the op sequence of rank min(r, P - 1 - r) of
// DualPipeV over P / 2 ranks with half the microbatches, whose rank holds the same two chunks: the same weights per
// rank, the same P + 1 chunk-microbatches in flight, and each stage's gradients reduced over the two ranks that
// hold it in every pipeline. So a DualPipe mesh pp P x dp D is priced as dualpipe-v at pp P / 2 x dp 2 D (the same
// GPUs and global batch); the one hop between the two halves that DualPipe sends and DualPipeV keeps on the rank is
// not priced. An odd P has no such halving: skipped. The report does not publish its split of the layers over the P
// chunks: the embedding, the loss and each multi-token prediction module take one layer's slot (Megatron-Core's
// account_for_embedding / account_for_loss_in_pipeline_split, the MTP modules counted the same way), the slots
// evenly over the chunks; where they do not divide evenly the planner's own split applies. With ep > 1 the report's
// all-to-alls are DualPipe's: each overlapped with the paired chunk's compute (Sec. 3.2.1) over its node-forwarding
// kernels on 20 SMs (Sec. 3.2.2), parplan's --overlap-ep with the deepep dispatcher (expert_comm.hpp).
void map_dualpipe(int64_t layers, int64_t mtp_layers, ParallelConfig& pc, MappedRun& r) {
  if (pc.pp < 2 || pc.pp % 2 != 0) {
    r.skip_reasons.push_back(fmt::format("schedule DualPipe over pp {}: priced as DualPipeV over half the stages, which "
                                         "needs an even pp of at least 2", pc.pp));
    return;
  }
  // Each direction takes half of a pipeline's microbatches (1: none read yet, the micro-batch search sets them).
  if (pc.num_microbatches > 1 && pc.num_microbatches % 2 != 0) {
    r.skip_reasons.push_back(fmt::format("schedule DualPipe with {} microbatches per pipeline: its two directions take "
                                         "half each, which needs an even count", pc.num_microbatches));
    return;
  }
  const int64_t chunks = pc.pp, slots = layers + 2 + mtp_layers, per = slots / chunks;
  r.notes.push_back(fmt::format("DualPipe over pp {} x dp {} priced as dualpipe-v over pp {} x dp {} (the same op "
                                "sequence per rank: DualPipe's rank r runs DualPipeV's rank min(r, P - 1 - r))",
                                pc.pp, pc.dp, pc.pp / 2, 2 * pc.dp));
  pc.pp /= 2;
  pc.dp *= 2;
  if (pc.num_microbatches > 1) pc.num_microbatches /= 2;
  pc.schedule = Schedule::dualpipe_v;
  if (pc.ep > 1) {
    pc.overlap_ep_comm = true;
    pc.moe_dispatcher = MoeDispatcher::deepep;
    r.notes.push_back("MoE all-to-alls: DualPipe's, overlapped with the paired chunk's compute, IB then NVLink "
                      "forwarding (DeepSeek-V3 report Sec. 3.2.1-3.2.2; --overlap-ep, deepep dispatcher)");
  }
  if (slots % chunks != 0 || per - 1 - mtp_layers < 1) return;
  pc.stage_layout.assign(static_cast<size_t>(pc.pp), {per, per});
  pc.stage_layout.front() = {per - 1, per - 1 - mtp_layers};  // stage 0 holds the first chunk and the last
  r.notes.push_back(fmt::format("stage layers {}: the embedding, the loss and {} MTP module(s) one layer's slot each, "
                                "{} slots over {} chunks", format_stage_layout(pc.stage_layout), mtp_layers, slots,
                                chunks));
}

// The schedule a row states in measured.other.schedule (the Zero Bubble rows: 1F1B, 1F1B-I, ZB-1p priced as ZB-H1,
// ZB-2p, ZB-V; DualPipeV), or a skip reason for another.
void read_stated_schedule(const json& other, ParallelConfig& pc, MappedRun& r) {
  auto it = other.find("schedule");
  if (it != other.end() && it->is_string()) {
    const std::string name = it->get<std::string>(), t = ascii_lower(name);
    if (t == "zb-1p" || t == "zb-h1") {
      pc.schedule = Schedule::zero_bubble;
      if (t == "zb-1p") {
        r.notes.push_back("ZB-1p (searched, 1F1B's activation memory) priced as ZB-H1, its handcrafted schedule of "
                          "the same memory (Qi et al. 2023 Sec. 3)");
      }
    } else if (t == "zb-2p") {
      pc.schedule = Schedule::zb_2p;
      r.notes.push_back("ZB-2p (searched, 2p M_B activation memory) priced as parplan's zb-2p order (2p - 1 in "
                        "flight, ZB-H2's peak, Qi et al. 2023 Table 1)");
    } else if (t == "zb-v") {
      pc.schedule = Schedule::zb_v;
      r.notes.push_back("ZB-V priced as parplan's zb-v order (2 chunks per stage in a V, 2p chunk-microbatches in "
                        "flight: 1F1B's activation memory, Qi et al. 2023 Sec. 6), one iteration");
    } else if (t == "dualpipev" || t == "dualpipe-v") {
      pc.schedule = Schedule::dualpipe_v;
      r.notes.push_back(kDualPipeVNote);
    } else if (t == "1f1b-i") {
      pc.schedule = Schedule::interleaved;
    } else if (t != "1f1b") {
      r.skip_reasons.push_back(
          fmt::format("schedule {} is not modelled (1F1B, 1F1B-I, ZB-H1, ZB-2p, ZB-V and DualPipeV are)", name));
    }
  }
}

// The pipeline layout a row states beyond its mesh: the schedule named in measured.other.schedule (the Zero Bubble
// rows: 1F1B, 1F1B-I, ZB-1p, ZB-2p, ZB-V) and first / last stages "one fewer transformer layer than the others"
// (arch_notes).
void read_pipeline_layout(const Obj& ms, std::string_view arch_notes, std::string_view parallel_notes, int64_t layers,
                          int64_t mtp_layers, ParallelConfig& pc, MappedRun& r, const Gaps& gaps) {
  const json* other = ms.get("other");
  if (other && other->is_object()) read_stated_schedule(*other, pc, r);
  // DualPipeV (the DualPipe repository's V, one pipeline) is parplan's dualpipe-v. DeepSeek-V3's DualPipe (report
  // Sec. 3.2.1, Table 2): two pipelines fed from opposite ends, each rank holding two stages' parameters; no parplan
  // schedule prices it, so a row that ran it is not scored under another.
  const std::string notes_lower = ascii_lower(parallel_notes);
  const bool schedule_stated = other && other->is_object() && other->contains("schedule");
  if (has(notes_lower, "dualpipev") || has(notes_lower, "dualpipe-v") || has(notes_lower, "dualpipe v")) {
    if (schedule_stated && pc.schedule != Schedule::dualpipe_v) {  // two statements of the schedule that disagree
      r.skip_reasons.push_back(fmt::format("parallel notes say DualPipeV, measured.other.schedule says {}",
                                           other->at("schedule").is_string() ? other->at("schedule").get<std::string>()
                                                                             : std::string("another")));
    } else if (pc.schedule != Schedule::dualpipe_v) {
      pc.schedule = Schedule::dualpipe_v;
      r.notes.push_back(kDualPipeVNote);
    }
  } else if (has(notes_lower, "dualpipe")) {
    map_dualpipe(layers, mtp_layers, pc, r);
  }
  // Zero Bubble's optimizer post-validation (their Sec. 4), stated beside a zero-bubble schedule.
  // Only ZB-2p's step changes with it (pipeline_time): the other zero-bubble rows say so rather than claim the fill.
  if (splits_backward(pc.schedule) && ascii_lower(parallel_notes).find("post-validation") != std::string::npos) {
    pc.post_validation = true;
    r.notes.push_back(pc.schedule == Schedule::zb_2p
                          ? "optimizer post-validation (stated): a step in a continuous run, the next iteration's "
                            "forwards filling the pipeline (Qi et al. 2023 Sec. 4)"
                          : fmt::format("optimizer post-validation (stated): {}'s step does not change with it (parplan "
                                        "drops only zb-2p's warm-up fill)",
                                        to_string(pc.schedule)));
  }
  const int64_t p = pc.pp;
  // Megatron-Core's layout string (--pipeline-model-parallel-layout), as its DeepSeek-V3 recipes give it: "layout
  // 'Et*4|(tttt|)*14tmL'" in the parallel notes.
  if (const size_t at = parallel_notes.find("layout '"); at != std::string_view::npos && p >= 1) {
    const size_t begin = at + 8, end = parallel_notes.find('\'', begin);
    const std::string_view text = parallel_notes.substr(begin, end == std::string_view::npos ? 0 : end - begin);
    try {
      const std::vector<std::vector<int64_t>> layout = parse_megatron_layout(text, p, "parallel notes layout");
      const int64_t v = static_cast<int64_t>(layout.front().size());
      int64_t sum = 0;
      for (const std::vector<int64_t>& stage : layout) sum = std::accumulate(stage.begin(), stage.end(), sum);
      if (sum != layers) {
        r.skip_reasons.push_back(fmt::format("layout '{}' holds {} transformer layers, the model {}", text, sum, layers));
      } else if (pc.vpp != v) {
        r.skip_reasons.push_back(fmt::format("layout '{}' has {} chunks per stage, the row vpp {}", text, v, pc.vpp));
      } else {
        pc.stage_layout = layout;
        r.notes.push_back(fmt::format("stage layers {} from Megatron-Core's layout '{}'", format_stage_layout(layout), text));
        return;
      }
    } catch (const InputError& e) {
      r.skip_reasons.push_back(e.what());
    }
  }
  if (has(r.source, "torchtitan") && p > 1) {
    pc.stage_layout = torchtitan_split(layers, p, pc.chunks_per_stage());
    if (!pc.stage_layout.empty()) {
      r.notes.push_back(fmt::format("stage layers {}: torchtitan's split points", format_stage_layout(pc.stage_layout)));
    }
    return;
  }
  // Megatron-Core interleaves layers that do not split into pp x vpp chunks by counting the embedding and the loss
  // as layers (--account-for-{embedding,loss}-in-pipeline-split, as its MoE recipes set; "96 incl. embedding and
  // loss" for Qwen3's 94 layers). NeMo and Megatron-Bridge run Megatron-Core.
  const int64_t chunks = p * pc.vpp;
  const bool accounted_split = pc.vpp > 1 && layers > 0 && layers % chunks != 0 && (layers + 2) % chunks == 0;
  if (accounted_split && (has(r.source, "Megatron") || has(r.source, "NeMo"))) {
    pc.embedding_in_pipeline_split = pc.loss_in_pipeline_split = true;
    r.notes.push_back(fmt::format("{} layers + embedding + loss in {} chunks: Megatron-Core's pipeline split", layers,
                                  chunks));
  }
  const int64_t middle = p > 0 ? (layers + 2) / p : 0, v = pc.chunks_per_stage();
  if (has(ascii_lower(arch_notes), "one fewer transformer layer") && p > 2 && layers > 0 && (layers + 2) % p == 0 &&
      v > 1 && middle % v == 0) {
    // Interleaved: the embedding and the loss take a layer's place in the first and the last chunk (1F1B-I with one
    // layer per chunk: the first stage's chunk 0 and the last stage's last chunk hold no transformer layer). ZB-V:
    // both chunks are the first stage's (ParallelConfig::output_stage()).
    pc.stage_layout.assign(static_cast<size_t>(p), std::vector<int64_t>(static_cast<size_t>(v), middle / v));
    --pc.stage_layout.front().front();
    --pc.stage_layout[static_cast<size_t>(pc.output_stage())].back();
    r.notes.push_back(fmt::format("stage layers {}: chunks of {} layers, the first chunk (stage 0's chunk 0) and the "
                                  "last (stage {}'s chunk {}) one fewer (arch_notes)",
                                  format_stage_layout(pc.stage_layout), middle / v, pc.output_stage(), v - 1));
  } else if (has(ascii_lower(arch_notes), "one fewer transformer layer") && p > 2 && layers > 0 &&
             (layers + 2) % p == 0) {
    pc.first_stage_layers = pc.last_stage_layers = (layers + 2) / p - 1;
    r.notes.push_back(fmt::format("first and last stages hold {} layers, the others {} (arch_notes)",
                                  pc.first_stage_layers, (layers + 2) / p));
  } else if (accounted_split && !pc.embedding_in_pipeline_split && gaps.search()) {
    // Another interleaved row whose layers split into equal chunks only that way (torchtitan's are split above):
    // interleaving is Megatron's schedule, this its split. Strict: validate()'s reason, which names the flags.
    pc.embedding_in_pipeline_split = pc.loss_in_pipeline_split = true;
    r.assumed.push_back(fmt::format("pipeline split: {} layers + embedding + loss in {} chunks (Megatron-Core's "
                                    "accounting, the only split of them into equal chunks)", layers, chunks));
  }
}

// Unstated::search: the fastest plan that fits over the knobs the row leaves open (recompute none / selective / full;
// every micro-batch that divides the global batch over dp); none fitting, the one with the least memory. A row that
// neither states nor names its optimizer sharding is searched with the optimizer states replicated (ZeRO 0, the
// stacks' default: Megatron-LM without --use-distributed-optimizer, DeepSpeed without ZeRO), and with the
// distributed optimizer (ZeRO-1) only when no plan fits without it. An fp8 row that neither states nor denies fp8
// weights (Megatron-Core --fp8-param-gather, torchao's float8 all-gather: both off by default) is searched with the
// 16-bit weights the stacks default to, and with fp8 weights only when no plan fits without them. The values taken
// are listed in MappedRun::assumed.
struct KnobChoice {
  std::optional<Plan> plan;
  bool fits = false;
  size_t micro_batches = 0;  // candidates tried
};

KnobChoice search_knobs(const Gaps& gaps, const Plan& plan) {
  const std::vector<Recompute> modes = gaps.open_recompute
      ? std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full}
      : std::vector<Recompute>{plan.parallel.recompute};
  std::vector<int64_t> micro_batches = {plan.parallel.micro_batch};
  if (gaps.open_micro_batch) {
    micro_batches.clear();
    const int64_t per_replica = plan.training.global_batch / std::max<int64_t>(plan.parallel.dp, 1);
    for (int64_t b = 1; b <= per_replica && b <= 1024; ++b) {
      if (microbatches_per_step(plan.training.global_batch, plan.parallel.dp, b) > 0) micro_batches.push_back(b);
    }
  }
  KnobChoice best;
  best.micro_batches = micro_batches.size();
  double best_key = 0;
  for (const Recompute mode : modes) {
    for (const int64_t b : micro_batches) {
      Plan c = plan;
      c.parallel.recompute = mode;
      c.parallel.micro_batch = b;
      c.parallel.num_microbatches = microbatches_per_step(c.training.global_batch, c.parallel.dp, b);
      if (c.parallel.num_microbatches == 0 || !validate(c).ok()) continue;
      const Estimate e = estimate(c);
      const double key = e.fits ? e.time.step_s : e.peak_memory_bytes;  // fits: fastest; else least memory
      if (!best.plan || (e.fits && !best.fits) || (e.fits == best.fits && key < best_key)) {
        best.plan = std::move(c);
        best.fits = e.fits;
        best_key = key;
      }
    }
  }
  return best;
}

void choose_open_knobs(const Gaps& gaps, Plan& plan) {
  KnobChoice best = search_knobs(gaps, plan);
  // Escalations, each tried only while no searched plan fits and kept only where one then fits: the distributed
  // optimizer, then fp8 weights (which need the optimizer states sharded) on top of it.
  Plan trial = plan;
  auto escalate = [&] {
    KnobChoice with = search_knobs(gaps, trial);
    if (with.plan && (with.fits || !best.plan)) best = std::move(with);
  };
  if (gaps.open_optimizer_sharding && !best.fits) {
    trial.parallel.zero_stage = 1;
    escalate();
  }
  if (gaps.open_fp8_param_gather && !best.fits) {
    trial.training.fp8_param_gather = true;
    escalate();
  }
  if (!best.plan) {  // no candidate is valid: validate() gives the reasons, for micro-batch 1 where it was open
    if (gaps.open_micro_batch) {
      plan.parallel.num_microbatches = microbatches_per_step(plan.training.global_batch, plan.parallel.dp, 1);
    }
    return;
  }
  plan = std::move(*best.plan);
  const char* why = best.fits ? "the fastest that fits" : "none fits: the least memory";
  if (gaps.open_recompute) {
    gaps.r.assumed.push_back(fmt::format("recompute = {} ({} of none / selective / full)",
                                         to_string(plan.parallel.recompute), why));
  }
  if (gaps.open_micro_batch) {
    gaps.r.assumed.push_back(fmt::format("parallel.micro_batch = {} ({} of {} values)", plan.parallel.micro_batch, why,
                                         best.micro_batches));
  }
  if (gaps.open_optimizer_sharding && plan.parallel.zero_stage == 1) {
    gaps.r.assumed.push_back("ZeRO-1 (the distributed optimizer): no plan fits with the optimizer states replicated, "
                             "the stacks' default");
  }
  if (gaps.open_fp8_param_gather && plan.training.fp8_param_gather) {
    gaps.r.assumed.push_back("fp8 weights held and gathered (--fp8-param-gather): no plan fits with 16-bit weights, "
                             "the stacks' default");
  }
}

// A row that gives a throughput but no iteration time: the step from the global batch, the sequence length and the
// GPU count (tokens per step over tokens per second), as derived.iter_time_s records it for the rows that have it.
void step_time_from_throughput(const Obj& ms, int64_t global_batch, int64_t seq, int64_t gpus, MappedRun& r) {
  if (r.measured_step_time_s || global_batch <= 0 || seq <= 0 || gpus <= 0) return;
  const double tokens = static_cast<double>(global_batch) * static_cast<double>(seq);
  double t = 0;
  std::string from;
  if (const auto total = ms.number("tokens_per_s_total", 1e-9, 1e15)) {
    t = tokens / *total;
    from = "measured.tokens_per_s_total";
  } else if (const auto per_gpu = ms.number("tokens_per_s_per_gpu", 1e-9, 1e15)) {
    t = tokens / (*per_gpu * static_cast<double>(gpus));
    from = "measured.tokens_per_s_per_gpu x GPUs";
  } else if (const auto samples = ms.number("samples_per_s", 1e-9, 1e15)) {
    t = static_cast<double>(global_batch) / *samples;
    from = "measured.samples_per_s";
  }
  if (!(t >= 1e-9 && t <= 1e9)) return;
  r.measured_step_time_s = t;
  r.step_time_derived = true;
  r.notes.push_back(fmt::format("iteration time {:.4g} s = global batch x seq / {} (no iter_time_s)", t, from));
}

void map_row(const json& row, size_t index, const std::string& where, const ProfileSet& profiles, Unstated unstated,
             MappedRun& r) {
  const Obj top(row, where, fmt::format("/{}", index),
                {"id", "model", "run_type", "source", "source_locator", "arch", "hardware", "parallel", "precision",
                 "recompute", "measured", "derived", "confidence", "notes"});
  r.id = top.text("id");
  if (r.id.empty()) top.fail("id", "missing or empty run id");
  r.source = top.text("source");
  if (r.source.empty()) top.fail("source", "missing or empty source (every row names its source)");
  r.source_key = source_key(r.source);
  const Obj a = top.object("arch", {"layers", "hidden", "heads", "kv_heads", "ffn", "ffn_type", "vocab", "seq_len",
                                    "params_B", "arch_notes", "experts", "top_k", "shared_experts", "dense_layers",
                                    "moe_ffn", "attention"});
  const Obj hw = top.object("hardware", {"gpu", "num_gpus", "gpus_per_node", "intra_node", "inter_node_per_node", "system"});
  const Obj p = top.object("parallel", {"tp", "pp", "dp", "cp", "ep", "sequence_parallel", "vpp_chunks_per_stage",
                                        "zero_stage", "fsdp", "micro_batch", "global_batch_seqs", "grad_accum",
                                        "parallel_notes"});
  const Obj ms = top.object("measured", {"tflops_per_gpu", "tflops_basis", "mfu", "hfu", "pct_of_peak", "iter_time_s",
                                         "tokens_per_s_total", "tokens_per_s_per_gpu", "samples_per_s",
                                         "aggregate_pflops", "memory_per_gpu_GB", "other"});
  std::vector<std::string>& skip = r.skip_reasons;
  Gaps gaps{r, unstated};

  read_measured(top, ms, r);
  const ModelSpec m = read_arch(a, profiles, r, gaps);
  const RowHardware hwr = read_hardware(hw, profiles, r, gaps);
  RowParallel par = read_parallel(p, hwr.num_gpus.value_or(0), r, gaps);
  read_pipeline_layout(ms, a.text("arch_notes"), par.notes, m.layers, m.mtp_layers, par.pc, r, gaps);
  const std::string rc_text = top.text("recompute");
  par.pc.sequence_parallel = sequence_parallel(par.sequence_parallel, rc_text);
  if (par.pc.sequence_parallel && par.pc.tp == 1) {
    // Megatron-LM's arguments turn sequence parallelism off at tp 1 ("Disabling sequence parallelism because tensor
    // model parallelism is disabled"): a recipe's SP flag then changes nothing.
    par.pc.sequence_parallel = false;
    r.notes.push_back("sequence parallelism at tp 1: off (Megatron-LM turns it off without tensor parallelism)");
  }
  TrainingSpec tr = read_training(top, ms, rc_text, a.text("arch_notes"), par.notes, par.fsdp.value_or(false),
                                  m.is_moe(), par.pc, r, gaps);
  const ParallelConfig& pc = par.pc;
  tr.global_batch = par.global_batch.value_or(0);
  tr.seq_len = m.seq_len;
  step_time_from_throughput(ms, tr.global_batch, m.seq_len, hwr.num_gpus.value_or(0), r);

  top.text("model");
  top.text("run_type");
  top.text("source_locator");
  top.text("confidence");
  // A row without an iteration time is still predicted when it maps (its memory can be compared), but not scored.
  const char* const kNoTime = "no iteration time (measured.iter_time_s or derived.iter_time_s)";
  if (!skip.empty()) {
    if (!r.measured_step_time_s) skip.push_back(kNoTime);
    return;
  }

  Plan plan;
  plan.model = m;
  plan.gpu = *profiles.find_gpu(r.gpu_type);
  plan.cluster = *hwr.cluster;
  const double bw = inter_node_Bps_per_gpu(hwr.inter_text, *hwr.gpus_per_node);
  if (bw > 0 && std::fabs(bw - plan.cluster.inter_node.bandwidth_Bps) > 0.05 * plan.cluster.inter_node.bandwidth_Bps) {
    r.notes.push_back(fmt::format("inter-node {:.2f} GB/s per GPU from the link text (preset {:.2f})", bw / 1e9,
                                  plan.cluster.inter_node.bandwidth_Bps / 1e9));
    plan.cluster.inter_node.bandwidth_Bps = bw;
  }
  plan.num_gpus = *hwr.num_gpus;
  plan.parallel = pc;
  plan.training = tr;
  read_node_limited_routing(ascii_lower(a.text("ffn_type") + " " + a.text("arch_notes")), plan, r);
  if (plan.parallel.recompute == Recompute::full && names_layer_ac(rc_text)) {
    // torchtitan's layer-wise selective AC (every_nth_block_layers). The option is not stated; torchtitan's preset
    // "2" is taken: half of each chunk's layers (the first chunk's, rounded down).
    const int64_t k = every_nth_block_layers(plan, 2);
    if (k < 1) {
      skip.push_back("selective layer AC: a chunk of one layer holds no every-2nd block to recompute");
      return;
    }
    plan.parallel.recompute_layers = k;
    r.assumed.push_back(fmt::format("selective layer AC: recompute full on every 2nd layer (torchtitan's preset "
                                    "selective_ac_option '2'): recompute_layers = {} of each chunk's {}",
                                    k, chunk_layers(plan, 0, 0)));
  }
  if (gaps.search() && plan.parallel.etp == 0 && plan.parallel.ep > 1 && validate(plan).has(Reject::ep_invalid)) {
    // An ep the data-parallel ranks alone cannot hold (ep 128 over dp 64 at tp 4) ran with Megatron-Core's MoE
    // parallel folding, the experts' groups refolded from tp x cp x dp: etp 1 where that makes the mesh valid.
    Plan folded = plan;
    folded.parallel.etp = 1;
    if (!validate(folded).has(Reject::ep_invalid)) {
      plan = std::move(folded);
      r.assumed.push_back(fmt::format("etp = 1 (ep {} does not divide dp {}: Megatron-Core's MoE parallel folding)",
                                      plan.parallel.ep, plan.parallel.dp));
    }
  }
  if (gaps.open_recompute || gaps.open_micro_batch || gaps.open_fp8_param_gather || gaps.open_optimizer_sharding) {
    choose_open_knobs(gaps, plan);
  }
  const Validity v = validate(plan);
  for (int i = 0; i < kNumRejects; ++i) {
    if (v.has(static_cast<Reject>(i))) skip.push_back(describe(static_cast<Reject>(i), plan));
  }
  if (skip.empty()) r.plan = std::move(plan);
  if (!r.measured_step_time_s) skip.push_back(kNoTime);
}

}  // namespace

std::vector<MappedRun> load_published_runs(std::string_view text, const std::string& where, const ProfileSet& profiles,
                                           Unstated unstated) {
  const json j = parse_json_text(text, where);
  if (!j.is_array()) throw InputError(fmt::format("{}: /: expected a JSON array of runs", where));
  std::vector<MappedRun> runs(j.size());
  std::set<std::string> ids;
  for (size_t i = 0; i < j.size(); ++i) {
    // A row the schema cannot read (an unknown key, a value of the wrong type or out of range) is skipped with that
    // reason, naming its JSON path; the file's other rows are still scored.
    try {
      map_row(j[i], i, where, profiles, unstated, runs[i]);
    } catch (const InputError& e) {
      MappedRun bad;
      const json* id = j[i].is_object() && j[i].contains("id") && j[i]["id"].is_string() ? &j[i]["id"] : nullptr;
      bad.id = id ? id->get<std::string>() : fmt::format("row {}", i);
      bad.skip_reasons.push_back(fmt::format("not read: {}", e.what()));
      runs[i] = std::move(bad);
    }
    if (!ids.insert(runs[i].id).second) {
      throw InputError(fmt::format("{}: /{}/id: duplicate run id '{}'", where, i, excerpt(runs[i].id)));
    }
  }
  return runs;
}

}  // namespace parplan
