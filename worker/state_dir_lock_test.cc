#include "worker/state_dir_lock.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

TEST(StateDirLockTest, ASecondHolderIsRefusedUntilTheFirstLetsGo) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/w/state");
  absl::StatusOr<int> first = LockStateDir(dir);
  ASSERT_OK(first) << first.status();
  absl::StatusOr<int> second = LockStateDir(dir);
  ASSERT_THAT(second, IsError());
  EXPECT_THAT(second.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(second.status().message(),
            absl::StrCat("state dir ", dir, " is in use by another worker (pid ", getpid(),
                         "); give each worker its own --state-dir"));
  close(*first);
  absl::StatusOr<int> third = LockStateDir(dir);
  ASSERT_OK(third) << third.status();
  close(*third);
}

}  // namespace
}  // namespace ringmaster
