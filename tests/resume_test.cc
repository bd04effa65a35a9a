// A user's second day, with a uid per job on a root cluster: a job
// resubmitted after it ended resumes from the earlier job's checkpoints
// (copied in by the worker, the earlier job's directory kept its own uid's,
// mode 0700), another user may not resume from them, and an ended job is
// requeued as a new attempt of the same id and uid. A pending job is held,
// released and given another priority from the CLI.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

// A program that checkpoints as a user's script does: a directory per step
// in its checkpoint directory, five a second, and on start it resumes from
// the newest one there. (A command, not the built-in trainer, whose binary
// the test's build tree keeps out of reach of other uids.)
std::string Spec(const std::string& checkpoint_root) {
  return absl::StrCat(R"(
name: long
ranks: 1
queue: team
max_restarts: 0
checkpoint_dir: )",
                      checkpoint_root, R"(
command:
  - sh
  - -c
  - |
    d=$RINGMASTER_CHECKPOINT_DIR
    i=$(ls "$d" | sed -n 's/^step-//p' | sort -n | tail -1)
    echo "resuming from step ${i:-0}"
    i=${i:-0}
    while true; do
      i=$((i + 1)); mkdir "$d/step-$i.tmp" && echo "$i" > "$d/step-$i.tmp/state"
      mv "$d/step-$i.tmp" "$d/step-$i"; echo "step $i"; sleep 0.2
    done
)");
}

class ResumeTest : public ClusterTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: only a root worker gives each job a uid";
    const std::string queues = testing::MakeTempDir("queues") + "/queues.yaml";
    std::ofstream(queues)
        << "queues:\n  - {name: default}\n  - {name: team, users: [alice, bob]}\n";
    up_args_ = {"--queues", queues, "--rank-uid-range", "301000-301999"};
    state_parent_ = "/tmp";  // ranks of other users pass through it
    ClusterTest::SetUp();
    if (HasFatalFailure()) return;
    testing::CommandResult certs =
        Cli({"certs", "init", "--dir", state_dir_ + "/tls", "--user", "alice", "--user", "bob"});
    ASSERT_EQ(certs.exit_code, 0) << certs.err;
  }

  testing::CommandResult As(const std::string& user, std::vector<std::string> args) {
    args.insert(args.begin(), {"--cert", user});
    return Cli(args);
  }

  std::string SubmitAs(const std::string& user, const std::string& yaml,
                       std::vector<std::string> flags = {}) {
    std::vector<std::string> args = {"submit", WriteSpec("job", yaml)};
    args.insert(args.end(), flags.begin(), flags.end());
    testing::CommandResult r = As(user, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::string(absl::StripAsciiWhitespace(r.out));
  }

  std::string CheckpointDir(const std::string& id) { return state_dir_ + "/checkpoints/" + id; }

  std::string Spec() { return ringmaster::Spec(state_dir_ + "/checkpoints"); }

  // Alice's job, cancelled once it has checkpointed step 5; its newest
  // checkpoint's step.
  int64_t CancelledAfterACheckpoint(std::string* id) {
    *id = SubmitAs("alice", Spec());
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          return Cli({"logs", *id}).out.find("step 5\n") != std::string::npos;
        },
        absl::Seconds(60)))
        << Cli({"status", *id}).out;
    EXPECT_EQ(As("alice", {"cancel", *id}).exit_code, 0);
    WaitJob(*id, [](const v1::Job& j) {
      return j.state() == v1::CANCELLED &&
             std::none_of(j.ranks().begin(), j.ranks().end(),
                          [](const v1::RankStatus& r) { return r.state() == v1::RANK_RUNNING; });
    });
    int64_t newest = 0;
    for (const auto& entry : std::filesystem::directory_iterator(CheckpointDir(*id))) {
      const std::string name = entry.path().filename();
      if (name.rfind("step-", 0) == 0)
        newest = std::max<int64_t>(newest, std::stoll(name.substr(5)));
    }
    EXPECT_GE(newest, 5);
    return newest;
  }

  struct stat Stat(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
    return st;
  }
};

TEST_F(ResumeTest, ANewJobResumesFromAnEarlierOnesCheckpointsUnderItsOwnUid) {
  std::string earlier;
  const int64_t step = CancelledAfterACheckpoint(&earlier);
  ASSERT_GT(step, 0);

  // Bob may not start from Alice's checkpoints.
  testing::CommandResult refused =
      As("bob", {"submit", WriteSpec("bob", Spec()), "--resume-from", earlier});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find(absl::StrCat("resume_from: job ", earlier, " is alice's, not bob's")),
            std::string::npos)
      << refused.err;

  const std::string resumed = SubmitAs("alice", Spec(), {"--resume-from", earlier});
  WaitJob(resumed, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        return Cli({"logs", resumed}).out.find(absl::StrCat("step ", step + 1, "\n")) !=
               std::string::npos;
      },
      absl::Seconds(60)))
      << Cli({"logs", resumed}).out << Cli({"status", resumed}).out;
  EXPECT_NE(Cli({"logs", resumed}).out.find(absl::StrCat("resuming from step ", step, "\n")),
            std::string::npos);
  // Each directory its own job's uid's, and no one else's to read.
  const struct stat old_dir = Stat(CheckpointDir(earlier));
  const struct stat new_dir = Stat(CheckpointDir(resumed));
  EXPECT_NE(old_dir.st_uid, new_dir.st_uid);
  EXPECT_EQ(old_dir.st_mode & 0777, 0700u);
  EXPECT_EQ(new_dir.st_mode & 0777, 0700u);
  EXPECT_EQ(Stat(absl::StrCat(CheckpointDir(resumed), "/step-", step)).st_uid, new_dir.st_uid);
  ASSERT_EQ(As("alice", {"cancel", resumed}).exit_code, 0);
}

TEST_F(ResumeTest, AnEndedJobIsRequeuedUnderTheSameIdAndUid) {
  std::string id;
  const int64_t step = CancelledAfterACheckpoint(&id);
  const uid_t uid = Stat(CheckpointDir(id)).st_uid;
  EXPECT_NE(As("bob", {"requeue", id}).exit_code, 0) << "bob requeued alice's job";

  testing::CommandResult requeued = As("alice", {"requeue", id});
  ASSERT_EQ(requeued.exit_code, 0) << requeued.err;
  EXPECT_EQ(requeued.out, absl::StrCat(id, " PENDING, attempt 1\n"));
  WaitJob(id, [](const v1::Job& j) { return j.state() == v1::RUNNING && j.attempt() == 1; });
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        return Cli({"logs", id, "--attempt", "1"})
                   .out.find(absl::StrCat("step ", step + 1, "\n")) != std::string::npos;
      },
      absl::Seconds(60)))
      << Cli({"status", id}).out;
  EXPECT_NE(
      Cli({"logs", id, "--attempt", "1"}).out.find(absl::StrCat("resuming from step ", step, "\n")),
      std::string::npos);
  EXPECT_EQ(Stat(CheckpointDir(id)).st_uid, uid);
  EXPECT_NE(Cli({"status", id}).out.find("REQUEUED"), std::string::npos);
  ASSERT_EQ(As("alice", {"cancel", id}).exit_code, 0);
}

// Two slots busy; a third job waits, and is held, raised and released.
TEST_F(ResumeTest, APendingJobIsHeldRaisedAndReleased) {
  const std::string busy = "name: busy\nranks: 2\nqueue: team\ncommand: [sleep, '300']\n";
  const std::string blocker = SubmitAs("alice", busy);
  WaitJob(blocker, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  const std::string waiting =
      SubmitAs("alice", "name: waiting\nranks: 1\nqueue: team\ncommand: [sleep, '1']\n");
  testing::CommandResult held = As("alice", {"hold", waiting});
  ASSERT_EQ(held.exit_code, 0) << held.err;
  EXPECT_EQ(held.out, absl::StrCat(waiting, " PENDING, held by alice\n"));
  EXPECT_NE(As("bob", {"release", waiting}).exit_code, 0) << "bob released alice's job";
  testing::CommandResult lowered = As("alice", {"set-priority", waiting, "low"});
  ASSERT_EQ(lowered.exit_code, 0) << lowered.err;
  EXPECT_EQ(lowered.out, absl::StrCat(waiting, " PENDING, held by alice, priority 0\n"));
  testing::CommandResult raised = Cli({"set-priority", waiting, "high"});  // the admin
  ASSERT_EQ(raised.exit_code, 0) << raised.err;
  EXPECT_EQ(raised.out, absl::StrCat(waiting, " PENDING, held by alice, priority 1000\n"));
  testing::CommandResult bad = As("alice", {"set-priority", waiting, "urgent"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("urgent"), std::string::npos) << bad.err;
  ASSERT_EQ(As("alice", {"cancel", blocker}).exit_code, 0);
  // Slots free, still held.
  WaitJob(blocker, [](const v1::Job& j) { return j.state() == v1::CANCELLED; });
  testing::CommandResult status = Cli({"status", waiting});
  EXPECT_NE(status.out.find("held by alice"), std::string::npos) << status.out;
  ASSERT_EQ(As("alice", {"release", waiting}).exit_code, 0);
  WaitJob(waiting, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
}

}  // namespace
}  // namespace ringmaster
