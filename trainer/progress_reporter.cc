#include "trainer/progress_reporter.h"

#include <chrono>

#include <grpcpp/grpcpp.h>

#include "common/credentials.h"

namespace ringmaster {
namespace {

ProgressReporter::Send WorkerAgentSender(std::shared_ptr<grpc::Channel> channel,
                                         const std::string& token) {
  std::shared_ptr<v1::WorkerAgentService::Stub> stub =
      v1::WorkerAgentService::NewStub(std::move(channel));
  return [stub, token](const v1::RankProgress& request) {
    // The sender thread may wait: reports that come meanwhile are merged.
    // A short deadline would lose the final report when the worker is slow
    // (it is sent as the rank exits, and the job keeps the step it carries).
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    AddBearerToken(&context, token);
    v1::ReportProgressResponse response;
    (void)stub->ReportProgress(&context, request, &response);
  };
}

}  // namespace

ProgressReporter::ProgressReporter(std::shared_ptr<grpc::Channel> agent, const std::string& token,
                                   v1::RankRef rank, absl::Duration keepalive)
    : ProgressReporter(WorkerAgentSender(std::move(agent), token), std::move(rank), keepalive) {}

ProgressReporter::ProgressReporter(Send send, v1::RankRef rank, absl::Duration keepalive)
    : send_(std::move(send)), rank_(std::move(rank)), keepalive_(keepalive) {
  sender_ = std::thread([this] { Run(); });
}

ProgressReporter::~ProgressReporter() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  sender_.join();
}

void ProgressReporter::Report(const v1::Progress& progress) {
  MutexLock lock(&mu_);
  if (pending_.has_value()) {
    // The durations of the replaced report's steps are kept, not lost.
    v1::Progress merged = progress;
    merged.mutable_step_seconds()->Clear();
    merged.mutable_step_seconds()->MergeFrom(pending_->step_seconds());
    merged.mutable_step_seconds()->MergeFrom(progress.step_seconds());
    pending_ = std::move(merged);
  } else {
    pending_ = progress;
  }
}

void ProgressReporter::Run() {
  std::optional<v1::Progress> last;
  for (;;) {
    v1::RankProgress request;
    {
      MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return pending_.has_value() || stopping_;
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), keepalive_);
      if (pending_.has_value()) {
        last = *std::move(pending_);
        pending_.reset();
        *request.mutable_progress() = *last;
        last->mutable_step_seconds()->Clear();  // a repeat carries no steps
      } else if (stopping_) {
        return;
      } else if (last.has_value()) {
        *request.mutable_progress() = *last;
      } else {
        continue;  // nothing reported yet
      }
    }
    *request.mutable_rank() = rank_;
    request.mutable_progress()->set_update_unix_ms(
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
    send_(request);
  }
}

}  // namespace ringmaster
