// A real Prometheus (Debian's) scrapes a local cluster whose workers load a
// fake NVML, with an ordinary scrape config (its own `job` label, no
// honor_labels), while a trainer job and a restarting job run; every PromQL
// query of the Grafana dashboard, with its variables as Grafana fills them,
// must then return data, and per-job queries group by our job ids; a
// PyTorch job that reports through python/ringmaster fills its panels too.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"
#include "testing/prometheus_server.h"
#include "testing/status_matchers.h"
#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using testing::AlertRule;
using testing::AlertRules;
using testing::Label;

// A dashboard query with its variables ($job_id, $worker) replaced by the
// regular expressions Grafana puts there.
std::string Interpolate(std::string query, const std::string& job_id, const std::string& worker) {
  absl::StrReplaceAll({{"$job_id", job_id}, {"$worker", worker}, {"$queue", ".*"}}, &query);
  return query;
}

// Every "expr" under the dashboard's panels.
std::vector<std::string> DashboardQueries() {
  std::ifstream in(testing::Runfile("deploy/grafana/ringmaster.json"));
  std::stringstream text;
  text << in.rdbuf();
  Struct dashboard;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &dashboard).ok());
  std::vector<std::string> queries;
  for (const Value& panel : dashboard.fields().at("panels").list_value().values()) {
    const auto& fields = panel.struct_value().fields();
    if (fields.count("targets") == 0) continue;  // a row
    for (const Value& target : fields.at("targets").list_value().values()) {
      queries.push_back(target.struct_value().fields().at("expr").string_value());
    }
  }
  return queries;
}

class PrometheusTest : public ClusterTest {
 protected:
  void SetUp() override {
    extra_env_["RINGMASTER_NVML_LIBRARY"] = testing::Runfile("worker/testing/libfake_nvml.so");
    // Its ECC holds two uncorrectable errors, for the GPU alert.
    extra_env_["FAKE_NVML_DEVICES"] = "GPU-aaaa:42:2147483648:17179869184:150000:55:1500:2";
    // Where the test injects an XID, for the Health row.
    nvml_control_ = testing::MakeTempDir("nvml");
    extra_env_["FAKE_NVML_CONTROL"] = nvml_control_ + "/control-{pid}";
    // A queue with a quota, for the Queues row.
    queues_ = testing::MakeTempDir("queues") + "/queues.yaml";
    std::ofstream(queues_) << "queues:\n  - {name: default, quota: {slots: 2}}\n";
    up_args_ = {"--queues", queues_};
    ClusterTest::SetUp();
  }
  // Each worker's GPU reports an XID the program caused (13): counted,
  // cordoning nothing.
  void InjectXid() {
    for (const DaemonRecord& w : WorkerRecords()) {
      std::ofstream(absl::StrCat(nvml_control_, "/control-", w.pid), std::ios::app) << "xid 0 13\n";
    }
  }
  void TearDown() override {
    prometheus_.reset();
    ClusterTest::TearDown();
  }
  // Prometheus scraping every daemon of the cluster each second, with
  // `rules` when given.
  void StartPrometheus(const std::string& rules = "") {
    std::vector<std::string> targets;
    for (const auto& d : DaemonRecords()) targets.push_back(d.metrics_address);
    auto prometheus = testing::PrometheusServer::Start(state_dir_, targets, rules);
    ASSERT_OK(prometheus);
    prometheus_ = *std::move(prometheus);
  }
  std::vector<Struct> Query(const std::string& promql) { return prometheus_->Query(promql); }
  // The coordinator killed: RingmasterCoordinatorDown names its /metrics.
  void ExpectCoordinatorDownWhenKilled(const std::vector<AlertRule>& rules) {
    const auto rule = std::find_if(rules.begin(), rules.end(), [](const AlertRule& r) {
      return r.name == "RingmasterCoordinatorDown";
    });
    ASSERT_NE(rule, rules.end());
    EXPECT_TRUE(Query(rule->expr).empty()) << "the coordinator is up";
    std::string coordinator;
    for (const DaemonRecord& d : DaemonRecords()) {
      if (d.role == "coordinator") {
        coordinator = d.metrics_address;
        ASSERT_EQ(kill(d.pid, SIGKILL), 0);
      }
    }
    ASSERT_FALSE(coordinator.empty());
    std::vector<Struct> down;
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          down = Query(rule->expr);
          return !down.empty();
        },
        absl::Seconds(60)))
        << rule->expr;
    ASSERT_EQ(down.size(), 1u);
    EXPECT_EQ(Label(down[0], "instance"), coordinator);
  }

  std::unique_ptr<testing::PrometheusServer> prometheus_;
  std::string nvml_control_;
  std::string queues_;  // the coordinator's --queues
};

// A panel's query names its job or worker through the dashboard's
// variables, except the cluster-wide ones (no job or worker in them).
void ExpectPanelsUseTheVariables(const std::vector<std::string>& queries) {
  for (const std::string& q : queries) {
    if (q.find("ringmaster_jobs") != std::string::npos ||
        q.find("ringmaster_workers") != std::string::npos ||
        q.find("ringmaster_rpc_") != std::string::npos) {
      continue;
    }
    EXPECT_TRUE(q.find("$job_id") != std::string::npos || q.find("$worker") != std::string::npos ||
                q.find("$queue") != std::string::npos)
        << "a panel that ignores the dashboard's variables: " << q;
  }
}

// Per-job panels group by our job ids, and one job picked in $job_id is
// that job alone; our series keep the scrape's `job` label.
void ExpectJobsGroupedByJobId(const testing::PrometheusServer& prometheus,
                              const std::vector<std::string>& queries, const std::string& watched,
                              const std::string& flaky) {
  for (const std::string& q : queries) {
    if (q.find("sum by (job_id) (rate(ringmaster_train_samples_total") == std::string::npos) {
      continue;
    }
    std::set<std::string> jobs;
    for (const Struct& s : prometheus.Query(Interpolate(q, ".*", ".*")))
      jobs.insert(Label(s, "job_id"));
    EXPECT_EQ(jobs.count(watched), 1u) << q;
    const std::vector<Struct> one = prometheus.Query(Interpolate(q, watched, ".*"));
    ASSERT_EQ(one.size(), 1u) << q;
    EXPECT_EQ(Label(one[0], "job_id"), watched);
  }
  const std::vector<Struct> steps =
      prometheus.Query("ringmaster_train_steps_total{job_id=\"" + watched + "\"}");
  ASSERT_EQ(steps.size(), 2u) << "one series per rank";
  for (const Struct& s : steps) {
    EXPECT_EQ(Label(s, "job"), "ringmaster") << "the scrape job's label, untouched";
    EXPECT_NE(Label(s, "worker"), "");
  }
  EXPECT_TRUE(prometheus.Query("{exported_job=~\".+\"}").empty()) << "no label renamed";
  const std::vector<Struct> restarts =
      prometheus.Query("ringmaster_job_restarts_total{job_id=\"" + flaky + "\"}");
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(Label(restarts[0], "reason"), "RANK_EXITED");
}

TEST_F(PrometheusTest, EveryDashboardQueryReturnsData) {
  const std::vector<std::string> queries = DashboardQueries();
  ASSERT_GE(queries.size(), 22u);
  ExpectPanelsUseTheVariables(queries);
  ASSERT_NO_FATAL_FAILURE(StartPrometheus());
  InjectXid();

  // A job that restarts once, then a trainer job that runs until every query
  // has data (each job takes both one-slot workers in turn).
  const std::string flaky = Submit(
      "name: flaky\nranks: 1\nmax_restarts: 1\ncommand: [sh, -c, "
      "'[ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ] || exit 1']\n");
  const v1::Job restarted = WaitJob(flaky, [](const v1::Job& j) {
    return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED;
  });
  EXPECT_EQ(restarted.state(), v1::SUCCEEDED);
  const std::string watched = Submit(
      "name: watched\nranks: 2\ntrainer:\n  data: {path: \"synthetic:rows=50000,features=32,"
      "classes=4\"}\n  model: {hidden: [64]}\n  epochs: 100000\n  batch_size: 32\n");

  std::set<std::string> missing;
  const bool all = testing::WaitFor(
      [&] {
        missing.clear();
        for (const std::string& q : queries) {
          const std::string all_of_them = Interpolate(q, ".*", ".*");
          if (Query(all_of_them).empty()) missing.insert(all_of_them);
        }
        return missing.empty();
      },
      absl::Seconds(120));
  for (const std::string& q : missing) ADD_FAILURE() << "no data for " << q;
  EXPECT_TRUE(all);
  ExpectJobsGroupedByJobId(*prometheus_, queries, watched, flaky);
  EXPECT_EQ(client_->GetJob(watched)->state(), v1::RUNNING)
      << "the trainer job ran while the queries were asked";
  ASSERT_OK(client_->CancelJob(watched));

  // The fake GPU's values arrive as they were set.
  const std::vector<Struct> power = Query("ringmaster_gpu_power_watts{uuid=\"GPU-aaaa\"}");
  ASSERT_FALSE(power.empty());
  for (const Struct& gpu : power) {  // one per worker
    EXPECT_EQ(gpu.fields().at("value").list_value().values(1).string_value(), "150");
  }
}

// A PyTorch DDP script with Ringmaster's two lines added (tests/ddp_report.py)
// fills every per-job panel of the dashboard with $job_id set to it (but
// the restarts', as it does not restart), and `top` shows its samples/s,
// loss and all-reduce bandwidth while it runs.
TEST_F(PrometheusTest, APytorchJobFillsItsPanelsAndTop) {
  testing::CommandResult torch = testing::Shell("/usr/bin/python3 -c 'import torch'");
  ASSERT_EQ(torch.exit_code, 0) << "python3-torch is needed (./dev installs it): " << torch.err;
  ASSERT_NO_FATAL_FAILURE(StartPrometheus());
  const std::string id =
      Submit(absl::StrCat("name: torch\nranks: 2\ncommand: [/usr/bin/python3, ",
                          testing::Runfile("tests/ddp_report.py"), ", '10000000']\n"));

  std::vector<std::string> row;  // the job's row in `top`
  const bool shown = testing::WaitFor(
      [&] {
        testing::CommandResult top = Cli({"top", "--iterations", "1"});
        for (absl::string_view line : absl::StrSplit(top.out, '\n')) {
          if (absl::StartsWith(line, id + " ")) {
            row = absl::StrSplit(line, ' ', absl::SkipEmpty());
          }
        }
        // JOB STATE RANKS STEP STEPS/S SAMPLES/S LOSS ALLREDUCE GB/S (BUS) GOODPUT
        // STRAGGLERS
        return row.size() == 11 && row[5] != "-" && row[6] != "-" && row[7] != "-" && row[9] != "-";
      },
      absl::Seconds(60));
  EXPECT_TRUE(shown) << "top's row: " << absl::StrJoin(row, " ");

  std::vector<std::string> panels;
  for (const std::string& q : DashboardQueries()) {
    if (q.find("$job_id") != std::string::npos && q.find("restarts") == std::string::npos) {
      panels.push_back(Interpolate(q, id, ".*"));
    }
  }
  ASSERT_GE(panels.size(), 7u);
  std::set<std::string> missing;
  const bool all = testing::WaitFor(
      [&] {
        missing.clear();
        for (const std::string& q : panels) {
          if (Query(q).empty()) missing.insert(q);
        }
        return missing.empty();
      },
      absl::Seconds(120));
  for (const std::string& q : missing) ADD_FAILURE() << "no data for " << q;
  EXPECT_TRUE(all);
  EXPECT_EQ(client_->GetJob(id)->state(), v1::RUNNING) << "the job ran while it was asked";
  ASSERT_OK(client_->CancelJob(id));
}

// deploy/prometheus/alerts.yml: promtool accepts it, Prometheus loads it,
// and each rule's query returns data once the failure it is for happened
// here: a job that restarted, one that FAILED, a rank that hung (its job
// FAILED, with no restart left), a GPU with uncorrectable ECC errors (the
// fake NVML's), a worker killed, a --queues file the coordinator refuses,
// and last the coordinator killed. No leader needs several coordinators:
// that rule fires in ha_test, and stays silent here while one leads.
TEST_F(PrometheusTest, EveryAlertRuleReturnsDataOnTheFailureItIsFor) {
  const std::string rules_path = testing::Runfile("deploy/prometheus/alerts.yml");
  testing::CommandResult check = testing::RunCommand({"promtool", "check", "rules", rules_path});
  ASSERT_EQ(check.exit_code, 0) << check.out << check.err;
  const std::vector<AlertRule> rules = AlertRules(rules_path);
  ASSERT_EQ(rules.size(), 8u);
  ASSERT_NO_FATAL_FAILURE(StartPrometheus(rules_path));
  // Scraped with every job at rest first: the FAILED count's change shows.
  ASSERT_TRUE(testing::WaitFor([&] { return !Query("ringmaster_jobs{state=\"FAILED\"}").empty(); },
                               absl::Seconds(30)));

  auto ended = [](const v1::Job& j) {
    return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED;
  };
  const std::string failed =
      Submit("name: failed\nranks: 1\nmax_restarts: 0\ncommand: [sh, -c, 'exit 1']\n");
  EXPECT_EQ(WaitJob(failed, ended).state(), v1::FAILED);
  const std::string flaky = Submit(
      "name: flaky\nranks: 1\nmax_restarts: 1\ncommand: [sh, -c, "
      "'[ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ] || exit 1']\n");
  EXPECT_EQ(WaitJob(flaky, ended).state(), v1::SUCCEEDED);
  const std::string hung =
      Submit("name: hung\nranks: 1\nmax_restarts: 0\nhang_timeout_s: 2\ncommand: [sleep, '300']\n");
  const v1::Job hung_job = WaitJob(hung, ended);
  EXPECT_EQ(hung_job.state(), v1::FAILED);
  EXPECT_EQ(hung_job.restarts(), 0);
  EXPECT_EQ(hung_job.history(hung_job.history_size() - 1).reason(), v1::RANK_HUNG);
  const std::vector<DaemonRecord> workers = WorkerRecords();
  ASSERT_FALSE(workers.empty());
  ASSERT_EQ(kill(workers.back().pid, SIGKILL), 0);
  std::ofstream(queues_) << "queues:\n  - {name: default, colour: red}\n";

  const std::set<std::string> later = {"RingmasterCoordinatorDown", "RingmasterNoLeader"};
  std::map<std::string, std::string> silent;
  const bool all = testing::WaitFor(
      [&] {
        silent.clear();
        for (const AlertRule& rule : rules) {
          if (later.count(rule.name) == 0 && Query(rule.expr).empty()) {
            silent[rule.name] = rule.expr;
          }
        }
        return silent.empty();
      },
      absl::Seconds(120));
  for (const auto& [name, expr] : silent) ADD_FAILURE() << name << " returned no data: " << expr;
  EXPECT_TRUE(all);
  // The jobs the restart rules name.
  std::set<std::string> restarted, hanging;
  for (const AlertRule& rule : rules) {
    for (const Struct& s : Query(rule.expr)) {
      if (rule.name == "RingmasterJobRestarting") restarted.insert(Label(s, "job_id"));
      if (rule.name == "RingmasterRankHung") hanging.insert(Label(s, "job_id"));
    }
    if (rule.name == "RingmasterNoLeader") {
      EXPECT_TRUE(Query(rule.expr).empty()) << "the coordinator leads";
    }
  }
  EXPECT_EQ(restarted, std::set<std::string>{flaky});
  EXPECT_EQ(hanging, std::set<std::string>{hung});
  const std::string loaded = testing::HttpGet(prometheus_->address(), "/api/v1/rules");
  for (const AlertRule& rule : rules) {
    EXPECT_NE(loaded.find("\"name\":\"" + rule.name + "\""), std::string::npos) << loaded;
  }
  EXPECT_EQ(loaded.find("\"health\":\"err"), std::string::npos) << loaded;

  ExpectCoordinatorDownWhenKilled(rules);
}

// `ringmaster top` on a real terminal (a pty from util-linux's script):
// jobs with their rates, workers with their (fake) GPU, and the terminal
// handed back as it was.
TEST_F(PrometheusTest, TopShowsJobsAndGpusAndRestoresTheTerminal) {
  const std::string id = Submit(
      "name: topped\nranks: 2\ntrainer:\n  data: {path: \"synthetic:rows=50000,features=32,"
      "classes=4\"}\n  model: {hidden: [64]}\n  epochs: 100\n  batch_size: 32\n");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto job = client_->GetJob(id);
        auto workers = client_->ListWorkers();
        return job.ok() && job->progress().step() > 0 && workers.ok() && workers->size() == 2 &&
               (*workers)[0].gpu_usage_size() == 1;
      },
      absl::Seconds(60)));
  const std::string command = absl::StrCat(
      "RINGMASTER_COORDINATOR=", address_, " RINGMASTER_TLS_DIR=", state_dir_, "/tls script -qec '",
      testing::Runfile("client/ringmaster"), " top --iterations 2' /dev/null");
  testing::CommandResult r = testing::Shell(command);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("\x1b[?1049h"), r.out.find("\x1b")) << "enters the alternate screen first";
  const size_t leave = r.out.rfind("\x1b[?25h\x1b[?1049l");
  ASSERT_NE(leave, std::string::npos) << "cursor and screen restored";
  EXPECT_EQ(r.out.find("\x1b[H", leave), std::string::npos) << "nothing drawn after leaving";
  EXPECT_NE(r.out.find(id), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0:42%"), std::string::npos) << "the fake GPU's utilization: " << r.out;
  EXPECT_NE(r.out.find("STEPS/S"), std::string::npos);
  ASSERT_OK(client_->CancelJob(id));
}

}  // namespace
}  // namespace ringmaster
