// End to end: a local cluster started by `ringmaster up`, real daemons and
// rank processes on loopback, driven through the CLI and the client library.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include <google/protobuf/descriptor.pb.h>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "common/net.h"
#include "common/subprocess.h"
#include "proto/reflection_v1.grpc.pb.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"
#include "tests/cluster_fixture.h"
#include "tests/health.grpc.pb.h"

namespace ringmaster {
namespace {

using testing::CommandResult;

TEST_F(ClusterTest, TwoRankJobSeesTheWholeEnvironmentContract) {
  const std::string spec = absl::StrCat("name: contract\nranks: 2\ncommand: [",
                                        testing::Runfile("tests/env_check"), "]\n");
  CommandResult r = Cli({"submit", WriteSpec("contract", spec), "--follow"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string id = r.out.substr(0, r.out.find('\n'));
  auto job = client_->GetJob(id);
  ASSERT_OK(job);
  EXPECT_EQ(job->state(), v1::SUCCEEDED);
  ASSERT_EQ(job->ranks_size(), 2);
  EXPECT_NE(job->ranks(0).worker_id(), job->ranks(1).worker_id())
      << "one slot per worker: the ranks must be on different workers";

  CommandResult logs = Cli({"logs", id});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("[rank 0] rank 0 of 2: contract holds"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("[rank 1] rank 1 of 2: contract holds"), std::string::npos) << logs.out;
  CommandResult one = Cli({"logs", id, "--rank", "1"});
  EXPECT_EQ(one.out.find("[rank 0]"), std::string::npos) << one.out;
}

TEST_F(ClusterTest, FailingRankFailsTheJobAndStopsTheOtherRank) {
  const std::string spec =
      "name: failing\nranks: 2\nmax_restarts: 0\n"
      "command: [sh, -c, 'if [ \"$RANK\" = 1 ]; then sleep 0.5; exit 3; fi; exec sleep 300']\n";
  CommandResult r = Cli({"submit", WriteSpec("failing", spec), "--follow"});
  EXPECT_EQ(r.exit_code, 1) << "a failed job's exit code";
  const std::string id = r.out.substr(0, r.out.find('\n'));
  v1::Job job = WaitJob(id, AllRanksEnded);
  EXPECT_EQ(job.state(), v1::FAILED);
  const v1::StateChange& last = *job.history().rbegin();
  EXPECT_EQ(last.reason(), v1::RANK_EXITED);
  EXPECT_EQ(last.message(), "rank 1 exited with code 3");
  EXPECT_EQ(job.ranks(0).state(), v1::RANK_STOPPED);
  EXPECT_FALSE(testing::ProcessGroupAlive(job.ranks(0).pid()));
  CommandResult status = Cli({"status", id});
  EXPECT_NE(status.out.find("rank 1 exited with code 3"), std::string::npos) << status.out;
}

TEST_F(ClusterTest, CancelStopsEveryProcessOfTheJob) {
  const std::string id = Submit(SleeperSpec("sleeper"));
  v1::Job job = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  std::vector<int> groups;
  for (const auto& r : job.ranks()) groups.push_back(r.pid());
  for (int g : groups) ASSERT_TRUE(testing::ProcessGroupAlive(g));

  CommandResult r = Cli({"cancel", id});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  job = WaitJob(id, AllRanksEnded);
  EXPECT_EQ(job.state(), v1::CANCELLED);
  EXPECT_EQ(job.history().rbegin()->reason(), v1::CANCEL_REQUESTED);
  for (const auto& rank : job.ranks()) EXPECT_EQ(rank.state(), v1::RANK_STOPPED);
  for (int g : groups) {
    EXPECT_FALSE(testing::ProcessGroupAlive(g)) << "process group " << g << " survived";
  }
  CommandResult again = Cli({"cancel", id});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already ended"), std::string::npos) << again.err;
}

TEST_F(ClusterTest, KilledCoordinatorRestartsWithTheSameJobsAndHistory) {
  CommandResult done = Cli({"submit",
                            WriteSpec("quick",
                                      "name: quick\nranks: 1\n"
                                      "command: [true]\n"),
                            "--follow"});
  ASSERT_EQ(done.exit_code, 0) << done.err;
  const std::string running = Submit(SleeperSpec("survivor"));
  WaitJob(running, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  auto before = client_->ListJobs();
  ASSERT_OK(before);

  int coordinator = 0;
  for (auto& [role, pid] : Daemons()) {
    if (role == "coordinator") coordinator = pid;
  }
  ASSERT_GT(coordinator, 0);
  std::ifstream cmdline(absl::StrCat("/proc/", coordinator, "/cmdline"));
  std::string raw((std::istreambuf_iterator<char>(cmdline)), {});
  std::vector<std::string> argv = absl::StrSplit(raw, '\0', absl::SkipEmpty());
  ASSERT_EQ(kill(coordinator, SIGKILL), 0);
  ASSERT_TRUE(
      testing::WaitFor([&] { return !testing::ProcessAlive(coordinator); }, absl::Seconds(10)));

  SubprocessSpec restart;
  restart.argv = argv;
  restart.env = CurrentEnvironment();
  restart.output_path = state_dir_ + "/logs/coordinator-restarted.log";
  restart.detach = SubprocessSpec::Detach::kSession;
  auto pid = SpawnProcess(restart);
  ASSERT_OK(pid) << pid.status();
  extra_pids_.push_back(*pid);

  std::vector<v1::Job> after;
  absl::Status last;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto jobs = client_->ListJobs();
        if (jobs.ok()) after = *jobs;
        last = jobs.status();
        return jobs.ok();
      },
      absl::Seconds(30)))
      << last << "\n"
      << testing::Shell("tail -n 20 " + restart.output_path).out;
  ASSERT_EQ(after.size(), before->size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].id(), (*before)[i].id());
    EXPECT_EQ(after[i].state(), (*before)[i].state());
    ASSERT_EQ(after[i].history_size(), (*before)[i].history_size());
    for (int h = 0; h < after[i].history_size(); ++h) {
      EXPECT_EQ(after[i].history(h).SerializeAsString(),
                (*before)[i].history(h).SerializeAsString());
    }
  }
  // The workers come back and the running job carries on under the new
  // coordinator, which can still stop it.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto workers = client_->ListWorkers();
        return workers.ok() && workers->size() == 2 &&
               (*workers)[0].state() == v1::WORKER_STATE_ALIVE &&
               (*workers)[1].state() == v1::WORKER_STATE_ALIVE;
      },
      absl::Seconds(30)));
  EXPECT_EQ(client_->GetJob(running)->state(), v1::RUNNING);
  ASSERT_OK(client_->CancelJob(running));
  v1::Job job = WaitJob(running, AllRanksEnded);
  for (const auto& r : job.ranks()) EXPECT_FALSE(testing::ProcessGroupAlive(r.pid()));
}

TEST_F(ClusterTest, DownLeavesNoProcessBehind) {
  const std::string id = Submit(SleeperSpec("abandoned"));
  v1::Job job = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  auto daemons = Daemons();
  ASSERT_EQ(daemons.size(), 3u);
  CommandResult r = Cli({"down", "--state-dir", state_dir_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (auto& [role, pid] : daemons) {
    EXPECT_FALSE(testing::ProcessAlive(pid)) << role << " " << pid << " survived down";
  }
  for (const auto& rank : job.ranks()) {
    EXPECT_FALSE(testing::ProcessGroupAlive(rank.pid()))
        << "rank " << rank.rank() << " survived down";
  }
  CommandResult twice = Cli({"down", "--state-dir", state_dir_});
  EXPECT_EQ(twice.exit_code, 0) << "down is idempotent";
}

TEST_F(ClusterTest, UpIsIdempotent) {
  CommandResult again = Cli({"up", "--workers", "2", "--slots", "1", "--state-dir", state_dir_});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("already running"), std::string::npos) << again.out;
  EXPECT_EQ(Daemons().size(), 3u);
}

TEST_F(ClusterTest, UpRestartsAClusterWithADeadDaemon) {
  CommandResult done =
      Cli({"submit", WriteSpec("quick", "name: quick\nranks: 1\ncommand: [true]\n"), "--follow"});
  ASSERT_EQ(done.exit_code, 0) << done.err;
  int coordinator = 0;
  for (auto& [role, pid] : Daemons()) {
    if (role == "coordinator") coordinator = pid;
  }
  ASSERT_EQ(kill(coordinator, SIGKILL), 0);
  ASSERT_TRUE(
      testing::WaitFor([&] { return !testing::ProcessAlive(coordinator); }, absl::Seconds(10)));
  const auto before = Daemons();
  std::vector<std::string> up = {"up", "--workers", "2", "--slots", "1", "--state-dir", state_dir_};
  for (const std::string& arg : RankUserArgs()) up.push_back(arg);
  CommandResult again = Cli(up);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("cluster restarted"), std::string::npos) << again.out;
  for (auto& [role, pid] : before) {
    EXPECT_FALSE(testing::ProcessAlive(pid)) << "the old " << role << " was stopped";
  }
  for (auto& [role, pid] : Daemons()) EXPECT_TRUE(testing::ProcessAlive(pid)) << role;
  auto workers = client_->ListWorkers();
  ASSERT_OK(workers) << workers.status();
  auto jobs = client_->ListJobs();
  ASSERT_OK(jobs);
  ASSERT_EQ(jobs->size(), 1u) << "jobs survive in the coordinator's database";
  EXPECT_EQ((*jobs)[0].state(), v1::SUCCEEDED);
}

TEST_F(ClusterTest, MalformedYamlIsOneLineAndExitCodeTwo) {
  CommandResult r = Cli({"submit", WriteSpec("broken", "name: x\nranks: [2\n")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("broken.yaml: line "), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(ClusterTest, InvalidSpecNamesTheFieldAndCreatesNothing) {
  CommandResult r = Cli({"submit", WriteSpec("invalid", "name: x\nranks: 0\ncommand: [true]\n")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ranks: must be in [1, 4096], got 0"), std::string::npos) << r.err;
  auto jobs = client_->ListJobs();
  ASSERT_OK(jobs);
  EXPECT_TRUE(jobs->empty());
  CommandResult unknown = Cli({"status", "nope-1"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("no job \"nope-1\""), std::string::npos) << unknown.err;
}

namespace rv1 = grpc::reflection::v1;

// One request on a reflection stream of `version` ("v1" or "v1alpha",
// whose messages are the same).
rv1::ServerReflectionResponse Reflect(const std::shared_ptr<grpc::Channel>& channel,
                                      const std::string& version,
                                      const rv1::ServerReflectionRequest& request) {
  // RpcMethod keeps the pointer: the name must outlive it.
  const std::string name = "/grpc.reflection." + version + ".ServerReflection/ServerReflectionInfo";
  const grpc::internal::RpcMethod method(name.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING,
                                         channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::unique_ptr<
      grpc::ClientReaderWriter<rv1::ServerReflectionRequest, rv1::ServerReflectionResponse>>
      stream(grpc::internal::ClientReaderWriterFactory<
             rv1::ServerReflectionRequest, rv1::ServerReflectionResponse>::Create(channel.get(),
                                                                                  method,
                                                                                  &context));
  rv1::ServerReflectionResponse response;
  EXPECT_TRUE(stream->Write(request)) << version;
  EXPECT_TRUE(stream->Read(&response)) << version;
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << version << ": " << status.error_message();
  return response;
}

// Health by server and by service name, and reflection in both versions,
// as grpcurl, grpc_health_probe and Kubernetes' gRPC probes ask for them.
TEST_F(ClusterTest, EveryServerServesHealthPerServiceAndReflectionV1AndV1alpha) {
  struct Server {
    std::string address;
    std::string name;  // what its certificate names
    std::vector<std::string> services;
  };
  std::vector<Server> servers = {
      {address_,
       kCoordinatorName,
       {"ringmaster.v1.JobService", "ringmaster.v1.ClusterService", "ringmaster.v1.WorkerService",
        "ringmaster.v1.RendezvousService"}}};
  auto workers = client_->ListWorkers();
  ASSERT_OK(workers);
  for (const auto& w : *workers) {
    servers.push_back({w.address(), w.id(), {"ringmaster.v1.WorkerAgentService"}});
  }
  ASSERT_EQ(servers.size(), 3u);
  for (const auto& [address, name, services] : servers) {
    // Anyone may ask: no credential, only the CA to check the server.
    auto channel = MakeChannel(address, CaOnly(), name);
    auto health = grpc::health::v1::Health::NewStub(channel);
    auto check = [&](const std::string& service, grpc::health::v1::HealthCheckResponse* response) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      grpc::health::v1::HealthCheckRequest request;
      request.set_service(service);
      return health->Check(&context, request, response);
    };
    std::vector<std::string> names = services;
    names.push_back("");  // the server as a whole
    for (const std::string& name : names) {
      grpc::health::v1::HealthCheckResponse response;
      const grpc::Status status = check(name, &response);
      EXPECT_TRUE(status.ok()) << address << " " << name << ": " << status.error_message();
      EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING)
          << address << " " << name;
    }
    grpc::health::v1::HealthCheckResponse unknown;
    EXPECT_THAT(check("no.such.Service", &unknown), StatusIs(grpc::StatusCode::NOT_FOUND));

    for (const std::string version : {"v1", "v1alpha"}) {
      rv1::ServerReflectionRequest list;
      list.set_list_services("");
      const rv1::ServerReflectionResponse services_listed = Reflect(channel, version, list);
      std::set<std::string> listed;
      for (const auto& s : services_listed.list_services_response().service()) {
        listed.insert(s.name());
      }
      for (const std::string& name : services) {
        EXPECT_EQ(listed.count(name), 1u) << address << " " << version << " lists " << name;
      }
      EXPECT_EQ(listed.count("grpc.reflection.v1.ServerReflection"), 1u) << version;
      rv1::ServerReflectionRequest symbol;
      symbol.set_file_containing_symbol(services[0]);
      const rv1::ServerReflectionResponse file = Reflect(channel, version, symbol);
      ASSERT_GT(file.file_descriptor_response().file_descriptor_proto_size(), 0)
          << address << " " << version << ": " << file.error_response().error_message();
      google::protobuf::FileDescriptorProto proto;
      ASSERT_TRUE(proto.ParseFromString(file.file_descriptor_response().file_descriptor_proto(0)));
      EXPECT_EQ(proto.package(), "ringmaster.v1") << version;
      bool has_service = false;
      for (const auto& s : proto.service())
        has_service |= "ringmaster.v1." + s.name() == services[0];
      EXPECT_TRUE(has_service) << proto.name() << " " << version;
      rv1::ServerReflectionRequest missing;
      missing.set_file_containing_symbol("no.such.Symbol");
      EXPECT_EQ(Reflect(channel, version, missing).error_response().error_code(),
                grpc::StatusCode::NOT_FOUND)
          << version;
    }
  }
}

// Every daemon serves /metrics in a form Prometheus' own checker accepts,
// while a trainer job runs (so the trainer's series are there too).
TEST_F(ClusterTest, EveryDaemonsMetricsPassPromtool) {
  const std::string id = Submit(
      "name: metrics\nranks: 2\ntrainer:\n  data: {path: \"synthetic:rows=20000,features=32,"
      "classes=4\"}\n  model: {hidden: [64]}\n  epochs: 100000\n  batch_size: 32\n");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto job = client_->GetJob(id);
        return job.ok() && job->progress().step() > 0;
      },
      absl::Seconds(60)));
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        for (const auto& d : DaemonRecords()) {
          if (d.role == "worker" &&
              testing::HttpGet(d.metrics_address, "/metrics")
                      .find("ringmaster_train_steps_total") != std::string::npos) {
            return true;
          }
        }
        return false;
      },
      absl::Seconds(30)))
      << "no worker relays the trainer's figures";
  for (const auto& d : DaemonRecords()) {
    const std::string text = testing::HttpGet(d.metrics_address, "/metrics");
    ASSERT_FALSE(text.empty()) << d.role << " at " << d.metrics_address;
    const std::string path = absl::StrCat(state_dir_, "/", d.role, "-", d.pid, ".prom");
    std::ofstream(path) << text;
    testing::CommandResult check = testing::Shell("promtool check metrics < " + path);
    EXPECT_EQ(check.exit_code, 0) << d.role << ": " << check.out << check.err;
    if (d.role == "coordinator") {
      EXPECT_NE(text.find("ringmaster_jobs{state=\"RUNNING\"} 1"), std::string::npos) << text;
      EXPECT_NE(text.find("ringmaster_rpc_duration_seconds_bucket{method=\"/ringmaster.v1."),
                std::string::npos)
          << text;
    }
  }
  ASSERT_OK(client_->CancelJob(id));
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// Specs past the limits get one line and exit 2, and nothing is stored.
TEST_F(ClusterTest, OversizedSpecsAreRefusedWithTheLimit) {
  const std::string huge =
      WriteSpec("huge", "name: huge\nranks: 1\ncommand: [true]\nenv: {BLOB: \"" +
                            std::string(10 << 20, 'x') + "\"}\n");
  CommandResult r = Cli({"submit", huge});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bytes; the limit is 1048576"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  v1::JobSpec env;  // within the spec's size, past exec's
  env.set_name("wide");
  env.set_ranks(1);
  env.add_command("true");
  for (int i = 0; i < 4; ++i) (*env.mutable_env())[absl::StrCat("V", i)] = std::string(100000, 'x');
  absl::StatusOr<std::string> id = client_->Submit(env);
  EXPECT_THAT(id.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(id.status().message().find("(coordinator --max-env-bytes)"), absl::string_view::npos)
      << id.status();
  auto jobs = client_->ListJobs();
  ASSERT_OK(jobs);
  EXPECT_TRUE(jobs->empty()) << "nothing stored";
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// `jobs` shows the newest page and says there is more; --all shows every
// job; --state filters. A page token the API did not give is refused.
TEST_F(ClusterTest, JobsArePagedNewestFirst) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    CommandResult r = Cli({"submit",
                           WriteSpec("quick",
                                     "name: quick\nranks: 1\n"
                                     "command: [true]\n"),
                           "--follow"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ids.push_back(r.out.substr(0, r.out.find('\n')));
  }
  CommandResult two = Cli({"jobs", "--limit", "2"});
  EXPECT_EQ(two.exit_code, 0) << two.err;
  EXPECT_LT(two.out.find(ids[2]), two.out.find(ids[1])) << "newest first: " << two.out;
  EXPECT_EQ(two.out.find(ids[0]), std::string::npos) << two.out;
  EXPECT_NE(two.err.find("the newest 2 jobs; --all shows every one"), std::string::npos) << two.err;
  CommandResult all = Cli({"jobs", "--all", "--state", "succeeded"});
  for (const std::string& id : ids) EXPECT_NE(all.out.find(id), std::string::npos) << all.out;
  EXPECT_TRUE(all.err.empty()) << all.err;
  CommandResult none = Cli({"jobs", "--state", "running"});
  for (const std::string& id : ids) EXPECT_EQ(none.out.find(id), std::string::npos) << none.out;
  CommandResult bad = Cli({"jobs", "--state", "sleepy"});
  EXPECT_EQ(bad.exit_code, 2);

  v1::ListJobsRequest forged;
  forged.set_page_token("../x");
  EXPECT_THAT(client_->ListJobsPage(forged).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  v1::ListJobsRequest huge;
  huge.set_page_size(100000);
  EXPECT_THAT(client_->ListJobsPage(huge).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// `delete` forgets an ended job: its history and its logs on the worker;
// an active job must be cancelled first.
TEST_F(ClusterTest, DeleteForgetsAnEndedJobAndItsLogs) {
  CommandResult done = Cli({"submit",
                            WriteSpec("gone",
                                      "name: gone\nranks: 1\n"
                                      "command: [echo, hi]\n"),
                            "--follow"});
  ASSERT_EQ(done.exit_code, 0) << done.err;
  const std::string id = done.out.substr(0, done.out.find('\n'));
  std::string log_dir;
  for (const char* worker : {"/worker-0", "/worker-1"}) {
    const std::string dir = state_dir_ + worker + "/logs/" + id;
    if (access(dir.c_str(), F_OK) == 0) log_dir = dir;
  }
  ASSERT_FALSE(log_dir.empty()) << "no log dir of " << id;

  const std::string running = Submit(SleeperSpec("busy"));
  CommandResult refused = Cli({"delete", running});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("cancel it before deleting it"), std::string::npos) << refused.err;

  CommandResult deleted = Cli({"delete", id});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_THAT(client_->GetJob(id).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(
      testing::WaitFor([&] { return access(log_dir.c_str(), F_OK) != 0; }, absl::Seconds(10)))
      << log_dir << " still there";
}

// Workers with two GPUs each (the fake NVML library of worker/testing): a
// rank sees exactly its GPUs, by UUID; a CPU rank sees none; the built-in
// trainer is refused more than one GPU per rank.
class GpuClusterTest : public ClusterTest {
 protected:
  void SetUp() override {
    extra_env_["RINGMASTER_NVML_LIBRARY"] = testing::Runfile("worker/testing/libfake_nvml.so");
    extra_env_["FAKE_NVML_DEVICES"] =
        "GPU-aaaa:0:0:17179869184:0:0:0;GPU-bbbb:0:0:17179869184:0:0:0";
    ClusterTest::SetUp();
  }

  // Each rank's CUDA_VISIBLE_DEVICES, by rank, once the job has ended.
  std::vector<std::string> VisibleDevices(int ranks, int gpus_per_rank) {
    const std::string spec =
        absl::StrCat("name: gpus\nranks: ", ranks, "\ngpus_per_rank: ", gpus_per_rank,
                     "\ncommand: [sh, -c, 'echo \"gpus=[$CUDA_VISIBLE_DEVICES]\"']\n");
    CommandResult r = Cli({"submit", WriteSpec("gpus", spec), "--follow"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::string id = r.out.substr(0, r.out.find('\n'));
    std::vector<std::string> seen;
    for (int rank = 0; rank < ranks; ++rank) {
      CommandResult logs = Cli({"logs", id, "--rank", absl::StrCat(rank)});
      const size_t at = logs.out.find("gpus=[");
      seen.push_back(at == std::string::npos
                         ? "no line: " + logs.out + logs.err
                         : logs.out.substr(at + 6, logs.out.find(']', at) - at - 6));
    }
    return seen;
  }
};

TEST_F(GpuClusterTest, RanksSeeExactlyTheirGpus) {
  auto workers = client_->ListWorkers();
  ASSERT_OK(workers) << workers.status();
  ASSERT_EQ(workers->size(), 2u);
  EXPECT_EQ((*workers)[0].slots(), 2) << "one slot per GPU";
  EXPECT_EQ((*workers)[0].gpus(1).uuid(), "GPU-bbbb");

  EXPECT_EQ(VisibleDevices(2, 2),
            (std::vector<std::string>{"GPU-aaaa,GPU-bbbb", "GPU-aaaa,GPU-bbbb"}));
  std::vector<std::string> one_each = VisibleDevices(4, 1);
  std::sort(one_each.begin(), one_each.end());
  EXPECT_EQ(one_each, (std::vector<std::string>{"GPU-aaaa", "GPU-aaaa", "GPU-bbbb", "GPU-bbbb"}));
  EXPECT_EQ(VisibleDevices(2, 0), (std::vector<std::string>{"", ""}));

  const std::string trainer =
      "name: wide\nranks: 1\ngpus_per_rank: 2\ntrainer: {data: {path: digits}}\n";
  CommandResult refused = Cli({"submit", WriteSpec("wide", trainer)});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("gpus_per_rank: is 2 but the built-in trainer drives one GPU per "
                             "rank"),
            std::string::npos)
      << refused.err;
}

}  // namespace
}  // namespace ringmaster
