// The scheduling policy as a pure function on a fake clock: order, fair
// share by weight, quota and borrowing, reservation and backfill, and the
// choice of victims.
#include "coordinator/scheduling/queue_scheduler.h"

#include <algorithm>
#include <deque>
#include <set>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'000'000);

// A pass's decisions by job id, as the tests read them.
struct Decided {
  std::map<std::string, std::vector<RankPlacement>> placed;
  std::map<std::string, std::string> waiting;
  std::vector<Preemption> preemptions;
  std::map<std::string, QueueLoad> queues;
};

// A cluster being built: workers, the jobs running on them, and what is
// left free.
class Snapshot {
 public:
  explicit Snapshot(int workers, int slots, std::map<std::string, std::string> labels = {}) {
    AddWorkers("w", workers, slots, labels);
  }
  void AddWorkers(const std::string& prefix, int workers, int slots,
                  std::map<std::string, std::string> labels = {}) {
    for (int i = 0; i < workers; ++i) {
      WorkerCapacity w;
      w.worker_id = absl::StrCat(prefix, free_.size());
      w.total_slots = slots;
      for (int s = 0; s < slots; ++s) w.free_slots.push_back(s);
      w.labels = labels;
      w.gpu_slots = gpus_;
      free_.push_back(w);
    }
  }
  // A job running `ranks` ranks (elastic down to `min_ranks`), started
  // `age` ago.
  RunningJob& Run(const std::string& id, const std::string& queue, int priority, int ranks,
                  absl::Duration age, int min_ranks = 0) {
    RunningJob job;
    job.job_id = Keep(id);
    job.queue = Keep(queue);
    job.owner = "u";
    job.priority = priority;
    job.started = kNow - age;
    job.request = {ranks, gpus_ ? 1 : 0, min_ranks};
    absl::StatusOr<std::vector<RankPlacement>> placed = PlaceGang(free_, job.request);
    EXPECT_OK(placed) << id;
    job.ranks = *placed;
    TakeCapacity(free_, job.ranks, job.request);
    running_.push_back(job);
    return running_.back();
  }
  // Workers in a rack (topology levels rack, host): `<prefix>h<i>`, one
  // host each.
  void AddRack(const std::string& prefix, int rack, int hosts, int slots) {
    for (int i = 0; i < hosts; ++i) {
      WorkerCapacity w;
      w.worker_id = absl::StrCat(prefix, "h", i);
      w.total_slots = slots;
      for (int s = 0; s < slots; ++s) w.free_slots.push_back(s);
      w.domains = {rack, rack * 100 + i};
      free_.push_back(w);
    }
  }
  // A job of one rank per slot on `worker`, started `age` ago.
  RunningJob& RunOn(const std::string& id, const std::string& worker, int ranks,
                    absl::Duration age) {
    RunningJob job;
    job.job_id = Keep(id);
    job.queue = "default";
    job.owner = "u";
    job.priority = 100;  // as the jobs pending in these tests, which it does not make way for
    job.started = kNow - age;
    job.request = {ranks, 0};
    for (const WorkerCapacity& w : free_) {
      if (w.worker_id != worker) continue;
      for (int r = 0; r < ranks; ++r) {
        job.ranks.push_back({r, w.worker_id, {w.free_slots[r]}});
      }
    }
    EXPECT_EQ(static_cast<int>(job.ranks.size()), ranks) << worker;
    TakeCapacity(free_, job.ranks, job.request);
    running_.push_back(job);
    return running_.back();
  }
  // The worker is one of the --spare-workers.
  void MakeSpare(const std::string& worker) {
    for (WorkerCapacity& w : free_) w.spare |= w.worker_id == worker;
  }
  // Slots held by ranks that are stopping: taken, but by no running job.
  void Hold(int ranks) {
    absl::StatusOr<std::vector<RankPlacement>> placed = PlaceGang(free_, {ranks, 0});
    EXPECT_OK(placed);
    TakeCapacity(free_, *placed, {ranks, 0});
  }
  PendingJob& Pend(const std::string& id, const std::string& queue, int priority, int ranks,
                   absl::Duration waited = absl::ZeroDuration()) {
    PendingJob job;
    job.job_id = Keep(id);
    job.queue = Keep(queue);
    job.owner = "u";
    job.priority = priority;
    job.sequence = static_cast<int64_t>(pending_.size()) + 1;
    job.pending_since = kNow - waited;
    job.request = {ranks, gpus_ ? 1 : 0};
    pending_.push_back(job);
    return pending_.back();
  }
  Decided Schedule(const QueueConfig& config = DefaultQueueConfig()) const {
    std::vector<const RunningJob*> running;
    for (const RunningJob& r : running_) running.push_back(&r);
    SchedulingDecisions d =
        ScheduleQueues(config, pending_, running, free_, kNow, SchedulingPolicy{});
    Decided out;
    for (size_t i = 0; i < pending_.size(); ++i) {
      const std::string id(pending_[i].job_id);
      JobDecision& job = d.jobs[i];
      if (!job.placement.empty()) {
        out.placed[id] = std::move(job.placement);
      } else if (!job.waiting.empty()) {
        out.waiting[id] = std::string(job.waiting);
      }
    }
    out.preemptions = std::move(d.preemptions);
    out.queues = std::move(d.queues);
    return out;
  }

 private:
  // Jobs view their names: they are kept here.
  std::string_view Keep(const std::string& name) { return names_.emplace_back(name); }

  std::deque<std::string> names_;

 public:
  // Workers added from now on are GPU workers, and jobs take a GPU a rank.
  bool gpus_ = false;

 private:
  std::vector<WorkerCapacity> free_;
  std::vector<RunningJob> running_;
  std::vector<PendingJob> pending_;
};

QueueConfig Queues(const std::string& yaml) {
  absl::StatusOr<QueueConfig> config = ParseQueueConfig(yaml);
  EXPECT_OK(config);
  return config.ok() ? *config : DefaultQueueConfig();
}

std::vector<std::string> Victims(const Decided& d) {
  std::vector<std::string> ids;
  for (const Preemption& p : d.preemptions) ids.push_back(p.victim);
  return ids;
}

TEST(ScheduleQueuesTest, TheHighestPriorityGoesFirst) {
  Snapshot s(1, 2);
  s.Pend("low", "default", 0, 2);
  s.Pend("high", "default", 1000, 2);
  Decided d = s.Schedule();
  EXPECT_EQ(d.placed.count("high"), 1u);
  EXPECT_EQ(d.waiting["low"],
            "1 job of higher priority ahead; needs 2 free slots, 0 free on 1 alive workers");
  s.Pend("higher", "default", 2000, 4);  // can never fit... on one 2-slot worker
  s.Pend("mid", "default", 500, 2);
  d = s.Schedule();
  EXPECT_EQ(d.waiting["higher"], "needs 4 slots; the cluster has 2 (waiting for workers to join)");
  EXPECT_EQ(d.placed.count("high"), 1u);
  EXPECT_EQ(d.waiting["mid"],
            "1 job of higher priority ahead; needs 2 free slots, 0 free on 1 alive workers")
      << "high is ahead; higher, which can never fit, is not";
}

TEST(ScheduleQueuesTest, WithinAQueueFirstComeFirstServedAndSmallJobsBackfill) {
  Snapshot s(2, 2);
  s.Run("old", "default", 100, 1, absl::Minutes(5));  // w0 has 1 free, w1 2
  s.Pend("a", "default", 100, 2);
  s.Pend("b", "default", 100, 2);
  s.Pend("c", "default", 100, 1);
  s.Pend("d", "default", 100, 1);
  Decided d = s.Schedule();
  ASSERT_EQ(d.placed.count("a"), 1u);
  EXPECT_EQ(d.waiting["b"], "needs 2 free slots, 1 free on 2 alive workers");
  EXPECT_EQ(d.placed.count("c"), 1u) << "b has not waited reserve_after: c starts before it";
  EXPECT_EQ(d.waiting["d"], "needs 1 free slots, 0 free on 2 alive workers");
}

TEST(ScheduleQueuesTest, ALongWaitReservesSlotsAndOthersBackfillOnlyElsewhere) {
  Snapshot s(0, 0);
  s.AddWorkers("b", 1, 2, {{"zone", "b"}});
  s.AddWorkers("a", 1, 2, {{"zone", "a"}});
  s.Run("holder", "default", 100, 1, absl::Minutes(5));  // on a1, the last of the best fits
  PendingJob& big = s.Pend("big", "default", 100, 2, absl::Seconds(61));
  big.request.selector = {{"zone", "a"}};
  s.Pend("small-1", "default", 100, 1);
  s.Pend("small-2", "default", 100, 1);
  s.Pend("small-3", "default", 100, 1);
  Decided d = s.Schedule();
  EXPECT_EQ(d.waiting["big"], "waiting for 1 slots; 1 reserved for it");
  EXPECT_EQ(d.placed.count("small-1"), 1u);
  EXPECT_EQ(d.placed.count("small-2"), 1u);
  EXPECT_EQ(d.placed["small-1"][0].worker_id, "b0");
  EXPECT_EQ(d.placed["small-2"][0].worker_id, "b0");
  EXPECT_EQ(d.waiting["small-3"], "needs 1 free slots, 0 free on 2 alive workers")
      << "the free slot of a1 is big's";
}

TEST(ScheduleQueuesTest, EqualPrioritiesShareIdleCapacityByWeight) {
  Snapshot s(1, 8);
  for (int i = 0; i < 8; ++i) {
    s.Pend(absl::StrCat("a-", i), "a", 100, 1);
    s.Pend(absl::StrCat("b-", i), "b", 100, 1);
  }
  Decided d = s.Schedule(
      Queues("queues:\n  - {name: a, weight: 1}\n  - {name: b, weight: 3}\ndefault_queue: a\n"));
  EXPECT_EQ(d.queues["a"].in_use.slots, 2);
  EXPECT_EQ(d.queues["b"].in_use.slots, 6);
  EXPECT_EQ(d.queues["a"].pending_jobs, 6);
  EXPECT_EQ(d.placed.count("a-0") + d.placed.count("a-1"), 2u) << "FIFO within each queue";
}

TEST(ScheduleQueuesTest, AQueueBorrowsUpToItsLimitAndNoFurther) {
  Snapshot s(1, 8);
  for (int i = 0; i < 8; ++i) s.Pend(absl::StrCat("a-", i), "a", 100, 1);
  Decided d =
      s.Schedule(Queues("queues:\n"
                        "  - {name: a, quota: {slots: 4}, limit: {slots: 6}}\n"
                        "  - {name: b, quota: {slots: 4}}\n"
                        "default_queue: a\n"));
  EXPECT_EQ(d.placed.size(), 6u);
  EXPECT_EQ(d.waiting["a-6"], "queue a at its limit (6 of 6 slots)");
  EXPECT_EQ(d.queues["a"].in_use.slots, 6);
  EXPECT_EQ(d.queues["b"].in_use.slots, 0);
}

TEST(ScheduleQueuesTest, AQueueTakesBackItsQuotaFromTheNewestBorrowedJobs) {
  Snapshot s(1, 8);
  s.Run("a-old", "a", 100, 4, absl::Minutes(30));
  s.Run("a-mid", "a", 100, 2, absl::Minutes(20));
  s.Run("a-new", "a", 100, 2, absl::Minutes(10));
  s.Pend("b-1", "b", 0, 2);  // lower priority than a's: quota wins anyway
  const QueueConfig config = Queues(
      "queues:\n"
      "  - {name: a, quota: {slots: 4}, limit: {slots: 8}}\n"
      "  - {name: b, quota: {slots: 4}}\n"
      "default_queue: a\n");
  Decided d = s.Schedule(config);
  EXPECT_EQ(Victims(d), std::vector<std::string>{"a-new"}) << "the newest, and only as needed";
  EXPECT_EQ(d.preemptions[0].preemptor, "b-1");
  EXPECT_EQ(d.waiting["b-1"], "preempting a-new; waiting for 2 slots; 0 reserved for it");
}

TEST(ScheduleQueuesTest, WithinAQueueLowestPriorityThenNewestButNotTheYoung) {
  Snapshot s(1, 4);
  s.Run("low-old", "default", 0, 1, absl::Minutes(30));
  s.Run("low-young", "default", 0, 1, absl::Seconds(30));
  s.Run("mid", "default", 50, 1, absl::Minutes(5));
  s.Run("high", "default", 1000, 1, absl::Minutes(5));  // not below the preemptor
  s.Pend("urgent", "default", 500, 1);
  Decided d = s.Schedule();
  EXPECT_EQ(Victims(d), std::vector<std::string>{"low-old"})
      << "low-young started under min_runtime ago";

  Snapshot young(1, 2);
  young.Run("low-young", "default", 0, 1, absl::Seconds(30));
  young.Run("mid-young", "default", 50, 1, absl::Seconds(10));
  young.Pend("urgent", "default", 500, 1);
  EXPECT_EQ(Victims(young.Schedule()), std::vector<std::string>{"low-young"})
      << "only the young can free enough: the lowest priority of them";
}

TEST(ScheduleQueuesTest, TheQuotaEntitlesAJobWithItsQueuesLowerPriorityJobsStopped) {
  const QueueConfig config =
      Queues("queues:\n  - {name: q, quota: {slots: 4}}\ndefault_queue: q\n");
  Snapshot s(1, 4);
  s.Run("low", "q", 0, 4, absl::Minutes(10));
  s.Pend("high", "q", 1000, 2);
  EXPECT_EQ(Victims(s.Schedule(config)), std::vector<std::string>{"low"})
      << "4 in use - 4 stopped + 2 is within the quota of 4";

  const QueueConfig small =
      Queues("queues:\n  - {name: q, quota: {slots: 2}, limit: {slots: 8}}\ndefault_queue: q\n");
  Snapshot over(1, 4);
  over.Run("low", "q", 0, 2, absl::Minutes(10));
  over.Run("other", "q", 100, 2, absl::Minutes(10));
  over.Pend("high", "q", 1000, 4);
  Decided d = over.Schedule(small);
  EXPECT_TRUE(d.preemptions.empty()) << "4 is more than the quota of 2 whatever is stopped";
  EXPECT_EQ(d.waiting["high"], "needs 4 free slots, 0 free on 1 alive workers");
}

TEST(ScheduleQueuesTest, EqualPriorityDoesNotPreemptAndNonPreemptibleIsNeverAVictim) {
  Snapshot s(1, 2);
  s.Run("peer", "default", 100, 1, absl::Minutes(5));
  s.Run("pinned", "default", 0, 1, absl::Minutes(5)).preemptible = false;
  s.Pend("next", "default", 100, 1);
  Decided d = s.Schedule();
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_EQ(d.waiting["next"], "needs 1 free slots, 0 free on 1 alive workers");
}

TEST(ScheduleQueuesTest, OnlyAsManyVictimsAsNeeded) {
  Snapshot s(1, 4);
  for (int i = 0; i < 4; ++i)
    s.Run(absl::StrCat("low-", i), "default", 0, 1, absl::Minutes(10 - i));
  s.Pend("urgent", "default", 1000, 2);
  Decided d = s.Schedule();
  EXPECT_EQ(Victims(d), (std::vector<std::string>{"low-3", "low-2"}));
}

TEST(ScheduleQueuesTest, AnElasticVictimShrinksBeforeItIsStopped) {
  Snapshot s(1, 4);
  s.Run("elastic", "default", 0, 4, absl::Minutes(10), /*min_ranks=*/1);
  s.Pend("urgent", "default", 1000, 2);
  Decided d = s.Schedule();
  ASSERT_EQ(Victims(d), std::vector<std::string>{"elastic"});
  EXPECT_EQ(d.preemptions[0].keep_ranks, 2);

  Snapshot rigid(1, 4);
  rigid.Run("elastic", "default", 0, 4, absl::Minutes(10), /*min_ranks=*/3);
  rigid.Pend("urgent", "default", 1000, 2);
  d = rigid.Schedule();
  ASSERT_EQ(Victims(d), std::vector<std::string>{"elastic"});
  EXPECT_EQ(d.preemptions[0].keep_ranks, 0) << "shrinking to its 3 ranks leaves 1 slot: it stops";
}

TEST(ScheduleQueuesTest, APreemptorReservesWhatItsVictimsFreeAndPreemptsNoMore) {
  Snapshot s(1, 2);
  s.Hold(1);  // the ranks of its victim, still stopping
  s.Run("low", "default", 0, 1, absl::Minutes(10));
  PendingJob& urgent = s.Pend("urgent", "default", 1000, 1);
  urgent.preemptor = true;
  s.Pend("other", "default", 1000, 1);
  Decided d = s.Schedule();
  EXPECT_EQ(d.waiting["urgent"], "waiting for 1 slots; 0 reserved for it");
  EXPECT_EQ(Victims(d), std::vector<std::string>{"low"}) << "other preempts for itself";
}

TEST(ScheduleQueuesTest, AUserRunsNoMoreThanTheQueueAllows) {
  Snapshot s(1, 8);
  s.Run("one", "a", 100, 1, absl::Minutes(1)).owner = "alice";
  s.Pend("two", "a", 100, 1).owner = "alice";
  s.Pend("bobs", "a", 100, 1).owner = "bob";
  Decided d = s.Schedule(
      Queues("queues:\n  - {name: a, max_running_jobs_per_user: 1}\ndefault_queue: a\n"));
  EXPECT_EQ(d.waiting["two"], "alice runs 1 jobs in queue a, its max_running_jobs_per_user");
  EXPECT_EQ(d.placed.count("bobs"), 1u);
}

// Users take turns within a queue, as Slurm's fair share does among
// associations: one user's backlog does not hold up another's first job.
TEST(ScheduleQueuesTest, WithinAQueueUsersTakeTurns) {
  Snapshot s(1, 3);
  s.Run("a0", "default", 100, 1, absl::Minutes(5)).owner = "alice";
  for (int i = 1; i <= 50; ++i) s.Pend(absl::StrCat("a", i), "default", 100, 1).owner = "alice";
  s.Pend("b1", "default", 100, 1).owner = "bob";
  s.Pend("b2", "default", 100, 1).owner = "bob";
  Decided d = s.Schedule();
  // Two free slots: alice runs a job already, so bob's first goes first;
  // then each runs one, and the older job goes.
  EXPECT_EQ(d.placed.count("b1"), 1u) << "bob waits behind alice's backlog";
  EXPECT_EQ(d.placed.count("a1"), 1u);
  EXPECT_EQ(d.placed.size(), 2u);
  // Priority still comes first.
  s.Pend("a-urgent", "default", 1000, 1).owner = "alice";
  d = s.Schedule();
  EXPECT_EQ(d.placed.count("a-urgent"), 1u);
  EXPECT_EQ(d.placed.count("b1"), 1u);
}

// What is lent is only what no job within its quota waits for: a borrower
// placed in the slots such a job needs would be preempted on the next pass.
TEST(ScheduleQueuesTest, NoJobBorrowsWhileAJobWithinItsQuotaWaitsForSlots) {
  const QueueConfig config = Queues(
      "queues:\n  - {name: team, quota: {slots: 8}}\n  - {name: guest}\n"
      "default_queue: team\n");
  Snapshot s(1, 4);
  s.Run("team-old", "team", 100, 2, absl::Minutes(5));
  s.Pend("guest-1", "guest", 1000, 1);  // earlier, and of a higher priority
  s.Pend("team-big", "team", 100, 3);
  Decided d = s.Schedule(config);
  EXPECT_EQ(d.placed.count("guest-1"), 0u);
  EXPECT_EQ(d.waiting["guest-1"],
            "would borrow, while a job within its queue's quota waits for slots; what is lent is "
            "only what no such job waits for");
  EXPECT_EQ(d.waiting["team-big"], "needs 3 free slots, 2 free on 1 alive workers");
}

// Capacity no queue within its quota can use (its queues at their limits) is
// lent, and a borrower placed in it is not taken back before min_runtime.
TEST(ScheduleQueuesTest, ABorrowerIsTakenBackOnlyAfterMinRuntime) {
  const QueueConfig config = Queues(
      "queues:\n  - {name: team, quota: {slots: 4}}\n  - {name: guest}\n"
      "default_queue: team\n");
  Snapshot s(1, 4);
  s.Run("team-old", "team", 100, 3, absl::Minutes(5));
  s.Run("guest-young", "guest", 100, 1, absl::Minutes(1));
  s.Pend("team-next", "team", 100, 1);
  Decided d = s.Schedule(config);
  EXPECT_TRUE(d.preemptions.empty()) << "guest-young has run 1 minute of its 2";
  Snapshot later(1, 4);
  later.Run("team-old", "team", 100, 3, absl::Minutes(5));
  later.Run("guest-old", "guest", 100, 1, absl::Minutes(3));
  later.Pend("team-next", "team", 100, 1);
  EXPECT_EQ(Victims(later.Schedule(config)), std::vector<std::string>{"guest-old"});
}

// A job preempted max_preemptions_per_hour times within the hour is no
// victim until the oldest of them is an hour old.
TEST(ScheduleQueuesTest, AJobPreemptedThreeTimesThisHourIsNotPreemptedAgain) {
  const QueueConfig config = Queues(
      "queues:\n  - {name: team, quota: {slots: 4}}\n  - {name: guest}\n"
      "default_queue: team\n");
  Snapshot s(1, 4);
  s.Run("team-old", "team", 100, 3, absl::Minutes(5));
  RunningJob& guest = s.Run("guest", "guest", 100, 1, absl::Minutes(3));
  guest.preempted_at = {kNow - absl::Minutes(59), kNow - absl::Minutes(30),
                        kNow - absl::Minutes(4)};
  s.Pend("team-next", "team", 100, 1);
  EXPECT_TRUE(s.Schedule(config).preemptions.empty());
  guest.preempted_at[0] = kNow - absl::Minutes(61);
  EXPECT_EQ(Victims(s.Schedule(config)), std::vector<std::string>{"guest"});
}

TEST(ScheduleQueuesTest, AJobOfAQueueNoLongerConfiguredRunsInTheDefaultQueue) {
  Snapshot s(1, 1);
  s.Pend("orphan", "removed", 100, 1);
  Decided d = s.Schedule();
  EXPECT_EQ(d.placed.count("orphan"), 1u);
  EXPECT_EQ(d.queues["default"].in_use.slots, 1);
}

// The worked example of docs/scheduling.md, step by step: three teams on
// 4 machines of 8 GPUs.
TEST(ScheduleQueuesTest, TheThreeTeamsOfTheSchedulingGuide) {
  const QueueConfig config = Queues(R"(queues:
  - name: vision
    weight: 2
    quota: {slots: 16, gpus: 16}
    limit: {slots: 32, gpus: 32}
  - name: nlp
    quota: {slots: 8, gpus: 8}
    limit: {slots: 16, gpus: 16}
  - name: interns
    limit: {slots: 8, gpus: 8}
default_queue: nlp
)");
  // 1. nlp alone: its quota, then 8 GPUs borrowed up to its limit.
  Snapshot s(0, 0);
  s.gpus_ = true;
  s.AddWorkers("gpu", 4, 8);
  for (int i = 1; i <= 5; ++i) s.Pend(absl::StrCat("nlp-", i), "nlp", 100, 4);
  Decided d = s.Schedule(config);
  EXPECT_EQ(d.placed.size(), 4u);
  EXPECT_EQ(d.waiting["nlp-5"], "queue nlp at its limit (16 of 16 GPUs)");

  // 2. The interns borrow what is left, up to their limit.
  Snapshot later(0, 0);
  later.gpus_ = true;
  later.AddWorkers("gpu", 4, 8);
  for (int i = 1; i <= 4; ++i) later.Run(absl::StrCat("nlp-", i), "nlp", 100, 4, absl::Hours(1));
  later.Run("intern-1", "interns", 0, 4, absl::Minutes(30));
  later.Run("intern-2", "interns", 0, 4, absl::Minutes(20));
  later.Pend("intern-3", "interns", 0, 4);
  d = later.Schedule(config);
  EXPECT_EQ(d.waiting["intern-3"], "queue interns at its limit (8 of 8 GPUs)");

  // 3. vision asks for its whole quota at once, with 8 GPUs free: the
  // interns' jobs, which borrow and have the lowest priority, are
  // preempted (the newest first); nlp's borrowed GPUs stay where they are,
  // as that is enough.
  later.Pend("vision-1", "vision", 100, 16);
  d = later.Schedule(config);
  EXPECT_EQ(Victims(d), (std::vector<std::string>{"intern-2", "intern-1"}));
  EXPECT_EQ(d.waiting["vision-1"],
            "preempting intern-2, intern-1; waiting for 8 GPU slots; 8 reserved for it");
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// Racks r0 and r1 of two hosts each.
GangRequest PackedByRack(int ranks) {
  GangRequest r{ranks, 0};
  r.placement.pack_level = 0;
  r.placement.pack_name = "rack";
  return r;
}

std::set<std::string> WorkersOf(const std::vector<RankPlacement>& placement) {
  std::set<std::string> ids;
  for (const RankPlacement& p : placement) ids.insert(p.worker_id);
  return ids;
}

TEST(ScheduleQueuesTest, AJobPackedByRackReservesInOneRackAndOthersBackfillTheOther) {
  Snapshot s(0, 0);
  s.AddRack("r0", 0, 2, 2);
  s.AddRack("r1", 1, 2, 2);
  s.RunOn("a", "r0h0", 1, absl::Minutes(5));  // 3 free in each rack
  s.RunOn("b", "r1h0", 1, absl::Minutes(5));
  PendingJob& big = s.Pend("big", "default", 100, 4, absl::Seconds(61));
  big.request = PackedByRack(4);
  for (int i = 0; i < 4; ++i) s.Pend(absl::StrCat("small-", i), "default", 100, 1);
  Decided d = s.Schedule();
  EXPECT_EQ(d.waiting["big"], "waiting for 1 slots; 3 reserved for it");
  std::set<std::string> backfilled;
  for (int i = 0; i < 3; ++i) {
    const std::string id = absl::StrCat("small-", i);
    ASSERT_EQ(d.placed.count(id), 1u) << id << ": " << d.waiting[id];
    for (const std::string& w : WorkersOf(d.placed[id])) backfilled.insert(w);
  }
  EXPECT_EQ(backfilled, (std::set<std::string>{"r1h0", "r1h1"}))
      << "the rack big reserves in is r0's, whole";
  EXPECT_EQ(d.placed.count("small-3"), 0u);
}

TEST(ScheduleQueuesTest, AJobPackedByRackPreemptsVictimsOfOneRackOnly) {
  Snapshot s(0, 0);
  s.AddRack("r0", 0, 2, 1);
  s.AddRack("r1", 1, 2, 1);
  // Oldest first: the newest, l3 (r1) then l2 (r0), are the first victims
  // looked at; l2 is spared, since r1 alone makes room.
  s.RunOn("l0", "r0h0", 1, absl::Minutes(10)).priority = 0;
  s.RunOn("l1", "r1h0", 1, absl::Minutes(9)).priority = 0;
  s.RunOn("l2", "r0h1", 1, absl::Minutes(8)).priority = 0;
  s.RunOn("l3", "r1h1", 1, absl::Minutes(7)).priority = 0;
  PendingJob& urgent = s.Pend("urgent", "default", 1000, 2);
  urgent.request = PackedByRack(2);
  Decided d = s.Schedule();
  std::vector<std::string> victims = Victims(d);
  std::sort(victims.begin(), victims.end());
  EXPECT_EQ(victims, (std::vector<std::string>{"l1", "l3"}));
}

TEST(ScheduleQueuesTest, AJobThatLostAWorkerGoesFirstAndOnlyItTakesASpare) {
  Snapshot s(2, 1);
  s.MakeSpare("w1");
  s.Pend("high", "default", 1000, 1);
  s.Pend("back", "default", 0, 2).request.recovering = true;
  Decided d = s.Schedule();
  ASSERT_EQ(d.placed.count("back"), 1u) << d.waiting["back"];
  std::set<std::string> workers;
  for (const RankPlacement& p : d.placed["back"]) workers.insert(p.worker_id);
  EXPECT_EQ(workers, (std::set<std::string>{"w0", "w1"}));
  EXPECT_EQ(d.waiting["high"], "needs 1 free slots, 0 free on 2 alive workers")
      << "ahead of it whatever its priority, and the spare is not for it";

  Snapshot idle(2, 1);
  idle.MakeSpare("w1");
  idle.Pend("a", "default", 0, 1);
  idle.Pend("b", "default", 0, 1);
  PendingJob& spare_ok = idle.Pend("c", "default", 0, 1);
  spare_ok.request.spare_ok = true;
  d = idle.Schedule();
  EXPECT_EQ(d.placed["a"][0].worker_id, "w0");
  EXPECT_EQ(d.placed.count("b"), 0u);
  EXPECT_EQ(d.placed["c"][0].worker_id, "w1");
}

TEST(ScheduleQueuesTest, ASpareOkJobGivesWayToAJobThatLostAWorkerWhateverItsPriority) {
  Snapshot s(2, 1);
  s.MakeSpare("w1");
  RunningJob& filler = s.RunOn("filler", "w1", 1, absl::Seconds(30));
  filler.request.spare_ok = true;
  filler.priority = 1000;
  RunningJob& other = s.RunOn("other", "w0", 1, absl::Minutes(10));
  other.priority = -10;
  s.Pend("back", "default", 0, 1).request.recovering = true;
  Decided d = s.Schedule();
  EXPECT_EQ(Victims(d), std::vector<std::string>{"filler"})
      << "young, of higher priority, but on the spare; the job of lower priority off the spare "
         "is not touched";

  // Its queue borrows to run it: a spare given back is not borrowed.
  Snapshot quota(2, 1);
  quota.MakeSpare("w1");
  RunningJob& kept_busy = quota.RunOn("filler", "w1", 1, absl::Minutes(10));
  kept_busy.request.spare_ok = true;
  kept_busy.queue = "b";
  quota.RunOn("b-job", "w0", 1, absl::Minutes(10)).queue = "b";
  quota.Pend("back", "a", 0, 1).request.recovering = true;
  d =
      quota.Schedule(Queues("queues:\n"
                            "  - {name: a, quota: {slots: 0}, limit: {slots: 2}}\n"
                            "  - {name: b, quota: {slots: 2}}\n"
                            "default_queue: a\n"));
  EXPECT_EQ(Victims(d), std::vector<std::string>{"filler"}) << d.waiting["back"];

  // A job that did not lose a worker does not take the spare back.
  Snapshot plain(2, 1);
  plain.MakeSpare("w1");
  RunningJob& kept = plain.RunOn("filler", "w1", 1, absl::Minutes(10));
  kept.request.spare_ok = true;
  plain.RunOn("busy", "w0", 1, absl::Minutes(10));
  plain.Pend("new", "default", 100, 1);
  d = plain.Schedule();
  EXPECT_TRUE(d.preemptions.empty()) << "an equal priority never preempts";
  EXPECT_EQ(d.placed.count("new"), 0u);
}

}  // namespace
}  // namespace ringmaster
