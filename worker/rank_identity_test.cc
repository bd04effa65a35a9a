#include "worker/rank_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/test_util.h"

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
        "/out.txt grep -E '^(Uid|Gid|CapPrm|CapEff|CapAmb|NoNewPrivs)' /proc/self/status 2> ",
        dir_, "/err.txt");
    const int status = system(command.c_str());
    *out = ReadFile(dir_ + "/out.txt");
    *err = ReadFile(dir_ + "/err.txt");
    fs::remove(dir_ + "/out.txt");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string dir_;
};

constexpr char kAsUser65533[] = "--reuid=65533 --regid=65533 --clear-groups";
constexpr char kNoCapabilities[] =
    "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n";

TEST_F(RankIdentityTest, ARootWorkerRunsRanksAsNobodyByDefault) {
  std::string out, err;
  ASSERT_EQ(Run("", "", &out, &err), 0) << err;
  EXPECT_NE(out.find("Uid:\t65534\t65534\t65534\t65534"), std::string::npos) << out;
  EXPECT_NE(out.find(kNoCapabilities), std::string::npos) << out;
  EXPECT_NE(out.find("NoNewPrivs:\t1"), std::string::npos) << out;
}

// The systemd unit's worker: not root, with CAP_SETUID and CAP_SETGID as
// ambient capabilities. Its ranks run as nobody and keep no capability.
TEST_F(RankIdentityTest, AWorkerWithAmbientCapabilitiesHandsNoneOnToItsRanks) {
  std::string out, err;
  ASSERT_EQ(Run(absl::StrCat(kAsUser65533,
                             " --inh-caps=+setuid,+setgid --ambient-caps=+setuid,+setgid"),
                "", &out, &err),
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
  EXPECT_EQ(as.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(as.status().message().find("no user \"no-such-user-xyz\""), absl::string_view::npos)
      << as.status();
}

}  // namespace
}  // namespace ringmaster
