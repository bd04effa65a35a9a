#include "coordinator/core/job_store.h"

#include "absl/strings/numbers.h"
#include "common/credentials.h"

namespace ringmaster {

int64_t JobNumberOf(const std::string& job_id) {
  int64_t number = 0;
  const size_t dash = job_id.rfind('-');
  if (dash == std::string::npos || !absl::SimpleAtoi(job_id.substr(dash + 1), &number)) return 0;
  return number;
}

bool ParseJobSnapshot(const std::string& bytes, v1::Job* job) {
  if (!job->ParseFromString(bytes)) return false;
  if (job->owner().empty()) job->set_owner(std::string(kAdminUser));
  return true;
}

int64_t RevisionOfSnapshot(const std::string& bytes) {
  v1::Job job;
  return job.ParseFromString(bytes) ? job.revision() : 0;
}

}  // namespace ringmaster
