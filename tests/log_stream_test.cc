// StreamLogs end to end on a local cluster started by `ringmaster up`: a
// line without an end relayed in pieces, and a broken stream resumed from
// each rank's position.
#include <functional>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "common/tls.h"
#include "proto/job.grpc.pb.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"
#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

using testing::CommandResult;

// 300,000 bytes without a newline (as a progress bar redrawn with \r
// writes) come through `logs` whole, in lines of at most 64 KiB.
TEST_F(ClusterTest, ALineWithoutEndIsRelayedInPieces) {
  const std::string id = Submit(
      "name: noline\nranks: 1\ncommand: [sh, -c, \"head -c 300000 /dev/zero | tr '\\\\0' x\"]\n");
  WaitJob(id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  CommandResult logs = Cli({"logs", id});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  size_t xs = 0;
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(logs.out, '\n', absl::SkipEmpty())) {
    ASSERT_TRUE(absl::ConsumePrefix(&line, "[rank 0] ")) << line.substr(0, 40);
    EXPECT_LE(line.size(), 65536u);
    EXPECT_EQ(line.find_first_not_of('x'), absl::string_view::npos);
    xs += line.size();
    ++lines;
  }
  EXPECT_EQ(xs, 300000u) << "every byte relayed once";
  EXPECT_EQ(lines, 5) << "four full pieces and the rest";
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// Reads a StreamLogs stream until `stop` says so (then cancels it) or it
// ends; keeps each rank's data up to the last chunk that says where its
// log goes on, and those positions.
struct ResumableRead {
  std::map<int, std::string> data;  // by rank, up to its last `next`
  std::map<int, v1::LogPosition> next;
  grpc::Status status;
};
ResumableRead ReadLogs(v1::JobService::Stub* stub, const v1::StreamLogsRequest& request,
                       const std::function<bool(const ResumableRead&)>& stop) {
  ResumableRead read;
  std::map<int, std::string> pending;  // after the last `next`
  grpc::ClientContext context;
  auto reader = stub->StreamLogs(&context, request);
  for (v1::LogChunk chunk; reader->Read(&chunk);) {
    pending[chunk.rank()] += chunk.data();
    if (chunk.has_next()) {
      read.data[chunk.rank()] += pending[chunk.rank()];
      pending[chunk.rank()].clear();
      read.next[chunk.rank()] = chunk.next();
    }
    if (stop(read)) {
      context.TryCancel();
      break;
    }
  }
  read.status = reader->Finish();
  return read;
}

// A stream broken part way and resumed from each rank's last position
// gives every line of every rank once.
TEST_F(ClusterTest, ALogStreamResumedFromItsPositionsRepeatsAndLosesNothing) {
  const std::string id = Submit(
      "name: chatty\nranks: 2\n"
      "command: [sh, -c, 'seq -f \"rank $RANK line %06g\" 1 60000']\n");
  WaitJob(id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  auto stub = v1::JobService::NewStub(CoordinatorChannel(address_, tls_));
  v1::StreamLogsRequest request;
  request.set_job_id(id);
  request.set_all_ranks(true);
  ResumableRead first = ReadLogs(stub.get(), request, [](const ResumableRead& r) {
    return r.next.size() == 2 && r.data.at(0).size() > 100000 && r.data.at(1).size() > 100000;
  });
  ASSERT_THAT(first.status, StatusIs(grpc::StatusCode::CANCELLED)) << "broken part way";
  for (const auto& [rank, position] : first.next) *request.add_resume() = position;
  ResumableRead rest = ReadLogs(stub.get(), request, [](const ResumableRead&) { return false; });
  ASSERT_TRUE(rest.status.ok()) << rest.status.error_message();
  for (int rank : {0, 1}) {
    std::string expected;
    for (int line = 1; line <= 60000; ++line) {
      absl::StrAppend(&expected, absl::StrFormat("rank %d line %06d\n", rank, line));
    }
    const std::string whole = first.data[rank] + rest.data[rank];
    EXPECT_EQ(whole.size(), expected.size()) << "rank " << rank;
    EXPECT_TRUE(whole == expected) << "rank " << rank << " differs";
    EXPECT_LT(first.data[rank].size(), expected.size()) << "rank " << rank << " was broken off";
  }

  // Positions of two attempts, or of a rank the job never had, are refused.
  v1::StreamLogsRequest bad = request;
  bad.mutable_resume(1)->set_attempt(3);
  EXPECT_THAT(ReadLogs(stub.get(), bad, [](const ResumableRead&) { return false; }).status,
              StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
  bad = request;
  bad.mutable_resume(1)->set_rank(7);
  EXPECT_THAT(ReadLogs(stub.get(), bad, [](const ResumableRead&) { return false; }).status,
              StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
}

}  // namespace
}  // namespace ringmaster
