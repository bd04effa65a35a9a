// UploadCode on a coordinator serving on loopback: an upload that stalls is
// ended after the idle timeout, and one caller cannot take every upload
// slot.
#include "coordinator/api/code_upload.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "common/sha256.h"
#include "coordinator/api/coordinator_server.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

class CodeUploadTest : public testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    CoordinatorConfig config;
    config.listen_address = "127.0.0.1:0";
    config.metrics_address = "";
    config.state_dir = std::string(tmp ? tmp : "/tmp") + "/code-upload-test";
    state_dir_ = config.state_dir;
    std::filesystem::remove_all(config.state_dir);
    config.upload_idle_timeout = absl::Seconds(1);
    absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Start(config);
    ASSERT_OK(server) << server.status();
    server_ = *std::move(server);
    stub_ = v1::JobService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  struct Upload {
    std::unique_ptr<grpc::ClientContext> context = std::make_unique<grpc::ClientContext>();
    v1::UploadCodeResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::UploadCodeRequest>> writer;
  };
  // An upload of `bytes` that sends its first 10 and stalls.
  Upload StartStalled(int64_t bytes) {
    Upload u;
    u.context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    u.writer = stub_->UploadCode(u.context.get(), &u.response);
    v1::UploadCodeRequest first;
    first.set_sha256(std::string(64, 'a'));
    first.set_archive_bytes(bytes);
    first.set_data(std::string(10, 'x'));
    EXPECT_TRUE(u.writer->Write(first));
    return u;
  }
  grpc::Status UploadWhole(const std::string& data) {
    grpc::ClientContext context;
    v1::UploadCodeResponse response;
    auto writer = stub_->UploadCode(&context, &response);
    v1::UploadCodeRequest request;
    Sha256 hash;
    hash.Update(data);
    request.set_sha256(hash.HexDigest());
    request.set_archive_bytes(data.size());
    request.set_data(data);
    writer->Write(request);
    writer->WritesDone();
    return writer->Finish();
  }

  // Uploads the store has begun: each writes a file of its own in code/.
  int UploadsInProgress() const {
    int n = 0;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(state_dir_ + "/code", error)) {
      n += entry.path().filename().string().rfind(".upload-", 0) == 0;
    }
    return n;
  }

  std::string state_dir_;
  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

TEST_F(CodeUploadTest, AStalledUploadIsEndedAndOneCallerCannotTakeEverySlot) {
  const absl::Time began = absl::Now();
  std::vector<Upload> stalled;
  for (int i = 0; i < 4; ++i) stalled.push_back(StartStalled(1000));
  // The store has begun an upload once it has read its first piece.
  while (UploadsInProgress() < 4 && absl::Now() - began < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(UploadsInProgress(), 4);
  Upload fifth_upload = StartStalled(1000);
  fifth_upload.writer->WritesDone();
  const grpc::Status fifth = fifth_upload.writer->Finish();
  EXPECT_THAT(fifth, StatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED));
  EXPECT_EQ(fifth.error_message(),
            "you have 4 code uploads in progress; try again when one has ended");

  for (Upload& u : stalled) {
    const grpc::Status status = u.writer->Finish();  // returns once the server ends it
    EXPECT_THAT(status, StatusIs(grpc::StatusCode::DEADLINE_EXCEEDED));
    EXPECT_EQ(status.error_message(), "the upload received nothing for 1s; ended");
  }
  EXPECT_LT(absl::Now() - began, absl::Seconds(10));
  // Each stalled upload's slot is free once the server has dropped it.
  while (UploadsInProgress() > 0 && absl::Now() - began < absl::Seconds(20)) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const grpc::Status whole = UploadWhole("print('hello')\n");
  EXPECT_TRUE(whole.ok()) << whole.error_message() << ": the slots are free again";
}

}  // namespace
}  // namespace ringmaster
