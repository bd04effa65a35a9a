// A page of the job list, as ListJobs asks for it.
#ifndef RINGMASTER_COORDINATOR_CORE_JOB_QUERY_H_
#define RINGMASTER_COORDINATOR_CORE_JOB_QUERY_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "proto/job.pb.h"

namespace ringmaster {

// Which jobs ListJobs returns (see ListJobsRequest).
struct JobQuery {
  int page_size = 100;
  // A page ends early rather than pass this many bytes of jobs, so that it
  // fits a client's default 4 MiB message whatever the jobs hold.
  int64_t max_page_bytes = 2 << 20;
  int64_t before_number = INT64_MAX;  // only jobs numbered below (the page token)
  std::set<v1::JobState> states;      // empty: any
  std::string name_prefix;
  std::map<std::string, std::string> labels;  // jobs with every one of them
};

struct JobPage {
  std::vector<v1::Job> jobs;
  int64_t next_before_number = 0;  // 0: no page after this one
};

// The first page of `jobs` (newest first, already matching `query`).
JobPage PageOf(const std::vector<v1::Job>& jobs, const JobQuery& query);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_JOB_QUERY_H_
