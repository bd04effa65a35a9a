#include "domain/image_reference.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringmaster {
namespace {

constexpr size_t kMaxNameLength = 255;  // registry and path, as distribution's
constexpr size_t kMaxTagLength = 128;
constexpr char kDefaultRegistry[] = "docker.io";

absl::Status Bad(const std::string& text, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text, "\" is not an image reference: ", why));
}

bool LowerAlnum(char c) { return absl::ascii_islower(c) || absl::ascii_isdigit(c); }

// [a-z0-9]+ joined by ".", "_", "__" or any run of "-".
bool PathComponent(absl::string_view s) {
  if (s.empty() || !LowerAlnum(s.front()) || !LowerAlnum(s.back())) return false;
  for (size_t i = 0; i < s.size();) {
    if (LowerAlnum(s[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < s.size() && !LowerAlnum(s[end])) ++end;
    const absl::string_view separator = s.substr(i, end - i);
    const bool dashes = separator.find_first_not_of('-') == absl::string_view::npos;
    if (separator != "." && separator != "_" && separator != "__" && !dashes) return false;
    i = end;
  }
  return true;
}

// A DNS label: letters, digits and inner dashes.
bool DomainComponent(absl::string_view s) {
  if (s.empty() || !absl::ascii_isalnum(s.front()) || !absl::ascii_isalnum(s.back())) {
    return false;
  }
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '-') return false;
  }
  return true;
}

// host[:port], the host a name or an IPv4 address ([IPv6] is not taken).
bool Registry(absl::string_view s) {
  const size_t colon = s.rfind(':');
  if (colon != absl::string_view::npos) {
    uint32_t port = 0;
    if (!absl::SimpleAtoi(s.substr(colon + 1), &port) || port == 0 || port > 65535) return false;
    s = s.substr(0, colon);
  }
  for (absl::string_view label : absl::StrSplit(s, '.')) {
    if (!DomainComponent(label)) return false;
  }
  return true;
}

bool Tag(absl::string_view s) {
  if (s.empty() || s.size() > kMaxTagLength || s.front() == '.' || s.front() == '-') return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

bool Sha256Digest(absl::string_view s) {
  if (!absl::ConsumePrefix(&s, "sha256:") || s.size() != 64) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

}  // namespace

std::string ImageReference::Canonical() const {
  std::string text = absl::StrCat(registry, "/", repository);
  if (!tag.empty()) absl::StrAppend(&text, ":", tag);
  if (!digest.empty()) absl::StrAppend(&text, "@", digest);
  return text;
}

absl::StatusOr<ImageReference> ParseImageReference(const std::string& text) {
  if (text.empty()) return Bad(text, "it is empty");
  ImageReference ref;
  absl::string_view rest = text;
  if (const size_t at = rest.find('@'); at != absl::string_view::npos) {
    ref.digest = std::string(rest.substr(at + 1));
    if (!Sha256Digest(ref.digest)) {
      return Bad(text, absl::StrCat("a digest is sha256: and 64 lowercase hex digits, got \"",
                                    ref.digest, "\""));
    }
    rest = rest.substr(0, at);
  }
  // A tag follows the last '/': a ':' before it is a registry's port.
  const size_t slash = rest.rfind('/');
  const size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos && (slash == absl::string_view::npos || colon > slash)) {
    ref.tag = std::string(rest.substr(colon + 1));
    if (!Tag(ref.tag)) {
      return Bad(text, absl::StrCat("a tag is at most ", kMaxTagLength,
                                    " letters, digits, '_', '.' and '-', not starting with '.' or "
                                    "'-', got \"",
                                    ref.tag, "\""));
    }
    rest = rest.substr(0, colon);
  }
  if (rest.size() > kMaxNameLength) {
    return Bad(text,
               absl::StrCat("its name is ", rest.size(), " characters; at most ", kMaxNameLength));
  }
  std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  const absl::string_view first = parts.front();
  if (parts.size() > 1 &&
      (absl::StrContains(first, '.') || absl::StrContains(first, ':') || first == "localhost")) {
    if (!Registry(first)) {
      return Bad(text, absl::StrCat("\"", first, "\" is not a registry host[:port]"));
    }
    ref.registry = std::string(first);
    parts.erase(parts.begin());
  } else {
    ref.registry = kDefaultRegistry;
    if (parts.size() == 1) parts.insert(parts.begin(), "library");
  }
  for (absl::string_view part : parts) {
    if (!PathComponent(part)) {
      return Bad(text, absl::StrCat("\"", part,
                                    "\" is not a path component: lowercase letters and digits, "
                                    "joined by '.', '_', '__' or dashes"));
    }
  }
  ref.repository = absl::StrJoin(parts, "/");
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return ref;
}

}  // namespace ringmaster
