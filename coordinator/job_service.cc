#include "coordinator/job_service.h"

#include <deque>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "common/job_id.h"
#include "coordinator/job_state.h"

namespace ringmaster {
namespace {

// Streams job snapshots until the job ends. Consecutive snapshots in the
// same state are coalesced while a write is in flight, so a slow reader
// sees every state change but not every progress tick.
class WatchReactor final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  WatchReactor(JobManager* manager, const std::string& job_id) : manager_(manager) {
    auto watch = manager_->Watch(job_id, [this](const v1::Job& job) { Push(job); });
    if (!watch.ok()) {
      Finish(ToGrpcStatus(watch.status()));
      return;
    }
    watch_id_ = *watch;
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) return;  // the client went away; OnCancel finishes
    if (IsTerminal(event_.job().state())) {
      finished_ = true;
      Finish(grpc::Status::OK);
      return;
    }
    MaybeWrite();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    if (!finished_) {
      finished_ = true;
      Finish(grpc::Status::CANCELLED);
    }
  }

  void OnDone() override {
    if (watch_id_ != 0) manager_->Unwatch(watch_id_);
    delete this;
  }

 private:
  void Push(const v1::Job& job) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    if (!pending_.empty() && pending_.back().state() == job.state()) {
      pending_.back() = job;
    } else {
      pending_.push_back(job);
    }
    MaybeWrite();
  }

  void MaybeWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_ || pending_.empty()) return;
    *event_.mutable_job() = std::move(pending_.front());
    pending_.pop_front();
    writing_ = true;
    StartWrite(&event_);
  }

  JobManager* const manager_;
  int64_t watch_id_ = 0;
  absl::Mutex mu_;
  std::deque<v1::Job> pending_ ABSL_GUARDED_BY(mu_);
  v1::JobEvent event_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(
    grpc::CallbackServerContext* context, const v1::SubmitJobRequest* request,
    v1::SubmitJobResponse* response) {
  if (absl::Status s = access_->RequireAdmin(*context); !s.ok()) return FinishUnary(context, s);
  absl::StatusOr<std::string> id = manager_->Submit(request->spec());
  if (id.ok()) response->set_job_id(*id);
  return FinishUnary(context, id.status());
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                 const v1::GetJobRequest* request,
                                                 v1::Job* response) {
  if (absl::Status s = access_->RequireAdmin(*context); !s.ok()) return FinishUnary(context, s);
  if (absl::Status s = ValidateJobId(request->job_id()); !s.ok()) return FinishUnary(context, s);
  absl::StatusOr<v1::Job> job = manager_->Get(request->job_id());
  if (job.ok()) *response = *std::move(job);
  return FinishUnary(context, job.status());
}

namespace {

constexpr int kMaxPageSize = 500;

absl::StatusOr<JobQuery> ToQuery(const v1::ListJobsRequest& request) {
  JobQuery query;
  if (request.page_size() < 0 || request.page_size() > kMaxPageSize) {
    return absl::InvalidArgumentError(absl::StrCat("page_size must be in [0, ", kMaxPageSize,
                                                   "], got ", request.page_size()));
  }
  if (request.page_size() > 0) query.page_size = request.page_size();
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &query.before_number) ||
       query.before_number <= 0)) {
    return absl::InvalidArgumentError(
        "page_token: not one this API gave (pass a next_page_token back as it is)");
  }
  for (int state : request.states()) query.states.insert(static_cast<v1::JobState>(state));
  query.name_prefix = request.name_prefix();
  return query;
}

}  // namespace

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(
    grpc::CallbackServerContext* context, const v1::ListJobsRequest* request,
    v1::ListJobsResponse* response) {
  if (absl::Status s = access_->RequireAdmin(*context); !s.ok()) return FinishUnary(context, s);
  absl::StatusOr<JobQuery> query = ToQuery(*request);
  if (!query.ok()) return FinishUnary(context, query.status());
  absl::StatusOr<JobPage> page = manager_->ListPage(*query);
  if (!page.ok()) return FinishUnary(context, page.status());
  for (v1::Job& job : page->jobs) *response->add_jobs() = std::move(job);
  if (page->next_before_number > 0) {
    response->set_next_page_token(absl::StrCat(page->next_before_number));
  }
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(
    grpc::CallbackServerContext* context, const v1::CancelJobRequest* request,
    v1::Job* response) {
  if (absl::Status s = access_->RequireAdmin(*context); !s.ok()) return FinishUnary(context, s);
  if (absl::Status s = ValidateJobId(request->job_id()); !s.ok()) return FinishUnary(context, s);
  absl::StatusOr<v1::Job> job = manager_->Cancel(request->job_id());
  if (job.ok()) *response = *std::move(job);
  return FinishUnary(context, job.status());
}

grpc::ServerUnaryReactor* JobServiceImpl::DeleteJob(grpc::CallbackServerContext* context,
                                                     const v1::DeleteJobRequest* request,
                                                     v1::DeleteJobResponse*) {
  if (absl::Status s = access_->RequireAdmin(*context); !s.ok()) return FinishUnary(context, s);
  if (absl::Status s = ValidateJobId(request->job_id()); !s.ok()) return FinishUnary(context, s);
  return FinishUnary(context, manager_->Delete(request->job_id()));
}

grpc::ServerWriteReactor<v1::JobEvent>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext* context, const v1::WatchJobRequest* request) {
  absl::Status s = access_->RequireAdmin(*context);
  if (s.ok()) s = ValidateJobId(request->job_id());
  if (!s.ok()) return new RefusedWriteReactor<v1::JobEvent>(ToGrpcStatus(s));
  return new WatchReactor(manager_, request->job_id());
}

grpc::ServerWriteReactor<v1::LogChunk>* JobServiceImpl::StreamLogs(
    grpc::CallbackServerContext* context, const v1::StreamLogsRequest* request) {
  absl::Status s = access_->RequireAdmin(*context);
  if (s.ok()) s = ValidateRankRef(request->job_id(), request->all_ranks() ? 0 : request->rank());
  if (!s.ok()) return new RefusedWriteReactor<v1::LogChunk>(ToGrpcStatus(s));
  return logs_->Stream(*request);
}

grpc::ServerUnaryReactor* ClusterServiceImpl::ListWorkers(
    grpc::CallbackServerContext* context, const v1::ListWorkersRequest*,
    v1::ListWorkersResponse* response) {
  if (absl::Status s = access_->RequireAdmin(*context); !s.ok()) return FinishUnary(context, s);
  for (v1::Worker& w : manager_->ListWorkers()) *response->add_workers() = std::move(w);
  return FinishUnary(context, absl::OkStatus());
}

}  // namespace ringmaster
