// Restarts from the snapshots workers hold in memory: a run stopped at any
// step and started again on the same segments ends with exactly the
// weights of a run never stopped, whichever rank's snapshot serves.
#include <sys/mman.h>

#include <gloo/rendezvous/hash_store.h>

#include <algorithm>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "common/mutex.h"
#include "domain/group_generation.h"
#include "domain/snapshot_segment.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"
#include "trainer/checkpoint.h"
#include "trainer/gloo_collective.h"
#include "trainer/regroup.h"
#include "trainer/trainer.h"
#include "trainer/trainer_testing.h"

namespace ringmaster {
namespace {

constexpr uint64_t kCapacity = 1 << 20;

// The segments a world's workers hold for its ranks, kept across runs as
// across attempts.
class Segments {
 public:
  explicit Segments(int world) {
    for (int r = 0; r < world; ++r) Replace(r);
  }
  // Rank `r`'s worker lost what it held: a new, empty segment.
  void Replace(int r) {
    absl::StatusOr<UniqueFd> fd = SnapshotSegment::Create(kCapacity);
    EXPECT_OK(fd);
    absl::StatusOr<std::unique_ptr<SnapshotSegment>> view =
        SnapshotSegment::Map(fd->get(), kCapacity, "segment");
    EXPECT_OK(view);
    if (static_cast<int>(fds_.size()) <= r) {
      fds_.resize(r + 1);
      views_.resize(r + 1);
    }
    fds_[r] = *std::move(fd);
    views_[r] = *std::move(view);
  }
  // Gives each rank its own.
  std::function<void(int, TrainerContext*)> Give(SnapshotCopy copy = SnapshotCopy::kBucketed) {
    return [this, copy](int rank, TrainerContext* context) {
      context->snapshots = views_[rank].get();
      context->snapshot_copy = copy;
    };
  }
  const SnapshotSegment& view(int r) const { return *views_[r]; }
  SnapshotSegment* segment(int r) { return views_[r].get(); }
  // Flips a byte of rank `r`'s newest snapshot.
  void Corrupt(int r) {
    const SnapshotInfo newest = views_[r]->Committed()[0];
    char* base = static_cast<char*>(
        mmap(nullptr, kCapacity, PROT_READ | PROT_WRITE, MAP_SHARED, fds_[r].get(), 0));
    ASSERT_NE(base, MAP_FAILED);
    base[kSnapshotHeaderBytes + newest.slot * views_[r]->slot_bytes() + 200] ^= 0x40;
    munmap(base, kCapacity);
  }

 private:
  std::vector<UniqueFd> fds_;
  std::vector<std::unique_ptr<SnapshotSegment>> views_;
};

// AdamW, 3 epochs of 12 steps at world 2, no checkpoints on disk.
v1::TrainerSpec Spec() {
  v1::TrainerSpec spec = AdamSpec();
  spec.set_checkpoint_every_steps(0);
  spec.set_checkpoint_every_s(0);
  return spec;
}

std::vector<float> Uninterrupted(const v1::TrainerSpec& spec, const TrainTestSplit& data) {
  return TrainWorld(spec, data, 2);
}

// Runs until `stop_after` with snapshots into `segments`.
void Crash(const v1::TrainerSpec& spec, const TrainTestSplit& data, Segments& segments,
           int64_t stop_after, SnapshotCopy copy = SnapshotCopy::kBucketed) {
  TrainerContext crash;
  crash.stop_after_step = stop_after;
  TrainWorldResults(spec, data, 2, crash, segments.Give(copy));
}

class TrainerSnapshotTest : public ::testing::TestWithParam<SnapshotCopy> {};

TEST_P(TrainerSnapshotTest, AStoppedRunResumesFromMemoryToTheSameWeights) {
  const TrainTestSplit data = Data(512);
  const v1::TrainerSpec spec = Spec();
  const std::vector<float> uninterrupted = Uninterrupted(spec, data);

  Segments segments(2);
  Crash(spec, data, segments, 17, GetParam());  // mid-epoch 2
  for (int r = 0; r < 2; ++r) {
    const std::vector<SnapshotInfo> held = segments.view(r).Committed();
    ASSERT_EQ(held.size(), 2u);
    EXPECT_EQ(held[0].step, 17);
    EXPECT_EQ(held[1].step, 16);
    EXPECT_EQ(held[0].rank, r);
  }
  std::vector<std::string> lines;
  TrainerContext resume;
  resume.log = [&](const std::string& line) { lines.push_back(line); };
  const std::vector<TrainResult> resumed =
      TrainWorldResults(spec, data, 2, resume, segments.Give(GetParam()));
  EXPECT_EQ(resumed[0].resumed_from, "memory");
  EXPECT_EQ(resumed[0].resumed_from_step, 17);
  EXPECT_EQ(resumed[0].params, uninterrupted)
      << "max relative difference " << MaxRelativeDifference(resumed[0].params, uninterrupted);
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "resuming at step 17 from memory: every rank's own snapshot"),
            lines.end());
  EXPECT_EQ(resumed[0].snapshots.newest_step, 36);  // it goes on taking them
  EXPECT_EQ(resumed[0].snapshots.committed, 36 - 17);
}

INSTANTIATE_TEST_SUITE_P(Copies, TrainerSnapshotTest,
                         ::testing::Values(SnapshotCopy::kStaged, SnapshotCopy::kBucketed),
                         [](const auto& info) {
                           return info.param == SnapshotCopy::kStaged ? "Staged" : "Bucketed";
                         });

// Rank 0's worker lost its memory (restarted): rank 1's snapshot serves
// both.
TEST(TrainerSnapshotTest, ARankWithoutTheStepGetsItFromARankWithIt) {
  const TrainTestSplit data = Data(512);
  const v1::TrainerSpec spec = Spec();
  const std::vector<float> uninterrupted = Uninterrupted(spec, data);
  Segments segments(2);
  Crash(spec, data, segments, 23);
  segments.Replace(0);
  std::vector<std::string> lines;
  TrainerContext resume;
  resume.log = [&](const std::string& line) { lines.push_back(line); };
  const std::vector<TrainResult> resumed =
      TrainWorldResults(spec, data, 2, resume, segments.Give());
  EXPECT_EQ(resumed[0].resumed_from, "memory");
  EXPECT_EQ(resumed[0].resumed_from_step, 23);
  EXPECT_EQ(resumed[0].params, uninterrupted);
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "resuming at step 23 from memory: rank 1's snapshot, sent to the others"),
            lines.end());
}

// Rank 0's worker was lost, and its new worker put into the new segment
// the replica a peer kept (as worker/snapshot_peers.h does): each rank
// loads its own, rank 0's from the replica.
TEST(TrainerSnapshotTest, ARankRestoredFromAPeersReplicaEndsWithTheSameWeights) {
  const TrainTestSplit data = Data(512);
  const v1::TrainerSpec spec = Spec();
  const std::vector<float> uninterrupted = Uninterrupted(spec, data);
  Segments segments(2);
  Crash(spec, data, segments, 23);
  const SnapshotInfo pushed = segments.view(0).Committed()[0];
  absl::StatusOr<std::string> replica = segments.view(0).Read(pushed);
  ASSERT_OK(replica);
  segments.Replace(0);
  absl::StatusOr<UniqueFd> fd = SnapshotSegment::Create(kCapacity);
  ASSERT_OK(fd);
  absl::StatusOr<std::unique_ptr<SnapshotSegment>> fresh =
      SnapshotSegment::Map(fd->get(), kCapacity, "rank 0's new segment");
  ASSERT_OK(fresh);
  ASSERT_OK((*fresh)->Put(pushed, *replica));

  std::vector<std::string> lines;
  TrainerContext resume;
  resume.log = [&](const std::string& line) { lines.push_back(line); };
  const std::vector<TrainResult> resumed =
      TrainWorldResults(spec, data, 2, resume, [&](int rank, TrainerContext* context) {
        if (rank == 0) {
          context->snapshots = fresh->get();
          context->snapshot_fetched_step = 23;
        } else {
          context->snapshots = segments.segment(1);
        }
      });
  EXPECT_EQ(resumed[0].resumed_from, "replica");
  EXPECT_EQ(resumed[0].resumed_from_step, 23);
  EXPECT_EQ(resumed[0].params, uninterrupted);
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "resuming at step 23 from memory: every rank's own snapshot (rank 0's "
                      "fetched from a peer's replica)"),
            lines.end());
}

// A snapshot whose checksum fails is never used: rank 0 offers the one
// before, and rank 1's newer one serves.
TEST(TrainerSnapshotTest, ACorruptSnapshotIsPassedOverForTheNextSource) {
  const TrainTestSplit data = Data(512);
  const v1::TrainerSpec spec = Spec();
  const std::vector<float> uninterrupted = Uninterrupted(spec, data);
  Segments segments(2);
  Crash(spec, data, segments, 17);
  segments.Corrupt(0);
  Mutex mu;
  std::vector<std::string> warnings;
  TrainerContext resume;
  resume.warn = [&](const std::string& line) {
    MutexLock lock(&mu);
    warnings.push_back(line);
  };
  const std::vector<TrainResult> resumed =
      TrainWorldResults(spec, data, 2, resume, segments.Give());
  EXPECT_EQ(resumed[0].resumed_from_step, 17);
  EXPECT_EQ(resumed[0].params, uninterrupted);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "snapshot skipped: segment: the snapshot of step 17 fails its checksum");
}

// Memory and disk both hold state: the newer wins.
TEST(TrainerSnapshotTest, TheNewerOfMemoryAndDiskWins) {
  const TrainTestSplit data = Data(512);
  v1::TrainerSpec spec = Spec();
  spec.set_checkpoint_every_steps(7);
  spec.set_snapshot_every_steps(10);
  const std::vector<float> uninterrupted = Uninterrupted(spec, data);

  // Snapshots at 10, checkpoints at 7 and 14: disk wins.
  Segments segments(2);
  TrainerContext crash;
  crash.checkpoint_dir = testing::MakeTempDir("newer");
  crash.stop_after_step = 17;
  TrainWorldResults(spec, data, 2, crash, segments.Give());
  TrainerContext resume;
  resume.checkpoint_dir = crash.checkpoint_dir;
  std::vector<TrainResult> resumed = TrainWorldResults(spec, data, 2, resume, segments.Give());
  EXPECT_EQ(resumed[0].resumed_from, "disk");
  EXPECT_EQ(resumed[0].resumed_from_step, 14);
  EXPECT_EQ(resumed[0].params, uninterrupted);

  // A snapshot every step, checkpoints at 7, 14 and 21, stopped at 22:
  // memory wins.
  spec.set_snapshot_every_steps(1);
  Segments every(2);
  TrainerContext crash_every;
  crash_every.checkpoint_dir = testing::MakeTempDir("every");
  crash_every.stop_after_step = 22;
  TrainWorldResults(spec, data, 2, crash_every, every.Give());
  TrainerContext resume_every;
  resume_every.checkpoint_dir = crash_every.checkpoint_dir;
  resumed = TrainWorldResults(spec, data, 2, resume_every, every.Give());
  EXPECT_EQ(resumed[0].resumed_from, "memory");
  EXPECT_EQ(resumed[0].resumed_from_step, 22);
  EXPECT_EQ(resumed[0].params, uninterrupted);
}

// A state that does not fit the segment falls back to disk and says so.
TEST(TrainerSnapshotTest, AStateTooLargeForTheSegmentIsSaidAndSnapshotsStayOff) {
  const TrainTestSplit data = Data(512);
  v1::TrainerSpec spec = Spec();
  spec.mutable_model()->set_hidden(0, 4096);  // ~0.6 MiB of floats, with AdamW ~2 MiB
  absl::StatusOr<UniqueFd> fd = SnapshotSegment::Create(256 << 10);
  ASSERT_OK(fd);
  absl::StatusOr<std::unique_ptr<SnapshotSegment>> view =
      SnapshotSegment::Map(fd->get(), 0, "segment");
  ASSERT_OK(view);
  Mutex mu;
  std::vector<std::string> warnings;
  std::vector<v1::Progress> reports;
  TrainerContext context;
  context.stop_after_step = 1;
  context.warn = [&](const std::string& line) {
    MutexLock lock(&mu);
    warnings.push_back(line);
  };
  context.on_progress = [&](const v1::Progress& p) {
    MutexLock lock(&mu);
    reports.push_back(p);
  };
  TrainWorldResults(spec, data, 1, context,
                    [&](int, TrainerContext* c) { c->snapshots = view->get(); });
  EXPECT_TRUE((*view)->Committed().empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(warnings[0], "no snapshots in memory: a snapshot of this model"))
      << warnings[0];
  EXPECT_TRUE(absl::EndsWith(warnings[0], "; restarts resume from the checkpoints on disk"))
      << warnings[0];
  ASSERT_FALSE(reports.empty());
  EXPECT_TRUE(absl::StartsWith(reports[0].snapshots_off(), "a snapshot of this model"))
      << reports[0].snapshots_off();
}

// The attempt's groups as the coordinator announces them in its rendezvous
// scope, and the ranks' connections to them, each rank as its own host
// (so a closed connection is how a peer's loss shows).
class Groups {
 public:
  explicit Groups(int world = 2) : world_(world) {}
  // Group `generation` of `members`, the ranks their processes started
  // with; empty: every rank of the world.
  void Announce(int generation, std::vector<int> members = {}) {
    if (members.empty()) {
      for (int r = 0; r < world_; ++r) members.push_back(r);
    }
    MutexLock lock(&mu_);
    announced_[generation] = std::move(members);
  }
  absl::StatusOr<GroupPlace> Await(int rank, int generation, absl::Duration timeout) {
    MutexLock lock(&mu_);
    auto announced = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return announced_.count(generation) > 0;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&announced), timeout)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "group ", generation, " was not announced within ", absl::FormatDuration(timeout)));
    }
    const std::vector<int>& members = announced_[generation];
    const auto at = std::find(members.begin(), members.end(), rank);
    if (at == members.end()) return absl::FailedPreconditionError("not a member");
    return GroupPlace{static_cast<int>(at - members.begin()), static_cast<int>(members.size())};
  }
  // Rank `rank`'s process, at `place` in group `generation`.
  absl::StatusOr<std::unique_ptr<Collective>> Connect(int rank, int generation, GroupPlace place) {
    GlooOptions options;
    options.timeout = std::chrono::seconds(60);
    options.host_identity = absl::StrCat("host", rank);
    if (generation > 0) options.prefix = GroupPrefix(generation);
    absl::StatusOr<std::unique_ptr<GlooCollective>> comm =
        GlooCollective::Connect(store_, place.rank, place.size, options);
    if (!comm.ok()) return comm.status();
    return std::unique_ptr<Collective>(*std::move(comm));
  }
  GroupHooks Hooks(int rank, int generation, absl::Duration timeout) {
    GroupHooks hooks;
    hooks.generation = generation;
    hooks.place = {rank, world_};
    hooks.regroup_timeout = timeout;
    hooks.connect = [this, rank](int g, GroupPlace place, TrainerContext*) {
      return Connect(rank, g, place);
    };
    hooks.await = [this, rank](int g, absl::Duration t) { return Await(rank, g, t); };
    return hooks;
  }
  int world() const { return world_; }

 private:
  const int world_;  // of the attempt's first group
  gloo::rendezvous::HashStore store_;
  Mutex mu_;
  std::map<int, std::vector<int>> announced_ ABSL_GUARDED_BY(mu_);
};

// Rank `rank`'s process ends after `last_step` as if killed: its
// connections close with it.
void LoseRank(int rank, const v1::TrainerSpec& spec, const TrainTestSplit& data, Groups& groups,
              Segments& segments, int64_t last_step) {
  absl::StatusOr<std::unique_ptr<Collective>> comm =
      groups.Connect(rank, 0, {rank, groups.world()});
  ASSERT_OK(comm);
  TrainerContext context;
  context.comm = comm->get();
  context.snapshots = segments.segment(rank);
  context.stop_after_step = last_step;
  ASSERT_OK(Train(spec, data, context));
}

void LoseRank1(const v1::TrainerSpec& spec, const TrainTestSplit& data, Groups& groups,
               Segments& segments, int64_t last_step) {
  LoseRank(1, spec, data, groups, segments, last_step);
}

// Rank 1 is lost after step 17; rank 0 keeps its process, and the group
// forms again with rank 1's replacement, which restores from its worker's
// segment: both end with exactly the weights of a run never interrupted.
TEST(TrainerSnapshotTest, SurvivorsKeepTheirProcessAndEndWithTheSameWeights) {
  const TrainTestSplit data = Data(512);
  const v1::TrainerSpec spec = Spec();
  const std::vector<float> uninterrupted = Uninterrupted(spec, data);
  Groups groups;
  Segments segments(2);
  std::vector<absl::StatusOr<TrainResult>> results(2, absl::UnknownError("not run"));
  Mutex mu;
  std::vector<std::string> warnings;
  std::vector<int> lost_in;  // the groups it said it lost a peer in
  std::thread survivor([&] {
    TrainerContext context;
    context.snapshots = segments.segment(0);
    std::atomic<int64_t> steps{0};
    context.steps_done = &steps;
    GroupHooks hooks = groups.Hooks(0, 0, absl::Seconds(60));
    hooks.warn = [&](const std::string& line) {
      MutexLock lock(&mu);
      warnings.push_back(line);
    };
    hooks.lost = [&](int generation, const absl::Status& why) {
      MutexLock lock(&mu);
      lost_in.push_back(generation);
      EXPECT_TRUE(LostPeer(why)) << why;
    };
    std::unique_ptr<Collective> comm;
    results[0] = TrainInGroups(spec, data, context, hooks, &comm);
  });
  std::thread lost([&] {
    LoseRank1(spec, data, groups, segments, 17);
    groups.Announce(1);  // as the coordinator does, starting the replacement
    TrainerContext context;
    context.snapshots = segments.segment(1);
    std::unique_ptr<Collective> comm;
    GroupHooks hooks = groups.Hooks(1, 1, absl::Seconds(60));
    ASSERT_OK_AND_ASSIGN(hooks.place, groups.Await(1, 1, absl::Seconds(1)));
    results[1] = TrainInGroups(spec, data, context, hooks, &comm);
  });
  survivor.join();
  lost.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(results[r]) << "rank " << r;
    EXPECT_EQ(results[r]->resumed_from, "memory") << "rank " << r;
    EXPECT_EQ(results[r]->resumed_from_step, 17) << "rank " << r;
    EXPECT_EQ(results[r]->params, uninterrupted)
        << "rank " << r << ": max relative difference "
        << MaxRelativeDifference(results[r]->params, uninterrupted);
  }
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_TRUE(absl::StartsWith(warnings[0], "lost a peer after step 17 (")) << warnings[0];
  EXPECT_TRUE(absl::EndsWith(warnings[0],
                             "): keeping this process, waiting up to 1m for the "
                             "group to form again"))
      << warnings[0];
  EXPECT_EQ(warnings[1], "joining group 1 of the attempt");
  EXPECT_EQ(lost_in, std::vector<int>{0});
}

// Rank 0 trains in groups with `hooks` while rank 1 is lost after step 3
// and never replaced; rank 0's result.
absl::StatusOr<TrainResult> SurviveAlone(const GroupHooks& hooks, Groups& groups) {
  const TrainTestSplit data = Data(512);
  const v1::TrainerSpec spec = Spec();
  Segments segments(2);
  absl::StatusOr<TrainResult> result = absl::UnknownError("not run");
  std::thread survivor([&] {
    TrainerContext context;
    context.snapshots = segments.segment(0);
    std::unique_ptr<Collective> comm;
    result = TrainInGroups(spec, data, context, hooks, &comm);
  });
  std::thread lost([&] { LoseRank1(spec, data, groups, segments, 3); });
  survivor.join();
  lost.join();
  return result;
}

// No group announced within the timeout: the survivor ends with the
// collective's error, and says what it waited for.
TEST(TrainerSnapshotTest, ASurvivorWhoseGroupDoesNotFormAgainEndsWithItsError) {
  Groups groups;
  const absl::StatusOr<TrainResult> result =
      SurviveAlone(groups.Hooks(0, 0, absl::Milliseconds(200)), groups);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(LostPeer(result.status())) << result.status();
  EXPECT_TRUE(absl::EndsWith(result.status().message(),
                             "; the group did not form again: group 1 was not announced within "
                             "200ms"))
      << result.status();
}

// Without a regroup timeout a lost peer ends the rank at once, as before.
TEST(TrainerSnapshotTest, WithoutARegroupTimeoutALostPeerEndsTheRank) {
  Groups groups;
  GroupHooks hooks = groups.Hooks(0, 0, absl::ZeroDuration());
  hooks.await = [](int, absl::Duration) -> absl::StatusOr<GroupPlace> {
    ADD_FAILURE() << "waited for a group";
    return GroupPlace{};
  };
  const absl::StatusOr<TrainResult> result = SurviveAlone(hooks, groups);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(LostPeer(result.status())) << result.status();
  EXPECT_FALSE(absl::StrContains(result.status().message(), "group")) << result.status();
}

// An elastic job goes on without rank 0, lost after step 17: ranks 1 and 2
// keep their processes and form a group of two (as ranks 0 and 1 of it),
// and end with exactly the weights of every rank restarted at world 2 from
// the snapshots of step 17.
TEST(TrainerSnapshotTest, AGroupThatShrinksEndsWithTheWeightsOfARestartAtItsSize) {
  const TrainTestSplit data = Data(512);
  const v1::TrainerSpec spec = Spec();
  Segments reference(3);
  TrainerContext crash;
  crash.stop_after_step = 17;
  TrainWorldResults(spec, data, 3, crash, reference.Give(), /*hosts=*/3);
  // Ranks 1 and 2's segments, as ranks 0 and 1 of a world of 2.
  const std::vector<TrainResult> restarted = TrainWorldResults(
      spec, data, 2, {},
      [&](int rank, TrainerContext* context) { context->snapshots = reference.segment(rank + 1); },
      /*hosts=*/2);

  Groups groups(3);
  Segments segments(3);
  std::vector<absl::StatusOr<TrainResult>> results(3, absl::UnknownError("not run"));
  Mutex mu;
  std::vector<std::string> warnings;
  std::vector<std::thread> survivors;
  for (int rank : {1, 2}) {
    survivors.emplace_back([&, rank] {
      TrainerContext context;
      context.snapshots = segments.segment(rank);
      context.snapshot_rank = rank;
      GroupHooks hooks = groups.Hooks(rank, 0, absl::Seconds(60));
      hooks.warn = [&](const std::string& line) {
        MutexLock lock(&mu);
        warnings.push_back(line);
      };
      std::unique_ptr<Collective> comm;
      results[rank] = TrainInGroups(spec, data, context, hooks, &comm);
    });
  }
  LoseRank(0, spec, data, groups, segments, 17);
  groups.Announce(1, {1, 2});  // as the coordinator does, without rank 0
  for (std::thread& t : survivors) t.join();
  for (int rank : {1, 2}) {
    ASSERT_OK(results[rank]) << "rank " << rank;
    EXPECT_EQ(results[rank]->resumed_from, "memory") << "rank " << rank;
    EXPECT_EQ(results[rank]->resumed_from_step, 17) << "rank " << rank;
    EXPECT_EQ(results[rank]->params, restarted[0].params)
        << "rank " << rank << ": max relative difference "
        << MaxRelativeDifference(results[rank]->params, restarted[0].params);
    // Its snapshots go on under the rank its worker knows it by.
    EXPECT_EQ(segments.view(rank).Committed()[0].rank, rank);
  }
  EXPECT_NE(
      std::find(warnings.begin(), warnings.end(), "joining group 1 of the attempt as rank 0 of 2"),
      warnings.end());
  EXPECT_NE(
      std::find(warnings.begin(), warnings.end(), "joining group 1 of the attempt as rank 1 of 2"),
      warnings.end());
}

// A rank that the next group goes on without ends with the collective's
// error and says so.
TEST(TrainerSnapshotTest, ARankLeftOutOfTheNextGroupEndsAndSaysSo) {
  Groups groups;
  groups.Announce(1, {1});
  const absl::StatusOr<TrainResult> result =
      SurviveAlone(groups.Hooks(0, 0, absl::Seconds(5)), groups);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(LostPeer(result.status())) << result.status();
  EXPECT_TRUE(absl::EndsWith(result.status().message(),
                             "; the group did not form again with it: not a member"))
      << result.status();
}

}  // namespace
}  // namespace ringmaster
