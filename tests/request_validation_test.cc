// Job ids from requests are checked before anything is built from them:
// every service that takes one refuses a malformed id as INVALID_ARGUMENT,
// and the worker's log service never reads outside its logs nor shows its
// paths.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "proto/worker.grpc.pb.h"
#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

const std::vector<std::string>& BadIds() {
  static const auto* ids = new std::vector<std::string>{
      "../../../secret", "..%2F..%2Fsecret", "/etc/passwd", std::string("ok\0/../x", 8),
      "", "UPPER-1", std::string(64, 'a')};
  return *ids;
}

class RequestValidationTest : public ClusterTest {
 protected:
  grpc::StatusCode ReadLog(v1::WorkerAgentService::Stub& worker, const std::string& id,
                           int rank, std::string* message = nullptr) {
    grpc::ClientContext context;
    AddBearerToken(&context, AgentCredential(0));
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ReadLogRequest request;
    request.set_job_id(id);
    request.set_rank(rank);
    v1::ReadLogResponse response;
    grpc::Status status = worker.ReadLog(&context, request, &response);
    if (message) *message = status.error_message();
    return status.error_code();
  }
};

TEST_F(RequestValidationTest, CoordinatorServicesRefuseMalformedJobIds) {
  for (const std::string& id : BadIds()) {
    EXPECT_EQ(client_->GetJob(id).status().code(), absl::StatusCode::kInvalidArgument) << id;
    EXPECT_EQ(client_->CancelJob(id).status().code(), absl::StatusCode::kInvalidArgument) << id;
    EXPECT_EQ(client_->WatchJob(id, [](const v1::Job&) { return false; }).code(),
              absl::StatusCode::kInvalidArgument)
        << id;
    EXPECT_EQ(client_->StreamLogs(id, std::nullopt, false, [](const v1::LogChunk&) {}).code(),
              absl::StatusCode::kInvalidArgument)
        << id;
    RendezvousClient store(address_, id, 0, "", CaOnly());
    EXPECT_EQ(store.Set("k", "v").code(), absl::StatusCode::kInvalidArgument) << id;
  }
  EXPECT_EQ(client_->GetJob("no-such-job-1").status().code(), absl::StatusCode::kNotFound)
      << "a well-formed id is looked up";
}

TEST_F(RequestValidationTest, WorkerLogServiceRefusesPathsAndShowsNone) {
  auto worker = WorkerAgent(0);
  ASSERT_NE(worker, nullptr);
  for (const std::string& id : BadIds()) {
    EXPECT_EQ(ReadLog(*worker, id, 0), grpc::StatusCode::INVALID_ARGUMENT) << id;
  }
  EXPECT_EQ(ReadLog(*worker, "job-1", -1), grpc::StatusCode::INVALID_ARGUMENT);
  std::string message;
  EXPECT_EQ(ReadLog(*worker, "no-such-job-1", 0, &message), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(message, "no log of job no-such-job-1 attempt 0 rank 0");

  grpc::ClientContext context;
  v1::RankProgress report;
  report.mutable_rank()->set_job_id("../../x");
  report.mutable_progress()->set_step(999999);
  v1::ReportProgressResponse response;
  // No rank of a job "../../x" runs here, so no credential could be its.
  EXPECT_EQ(worker->ReportProgress(&context, report, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace ringmaster
