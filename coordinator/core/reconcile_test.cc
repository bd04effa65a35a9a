#include "coordinator/core/reconcile.h"

#include <map>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

v1::Job MakeJob(const std::string& id, v1::JobState state, int attempt,
                std::vector<std::pair<std::string, v1::RankState>> ranks) {
  v1::Job job;
  job.set_id(id);
  job.set_state(state);
  job.set_attempt(attempt);
  for (auto& [worker, rank_state] : ranks) {
    v1::RankStatus* r = job.add_ranks();
    r->set_rank(job.ranks_size() - 1);
    r->set_worker_id(worker);
    r->set_worker_incarnation(worker + "-a");
    r->set_state(rank_state);
  }
  return job;
}

v1::RunningRank Alive(const std::string& job, int attempt, int rank) {
  v1::RunningRank r;
  r.mutable_rank()->set_job_id(job);
  r.mutable_rank()->set_attempt(attempt);
  r.mutable_rank()->set_rank(rank);
  return r;
}

class ReconcileTest : public ::testing::Test {
 protected:
  void Add(v1::Job job) { jobs_[job.id()] = std::move(job); }
  Reconciliation Run(const std::string& incarnation, std::vector<v1::RunningRank> alive) {
    RunningRanks running;
    for (auto& r : alive) *running.Add() = r;
    std::vector<const v1::Job*> jobs;
    for (auto& [id, job] : jobs_) jobs.push_back(&job);
    return ReconcileWorker(jobs, Find(), "w1", incarnation, running);
  }
  JobLookup Find() {
    return [this](const std::string& id) -> const v1::Job* {
      auto it = jobs_.find(id);
      return it == jobs_.end() ? nullptr : &it->second;
    };
  }
  std::map<std::string, v1::Job> jobs_;
};

using Pairs = std::vector<std::pair<std::string, int>>;

TEST_F(ReconcileTest, RunningRanksStayMissingOnesAreGone) {
  Add(MakeJob("a", v1::RUNNING, 0, {{"w1", v1::RANK_RUNNING}, {"w1", v1::RANK_RUNNING}}));
  Reconciliation plan = Run("w1-a", {Alive("a", 0, 0)});
  EXPECT_EQ(plan.gone, (Pairs{{"a", 1}}));
  EXPECT_TRUE(plan.resend.empty());
  EXPECT_TRUE(plan.stop.empty());
}

TEST_F(ReconcileTest, NeverStartedOnTheSameProcessIsSentAgain) {
  Add(MakeJob("a", v1::STARTING, 0, {{"w1", v1::RANK_ASSIGNED}}));
  EXPECT_EQ(Run("w1-a", {}).resend, (Pairs{{"a", 0}}));
  EXPECT_EQ(Run("w1-restarted", {}).gone, (Pairs{{"a", 0}}))
      << "a restarted worker process cannot have it";
}

TEST_F(ReconcileTest, RanksOfEndedAttemptsAndUnknownJobsAreStopped) {
  Add(MakeJob("a", v1::RUNNING, 1, {{"w1", v1::RANK_RUNNING}}));
  Add(MakeJob("b", v1::CANCELLED, 0, {{"w1", v1::RANK_RUNNING}}));
  Reconciliation plan =
      Run("w1-a", {Alive("a", 0, 0), Alive("a", 1, 0), Alive("b", 0, 0), Alive("zz", 3, 0)});
  EXPECT_EQ(plan.stop, (std::set<std::pair<std::string, int>>{{"a", 0}, {"b", 0}, {"zz", 3}}));
  EXPECT_TRUE(plan.gone.empty());
}

TEST_F(ReconcileTest, OtherWorkersRanksAreNotItsConcern) {
  Add(MakeJob("a", v1::RUNNING, 0, {{"w2", v1::RANK_RUNNING}}));
  Reconciliation plan = Run("w1-a", {Alive("a", 0, 0)});
  EXPECT_TRUE(plan.gone.empty());
  EXPECT_EQ(plan.stop.size(), 1u) << "w1 runs a rank placed on w2";
}

}  // namespace
}  // namespace ringmaster
