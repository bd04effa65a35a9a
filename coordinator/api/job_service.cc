#include "coordinator/api/job_service.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <optional>

#include <openssl/rand.h>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_handoff.h"
#include "common/grpc_status.h"
#include "common/job_id.h"
#include "common/labels.h"
#include "common/status_macros.h"
#include "common/stream_writer.h"
#include "coordinator/core/attempt_placement.h"
#include "domain/job_state.h"

namespace ringmaster {
namespace {

// Streams the job snapshots a JobManager watch delivers, as `Event`s
// (WatchJob's one job, WatchJobs' every job). A snapshot of the same job in
// the same state as the last one queued replaces it, so a slow reader sees
// every state change but not every progress tick; one more than
// `max_queued` changes behind, the stream ends (RESOURCE_EXHAUSTED).
template <typename Event>
class WatchReactor final : public WritingReactor<grpc::ServerWriteReactor<Event>, Event> {
 public:
  // Starts the watch with the observer; its id, or why there is none.
  using Start = std::function<absl::StatusOr<int64_t>(JobManager::JobObserver)>;
  // The event for a snapshot; nullopt skips it.
  using ToEvent = std::function<std::optional<Event>(const v1::Job&)>;

  WatchReactor(JobManager* manager, size_t max_queued, bool end_when_ended, ToEvent to_event,
               const Start& start)
      : WritingReactor<grpc::ServerWriteReactor<Event>, Event>(
            max_queued, Overflow::kEnd,
            [](const Event& queued, const Event& next) {
              return queued.job().id() == next.job().id() &&
                     queued.job().state() == next.job().state();
            }),
        manager_(manager),
        end_when_ended_(end_when_ended),
        to_event_(std::move(to_event)) {
    absl::StatusOr<int64_t> watch = start([this](const v1::Job& job) { Push(job); });
    if (!watch.ok()) {
      this->writer_.Finish(ToGrpcStatus(watch.status()), /*drain=*/false);
      return;
    }
    watch_id_ = *watch;
    HandToGrpc(this);
  }

  void Ended() override {
    if (watch_id_ != 0) manager_->Unwatch(watch_id_);
    delete this;
  }

 private:
  void Push(const v1::Job& job) {
    std::optional<Event> event = to_event_(job);
    if (event) this->writer_.Write(*std::move(event));
    if (end_when_ended_ && IsTerminal(job.state())) {
      this->writer_.Finish(grpc::Status::OK, /*drain=*/true);
    }
  }

  JobManager* const manager_;
  const bool end_when_ended_;
  const ToEvent to_event_;
  int64_t watch_id_ = 0;  // OnDone runs only after the constructor returned
};

constexpr size_t kMaxQueuedJobChanges = 256;
// Every job's: a listing may come first.
constexpr size_t kMaxQueuedChanges = 4096;

}  // namespace

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                    const v1::SubmitJobRequest* request,
                                                    v1::SubmitJobResponse* response) {
  absl::StatusOr<std::string> user = access_->RequireUser(*context);
  if (!user.ok()) return FinishUnary(context, user.status());
  const std::string& code = request->spec().code().sha256();
  if (!code.empty()) {
    absl::StatusOr<std::optional<int64_t>> stored = code_->Use(code);
    if (!stored.ok()) return FinishUnary(context, stored.status());
    if (!stored->has_value()) {
      return FinishUnary(context, absl::FailedPreconditionError(
                                      absl::StrCat("code.sha256: no code archive ", code,
                                                   " is stored on the coordinator; upload it first "
                                                   "(`ringmaster submit` does)")));
    }
  }
  absl::StatusOr<std::string> id = manager_->Submit(request->spec(), request->request_id(), *user);
  if (id.ok()) response->set_job_id(*id);
  return FinishUnary(context, id.status());
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                 const v1::GetJobRequest* request,
                                                 v1::Job* response) {
  absl::StatusOr<std::string> user = access_->RequireUser(*context);
  if (!user.ok()) return FinishUnary(context, user.status());
  if (absl::Status s = ValidateJobId(request->job_id()); !s.ok()) return FinishUnary(context, s);
  absl::StatusOr<v1::Job> job = manager_->Get(request->job_id());
  if (job.ok()) {
    *response = *std::move(job);
    AccessPolicy::RedactFor(*user, response);
  }
  return FinishUnary(context, job.status());
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJobProgress(grpc::CallbackServerContext* context,
                                                         const v1::GetJobProgressRequest* request,
                                                         v1::JobProgress* response) {
  // As the job's progress in GetJob: anyone who may read jobs.
  if (absl::Status s = access_->RequireUser(*context).status(); !s.ok()) {
    return FinishUnary(context, s);
  }
  if (absl::Status s = ValidateJobId(request->job_id()); !s.ok()) return FinishUnary(context, s);
  absl::StatusOr<v1::JobProgress> progress = manager_->Progress(request->job_id());
  if (progress.ok()) *response = *std::move(progress);
  return FinishUnary(context, progress.status());
}

namespace {
constexpr int kMaxPageSize = 500;
constexpr int kMaxLabelFilters = 16;
}  // namespace

absl::StatusOr<JobQuery> ToJobQuery(const v1::ListJobsRequest& request) {
  JobQuery query;
  if (request.page_size() < 0 || request.page_size() > kMaxPageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must be in [0, ", kMaxPageSize, "], got ", request.page_size()));
  }
  if (request.page_size() > 0) query.page_size = request.page_size();
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &query.before_number) || query.before_number <= 0)) {
    return absl::InvalidArgumentError(
        "page_token: not one this API gave (pass a next_page_token back as it is)");
  }
  for (int state : request.states()) query.states.insert(static_cast<v1::JobState>(state));
  query.name_prefix = request.name_prefix();
  if (request.labels_size() > kMaxLabelFilters) {
    return absl::InvalidArgumentError(absl::StrCat("labels: at most ", kMaxLabelFilters,
                                                   " to match, got ", request.labels_size()));
  }
  for (const auto& [key, value] : request.labels()) {
    RETURN_IF_ERROR(ValidateLabel(key, value));
    query.labels.emplace(key, value);
  }
  return query;
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* request,
                                                   v1::ListJobsResponse* response) {
  absl::StatusOr<std::string> user = access_->RequireUser(*context);
  if (!user.ok()) return FinishUnary(context, user.status());
  absl::StatusOr<JobQuery> query = ToJobQuery(*request);
  if (!query.ok()) return FinishUnary(context, query.status());
  absl::StatusOr<JobPage> page = manager_->ListPage(*query);
  if (!page.ok()) return FinishUnary(context, page.status());
  for (v1::Job& job : page->jobs) {
    AccessPolicy::RedactFor(*user, &job);
    *response->add_jobs() = std::move(job);
  }
  if (page->next_before_number > 0) {
    response->set_next_page_token(absl::StrCat(page->next_before_number));
  }
  return FinishUnary(context, absl::OkStatus());
}

absl::StatusOr<std::string> JobServiceImpl::OwnerActing(const grpc::ServerContextBase& context,
                                                        const std::string& job_id,
                                                        absl::string_view act) {
  ASSIGN_OR_RETURN(std::string user, access_->RequireUser(context));
  RETURN_IF_ERROR(ValidateJobId(job_id));
  ASSIGN_OR_RETURN(v1::Job job, manager_->Get(job_id));
  RETURN_IF_ERROR(AccessPolicy::RequireOwner(user, job, act));
  return user;
}

absl::Status JobServiceImpl::OwnerMay(const grpc::ServerContextBase& context,
                                      const std::string& job_id, absl::string_view act) {
  return OwnerActing(context, job_id, act).status();
}

grpc::ServerUnaryReactor* JobServiceImpl::ChangeJob(
    grpc::CallbackServerContext* context, const std::string& job_id, absl::string_view act,
    const std::function<absl::StatusOr<v1::Job>(const std::string& by)>& change,
    v1::Job* response) {
  absl::StatusOr<std::string> user = OwnerActing(*context, job_id, act);
  if (!user.ok()) return FinishUnary(context, user.status());
  absl::StatusOr<v1::Job> job = change(*user);
  if (job.ok()) *response = *std::move(job);
  return FinishUnary(context, job.status());
}

grpc::ServerUnaryReactor* JobServiceImpl::HoldJob(grpc::CallbackServerContext* context,
                                                  const v1::HoldJobRequest* request,
                                                  v1::Job* response) {
  const std::string& id = request->job_id();
  return ChangeJob(
      context, id, "hold", [&](const std::string& by) { return manager_->Hold(id, by); }, response);
}

grpc::ServerUnaryReactor* JobServiceImpl::ReleaseJob(grpc::CallbackServerContext* context,
                                                     const v1::ReleaseJobRequest* request,
                                                     v1::Job* response) {
  const std::string& id = request->job_id();
  return ChangeJob(
      context, id, "release", [&](const std::string& by) { return manager_->Release(id, by); },
      response);
}

grpc::ServerUnaryReactor* JobServiceImpl::SetJobPriority(grpc::CallbackServerContext* context,
                                                         const v1::SetJobPriorityRequest* request,
                                                         v1::Job* response) {
  const std::string& id = request->job_id();
  return ChangeJob(
      context, id, "change the priority of",
      [&](const std::string& by) { return manager_->SetPriority(id, request->priority(), by); },
      response);
}

grpc::ServerUnaryReactor* JobServiceImpl::RequeueJob(grpc::CallbackServerContext* context,
                                                     const v1::RequeueJobRequest* request,
                                                     v1::Job* response) {
  const std::string& id = request->job_id();
  return ChangeJob(
      context, id, "requeue", [&](const std::string& by) { return manager_->Requeue(id, by); },
      response);
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::CancelJobRequest* request,
                                                    v1::Job* response) {
  absl::Status s = OwnerMay(*context, request->job_id(), "cancel");
  if (!s.ok()) return FinishUnary(context, s);
  absl::StatusOr<v1::Job> job = manager_->Cancel(request->job_id());
  if (job.ok()) *response = *std::move(job);
  return FinishUnary(context, job.status());
}

grpc::ServerUnaryReactor* JobServiceImpl::DumpStacks(grpc::CallbackServerContext* context,
                                                     const v1::DumpStacksRequest* request,
                                                     v1::StacksReport* response) {
  absl::Status s = OwnerMay(*context, request->job_id(), "take the stacks of");
  if (!s.ok()) return FinishUnary(context, s);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Answered once the workers have (within JobManager::kStacksWait).
  manager_->DumpStacks(request->job_id(),
                       [reactor, response](const absl::StatusOr<v1::StacksReport>& report) {
                         if (report.ok()) *response = *report;
                         reactor->Finish(ToGrpcStatus(report.status()));
                       });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::DeleteJob(grpc::CallbackServerContext* context,
                                                    const v1::DeleteJobRequest* request,
                                                    v1::DeleteJobResponse*) {
  absl::Status s = OwnerMay(*context, request->job_id(), "delete");
  if (!s.ok()) return FinishUnary(context, s);
  return FinishUnary(context, manager_->Delete(request->job_id()));
}

grpc::ServerWriteReactor<v1::JobEvent>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext* context, const v1::WatchJobRequest* request) {
  absl::StatusOr<std::string> user = access_->RequireUser(*context);
  absl::Status s = user.status();
  if (s.ok()) s = ValidateJobId(request->job_id());
  if (!s.ok()) return new RefusedWriteReactor<v1::JobEvent>(ToGrpcStatus(s));
  return new WatchReactor<v1::JobEvent>(
      manager_, kMaxQueuedJobChanges, /*end_when_ended=*/true,
      [user = *user](const v1::Job& job) {
        v1::JobEvent event;
        *event.mutable_job() = job;
        AccessPolicy::RedactFor(user, event.mutable_job());
        return std::optional<v1::JobEvent>(std::move(event));
      },
      [this, &request](JobManager::JobObserver observer) {
        return manager_->Watch(request->job_id(), std::move(observer));
      });
}

grpc::ServerWriteReactor<v1::JobsEvent>* JobServiceImpl::WatchJobs(
    grpc::CallbackServerContext* context, const v1::WatchJobsRequest* request) {
  absl::StatusOr<std::string> user = access_->RequireUser(*context);
  absl::Status s = user.status();
  for (const auto& [key, value] : request->labels()) {
    if (s.ok()) s = ValidateLabel(key, value);
  }
  if (!s.ok()) return new RefusedWriteReactor<v1::JobsEvent>(ToGrpcStatus(s));
  return new WatchReactor<v1::JobsEvent>(
      manager_, kMaxQueuedChanges, /*end_when_ended=*/false,
      [manager = manager_, labels = request->labels(), user = *user](const v1::Job& job) {
        if (!HasLabels(job.spec().labels(), labels)) return std::optional<v1::JobsEvent>();
        v1::JobsEvent event;
        *event.mutable_job() = job;
        AccessPolicy::RedactFor(user, event.mutable_job());
        event.set_resume_token(manager->ResumeToken(job));
        return std::optional<v1::JobsEvent>(std::move(event));
      },
      [this, &request](JobManager::JobObserver observer) {
        return manager_->WatchAll(request->resume_token(), std::move(observer));
      });
}

grpc::ServerWriteReactor<v1::LogChunk>* JobServiceImpl::StreamLogs(
    grpc::CallbackServerContext* context, const v1::StreamLogsRequest* request) {
  absl::StatusOr<std::string> user = access_->RequireUser(*context);
  if (!user.ok()) return new RefusedWriteReactor<v1::LogChunk>(ToGrpcStatus(user.status()));
  return logs_->Stream(*user, *request);
}

grpc::ServerUnaryReactor* ClusterServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                          const v1::ListWorkersRequest*,
                                                          v1::ListWorkersResponse* response) {
  if (absl::Status s = access_->RequireUser(*context).status(); !s.ok()) {
    return FinishUnary(context, s);
  }
  for (v1::Worker& w : manager_->ListWorkers()) *response->add_workers() = std::move(w);
  for (const std::string& level : manager_->TopologyLevels()) response->add_topology_levels(level);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ClusterServiceImpl::ListQueues(grpc::CallbackServerContext* context,
                                                         const v1::ListQueuesRequest*,
                                                         v1::ListQueuesResponse* response) {
  if (absl::Status s = access_->RequireUser(*context).status(); !s.ok()) {
    return FinishUnary(context, s);
  }
  *response = manager_->ListQueues();
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ClusterServiceImpl::CordonWorker(grpc::CallbackServerContext* context,
                                                           const v1::CordonWorkerRequest* request,
                                                           v1::Worker* response) {
  absl::Status s = access_->RequireAdmin(*context);
  if (s.ok()) {
    absl::StatusOr<v1::Worker> worker =
        manager_->Cordon(request->worker_id(), request->reason(), std::string(kAdminUser));
    if (worker.ok()) *response = *std::move(worker);
    s = worker.status();
  }
  return FinishUnary(context, s);
}

grpc::ServerUnaryReactor* ClusterServiceImpl::UncordonWorker(
    grpc::CallbackServerContext* context, const v1::UncordonWorkerRequest* request,
    v1::Worker* response) {
  absl::Status s = access_->RequireAdmin(*context);
  if (s.ok()) {
    absl::StatusOr<v1::Worker> worker = manager_->Uncordon(request->worker_id());
    if (worker.ok()) *response = *std::move(worker);
    s = worker.status();
  }
  return FinishUnary(context, s);
}

grpc::ServerUnaryReactor* ClusterServiceImpl::DrainWorker(grpc::CallbackServerContext* context,
                                                          const v1::DrainWorkerRequest* request,
                                                          v1::DrainWorkerResponse* response) {
  absl::Status s = access_->RequireAdmin(*context);
  const int grace_s = request->has_grace_s() ? request->grace_s() : 30;
  if (s.ok() && grace_s < 0) {
    s = absl::InvalidArgumentError(absl::StrCat("grace_s is ", grace_s, "; it must be >= 0"));
  }
  if (s.ok()) {
    absl::StatusOr<v1::DrainWorkerResponse> drained = manager_->Drain(
        request->worker_id(), request->reason(), std::string(kAdminUser), absl::Seconds(grace_s));
    if (drained.ok()) *response = *std::move(drained);
    s = drained.status();
  }
  return FinishUnary(context, s);
}

grpc::ServerUnaryReactor* JobServiceImpl::StatCode(grpc::CallbackServerContext* context,
                                                   const v1::StatCodeRequest* request,
                                                   v1::StatCodeResponse* response) {
  if (absl::Status s = access_->RequireUser(*context).status(); !s.ok()) {
    return FinishUnary(context, s);
  }
  absl::StatusOr<std::optional<int64_t>> bytes = code_->Use(request->sha256());
  if (bytes.ok() && bytes->has_value()) {
    response->set_stored(true);
    response->set_archive_bytes(**bytes);
  }
  return FinishUnary(context, bytes.status());
}

grpc::ServerReadReactor<v1::UploadCodeRequest>* JobServiceImpl::UploadCode(
    grpc::CallbackServerContext* context, v1::UploadCodeResponse* response) {
  if (absl::Status s = access_->RequireUser(*context).status(); !s.ok()) {
    return new RefusedReadReactor<v1::UploadCodeRequest>(ToGrpcStatus(s));
  }
  return uploads_->Start(response, access_->CallerKey(*context));
}

// How long `ringmaster ui`'s URL signs a browser in.
constexpr absl::Duration kConsoleLoginLifetime = absl::Minutes(2);

grpc::ServerUnaryReactor* ClusterServiceImpl::CreateConsoleLogin(
    grpc::CallbackServerContext* context, const v1::CreateConsoleLoginRequest*,
    v1::ConsoleLogin* response) {
  absl::StatusOr<std::string> user = access_->RequireUser(*context);
  if (!user.ok()) return FinishUnary(context, user.status());
  // A session opens no other: one stolen ends when it expires.
  if (std::optional<std::string> token = BearerToken(*context); token && IsSessionToken(*token)) {
    return FinishUnary(
        context, absl::PermissionDeniedError("a console session cannot open another: sign in with "
                                             "`ringmaster ui`, or with a token"));
  }
  unsigned char nonce[16];
  if (RAND_bytes(nonce, sizeof(nonce)) != 1) {
    return FinishUnary(context, absl::InternalError("no random bytes for a sign-in code"));
  }
  const absl::Time expires = absl::Now() + kConsoleLoginLifetime;
  response->set_code(access_->signer().Login(
      *user, absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(nonce), 16)),
      expires));
  response->set_user(*user);
  response->set_expires_unix_ms(absl::ToUnixMillis(expires));
  response->set_http_port(http_port_.load());
  return FinishUnary(context, absl::OkStatus());
}

}  // namespace ringmaster
