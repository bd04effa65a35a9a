// JobManager: the stacks of a job's ranks on demand (`ringmaster stacks`);
// Attempts takes and collects them.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "coordinator/jobs/job_manager.h"
#include "domain/job_state.h"

namespace ringmaster {

void JobManager::DumpStacks(const std::string& job_id, StacksDone done) {
  absl::Status refused;
  {
    MutexLock lock(&mu_);
    JobRecord* entry = table_.Find(job_id);
    if (entry == nullptr) {
      refused = absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
    } else if (!IsActive(entry->job.state()) || !HoldsSlots(entry->job)) {
      refused = absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " is ", StateName(entry->job.state()),
                       ": no attempt runs whose stacks could be taken"));
    } else {
      attempts_.RequestStacks(*entry, "asked by `ringmaster stacks`", std::nullopt);
      if (entry->stacks_request) {
        entry->stacks_request->waiting.push_back(std::move(done));
      } else {
        // Finished at once (no worker to ask): the report is the job's.
        replies_.push_back(
            [done = std::move(done), report = entry->job.stacks()] { done(report); });
      }
    }
  }
  outbox_.Flush();
  RunReplies();
  if (!refused.ok()) done(refused);
}

void JobManager::RunReplies() {
  std::vector<std::function<void()>> replies;
  {
    MutexLock lock(&mu_);
    replies.swap(replies_);
  }
  for (auto& reply : replies) reply();
}

}  // namespace ringmaster
