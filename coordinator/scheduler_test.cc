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

}  // namespace
}  // namespace ringmaster
