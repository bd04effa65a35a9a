#include "coordinator/core/change_log.h"

#include <algorithm>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringmaster {

int64_t ChangeLog::Record(const std::string& job_id) {
  recent_.push_back(job_id);
  if (recent_.size() > capacity_) recent_.pop_front();
  return ++last_;
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> ChangeLog::ChangedSince(
    int64_t revision) const {
  const int64_t oldest = last_ - static_cast<int64_t>(recent_.size()) + 1;
  if (revision > last_ || revision < 0) {
    return absl::OutOfRangeError(absl::StrCat("revision ", revision,
                                              " was never given (the "
                                              "latest is ",
                                              last_, ")"));
  }
  if (revision + 1 < oldest) {
    return absl::OutOfRangeError(absl::StrCat(
        "revision ", revision, " is too old: only the ", recent_.size(),
        " latest changes are kept (from revision ", oldest, "); watch again from the start"));
  }
  std::unordered_map<std::string, int64_t> latest;
  for (int64_t r = revision + 1; r <= last_; ++r) latest[recent_[r - oldest]] = r;
  std::vector<std::pair<std::string, int64_t>> changed(latest.begin(), latest.end());
  std::sort(changed.begin(), changed.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  return changed;
}

}  // namespace ringmaster
