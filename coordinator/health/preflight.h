// Pre-flight: before an attempt's first step its ranks run a timed 64 MB
// all-reduce on their real transport, and each reports its bus bandwidth
// (or its error). A rank that failed, or whose bandwidth is under half the
// job's median, gets its worker excluded for the job; the attempt is then
// placed again, without counting a failure. Pure, for its tests.
#ifndef RINGMASTER_COORDINATOR_HEALTH_PREFLIGHT_H_
#define RINGMASTER_COORDINATOR_HEALTH_PREFLIGHT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "domain/preflight_codec.h"

namespace ringmaster {

struct PreflightExclusion {
  int rank = 0;
  std::string why;  // "1.2 GB/s, under half the job's median 8.1 GB/s"
};

// The ranks to exclude, given every rank's report (by rank); empty when
// all passed.
std::vector<PreflightExclusion> JudgePreflight(const std::map<int, PreflightReport>& reports);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_HEALTH_PREFLIGHT_H_
