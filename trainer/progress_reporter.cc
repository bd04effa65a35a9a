#include "trainer/progress_reporter.h"

#include <chrono>

#include <grpcpp/grpcpp.h>

namespace ringmaster {

ProgressReporter::ProgressReporter(const std::string& worker_address, v1::RankRef rank)
    : stub_(v1::WorkerAgentService::NewStub(
          grpc::CreateChannel(worker_address, grpc::InsecureChannelCredentials()))),
      rank_(std::move(rank)) {}

void ProgressReporter::Report(const v1::Progress& progress) {
  v1::RankProgress request;
  *request.mutable_rank() = rank_;
  *request.mutable_progress() = progress;
  request.mutable_progress()->set_update_unix_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  v1::ReportProgressResponse response;
  (void)stub_->ReportProgress(&context, request, &response);
}

}  // namespace ringmaster
