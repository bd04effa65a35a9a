// How the CLI prints: aligned tables for people, JSON or YAML for programs.
#ifndef RINGMASTER_CLIENT_OUTPUT_H_
#define RINGMASTER_CLIENT_OUTPUT_H_

#include <google/protobuf/message.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"

namespace ringmaster {

// Columns padded to their widest cell; the last column is not padded.
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows);

enum class OutputFormat { kTable, kJson, kYaml };

// "table", "json" or "yaml"; nullopt for anything else.
std::optional<OutputFormat> ParseOutputFormat(const std::string& name);

// The message as the proto's JSON: proto field names, every field
// (defaults included, so rank 0 has "rank": 0 and an empty list is []),
// enums by name, 64-bit integers as strings. Indented, one document.
std::string ToJson(const google::protobuf::Message& message);
// The same on one line, for streams: one object per line.
std::string ToJsonLine(const google::protobuf::Message& message);
// The same data as a YAML block document.
std::string ToYaml(const google::protobuf::Message& message);
// One document in `format` (kJson or kYaml), ending in a newline; a YAML
// document of a stream starts with "---".
std::string Render(const google::protobuf::Message& message, OutputFormat format,
                   bool stream = false);

// "4s", "2m05s", "3h10m".
std::string ShortDuration(absl::Duration d);

std::string JobStateLabel(v1::JobState state);

// One line per job, with a header.
void PrintJobsTable(std::ostream& out, const std::vector<v1::Job>& jobs, absl::Time now);
// The detail of `ringmaster status`.
void PrintJobDetail(std::ostream& out, const v1::Job& job, absl::Time now);
void PrintWorkersTable(std::ostream& out, const v1::ListWorkersResponse& workers, absl::Time now);
// WORKER IMAGE DIGEST SIZE RANKS LAST USED: each worker's image cache.
void PrintImagesTable(std::ostream& out, const std::vector<v1::Worker>& workers, absl::Time now);
// "SCHEDULABLE", "SPARE" (kept for jobs that lose a worker) or "CORDONED".
std::string WorkerSchedulingLabel(const v1::Worker& worker);
// Who cordoned it, when, why, and until when a quarantine lasts: "by admin
// since 2026-11-26 11:50:01 UTC (5m ago): new NIC"; or "on probation until
// 13:50:01 UTC"; empty for a schedulable worker.
std::string CordonDetail(const v1::Worker& worker, absl::Time now);
// The summary of a StacksReport and each rank's line.
void PrintStacks(std::ostream& out, const v1::StacksReport& report);
// QUEUE WEIGHT QUOTA LIMIT IN USE BORROWED RUNNING PENDING USERS, then the
// priority classes.
void PrintQueuesTable(std::ostream& out, const v1::ListQueuesResponse& queues);
// "step 120/600  loss 0.3124  1834 samples/s" (empty without progress).
std::string ProgressLine(const v1::Progress& progress);

}  // namespace ringmaster

#endif  // RINGMASTER_CLIENT_OUTPUT_H_
