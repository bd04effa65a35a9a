// Attempts: the stacks of a job's ranks, taken when it is declared hung
// (before anything is stopped) and on demand (`ringmaster stacks`).
#include "coordinator/jobs/attempts.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "domain/job_state.h"
#include "domain/stacks_summary.h"

namespace ringmaster {

void Attempts::RequestStacks(JobRecord& entry, const std::string& why,
                             std::optional<FailureCause> hang) {
  const v1::Job& job = entry.job;
  if (entry.stacks_request && entry.stacks_request->attempt == job.attempt()) {
    if (hang && !entry.stacks_request->hang) entry.stacks_request->hang = std::move(hang);
    return;
  }
  StacksRequest& request = entry.stacks_request.emplace();
  request.attempt = job.attempt();
  request.why = why;
  request.deadline = clock_->Now() + kStacksWait;
  request.hang = std::move(hang);
  for (const v1::RankStatus& rank : job.ranks()) {
    if (RankHoldsSlot(rank)) request.workers.insert(rank.worker_id());
  }
  v1::CoordinatorMessage message;
  v1::DumpStacks& dump = *message.mutable_dump_stacks();
  dump.set_job_id(job.id());
  dump.set_attempt(job.attempt());
  dump.set_why(why);
  for (const std::string& worker : request.workers) Send(worker, message);
  spdlog::info("job {}: taking the stacks of its ranks on {} workers ({})", job.id(),
               request.workers.size(), why);
  if (request.workers.empty()) FinishStacks(entry);
}

void Attempts::OnStacksDumped(const std::string& worker_id, const v1::StacksDumped& dumped) {
  JobRecord* entry = table_.Find(dumped.job_id());
  if (entry == nullptr || !entry->stacks_request ||
      entry->stacks_request->attempt != dumped.attempt()) {
    return;  // late: its request has finished
  }
  StacksRequest& request = *entry->stacks_request;
  const v1::Job& job = entry->job;
  for (const v1::RankStacks& rank : dumped.ranks()) {
    // A worker speaks for the ranks placed on it only.
    if (rank.rank() < 0 || rank.rank() >= job.ranks_size() ||
        job.ranks(rank.rank()).worker_id() != worker_id) {
      continue;
    }
    v1::RankStacks& kept = request.ranks[rank.rank()] = rank;
    kept.set_worker_id(worker_id);
  }
  request.answered.insert(worker_id);
  if (request.answered.size() >= request.workers.size()) FinishStacks(*entry);
}

void Attempts::FinishStacks(JobRecord& entry) {
  StacksRequest request = *std::move(entry.stacks_request);
  entry.stacks_request.reset();
  v1::Job& job = entry.job;
  v1::StacksReport report;
  report.set_attempt(request.attempt);
  report.set_time_unix_ms(absl::ToUnixMillis(clock_->Now()));
  report.set_why(request.why);
  std::vector<v1::RankStacks> ranks;
  for (const v1::RankStatus& rank : job.ranks()) {
    auto got = request.ranks.find(rank.rank());
    if (got != request.ranks.end()) {
      ranks.push_back(got->second);
      continue;
    }
    if (!RankHoldsSlot(rank)) continue;
    v1::RankStacks& missing = ranks.emplace_back();
    missing.set_rank(rank.rank());
    missing.set_worker_id(rank.worker_id());
    missing.set_process("unknown");
    missing.set_bucket(-1);
    missing.set_summary(absl::StrCat("no stacks: worker ", rank.worker_id(), " did not answer"));
  }
  for (v1::RankStacks& r : ranks) *report.add_ranks() = r;
  report.set_summary(SummarizeStacks(ranks));
  if (request.attempt == job.attempt()) {
    *job.mutable_stacks() = report;
    table_.Persist(entry);
  }
  spdlog::info("job {}: stacks of attempt {}: {}", job.id(), request.attempt, report.summary());
  for (auto& done : request.waiting) {
    replies_.push_back([done = std::move(done), report] { done(report); });
  }
  if (request.hang && request.attempt == job.attempt() && IsActive(job.state())) {
    FailureCause cause = *std::move(request.hang);
    if (!report.summary().empty()) absl::StrAppend(&cause.message, "; ", report.summary());
    NoteFailure(entry, std::move(cause));
  }
}

}  // namespace ringmaster
