#include "worker/rank_supervisor.h"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "common/mutex.h"
#include "worker/agent_service.h"

namespace ringmaster {
namespace {

class RankSupervisorTest : public ::testing::Test {
 protected:
  RankSupervisorTest() {
    const char* dir = std::getenv("TEST_TMPDIR");
    RankSupervisorOptions options;
    options.log_dir = std::string(dir ? dir : "/tmp") + "/logs";
    options.jobs_dir = std::string(dir ? dir : "/tmp") + "/jobs";
    options.base_env = {{"PATH", "/usr/bin:/bin"}};
    options.trainer_program = "/bin/echo";  // shows the arguments it is given
    options.snapshots = &snapshots_;
    for (int index : {0, 2}) {  // a worker offering two of its machine's GPUs
      v1::Gpu& gpu = options.gpus.emplace_back();
      gpu.set_index(index);
      gpu.set_uuid(index == 0 ? "GPU-aaaa" : "GPU-cccc");
    }
    supervisor_ = std::make_unique<RankSupervisor>(
        &launcher_, options,
        RankSupervisor::Callbacks{[this](const v1::RankStarted& s) {
                                    MutexLock lock(&mu_);
                                    started_.push_back(s);
                                  },
                                  [this](const v1::RankExited& e) {
                                    if (on_exit_) on_exit_(e);
                                    MutexLock lock(&mu_);
                                    exited_.push_back(e);
                                  }});
  }

  static v1::StartRank Rank(const std::string& job, int rank, const std::string& script) {
    v1::StartRank start;
    start.mutable_rank()->set_job_id(job);
    start.mutable_rank()->set_rank(rank);
    start.add_argv("sh");
    start.add_argv("-c");
    start.add_argv(script);
    (*start.mutable_env())["RANK"] = std::to_string(rank);
    return start;
  }

  // Waits (bounded) until `n` exits were reported.
  std::vector<v1::RankExited> WaitExits(size_t n) {
    MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return exited_.size() >= n; };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30)));
    return exited_;
  }

  // Its lines, read as the agent serves them (no link followed, a regular
  // file only); empty when there is no log.
  std::string ReadLog(const std::string& job, int rank, int attempt = 0) {
    v1::ReadLogRequest request;
    request.set_max_bytes(1 << 20);
    absl::StatusOr<v1::ReadLogResponse> read =
        ReadLogFile(supervisor_->LogPath(job, attempt, rank), job, request);
    return read.ok() ? read->data() : "";
  }

  size_t Started() {
    MutexLock lock(&mu_);
    return started_.size();
  }

  PosixProcessLauncher launcher_;
  SnapshotStore snapshots_{4 * (64 << 10), 2};  // 64 KiB segments
  Mutex mu_;
  std::vector<v1::RankStarted> started_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::RankExited> exited_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<RankSupervisor> supervisor_;
  // Called on the rank's thread as its exit is reported; set before any
  // rank starts.
  std::function<void(const v1::RankExited&)> on_exit_;
};

// A rank started again in a newer group of its attempt runs again, even
// while its exited process's exit is still being reported (as a fast
// coordinator's command may come), and its log goes on; the same group
// again is a repeat.
TEST_F(RankSupervisorTest, ARankStartsAgainInANewerGroupOfItsAttempt) {
  v1::StartRank replacement = Rank("job-regroup", 1, "echo replacement");
  replacement.set_generation(1);
  on_exit_ = [&](const v1::RankExited& e) {
    if (e.exit_code() != 137) return;
    supervisor_->Start(Rank("job-regroup", 1, "echo repeated"));
    supervisor_->Start(replacement);
  };
  supervisor_->Start(Rank("job-regroup", 1, "echo first; exit 137"));
  const std::vector<v1::RankExited> exits = WaitExits(2);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].exit_code(), 137);
  EXPECT_EQ(exits[1].exit_code(), 0);
  EXPECT_EQ(Started(), 2u);
  EXPECT_EQ(ReadLog("job-regroup", 1), "first\nreplacement\n");
}

// A rank that asks for a snapshot segment reads it at the descriptor its
// environment names; started again, it gets the same segment back.
TEST_F(RankSupervisorTest, ARankGetsItsJobsSnapshotSegmentAcrossAttempts) {
  const std::string script =
      "test -n \"$RINGMASTER_SNAPSHOT_FD\" || exit 9; head -c 4 "
      "/proc/self/fd/$RINGMASTER_SNAPSHOT_FD";
  v1::StartRank first = Rank("job-s", 1, script);
  first.set_snapshot_segment(true);
  supervisor_->Start(first);
  ASSERT_EQ(WaitExits(1).back().exit_code(), 0);
  EXPECT_EQ(ReadLog("job-s", 1), "RMSS");  // the segment's magic

  // What the first attempt left (written here as the rank would).
  {
    absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> lease = snapshots_.Acquire("job-s", 1);
    ASSERT_TRUE(lease.ok());
    auto segment = SnapshotSegment::Map((*lease)->fd(), 0, "segment");
    ASSERT_TRUE(segment.ok());
    auto slot = (*segment)->Begin(3);
    ASSERT_TRUE(slot.ok());
    std::memcpy(slot->data, "abc", 3);
    SnapshotInfo info;
    info.step = 77;
    (*segment)->Commit(*slot, info, SnapshotChecksum(SnapshotChecksumKind::kXxh3, "abc", 3));
  }
  // The new rank reads the step of slot 0 (at byte 40 of the header).
  v1::StartRank second =
      Rank("job-s", 1, "od -An -td8 -j40 -N8 /proc/self/fd/$RINGMASTER_SNAPSHOT_FD | tr -d ' '");
  second.mutable_rank()->set_attempt(1);
  second.set_snapshot_segment(true);
  supervisor_->Start(second);
  ASSERT_EQ(WaitExits(2).back().exit_code(), 0);
  EXPECT_EQ(ReadLog("job-s", 1, /*attempt=*/1), "77\n");
  const std::vector<v1::HeldSnapshots> held = snapshots_.Held();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].steps(0), 77);

  // A rank that does not ask gets none.
  supervisor_->Start(Rank("job-t", 0, "test -z \"$RINGMASTER_SNAPSHOT_FD\""));
  EXPECT_EQ(WaitExits(3).back().exit_code(), 0);
}

TEST_F(RankSupervisorTest, ReportsStartAndExitWithCodeAndLog) {
  supervisor_->Start(Rank("job-a", 1, "echo rank=$RANK; exit 4"));
  auto exits = WaitExits(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(Started(), 1u);
  EXPECT_EQ(exits[0].exit_code(), 4);
  EXPECT_FALSE(exits[0].stopped());
  EXPECT_EQ(ReadLog("job-a", 1), "rank=1\n");
  EXPECT_TRUE(supervisor_->RunningProcesses().empty());
}

TEST_F(RankSupervisorTest, APreflightPreludeRunsTheTrainerBeforeTheProgram) {
  v1::StartRank start = Rank("job-p", 0, "exit 0");
  start.set_preflight_prelude(true);
  supervisor_->Start(start);
  ASSERT_EQ(WaitExits(1).size(), 1u);
  EXPECT_EQ(ReadLog("job-p", 0), "--preflight -- sh -c exit 0\n");
}

TEST_F(RankSupervisorTest, StopEscalatesToSigkillAfterGrace) {
  // Ignores SIGTERM, so only SIGKILL ends it.
  supervisor_->Start(Rank("job-b", 0, "trap '' TERM; echo ready; sleep 300 & wait"));
  // Stop only once the trap is set (the shell prints "ready" after it) and
  // the supervisor has recorded the process (which it does once exec has
  // happened, possibly after the shell has printed).
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (ReadLog("job-b", 0).find("ready") == std::string::npos ||
         supervisor_->RunningProcesses().size() != 1) {
    ASSERT_LT(absl::Now(), deadline) << "the rank never printed ready or never showed running";
    absl::SleepFor(absl::Milliseconds(5));
  }
  supervisor_->StopJob("job-b", 0, absl::Milliseconds(300));
  auto exits = WaitExits(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].stopped());
  EXPECT_EQ(exits[0].signal(), SIGKILL);
}

TEST_F(RankSupervisorTest, UnstartableProgramIsReportedAsStartFailure) {
  v1::StartRank start = Rank("job-c", 0, "");
  start.clear_argv();
  start.add_argv("definitely-not-a-program");
  supervisor_->Start(start);
  auto exits = WaitExits(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].start_failed());
  EXPECT_NE(exits[0].message().find("definitely-not-a-program"), std::string::npos);
  EXPECT_EQ(Started(), 0u);
}

// CUDA_VISIBLE_DEVICES names exactly the rank's GPUs, by UUID, whatever the
// coordinator put there; none for a rank without GPUs.
TEST_F(RankSupervisorTest, RanksSeeExactlyTheirGpus) {
  v1::StartRank gpu = Rank("job-g", 0, "echo \"[$CUDA_VISIBLE_DEVICES]\"");
  gpu.add_gpus(2);
  gpu.add_gpus(0);
  (*gpu.mutable_env())["CUDA_VISIBLE_DEVICES"] = "2,0";
  supervisor_->Start(gpu);
  v1::StartRank cpu = Rank("job-g", 1, "echo \"[$CUDA_VISIBLE_DEVICES]\"");
  (*cpu.mutable_env())["CUDA_VISIBLE_DEVICES"] = "0";
  supervisor_->Start(cpu);
  v1::StartRank missing = Rank("job-g", 2, "true");
  missing.add_gpus(5);
  supervisor_->Start(missing);
  std::vector<v1::RankExited> exits = WaitExits(3);
  ASSERT_EQ(exits.size(), 3u);
  EXPECT_EQ(ReadLog("job-g", 0), "[GPU-cccc,GPU-aaaa]\n");
  EXPECT_EQ(ReadLog("job-g", 1), "[]\n");
  auto failed = std::find_if(exits.begin(), exits.end(),
                             [](const v1::RankExited& e) { return e.rank().rank() == 2; });
  ASSERT_NE(failed, exits.end());
  EXPECT_TRUE(failed->start_failed());
  EXPECT_EQ(failed->message(), "GPU 5 was assigned but this worker offers GPUs 0, 2");
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// What a worker reports holding logs of when it registers: the jobs with a
// log directory, and nothing else there (a stray file, a name that is no
// job id); a deleted job's logs are no longer listed.
TEST_F(RankSupervisorTest, ListsTheJobsItHoldsLogsOf) {
  supervisor_->Start(Rank("logged-1", 0, "echo hello"));
  WaitExits(1);
  const std::string logs = std::filesystem::path(supervisor_->LogPath("logged-1", 0, 0))
                               .parent_path()
                               .parent_path()
                               .string();
  std::filesystem::create_directories(logs + "/older-2");
  std::filesystem::create_directories(logs + "/not a job id");
  std::ofstream(logs + "/stray-3") << "x";
  auto listed = [&](const std::string& job) {
    const std::vector<std::string> jobs = supervisor_->LoggedJobs();  // other tests' too
    return std::count(jobs.begin(), jobs.end(), job) == 1;
  };
  EXPECT_TRUE(listed("logged-1"));
  EXPECT_TRUE(listed("older-2"));
  EXPECT_FALSE(listed("not a job id"));
  EXPECT_FALSE(listed("stray-3")) << "a file, not a log directory";
  EXPECT_TRUE(supervisor_->DeleteLogs("older-2"));
  EXPECT_FALSE(listed("older-2"));
}

// A rank's checkpoint directory lies in a root the worker allows: its
// own --checkpoint-roots, else the coordinator's.
TEST_F(RankSupervisorTest, ACheckpointDirOutsideTheRootsDoesNotStart) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string base = std::string(tmp ? tmp : "/tmp") + "/checkpoint-roots";
  std::filesystem::create_directories(base + "/allowed");
  std::filesystem::create_directories(base + "/other");
  supervisor_->SetCoordinatorCheckpointRoots({base + "/allowed"});
  v1::StartRank outside = Rank("ck-1", 0, "exit 0");
  outside.set_checkpoint_dir(base + "/other");
  supervisor_->Start(outside);
  std::vector<v1::RankExited> exits = WaitExits(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].start_failed());
  EXPECT_EQ(exits[0].message(), "checkpoint_dir " + base + "/other is not in a checkpoint root " +
                                    "of this worker (" + base + "/allowed); its " +
                                    "--checkpoint-roots, or the coordinator's, says which");

  v1::StartRank inside = Rank("ck-2", 0, "exit 0");
  inside.set_checkpoint_dir(base + "/allowed");
  supervisor_->Start(inside);
  exits = WaitExits(2);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_FALSE(exits[1].start_failed()) << exits[1].message();
  EXPECT_EQ(exits[1].exit_code(), 0);
}

}  // namespace
}  // namespace ringmaster
