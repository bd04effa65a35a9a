#include "common/job_id.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

constexpr size_t kMaxJobIdLength = 63;

bool IdChar(char c) { return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-'; }

}  // namespace

absl::Status ValidateJobId(absl::string_view id) {
  bool valid = !id.empty() && id.size() <= kMaxJobIdLength && id.front() != '-';
  for (size_t i = 0; valid && i < id.size(); ++i) valid = IdChar(id[i]);
  if (valid) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("job id \"", absl::CHexEscape(id.substr(0, 64)), id.size() > 64 ? "..." : "",
                   "\" is not valid: ids are 1-63 lowercase letters, digits or '-', "
                   "starting with a letter or digit"));
}

absl::Status ValidateRankRef(absl::string_view job_id, int rank) {
  if (absl::Status s = ValidateJobId(job_id); !s.ok()) return s;
  if (rank < 0) return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is negative"));
  return absl::OkStatus();
}

int64_t JobNumber(absl::string_view job_id) {
  int64_t number = 0;
  const size_t dash = job_id.rfind('-');
  if (dash == absl::string_view::npos || !absl::SimpleAtoi(job_id.substr(dash + 1), &number)) {
    return 0;
  }
  return number;
}

}  // namespace ringmaster
