#include "common/checkpoint_roots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

TEST(CheckpointRootsTest, ParsesAbsoluteRoots) {
  EXPECT_THAT(ParseCheckpointRoots("/srv/ckpt/, /data", "--checkpoint-roots"),
              IsOkAndHolds(std::vector<std::string>{"/srv/ckpt", "/data"}));
  EXPECT_THAT(ParseCheckpointRoots("ckpt", "--checkpoint-roots"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--checkpoint-roots: \"ckpt\" is not an absolute path without \"..\""));
  EXPECT_THAT(ParseCheckpointRoots("/srv/../etc", "--checkpoint-roots"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CheckpointRootsTest, ADirectoryByItsWordsIsARootOrBelowOne) {
  const std::vector<std::string> roots = {"/srv/ckpt", "/data"};
  EXPECT_OK(CheckCheckpointDir("/srv/ckpt", roots));
  EXPECT_OK(CheckCheckpointDir("/srv/ckpt/team-a/", roots));
  EXPECT_OK(CheckCheckpointDir("/data/x", roots));
  EXPECT_THAT(CheckCheckpointDir("/etc", roots),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "checkpoint_dir: /etc is not in a checkpoint root this cluster allows "
                       "(/srv/ckpt, /data); the coordinator's --checkpoint-roots says which"));
  EXPECT_THAT(CheckCheckpointDir("/srv/ckptx", roots),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CheckCheckpointDir("/srv/ckpt/../../etc", roots),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("\"..\"")));
}

TEST(CheckpointRootsTest, AWorkerOpensOnlyWhatResolvesIntoARoot) {
  const std::string root = testing::MakeTempDir("ckpt-root");
  const std::string outside = testing::MakeTempDir("elsewhere");
  ASSERT_EQ(mkdir((root + "/team").c_str(), 0755), 0);
  ASSERT_EQ(symlink(outside.c_str(), (root + "/escape").c_str()), 0);
  const std::string via = testing::MakeTempDir("links") + "/root";
  ASSERT_EQ(symlink(root.c_str(), via.c_str()), 0);

  EXPECT_THAT(OpenCheckpointDir(root + "/team", {root}),
              IsOkAndHolds(::testing::Field(&CheckpointDir::is_root, false)));
  EXPECT_THAT(OpenCheckpointDir(root, {root}),
              IsOkAndHolds(::testing::Field(&CheckpointDir::is_root, true)));
  EXPECT_OK(OpenCheckpointDir(via + "/team", {root})) << "a root reached through a link";
  EXPECT_OK(OpenCheckpointDir(root + "/team", {via})) << "a root named through a link";
  EXPECT_THAT(OpenCheckpointDir(root + "/escape", {root}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       ::testing::HasSubstr("(" + outside + ") is not in a checkpoint root")));
  EXPECT_THAT(OpenCheckpointDir("/etc", {root}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       ::testing::HasSubstr("checkpoint_dir /etc is not in a checkpoint root")));
  EXPECT_THAT(OpenCheckpointDir(root + "/missing", {root}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "checkpoint_dir " + root + "/missing: No such file or directory"));
}

}  // namespace
}  // namespace ringmaster
