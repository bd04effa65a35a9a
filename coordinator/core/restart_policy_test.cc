#include "coordinator/core/restart_policy.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(RestartBackoffTest, DoublesUpToTheCapWithJitterInTheUpperHalf) {
  BackoffOptions options{absl::Seconds(1), absl::Seconds(60)};
  const absl::Duration expected[] = {absl::Seconds(1),  absl::Seconds(2),  absl::Seconds(4),
                                     absl::Seconds(8),  absl::Seconds(16), absl::Seconds(32),
                                     absl::Seconds(60), absl::Seconds(60)};
  for (int n = 0; n < 8; ++n) {
    EXPECT_EQ(RestartBackoff(options, n, 0.0), expected[n] / 2) << "restart " << n;
    EXPECT_EQ(RestartBackoff(options, n, 0.5), expected[n] * 3 / 4) << "restart " << n;
    EXPECT_LT(RestartBackoff(options, n, 0.999999), expected[n]) << "restart " << n;
    EXPECT_GE(RestartBackoff(options, n, 0.999999), expected[n] * 0.99) << "restart " << n;
  }
  EXPECT_EQ(RestartBackoff(options, 1000, 1.0), absl::Seconds(60)) << "no overflow";
}

FailureCause Cause(v1::Reason reason, int rank, int code = 0, int signal = 0) {
  FailureCause c;
  c.reason = reason;
  c.rank = rank;
  c.exit_code = code;
  c.signal = signal;
  return c;
}

TEST(FailureCauseTest, RootCausesOutrankTheirSymptoms) {
  const FailureCause exited = Cause(v1::RANK_EXITED, 0, 1);
  const FailureCause killed = Cause(v1::RANK_SIGNALED, 1, 0, 9);
  const FailureCause lost = Cause(v1::WORKER_LOST, 1);
  const FailureCause oom = Cause(v1::RANK_OOM, 1, 0, 9);
  const FailureCause hung = Cause(v1::RANK_HUNG, 1);
  EXPECT_TRUE(MoreTelling(killed, exited));
  EXPECT_FALSE(MoreTelling(exited, killed));
  EXPECT_TRUE(MoreTelling(lost, killed));
  EXPECT_TRUE(MoreTelling(oom, killed));
  EXPECT_TRUE(MoreTelling(hung, killed));
  EXPECT_FALSE(MoreTelling(exited, exited)) << "the first of equals stays";
  EXPECT_FALSE(Decisive(exited)) << "a non-zero exit is often a peer's symptom";
  EXPECT_TRUE(Decisive(killed));
  EXPECT_TRUE(Decisive(lost));
}

TEST(FailFastTest, SameRankSameWayWithoutProgressRepeats) {
  FailureCause first = Cause(v1::RANK_EXITED, 1, 3);
  FailureCause again = Cause(v1::RANK_EXITED, 1, 3);
  EXPECT_TRUE(RepeatsWithoutProgress(first, again));
  again.progressed = true;
  EXPECT_FALSE(RepeatsWithoutProgress(first, again)) << "progress in between";
  EXPECT_FALSE(RepeatsWithoutProgress(first, Cause(v1::RANK_EXITED, 0, 3))) << "another rank";
  EXPECT_FALSE(RepeatsWithoutProgress(first, Cause(v1::RANK_EXITED, 1, 4))) << "another code";
  EXPECT_FALSE(RepeatsWithoutProgress(first, Cause(v1::RANK_SIGNALED, 1, 0, 9)));
  EXPECT_FALSE(RepeatsWithoutProgress(Cause(v1::WORKER_LOST, 1), Cause(v1::WORKER_LOST, 1)))
      << "a lost worker is not the rank's failure";
  EXPECT_TRUE(RepeatsWithoutProgress(Cause(v1::RANK_HUNG, 1), Cause(v1::RANK_HUNG, 1)));
}

}  // namespace
}  // namespace ringmaster
