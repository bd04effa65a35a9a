#include "common/labels.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

constexpr size_t kMaxName = 63;
constexpr size_t kMaxPrefix = 253;

bool NameChar(char c) { return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.'; }

// A name or a non-empty value.
bool ValidName(absl::string_view s) {
  if (s.empty() || s.size() > kMaxName) return false;
  if (!absl::ascii_isalnum(s.front()) || !absl::ascii_isalnum(s.back())) return false;
  for (char c : s) {
    if (!NameChar(c)) return false;
  }
  return true;
}

// Lowercase DNS labels joined by dots.
bool ValidPrefix(absl::string_view s) {
  if (s.empty() || s.size() > kMaxPrefix) return false;
  for (char c : s) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-' && c != '.') return false;
  }
  return absl::ascii_isalnum(s.front()) && absl::ascii_isalnum(s.back());
}

std::string Quoted(absl::string_view s) {
  return absl::StrCat("\"", absl::CHexEscape(s.substr(0, 80)), s.size() > 80 ? "..." : "", "\"");
}

}  // namespace

absl::Status ValidateLabel(absl::string_view key, absl::string_view value) {
  const size_t slash = key.find('/');
  absl::string_view name = key;
  if (slash != absl::string_view::npos) {
    if (!ValidPrefix(key.substr(0, slash))) {
      return absl::InvalidArgumentError(
          absl::StrCat("label key ", Quoted(key),
                       ": the prefix before '/' must be a DNS subdomain "
                       "(lowercase letters, digits, '-' and '.', at most 253)"));
    }
    name = key.substr(slash + 1);
  }
  if (!ValidName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("label key ", Quoted(key),
                     ": the name must be 1-63 letters, digits, '-', '_' or '.', "
                     "starting and ending with a letter or digit"));
  }
  if (!value.empty() && !ValidName(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("label ", key, ": value ", Quoted(value),
                     " must be empty or 1-63 letters, digits, '-', "
                     "'_' or '.', starting and ending with a letter or digit"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::string, std::string>> ParseLabel(absl::string_view text) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("label ", Quoted(text), " is not key=value"));
  }
  std::pair<std::string, std::string> label(text.substr(0, eq), text.substr(eq + 1));
  if (absl::Status s = ValidateLabel(label.first, label.second); !s.ok()) return s;
  return label;
}

std::string LabelValueOf(absl::string_view text) {
  std::string value;
  for (char c : text) {
    if (NameChar(c)) {
      value.push_back(c);
    } else if (value.empty() || value.back() != '-') {
      value.push_back('-');  // a run of them is one
    }
  }
  auto trim = [](absl::string_view v) {
    while (!v.empty() && !absl::ascii_isalnum(v.front())) v.remove_prefix(1);
    while (!v.empty() && !absl::ascii_isalnum(v.back())) v.remove_suffix(1);
    return v;
  };
  return std::string(trim(trim(value).substr(0, kMaxName)));
}

}  // namespace ringmaster
