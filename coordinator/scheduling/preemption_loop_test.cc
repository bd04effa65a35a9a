// A flood of short jobs in a queue within its quota and a job borrowing
// from another queue, on a fake clock, one scheduling pass a second for
// 2.5 minutes as on the cluster where it was seen: the borrower was placed
// in each slot a finished short job freed and preempted on the next pass
// (1,381 preemptions). It must never be placed where a job within its
// quota waits, and once placed it keeps its slots for min_runtime.
#include <deque>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/scheduling/queue_scheduler.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'000'000);

class FloodAndBorrower {
 public:
  FloodAndBorrower() {
    WorkerCapacity w;
    w.worker_id = "w0";
    w.total_slots = 4;
    for (int s = 0; s < 4; ++s) w.free_slots.push_back(s);
    free_.push_back(w);
    absl::StatusOr<QueueConfig> config = ParseQueueConfig(
        "queues:\n  - {name: flood, quota: {slots: 4}}\n  - {name: borrow}\n"
        "default_queue: flood\n");
    EXPECT_OK(config);
    config_ = *config;
    borrower_.job_id = "borrower";
    borrower_.queue = "borrow";
    borrower_.owner = "bob";
    borrower_.priority = 100;
    borrower_.sequence = 0;
    borrower_.pending_since = now_;
    borrower_.request = {1, 0};
  }

  // `n` jobs of one slot and `seconds` each, in the flood queue.
  void Flood(int n, int seconds) {
    for (int i = 0; i < n; ++i) {
      PendingJob& job = flood_.emplace_back();
      job.job_id = ids_.emplace_back(absl::StrCat("short-", ++submitted_));
      job.queue = "flood";
      job.owner = "alice";
      job.priority = 100;
      job.sequence = submitted_;
      job.pending_since = now_;
      job.request = {1, 0};
      seconds_[job.job_id] = seconds;
    }
  }

  // One pass, its decisions applied, then a second passes.
  void Tick() {
    std::vector<PendingJob> pending(flood_.begin(), flood_.end());
    if (!borrower_running_) pending.push_back(borrower_);
    std::vector<const RunningJob*> running;
    for (const auto& [id, r] : running_) running.push_back(&r.job);
    SchedulingDecisions d = ScheduleQueues(config_, pending, running, free_, now_, policy_);
    for (const Preemption& p : d.preemptions) {
      ASSERT_EQ(p.victim, "borrower");
      Running& r = running_.at(p.victim);
      ReturnCapacity(free_, r.job.ranks, r.job.request);
      preempted_at_.push_back(now_);
      running_.erase(p.victim);
      borrower_running_ = false;
      borrower_.pending_since = now_;
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      if (d.jobs[i].placement.empty()) {
        if (pending[i].job_id == "borrower") borrower_waits_ = std::string(d.jobs[i].waiting);
        continue;
      }
      const PendingJob& job = pending[i];
      TakeCapacity(free_, d.jobs[i].placement, job.request);
      RunningJob r{job.job_id, job.queue,   job.owner,           job.priority, now_,
                   true,       job.request, d.jobs[i].placement, preempted_at_};
      const bool is_borrower = job.job_id == "borrower";
      const absl::Time ends =
          is_borrower ? absl::InfiniteFuture() : now_ + absl::Seconds(seconds_[job.job_id]);
      running_[job.job_id] = {std::move(r), ends};
      if (is_borrower) {
        borrower_running_ = true;
        ++borrower_starts_;
      } else {
        flood_.erase(std::find_if(flood_.begin(), flood_.end(),
                                  [&](const PendingJob& p) { return p.job_id == job.job_id; }));
      }
    }
    now_ += absl::Seconds(1);
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->second.ends <= now_) {
        ReturnCapacity(free_, it->second.job.ranks, it->second.job.request);
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
  }

  int preemptions() const { return static_cast<int>(preempted_at_.size()); }

  SchedulingPolicy policy_;
  absl::Time now_ = kStart;
  int borrower_starts_ = 0;
  bool borrower_running_ = false;
  std::string borrower_waits_;

 private:
  struct Running {
    RunningJob job;
    absl::Time ends;
  };
  QueueConfig config_;
  std::vector<WorkerCapacity> free_;
  std::deque<std::string> ids_;
  std::deque<PendingJob> flood_;
  std::map<std::string_view, int> seconds_;
  std::map<std::string_view, Running> running_;
  PendingJob borrower_;
  std::vector<absl::Time> preempted_at_;
  int submitted_ = 0;
};

TEST(PreemptionLoopTest, ABorrowerWaitsWhileAFloodWithinItsQuotaWaits) {
  FloodAndBorrower sim;
  sim.Flood(200, 5);
  for (int second = 0; second < 150; ++second) sim.Tick();
  EXPECT_EQ(sim.preemptions(), 0);
  EXPECT_EQ(sim.borrower_starts_, 0);
  EXPECT_FALSE(sim.borrower_waits_.empty());
}

TEST(PreemptionLoopTest, ABorrowerPlacedFirstKeepsItsSlotForMinRuntimeThenGoesOnce) {
  FloodAndBorrower sim;
  sim.Tick();  // idle: the borrower starts
  ASSERT_TRUE(sim.borrower_running_);
  sim.Flood(200, 5);
  for (int second = 1; second < 150; ++second) sim.Tick();
  EXPECT_EQ(sim.preemptions(), 1) << "taken back once, after min_runtime";
  EXPECT_EQ(sim.borrower_starts_, 1);
}

// However often a job is caught between queues, it is preempted at most
// max_preemptions_per_hour times an hour.
TEST(PreemptionLoopTest, PreemptionsOfAJobAreBoundedPerHour) {
  FloodAndBorrower sim;
  sim.policy_.min_runtime = absl::ZeroDuration();
  int floods = 0;
  // Idle spells let the borrower start; floods take its slot back.
  for (int second = 0; second < 3600; ++second) {
    if (second % 60 == 30) {
      sim.Flood(4, 10);
      ++floods;
    }
    sim.Tick();
  }
  EXPECT_EQ(floods, 60);
  EXPECT_EQ(sim.preemptions(), 3) << "the policy's max_preemptions_per_hour";
  EXPECT_GT(sim.borrower_starts_, 3);
}

}  // namespace
}  // namespace ringmaster
