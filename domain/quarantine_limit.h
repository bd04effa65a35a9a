// --max-quarantined: how many workers the coordinator may quarantine at
// once, which `ringmaster up` checks before it starts one.
#ifndef RINGMASTER_DOMAIN_QUARANTINE_LIMIT_H_
#define RINGMASTER_DOMAIN_QUARANTINE_LIMIT_H_

#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

// At most `count` workers, or `percent` of those known, quarantined at
// once ("20%" or "3").
struct QuarantineLimit {
  double percent = 20;
  int count = -1;  // >= 0: a number of workers, not a share
  // How many of `workers` may be quarantined.
  int Of(int workers) const;
  std::string ToString() const;
};
absl::StatusOr<QuarantineLimit> ParseQuarantineLimit(const std::string& text);

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_QUARANTINE_LIMIT_H_
