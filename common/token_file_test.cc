#include "common/token_file.h"
#include "testing/status_matchers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

std::string Write(const std::string& name, const std::string& text, mode_t mode) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
  return path;
}

TEST(TokenFileTest, ReadsAnOwnerOnlyFile) {
  absl::StatusOr<std::string> token = ReadToken(Write("ok", "  s3cret\n", 0600));
  ASSERT_OK(token) << token.status();
  EXPECT_EQ(*token, "s3cret");
  EXPECT_OK(ReadToken(Write("ro", "s3cret", 0400)));
}

TEST(TokenFileTest, RefusesFilesOthersCanReadAndSaysWhy) {
  const std::string open = Write("open", "s3cret", 0644);
  EXPECT_EQ(ReadToken(open).status().message(),
            "token file " + open + " is open to group or others (mode 0644); chmod 600 " + open);
  EXPECT_THAT(ReadToken(Write("group-writable", "s3cret", 0660)), IsError());
  const std::string empty = Write("empty", "\n", 0600);
  EXPECT_EQ(ReadToken(empty).status().message(), "token file " + empty + " is empty");
  EXPECT_THAT(ReadToken("/nonexistent/token").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(ReadToken(std::getenv("TEST_TMPDIR")), IsError()) << "a directory";
}

// A Kubernetes Secret mounted for a non-root container: root:fsGroup 0440.
TEST(TokenFileTest, GroupMayReadOnlyARootOwnedFile) {
  const std::string mounted = Write("mounted", "s3cret", 0440);
  if (geteuid() != 0) GTEST_SKIP() << "needs root to own the file as root and as another user";
  ASSERT_EQ(chown(mounted.c_str(), 0, 65534), 0);
  EXPECT_OK(ReadToken(mounted));
  ASSERT_EQ(chown(mounted.c_str(), 65534, 65534), 0);
  EXPECT_THAT(ReadToken(mounted).status(), StatusIs(absl::StatusCode::kFailedPrecondition))
      << "a group may read only what root owns";
}

TEST(TokenFileTest, WithoutAFileTheEnvironmentOrNothing) {
  unsetenv("RINGMASTER_TOKEN");
  EXPECT_EQ(*ReadToken(""), "");
  setenv("RINGMASTER_TOKEN", "from-env", 1);
  EXPECT_EQ(*ReadToken(""), "from-env");
  unsetenv("RINGMASTER_TOKEN");
}

}  // namespace
}  // namespace ringmaster
