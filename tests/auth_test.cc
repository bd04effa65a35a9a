// A cluster whose coordinator requires a token: callers without it or with
// a wrong one are refused as UNAUTHENTICATED; the workers and the ranks
// (rendezvous store) get it and work.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "proto/worker.grpc.pb.h"
#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

class AuthTest : public ClusterTest {
 protected:
  void SetUp() override {
    extra_env_["RINGMASTER_TOKEN"] = "s3cret";
    ClusterTest::SetUp();
    client_ = std::make_unique<Client>(address_, "s3cret");
  }
  testing::CommandResult CliWithToken(const std::string& token, std::vector<std::string> args) {
    args.insert(args.begin(), testing::Runfile("client/ringmaster"));
    return testing::RunCommand(args,
                               {{"RINGMASTER_COORDINATOR", address_}, {"RINGMASTER_TOKEN", token}});
  }
};

TEST_F(AuthTest, CallsWithoutTheTokenAreRefused) {
  testing::CommandResult none = CliWithToken("", {"jobs"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("needs a token"), std::string::npos) << none.err;
  testing::CommandResult wrong = CliWithToken("guess", {"workers"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("wrong token"), std::string::npos) << wrong.err;
  testing::CommandResult logs = CliWithToken("guess", {"logs", "x-1"});
  EXPECT_EQ(logs.exit_code, 1) << "streams are refused too";
  Client anonymous(address_);
  EXPECT_EQ(anonymous.ListJobs().status().code(), absl::StatusCode::kUnauthenticated);
  RendezvousClient store(address_, "x-1", 0);
  EXPECT_EQ(store.Set("k", "v").code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(AuthTest, WorkersAndRanksCarryTheToken) {
  auto workers = client_->ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  EXPECT_EQ(workers->size(), 2u) << "both workers registered with the token";
  const std::string spec = absl::StrCat("name: contract\nranks: 2\ncommand: [",
                                        testing::Runfile("tests/env_check"), "]\n");
  testing::CommandResult r = Cli({"submit", WriteSpec("contract", spec), "--follow"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "ranks reach the rendezvous store with it";
}

TEST_F(AuthTest, TheCliReadsTheTokenFromAnOwnerOnlyFileNeverFromItsArguments) {
  const std::string file = state_dir_ + "/token";
  std::ofstream(file) << "s3cret\n";
  chmod(file.c_str(), 0600);
  testing::CommandResult ok = testing::RunCommand(
      {testing::Runfile("client/ringmaster"), "--token-file", file, "workers"},
      {{"RINGMASTER_COORDINATOR", address_}, {"RINGMASTER_TOKEN", ""}});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  chmod(file.c_str(), 0644);
  testing::CommandResult open = testing::RunCommand(
      {testing::Runfile("client/ringmaster"), "--token-file", file, "workers"},
      {{"RINGMASTER_COORDINATOR", address_}});
  EXPECT_EQ(open.exit_code, 2);
  EXPECT_NE(open.err.find("is open to group or others (mode 0644)"), std::string::npos)
      << open.err;
  testing::CommandResult argv = testing::RunCommand(
      {testing::Runfile("client/ringmaster"), "--token", "s3cret", "workers"},
      {{"RINGMASTER_COORDINATOR", address_}});
  EXPECT_EQ(argv.exit_code, 2) << "a token on the command line shows in ps";
}

// The workers' agent service takes the cluster's token like the
// coordinator; the coordinator's log relay and the trainer's progress
// reports carry it.
TEST_F(AuthTest, TheWorkerAgentRequiresTheTokenAndItsCallersCarryIt) {
  std::string worker_address;
  for (const DaemonRecord& d : DaemonRecords()) {
    if (d.role == "worker") worker_address = d.address;
  }
  auto agent = v1::WorkerAgentService::NewStub(
      grpc::CreateChannel(worker_address, grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext context;
    v1::ReadLogRequest request;
    request.set_job_id("any-1");
    v1::ReadLogResponse response;
    EXPECT_EQ(agent->ReadLog(&context, request, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    v1::RankProgress report;
    report.mutable_rank()->set_job_id("any-1");
    report.mutable_progress()->set_step(999999);
    v1::ReportProgressResponse response;
    EXPECT_EQ(agent->ReportProgress(&context, report, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  const std::string spec =
      "name: digits-mlp\nranks: 2\ntrainer:\n  model: {type: mlp, hidden: [16]}\n"
      "  data: {path: 'synthetic:rows=512,features=8,classes=2'}\n  epochs: 2\n"
      "  batch_size: 32\n";
  testing::CommandResult r = Cli({"submit", WriteSpec("reporting", spec), "--follow"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto job = client_->GetJob("digits-mlp-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_GT(job->progress().step(), 0) << "progress reports were refused";
  EXPECT_EQ(job->progress().step(), job->progress().total_steps());
  testing::CommandResult logs = Cli({"logs", "digits-mlp-1"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("final: test accuracy"), std::string::npos) << logs.out << logs.err;
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Job specs (with their env values) and rank output are the owner's: the
// state dirs 0700, the database 0600, rank logs 0640 in 0750 directories.
TEST_F(AuthTest, StateAndLogsAreNotWorldReadable) {
  testing::CommandResult r = Cli(
      {"submit", WriteSpec("quiet", "name: quiet\nranks: 1\ncommand: [echo, hi]\n"), "--follow"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ModeOf(state_dir_), 0700u);
  EXPECT_EQ(ModeOf(state_dir_ + "/coordinator"), 0700u);
  EXPECT_EQ(ModeOf(state_dir_ + "/coordinator/coordinator.db"), 0600u);
  std::string log;
  for (const char* worker : {"/worker-0", "/worker-1"}) {
    EXPECT_EQ(ModeOf(state_dir_ + worker), 0700u) << worker;
    EXPECT_EQ(ModeOf(state_dir_ + worker + "/logs"), 0750u) << worker;
    if (access((state_dir_ + worker + "/logs/quiet-1/rank-0.log").c_str(), F_OK) == 0) {
      log = state_dir_ + worker + "/logs/quiet-1/rank-0.log";
    }
  }
  ASSERT_FALSE(log.empty()) << "no rank log found";
  EXPECT_EQ(ModeOf(log), 0640u);
  EXPECT_EQ(ModeOf(log.substr(0, log.rfind('/'))), 0750u);
}

// Daemons listen on loopback unless told otherwise; beyond it, without TLS,
// only with --insecure, which they then warn about.
TEST(BindTest, BeyondLoopbackWithoutTlsNeedsInsecure) {
  const std::string coordinator = testing::Runfile("coordinator/ringmaster-coordinator");
  const std::string state = testing::MakeTempDir("bind");
  testing::CommandResult refused = testing::RunCommand(
      {coordinator, "--bind", "0.0.0.0", "--port", "0", "--metrics-port", "0", "--state-dir",
       state});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE((refused.out + refused.err).find("--bind 0.0.0.0 would serve this coordinator's API "
                                             "beyond this machine without TLS; pass --insecure"),
            std::string::npos)
      << refused.out << refused.err;
  testing::CommandResult refused_worker = testing::RunCommand(
      {testing::Runfile("worker/ringmaster-worker"), "--bind", "0.0.0.0", "--port", "0",
       "--metrics-port", "0", "--state-dir", state + "/w"});
  EXPECT_EQ(refused_worker.exit_code, 1) << refused_worker.err;

  // Started with --insecure it serves, and says it is exposed: polled for
  // ten seconds at most, then stopped.
  testing::CommandResult insecure = testing::Shell(absl::StrCat(
      coordinator, " --bind 0.0.0.0 --insecure --port 0 --metrics-port 0 --state-dir ", state,
      " > ", state, "/log 2>&1 & pid=$!; for i in $(seq 100); do grep -q 'served without TLS' ",
      state, "/log && break; sleep 0.1; done; kill $pid; wait $pid; cat ", state, "/log"));
  EXPECT_NE(insecure.out.find("--insecure: the coordinator API on 0.0.0.0 is served without TLS"),
            std::string::npos)
      << insecure.out;
}

}  // namespace
}  // namespace ringmaster
