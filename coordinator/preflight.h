// Pre-flight: before an attempt's first step its ranks run a timed 64 MB
// all-reduce on their real transport, and each reports its bus bandwidth
// (or its error). A rank that failed, or whose bandwidth is under half the
// job's median, gets its worker excluded for the job; the attempt is then
// placed again, without counting a failure. Pure, for its tests.
#ifndef RINGMASTER_COORDINATOR_PREFLIGHT_H_
#define RINGMASTER_COORDINATOR_PREFLIGHT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster {

// Where in the attempt's rendezvous scope each rank stores its report, and
// the coordinator its verdict: "go", or anything else, which ends the check
// with that text as its error.
std::string PreflightReportKey(int rank);
inline constexpr char kPreflightVerdictKey[] = "preflight/verdict";
inline constexpr char kPreflightGo[] = "go";

// What a rank reported: its bus bandwidth, or why the check failed.
struct PreflightReport {
  // Its own link's: the best of the pairs it was timed in, the figure the
  // ranks are compared by.
  double bus_gb_per_s = 0;
  double world_gb_per_s = 0;  // the whole job's all-reduce
  std::string error;          // non-empty: it failed
};

// "busbw 12.5 world 11.9" or "error <text>", as a rank stores it; and back.
std::string EncodePreflightReport(const PreflightReport& report);
absl::StatusOr<PreflightReport> DecodePreflightReport(const std::string& text);

struct PreflightExclusion {
  int rank = 0;
  std::string why;  // "1.2 GB/s, under half the job's median 8.1 GB/s"
};

// The ranks to exclude, given every rank's report (by rank); empty when
// all passed.
std::vector<PreflightExclusion> JudgePreflight(const std::map<int, PreflightReport>& reports);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_PREFLIGHT_H_
