#include "client/ignore_rules.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace ringmaster {
namespace {

// Matches one character against the class that starts at pattern[0] ('[').
// Returns how many pattern bytes the class used, 0 when it has no ']' (then
// '[' is an ordinary character).
size_t MatchClass(absl::string_view pattern, char c, bool* matched) {
  size_t i = 1;
  bool negated = false;
  if (i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^')) {
    negated = true;
    ++i;
  }
  bool in = false;
  bool first = true;
  for (; i < pattern.size(); ++i) {
    if (pattern[i] == ']' && !first) {
      *matched = (in != negated) && c != '/';
      return i + 1;
    }
    first = false;
    char low = pattern[i];
    if (low == '\\' && i + 1 < pattern.size()) low = pattern[++i];
    char high = low;
    if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
      high = pattern[i + 2];
      i += 2;
    }
    if (c >= low && c <= high) in = true;
  }
  return 0;
}

}  // namespace

bool GlobMatch(absl::string_view p, absl::string_view s) {
  while (!p.empty()) {
    if (p.substr(0, 2) == "**") {
      size_t stars = p.find_first_not_of('*');
      absl::string_view rest = stars == absl::string_view::npos ? "" : p.substr(stars);
      if (rest.empty()) return true;  // "x/**": everything inside
      if (rest[0] == '/') {
        // "**/": zero or more whole directories.
        rest.remove_prefix(1);
        if (GlobMatch(rest, s)) return true;
        for (size_t slash = s.find('/'); slash != absl::string_view::npos;
             slash = s.find('/', slash + 1)) {
          if (GlobMatch(rest, s.substr(slash + 1))) return true;
        }
        return false;
      }
      p = p.substr(stars - 1);  // "a**b" is "a*b"
      continue;
    }
    switch (p[0]) {
      case '*':
        for (size_t k = 0;; ++k) {
          if (GlobMatch(p.substr(1), s.substr(k))) return true;
          if (k == s.size() || s[k] == '/') return false;
        }
      case '?':
        if (s.empty() || s[0] == '/') return false;
        break;
      case '[': {
        if (s.empty()) return false;
        bool matched = false;
        if (size_t used = MatchClass(p, s[0], &matched); used > 0) {
          if (!matched) return false;
          p.remove_prefix(used);
          s.remove_prefix(1);
          continue;
        }
        if (s[0] != '[') return false;
        break;
      }
      case '\\':
        if (p.size() > 1) p.remove_prefix(1);
        [[fallthrough]];
      default:
        if (s.empty() || s[0] != p[0]) return false;
    }
    p.remove_prefix(1);
    s.remove_prefix(1);
  }
  return s.empty();
}

IgnoreRules::IgnoreRules(absl::string_view text) {
  Add(".git/");
  for (absl::string_view line : absl::StrSplit(text, '\n')) Add(line);
}

void IgnoreRules::Add(absl::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // Trailing spaces go unless quoted with '\'.
  while (!line.empty() && line.back() == ' ' &&
         !(line.size() >= 2 && line[line.size() - 2] == '\\')) {
    line.remove_suffix(1);
  }
  if (line.empty() || line[0] == '#') return;
  Rule rule;
  if (line[0] == '!') {
    rule.negated = true;
    line.remove_prefix(1);
  } else if (line[0] == '\\' && line.size() > 1 && (line[1] == '!' || line[1] == '#')) {
    line.remove_prefix(1);
  }
  if (!line.empty() && line.back() == '/') {
    rule.directory_only = true;
    line.remove_suffix(1);
  }
  if (line.find('/') != absl::string_view::npos) rule.anchored = true;
  if (!line.empty() && line[0] == '/') line.remove_prefix(1);
  if (line.empty()) return;
  rule.pattern = std::string(line);
  rules_.push_back(std::move(rule));
}

bool IgnoreRules::Ignored(absl::string_view path, bool is_directory) const {
  const size_t slash = path.rfind('/');
  const absl::string_view name = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  bool ignored = false;
  for (const Rule& rule : rules_) {
    if (rule.directory_only && !is_directory) continue;
    if (GlobMatch(rule.pattern, rule.anchored ? path : name)) ignored = !rule.negated;
  }
  return ignored;
}

}  // namespace ringmaster
