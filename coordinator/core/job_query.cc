#include "coordinator/core/job_query.h"

#include "common/job_id.h"

namespace ringmaster {

JobPage PageOf(const std::vector<v1::Job>& jobs, const JobQuery& query) {
  JobPage page;
  int64_t page_bytes = 0;
  for (const v1::Job& job : jobs) {
    const int64_t bytes = static_cast<int64_t>(job.ByteSizeLong());
    if (static_cast<int>(page.jobs.size()) == query.page_size ||
        (!page.jobs.empty() && page_bytes + bytes > query.max_page_bytes)) {
      page.next_before_number = JobNumber(page.jobs.back().id());
      break;
    }
    page_bytes += bytes;
    page.jobs.push_back(job);
  }
  return page;
}

}  // namespace ringmaster
