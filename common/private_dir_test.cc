#include "common/private_dir.h"
#include "testing/status_matchers.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(PrivateDirTest, CreatesWithTheModeAndTightensAnOpenOne) {
  const std::string root = std::getenv("TEST_TMPDIR");
  ASSERT_OK(MakePrivateDir(root + "/a/b"));
  EXPECT_EQ(ModeOf(root + "/a/b"), 0700u);
  std::filesystem::create_directories(root + "/open");
  chmod((root + "/open").c_str(), 0777);
  ASSERT_OK(MakePrivateDir(root + "/open", 0750));
  EXPECT_EQ(ModeOf(root + "/open"), 0750u);
  EXPECT_THAT(MakePrivateDir("/proc/self/nope"), StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace ringmaster
