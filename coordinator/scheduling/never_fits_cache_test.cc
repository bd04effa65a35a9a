// NeverFitsCache: a request's answer is kept from pass to pass while the
// workers stay as they were, and found again when one of them changes.
#include "coordinator/scheduling/never_fits_cache.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

constexpr int kRack = 0;

WorkerCapacity Idle(const std::string& id, int slots, int rack, int host) {
  WorkerCapacity w;
  w.worker_id = id;
  w.total_slots = slots;
  for (int s = 0; s < slots; ++s) w.free_slots.push_back(s);
  w.domains = {rack, host};
  return w;
}

// 24 slots packed in one rack.
GangRequest PackedInARack() {
  GangRequest r;
  r.ranks = 24;
  r.placement.pack_level = kRack;
  r.placement.pack_name = "rack";
  return r;
}

// Two racks of two workers of 8 slots: no rack holds 24.
std::vector<WorkerCapacity> TwoRacks() {
  return {Idle("a", 8, 1, 10), Idle("b", 8, 1, 11), Idle("c", 8, 2, 20), Idle("d", 8, 2, 21)};
}

TEST(NeverFitsCacheTest, AnAnswerIsKeptWhileTheWorkersStayAsTheyWere) {
  NeverFitsCache cache;
  std::vector<WorkerCapacity> workers = TwoRacks();
  cache.Refresh(workers);
  const std::string_view first = cache.Get(workers, PackedInARack());
  EXPECT_NE(first.find("never fits as asked"), std::string_view::npos) << first;
  // The next pass: the same workers, their free slots taken (an answer is
  // of the workers idle). The answer is the one found before.
  for (WorkerCapacity& w : workers) w.free_slots.clear();
  cache.Refresh(workers);
  const std::string_view again = cache.Get(workers, PackedInARack());
  EXPECT_EQ(again, first);
  EXPECT_EQ(again.data(), first.data()) << "found again rather than kept";
}

TEST(NeverFitsCacheTest, AWorkerThatJoinsOrChangesIsSeenAtTheNextPass) {
  NeverFitsCache cache;
  std::vector<WorkerCapacity> workers = TwoRacks();
  cache.Refresh(workers);
  ASSERT_FALSE(cache.Get(workers, PackedInARack()).empty());
  // A third worker in rack 1: 24 slots there.
  workers.push_back(Idle("e", 8, 1, 12));
  cache.Refresh(workers);
  EXPECT_EQ(cache.Get(workers, PackedInARack()), "");
  // It has 4 slots now (registered again): rack 1 holds 20.
  workers.back().total_slots = 4;
  cache.Refresh(workers);
  EXPECT_FALSE(cache.Get(workers, PackedInARack()).empty());
  // It moves to rack 2 with 8: rack 2 holds 24.
  workers.back() = Idle("e", 8, 2, 22);
  cache.Refresh(workers);
  EXPECT_EQ(cache.Get(workers, PackedInARack()), "");
}

TEST(NeverFitsCacheTest, LabelsMadeAgainAndSparesAreChanges) {
  NeverFitsCache cache;
  GangRequest selected;
  selected.ranks = 2;
  selected.selector = {{"zone", "a"}};
  std::vector<WorkerCapacity> workers = {Idle("a", 1, 1, 10), Idle("b", 1, 1, 11)};
  workers[0].labels = {{"zone", "a"}};
  cache.Refresh(workers);
  EXPECT_FALSE(cache.Get(workers, selected).empty()) << "one worker of zone a holds 1 rank";
  workers[1].labels = {{"zone", "a"}};
  cache.Refresh(workers);
  EXPECT_EQ(cache.Get(workers, selected), "");

  // A spare is closed to an ordinary job: the answer says so.
  GangRequest two;
  two.ranks = 2;
  cache.Refresh(workers);
  EXPECT_EQ(cache.Get(workers, two), "");
  workers[1].spare = true;
  cache.Refresh(workers);
  EXPECT_NE(cache.Get(workers, two).find("spare"), std::string_view::npos);
}

}  // namespace
}  // namespace ringmaster
