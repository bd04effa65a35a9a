// Stragglers on a real local cluster of three one-slot workers: one rank
// of a 3-rank job is throttled to about half speed by a SIGSTOP/SIGCONT
// duty cycle, and the coordinator names it, its worker and its slowdown
// within 90 s, for the built-in trainer and for a PyTorch DDP script that
// uses ringmaster.torch.instrument().
#include <signal.h>

#include <atomic>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

// Stops and continues `pid` in turn, 150 ms each, until destroyed.
class Throttle {
 public:
  explicit Throttle(int pid)
      : thread_([this, pid] {
          while (!done_.load()) {
            kill(pid, SIGSTOP);
            absl::SleepFor(absl::Milliseconds(150));
            kill(pid, SIGCONT);
            absl::SleepFor(absl::Milliseconds(150));
          }
        }) {}
  ~Throttle() {
    done_.store(true);
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

class StragglerTest : public ClusterTest {
 protected:
  void SetUp() override {
    up_workers_ = 3;
    ClusterTest::SetUp();
  }

  // Throttles rank 1 of `job` once it runs, and checks that it alone is
  // named a straggler within 90 s.
  void ExpectRankOneNamed(const std::string& job) {
    const v1::Job running = WaitJob(job, [](const v1::Job& j) {
      return j.state() == v1::RUNNING && j.progress().step() > 0 && j.ranks(1).pid() > 0;
    });
    ASSERT_EQ(running.state(), v1::RUNNING);
    const std::string worker = running.ranks(1).worker_id();
    v1::Job flagged;
    {
      Throttle throttle(static_cast<int>(running.ranks(1).pid()));
      const absl::Time began = absl::Now();
      const bool named = testing::WaitFor(
          [&] {
            auto j = client_->GetJob(job);
            if (!j.ok()) return false;
            flagged = *j;
            return flagged.stragglers_size() > 0;
          },
          absl::Seconds(90));
      ASSERT_TRUE(named) << "no straggler named within 90 s: " << flagged.ShortDebugString();
      EXPECT_LT(absl::Now() - began, absl::Seconds(90));
      // The series is read while the rank is still slow.
      const std::string metrics = testing::HttpGet(DaemonRecords()[0].metrics_address, "/metrics");
      std::smatch m;
      ASSERT_TRUE(
          std::regex_search(metrics, m,
                            std::regex("ringmaster_rank_slowdown_ratio\\{job_id=\"" + job +
                                       "\",rank=\"1\",worker=\"" + worker + "\"\\} ([0-9.e+-]+)")))
          << metrics;
      EXPECT_GE(std::stod(m[1]), 1.3);
    }
    ASSERT_EQ(flagged.stragglers_size(), 1) << flagged.ShortDebugString();
    EXPECT_EQ(flagged.stragglers(0).rank(), 1);
    EXPECT_EQ(flagged.stragglers(0).worker_id(), worker);
    EXPECT_GE(flagged.stragglers(0).ratio(), 1.3);
    bool noted = false;
    for (const v1::StateChange& c : flagged.history()) {
      noted |= c.reason() == v1::RANK_STRAGGLING && c.state() == v1::RUNNING;
    }
    EXPECT_TRUE(noted) << "the history records it";
    testing::CommandResult status = Cli({"status", job});
    EXPECT_TRUE(
        std::regex_search(status.out, std::regex("straggler: rank 1 on " + worker +
                                                 ": compute [0-9.]+× the job's median for 1m")))
        << status.out;
    Cli({"cancel", job});
  }
};

TEST_F(StragglerTest, AThrottledTrainerRankIsNamed) {
  ExpectRankOneNamed(Submit(
      // Steps that are mostly compute, even with the all-reduce slowed by a
      // sanitizer: a stop lands in it, as a slow CPU's or GPU's time would.
      "name: slow\nranks: 3\nranks_per_worker: 1\ntrainer:\n"
      "  data: {path: \"synthetic:rows=100000,features=128,classes=4\"}\n"
      "  model: {hidden: [512, 512]}\n  epochs: 5000\n  batch_size: 1024\n"));
}

TEST_F(StragglerTest, AThrottledPytorchRankIsNamedThroughInstrument) {
  testing::CommandResult torch = testing::Shell("/usr/bin/python3 -c 'import torch'");
  ASSERT_EQ(torch.exit_code, 0) << "python3-torch is needed (./dev installs it): " << torch.err;
  ExpectRankOneNamed(Submit(
      absl::StrCat("name: slow-ddp\nranks: 3\nranks_per_worker: 1\ncommand: [/usr/bin/python3, ",
                   testing::Runfile("tests/ddp_compute.py"), "]\n")));
}

}  // namespace
}  // namespace ringmaster
