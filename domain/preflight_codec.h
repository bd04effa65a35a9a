// What a rank and the coordinator say to each other in a pre-flight check
// (coordinator/health/preflight.h): the keys in the attempt's rendezvous scope and
// the report's text, which the trainer writes and the coordinator reads.
#ifndef RINGMASTER_DOMAIN_PREFLIGHT_CODEC_H_
#define RINGMASTER_DOMAIN_PREFLIGHT_CODEC_H_

#include <string>

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

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_PREFLIGHT_CODEC_H_
