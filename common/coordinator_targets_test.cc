#include "common/coordinator_targets.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

const grpc::Status kRefused(grpc::StatusCode::UNAVAILABLE,
                            "not the leader: the leader is at 10.0.0.2:7070");
const grpc::Status kDown(grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses");

absl::Time Later() { return absl::Now() + absl::Seconds(30); }

TEST(CoordinatorTargetsTest, SplitsAListAndFindsTheLeaderNamed) {
  EXPECT_EQ(SplitAddresses(" a:1, b:2,,"), (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(LeaderNamedIn(kRefused.error_message()), "10.0.0.2:7070");
  EXPECT_EQ(LeaderNamedIn("not the leader, and no coordinator leads now"), "");
}

// Plaintext, a call's token would reach whatever listens at the address a
// standby names: only the addresses given are followed. With TLS, the
// channel checks the coordinator's certificate wherever it goes.
TEST(CoordinatorTargetsTest, PlaintextFollowsOnlyTheAddressesGiven) {
  CoordinatorTargets one("a:1", {});
  EXPECT_FALSE(one.Follow(kRefused, "a:1", Later()));
  EXPECT_EQ(one.Current(absl::ZeroDuration()).address, "a:1");
  CoordinatorTargets two("a:1,b:2", {});
  EXPECT_TRUE(two.Follow(kRefused, "a:1", Later()));
  EXPECT_EQ(two.Current(absl::ZeroDuration()).address, "b:2") << "the next one given";
  CoordinatorTargets checked("a:1", TlsFiles{"a CA", "", ""});
  EXPECT_TRUE(checked.Follow(kRefused, "a:1", Later()));
  EXPECT_EQ(checked.Current(absl::ZeroDuration()).address, "10.0.0.2:7070");
}

TEST(CoordinatorTargetsTest, GoesToTheLeaderAStandbyNamesAmongThoseGiven) {
  CoordinatorTargets targets("10.0.0.1:7070,10.0.0.2:7070", {});
  EXPECT_EQ(targets.Current(absl::ZeroDuration()).address, "10.0.0.1:7070");
  EXPECT_TRUE(targets.Follow(kRefused, "10.0.0.1:7070", Later()));
  EXPECT_EQ(targets.Current(absl::ZeroDuration()).address, "10.0.0.2:7070");
}

TEST(CoordinatorTargetsTest, TriesTheNextAddressWhenOneIsDown) {
  CoordinatorTargets targets("a:1,b:2,c:3", {});
  EXPECT_TRUE(targets.Follow(kDown, "a:1", Later()));
  EXPECT_EQ(targets.Current(absl::ZeroDuration()).address, "b:2");
  EXPECT_TRUE(targets.Follow(kDown, "b:2", Later()));
  EXPECT_TRUE(targets.Follow(kDown, "c:3", Later()));
  EXPECT_EQ(targets.Current(absl::ZeroDuration()).address, "a:1") << "round and round";
  // Another call already moved on: a late failure on `a:1`'s predecessor
  // does not move it again.
  EXPECT_TRUE(targets.Follow(kDown, "c:3", Later()));
  EXPECT_EQ(targets.Current(absl::ZeroDuration()).address, "a:1");
}

TEST(CoordinatorTargetsTest, AnAnswerOrAPassedDeadlineStands) {
  CoordinatorTargets targets("a:1,b:2", {});
  EXPECT_FALSE(targets.Follow(grpc::Status(grpc::StatusCode::NOT_FOUND, "no job"), "a:1", Later()));
  EXPECT_FALSE(targets.Follow(grpc::Status::OK, "a:1", Later()));
  EXPECT_FALSE(targets.Follow(kDown, "a:1", absl::Now() - absl::Seconds(1)));
  EXPECT_EQ(targets.Current(absl::ZeroDuration()).address, "a:1");
}

TEST(CoordinatorTargetsTest, AReadCancelledByItsServerIsMadeAgainElsewhere) {
  const grpc::Status cancelled(grpc::StatusCode::CANCELLED, "Cancelled");
  CoordinatorTargets targets("a:1,b:2", {});
  EXPECT_FALSE(targets.Follow(cancelled, "a:1", Later(), /*idempotent=*/false))
      << "a change may have been made before the cancel";
  EXPECT_TRUE(targets.Follow(cancelled, "a:1", Later(), /*idempotent=*/true));
  EXPECT_EQ(targets.Current(absl::ZeroDuration()).address, "b:2");
  CoordinatorTargets one("a:1", {});
  EXPECT_FALSE(one.Follow(cancelled, "a:1", Later(), /*idempotent=*/true));
}

TEST(CoordinatorTargetsTest, OneAddressIsCalledAgainOnlyToFollowALeader) {
  CoordinatorTargets one("a:1", TlsFiles{"a CA", "", ""});
  EXPECT_FALSE(one.Follow(kDown, "a:1", Later())) << "as before: the caller's retry policy";
  EXPECT_TRUE(one.Follow(kRefused, "a:1", Later()));
  EXPECT_EQ(one.Current(absl::ZeroDuration()).address, "10.0.0.2:7070");
}

}  // namespace
}  // namespace ringmaster
