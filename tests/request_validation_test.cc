// A request that does not parse is refused as INVALID_ARGUMENT naming its
// message. Job ids from requests are checked before anything is built from them:
// every service that takes one refuses a malformed id as INVALID_ARGUMENT,
// and the worker's log service never reads outside its logs nor shows its
// paths.
#include <condition_variable>
#include <mutex>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "domain/rendezvous_client.h"
#include "proto/worker.grpc.pb.h"
#include "testing/status_matchers.h"
#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

const std::vector<std::string>& BadIds() {
  static const auto* ids = new std::vector<std::string>{
      "../../../secret", "..%2F..%2Fsecret",  "/etc/passwd", std::string("ok\0/../x", 8), "",
      "UPPER-1",         std::string(64, 'a')};
  return *ids;
}

class RequestValidationTest : public ClusterTest {
 protected:
  grpc::StatusCode ReadLog(v1::WorkerAgentService::Stub& worker, const std::string& id, int rank,
                           std::string* message = nullptr) {
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
    EXPECT_THAT(client_->GetJob(id).status(), StatusIs(absl::StatusCode::kInvalidArgument)) << id;
    EXPECT_THAT(client_->CancelJob(id).status(), StatusIs(absl::StatusCode::kInvalidArgument))
        << id;
    EXPECT_THAT(client_->WatchJob(id, [](const v1::Job&) { return false; }),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << id;
    EXPECT_THAT(client_->StreamLogs(id, std::nullopt, false, [](const v1::LogChunk&) {}),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << id;
    RendezvousClient store(address_, id, 0, "", CaOnly());
    EXPECT_THAT(store.Set("k", "v"), StatusIs(absl::StatusCode::kInvalidArgument)) << id;
  }
  EXPECT_THAT(client_->GetJob("no-such-job-1").status(), StatusIs(absl::StatusCode::kNotFound))
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
  EXPECT_THAT(worker->ReportProgress(&context, report, &response),
              StatusIs(grpc::StatusCode::UNAUTHENTICATED));
}

// Bytes that are no protobuf message: field 1 as a varint that never ends.
grpc::ByteBuffer Garbage() {
  static const char kBytes[] = "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff";
  grpc::Slice slice(kBytes, sizeof(kBytes) - 1);
  return grpc::ByteBuffer(&slice, 1);
}

grpc::Status CallWithGarbage(const std::shared_ptr<grpc::Channel>& channel,
                             const std::string& method, const std::string& token = "") {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  if (!token.empty()) AddBearerToken(&context, token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const grpc::ByteBuffer request = Garbage();
  grpc::ByteBuffer response;
  grpc::Status status;
  std::mutex mu;
  std::condition_variable done;
  bool finished = false;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    finished = true;
    done.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  done.wait(lock, [&] { return finished; });
  return status;
}

// A NUL in an env value (YAML's "\0") would end the variable where the
// rank reads it: submit refuses it, naming the variable.
TEST_F(RequestValidationTest, ANulInAnEnvValueIsRefused) {
  const testing::CommandResult r =
      Cli({"submit", WriteSpec("nul",
                               "name: nul\nranks: 1\nenv: {SECRET: \"abc\\0def\"}\n"
                               "command: [sh, -c, 'echo ${#SECRET}']\n")});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("env.SECRET: holds a NUL byte at offset 3"), std::string::npos) << r.err;
}

TEST_F(RequestValidationTest, ARequestThatDoesNotParseIsRefusedNamingItsMessage) {
  auto coordinator = CoordinatorChannel(address_, tls_);
  for (const auto& [method, message] : std::vector<std::pair<std::string, std::string>>{
           {"/ringmaster.v1.JobService/SubmitJob", "SubmitJobRequest"},
           {"/ringmaster.v1.JobService/GetJob", "GetJobRequest"},
           {"/ringmaster.v1.ClusterService/ListWorkers", "ListWorkersRequest"},
           {"/ringmaster.v1.RendezvousService/Set", "SetRequest"}}) {
    const grpc::Status status = CallWithGarbage(coordinator, method);
    EXPECT_THAT(status, StatusIs(grpc::StatusCode::INVALID_ARGUMENT)) << method;
    EXPECT_EQ(status.error_message(), "cannot parse " + message) << method;
  }
  const grpc::Status unknown =
      CallWithGarbage(coordinator, "/ringmaster.v1.JobService/NoSuchMethod");
  EXPECT_THAT(unknown, StatusIs(grpc::StatusCode::UNIMPLEMENTED)) << "no such method stays so";

  const std::vector<DaemonRecord> workers = WorkerRecords();
  ASSERT_FALSE(workers.empty());
  const grpc::Status agent =
      CallWithGarbage(MakeChannel(workers[0].address, CaOnly(), "local-0"),
                      "/ringmaster.v1.WorkerAgentService/ReadLog", AgentCredential(0));
  EXPECT_THAT(agent, StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(agent.error_message(), "cannot parse ReadLogRequest");
  const grpc::Status elsewhere =
      CallWithGarbage(MakeChannel(workers[0].address, CaOnly(), "local-0"),
                      "/ringmaster.v1.JobService/GetJob", AgentCredential(0));
  EXPECT_THAT(elsewhere, StatusIs(grpc::StatusCode::UNIMPLEMENTED))
      << "a worker serves no JobService: " << elsewhere.error_message();
}

TEST_F(RequestValidationTest, AWorkerStreamThatDoesNotParseIsRefused) {
  absl::StatusOr<TlsFiles> worker = LoadTls(state_dir_ + "/tls", "worker-local-0");
  ASSERT_OK(worker) << worker.status();
  grpc::GenericStub generic(CoordinatorChannel(address_, *worker));
  grpc::ClientContext raw_context;
  raw_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  auto raw = generic.PrepareCall(&raw_context, "/ringmaster.v1.WorkerService/Connect", &cq);
  void* tag = nullptr;
  bool ok = false;
  raw->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  const grpc::ByteBuffer garbage_bytes = Garbage();
  raw->Write(garbage_bytes, reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  raw->WritesDone(reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  grpc::Status garbage;
  raw->Finish(&garbage, reinterpret_cast<void*>(4));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_THAT(garbage, StatusIs(grpc::StatusCode::INVALID_ARGUMENT)) << garbage.error_message();
  EXPECT_EQ(garbage.error_message(),
            "cannot parse WorkerMessage, or the stream ended before the worker registered");
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

}  // namespace
}  // namespace ringmaster
