// Queues, priorities and preemption on a real local cluster (`up --queues`,
// two workers of two slots): quota limits with free slots, refusals at
// submit, a trainer job preempted that checkpoints on SIGTERM and resumes
// from that step, an elastic victim that shrinks, and fair share between
// two queues' backlogs.
#include <signal.h>

#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

constexpr char kQueues[] = R"(queues:
  - name: default
    quota: {slots: 4}
  - name: capped
    quota: {slots: 1}
    users: [alice]
  - name: left
  - name: right
priority_classes: {low: 0, normal: 100, high: 1000}
default_queue: default
)";

class QueuesTest : public ClusterTest {
 protected:
  void SetUp() override {
    queues_file_ = testing::MakeTempDir("queues") + "/queues.yaml";
    std::ofstream(queues_file_) << kQueues;
    up_args_ = {"--queues", queues_file_};
    up_slots_ = 2;
    ClusterTest::SetUp();
  }

  // The coordinator's value of a metric without labels, or -1.
  double Metric(const std::string& name) {
    const std::string text = testing::HttpGet(DaemonRecords()[0].metrics_address, "/metrics");
    std::smatch m;
    if (!std::regex_search(text, m, std::regex("\n" + name + " ([0-9.e+-]+)"))) return -1;
    return std::stod(m[1]);
  }

  std::string queues_file_;
};

TEST_F(QueuesTest, AJobOverItsQueuesLimitWaitsWhileSlotsAreFree) {
  const std::string first =
      Submit("name: first\nranks: 1\nqueue: capped\ncommand: [sleep, '300']\n");
  const std::string second =
      Submit("name: second\nranks: 1\nqueue: capped\ncommand: [sleep, '300']\n");
  WaitJob(first, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  v1::Job waiting = WaitJob(second, [](const v1::Job& j) { return !j.pending_reason().empty(); });
  EXPECT_EQ(waiting.state(), v1::PENDING);
  EXPECT_EQ(waiting.pending_reason(), "queue capped at its limit (1 of 1 slots)");
  auto workers = client_->ListWorkers();
  ASSERT_OK(workers);
  int free = 0;
  for (const v1::Worker& w : *workers) free += w.slots() - w.slots_used();
  EXPECT_EQ(free, 3) << "the cluster has room; the queue does not";

  testing::CommandResult queues = Cli({"queues"});
  ASSERT_EQ(queues.exit_code, 0) << queues.err;
  EXPECT_TRUE(std::regex_search(queues.out, std::regex("capped +1 +1 slots +1 slots +1 slots +"
                                                       "0 slots +1 +1 +alice")))
      << queues.out;
  testing::CommandResult jobs = Cli({"jobs"});
  EXPECT_TRUE(std::regex_search(jobs.out, std::regex(second + " +admin +capped +normal \\(100\\)")))
      << jobs.out;
}

// SIGHUP reads the file again: a good one applies at the next pass, a bad
// one keeps the queues as they were and says why in the log and a metric.
TEST_F(QueuesTest, SighupRereadsTheQueuesAndABadFileKeepsTheOldOnes) {
  const std::string first =
      Submit("name: first\nranks: 1\nqueue: capped\ncommand: [sleep, '300']\n");
  const std::string second =
      Submit("name: second\nranks: 1\nqueue: capped\ncommand: [sleep, '300']\n");
  WaitJob(second, [](const v1::Job& j) { return !j.pending_reason().empty(); });
  const int coordinator = DaemonRecords()[0].pid;
  EXPECT_EQ(Metric("ringmaster_queues_config_last_reload_successful"), 1);

  std::ofstream(queues_file_) << "queues:\n  - name: default\n  - name: capped\n    wieght: 2\n";
  ASSERT_EQ(kill(coordinator, SIGHUP), 0);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return Metric("ringmaster_queues_config_last_reload_successful") == 0; },
      absl::Seconds(10)));
  std::ifstream log(state_dir_ + "/logs/coordinator.log");
  const std::string text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(text.find("--queues: keeping the queues as they were: " + queues_file_ +
                      " line 4: queues[1].wieght: unknown key"),
            std::string::npos)
      << text;
  EXPECT_EQ(client_->GetJob(second)->state(), v1::PENDING) << "the old limit still holds";

  std::ofstream(queues_file_) << "queues:\n  - name: default\n  - name: capped\n"
                                 "    quota: {slots: 2}\n";
  ASSERT_EQ(kill(coordinator, SIGHUP), 0);
  WaitJob(second, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  EXPECT_EQ(Metric("ringmaster_queues_config_last_reload_successful"), 1);
  EXPECT_EQ(client_->GetJob(first)->state(), v1::RUNNING);
}

TEST_F(QueuesTest, SubmitRefusesAQueueOrClassItCannotUseWithExitTwo) {
  const std::string spec = WriteSpec("bad", "name: bad\nranks: 1\nqueue: nope\ncommand: [true]\n");
  testing::CommandResult unknown = Cli({"submit", spec});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("queue: no queue \"nope\"; the queues are default, capped, left, "
                             "right"),
            std::string::npos)
      << unknown.err;
  testing::CommandResult bad_class =
      Cli({"submit", WriteSpec("cls", "name: cls\nranks: 1\npriority: urgent\ncommand: [true]\n")});
  EXPECT_EQ(bad_class.exit_code, 2);
  EXPECT_NE(bad_class.err.find("priority: \"urgent\" is neither"), std::string::npos)
      << bad_class.err;
  ASSERT_EQ(Cli({"certs", "init", "--dir", state_dir_ + "/tls", "--user", "bob"}).exit_code, 0);
  testing::CommandResult not_his =
      Cli({"--cert", "bob", "submit",
           WriteSpec("his", "name: his\nranks: 1\nqueue: capped\ncommand: [true]\n")});
  EXPECT_EQ(not_his.exit_code, 2);
  EXPECT_NE(not_his.err.find("queue: user bob may not submit to queue capped; its users are alice"),
            std::string::npos)
      << not_his.err;
  // A user takes only the classes the queue opens, never an integer, a
  // negative one or preemptible: false where the queue does not allow it.
  const std::vector<std::pair<std::string, std::string>> denied = {
      {"priority: '1000000'\npreemptible: false",
       "priority: an integer priority (1000000) is the admin's"},
      {"priority: high", "priority: class high (1000) is not open to users of queue default"},
      {"priority: '-5'", "priority: -5 is out of range: an integer priority is in [0, 1000000000]"},
      {"preemptible: false", "preemptible: false is not allowed in queue default"},
  };
  for (const auto& [field, refusal] : denied) {
    testing::CommandResult r =
        Cli({"--cert", "bob", "submit",
             WriteSpec("greedy",
                       absl::StrCat("name: greedy\nranks: 1\n", field, "\ncommand: [true]\n"))});
    EXPECT_EQ(r.exit_code, 2) << field << ": " << r.err;
    EXPECT_NE(r.err.find(refusal), std::string::npos) << field << ": " << r.err;
  }
  auto jobs = client_->ListJobs();
  ASSERT_OK(jobs);
  EXPECT_TRUE(jobs->empty()) << "nothing is stored";
}

// The victim's rank 0 checkpoints at the step it is on when SIGTERM comes;
// its next attempt resumes from exactly that step, and it succeeds with no
// restart counted.
TEST_F(QueuesTest, AHighPriorityJobPreemptsATrainerThatResumesFromTheStepItStoppedAt) {
  const std::string low = Submit(
      "name: low\nranks: 4\npriority: low\ntrainer:\n"
      "  data: {path: \"synthetic:rows=8000,features=16,classes=4\"}\n"
      "  model: {hidden: [32]}\n  epochs: 600\n  batch_size: 16\n"
      "  checkpoint_every_steps: 100000\n");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto job = client_->GetJob(low);
        return job.ok() && job->progress().step() >= 5;
      },
      absl::Seconds(60)));
  const std::string high =
      Submit("name: high\nranks: 2\npriority: high\ncommand: [sh, -c, 'sleep 2']\n");
  v1::Job preempted = WaitJob(low, [](const v1::Job& j) { return j.preemptions() == 1; });
  bool said = false;
  for (const v1::StateChange& c : preempted.history()) {
    if (c.reason() == v1::PREEMPTED) {
      said = true;
      EXPECT_EQ(c.message().substr(0, c.message().find(':')),
                absl::StrCat("PREEMPTED by ", high, " (priority 1000, queue default)"));
    }
  }
  EXPECT_TRUE(said) << "the history says who preempted it";
  WaitJob(high, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  v1::Job done = WaitJob(low, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  EXPECT_EQ(done.restarts(), 0);
  EXPECT_EQ(done.attempt(), 1);

  testing::CommandResult before = Cli({"logs", low, "--rank", "0", "--attempt", "0"});
  std::smatch stopped;
  ASSERT_TRUE(std::regex_search(before.out, stopped, std::regex("stopped after step ([0-9]+)")))
      << before.out;
  testing::CommandResult after = Cli({"logs", low, "--rank", "0", "--attempt", "1"});
  // From the checkpoint it took on stop, or from the snapshot of the same
  // step its workers hold in memory.
  const std::string from_disk =
      absl::StrCat("resuming from ", state_dir_, "/checkpoints/", low, "/step-", stopped[1].str());
  const std::string from_memory =
      absl::StrCat("resuming at step ", stopped[1].str(), " from memory");
  EXPECT_TRUE(after.out.find(from_disk) != std::string::npos ||
              after.out.find(from_memory) != std::string::npos)
      << "attempt 0 stopped after step " << stopped[1] << "; attempt 1 says:\n"
      << after.out;
  testing::CommandResult status = Cli({"status", low});
  EXPECT_NE(status.out.find("queue:     default, priority low (0), preemptible (grace 30s); "
                            "preempted 1 times"),
            std::string::npos)
      << status.out;
}

// A Python rank polls ringmaster.preempted() and exits on its own, in the
// grace, instead of being killed.
TEST_F(QueuesTest, APythonRankSeesThatItIsPreempted) {
  const std::string poller = Submit(
      "name: poller\nranks: 4\npriority: low\ncommand: [python3, -c, \""
      "import os, time, ringmaster\\n"
      "polls = 0\\n"
      "while not ringmaster.preempted():\\n"
      "    if polls == 0: print('polling', flush=True)\\n"
      "    polls += 1\\n"
      "    time.sleep(0.05)\\n"
      "print('told to stop after', polls, 'polls', flush=True)\"]\n");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto job = client_->GetJob(poller);
        return job.ok() && job->state() == v1::RUNNING;
      },
      absl::Seconds(60)));
  // Preempted only once the first ringmaster.preempted() has taken SIGTERM:
  // before it, the signal's default action would end the rank silently.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return Cli({"logs", poller, "--rank", "0"}).out.find("polling") != std::string::npos;
      },
      absl::Seconds(60)));
  const std::string high =
      Submit("name: high\nranks: 1\npriority: high\ncommand: [sh, -c, 'sleep 1']\n");
  WaitJob(high, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  v1::Job resumed = WaitJob(
      poller, [](const v1::Job& j) { return j.attempt() == 1 && j.state() == v1::RUNNING; });
  EXPECT_EQ(resumed.restarts(), 0);
  testing::CommandResult logs = Cli({"logs", poller, "--rank", "0", "--attempt", "0"});
  EXPECT_NE(logs.out.find("told to stop after"), std::string::npos)
      << logs.out << logs.err << "\nevery rank of attempt 0:\n"
      << Cli({"logs", poller, "--attempt", "0"}).out << "\n"
      << Cli({"status", poller, "-o", "json"}).out;
  client_->CancelJob(poller).IgnoreError();
}

TEST_F(QueuesTest, AnElasticVictimShrinksInsteadOfStopping) {
  const std::string elastic = Submit(
      "name: elastic\nranks: 4\nmin_ranks: 2\nscale_up_after_s: 1\npriority: low\n"
      "command: [sleep, '300']\n");
  WaitJob(elastic, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  const std::string high =
      Submit("name: high\nranks: 2\npriority: high\ncommand: [sh, -c, 'sleep 3']\n");
  v1::Job shrunk = WaitJob(
      elastic, [](const v1::Job& j) { return j.state() == v1::RUNNING && j.world_size() == 2; });
  EXPECT_EQ(shrunk.restarts(), 0);
  EXPECT_EQ(shrunk.preemptions(), 1);
  bool said = false;
  for (const v1::StateChange& c : shrunk.history()) {
    said |= c.reason() == v1::PREEMPTED &&
            c.message().find("restarting with at most 2 of its 4 ranks") != std::string::npos;
  }
  EXPECT_TRUE(said) << "the history says it shrinks";
  // The preemptor runs on the slots the victim gave up (it may still be
  // starting when the victim is seen shrunk).
  WaitJob(high,
          [](const v1::Job& j) { return j.state() == v1::RUNNING || j.state() == v1::SUCCEEDED; });
  // When the preemptor is done, it grows back to 4.
  WaitJob(high, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  v1::Job grown = WaitJob(
      elastic, [](const v1::Job& j) { return j.state() == v1::RUNNING && j.world_size() == 4; });
  EXPECT_EQ(grown.restarts(), 0);
  client_->CancelJob(elastic).IgnoreError();
}

// Two queues of equal weight, each with a backlog, the second submitted
// after the first: the starts alternate between them instead of running
// the first backlog first.
TEST_F(QueuesTest, TwoQueuesOfEqualWeightTakeTurns) {
  const std::string blocker = Submit("name: blocker\nranks: 4\ncommand: [sleep, '300']\n");
  WaitJob(blocker, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  std::vector<std::string> ids;
  for (const std::string queue : {"left", "right"}) {
    for (int i = 0; i < 6; ++i) {
      ids.push_back(Submit(absl::StrCat("name: ", queue, "\nranks: 1\nqueue: ", queue,
                                        "\ncommand: [sh, -c, 'sleep 1']\n")));
    }
  }
  ASSERT_OK(client_->CancelJob(blocker).status());
  std::vector<std::pair<int64_t, std::string>> starts;  // (time, queue)
  for (const std::string& id : ids) {
    v1::Job job = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
    for (const v1::StateChange& c : job.history()) {
      if (c.state() == v1::STARTING) starts.push_back({c.time_unix_ms(), job.spec().queue()});
    }
  }
  std::sort(starts.begin(), starts.end());
  ASSERT_EQ(starts.size(), 12u);
  // The first pass, with the 4 slots free, starts 2 of each. After every
  // later pass neither queue is more than 2 starts ahead (a queue whose
  // jobs ended first gets the slots they free); first come first served,
  // left's 6 would all start before right's first.
  int left = 0, right = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    (starts[i].second == "left" ? left : right) += 1;
    if (i == 3) EXPECT_EQ(left, 2) << "the first 4 starts";
    if (i + 1 == starts.size() || starts[i + 1].first != starts[i].first) {
      EXPECT_LE(std::abs(left - right), 2)
          << "after " << i + 1 << " starts: left " << left << ", right " << right;
    }
  }
}

}  // namespace
}  // namespace ringmaster
