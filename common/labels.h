// Labels as Kubernetes writes them, on jobs (`labels`) and workers
// (`--label key=value`), matched by a job's `worker_selector`.
//   key:   [prefix/]name, the prefix a DNS subdomain of at most 253 bytes
//   name:  1-63 of [A-Za-z0-9._-], starting and ending alphanumeric
//   value: empty, or what a name may be
#ifndef RINGMASTER_COMMON_LABELS_H_
#define RINGMASTER_COMMON_LABELS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster {

// INVALID_ARGUMENT saying which part breaks which rule.
absl::Status ValidateLabel(absl::string_view key, absl::string_view value);

// "key=value" (as `--label` and `jobs --label` take it), validated.
absl::StatusOr<std::pair<std::string, std::string>> ParseLabel(absl::string_view text);

// `text` made a label value: each character a value may not hold becomes
// '-', the ends trimmed to alphanumerics, at most 63 bytes ("NVIDIA H100
// 80GB HBM3" -> "NVIDIA-H100-80GB-HBM3").
std::string LabelValueOf(absl::string_view text);

// Whether `labels` has every key of `wanted` with its value (maps of
// strings: std::map or a proto's map field).
template <typename Labels, typename Wanted>
bool HasLabels(const Labels& labels, const Wanted& wanted) {
  for (const auto& [key, value] : wanted) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  return true;
}

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_LABELS_H_
