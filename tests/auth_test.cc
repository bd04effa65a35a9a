// Who may call what, on a real cluster with TLS and an admin token: every
// RPC of the coordinator's and the worker agent's services, called with no
// credential, a wrong one and each scope, against the documented matrix
// (docs/security.md); TLS refusals; what reaches a rank; file modes.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "domain/rendezvous_client.h"
#include "proto/rendezvous.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "testing/status_matchers.h"
#include "tests/cluster_fixture.h"
#include "tests/health.grpc.pb.h"

namespace ringmaster {
namespace {

constexpr char kAdminToken[] = "s3cret-admin-token";

// How a call came out: A allowed (it reached the service, whatever it
// answered), U UNAUTHENTICATED, P PERMISSION_DENIED, anything else X.
char Verdict(grpc::StatusCode code) {
  if (code == grpc::StatusCode::UNAUTHENTICATED) return 'U';
  if (code == grpc::StatusCode::PERMISSION_DENIED) return 'P';
  if (code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return 'X';
  }
  return 'A';
}

// One caller: a channel (TLS, with a client certificate or without) and
// the bearer token it adds to each call.
struct Caller {
  std::string name;
  Tls tls;
  std::string token;
};

std::map<std::string, std::string> ProcessEnvironment(int64_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/environ"));
  std::string raw((std::istreambuf_iterator<char>(in)), {});
  std::map<std::string, std::string> env;
  for (absl::string_view entry : absl::StrSplit(raw, '\0', absl::SkipEmpty())) {
    const size_t eq = entry.find('=');
    env[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
  }
  return env;
}

class AuthTest : public ClusterTest {
 protected:
  void SetUp() override {
    extra_env_["RINGMASTER_TOKEN"] = kAdminToken;
    ClusterTest::SetUp();
  }

  std::unique_ptr<grpc::ClientContext> Context(const Caller& caller) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    AddBearerToken(context.get(), caller.token);
    return context;
  }

  // Registers as `worker_id` on a fresh stream; how the coordinator
  // answered the registration (ALREADY_EXISTS for a worker that is up).
  grpc::StatusCode Connect(const Caller& caller, const std::string& worker_id) {
    auto stub = v1::WorkerService::NewStub(CoordinatorChannel(address_, caller.tls));
    auto context = Context(caller);
    auto stream = stub->Connect(context.get());
    v1::WorkerMessage hello;
    hello.mutable_register_()->set_worker_id(worker_id);
    hello.mutable_register_()->set_address("127.0.0.1:1");
    hello.mutable_register_()->set_slots(1);
    hello.mutable_register_()->set_incarnation("matrix");
    stream->Write(hello);
    stream->WritesDone();
    v1::CoordinatorMessage reply;
    while (stream->Read(&reply)) {
    }
    return stream->Finish().error_code();
  }

  // Every call of the matrix, in the order of its columns.
  std::string Row(const Caller& caller, const std::string& job_a, const std::string& job_b,
                  int worker_a) {
    std::string row;
    auto channel = CoordinatorChannel(address_, caller.tls);
    auto jobs = v1::JobService::NewStub(channel);
    auto cluster = v1::ClusterService::NewStub(channel);
    auto store = v1::RendezvousService::NewStub(channel);
    auto agent = v1::WorkerAgentService::NewStub(MakeChannel(
        WorkerRecords()[worker_a].address, caller.tls, absl::StrCat("local-", worker_a)));
    {
      v1::SubmitJobRequest request;  // ranks: 0 is refused once admitted
      request.mutable_spec()->set_name("matrix");
      v1::SubmitJobResponse response;
      row += Verdict(jobs->SubmitJob(Context(caller).get(), request, &response).error_code());
    }
    v1::Job job;
    v1::GetJobRequest get;
    get.set_job_id(job_a);
    row += Verdict(jobs->GetJob(Context(caller).get(), get, &job).error_code());
    v1::ListJobsResponse list;
    row += Verdict(jobs->ListJobs(Context(caller).get(), {}, &list).error_code());
    v1::CancelJobRequest cancel;
    cancel.set_job_id("no-such-1");
    row += Verdict(jobs->CancelJob(Context(caller).get(), cancel, &job).error_code());
    {
      v1::WatchJobRequest watch;
      watch.set_job_id("no-such-1");
      auto context = Context(caller);
      auto reader = jobs->WatchJob(context.get(), watch);
      v1::JobEvent event;
      while (reader->Read(&event)) {
      }
      row += Verdict(reader->Finish().error_code());
    }
    {
      v1::StreamLogsRequest logs;
      logs.set_job_id("no-such-1");
      auto context = Context(caller);
      auto reader = jobs->StreamLogs(context.get(), logs);
      v1::LogChunk chunk;
      while (reader->Read(&chunk)) {
      }
      row += Verdict(reader->Finish().error_code());
    }
    {
      v1::StreamLogsRequest logs;  // of job A, which the admin owns
      logs.set_job_id(job_a);
      logs.set_tail_lines(1);
      auto context = Context(caller);
      auto reader = jobs->StreamLogs(context.get(), logs);
      v1::LogChunk chunk;
      while (reader->Read(&chunk)) {
      }
      row += Verdict(reader->Finish().error_code());
    }
    v1::ListWorkersResponse workers;
    row += Verdict(cluster->ListWorkers(Context(caller).get(), {}, &workers).error_code());
    v1::ListQueuesResponse queues;
    row += Verdict(cluster->ListQueues(Context(caller).get(), {}, &queues).error_code());
    {
      v1::StatCodeResponse response;
      row += Verdict(jobs->StatCode(Context(caller).get(), {}, &response).error_code());
    }
    {
      auto context = Context(caller);
      v1::UploadCodeResponse response;
      auto writer = jobs->UploadCode(context.get(), &response);
      writer->WritesDone();  // nothing: refused as empty once admitted
      row += Verdict(writer->Finish().error_code());
    }
    row += " ";
    row += Verdict(Connect(caller, "local-0"));
    row += Verdict(Connect(caller, "local-1"));
    {
      v1::ReadCodeRequest read;  // no such archive: NOT_FOUND once admitted
      read.set_sha256(std::string(64, '0'));
      v1::ReadCodeResponse response;
      row += Verdict(v1::WorkerService::NewStub(channel)
                         ->ReadCode(Context(caller).get(), read, &response)
                         .error_code());
    }
    row += " " + RendezvousCalls(*store, caller, job_a, job_b) + " ";
    {
      v1::ReadLogRequest read;
      read.set_job_id(job_a);
      v1::ReadLogResponse response;
      row += Verdict(agent->ReadLog(Context(caller).get(), read, &response).error_code());
    }
    {
      v1::RankProgress report;
      report.mutable_rank()->set_job_id(job_a);
      report.mutable_progress()->set_step(1);
      v1::ReportProgressResponse response;
      row += Verdict(agent->ReportProgress(Context(caller).get(), report, &response).error_code());
    }
    row += " ";
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::health::v1::HealthCheckResponse serving;
    row += Verdict(health->Check(Context(caller).get(), {}, &serving).error_code());
    return row;
  }

  std::string RendezvousCalls(v1::RendezvousService::Stub& store, const Caller& caller,
                              const std::string& job_a, const std::string& job_b) {
    std::string out;
    v1::SetRequest set;
    set.mutable_scope()->set_job_id(job_a);
    set.set_key("matrix");
    set.set_value("v");
    v1::SetResponse set_response;
    out += Verdict(store.Set(Context(caller).get(), set, &set_response).error_code());
    v1::GetRequest get;
    get.mutable_scope()->set_job_id(job_a);
    get.set_key("matrix");
    v1::GetResponse value;
    out += Verdict(store.Get(Context(caller).get(), get, &value).error_code());
    v1::WaitRequest wait;
    wait.mutable_scope()->set_job_id(job_a);
    wait.add_keys("matrix");
    wait.set_timeout_ms(100);
    v1::WaitResponse waited;
    out += Verdict(store.Wait(Context(caller).get(), wait, &waited).error_code());
    v1::AddRequest add;
    add.mutable_scope()->set_job_id(job_a);
    add.set_key("counter");
    add.set_delta(1);
    v1::AddResponse sum;
    out += Verdict(store.Add(Context(caller).get(), add, &sum).error_code());
    get.mutable_scope()->set_job_id(job_b);
    get.set_key("secret");
    out += Verdict(store.Get(Context(caller).get(), get, &value).error_code());
    return out;
  }

  Tls Certificate(const std::string& name) {
    absl::StatusOr<TlsFiles> files = LoadTls(state_dir_ + "/tls", name);
    EXPECT_OK(files) << files.status();
    return files.ok() ? Tls(*files) : Tls();
  }
};

// The documented matrix, exactly. Columns: SubmitJob GetJob ListJobs
// CancelJob WatchJob StreamLogs, StreamLogs of job A (the admin's),
// ListWorkers ListQueues StatCode UploadCode | Connect as local-0, as
// local-1 | rendezvous Set Get Wait Add on job A's scope, Get on job B's |
// agent ReadLog, ReportProgress for job A | Health.
TEST_F(AuthTest, EveryRpcAllowsExactlyTheDocumentedCredentials) {
  const std::string job_a = Submit("name: job-a\nranks: 1\ncommand: [sleep, '300']\n");
  const std::string job_b = Submit("name: job-b\nranks: 1\ncommand: [sleep, '300']\n");
  v1::Job a = WaitJob(job_a, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  WaitJob(job_b, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  const int worker_a = a.ranks(0).worker_id() == "local-0" ? 0 : 1;
  const std::map<std::string, std::string> rank_env = ProcessEnvironment(a.ranks(0).pid());
  ASSERT_EQ(rank_env.count("RINGMASTER_JOB_TOKEN"), 1u) << "job A's rank has no job credential";
  const std::string token_a = rank_env.at("RINGMASTER_JOB_TOKEN");
  absl::StatusOr<std::string> key = LoadOrCreateKey(state_dir_ + "/coordinator/credential.key");
  ASSERT_OK(key) << key.status();
  const CredentialSigner signer(*key);
  ASSERT_EQ(token_a, signer.Job(job_a, 0));
  testing::CommandResult user_cert =
      Cli({"certs", "init", "--dir", state_dir_ + "/tls", "--user", "alice"});
  ASSERT_EQ(user_cert.exit_code, 0) << user_cert.err;
  {
    // A value in job B's scope that job A must not read.
    v1::SetRequest set;
    set.mutable_scope()->set_job_id(job_b);
    set.set_key("secret");
    set.set_value("b's");
    v1::SetResponse response;
    grpc::ClientContext context;
    AddBearerToken(&context, signer.Job(job_b, 0));
    ASSERT_TRUE(v1::RendezvousService::NewStub(CoordinatorChannel(address_, CaOnly()))
                    ->Set(&context, set, &response)
                    .ok());
  }
  const std::vector<std::pair<Caller, std::string>> matrix = {
      {{"no credential", CaOnly(), ""}, "UUUUUUUUUUU UUU UUUUU UU A"},
      {{"a wrong token", CaOnly(), "guess"}, "UUUUUUUUUUU UUU UUUUU UU A"},
      {{"a forged job token", CaOnly(), CredentialSigner("other key").Job(job_a, 0)},
       "UUUUUUUUUUU UUU UUUUU UU A"},
      {{"admin token", CaOnly(), kAdminToken}, "AAAAAAAAAAA AAA AAAAA UU A"},
      {{"admin certificate", Certificate("admin"), ""}, "AAAAAAAAAAA AAA AAAAA UU A"},
      {{"worker token of local-0", CaOnly(), signer.Worker("local-0")},
       "PPPPPPPPPPP APA PPPPP UU A"},
      {{"worker certificate of local-0", Certificate("worker-local-0"), ""},
       "PPPPPPPPPPP APA PPPPP UU A"},
      {{"job A's token", CaOnly(), token_a}, "PPPPPPPPPPP PPP AAAAP PA A"},
      {{"job B's token", CaOnly(), signer.Job(job_b, 0)}, "PPPPPPPPPPP PPP PPPPA UU A"},
      {{"job A's token of another attempt", CaOnly(), signer.Job(job_a, 1)},
       "PPPPPPPPPPP PPP PPPPP UU A"},
      {{"the agent credential", CaOnly(), signer.Agent(absl::StrCat("local-", worker_a))},
       "PPPPPPPPPPP PPP PPPPP AP A"},
      {{"user token of alice", CaOnly(), signer.User("alice")}, "AAAAAAPAAAA PPP PPPPP UU A"},
      {{"user certificate of alice", Certificate("user-alice"), ""}, "AAAAAAPAAAA PPP PPPPP UU A"},
      {{"a forged user token", CaOnly(), CredentialSigner("other key").User("alice")},
       "UUUUUUUUUUU UUU UUUUU UU A"},
  };
  for (const auto& [caller, expected] : matrix) {
    EXPECT_EQ(Row(caller, job_a, job_b, worker_a), expected) << caller.name;
  }
}

TEST_F(AuthTest, RefusalsSayWhichCredentialIsNeeded) {
  Client anonymous(address_, "", CaOnly());
  absl::Status none = anonymous.ListJobs().status();
  EXPECT_THAT(none, StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_NE(none.message().find("needs a user credential"), absl::string_view::npos) << none;
  absl::StatusOr<std::string> key = LoadOrCreateKey(state_dir_ + "/coordinator/credential.key");
  ASSERT_OK(key);
  Client worker(address_, CredentialSigner(*key).Worker("local-0"), CaOnly());
  absl::Status denied = worker.CancelJob("any-1").status();
  EXPECT_THAT(denied, StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(denied.message(),
            "a worker credential cannot make this call; it needs a user credential (a token from "
            "`ringmaster-coordinator --issue-user-token NAME`, or a user's client certificate of "
            "`ringmaster certs init --user NAME`) or the admin's");
  RendezvousClient store(address_, "job-x-1", 0, CredentialSigner(*key).Job("job-y-1", 0),
                         CaOnly());
  absl::Status other_job = store.Set("k", "v");
  EXPECT_THAT(other_job, StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(other_job.message(),
            "the job credential of job-y-1 attempt 0 cannot use the rendezvous scope of job-x-1 "
            "attempt 0");
}

// The admin credential never reaches a rank; its job credential does, and
// ranks rendezvous and report progress with it (TLS checked against the CA
// the worker gives them).
TEST_F(AuthTest, RanksGetTheirJobCredentialAndNeverTheAdminOne) {
  const std::string sleeper = Submit("name: env\nranks: 1\ncommand: [sleep, '300']\n");
  v1::Job job = WaitJob(sleeper, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  const std::map<std::string, std::string> env = ProcessEnvironment(job.ranks(0).pid());
  EXPECT_EQ(env.count("RINGMASTER_TOKEN"), 0u);
  EXPECT_EQ(env.count("RINGMASTER_JOB_TOKEN"), 1u);
  EXPECT_EQ(env.count("RINGMASTER_TLS_CA"), 1u);
  for (const auto& [name, value] : env) {
    EXPECT_EQ(value.find(kAdminToken), std::string::npos) << name;
  }

  const std::string spec =
      "name: digits-mlp\nranks: 2\ntrainer:\n  model: {type: mlp, hidden: [16]}\n"
      "  data: {path: 'synthetic:rows=512,features=8,classes=2'}\n  epochs: 2\n"
      "  batch_size: 32\n";
  Cli({"cancel", sleeper});
  testing::CommandResult r = Cli({"submit", WriteSpec("reporting", spec), "--follow"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << "ranks reach the rendezvous store";
  const std::string id = r.out.substr(0, r.out.find('\n'));
  auto trained = client_->GetJob(id);
  ASSERT_OK(trained) << trained.status();
  EXPECT_GT(trained->progress().step(), 0) << "progress reports were refused";
  EXPECT_EQ(trained->progress().step(), trained->progress().total_steps());
  testing::CommandResult logs = Cli({"logs", id});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("final: test accuracy"), std::string::npos) << logs.out << logs.err;
}

TEST_F(AuthTest, TheCliReadsTheTokenFromAnOwnerOnlyFileNeverFromItsArguments) {
  // Only the CA: the token is the CLI's one credential here.
  const std::string ca_only = state_dir_ + "/ca-only";
  ASSERT_EQ(mkdir(ca_only.c_str(), 0700), 0);
  std::ofstream(ca_only + "/ca.crt") << CaOnly()->ca_pem;
  const std::string file = state_dir_ + "/token";
  std::ofstream(file) << kAdminToken << "\n";
  chmod(file.c_str(), 0600);
  const std::map<std::string, std::string> env = {{"RINGMASTER_COORDINATOR", address_},
                                                  {"RINGMASTER_TOKEN", ""},
                                                  {"RINGMASTER_TLS_DIR", ca_only}};
  const std::string cli = testing::Runfile("client/ringmaster");
  testing::CommandResult ok = testing::RunCommand({cli, "--token-file", file, "workers"}, env);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  testing::CommandResult none = testing::RunCommand({cli, "workers"}, env);
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("no credential given; this call needs a user credential"),
            std::string::npos)
      << none.err;
  chmod(file.c_str(), 0644);
  testing::CommandResult open = testing::RunCommand({cli, "--token-file", file, "workers"}, env);
  EXPECT_EQ(open.exit_code, 2);
  EXPECT_NE(open.err.find("is open to group or others (mode 0644)"), std::string::npos) << open.err;
  testing::CommandResult argv = testing::RunCommand({cli, "--token", kAdminToken, "workers"}, env);
  EXPECT_EQ(argv.exit_code, 2) << "a token on the command line shows in ps";
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Job specs (with their env values), keys and rank output are the owner's:
// state and TLS dirs 0700, the database and keys 0600, rank logs 0640 in
// 0750 directories.
TEST_F(AuthTest, StateKeysAndLogsAreNotWorldReadable) {
  testing::CommandResult r = Cli(
      {"submit", WriteSpec("quiet", "name: quiet\nranks: 1\ncommand: [echo, hi]\n"), "--follow"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ModeOf(state_dir_), 0700u);
  EXPECT_EQ(ModeOf(state_dir_ + "/coordinator"), 0700u);
  EXPECT_EQ(ModeOf(state_dir_ + "/coordinator/coordinator.db"), 0600u);
  EXPECT_EQ(ModeOf(state_dir_ + "/coordinator/credential.key"), 0600u);
  EXPECT_EQ(ModeOf(state_dir_ + "/tls"), 0700u);
  for (const char* key : {"ca", "coordinator", "admin", "worker-local-0", "worker-local-1"}) {
    EXPECT_EQ(ModeOf(absl::StrCat(state_dir_, "/tls/", key, ".key")), 0600u) << key;
  }
  std::string log;
  for (const char* worker : {"/worker-0", "/worker-1"}) {
    EXPECT_EQ(ModeOf(state_dir_ + worker), 0700u) << worker;
    EXPECT_EQ(ModeOf(state_dir_ + worker + "/logs"), 0750u) << worker;
    if (access((state_dir_ + worker + "/logs/quiet-1/attempt-0.rank-0.log").c_str(), F_OK) == 0) {
      log = state_dir_ + worker + "/logs/quiet-1/attempt-0.rank-0.log";
    }
  }
  ASSERT_FALSE(log.empty()) << "no rank log found";
  EXPECT_EQ(ModeOf(log), 0640u);
  EXPECT_EQ(ModeOf(log.substr(0, log.rfind('/'))), 0750u);
}

// A client that speaks plaintext to this TLS cluster, one that trusts
// another CA, and one whose certificate another CA signed are all refused.
TEST_F(AuthTest, PlaintextAndOtherCasAreRefused) {
  absl::Status plaintext = Client(address_, kAdminToken).ListJobs().status();
  EXPECT_THAT(plaintext, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_NE(plaintext.message().find("requires TLS: give --tls-dir"), absl::string_view::npos)
      << plaintext;

  const std::string other = testing::MakeTempDir("other-ca");
  testing::CommandResult init =
      testing::RunCommand({testing::Runfile("client/ringmaster"), "certs", "init", "--dir", other});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  absl::StatusOr<TlsFiles> other_admin = LoadTls(other, "admin");
  ASSERT_OK(other_admin) << other_admin.status();
  absl::Status wrong_ca = Client(address_, "", *other_admin).ListJobs().status();
  EXPECT_THAT(wrong_ca, StatusIs(absl::StatusCode::kUnavailable)) << wrong_ca;
  EXPECT_NE(wrong_ca.message().find("TLS"), absl::string_view::npos) << wrong_ca;
  TlsFiles foreign_certificate = *other_admin;
  foreign_certificate.ca_pem = CaOnly()->ca_pem;  // trusts the server, shows another CA's cert
  absl::Status refused = Client(address_, "", foreign_certificate).ListJobs().status();
  EXPECT_NE(refused.code(), absl::StatusCode::kOk) << "a certificate of another CA";
}

}  // namespace
}  // namespace ringmaster
