#include "client/client.h"

#include <cstdlib>
#include <fstream>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/credentials.h"
#include "common/grpc_status.h"
#include "common/limits.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

// 128 random bits, as a SubmitJobRequest.request_id.
std::string NewRequestId() {
  std::random_device random;
  return absl::StrFormat("%08x%08x%08x%08x", random(), random(), random(), random());
}

constexpr absl::string_view kFromCoordinator = "ringmaster.dev/from-coordinator";

// UNAVAILABLE from the channel reads as the coordinator being down, or as
// TLS on one side only. Every error is marked as the coordinator's answer.
absl::Status Explain(const grpc::Status& status, const std::string& address, bool tls) {
  absl::Status out = FromGrpcStatus(status);
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    const std::string why = ExplainTlsFailure(address, tls, status.error_message());
    out = absl::UnavailableError(absl::StrCat("cannot reach the coordinator at ", address, ": ",
                                              why.empty() ? status.error_message() : why));
  }
  if (!out.ok()) out.SetPayload(kFromCoordinator, absl::Cord());
  return out;
}

}  // namespace

bool FromCoordinator(const absl::Status& status) {
  return status.GetPayload(kFromCoordinator).has_value();
}

Client::Client(const std::string& address, const std::string& token, Tls tls,
               absl::Duration rpc_timeout)
    : address_(address),
      token_(token),
      tls_(tls.has_value()),
      rpc_timeout_(rpc_timeout),
      targets_(address, std::move(tls)) {}

Client::Stubs Client::StubsFor(const CoordinatorTargets::Target& target) {
  return {target.address, v1::JobService::NewStub(target.channel),
          v1::ClusterService::NewStub(target.channel)};
}

Client::Stubs Client::Current() { return StubsFor(targets_.Current()); }

absl::Status Client::Call(bool bounded, bool idempotent,
                          const std::function<grpc::Status(Stubs&, grpc::ClientContext*)>& rpc) {
  std::string used;
  grpc::Status status = targets_.Call(
      absl::Now() + kFollowFor, idempotent,
      [&](const CoordinatorTargets::Target& target) {
        grpc::ClientContext context;
        Prepare(&context, bounded);
        if (bounded && idempotent && targets_.several()) {
          context.set_deadline(DeadlineIn(std::min(rpc_timeout_, absl::Seconds(3))));
        }
        Stubs stubs = StubsFor(target);
        return rpc(stubs, &context);
      },
      &used);
  return status.ok() ? absl::OkStatus() : Explain(status, used, tls_);
}

void Client::Prepare(grpc::ClientContext* context, bool bounded) const {
  if (bounded) context->set_deadline(DeadlineIn(rpc_timeout_));
  AddBearerToken(context, token_);
}

absl::StatusOr<std::string> Client::Submit(const v1::JobSpec& spec, const std::string& request_id) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  // Made here when the caller has none, so that the call can be made
  // again safely (a lost answer, a new leader).
  request.set_request_id(request_id.empty() ? NewRequestId() : request_id);
  v1::SubmitJobResponse response;
  RETURN_IF_ERROR(Call(true, true, [&](Stubs& s, grpc::ClientContext* c) {
    return s.jobs->SubmitJob(c, request, &response);
  }));
  return response.job_id();
}

absl::StatusOr<bool> Client::UploadCode(const std::string& path, const std::string& sha256,
                                        int64_t archive_bytes) {
  {
    v1::StatCodeRequest request;
    request.set_sha256(sha256);
    v1::StatCodeResponse response;
    // Found the leader, when there are several coordinators.
    RETURN_IF_ERROR(Call(true, true, [&](Stubs& s, grpc::ClientContext* c) {
      return s.jobs->StatCode(c, request, &response);
    }));
    if (response.stored()) return true;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  grpc::ClientContext context;
  Prepare(&context, false);
  v1::UploadCodeResponse response;
  Stubs stubs = Current();
  std::unique_ptr<grpc::ClientWriter<v1::UploadCodeRequest>> writer =
      stubs.jobs->UploadCode(&context, &response);
  v1::UploadCodeRequest piece;
  piece.set_sha256(sha256);
  piece.set_archive_bytes(archive_bytes);
  std::string buffer(kMaxCodeChunkBytes, '\0');
  bool first = true;
  while (in || first) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    piece.set_data(buffer.data(), static_cast<size_t>(in.gcount()));
    // A refused upload ends the stream; Finish says why.
    if (!writer->Write(piece)) break;
    piece.clear_sha256();
    piece.clear_archive_bytes();
    first = false;
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return Explain(status, stubs.address, tls_);
  return response.already_stored();
}

absl::StatusOr<v1::Job> Client::GetJob(const std::string& job_id) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::Job job;
  RETURN_IF_ERROR(Call(true, true, [&](Stubs& s, grpc::ClientContext* c) {
    return s.jobs->GetJob(c, request, &job);
  }));
  return job;
}

absl::StatusOr<v1::ListJobsResponse> Client::ListJobsPage(const v1::ListJobsRequest& request) {
  v1::ListJobsResponse response;
  RETURN_IF_ERROR(Call(true, true, [&](Stubs& s, grpc::ClientContext* c) {
    return s.jobs->ListJobs(c, request, &response);
  }));
  return response;
}

absl::StatusOr<std::vector<v1::Job>> Client::ListJobs() {
  std::vector<v1::Job> jobs;
  v1::ListJobsRequest request;
  do {
    absl::StatusOr<v1::ListJobsResponse> page = ListJobsPage(request);
    if (!page.ok()) return page.status();
    for (v1::Job& job : *page->mutable_jobs()) jobs.push_back(std::move(job));
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  return jobs;
}

absl::Status Client::DeleteJob(const std::string& job_id) {
  v1::DeleteJobRequest request;
  request.set_job_id(job_id);
  v1::DeleteJobResponse response;
  RETURN_IF_ERROR(Call(true, false, [&](Stubs& s, grpc::ClientContext* c) {
    return s.jobs->DeleteJob(c, request, &response);
  }));
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> Client::CancelJob(const std::string& job_id) {
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  v1::Job job;
  RETURN_IF_ERROR(Call(true, false, [&](Stubs& s, grpc::ClientContext* c) {
    return s.jobs->CancelJob(c, request, &job);
  }));
  return job;
}

absl::StatusOr<v1::Job> Client::HoldJob(const std::string& job_id) {
  v1::HoldJobRequest request;
  request.set_job_id(job_id);
  v1::Job job;
  RETURN_IF_ERROR(Call(true, true, [&](Stubs& s, grpc::ClientContext* c) {
    return s.jobs->HoldJob(c, request, &job);
  }));
  return job;
}

absl::StatusOr<v1::Job> Client::ReleaseJob(const std::string& job_id) {
  v1::ReleaseJobRequest request;
  request.set_job_id(job_id);
  v1::Job job;
  RETURN_IF_ERROR(Call(true, true, [&](Stubs& s, grpc::ClientContext* c) {
    return s.jobs->ReleaseJob(c, request, &job);
  }));
  return job;
}

absl::StatusOr<v1::Job> Client::SetJobPriority(const std::string& job_id,
                                               const std::string& priority) {
  v1::SetJobPriorityRequest request;
  request.set_job_id(job_id);
  request.set_priority(priority);
  v1::Job job;
  RETURN_IF_ERROR(Call(true, true, [&](Stubs& s, grpc::ClientContext* c) {
    return s.jobs->SetJobPriority(c, request, &job);
  }));
  return job;
}

absl::StatusOr<v1::Job> Client::RequeueJob(const std::string& job_id) {
  v1::RequeueJobRequest request;
  request.set_job_id(job_id);
  v1::Job job;
  RETURN_IF_ERROR(Call(true, false, [&](Stubs& s, grpc::ClientContext* c) {
    return s.jobs->RequeueJob(c, request, &job);
  }));
  return job;
}

absl::StatusOr<v1::ListWorkersResponse> Client::Workers() {
  v1::ListWorkersResponse response;
  RETURN_IF_ERROR(Call(true, true, [&](Stubs& s, grpc::ClientContext* c) {
    return s.cluster->ListWorkers(c, v1::ListWorkersRequest(), &response);
  }));
  return response;
}

absl::StatusOr<std::vector<v1::Worker>> Client::ListWorkers() {
  ASSIGN_OR_RETURN(v1::ListWorkersResponse response, Workers());
  return std::vector<v1::Worker>(response.workers().begin(), response.workers().end());
}

absl::StatusOr<v1::ListQueuesResponse> Client::ListQueues() {
  v1::ListQueuesResponse response;
  RETURN_IF_ERROR(Call(true, true, [&](Stubs& s, grpc::ClientContext* c) {
    return s.cluster->ListQueues(c, v1::ListQueuesRequest(), &response);
  }));
  return response;
}

absl::StatusOr<v1::ConsoleLogin> Client::CreateConsoleLogin() {
  v1::ConsoleLogin response;
  RETURN_IF_ERROR(Call(true, true, [&](Stubs& s, grpc::ClientContext* c) {
    return s.cluster->CreateConsoleLogin(c, v1::CreateConsoleLoginRequest(), &response);
  }));
  return response;
}

absl::StatusOr<v1::StacksReport> Client::DumpStacks(const std::string& job_id) {
  v1::DumpStacksRequest request;
  request.set_job_id(job_id);
  v1::StacksReport response;
  RETURN_IF_ERROR(Call(false, true, [&](Stubs& s, grpc::ClientContext* c) {
    c->set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_ + absl::Seconds(20)));
    return s.jobs->DumpStacks(c, request, &response);
  }));
  return response;
}

absl::StatusOr<v1::Worker> Client::CordonWorker(const v1::CordonWorkerRequest& request) {
  v1::Worker response;
  RETURN_IF_ERROR(Call(true, false, [&](Stubs& s, grpc::ClientContext* c) {
    return s.cluster->CordonWorker(c, request, &response);
  }));
  return response;
}

absl::StatusOr<v1::Worker> Client::UncordonWorker(const std::string& worker_id) {
  v1::UncordonWorkerRequest request;
  request.set_worker_id(worker_id);
  v1::Worker response;
  RETURN_IF_ERROR(Call(true, false, [&](Stubs& s, grpc::ClientContext* c) {
    return s.cluster->UncordonWorker(c, request, &response);
  }));
  return response;
}

absl::StatusOr<v1::DrainWorkerResponse> Client::DrainWorker(const v1::DrainWorkerRequest& request) {
  v1::DrainWorkerResponse response;
  RETURN_IF_ERROR(Call(true, false, [&](Stubs& s, grpc::ClientContext* c) {
    return s.cluster->DrainWorker(c, request, &response);
  }));
  return response;
}

absl::Status Client::WatchJob(const std::string& job_id,
                              const std::function<bool(const v1::Job&)>& on_event) {
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  bool stopped = false;
  // A broken stream is made again (with several coordinators, at the
  // leader): its first event is the job as it is then.
  absl::Status status = Call(false, true, [&](Stubs& s, grpc::ClientContext* c) {
    auto reader = s.jobs->WatchJob(c, request);
    v1::JobEvent event;
    while (reader->Read(&event)) {
      if (!on_event(event.job())) {
        stopped = true;
        c->TryCancel();
        reader->Finish().ok();
        return grpc::Status::OK;
      }
    }
    return reader->Finish();
  });
  return stopped ? absl::OkStatus() : status;
}

absl::Status Client::StreamLogs(const std::string& job_id, std::optional<int> rank, bool follow,
                                const std::function<void(const v1::LogChunk&)>& on_chunk) {
  v1::StreamLogsRequest request;
  request.set_job_id(job_id);
  request.set_all_ranks(!rank.has_value());
  request.set_rank(rank.value_or(0));
  request.set_follow(follow);
  return StreamLogs(request, on_chunk);
}

absl::Status Client::StreamLogs(const v1::StreamLogsRequest& request,
                                const std::function<void(const v1::LogChunk&)>& on_chunk) {
  bool received = false;
  grpc::Status broken;  // after lines arrived: not made again, lest they repeat
  absl::Status status = Call(false, true, [&](Stubs& s, grpc::ClientContext* c) {
    auto reader = s.jobs->StreamLogs(c, request);
    v1::LogChunk chunk;
    while (reader->Read(&chunk)) {
      received = true;
      on_chunk(chunk);
    }
    grpc::Status finished = reader->Finish();
    if (received && !finished.ok()) {
      broken = finished;
      return grpc::Status::OK;
    }
    return finished;
  });
  if (!broken.ok()) return Explain(broken, address_, tls_);
  return status;
}

}  // namespace ringmaster
