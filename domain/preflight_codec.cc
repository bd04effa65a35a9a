#include "domain/preflight_codec.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringmaster {

std::string PreflightReportKey(int rank) { return absl::StrCat("preflight/report/", rank); }

std::string EncodePreflightReport(const PreflightReport& report) {
  return report.error.empty()
             ? absl::StrFormat("busbw %.6g world %.6g", report.bus_gb_per_s, report.world_gb_per_s)
             : absl::StrCat("error ", report.error);
}

absl::StatusOr<PreflightReport> DecodePreflightReport(const std::string& text) {
  absl::string_view rest = text;
  PreflightReport report;
  if (absl::ConsumePrefix(&rest, "error ")) {
    report.error = std::string(rest.empty() ? "unknown" : rest);
    return report;
  }
  const std::vector<absl::string_view> words = absl::StrSplit(rest, ' ');
  if (words.size() == 4 && words[0] == "busbw" && words[2] == "world" &&
      absl::SimpleAtod(words[1], &report.bus_gb_per_s) && report.bus_gb_per_s >= 0 &&
      absl::SimpleAtod(words[3], &report.world_gb_per_s) && report.world_gb_per_s >= 0) {
    return report;
  }
  return absl::InvalidArgumentError(absl::StrCat("not a pre-flight report: \"", text, "\""));
}

}  // namespace ringmaster
