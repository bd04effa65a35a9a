// The scheduling policy over a long run on a fake clock: two queues of
// weight 1 and 3 with endless backlogs of mixed 1-8-slot jobs on 32 slots.
// Over 10,000 started jobs each queue gets its weighted share of the
// slot-seconds (within 5%), and no job waits more than 3 times its fair
// wait.
#include <algorithm>
#include <deque>
#include <random>

#include <gtest/gtest.h>

#include "coordinator/scheduling/queue_scheduler.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

constexpr int kWorkers = 4;
constexpr int kSlotsPerWorker = 8;
constexpr int kBacklog = 20;  // pending jobs each queue keeps
constexpr int kJobs = 10000;  // jobs started before the run ends

struct SimJob {
  PendingJob pending;
  absl::Duration duration;
  double fair_wait_s = 0;  // the work ahead of it in its queue over the queue's share
};

struct Running {
  RunningJob job;
  absl::Time ends;
};

class Simulation {
 public:
  Simulation(QueueConfig config, uint64_t seed) : config_(std::move(config)), rng_(seed) {
    for (int i = 0; i < kWorkers; ++i) {
      WorkerCapacity w;
      w.worker_id = absl::StrCat("w", i);
      w.total_slots = kSlotsPerWorker;
      for (int s = 0; s < kSlotsPerWorker; ++s) w.free_slots.push_back(s);
      free_.push_back(w);
    }
    double total_weight = 0;
    for (const QueueSpec& q : config_.queues) total_weight += q.weight;
    for (const QueueSpec& q : config_.queues) {
      share_[q.name] = q.weight / total_weight;
      for (int i = 0; i < kBacklog; ++i) Submit(q.name);
    }
  }

  void Run() {
    while (started_ < kJobs) {
      std::vector<PendingJob> pending;
      for (const auto& [id, job] : waiting_) pending.push_back(job.pending);
      std::vector<const RunningJob*> running;
      for (const Running& r : running_) running.push_back(&r.job);
      SchedulingDecisions d = ScheduleQueues(config_, pending, running, free_, now_, policy_);
      ASSERT_TRUE(d.preemptions.empty()) << "no queue has a quota to take back";
      for (size_t i = 0; i < pending.size(); ++i) {
        if (!d.jobs[i].placement.empty()) Start(pending[i].job_id, std::move(d.jobs[i].placement));
      }
      AdvanceToNextEvent();
    }
  }

  std::map<std::string, double, std::less<>> slot_seconds_;
  std::map<std::string, double, std::less<>> share_;
  double worst_wait_ratio_ = 0;
  std::string worst_job_;

 private:
  // `queue` views a name of the config's.
  void Submit(std::string_view queue) {
    SimJob job;
    job.pending.job_id = ids_.emplace_back(absl::StrCat(std::string(queue), "-", ++submitted_));
    job.pending.queue = queue;
    job.pending.owner = "u";
    job.pending.priority = 100;
    job.pending.sequence = submitted_;
    job.pending.pending_since = now_;
    job.pending.request = {std::uniform_int_distribution<int>(1, 8)(rng_), 0};
    job.duration = absl::Seconds(std::uniform_int_distribution<int>(60, 600)(rng_));
    double ahead = 0;  // slot-seconds of the queue's jobs before it, its own included
    for (const auto& [id, other] : waiting_) {
      if (other.pending.queue == queue) {
        ahead += other.pending.request.ranks * absl::ToDoubleSeconds(other.duration);
      }
    }
    ahead += job.pending.request.ranks * absl::ToDoubleSeconds(job.duration);
    job.fair_wait_s = ahead / (kWorkers * kSlotsPerWorker * share_.find(queue)->second);
    waiting_[job.pending.job_id] = job;
  }

  void Start(std::string_view id, std::vector<RankPlacement> placement) {
    SimJob job = waiting_.at(id);
    waiting_.erase(id);
    const double waited = absl::ToDoubleSeconds(now_ - job.pending.pending_since);
    const double ratio = waited / job.fair_wait_s;
    if (ratio > worst_wait_ratio_) {
      worst_wait_ratio_ = ratio;
      worst_job_ = absl::StrCat(std::string(id), " of ", job.pending.request.ranks,
                                " slots waited ", waited, " s, fair ", job.fair_wait_s, " s");
    }
    TakeCapacity(free_, placement, job.pending.request);
    RunningJob r{id,   job.pending.queue,   job.pending.owner,   100, now_,
                 true, job.pending.request, std::move(placement)};
    slot_seconds_[std::string(r.queue)] += r.request.ranks * absl::ToDoubleSeconds(job.duration);
    running_.push_back({std::move(r), now_ + job.duration});
    ++started_;
    Submit(job.pending.queue);  // the backlog never runs dry
  }

  // To the next job's end, or the next time a waiting job may reserve.
  void AdvanceToNextEvent() {
    absl::Time next = absl::InfiniteFuture();
    for (const Running& r : running_) next = std::min(next, r.ends);
    for (const auto& [id, job] : waiting_) {
      const absl::Time reserves = job.pending.pending_since + policy_.reserve_after;
      if (reserves > now_) next = std::min(next, reserves);
    }
    now_ = next;
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->ends > now_) {
        ++it;
        continue;
      }
      ReturnCapacity(free_, it->job.ranks, it->job.request);
      it = running_.erase(it);
    }
  }

  const QueueConfig config_;
  std::mt19937_64 rng_;
  const SchedulingPolicy policy_;
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
  std::vector<WorkerCapacity> free_;
  std::deque<std::string> ids_;  // every job's id, which jobs view
  std::map<std::string_view, SimJob> waiting_;
  std::vector<Running> running_;
  int64_t submitted_ = 0;
  int started_ = 0;
};

TEST(QueueSimulationTest, WeightsShareTheClusterAndNoJobStarves) {
  absl::StatusOr<QueueConfig> config = ParseQueueConfig(
      "queues:\n  - {name: a, weight: 1}\n  - {name: b, weight: 3}\ndefault_queue: a\n");
  ASSERT_OK(config);
  Simulation sim(*config, 42);
  sim.Run();
  const double total = sim.slot_seconds_["a"] + sim.slot_seconds_["b"];
  for (const std::string queue : {"a", "b"}) {
    const double got = sim.slot_seconds_[queue] / total;
    EXPECT_NEAR(got, sim.share_[queue], 0.05 * sim.share_[queue])
        << "queue " << queue << " got " << got << " of the slot-seconds";
  }
  EXPECT_LE(sim.worst_wait_ratio_, 3.0) << sim.worst_job_;
  std::cout << "a: " << sim.slot_seconds_["a"] / total << ", b: " << sim.slot_seconds_["b"] / total
            << "; longest wait over fair wait " << sim.worst_wait_ratio_ << " (" << sim.worst_job_
            << ")\n";
}

}  // namespace
}  // namespace ringmaster
