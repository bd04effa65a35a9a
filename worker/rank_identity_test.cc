#include "worker/rank_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs worker/testing/spawn_as (copied where another user may run it) as
// `setpriv` makes it, printing the rank's identity lines of /proc.
class RankIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: setpriv drops to other users";
    if (system("command -v setpriv > /dev/null") != 0) GTEST_SKIP() << "setpriv not installed";
    char dir[] = "/tmp/rank-identity-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    chmod(dir_.c_str(), 0777);
    fs::copy_file(testing::Runfile("worker/testing/spawn_as"), dir_ + "/spawn_as");
    chmod((dir_ + "/spawn_as").c_str(), 0755);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Exit code of spawn_as under `setpriv_flags`; the rank's output in *out,
  // spawn_as's errors in *err.
  int Run(const std::string& setpriv_flags, const std::string& rank_user, std::string* out,
          std::string* err) {
    const std::string command = absl::StrCat(
        "setpriv ", setpriv_flags, " ", dir_, "/spawn_as '", rank_user, "' ", dir_,
        "/out.txt grep -E '^(Uid|Gid|CapPrm|CapEff|CapAmb|NoNewPrivs)' /proc/self/status 2> ", dir_,
        "/err.txt");
    const int status = system(command.c_str());
    *out = ReadFile(dir_ + "/out.txt");
    *err = ReadFile(dir_ + "/err.txt");
    fs::remove(dir_ + "/out.txt");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string dir_;
};

constexpr char kAsUser65533[] = "--reuid=65533 --regid=65533 --clear-groups";
constexpr char kNoCapabilities[] = "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n";

TEST_F(RankIdentityTest, ARootWorkerRunsRanksAsNobodyWhenAsked) {
  std::string out, err;
  ASSERT_EQ(Run("", "nobody", &out, &err), 0) << err;
  EXPECT_NE(out.find("Uid:\t65534\t65534\t65534\t65534"), std::string::npos) << out;
  EXPECT_NE(out.find(kNoCapabilities), std::string::npos) << out;
  EXPECT_NE(out.find("NoNewPrivs:\t1"), std::string::npos) << out;
}

// The systemd unit's worker: not root, with CAP_SETUID and CAP_SETGID as
// ambient capabilities. Its ranks keep no capability.
TEST_F(RankIdentityTest, AWorkerWithAmbientCapabilitiesHandsNoneOnToItsRanks) {
  std::string out, err;
  ASSERT_EQ(
      Run(absl::StrCat(kAsUser65533, " --inh-caps=+setuid,+setgid --ambient-caps=+setuid,+setgid"),
          "nobody", &out, &err),
      0)
      << err;
  EXPECT_NE(out.find("Uid:\t65534\t65534\t65534\t65534"), std::string::npos) << out;
  EXPECT_NE(out.find(kNoCapabilities), std::string::npos) << out;
  EXPECT_NE(out.find("CapAmb:\t0000000000000000"), std::string::npos) << out;
  EXPECT_NE(out.find("NoNewPrivs:\t1"), std::string::npos) << out;
}

TEST_F(RankIdentityTest, AWorkerWithoutThemRunsRanksAsItselfAndRefusesOtherUsers) {
  std::string out, err;
  ASSERT_EQ(Run(kAsUser65533, "", &out, &err), 0) << err;
  EXPECT_NE(out.find("Uid:\t65533\t65533\t65533\t65533"), std::string::npos) << out;
  EXPECT_EQ(Run(kAsUser65533, "nobody", &out, &err), 3);
  EXPECT_NE(err.find("--rank-user nobody needs a worker running as root or with CAP_SETUID"),
            std::string::npos)
      << err;
}

TEST(RankIdentityNamesTest, AnUnknownUserIsNamed) {
  absl::StatusOr<std::optional<RunAs>> as = RankIdentity("no-such-user-xyz");
  EXPECT_THAT(as.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(as.status().message().find("no user \"no-such-user-xyz\""), absl::string_view::npos)
      << as.status();
}

TEST(UidRangeTest, ParsesFirstToLastAndNamesTheFlagOtherwise) {
  absl::StatusOr<UidRange> range = ParseUidRange("200000-265535");
  ASSERT_OK(range) << range.status();
  EXPECT_EQ(range->first, 200000u);
  EXPECT_EQ(range->count, 65536u);
  for (const std::string bad : {"", "200000", "5-10", "300-200", "a-b", "1000-2147483647"}) {
    absl::StatusOr<UidRange> refused = ParseUidRange(bad);
    EXPECT_THAT(refused.status(), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
    EXPECT_NE(refused.status().message().find("--rank-uid-range \"" + bad + "\""),
              absl::string_view::npos)
        << refused.status();
  }
}

class RankIdentitiesTest : public ::testing::Test {
 protected:
  void SetUp() override { jobs_ = testing::MakeTempDir("jobs"); }
  std::string jobs_;
};

TEST_F(RankIdentitiesTest, EachJobHasTheUidOfItsNumberInTheRange) {
  const RankIdentities ids = RankIdentities::PerJob({300000, 1000}, jobs_);
  EXPECT_TRUE(ids.per_job());
  absl::StatusOr<std::optional<RunAs>> train = ids.ForJob("train-7");
  ASSERT_OK(train) << train.status();
  ASSERT_TRUE(train->has_value());
  EXPECT_EQ((*train)->uid, 300007u);
  EXPECT_EQ((*train)->gid, 300007u);
  EXPECT_TRUE((*train)->groups.empty()) << "no supplementary groups";
  EXPECT_EQ((*train)->home, jobs_ + "/train-7/home");
  EXPECT_EQ((**ids.ForJob("eval-1007")).uid, 300007u) << "the number modulo the range";
  EXPECT_EQ((**ids.ForJob("eval-8")).uid, 300008u);
  EXPECT_EQ(ids.Describe(), "a uid of its own per job, from 300000-300999");
}

TEST_F(RankIdentitiesTest, AUidStillHeldByAnotherJobsFilesIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the files must belong to the uid";
  const RankIdentities ids = RankIdentities::PerJob({300000, 1000}, jobs_);
  fs::create_directories(jobs_ + "/train-7/home");
  ASSERT_EQ(chown((jobs_ + "/train-7/home").c_str(), 300007, 300007), 0);
  EXPECT_OK(ids.ForJob("train-7")) << "its own files";
  absl::StatusOr<std::optional<RunAs>> later = ids.ForJob("eval-1007");
  EXPECT_THAT(later.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(later.status().message(),
            "uid 300007 of job eval-1007 is still held by the files of job train-7 on this "
            "worker; delete job train-7 first");
  fs::remove_all(jobs_ + "/train-7");
  EXPECT_OK(ids.ForJob("eval-1007")) << "deleted, the uid is free";
}

TEST(ChooseRankIdentitiesTest, RankUserWinsAndBothAreRefused) {
  absl::StatusOr<RankIdentities> both = ChooseRankIdentities("nobody", "300000-300999", "/x");
  EXPECT_THAT(both.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<RankIdentities> bad = ChooseRankIdentities("", "9-1", "/x");
  EXPECT_THAT(bad.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  if (geteuid() != 0) return;
  absl::StatusOr<RankIdentities> shared = ChooseRankIdentities("nobody", "", "/x");
  ASSERT_OK(shared) << shared.status();
  EXPECT_FALSE(shared->per_job());
  EXPECT_EQ((**shared->ForJob("train-7")).name, "nobody");
  absl::StatusOr<RankIdentities> per_job = ChooseRankIdentities("", "", "/x");
  ASSERT_OK(per_job) << per_job.status();
  EXPECT_TRUE(per_job->per_job()) << "a root worker's default";
  EXPECT_EQ((**per_job->ForJob("train-7")).uid, 200007u);
}

}  // namespace
}  // namespace ringmaster
