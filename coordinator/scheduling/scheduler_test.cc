#include "coordinator/scheduling/scheduler.h"
#include "testing/status_matchers.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

// A fake worker registry: alive workers with the given free slots.
WorkerCapacity Worker(const std::string& id, int total, std::vector<int> free, bool gpus = false) {
  return WorkerCapacity{id, total, std::move(free), gpus};
}

// A worker with CPUs, memory and labels to offer.
WorkerCapacity Offering(const std::string& id, int slots, int cpus, int64_t memory_mb,
                        std::map<std::string, std::string> labels = {}) {
  WorkerCapacity w = Worker(id, slots, {});
  for (int s = 0; s < slots; ++s) w.free_slots.push_back(s);
  w.total_cpus = w.free_cpus = cpus;
  w.total_memory_mb = w.free_memory_mb = memory_mb;
  w.labels = std::move(labels);
  return w;
}

std::vector<std::string> WorkersOf(const std::vector<RankPlacement>& p) {
  std::vector<std::string> ids;
  for (const auto& r : p) ids.push_back(r.worker_id);
  return ids;
}

TEST(PlaceGangTest, PacksOntoOneWorkerWhenItFits) {
  auto p = PlaceGang(
      {Worker("w1", 2, {0, 1}), Worker("w2", 4, {0, 1, 2, 3}), Worker("w3", 3, {0, 1, 2})}, {3, 0});
  ASSERT_OK(p) << p.status();
  // w3 is the tightest worker that holds all three ranks.
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"w3", "w3", "w3"}));
  EXPECT_EQ((*p)[2].slots, std::vector<int>{2});
}

TEST(PlaceGangTest, UsesFewestWorkersAndOrdersRanksByWorkerThenSlot) {
  auto p = PlaceGang({Worker("w1", 2, {1}), Worker("w2", 4, {0, 2, 3}), Worker("w3", 2, {0, 1})},
                     {5, 0});
  ASSERT_OK(p) << p.status();
  // w2 (3 free) and w3 (2 free) suffice; w1 is left alone.
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"w2", "w2", "w2", "w3", "w3"}));
  for (int r = 0; r < 5; ++r) EXPECT_EQ((*p)[r].rank, r);
  EXPECT_EQ((*p)[0].slots, std::vector<int>{0});
  EXPECT_EQ((*p)[1].slots, std::vector<int>{2});
  EXPECT_EQ((*p)[3].slots, std::vector<int>{0});
}

TEST(PlaceGangTest, NotEnoughSlotsPlacesNothingAndSaysWhy) {
  auto p = PlaceGang({Worker("w1", 1, {0}), Worker("w2", 1, {})}, {2, 0});
  EXPECT_THAT(p.status(), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(p.status().message(), "needs 2 free slots, 1 free on 2 alive workers");
}

TEST(PlaceGangTest, GpuRanksOnlyOnGpuWorkersAndTakeWholeGpus) {
  auto p = PlaceGang(
      {Worker("cpu", 8, {0, 1, 2, 3, 4, 5, 6, 7}), Worker("gpu", 4, {0, 1, 2, 3}, /*gpus=*/true)},
      {2, 2});
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"gpu", "gpu"}));
  EXPECT_EQ((*p)[1].slots, (std::vector<int>{2, 3}));
  EXPECT_THAT(PlaceGang({Worker("cpu", 8, {0, 1, 2, 3})}, {1, 1}), IsError());
}

TEST(PlaceGangTest, ElasticJobTakesAsManyRanksAsFitDownToItsMinimum) {
  const std::vector<WorkerCapacity> two_free = {Worker("w1", 1, {0}), Worker("w2", 1, {0}),
                                                Worker("w3", 1, {})};
  auto p = PlaceGang(two_free, {3, 0, 2});
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"w1", "w2"}));
  auto none = PlaceGang(two_free, {3, 0, 3});
  EXPECT_EQ(none.status().message(), "needs 3 free slots, 2 free on 3 alive workers");
  auto full = PlaceGang({Worker("w1", 4, {0, 1, 2, 3})}, {3, 0, 2});
  ASSERT_OK(full);
  EXPECT_EQ(full->size(), 3u) << "never fewer than fit";
}

TEST(FreeCapacityTest, PlacedAndReportedRanksHoldTheirSlots) {
  SchedulableWorker w;
  w.worker_id = "w1";
  w.slots = 4;
  v1::RunningRank stale;  // a rank of an attempt that ended while w1 was away
  stale.mutable_rank()->set_job_id("old");
  stale.set_slot(3);
  w.running = std::make_shared<ReportedRanks>(Report({&stale}, w.gpu_indices));
  const std::vector<int> slot_1 = {1};
  std::vector<WorkerCapacity> c = FreeCapacity({w}, {{"w1", slot_1}}, "");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].free_slots, (std::vector<int>{0, 2}));
  EXPECT_EQ(FreeCapacity({w}, {}, "old")[0].free_slots, (std::vector<int>{0, 1, 2, 3}))
      << "a job's own ranks are left out when asking whether it could grow";
}

TEST(FreeCapacityTest, GpuRanksHoldTheSlotsOfTheirGpus) {
  SchedulableWorker w;
  w.worker_id = "g1";
  w.slots = 4;
  w.gpu_indices = {4, 5, 6, 7};  // slot i is GPU gpu_indices[i]
  v1::RunningRank reported;
  reported.mutable_rank()->set_job_id("old");
  reported.add_gpus(5);
  reported.add_gpus(6);
  w.running = std::make_shared<ReportedRanks>(Report({&reported}, w.gpu_indices));
  const std::vector<int> slot_0 = {0};
  std::vector<WorkerCapacity> c = FreeCapacity({w}, {{"g1", slot_0}}, "");
  EXPECT_TRUE(c[0].gpu_slots);
  EXPECT_EQ(c[0].free_slots, (std::vector<int>{3}));
  EXPECT_EQ(FreeCapacity({w}, {}, "old")[0].free_slots, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(FreeCapacity({w}, {}, "other")[0].free_slots, (std::vector<int>{0, 3}));
}

TEST(PlaceGangTest, SelectorPlacesOnlyOnWorkersWithEveryLabel) {
  const std::vector<WorkerCapacity> workers = {
      Offering("a1", 4, 0, 0, {{"zone", "a"}}),
      Offering("b1", 4, 0, 0, {{"zone", "b"}, {"disk", "ssd"}}),
      Offering("b2", 4, 0, 0, {{"zone", "b"}})};
  GangRequest request{2, 0};
  request.selector = {{"zone", "b"}, {"disk", "ssd"}};
  auto p = PlaceGang(workers, request);
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"b1", "b1"}));

  request.ranks = 6;
  EXPECT_EQ(PlaceGang(workers, request).status().message(),
            "needs 6 ranks of 1 slot each, on workers with disk=ssd,zone=b; room for 4 on the "
            "1 matching of 3 alive workers");
  request.selector = {{"zone", "c"}};
  request.ranks = 1;
  EXPECT_THAT(PlaceGang(workers, request), IsError()) << "no worker has zone=c";
}

TEST(PlaceGangTest, WorkersToAvoidAreNotUsed) {
  const std::vector<WorkerCapacity> workers = {Offering("w1", 4, 0, 0), Offering("w2", 2, 0, 0),
                                               Offering("w3", 2, 0, 0)};
  GangRequest request{2, 0};
  auto p = PlaceGang(workers, request);
  ASSERT_OK(p);
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"w3", "w3"})) << "the tightest fit";
  request.avoid = {"w3"};
  p = PlaceGang(workers, request);
  ASSERT_OK(p);
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"w2", "w2"}));
  request.avoid = {"w2", "w3"};
  request.ranks = 6;
  EXPECT_EQ(PlaceGang(workers, request).status().message(),
            "needs 6 ranks of 1 slot each, not on w2, w3 (excluded for the job); room for 4 on "
            "the 1 matching of 3 alive workers");
  EXPECT_EQ(NeverFits(workers, request),
            "needs 6 ranks of 1 slot each, not on w2, w3 (excluded for the job), more than all "
            "alive workers can hold (waiting for workers to join)");
  request.avoid.clear();
  EXPECT_EQ(NeverFits(workers, request), "");
}

TEST(PlaceGangTest, RanksPerWorkerPutsExactlyThatManyOnEachWorkerUsed) {
  // w1 could hold all four; ranks_per_worker spreads them two by two, and
  // w2, with one free slot, takes none.
  const std::vector<WorkerCapacity> workers = {Worker("w1", 4, {0, 1, 2, 3}), Worker("w2", 4, {3}),
                                               Worker("w3", 2, {0, 1})};
  GangRequest request{4, 0};
  request.ranks_per_worker = 2;
  auto p = PlaceGang(workers, request);
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"w1", "w1", "w3", "w3"}));
  EXPECT_EQ((*p)[1].slots, std::vector<int>{1});

  request.ranks = 6;
  EXPECT_EQ(PlaceGang(workers, request).status().message(),
            "needs 6 ranks of 1 slot each, 2 per worker; room for 4 on the 3 matching of 3 "
            "alive workers");
}

TEST(PlaceGangTest, CpusAndMemoryBoundHowManyRanksAWorkerTakes) {
  // 8 slots, but 4 CPUs: two ranks of 2 CPUs; the memory of w2 holds one.
  const std::vector<WorkerCapacity> workers = {Offering("w1", 8, 4, 64000),
                                               Offering("w2", 8, 16, 3000)};
  GangRequest request{3, 0};
  request.cpus = 2;
  request.memory_mb = 2048;
  auto p = PlaceGang(workers, request);
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"w1", "w1", "w2"}));

  request.ranks = 4;
  EXPECT_EQ(PlaceGang(workers, request).status().message(),
            "needs 4 ranks of 1 slot, 2 CPUs and 2048 MB each; room for 3 on the 2 matching "
            "of 2 alive workers");
  // A worker that registered no CPUs or memory is not limited by them.
  EXPECT_OK(PlaceGang({Offering("w", 8, 0, 0)}, request));
}

TEST(NeverFitsTest, SaysWhatTheClusterLacksOnlyWhenIdleCapacityIsShort) {
  const std::vector<WorkerCapacity> busy = {Worker("w1", 2, {}), Worker("w2", 2, {1})};
  EXPECT_EQ(NeverFits(busy, {4, 0}), "") << "it fits once the cluster is idle";
  EXPECT_EQ(NeverFits(busy, {10, 0}),
            "needs 10 slots; the cluster has 4 (waiting for workers to join)");
  EXPECT_EQ(NeverFits({}, {1, 0}),
            "needs 1 slots; the cluster has 0 (waiting for workers to join)");
  GangRequest impossible{1, 0};
  impossible.cpus = 64;
  EXPECT_EQ(NeverFits({Offering("w1", 4, 7, 0)}, impossible),
            "needs 1 ranks of 1 slot and 64 CPUs each, more than all alive workers can hold "
            "(waiting for workers to join)");
}

TEST(TakeCapacityTest, ResourcesTakenAreNotOfferedAgainUntilReturned) {
  GangRequest big{2, 0};
  big.cpus = 3;
  std::vector<WorkerCapacity> workers = {Offering("w1", 4, 7, 0)};
  auto placed = PlaceGang(workers, big);
  ASSERT_OK(placed);
  TakeCapacity(workers, *placed, big);
  EXPECT_EQ(workers[0].free_slots, (std::vector<int>{2, 3}));
  EXPECT_EQ(workers[0].free_cpus, 1);
  EXPECT_THAT(PlaceGang(workers, big), IsError())
      << "2 slots are free, but 6 of the 7 CPUs are taken";
  ReturnCapacity(workers, *placed, big);
  EXPECT_EQ(workers[0].free_slots, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(workers[0].free_cpus, 7);
}

// A placement remembers where its worker was; in capacity listed in
// another order its worker is found by id.
TEST(TakeCapacityTest, APlacementFromCapacityInAnotherOrderTakesFromItsOwnWorker) {
  std::vector<WorkerCapacity> workers = {Worker("a", 2, {0, 1}), Worker("b", 2, {0, 1})};
  auto placed = PlaceGang(workers, {1, 0});
  ASSERT_OK(placed);
  const RankPlacement& p = (*placed)[0];
  ASSERT_EQ(workers[p.worker_index].worker_id, p.worker_id);
  std::vector<WorkerCapacity> reordered = {workers[1], workers[0]};
  TakeCapacity(reordered, *placed, {1, 0});
  for (const WorkerCapacity& w : reordered) {
    EXPECT_EQ(w.free_slots.size(), w.worker_id == p.worker_id ? 1u : 2u) << w.worker_id;
  }
}

TEST(FreeCapacityTest, PlacedAndReportedRanksHoldTheirCpusAndMemory) {
  SchedulableWorker w;
  w.worker_id = "w1";
  w.slots = 4;
  w.cpus = 8;
  w.memory_mb = 16384;
  w.labels = {{"zone", "a"}};
  v1::RunningRank stale;
  stale.mutable_rank()->set_job_id("old");
  stale.set_slot(3);
  stale.set_cpus(2);
  stale.set_memory_mb(4096);
  w.running = std::make_shared<ReportedRanks>(Report({&stale}, w.gpu_indices));
  const std::vector<int> slot_0 = {0};
  HeldSlots held{"w1", slot_0, 3, 1024};
  std::vector<WorkerCapacity> c = FreeCapacity({w}, {held}, "");
  EXPECT_EQ(c[0].free_cpus, 3);
  EXPECT_EQ(c[0].free_memory_mb, 16384 - 4096 - 1024);
  EXPECT_EQ(c[0].total_cpus, 8);
  EXPECT_EQ(c[0].labels.at("zone"), "a");
}

std::vector<RankPlacement> Blocks(const std::vector<std::string>& workers) {
  std::vector<RankPlacement> out;
  for (size_t r = 0; r < workers.size(); ++r) {
    out.push_back({static_cast<int>(r), workers[r], {static_cast<int>(r)}, static_cast<int>(r)});
  }
  return out;
}

// A restart after a worker was lost: the scheduler put rank 0 on w3 and
// rank 1 on w2, but w3 holds rank 1's snapshot, so the two trade.
TEST(NearTheirSnapshotsTest, ARankGoesBackToTheWorkerHoldingItsSnapshot) {
  std::map<int, std::string> held = {{1, "w3"}};
  auto holder = [&](int r) { return held.count(r) ? held[r] : ""; };
  const std::vector<RankPlacement> moved = NearTheirSnapshots(Blocks({"w3", "w2"}), holder);
  EXPECT_EQ(WorkersOf(moved), (std::vector<std::string>{"w2", "w3"}));
  // Rank numbers stay in order; the worker's slot moves with it.
  EXPECT_EQ(moved[0].rank, 0);
  EXPECT_EQ(moved[0].slots, std::vector<int>{1});
  EXPECT_EQ(moved[0].worker_index, 1);
  held = {{0, "w3"}, {1, "w2"}};
  EXPECT_EQ(WorkersOf(NearTheirSnapshots(Blocks({"w2", "w3"}), holder)),
            (std::vector<std::string>{"w3", "w2"}));
}

// A worker's ranks stay consecutive: blocks trade whole, and only with
// blocks of the same size; a holder the placement does not use changes
// nothing.
TEST(NearTheirSnapshotsTest, BlocksTradeWholeAndOnlyWithTheirSize) {
  auto holder_of = [](std::map<int, std::string> held) {
    return [held](int r) { return held.count(r) ? held.at(r) : std::string(); };
  };
  EXPECT_EQ(WorkersOf(NearTheirSnapshots(Blocks({"a", "a", "b", "b"}),
                                         holder_of({{0, "b"}, {1, "b"}, {2, "a"}}))),
            (std::vector<std::string>{"b", "b", "a", "a"}));
  EXPECT_EQ(WorkersOf(NearTheirSnapshots(Blocks({"a", "a", "b"}), holder_of({{2, "a"}}))),
            (std::vector<std::string>{"a", "a", "b"}));
  EXPECT_EQ(WorkersOf(NearTheirSnapshots(Blocks({"a", "b"}), holder_of({{0, "z"}}))),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(NearTheirSnapshots({}, holder_of({})).empty());
  // Block 0 wants b for rank 0, but b holds both of block 1's snapshots: a
  // trade taking one rank to its snapshot and two off theirs is not made.
  EXPECT_EQ(WorkersOf(NearTheirSnapshots(Blocks({"a", "a", "b", "b"}),
                                         holder_of({{0, "b"}, {2, "b"}, {3, "b"}}))),
            (std::vector<std::string>{"a", "a", "b", "b"}));
}

}  // namespace
}  // namespace ringmaster
