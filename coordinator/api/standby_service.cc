#include "coordinator/api/standby_service.h"

#include <grpcpp/impl/codegen/proto_utils.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/job_id.h"
#include "common/status_macros.h"
#include "coordinator/api/job_service.h"
#include "proto/job.grpc.pb.h"

namespace ringmaster {
namespace {

const std::string& GetJobMethod() {
  static const std::string* method =
      new std::string(absl::StrCat("/", v1::JobService::service_full_name(), "/GetJob"));
  return *method;
}

const std::string& ListJobsMethod() {
  static const std::string* method =
      new std::string(absl::StrCat("/", v1::JobService::service_full_name(), "/ListJobs"));
  return *method;
}

template <typename Message>
absl::Status Parse(const grpc::ByteBuffer& bytes, Message* message) {
  grpc::ByteBuffer copy(bytes);
  grpc::Status parsed = grpc::SerializationTraits<Message>::Deserialize(&copy, message);
  if (!parsed.ok()) return absl::InvalidArgumentError("the request is not a valid message");
  return absl::OkStatus();
}

template <typename Message>
void Serialize(const Message& message, grpc::ByteBuffer* bytes) {
  bool own = false;
  grpc::SerializationTraits<Message>::Serialize(message, bytes, &own);
}

absl::StatusOr<v1::Job> GetJob(JobStore* store, const std::string& user,
                               const v1::GetJobRequest& request) {
  RETURN_IF_ERROR(ValidateJobId(request.job_id()));
  ASSIGN_OR_RETURN(v1::Job job, store->Load(request.job_id()));
  AccessPolicy::RedactFor(user, &job);
  return job;
}

absl::StatusOr<v1::ListJobsResponse> ListJobs(JobStore* store, const std::string& user,
                                              const v1::ListJobsRequest& request) {
  ASSIGN_OR_RETURN(JobQuery query, ToJobQuery(request));
  ASSIGN_OR_RETURN(std::vector<v1::Job> jobs,
                   store->ListRetired({true, query.before_number, query.states, query.name_prefix,
                                       query.page_size + 1, query.labels}));
  JobPage page = PageOf(jobs, query);
  v1::ListJobsResponse response;
  for (v1::Job& job : page.jobs) {
    AccessPolicy::RedactFor(user, &job);
    *response.add_jobs() = std::move(job);
  }
  if (page.next_before_number > 0) {
    response.set_next_page_token(absl::StrCat(page.next_before_number));
  }
  return response;
}

// A call refused at once.
class RefusedCall final : public grpc::ServerGenericBidiReactor {
 public:
  explicit RefusedCall(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

// One call: a read is answered once its request has arrived; anything
// else is refused at once.
class StandbyCall final : public grpc::ServerGenericBidiReactor {
 public:
  StandbyCall(const StandbyService* service, grpc::GenericCallbackServerContext* context)
      : service_(service), context_(context) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
      return;
    }
    absl::Status answered = service_->Answer(*context_, request_, &response_);
    if (!answered.ok()) {
      Finish(ToGrpcStatus(answered));
      return;
    }
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }

  void OnDone() override { delete this; }

 private:
  const StandbyService* const service_;
  grpc::GenericCallbackServerContext* const context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

}  // namespace

absl::Status NotLeaderError(const std::string& leader_address) {
  if (leader_address.empty()) {
    return absl::UnavailableError(
        "not the leader, and no coordinator leads now: try again in a few seconds");
  }
  return absl::UnavailableError(absl::StrCat("not the leader: ", kLeaderIsAt, leader_address));
}

bool StandbyService::Reads(const std::string& method) {
  return method == GetJobMethod() || method == ListJobsMethod();
}

grpc::ServerGenericBidiReactor* StandbyService::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (!Reads(context->method())) return new RefusedCall(NotLeader());
  return new StandbyCall(this, context);
}

grpc::ServerGenericBidiReactor* RefusingService::CreateReactor(
    grpc::GenericCallbackServerContext*) {
  return new RefusedCall(refusal_());
}

absl::Status StandbyService::Answer(const grpc::GenericCallbackServerContext& context,
                                    const grpc::ByteBuffer& request,
                                    grpc::ByteBuffer* response) const {
  ASSIGN_OR_RETURN(const std::string user, access_->RequireUser(context));
  if (context.method() == GetJobMethod()) {
    v1::GetJobRequest get;
    RETURN_IF_ERROR(Parse(request, &get));
    ASSIGN_OR_RETURN(v1::Job job, GetJob(store_, user, get));
    Serialize(job, response);
    return absl::OkStatus();
  }
  v1::ListJobsRequest list;
  RETURN_IF_ERROR(Parse(request, &list));
  ASSIGN_OR_RETURN(v1::ListJobsResponse page, ListJobs(store_, user, list));
  Serialize(page, response);
  return absl::OkStatus();
}

grpc::ServerWriteReactor<v1::LogChunk>* StandbyLogService::StreamLogs(
    grpc::CallbackServerContext* context, const v1::StreamLogsRequest* request) {
  absl::StatusOr<std::string> user = access_->RequireUser(*context);
  if (!user.ok()) return new RefusedWriteReactor<v1::LogChunk>(ToGrpcStatus(user.status()));
  return logs_->Stream(*user, *request);
}

}  // namespace ringmaster
