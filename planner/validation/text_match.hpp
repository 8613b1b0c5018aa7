// Substring tests shared by the runs-file reader (validation.cpp) and its free-text mapping rules
// (validation_rules.cpp): a plain substring, and a phrase stated rather than denied ("no FP8", "FP8 disabled").
#pragma once
#include <algorithm>
#include <array>
#include <string_view>

namespace parplan::validation_text {

inline bool has(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

// Whether the phrase at hay[at, at + len) (lowercase text) is denied within its clause: a "no", "not", "non",
// "without" or "disable(d)" word in the 24 characters before it, or "disabled", "off", "none", "false" or "not used"
// in the 24 after it, neither side crossing a clause mark (, ; ( ) |).
inline bool denied_at(std::string_view hay, size_t at, size_t len) {
  auto clause_mark = [](char c) { return c == ',' || c == ';' || c == '(' || c == ')' || c == '|'; };
  size_t from = at > 24 ? at - 24 : 0;
  for (size_t i = at; i > from; --i) {
    if (clause_mark(hay[i - 1])) {
      from = i;
      break;
    }
  }
  size_t to = std::min(hay.size(), at + len + 24);
  for (size_t i = at + len; i < to; ++i) {
    if (clause_mark(hay[i])) {
      to = i;
      break;
    }
  }
  // Whole words: bounded by the clause window's ends or by a character that is not a letter.
  auto word_in = [&](std::string_view window, std::string_view w) {
    for (size_t p = window.find(w); p != std::string_view::npos; p = window.find(w, p + 1)) {
      const bool left = p == 0 || !(window[p - 1] >= 'a' && window[p - 1] <= 'z');
      const size_t e = p + w.size();
      const bool right = e == window.size() || !(window[e] >= 'a' && window[e] <= 'z');
      if (left && right) return true;
    }
    return false;
  };
  const std::string_view before = hay.substr(from, at - from), after = hay.substr(at + len, to - at - len);
  constexpr std::array<std::string_view, 6> kBefore = {"no", "not", "non", "without", "disable", "disabled"};
  constexpr std::array<std::string_view, 5> kAfter = {"disabled", "off", "none", "false", "not used"};
  for (std::string_view w : kBefore) {
    if (word_in(before, w)) return true;
  }
  for (std::string_view w : kAfter) {
    if (word_in(after, w)) return true;
  }
  return false;
}

// Whether lowercase `hay` states `phrase` somewhere without denying it there.
inline bool states(std::string_view hay, std::string_view phrase) {
  for (size_t at = hay.find(phrase); at != std::string_view::npos; at = hay.find(phrase, at + 1)) {
    if (!denied_at(hay, at, phrase.size())) return true;
  }
  return false;
}

// Whether lowercase `hay` names `phrase` only to deny it ("no FP8", "activation checkpointing: none").
inline bool denies(std::string_view hay, std::string_view phrase) { return has(hay, phrase) && !states(hay, phrase); }

}  // namespace parplan::validation_text
