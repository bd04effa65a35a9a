#include "coordinator/core/attempt_placement.h"
#include "testing/status_matchers.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

// Places `workers[r]` for each rank r in the job's current attempt.
void Place(v1::Job* job, const std::vector<std::string>& workers) {
  job->clear_ranks();
  for (size_t r = 0; r < workers.size(); ++r) {
    v1::RankStatus* rank = job->add_ranks();
    rank->set_rank(static_cast<int>(r));
    rank->set_worker_id(workers[r]);
    rank->set_worker_address(workers[r] + ":7071");
  }
}

// What AdvanceRestartsLocked does between attempts.
void NextAttempt(v1::Job* job) {
  KeepPastAttempt(job);
  job->set_attempt(job->attempt() + 1);
  job->clear_ranks();
}

std::string Workers(const std::vector<RankLogSource>& sources) {
  std::string out;
  for (const RankLogSource& s : sources) {
    out += std::to_string(s.rank) + "@" + s.worker_id + "(" + s.worker_address + ") ";
  }
  return out;
}

TEST(AttemptPlacementTest, EachAttemptsRanksAreFoundWhereTheyRan) {
  v1::Job job;
  job.set_id("j-1");
  Place(&job, {"w1", "w1", "w2"});
  NextAttempt(&job);
  Place(&job, {"w3", "w2", "w3"});
  EXPECT_EQ(Workers(*AttemptRanks(job, 0)), "0@w1(w1:7071) 1@w1(w1:7071) 2@w2(w2:7071) ");
  EXPECT_EQ(Workers(*AttemptRanks(job, 1)), "0@w3(w3:7071) 1@w2(w2:7071) 2@w3(w3:7071) ");
  EXPECT_EQ(PlacedAttempts(job), (std::vector<int>{0, 1}));
  // Each worker is kept once, a rank by its index.
  ASSERT_EQ(job.past_attempts_size(), 1);
  EXPECT_EQ(job.past_attempts(0).worker_ids_size(), 2);
  EXPECT_EQ(job.past_attempts(0).rank_workers_size(), 3);
}

TEST(AttemptPlacementTest, AnAttemptNotPlacedOrNotKeptIsNotFoundSayingWhy) {
  v1::Job job;
  job.set_id("j-2");
  EXPECT_TRUE(PlacedAttempts(job).empty());
  EXPECT_EQ(AttemptRanks(job, 0).status().message(), "attempt 0 of job j-2 has placed no ranks");
  for (int attempt = 0; attempt <= kKeptPastAttempts + 2; ++attempt) {
    Place(&job, {"w" + std::to_string(attempt)});
    NextAttempt(&job);
  }
  // Attempts 0..12 ran; 13 is pending.
  EXPECT_EQ(job.past_attempts_size(), kKeptPastAttempts);
  EXPECT_EQ(PlacedAttempts(job).front(), 3);
  EXPECT_EQ(PlacedAttempts(job).back(), 12);
  EXPECT_EQ(Workers(*AttemptRanks(job, 3)), "0@w3(w3:7071) ");
  EXPECT_THAT(AttemptRanks(job, 2).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(AttemptRanks(job, 2).status().message(),
            "where attempt 2 of job j-2 ran is no longer kept (the last 10 attempts' placements "
            "are)");
  EXPECT_EQ(AttemptRanks(job, 14).status().message(),
            "job j-2 has no attempt 14: its attempts are 0..13");
  EXPECT_THAT(AttemptRanks(job, -1).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(AttemptRanks(job, 13).status().message(), "attempt 13 of job j-2 has placed no ranks");
}

// An attempt that ended before placing ranks (a deadline while pending)
// leaves nothing to keep.
TEST(AttemptPlacementTest, AnAttemptWithoutRanksIsNotKept) {
  v1::Job job;
  NextAttempt(&job);
  EXPECT_EQ(job.past_attempts_size(), 0);
}

}  // namespace
}  // namespace ringmaster
