#include "coordinator/core/history_fold.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

v1::StateChange Change(v1::JobState state, v1::Reason reason, const std::string& message,
                       int64_t time, int attempt = 0) {
  v1::StateChange change;
  change.set_state(state);
  change.set_reason(reason);
  change.set_message(message);
  change.set_time_unix_ms(time);
  change.set_attempt(attempt);
  return change;
}

// A history and the rows a store would hold of it, kept by what
// AppendToHistory returns, as JobTable hands it to the store.
struct Recorded {
  History history;
  std::vector<v1::StateChange> stored;
  int64_t now = 1000;

  void Append(v1::JobState state, v1::Reason reason, const std::string& message, int attempt = 0) {
    const int before = history.size();
    const int kept = AppendToHistory(Change(state, reason, message, ++now, attempt), &history);
    ASSERT_LE(kept, before);
    stored.resize(stored.size() - (before - kept));
    for (int i = kept; i < history.size(); ++i) stored.push_back(history.Get(i));
  }
  // One preemption and the way back to RUNNING: a new attempt.
  void Preempted(int attempt, const std::string& by) {
    Append(v1::RESTARTING, v1::PREEMPTED, "PREEMPTED by " + by, attempt - 1);
    Append(v1::PENDING, v1::RESTART_BACKOFF_DONE, absl::StrCat("attempt ", attempt), attempt);
    Append(v1::STARTING, v1::SCHEDULED, absl::StrCat("on w", attempt % 3), attempt);
    Append(v1::RUNNING, v1::RANKS_RUNNING, "all 2 ranks running", attempt);
  }
  std::string Lines() const {
    std::string lines;
    for (const v1::StateChange& c : history) {
      absl::StrAppend(&lines, v1::JobState_Name(c.state()), " ", v1::Reason_Name(c.reason()), " ",
                      c.message(), "\n");
    }
    return lines;
  }
};

void Started(Recorded& job) {
  job.Append(v1::PENDING, v1::SUBMITTED, "submitted");
  job.Append(v1::STARTING, v1::SCHEDULED, "on w0");
  job.Append(v1::RUNNING, v1::RANKS_RUNNING, "all 2 ranks running");
}

// Where the first fold is, or -1.
int FoldAt(const History& history) {
  for (int i = 0; i < history.size(); ++i) {
    if (history.Get(i).reason() == v1::HISTORY_FOLDED) return i;
  }
  return -1;
}

// The store's rows are the history, entry for entry, after each change.
void ExpectStoredAsHeld(const Recorded& job) {
  ASSERT_EQ(static_cast<int>(job.stored.size()), job.history.size());
  for (int i = 0; i < job.history.size(); ++i) {
    EXPECT_EQ(job.stored[i].SerializeAsString(), job.history.Get(i).SerializeAsString()) << i;
  }
}

TEST(HistoryFoldTest, APreemptionLoopKeepsItsFirstAndLatestRoundsAndCountsTheRest) {
  Recorded job;
  Started(job);
  for (int attempt = 1; attempt <= 100; ++attempt) {
    job.Preempted(attempt, absl::StrCat("short-", attempt));
    ExpectStoredAsHeld(job);
  }
  // 3 + 4 + fold + 4, not 403. A round is any 4 changes in a row that
  // repeat: the first to come three times is STARTING, RUNNING,
  // RESTARTING, PENDING.
  ASSERT_EQ(job.history.size(), 12) << job.Lines();
  EXPECT_EQ(job.history.Get(3).message(), "PREEMPTED by short-1") << "the first round, whole";
  const int at = FoldAt(job.history);
  ASSERT_EQ(at, 5) << job.Lines();
  const v1::StateChange& fold = job.history.Get(at);
  EXPECT_EQ(fold.folds(), 98);
  EXPECT_EQ(fold.fold_period(), 4);
  EXPECT_EQ(fold.message(), "the 4 changes before this came 98 more times");
  EXPECT_EQ(fold.attempt(), 99);
  EXPECT_EQ(fold.state(), v1::PENDING);
  EXPECT_EQ(fold.first_folded_unix_ms(), job.history.Get(at - 1).time_unix_ms() + 1);
  EXPECT_EQ(fold.time_unix_ms(), job.history.Get(at + 1).time_unix_ms() - 1);
  EXPECT_EQ(job.history.Get(8).message(), "PREEMPTED by short-100") << "the latest round, whole";
  EXPECT_EQ(job.history.Get(11).attempt(), 100);
}

TEST(HistoryFoldTest, TwoRoundsStayWholeAndTheThirdFolds) {
  Recorded job;
  Started(job);
  job.Preempted(1, "a");
  job.Preempted(2, "b");
  EXPECT_EQ(job.history.size(), 11) << job.Lines();
  job.Preempted(3, "c");
  ASSERT_EQ(job.history.size(), 12) << job.Lines();
  ASSERT_EQ(FoldAt(job.history), 5) << job.Lines();
  EXPECT_EQ(job.history.Get(5).folds(), 1);
  EXPECT_EQ(job.history.Get(5).message(), "the 4 changes before this came 1 more time");
  EXPECT_EQ(job.history.Get(8).message(), "PREEMPTED by c");
  ExpectStoredAsHeld(job);
}

TEST(HistoryFoldTest, ARepeatedNoteFoldsAlone) {
  Recorded job;
  Started(job);
  for (int i = 0; i < 50; ++i) {
    job.Append(v1::RUNNING, v1::RANK_STRAGGLING, absl::StrCat("straggler: rank 1 ", i));
  }
  ASSERT_EQ(job.history.size(), 6) << job.Lines();
  EXPECT_EQ(job.history.Get(4).fold_period(), 1);
  EXPECT_EQ(job.history.Get(4).folds(), 48);
  EXPECT_EQ(job.history.Get(5).message(), "straggler: rank 1 49");
  ExpectStoredAsHeld(job);
}

TEST(HistoryFoldTest, DifferentChangesDoNotFold) {
  Recorded job;
  Started(job);
  const v1::Reason reasons[] = {v1::RANK_EXITED, v1::RANK_SIGNALED, v1::WORKER_LOST};
  for (int attempt = 1; attempt <= 9; ++attempt) {
    job.Append(v1::RESTARTING, reasons[attempt % 3], "failed", attempt - 1);
    job.Append(v1::PENDING, v1::RESTART_BACKOFF_DONE, "again", attempt);
  }
  // Rounds of 6 (three failures) repeat: folded once they came three times.
  EXPECT_EQ(job.history.size(), 3 + 6 + 1 + 6) << job.Lines();
  EXPECT_EQ(job.history.Get(9).fold_period(), 6);
  ExpectStoredAsHeld(job);
}

TEST(HistoryFoldTest, RoundsLongerThanTheLongestFoldStayWhole) {
  Recorded job;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i <= kMaxFoldPeriod; ++i) {
      job.Append(i % 2 ? v1::RUNNING : v1::RESTARTING, static_cast<v1::Reason>(1 + i), "x");
    }
  }
  EXPECT_EQ(job.history.size(), 4 * (kMaxFoldPeriod + 1));
}

TEST(HistoryFoldTest, ALoopAfterAFoldOfAnotherKindFoldsOnItsOwn) {
  Recorded job;
  Started(job);
  for (int i = 0; i < 5; ++i) job.Append(v1::RUNNING, v1::RANK_STRAGGLING, "slow");
  for (int attempt = 1; attempt <= 6; ++attempt) job.Preempted(attempt, "p");
  // 3, note, fold, note, then 4 + fold + 4.
  ASSERT_EQ(job.history.size(), 3 + 3 + 9) << job.Lines();
  EXPECT_EQ(job.history.Get(4).folds(), 3);
  EXPECT_EQ(job.history.Get(10).folds(), 4);
  ExpectStoredAsHeld(job);
}

TEST(HistoryFoldTest, TheLastEntryIsAlwaysTheChangeAppended) {
  Recorded job;
  Started(job);
  for (int attempt = 1; attempt <= 20; ++attempt) {
    job.Preempted(attempt, "p");
    EXPECT_EQ(job.history.Get(job.history.size() - 1).time_unix_ms(), job.now);
    EXPECT_EQ(job.history.Get(job.history.size() - 1).reason(), v1::RANKS_RUNNING);
  }
}

}  // namespace
}  // namespace ringmaster
