#include "coordinator/scheduler.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

// A fake worker registry: alive workers with the given free slots.
WorkerCapacity Worker(const std::string& id, int total, std::vector<int> free,
                      bool gpus = false) {
  return WorkerCapacity{id, total, std::move(free), gpus};
}

std::vector<std::string> WorkersOf(const std::vector<RankPlacement>& p) {
  std::vector<std::string> ids;
  for (const auto& r : p) ids.push_back(r.worker_id);
  return ids;
}

TEST(PlaceGangTest, PacksOntoOneWorkerWhenItFits) {
  auto p = PlaceGang({Worker("w1", 2, {0, 1}), Worker("w2", 4, {0, 1, 2, 3}),
                      Worker("w3", 3, {0, 1, 2})},
                     3, 0);
  ASSERT_TRUE(p.ok()) << p.status();
  // w3 is the tightest worker that holds all three ranks.
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"w3", "w3", "w3"}));
  EXPECT_EQ((*p)[2].slots, std::vector<int>{2});
}

TEST(PlaceGangTest, UsesFewestWorkersAndOrdersRanksByWorkerThenSlot) {
  auto p = PlaceGang({Worker("w1", 2, {1}), Worker("w2", 4, {0, 2, 3}),
                      Worker("w3", 2, {0, 1})},
                     5, 0);
  ASSERT_TRUE(p.ok()) << p.status();
  // w2 (3 free) and w3 (2 free) suffice; w1 is left alone.
  EXPECT_EQ(WorkersOf(*p),
            (std::vector<std::string>{"w2", "w2", "w2", "w3", "w3"}));
  for (int r = 0; r < 5; ++r) EXPECT_EQ((*p)[r].rank, r);
  EXPECT_EQ((*p)[0].slots, std::vector<int>{0});
  EXPECT_EQ((*p)[1].slots, std::vector<int>{2});
  EXPECT_EQ((*p)[3].slots, std::vector<int>{0});
}

TEST(PlaceGangTest, NotEnoughSlotsPlacesNothingAndSaysWhy) {
  auto p = PlaceGang({Worker("w1", 1, {0}), Worker("w2", 1, {})}, 2, 0);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(p.status().message(), "needs 2 free slots, 1 free on 2 alive workers");
}

TEST(PlaceGangTest, GpuRanksOnlyOnGpuWorkersAndTakeWholeGpus) {
  auto p = PlaceGang({Worker("cpu", 8, {0, 1, 2, 3, 4, 5, 6, 7}),
                      Worker("gpu", 4, {0, 1, 2, 3}, /*gpus=*/true)},
                     2, 2);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"gpu", "gpu"}));
  EXPECT_EQ((*p)[1].slots, (std::vector<int>{2, 3}));
  EXPECT_FALSE(PlaceGang({Worker("cpu", 8, {0, 1, 2, 3})}, 1, 1).ok());
}

TEST(ScheduleTest, FifoHeadBlocksTheQueueButOversizedJobsDoNot) {
  std::vector<WorkerCapacity> workers = {Worker("w1", 2, {0, 1}),
                                         Worker("w2", 2, {1})};
  ScheduleResult r = Schedule({{"huge", 10, 0},   // can never fit: skipped
                               {"a", 2, 0},       // fits on w1
                               {"b", 2, 0},       // 1 slot left: blocks
                               {"c", 1, 0}},      // would fit, but is behind b
                              workers);
  ASSERT_EQ(r.placed.count("a"), 1u);
  EXPECT_EQ(WorkersOf(r.placed["a"]), (std::vector<std::string>{"w1", "w1"}));
  EXPECT_EQ(r.placed.count("b"), 0u);
  EXPECT_EQ(r.placed.count("c"), 0u);
  EXPECT_EQ(r.waiting["b"], "needs 2 free slots, 1 free on 2 alive workers");
  EXPECT_EQ(r.waiting["c"], "queued behind b");
  EXPECT_NE(r.waiting["huge"].find("more than the 4"), std::string::npos)
      << r.waiting["huge"];
}

TEST(ScheduleTest, EmptyClusterKeepsJobsPendingWithReason) {
  ScheduleResult r = Schedule({{"a", 1, 0}}, {});
  EXPECT_TRUE(r.placed.empty());
  EXPECT_NE(r.waiting["a"].find("waiting for workers"), std::string::npos);
}

TEST(PlaceGangTest, ElasticJobTakesAsManyRanksAsFitDownToItsMinimum) {
  const std::vector<WorkerCapacity> two_free = {Worker("w1", 1, {0}), Worker("w2", 1, {0}),
                                                Worker("w3", 1, {})};
  auto p = PlaceGang(two_free, 3, 0, /*min_ranks=*/2);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"w1", "w2"}));
  auto none = PlaceGang(two_free, 3, 0, /*min_ranks=*/3);
  EXPECT_EQ(none.status().message(), "needs 3 free slots, 2 free on 3 alive workers");
  auto full = PlaceGang({Worker("w1", 4, {0, 1, 2, 3})}, 3, 0, /*min_ranks=*/2);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->size(), 3u) << "never fewer than fit";
}

TEST(ScheduleTest, ElasticJobIsNotBlockedByItsFullSize) {
  ScheduleResult r = Schedule({{"elastic", 3, 0, 2}, {"next", 1, 0, 0}},
                              {Worker("w1", 1, {0}), Worker("w2", 1, {0})});
  ASSERT_EQ(r.placed.count("elastic"), 1u);
  EXPECT_EQ(r.placed["elastic"].size(), 2u);
  EXPECT_EQ(r.waiting["next"], "needs 1 free slots, 0 free on 2 alive workers");
}

TEST(FreeCapacityTest, PlacedAndReportedRanksHoldTheirSlots) {
  SchedulableWorker w;
  w.worker_id = "w1";
  w.slots = 4;
  v1::RunningRank stale;  // a rank of an attempt that ended while w1 was away
  stale.mutable_rank()->set_job_id("old");
  stale.set_slot(3);
  w.running.push_back(stale);
  std::vector<WorkerCapacity> c = FreeCapacity({w}, {{"w1", 1, {}}}, "");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].free_slots, (std::vector<int>{0, 2}));
  EXPECT_EQ(FreeCapacity({w}, {}, "old")[0].free_slots, (std::vector<int>{0, 1, 2, 3}))
      << "a job's own ranks are left out when asking whether it could grow";
}

TEST(FreeCapacityTest, GpuRanksHoldTheSlotsOfTheirGpus) {
  SchedulableWorker w;
  w.worker_id = "g1";
  w.slots = 4;
  w.gpu_indices = {0, 1, 2, 3};
  std::vector<WorkerCapacity> c = FreeCapacity({w}, {{"g1", 0, {0, 1}}}, "");
  EXPECT_TRUE(c[0].gpu_slots);
  EXPECT_EQ(c[0].free_slots, (std::vector<int>{2, 3}));
}

}  // namespace
}  // namespace ringmaster
