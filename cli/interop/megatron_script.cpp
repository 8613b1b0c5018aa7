// Megatron-LM launch scripts (see framework.hpp): the bash subset those scripts are written in. Variables assigned
// earlier (TP=8, export TP=8, ${TP:-8}), arrays (ARGS=( ... ), ARGS+=( ... )) expanded with "${ARGS[@]}", strings of
// arguments expanded unquoted ($GPT_ARGS splits at blanks), $(( )) arithmetic, line continuations, comments. The
// command is the one running pretrain_*.py; torchrun / deepspeed launcher options before it give the GPU count.
#include <algorithm>
#include <cctype>
#include <fmt/core.h>
#include <functional>
#include <map>

#include "cli/interop/framework.hpp"
#include "planner/spec/error.hpp"

namespace parplan::cli {
namespace {

struct Var {
  std::vector<std::string> items;
  std::vector<size_t> lines;  // the line each item was written on
  std::string placeholder;  // set when the value could not be worked out
};

struct Word {
  std::string text;
  size_t line = 0;
  std::string placeholder;
  bool separator = false;  // ; && || |
};

// One logical line: continuations joined, arrays and quoted strings spanning lines joined, each char's line number.
struct Logical {
  std::string text;
  std::vector<size_t> lines;
};

std::vector<Logical> logical_lines(std::string_view s) {
  std::vector<Logical> out;
  Logical cur;
  size_t line = 1;
  char quote = 0;
  int parens = 0;
  bool comment = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') continue;
    if (comment && c != '\n') continue;
    if (c == '\\' && quote != '\'' && i + 1 < s.size() && (s[i + 1] == '\n' || (s[i + 1] == '\r' && i + 2 < s.size() && s[i + 2] == '\n'))) {
      i += s[i + 1] == '\r' ? 2 : 1;
      ++line;
      continue;
    }
    if (c == '\n') {
      comment = false;
      ++line;
      if (quote == 0 && parens <= 0) {
        if (!cur.text.empty()) out.push_back(std::move(cur));
        cur = {};
        parens = 0;
        continue;
      }
      cur.text += ' ';
      cur.lines.push_back(line);
      continue;
    }
    if (quote == 0 && c == '#' && (cur.text.empty() || cur.text.back() == ' ' || cur.text.back() == '\t' || cur.text.back() == '(')) {
      comment = true;
      continue;
    }
    if (quote == 0 && c == '\\' && i + 1 < s.size()) {  // an escaped character outside quotes
      cur.text += c;
      cur.lines.push_back(line);
      cur.text += s[++i];
      cur.lines.push_back(line);
      continue;
    }
    if (c == '"' || c == '\'') {
      if (quote == 0) quote = c;
      else if (quote == c) quote = 0;
    } else if (quote == 0 && c == '(') {
      ++parens;
    } else if (quote == 0 && c == ')') {
      --parens;
    }
    cur.text += c;
    cur.lines.push_back(line);
  }
  if (!cur.text.empty()) out.push_back(std::move(cur));
  return out;
}

class Shell {
 public:
  explicit Shell(const std::string& path) : path_(path) {}

  // The words of `l` from character `from` (expansions done, unquoted ones split at blanks).
  std::vector<Word> words(const Logical& l, size_t from) {
    std::vector<Word> out;
    Word w;
    bool open = false;
    auto finish = [&] {
      if (open) out.push_back(std::move(w));
      w = {};
      open = false;
    };
    auto start = [&](size_t i) {
      if (!open) w.line = l.lines[i];
      open = true;
    };
    char quote = 0;
    const std::string& s = l.text;
    for (size_t i = from; i < s.size(); ++i) {
      const char c = s[i];
      if (quote == '\'') {
        if (c == '\'') quote = 0; else w.text += c;
        continue;
      }
      if (c == '"') {
        start(i);
        quote = quote ? 0 : '"';
        continue;
      }
      if (!quote && c == '\'') {
        start(i);
        quote = '\'';
        continue;
      }
      if (!quote && (c == ' ' || c == '\t')) {
        finish();
        continue;
      }
      if (!quote && (c == ';' || c == '|' || c == '&')) {
        finish();
        out.push_back(Word{std::string(1, c), l.lines[i], "", true});
        continue;
      }
      if (c == '\\' && i + 1 < s.size()) {
        start(i);
        w.text += s[++i];
        continue;
      }
      if (c == '`') fail(l.lines[i], "command substitution with backquotes is not read (use a value)");
      if (c == '$') {
        start(i);
        i = expand(l, i, quote != 0, w, out);
        if (w.text.empty() && !open) continue;
        continue;
      }
      start(i);
      w.text += c;
    }
    finish();
    return out;
  }

  // NAME=value, NAME=( ... ), NAME+=( ... ), with export / declare / local before it. False when `l` is not one.
  bool assignment(const Logical& l) {
    const std::string& s = l.text;
    size_t i = s.find_first_not_of(" \t");
    for (std::string_view kw : {"export ", "declare -a ", "declare ", "local ", "readonly "}) {
      if (i != std::string::npos && s.compare(i, kw.size(), kw) == 0) i = s.find_first_not_of(" \t", i + kw.size());
    }
    if (i == std::string::npos) return false;  // blank, or a keyword with nothing after it
    const size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
    if (i == b || std::isdigit(static_cast<unsigned char>(s[b]))) return false;
    const bool append = s.compare(i, 2, "+=") == 0;
    if (!append && (i >= s.size() || s[i] != '=')) return false;
    const std::string name = s.substr(b, i - b);
    i += append ? 2 : 1;
    Var v;
    if (i < s.size() && s[i] == '(') {
      const size_t close = s.rfind(')');
      Logical inner{s.substr(0, close), l.lines};
      for (Word& w : words(inner, i + 1)) {
        if (!w.placeholder.empty() && v.placeholder.empty()) v.placeholder = w.placeholder;
        v.lines.push_back(w.line);
        v.items.push_back(std::move(w.text));
      }
      if (append) {
        Var& old = vars_[name];
        old.items.insert(old.items.end(), v.items.begin(), v.items.end());
        old.lines.insert(old.lines.end(), v.lines.begin(), v.lines.end());
        if (old.placeholder.empty()) old.placeholder = v.placeholder;
        return true;
      }
    } else {
      std::vector<Word> ws = words(l, i);
      if (!ws.empty() && (s[i] == ' ' || s[i] == '\t')) ws.clear();  // NAME= cmd: an empty value
      v.items.push_back(ws.empty() ? "" : ws[0].text);
      if (!ws.empty()) v.placeholder = ws[0].placeholder;
      if (append && vars_.count(name)) v.items[0] = vars_[name].items.empty() ? v.items[0] : vars_[name].items[0] + v.items[0];
    }
    vars_[name] = std::move(v);
    return true;
  }

 private:
  [[noreturn]] void fail(size_t line, std::string_view what) const {
    throw InputError(fmt::format("{}:{}: {}", path_, line, what));
  }

  // Appends `value` to `w` (split at blanks when unquoted) and returns nothing.
  void append(const std::string& value, bool quoted, Word& w, std::vector<Word>& out) {
    if (quoted) {
      w.text += value;
      return;
    }
    for (const char c : value) {
      if (c == ' ' || c == '\t' || c == '\n') {
        if (!w.text.empty()) {
          const size_t line = w.line;
          out.push_back(std::move(w));
          w = {};
          w.line = line;
        }
      } else {
        w.text += c;
      }
    }
  }

  // The expansion at s[i] == '$'; returns the index of its last character.
  size_t expand(const Logical& l, size_t i, bool quoted, Word& w, std::vector<Word>& out) {
    const std::string& s = l.text;
    const size_t line = l.lines[i];
    if (s.compare(i, 3, "$((") == 0) {
      const size_t close = s.find("))", i);
      if (close == std::string::npos) fail(line, "$(( without its closing ))");
      const std::string expr = s.substr(i + 3, close - i - 3);
      std::string why;
      const std::optional<int64_t> v = arithmetic(expr, why);
      if (v) append(std::to_string(*v), quoted, w, out);
      else mark(w, "$((" + expr + "))" + why);
      return close + 1;
    }
    if (s.compare(i, 2, "$(") == 0) {
      int depth = 0;
      size_t j = i + 1;
      for (; j < s.size(); ++j) {
        if (s[j] == '(') ++depth;
        if (s[j] == ')' && --depth == 0) break;
      }
      mark(w, s.substr(i, j + 1 - i));
      return std::min(j, s.size() - 1);
    }
    std::string name, fallback;
    bool has_fallback = false, all = false;
    size_t end = i;
    if (i + 1 < s.size() && s[i + 1] == '{') {
      const size_t close = s.find('}', i);
      if (close == std::string::npos) fail(line, "${ without its closing }");
      std::string body = s.substr(i + 2, close - i - 2);
      end = close;
      if (const size_t d = body.find(":-"); d != std::string::npos) {
        fallback = body.substr(d + 2);
        has_fallback = true;
        body = body.substr(0, d);
      } else if (const size_t e = body.find(":="); e != std::string::npos) {
        fallback = body.substr(e + 2);
        has_fallback = true;
        body = body.substr(0, e);
      }
      if (body.ends_with("[@]") || body.ends_with("[*]")) {
        all = true;
        body.resize(body.size() - 3);
      }
      name = body;
    } else {
      size_t j = i + 1;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j == i + 1 && j < s.size()) ++j;  // $1, $@, $#
      name = s.substr(i + 1, j - i - 1);
      end = j - 1;
    }
    const auto it = vars_.find(name);
    if (it == vars_.end()) {
      if (has_fallback) append(fallback, quoted, w, out);
      else mark(w, s.substr(i, end + 1 - i));
      return end;
    }
    const std::string& unresolved = it->second.placeholder;
    const size_t first_new = out.size();
    end = splice(it->second, all, quoted, end, w, out);
    if (!unresolved.empty()) {  // the words holding the unresolved part carry it
      for (size_t k = first_new; k < out.size(); ++k) {
        if (out[k].text.find(unresolved) != std::string::npos && out[k].placeholder.empty()) out[k].placeholder = unresolved;
      }
      if (w.text.find(unresolved) != std::string::npos && w.placeholder.empty()) w.placeholder = unresolved;
    }
    return end;
  }

  // The value of `v` (all elements with [@]) into `w` / `out`; returns `end`.
  size_t splice(const Var& v, bool all, bool quoted, size_t end, Word& w, std::vector<Word>& out) {
    const auto* it = &v;
    if (all && it->items.size() > 1 && w.text.empty()) {
      // "${ARR[@]}": one word per element.
      for (size_t k = 0; k < it->items.size(); ++k) {
        w.text = it->items[k];
        if (k < it->lines.size()) w.line = it->lines[k];
        if (k + 1 < it->items.size()) {
          out.push_back(w);
          w.text.clear();
        }
      }
      return end;
    }
    std::string value;
    for (size_t k = 0; k < (all ? it->items.size() : std::min<size_t>(1, it->items.size())); ++k) {
      value += (k ? " " : "") + it->items[k];
    }
    append(value, quoted, w, out);
    return end;
  }

  static void mark(Word& w, const std::string& text) {
    w.text += text;
    if (w.placeholder.empty()) w.placeholder = text;
  }

  // + - * / and parentheses over integers and variables; nullopt (and `why`) when a name is not set.
  std::optional<int64_t> arithmetic(const std::string& e, std::string& why) {
    size_t i = 0;
    std::function<std::optional<int64_t>()> sum, product, atom;
    auto blanks = [&] { while (i < e.size() && e[i] == ' ') ++i; };
    int depth = 0;
    atom = [&]() -> std::optional<int64_t> {
      blanks();
      if (i < e.size() && e[i] == '(') {
        if (++depth > 64) return std::nullopt;  // bounded recursion
        ++i;
        auto v = sum();
        blanks();
        if (i < e.size() && e[i] == ')') ++i;
        return v;
      }
      if (i < e.size() && e[i] == '$') ++i;
      if (i < e.size() && e[i] == '{') ++i;
      const size_t b = i;
      while (i < e.size() && (std::isalnum(static_cast<unsigned char>(e[i])) || e[i] == '_')) ++i;
      const std::string tok = e.substr(b, i - b);
      if (i < e.size() && e[i] == '}') ++i;
      if (tok.empty()) return std::nullopt;
      if (std::isdigit(static_cast<unsigned char>(tok[0]))) return decimal(tok);
      const auto it = vars_.find(tok);
      if (it == vars_.end() || !it->second.placeholder.empty() || it->second.items.empty()) {
        why = fmt::format(" ({} is not set)", tok);
        return std::nullopt;
      }
      return decimal(it->second.items[0]);
    };
    product = [&]() -> std::optional<int64_t> {
      auto v = atom();
      for (blanks(); v && i < e.size() && (e[i] == '*' || e[i] == '/'); blanks()) {
        const char op = e[i++];
        const auto r = atom();
        if (!r || (op == '/' && *r == 0)) return std::nullopt;
        int64_t x = 0;
        if (op == '*' && __builtin_mul_overflow(*v, *r, &x)) return std::nullopt;
        v = op == '*' ? x : *v / *r;
      }
      return v;
    };
    sum = [&]() -> std::optional<int64_t> {
      auto v = product();
      for (blanks(); v && i < e.size() && (e[i] == '+' || e[i] == '-'); blanks()) {
        const char op = e[i++];
        const auto r = product();
        if (!r) return std::nullopt;
        int64_t x = 0;
        if (op == '+' ? __builtin_add_overflow(*v, *r, &x) : __builtin_sub_overflow(*v, *r, &x)) return std::nullopt;
        v = x;
      }
      return v;
    };
    auto v = sum();
    blanks();
    return i == e.size() ? v : std::nullopt;
  }

  const std::string& path_;
  std::map<std::string, Var> vars_;
};

bool is_pretrain(const std::string& w) {
  const size_t slash = w.rfind('/');
  const std::string base = slash == std::string::npos ? w : w.substr(slash + 1);
  return base.starts_with("pretrain_") && base.ends_with(".py");
}

std::string origin_of(const Word& w, const std::string& name) { return fmt::format("--{} (line {})", name, w.line); }

// The launcher's GPU count: torchrun --nproc_per_node x --nnodes (or deepspeed --num_gpus x --num_nodes).
void launcher_gpus(const std::vector<Word>& ws, size_t script, Imported& out, const std::string& path) {
  std::optional<int64_t> per_node, nodes;
  std::string origin, placeholder;
  for (size_t k = 0; k + 1 < script; ++k) {
    std::string name = ws[k].text, value = ws[k + 1].text;
    const Word* vw = &ws[k + 1];
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      vw = &ws[k];
      name.resize(eq);
    }
    name = dashed(name);
    const bool is_per_node = name == "--nproc-per-node" || name == "--num-gpus";
    const bool is_nodes = name == "--nnodes" || name == "--num-nodes";
    if (!is_per_node && !is_nodes) continue;
    if (!vw->placeholder.empty()) placeholder = vw->placeholder + " (" + ws[k].text + ", line " + std::to_string(ws[k].line) + ")";
    const std::optional<int64_t> n = decimal(value);
    if (!n) continue;
    (is_per_node ? per_node : nodes) = *n;
    origin += (origin.empty() ? "" : " x ") + fmt::format("{} {} (line {})", ws[k].text.substr(0, ws[k].text.find('=')), value, ws[k].line);
  }
  if (!placeholder.empty()) {  // a node or GPU count the script leaves to its environment
    out.flags["--gpus"] = Setting{"", "the launcher's GPU count", placeholder};
  } else if (per_node) {
    out.set("--gpus", std::to_string(saturating_product({*per_node, nodes.value_or(1)})), origin, path);
  }
}

}  // namespace

Imported import_megatron_script(std::string_view text, const std::string& path) {
  Imported out;
  out.format = Framework::megatron;
  out.gpus_hint = "torchrun --nproc_per_node x --nnodes before pretrain_*.py";
  Shell sh(path);
  std::vector<Word> command;
  size_t script = 0, command_line = 0;
  for (const Logical& l : logical_lines(text)) {
    if (sh.assignment(l)) continue;
    std::vector<Word> ws = sh.words(l, 0);
    for (size_t k = 0; k < ws.size(); ++k) {
      if (!is_pretrain(ws[k].text)) continue;
      if (!command.empty()) {
        throw InputError(fmt::format("{}: two pretrain_*.py commands (lines {} and {}); give one script per plan", path,
                                     command_line, ws[k].line));
      }
      command = ws;
      script = k;
      command_line = ws[k].line;
      break;
    }
  }
  if (command.empty()) {
    throw InputError(fmt::format("{}: no pretrain_*.py command: not a Megatron-LM launch script", path));
  }
  launcher_gpus(command, script, out, path);
  std::vector<MegatronArg> args;
  for (size_t k = script + 1; k < command.size() && !command[k].separator; ++k) {
    const Word& w = command[k];
    if (!w.text.starts_with("--")) {
      out.ignored.push_back(fmt::format("'{}' (line {}): not an option", excerpt(w.text), w.line));
      continue;
    }
    MegatronArg a;
    a.name = w.text.substr(2);
    a.placeholder = w.placeholder;
    if (const size_t eq = a.name.find('='); eq != std::string::npos) {
      a.value = a.name.substr(eq + 1);
      a.name.resize(eq);
    } else if (k + 1 < command.size() && !command[k + 1].separator &&
               (!command[k + 1].text.starts_with("--") || command[k + 1].text.size() == 2)) {
      a.value = command[++k].text;
      if (a.placeholder.empty()) a.placeholder = command[k].placeholder;
      // Megatron-Core's list-valued --recompute-modules and --offload-modules take every word up to the next option.
      const std::string list_name = dashed(a.name);
      while ((list_name == "recompute-modules" || list_name == "offload-modules") && k + 1 < command.size() &&
             !command[k + 1].separator &&
             !command[k + 1].text.starts_with("--")) {
        *a.value += " " + command[++k].text;
      }
    }
    a.name = dashed(a.name);  // Megatron-DeepSpeed spells some with '_'
    a.origin = origin_of(w, a.name);
    if (a.value && !a.placeholder.empty()) a.origin = fmt::format("--{} {} (line {})", a.name, *a.value, w.line);
    args.push_back(std::move(a));
  }
  apply_megatron_args(args, out, path);
  return out;
}

}  // namespace parplan::cli
