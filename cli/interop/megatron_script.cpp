// Megatron-LM launch scripts (see framework.hpp): the bash subset those scripts are written in. Variables assigned
// earlier (TP=8, export TP=8, ${TP:-8}), arrays (ARGS=( ... ), ARGS+=( ... )) expanded with "${ARGS[@]}", strings of
// arguments expanded unquoted ($GPT_ARGS splits at blanks), $(( )) arithmetic, line continuations, comments, several
// statements on a line (TP=1; PP=4, A=1 B=2). The command is the one running pretrain_*.py (an environment prefix,
// VAR=1 torchrun ..., is its own and sets no variable); torchrun / deepspeed launcher options before it give the GPU
// count. Conditionals (if, case, loops, function bodies, what follows && / ||) are not evaluated: a variable assigned
// in one holds a placeholder naming it, refused where the command uses it, and a pretrain_*.py command inside one is
// refused.
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
  std::vector<std::string> placeholders;  // the parts of the value that could not be worked out, each
};

struct Word {
  std::string text;
  size_t line = 0;
  std::string placeholder;
  bool separator = false;  // ; && || |
};

// The text a placeholder stands for in the words: "$TP" of "$TP (set only inside the `if` on line 3, which may not
// run)".
std::string literal_of(const std::string& placeholder) {
  if (!in_branch(placeholder)) return placeholder;
  return placeholder.substr(0, placeholder.find(" (set only "));
}

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

// Walks a line as bash groups it: quotes, backslash escapes, ( ) and ${ } nesting. bare(i) takes s[i] (and the
// character a backslash escapes, moving i past it) and says whether s[i] stands outside quotes and nesting, where
// blanks split words and operators split statements.
struct ShellScan {
  const std::string& s;
  char quote = 0;
  int depth = 0;
  bool bare(size_t& i) {
    const char c = s[i];
    if (quote == '\'') {
      if (c == '\'') quote = 0;
      return false;
    }
    if (c == '\\') {
      ++i;
      return false;
    }
    if (quote == '"') {
      if (c == '"') quote = 0;
      return false;
    }
    if (c == '"' || c == '\'') {
      quote = c;
      return false;
    }
    if (c == '(' || (c == '{' && i > 0 && s[i - 1] == '$')) {
      ++depth;
      return false;
    }
    if (c == ')' || c == '}') {
      depth = std::max(0, depth - 1);  // a case pattern's ')' closes nothing
      return false;
    }
    return depth == 0;
  }
};

// The end of the shell word starting at s[i]: the first bare blank.
size_t word_end(const std::string& s, size_t i) {
  ShellScan scan{s};
  for (; i < s.size(); ++i) {
    if (scan.bare(i) && i < s.size() && (s[i] == ' ' || s[i] == '\t')) return i;
  }
  return s.size();
}

// One statement of a logical line, between the operators ; ;; && || | & (outside quotes and parentheses).
struct Statement {
  Logical text;
  std::string after;   // the operator before it ("&&", "||", "|"; "" first on the line or after ; and ;;)
  bool background = false;  // followed by '&'
};

// The operator at s[i] ("" when none): a '&' of a redirection (2>&1, &>log) is not one.
std::string operator_at(const std::string& s, size_t i) {
  const char c = s[i];
  const char next = i + 1 < s.size() ? s[i + 1] : 0;
  if (c == ';') return next == ';' ? ";;" : ";";
  if (c == '|') return next == '|' ? "||" : next == '&' ? "|&" : "|";
  if (c != '&') return "";
  if (next == '&') return "&&";
  if (next == '>' || (i > 0 && (s[i - 1] == '>' || s[i - 1] == '<'))) return "";
  return "&";
}

std::vector<Statement> statements(const Logical& l) {
  std::vector<Statement> out;
  const std::string& s = l.text;
  std::string after;
  size_t from = 0;
  auto cut = [&](size_t to, const std::string& op) {
    Statement st{Logical{s.substr(from, to - from), std::vector<size_t>(l.lines.begin() + static_cast<std::ptrdiff_t>(from),
                                                                       l.lines.begin() + static_cast<std::ptrdiff_t>(to))},
                 after, op == "&"};
    if (st.text.text.find_first_not_of(" \t") != std::string::npos) out.push_back(std::move(st));
    after = op == ";" || op == ";;" || op == "&" ? "" : op;
  };
  ShellScan scan{s};
  for (size_t i = 0; i < s.size(); ++i) {
    if (!scan.bare(i)) continue;
    if (const std::string op = operator_at(s, i); !op.empty()) {
      cut(i, op);
      i += op.size() - 1;
      from = i + 1;
    }
  }
  cut(s.size(), "");
  return out;
}

// `s` without its first word (and the blanks after it).
std::string_view rest_after_word(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const size_t e = word_end(std::string(s), b);
  const size_t n = s.find_first_not_of(" \t", e);
  return n == std::string_view::npos ? std::string_view{} : s.substr(n);
}

// The first word of `s` as written ("" for none).
std::string first_word(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return "";
  const std::string t(s);
  return t.substr(b, word_end(t, b) - b);
}

bool is_declaration(const std::string& w) {
  return w == "export" || w == "declare" || w == "local" || w == "readonly" || w == "typeset";
}

// NAME of a word NAME=..., NAME+=... ("" when the word is not an assignment).
std::string assigned_name(std::string_view w) {
  size_t i = 0;
  while (i < w.size() && (std::isalnum(static_cast<unsigned char>(w[i])) || w[i] == '_')) ++i;
  if (i == 0 || std::isdigit(static_cast<unsigned char>(w[0]))) return "";
  if (w.substr(i, 1) == "=" || w.substr(i, 2) == "+=") return std::string(w.substr(0, i));
  return "";
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
      if (!quote && (c == ';' || c == '|' || (c == '&' && !operator_at(s, i).empty()))) {
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

  // NAME=value, NAME=( ... ), NAME+=( ... ), several on a line (A=1 B=2), with export / declare / local before them.
  // False when `l` is not one: a command, also one with assignments before it (VAR=1 torchrun ...), which set
  // nothing in the script.
  bool assignment(const Logical& l) {
    const std::string& s = l.text;
    size_t i = s.find_first_not_of(" \t");
    if (i != std::string::npos && is_declaration(first_word(s.substr(i)))) {
      i = s.find_first_not_of(" \t", word_end(s, i));
      while (i != std::string::npos && s[i] == '-') i = s.find_first_not_of(" \t", word_end(s, i));  // declare -a
    }
    struct Assigned {
      std::string name;
      bool append = false, array = false;
      Var value;
    };
    std::vector<Assigned> set;
    for (; i != std::string::npos && i < s.size(); i = s.find_first_not_of(" \t", word_end(s, i))) {
      Assigned a;
      a.name = assigned_name(first_word(s.substr(i)));
      if (a.name.empty()) return false;  // a command (what came before is its environment), or not an assignment
      i += a.name.size();
      a.append = s[i] == '+';
      i += a.append ? 2 : 1;
      const size_t end = word_end(s, i);
      a.array = i < s.size() && s[i] == '(';
      if (a.array) {
        const size_t close = s.rfind(')', end - 1);
        for (Word& w : words(Logical{s.substr(0, close > i && close != std::string::npos ? close : end), l.lines}, i + 1)) {
          add(a.value, w);
        }
      } else {
        std::string joined;  // an assignment's value is one word: not split at the blanks its expansions hold
        for (const Word& w : words(Logical{s.substr(0, end), l.lines}, i)) {
          if (!w.placeholder.empty()) a.value.placeholders.push_back(w.placeholder);
          joined += (joined.empty() ? "" : " ") + w.text;
        }
        a.value.items.push_back(joined);
        a.value.lines.push_back(l.lines[std::min(i, l.lines.size() - 1)]);
      }
      set.push_back(std::move(a));
    }
    if (set.empty()) return false;  // blank, or a keyword with nothing after it
    for (Assigned& a : set) {
      Var& v = vars_[a.name];
      if (!a.append) {
        v = std::move(a.value);
      } else if (!a.array && v.items.size() == 1) {
        v.items[0] += a.value.items[0];  // NAME+=text: the string grows
        v.placeholders.insert(v.placeholders.end(), a.value.placeholders.begin(), a.value.placeholders.end());
      } else {
        v.items.insert(v.items.end(), a.value.items.begin(), a.value.items.end());
        v.lines.insert(v.lines.end(), a.value.lines.begin(), a.value.lines.end());
        v.placeholders.insert(v.placeholders.end(), a.value.placeholders.begin(), a.value.placeholders.end());
      }
    }
    return true;
  }

  // Every variable `l` may assign (NAME=... words, a for loop's NAME) now holds a placeholder naming `branch`, where
  // in the conditional it is assigned ("inside the `if` on line 3").
  void assigned_in_branch(const Logical& l, const std::string& branch) {
    const std::string& s = l.text;
    for (size_t i = s.find_first_not_of(" \t"); i != std::string::npos; i = s.find_first_not_of(" \t", word_end(s, i))) {
      std::string name = assigned_name(first_word(s.substr(i)));
      if (const std::string w = first_word(s.substr(i)); (w == "for" || w == "select") && i == s.find_first_not_of(" \t")) {
        name = first_word(rest_after_word(s.substr(i)));
      }
      if (name.empty()) continue;
      const std::string text = "$" + name;
      vars_[name] = Var{{text}, {l.lines.empty() ? 0 : l.lines.front()},
                        {fmt::format("{} (set only {}{}", text, branch, kMayNotRun)}};
    }
  }

 private:
  static void add(Var& v, Word& w) {
    if (!w.placeholder.empty()) v.placeholders.push_back(w.placeholder);
    v.lines.push_back(w.line);
    v.items.push_back(std::move(w.text));
  }

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
    const size_t first_new = out.size();
    end = splice(it->second, all, quoted, end, w, out);
    // The words holding an unresolved part carry it; every word of a variable set inside a conditional does.
    for (const std::string& p : it->second.placeholders) {
      auto carry = [&](Word& x) {
        if (x.placeholder.empty() && (in_branch(p) || x.text.find(literal_of(p)) != std::string::npos)) x.placeholder = p;
      };
      for (size_t k = first_new; k < out.size(); ++k) carry(out[k]);
      carry(w);
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
      if (it == vars_.end() || !it->second.placeholders.empty() || it->second.items.empty()) {
        const bool branch = it != vars_.end() && !it->second.placeholders.empty() && in_branch(it->second.placeholders[0]);
        const std::string& p = branch ? it->second.placeholders[0] : tok;
        why = branch ? fmt::format(" ({} is {}", tok, p.substr(literal_of(p).size() + 2)) : fmt::format(" ({} is not set)", tok);
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
    const std::string option = ws[k].text.substr(0, ws[k].text.find('='));
    const std::optional<int64_t> n = decimal(value);
    if (!vw->placeholder.empty()) {
      placeholder = fmt::format("{} ({}, line {})", vw->placeholder, option, ws[k].line);
    } else if (!n) {  // torchrun's elastic --nnodes MIN:MAX, --nproc_per_node gpu: known only at run time
      placeholder = fmt::format("{} ({}, line {}: {})", excerpt(value), option, ws[k].line,
                                value.find(':') != std::string::npos ? "a range of nodes, known only at run time" : "not a count");
    }
    if (!n) continue;
    (is_per_node ? per_node : nodes) = *n;
    origin += (origin.empty() ? "" : " x ") + fmt::format("{} {} (line {})", option, value, ws[k].line);
  }
  if (!placeholder.empty()) {  // a node or GPU count the script leaves to its environment
    out.flags["--gpus"] = Setting{"", "the launcher's GPU count", placeholder};
  } else if (per_node) {
    out.set("--gpus", std::to_string(saturating_product({*per_node, nodes.value_or(1)})), origin, path);
  }
}

// The pretrain_*.py command among `ws`, if it is one, into `command` (the index of the script word in `script`).
// `branch`: the conditional block it is in ("" when none), which may not run: refused.
void read_command(std::vector<Word> ws, const std::string& branch, std::vector<Word>& command, size_t& script,
                  const std::string& path) {
  for (size_t k = 0; k < ws.size(); ++k) {
    if (!is_pretrain(ws[k].text)) continue;
    if (!branch.empty()) {
      throw InputError(fmt::format("{}: {} (line {}) is {}, which may not run: flatten the script to the command that "
                                   "runs", path, excerpt(ws[k].text), ws[k].line, branch));
    }
    if (!command.empty()) {
      throw InputError(fmt::format("{}: two pretrain_*.py commands (lines {} and {}); give one script per plan", path,
                                   command[script].line, ws[k].line));
    }
    command = std::move(ws);
    script = k;
    return;
  }
}

// A shell redirection word (>log, 2>&1, &>log, <in); `alone` when its target is the next word (2> log).
bool redirection(const std::string& w, bool& alone) {
  size_t i = 0;
  while (i < w.size() && std::isdigit(static_cast<unsigned char>(w[i]))) ++i;
  if (i == 0 && w.starts_with("&>")) ++i;
  if (i >= w.size() || (w[i] != '>' && w[i] != '<')) return false;
  while (i < w.size() && std::string_view("<>&|").find(w[i]) != std::string_view::npos) ++i;
  alone = i == w.size();
  return true;
}

// Megatron-LM's arguments that take every word up to the next option (nargs='*'); the modelled ones are read as a
// list, the others listed as ignored with their words. --window-size: its two sides as one word ("128,0") or two.
bool takes_list(const std::string& name) {
  for (std::string_view n : {"recompute-modules", "offload-modules", "window-size", "rampup-batch-size", "data-path",
                             "train-data-path", "valid-data-path", "test-data-path"}) {
    if (name == n) return true;
  }
  return false;
}

// The arguments of the command after the script word (redirections are the shell's, not arguments).
std::vector<MegatronArg> command_args(const std::vector<Word>& command, size_t script, Imported& out,
                                      const std::string& path) {
  std::vector<MegatronArg> args;
  for (size_t k = script + 1; k < command.size() && !command[k].separator; ++k) {
    const Word& w = command[k];
    if (bool alone = false; redirection(w.text, alone)) {
      k += alone ? 1 : 0;
      continue;
    }
    if (in_branch(w.placeholder)) {
      throw InputError(fmt::format("{}: '{}' (line {}) is {}: flatten the script", path, excerpt(w.text), w.line,
                                   w.placeholder));
    }
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
    } else if (bool alone = false; k + 1 < command.size() && !command[k + 1].separator &&
               (!command[k + 1].text.starts_with("--") || command[k + 1].text.size() == 2) &&
               !redirection(command[k + 1].text, alone)) {
      a.value = command[++k].text;
      if (a.placeholder.empty()) a.placeholder = command[k].placeholder;
      while (takes_list(dashed(a.name)) && k + 1 < command.size() && !command[k + 1].separator &&
             !command[k + 1].text.starts_with("--") && !redirection(command[k + 1].text, alone)) {
        *a.value += " " + command[++k].text;
      }
    }
    a.name = dashed(a.name);  // Megatron-DeepSpeed spells some with '_'
    a.origin = origin_of(w, a.name);
    const bool listed = takes_list(a.name) && a.name != "recompute-modules" && a.name != "offload-modules" &&
                        a.name != "window-size";
    if (a.value && (!a.placeholder.empty() || listed)) {
      a.origin = fmt::format("--{} {} (line {})", a.name, excerpt(*a.value), w.line);
    }
    args.push_back(std::move(a));
  }
  // Megatron-LM reads --num-query-groups only with --group-query-attention (core_transformer_config_from_args):
  // without it the attention is multi-head, as many key/value heads as heads.
  if (std::none_of(args.begin(), args.end(), [](const MegatronArg& a) { return a.name == "group-query-attention"; })) {
    std::erase_if(args, [&](const MegatronArg& a) {
      if (a.name != "num-query-groups") return false;
      out.ignored.push_back(fmt::format("{}: read only with --group-query-attention (Megatron-LM's attention is "
                                        "multi-head without it)", a.origin));
      return true;
    });
  }
  return args;
}

// `l` without its first `n` characters.
void drop_prefix(Logical& l, size_t n) {
  n = std::min(n, l.text.size());
  l.text.erase(0, n);
  l.lines.erase(l.lines.begin(), l.lines.begin() + static_cast<std::ptrdiff_t>(n));
}

// The conditionals open at a statement: if, case, for, while, until, select up to fi, esac, done, and function bodies
// up to their closing brace. Their bodies are not evaluated (see the head of this file).
class Conditionals {
 public:
  // Reads the keywords at the head of `st` (then, else, do, a case pattern, a function header are dropped from its
  // text); true when nothing is left to read as an assignment or a command.
  bool control(Statement& st) {
    for (;;) {
      const std::string w = first_word(st.text.text);
      const size_t line = line_of(st.text);
      auto drop = [&] { drop_prefix(st.text, st.text.text.size() - rest_after_word(st.text.text).size()); };
      if (w.empty() || w == "elif") return true;
      if (w == "then" || w == "else" || w == "do" || w == "{") {
        drop();
      } else if (w == "if" || w == "case" || w == "for" || w == "while" || w == "until" || w == "select") {
        open_.push_back({fmt::format("inside the `{}` on line {}", w, line), w == "case" ? Kind::cases : Kind::block});
        return true;
      } else if (w == "fi" || w == "esac" || w == "done" || w == "}") {
        if (!open_.empty() && (open_.back().kind == Kind::function) == (w == "}")) open_.pop_back();
        return true;
      } else if (w == "function" || w.ends_with("()") || first_word(rest_after_word(st.text.text)) == "()") {
        std::string name = w == "function" ? first_word(rest_after_word(st.text.text)) : w;
        name.resize(std::min(name.size(), name.find('(')));
        open_.push_back({fmt::format("inside the function {} on line {}", name, line), Kind::function});
        drop();
        if (first_word(st.text.text) == "()" || (w == "function" && !st.text.text.empty())) drop();
      } else if (!open_.empty() && open_.back().kind == Kind::cases && w.ends_with(")") && assigned_name(w).empty()) {
        drop();  // a case pattern
      } else {
        return false;
      }
    }
  }
  bool in_block() const { return !open_.empty(); }
  // Where `st` runs when it may not ("inside the `if` on line 3", "after the `&&` on line 5"); "" when it always runs.
  std::string branch(const Statement& st) const {
    if (!open_.empty()) return open_.front().where;
    const size_t line = line_of(st.text);
    if (st.after == "&&" || st.after == "||") return fmt::format("after the `{}` on line {}", st.after, line);
    if (st.after == "|" || st.after == "|&") return fmt::format("in the pipeline on line {}", line);
    if (st.background) return fmt::format("in the background job on line {}", line);
    return "";
  }

 private:
  static size_t line_of(const Logical& l) {
    const size_t b = l.text.find_first_not_of(" \t");
    return l.lines.empty() ? 0 : l.lines[b == std::string::npos ? 0 : b];
  }
  enum class Kind { block, cases, function };  // function: closed by '}'
  struct Open {
    std::string where;
    Kind kind = Kind::block;
  };
  std::vector<Open> open_;
};

}  // namespace

Imported import_megatron_script(std::string_view text, const std::string& path) {
  Imported out;
  out.format = Framework::megatron;
  out.gpus_hint = "torchrun --nproc_per_node x --nnodes before pretrain_*.py";
  Shell sh(path);
  std::vector<Word> command;
  size_t script = 0;
  Conditionals cond;
  for (const Logical& l : logical_lines(text)) {
    for (Statement& st : statements(l)) {
      const bool control = cond.control(st);
      const std::string branch = cond.branch(st);
      if (!branch.empty()) sh.assigned_in_branch(st.text, branch);
      if (control || (branch.empty() && sh.assignment(st.text))) continue;
      read_command(sh.words(st.text, 0), cond.in_block() ? branch : "", command, script, path);
    }
  }
  if (command.empty()) {
    throw InputError(fmt::format("{}: no pretrain_*.py command: not a Megatron-LM launch script", path));
  }
  launcher_gpus(command, script, out, path);
  apply_megatron_args(command_args(command, script, out, path), out, path);
  return out;
}

}  // namespace parplan::cli
