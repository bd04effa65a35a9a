// The files a root worker reads where a rank may write: each rank's own
// directory (jobs/<job>/rank-R.error/) holds its error file, the
// trainer's flight record and Python's stacks, which the worker reads when
// the rank fails or when its stacks are taken. A hostile rank puts in place
// of each a link to a file only root may read, a link into another job's
// home, or a FIFO, and then makes the worker read it (`ringmaster stacks`,
// or failing). Nothing may reach the job's log or error, and the worker
// must go on answering. The rank may write nowhere else the worker keeps
// the job's files, and the links it leaves are not followed when the job is
// deleted.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

class RankFilesTest : public ClusterTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: the attack is on a root worker's reads";
    up_args_ = {"--rank-uid-range", "310000-310999"};
    state_parent_ = "/tmp";  // ranks of other users pass through it
    up_workers_ = 1;
    up_slots_ = 4;
    ClusterTest::SetUp();
    // The ranks' program, and a secret of root's in the JSON of an error
    // file, so that the error file's reader would show it too.
    script_ = state_dir_ + "/rank_file_attack.py";
    fs::copy_file(testing::Runfile("tests/rank_file_attack.py"), script_);
    chmod(script_.c_str(), 0644);
    chmod(state_dir_.c_str(), 0755);
    root_secret_ = state_dir_ + "/root-secret.json";
    std::ofstream(root_secret_) << "{\"message\": \"" << kRootSecret << "\"}";
    chmod(root_secret_.c_str(), 0600);
  }

  std::string Spec(const std::string& name, const std::map<std::string, std::string>& env) {
    std::string spec = absl::StrCat("name: ", name, "\nranks: 1\nmax_restarts: 0\nenv:\n");
    for (const auto& [k, v] : env) absl::StrAppend(&spec, "  ", k, ": '", v, "'\n");
    absl::StrAppend(&spec, "command: [/usr/bin/python3, ", script_, "]\n");
    return spec;
  }

  // Once the rank has said `line`.
  void WaitForLine(const std::string& id, const std::string& line) {
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          return absl::StrContains(Cli({"logs", id}).out, line);
        },
        absl::Seconds(60)))
        << "job " << id << " never said " << line << ": " << Cli({"logs", id}).out;
  }

  // A victim job with a secret in its home; where it keeps it.
  std::string StartVictim() {
    const std::string id = Submit(Spec("victim", {{"ROLE", "victim"}, {"SECRET", kVictimSecret}}));
    WaitForLine(id, "victim ready");
    return absl::StrCat(state_dir_, "/worker-0/jobs/", id, "/home/secret.json");
  }

  // An attacker of each target against `file`, armed.
  std::vector<std::string> StartAttackers(const std::string& file,
                                          const std::string& victim_secret) {
    std::vector<std::string> ids;
    for (const std::string& target : {root_secret_, victim_secret, std::string("fifo")}) {
      ids.push_back(Submit(Spec(absl::StrCat("attack-", file.substr(0, file.find('.'))),
                                {{"ROLE", "attacker"}, {"FILE", file}, {"TARGET", target}})));
    }
    for (const std::string& id : ids) WaitForLine(id, "armed");
    return ids;
  }

  // Neither secret in `text`.
  static void ExpectNoSecret(const std::string& text, const std::string& what) {
    EXPECT_FALSE(absl::StrContains(text, kRootSecret)) << what << " leaked root's file: " << text;
    EXPECT_FALSE(absl::StrContains(text, kVictimSecret))
        << what << " leaked another job's file: " << text;
  }

  // `ringmaster stacks` answered by the worker for each job, and nothing
  // leaked into the job's log.
  void TakeStacksOf(const std::vector<std::string>& ids) {
    for (const std::string& id : ids) {
      const testing::CommandResult stacks = Cli({"stacks", id});
      EXPECT_EQ(stacks.exit_code, 0) << stacks.err;
      EXPECT_TRUE(absl::StrContains(stacks.out, "rank 0 on ")) << stacks.out;
      EXPECT_FALSE(absl::StrContains(stacks.out, "did not answer"))
          << "the worker hangs on job " << id << "'s file: " << stacks.out;
      const testing::CommandResult logs = Cli({"logs", id});
      EXPECT_TRUE(absl::StrContains(logs.out, "ringmaster: end of the stacks of rank 0"))
          << logs.out;
      EXPECT_TRUE(absl::StrContains(logs.out, "TID ")) << "no native stacks: " << logs.out;
      ExpectNoSecret(logs.out, absl::StrCat("the log of job ", id));
    }
  }

  static constexpr char kRootSecret[] = "root-secret-5f1d0c";
  static constexpr char kVictimSecret[] = "victim-secret-77ab3e";
  std::string script_;
  std::string root_secret_;
};

TEST_F(RankFilesTest, TheStacksFileIsNeitherFollowedNorWaitedOn) {
  const std::vector<std::string> ids = StartAttackers("stacks", StartVictim());
  TakeStacksOf(ids);
}

TEST_F(RankFilesTest, TheFlightRecordIsNeitherFollowedNorWaitedOn) {
  const std::vector<std::string> ids = StartAttackers("flight", StartVictim());
  TakeStacksOf(ids);
}

TEST_F(RankFilesTest, TheErrorFileIsNeitherFollowedNorWaitedOn) {
  const std::vector<std::string> ids = StartAttackers("error.json", StartVictim());
  for (const std::string& id : ids) {
    const v1::Job failed = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::FAILED; });
    ASSERT_GT(failed.history_size(), 0);
    const std::string cause = failed.history(failed.history_size() - 1).message();
    EXPECT_TRUE(absl::StrContains(cause, "exited with code 3")) << cause;
    ExpectNoSecret(cause, absl::StrCat("the failure of job ", id));
  }
}

TEST_F(RankFilesTest, ARankWritesNowhereElseAndItsLinksAreNotFollowedOnDelete) {
  const std::string escape = state_dir_ + "/root-dir";
  ASSERT_TRUE(fs::create_directory(escape));
  std::ofstream(escape + "/keep") << "root's";
  const std::string id = Submit(Spec(
      "dirs", {{"ROLE", "dirs"}, {"LOG_ROOT", state_dir_ + "/worker-0/logs"}, {"ESCAPE", escape}}));
  WaitJob(id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  const std::string logs = Cli({"logs", id}).out;
  ASSERT_TRUE(absl::StrContains(logs, "ATTACKS DONE")) << logs;
  int verdicts = 0;
  for (absl::string_view line : absl::StrSplit(logs, '\n')) {
    if (!absl::StrContains(line, "ATTACK ")) continue;
    ++verdicts;
    EXPECT_TRUE(absl::StrContains(line, ": refused")) << line;
  }
  EXPECT_EQ(verdicts, 4) << logs;
  const testing::CommandResult deleted = Cli({"delete", id});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  const std::string job_dir = absl::StrCat(state_dir_, "/worker-0/jobs/", id);
  EXPECT_TRUE(testing::WaitFor([&] { return !fs::exists(job_dir); }, absl::Seconds(30)))
      << job_dir << " is still there";
  EXPECT_TRUE(fs::exists(escape + "/keep")) << "a link was followed when the job was deleted";
}

}  // namespace
}  // namespace ringmaster
