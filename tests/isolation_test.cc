// Jobs kept apart on a shared worker. A hostile job tries every attack one
// rank can make on another job's rank on the same worker: read its
// environment (and so its job token), see, stop and signal its process,
// write in or list its code, plant the error file its worker reads when
// it fails, and read its snapshot segment (the memory file its worker
// gives it). With a uid per job (the default of a root worker) each is
// refused; with one --rank-user for every job each succeeds, which is the
// isolation that setting gives up. Ranks of one job still share their code,
// their checkpoint directory and /dev/shm. And `--rank-user nobody` on a
// root worker runs ranks as exactly that user.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/job_id.h"
#include "common/subprocess.h"
#include "tests/cluster_fixture.h"
#include "tests/rank_attacks.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

class IsolationTest : public ClusterTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: only a root worker switches users";
    if (up_args_.empty()) up_args_ = {"--rank-uid-range", "300000-300999"};
    state_parent_ = "/tmp";  // ranks of other users pass through it
    up_workers_ = 1;         // every job on the same worker
    up_slots_ = 2;
    ClusterTest::SetUp();
  }

  std::string JobDir(const std::string& id) { return state_dir_ + "/worker-0/jobs/" + id; }

  // Runs the victim, then the attacker against it; the attacker's verdict
  // for each attack, and the victim's job.
  std::map<std::string, std::string> Attack(std::string* victim_id) {
    const std::string victim = Submit(
        "name: victim\nranks: 1\nmax_restarts: 0\n"
        "command: [sh, -c, 'echo up; exec sleep 300']\n");
    *victim_id = victim;
    const v1::Job running =
        WaitJob(victim, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
    const std::string attacker = Submit(absl::StrCat(
        "name: attacker\nranks: 1\nenv:\n  VICTIM_PID: '", running.ranks(0).pid(),
        "'\n  VICTIM_CODE: ", JobDir(victim), "/code\n  VICTIM_ERROR_FILE: ", JobDir(victim),
        "/rank-0.error/error.json\n", RankAttacksCommand()));
    WaitJob(attacker, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
    const testing::CommandResult logs = Cli({"logs", attacker});
    EXPECT_NE(logs.out.find("ATTACKS DONE"), std::string::npos) << logs.out << logs.err;
    return RankAttackVerdicts(logs.out);
  }
};

TEST_F(IsolationTest, AHostileJobOnTheSameWorkerIsRefusedEveryAttack) {
  std::string victim;
  const std::map<std::string, std::string> verdicts = Attack(&victim);
  for (const std::string& name : RankAttackControls()) {
    ASSERT_EQ(verdicts.count(name), 1u) << name << " did not run";
    EXPECT_EQ(verdicts.at(name), "done") << name << ": the attacker's tools are missing";
  }
  for (const std::string& name : RankAttackNames()) {
    ASSERT_EQ(verdicts.count(name), 1u) << name << " did not run";
    EXPECT_EQ(verdicts.at(name), "refused") << name;
  }
  EXPECT_FALSE(fs::exists(JobDir(victim) + "/code/evil"));
  // The victim fails by itself: its root cause is its own.
  const v1::Job job = WaitJob(victim, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  ASSERT_EQ(kill(job.ranks(0).pid(), SIGKILL), 0);
  const v1::Job failed = WaitJob(victim, [](const v1::Job& j) { return j.state() == v1::FAILED; });
  const std::string cause = failed.history(failed.history_size() - 1).message();
  EXPECT_EQ(cause.find("forged"), std::string::npos) << cause;
  EXPECT_NE(cause.find("killed by signal 9"), std::string::npos) << cause;
}

TEST_F(IsolationTest, EachJobRunsAsAUidOfItsOwnAndItsRanksShareWhatTheyMust) {
  // `up`'s checkpoint root, beside the coordinator's private directory.
  const std::string checkpoints = state_dir_ + "/checkpoints";
  // Rank 0 writes in the checkpoint dir and in /dev/shm (0600); rank 1 reads
  // both and a file of the shipped code, and answers through /dev/shm.
  const std::string id = Submit(absl::StrCat(
      "name: pair\nranks: 2\ncheckpoint_dir: ", checkpoints,
      "\ncommand: [sh, -c, 'umask 077; shm=/dev/shm/pair-$RINGMASTER_JOB_ID; "
      "wait_for() { for i in $(seq 300); do [ -s \"$1\" ] && return 0; sleep 0.1; done; return 1; "
      "}; "
      "echo uid $(id -u) home $HOME; test -L client/ringmaster && ls client > /dev/null || exit 3; "
      "if [ $RANK = 0 ]; then echo step-7 > $RINGMASTER_CHECKPOINT_DIR/latest && echo ping > $shm "
      "&& wait_for $shm.reply && cat $shm.reply && rm -f $shm $shm.reply; "
      "else wait_for $RINGMASTER_CHECKPOINT_DIR/latest && wait_for $shm && "
      "cat $RINGMASTER_CHECKPOINT_DIR/latest $shm && echo pong > $shm.reply; fi']\n"));
  const v1::Job job = WaitJob(
      id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED; });
  const testing::CommandResult logs = Cli({"logs", id});
  ASSERT_EQ(job.state(), v1::SUCCEEDED)
      << logs.out << job.history(job.history_size() - 1).message();
  const int uid = 300000 + static_cast<int>(JobNumber(id) % 1000);
  const std::string home = JobDir(id) + "/home";
  EXPECT_NE(logs.out.find(absl::StrCat("[rank 0] uid ", uid, " home ", home)), std::string::npos)
      << logs.out;
  EXPECT_NE(logs.out.find(absl::StrCat("[rank 1] uid ", uid, " home ", home)), std::string::npos)
      << logs.out;
  EXPECT_NE(logs.out.find("[rank 1] step-7\n[rank 1] ping\n"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("[rank 0] pong"), std::string::npos) << logs.out;
  for (const std::string& dir : {JobDir(id) + "/code", home, checkpoints + "/" + id}) {
    struct stat st {};
    ASSERT_EQ(stat(dir.c_str(), &st), 0) << dir;
    EXPECT_EQ(st.st_uid, static_cast<uid_t>(uid)) << dir;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
  }
}

// `up`'s default checkpoint root is reachable by jobs of their own uid: a
// program that checkpoints where RINGMASTER_CHECKPOINT_DIR says, without a
// checkpoint_dir of its own, makes and writes its directory there.
TEST_F(IsolationTest, TheDefaultCheckpointRootWorksWithAUidPerJob) {
  const std::string id = Submit(
      "name: default-root\nranks: 1\nmax_restarts: 0\n"
      "command: [sh, -c, 'mkdir -p $RINGMASTER_CHECKPOINT_DIR && "
      "echo step-3 > $RINGMASTER_CHECKPOINT_DIR/latest && echo $RINGMASTER_CHECKPOINT_DIR']\n");
  const v1::Job job = WaitJob(
      id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED; });
  const std::string logs = Cli({"logs", id}).out;
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << logs;
  const std::string dir = absl::StrCat(state_dir_, "/checkpoints/", id);
  EXPECT_NE(logs.find("[rank 0] " + dir), std::string::npos) << logs;
  std::ifstream latest(dir + "/latest");
  std::string step;
  latest >> step;
  EXPECT_EQ(step, "step-3");
}

// A root worker makes <checkpoint_dir>/<job> for the job's uid, so a
// checkpoint_dir lies only in a root the operator allows: one outside is
// refused at submit, naming the roots, and one that a link in a root leads
// outside is refused by the worker at start. Nothing is made outside.
TEST_F(IsolationTest, ACheckpointDirOutsideTheAllowedRootsIsRefused) {
  const std::string root = state_dir_ + "/checkpoints";
  const std::string outside = state_dir_ + "/outside";
  ASSERT_TRUE(fs::create_directory(outside));
  const testing::CommandResult refused =
      Cli({"submit", WriteSpec("out", absl::StrCat("name: out\nranks: 1\ncheckpoint_dir: ", outside,
                                                   "\ncommand: [true]\n"))});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find(absl::StrCat("checkpoint_dir: ", outside,
                                          " is not in a checkpoint root this cluster allows (",
                                          root, ")")),
            std::string::npos)
      << refused.err;
  auto jobs = client_->ListJobs();
  ASSERT_OK(jobs);
  EXPECT_TRUE(jobs->empty()) << "nothing is stored";

  ASSERT_EQ(symlink(outside.c_str(), (root + "/escape").c_str()), 0);
  const std::string id =
      Submit(absl::StrCat("name: escape\nranks: 1\nmax_restarts: 0\n", "checkpoint_dir: ", root,
                          "/escape\n", "command: [true]\n"));
  const v1::Job failed = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::FAILED; });
  const std::string cause = failed.history(failed.history_size() - 1).message();
  EXPECT_NE(cause.find(absl::StrCat("checkpoint_dir ", root, "/escape (", outside,
                                    ") is not in a checkpoint root of this worker")),
            std::string::npos)
      << cause;
  EXPECT_TRUE(fs::is_empty(outside)) << "a job's directory was made outside the roots";
}

// Each job has a /dev/shm of its own (a tmpfs its ranks on the worker
// share): another job's files do not show there, nothing reaches the
// host's, and it is unmounted when the job's last rank here exits. The
// built-in trainer's ranks still meet in it for their shared-memory
// all-reduce.
class PrivateShmTest : public IsolationTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: only a root worker switches users";
    if (!CanHideOtherUsersProcesses()) {
      GTEST_SKIP() << "this machine gives no process a mount namespace of its own";
    }
    // The trainer where ranks of any uid may run it (the test's runfiles
    // are root's alone).
    bin_dir_ = absl::StrCat("/tmp/ringmaster-bin-", getpid());
    fs::create_directories(bin_dir_);
    chmod(bin_dir_.c_str(), 0755);
    for (const char* program : {"coordinator/ringmaster-coordinator", "worker/ringmaster-worker",
                                "trainer/ringmaster-trainer"}) {
      const std::string to = bin_dir_ + "/" + fs::path(program).filename().string();
      fs::copy_file(testing::Runfile(program), to, fs::copy_options::overwrite_existing);
      chmod(to.c_str(), 0755);
    }
    extra_env_["RINGMASTER_BIN_DIR"] = bin_dir_;
    IsolationTest::SetUp();
  }
  void TearDown() override {
    IsolationTest::TearDown();
    if (!bin_dir_.empty()) fs::remove_all(bin_dir_);
  }
  // The mount table of a process: "self" or a pid.
  static std::string MountInfo(const std::string& process) {
    std::ifstream in(absl::StrCat("/proc/", process, "/mountinfo"));
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  // The cluster's worker process, found by its state dir.
  std::string WorkerPid() {
    const std::string state = state_dir_ + "/worker-0";
    for (const auto& entry : fs::directory_iterator("/proc")) {
      std::ifstream in(entry.path() / "cmdline");
      std::string cmdline((std::istreambuf_iterator<char>(in)), {});
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      if (absl::StrContains(cmdline, "ringmaster-worker") &&
          absl::StrContains(cmdline, state + " ")) {
        return entry.path().filename().string();
      }
    }
    return "";
  }
  std::string bin_dir_;
};

TEST_F(PrivateShmTest, EachJobHasADevShmOfItsOwn) {
  const std::string a = Submit(
      "name: shm-a\nranks: 1\nmax_restarts: 0\n"
      "command: [sh, -c, 'echo x > /dev/shm/shm-a-file && chmod 644 /dev/shm/shm-a-file && "
      "echo written && exec sleep 300']\n");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return absl::StrContains(Cli({"logs", a}).out, "written");
      },
      absl::Seconds(60)));
  const std::string shm = absl::StrCat(state_dir_, "/worker-0/shm/", a);
  const std::string worker = WorkerPid();
  ASSERT_FALSE(worker.empty()) << "no worker process with state dir " << state_dir_;
  EXPECT_TRUE(absl::StrContains(MountInfo(worker), shm)) << "no tmpfs of the job's at " << shm;
  // Only in the worker's own mount namespace: a worker that dies, however
  // it does, leaves no mount in the host's table.
  EXPECT_FALSE(absl::StrContains(MountInfo("self"), shm)) << shm << " is in the host's mounts";
  EXPECT_FALSE(fs::exists("/dev/shm/shm-a-file")) << "the job wrote in the host's /dev/shm";
  const std::string b = Submit(
      "name: shm-b\nranks: 1\nmax_restarts: 0\n"
      "command: [sh, -c, 'ls -A /dev/shm; echo listed']\n");
  WaitJob(b, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  const std::string listed = Cli({"logs", b}).out;
  EXPECT_TRUE(absl::StrContains(listed, "listed")) << listed;
  EXPECT_FALSE(absl::StrContains(listed, "shm-a-file")) << "another job's file shows: " << listed;

  ASSERT_EQ(Cli({"cancel", a}).exit_code, 0);
  WaitJob(a, [](const v1::Job& j) { return j.state() == v1::CANCELLED && AllRanksEnded(j); });
  EXPECT_TRUE(testing::WaitFor([&] { return !absl::StrContains(MountInfo(worker), shm); },
                               absl::Seconds(30)))
      << shm << " is still mounted after the job ended";
}

TEST_F(PrivateShmTest, TheTrainersRanksMeetInTheirJobsShm) {
  const std::string id = Submit(
      "name: shm-trainer\nranks: 2\nmax_restarts: 0\n"
      "trainer:\n"
      "  model: {type: mlp, hidden: [16]}\n"
      "  data: {path: \"synthetic:rows=256,features=8,classes=4\"}\n"
      "  epochs: 1\n  batch_size: 16\n"
      "  optimizer: {type: sgd, lr: 0.05}\n");
  const v1::Job job = WaitJob(
      id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED; });
  const std::string logs = Cli({"logs", id}).out;
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << logs;
  EXPECT_TRUE(absl::StrContains(logs, "all-reduce over shared memory")) << logs;
}

// One --rank-user for every job: the same attacks all succeed. This is
// what docs/security.md says that setting gives up.
class SharedRankUserTest : public IsolationTest {
 protected:
  void SetUp() override {
    up_args_ = {"--rank-user", "nobody"};
    IsolationTest::SetUp();
  }
};

TEST_F(SharedRankUserTest, EveryAttackSucceedsWhenJobsShareOneUser) {
  std::string victim;
  const std::map<std::string, std::string> verdicts = Attack(&victim);
  for (const std::string& name : RankAttackNames()) {
    ASSERT_EQ(verdicts.count(name), 1u) << name << " did not run";
    EXPECT_EQ(verdicts.at(name), "done") << name;
  }
}

// `up --rank-user nobody` on a root worker: the rank runs as nobody with
// no_new_privs, whatever the job's env says, as /proc shows.
class RankUserTest : public ClusterTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: only a root worker switches users";
    up_args_ = {"--rank-user", "nobody"};
    state_parent_ = "/tmp";
    ClusterTest::SetUp();
  }
};

TEST_F(RankUserTest, ARootWorkerRunsRanksAsTheConfiguredUser) {
  const std::string id = Submit(
      "name: unprivileged\nranks: 1\nworking_dir: /tmp\nenv: {USER: root, HOME: /root}\n"
      "command: [sleep, '300']\n");
  v1::Job job = WaitJob(id, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  std::ifstream in(absl::StrCat("/proc/", job.ranks(0).pid(), "/status"));
  std::string status((std::istreambuf_iterator<char>(in)), {});
  const uid_t nobody = 65534;
  EXPECT_NE(status.find(absl::StrCat("Uid:\t", nobody, "\t", nobody, "\t", nobody, "\t", nobody)),
            std::string::npos)
      << status;
  EXPECT_NE(status.find("NoNewPrivs:\t1"), std::string::npos) << status;
  EXPECT_EQ(status.find("Groups:\t0"), std::string::npos) << "root's group kept: " << status;
}

// Code shipped with the job is the rank user's: a nobody rank reads it
// and writes beside it.
TEST_F(RankUserTest, ShippedCodeBelongsToTheRankUser) {
  const std::string id = Submit(
      "name: shipped\nranks: 1\n"
      "command: [sh, -c, 'test -L client/ringmaster && echo ok > written && "
      "stat -c \"%U %n\" . written']\n");
  v1::Job job = WaitJob(
      id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED; });
  testing::CommandResult logs = Cli({"logs", id});
  EXPECT_EQ(job.state(), v1::SUCCEEDED)
      << logs.out << job.history(job.history_size() - 1).message();
  EXPECT_NE(logs.out.find("[rank 0] nobody .\n[rank 0] nobody written\n"), std::string::npos)
      << logs.out;
}

// `ringmaster up` as root, as a one-user cluster is often started: its
// admin credentials are in the state dir, and a rank that reads them acts
// as the admin (cancels another's job). By default a root `up` runs each
// job as a uid of its own, which cannot read them; `--rank-user root` (one
// user for every job) gives that up, as it says. The built-in trainer runs
// under the default too (`up` copies it where other uids may run it).
class RootUpTest : public ClusterTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: a root `up` is what is tested";
    state_parent_ = "/tmp";  // ranks of other users pass through it
    up_default_ranks_ = true;
    ClusterTest::SetUp();
    attack_ = absl::StrCat("/tmp/ringmaster-admin-attack-", getpid(), ".py");
    std::ofstream(attack_) << "import sys, ringmaster\n"
                              "try:\n"
                              "    with ringmaster.Client(tls_dir=sys.argv[1]) as c:\n"
                              "        c.cancel(sys.argv[2])\n"
                              "    print('ATTACK admin: done')\n"
                              "except Exception as e:\n"
                              "    print('ATTACK admin: refused:', type(e).__name__, e)\n";
    chmod(attack_.c_str(), 0644);
  }
  void TearDown() override {
    ClusterTest::TearDown();
    if (!attack_.empty()) fs::remove(attack_);
  }
  // A rank that tries to cancel `victim` with the cluster's admin files;
  // the line it printed.
  std::string Attack(const std::string& victim) {
    const std::string id =
        Submit(absl::StrCat("name: attacker\nranks: 1\nmax_restarts: 0\nworking_dir: /tmp\n"
                            "command: [/usr/bin/python3, ",
                            attack_, ", ", state_dir_, "/tls, ", victim, "]\n"));
    const v1::Job job = WaitJob(
        id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED; });
    const std::string logs = Cli({"logs", id}).out;
    EXPECT_EQ(job.state(), v1::SUCCEEDED) << logs;
    const size_t at = logs.find("ATTACK admin: ");
    return at == std::string::npos ? logs : logs.substr(at, logs.find('\n', at) - at);
  }
  std::string SubmitVictim() {
    const std::string id = Submit("name: victim\nranks: 1\ncommand: [sleep, '300']\n");
    WaitJob(id, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
    return id;
  }

  std::string attack_;
};

TEST_F(RootUpTest, ARankIsRefusedTheAdminsCredentials) {
  const std::string victim = SubmitVictim();
  const std::string said = Attack(victim);
  EXPECT_TRUE(absl::StartsWith(said, "ATTACK admin: refused:")) << said;
  EXPECT_NE(said.find("Permission denied"), std::string::npos) << said;
  EXPECT_EQ(client_->GetJob(victim)->state(), v1::RUNNING) << "a rank cancelled another's job";
}

TEST_F(RootUpTest, TheDemoTrainsWithAUidPerJob) {
  testing::CommandResult r = Cli({"demo", "--state-dir", state_dir_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("test accuracy"), std::string::npos) << r.out;
  auto jobs = client_->ListJobs();
  ASSERT_OK(jobs);
  ASSERT_EQ(jobs->size(), 1u);
  const std::string id = (*jobs)[0].id();
  struct stat st {};
  ASSERT_EQ(stat(absl::StrCat(state_dir_, "/checkpoints/", id).c_str(), &st), 0);
  EXPECT_GE(st.st_uid, 100000u) << "the job's checkpoints are its own uid's, not root's";
}

class RootUpRankUserRootTest : public RootUpTest {
 protected:
  void SetUp() override {
    up_args_ = {"--rank-user", "root"};
    RootUpTest::SetUp();
  }
};

// What one user for every job gives up: the same rank acts as the admin.
TEST_F(RootUpRankUserRootTest, RanksOfRootActAsTheAdmin) {
  const std::string victim = SubmitVictim();
  EXPECT_EQ(Attack(victim), "ATTACK admin: done");
  EXPECT_EQ(client_->GetJob(victim)->state(), v1::CANCELLED);
}

}  // namespace
}  // namespace ringmaster
