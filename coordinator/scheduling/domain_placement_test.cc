// PlaceGang on workers in network domains (--topology-levels): best fit
// across levels, rank order by domain, pack required or preferred, spread,
// and selectors with placement.
#include "coordinator/scheduling/domain_placement.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

// Levels rack (0) and host (1); domain ids are any ints shared within one
// domain.
constexpr int kRack = 0;
constexpr int kHost = 1;

WorkerCapacity On(const std::string& id, int free, TopologyDomains domains,
                  std::map<std::string, std::string> labels = {}) {
  WorkerCapacity w;
  w.worker_id = id;
  w.total_slots = free;
  for (int s = 0; s < free; ++s) w.free_slots.push_back(s);
  w.domains = std::move(domains);
  w.labels = std::move(labels);
  return w;
}

// A worker of `total` slots of which the first `free` are free.
WorkerCapacity Busy(const std::string& id, int total, int free, TopologyDomains domains) {
  WorkerCapacity w = On(id, free, std::move(domains));
  w.total_slots = total;
  return w;
}

GangRequest Gang(int ranks, int pack = -1, bool required = true, int spread = -1) {
  GangRequest r;
  r.ranks = ranks;
  r.placement.pack_level = pack;
  r.placement.pack_required = required;
  r.placement.spread_level = spread;
  r.placement.pack_name = pack == kRack ? "rack" : "host";
  r.placement.spread_name = spread == kRack ? "rack" : "host";
  return r;
}

std::vector<std::string> WorkersOf(const std::vector<RankPlacement>& p) {
  std::vector<std::string> ids;
  for (const RankPlacement& r : p) ids.push_back(r.worker_id);
  return ids;
}

// Rack 1: hosts a (4 free) and b (4); rack 2: hosts c, d, e (2 each).
std::vector<WorkerCapacity> TwoRacks() {
  return {On("a", 4, {1, 10}), On("b", 4, {1, 11}), On("c", 2, {2, 20}), On("d", 2, {2, 21}),
          On("e", 2, {2, 22})};
}

TEST(DomainPlacementTest, AGangGoesToTheSmallestDomainThatHoldsIt) {
  // Both racks hold 6 ranks: rack 2 (6 free) is the tighter fit, and rack
  // 1 stays whole for a larger job.
  auto p = PlaceGang(TwoRacks(), Gang(6));
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"c", "c", "d", "d", "e", "e"}));
  // Only rack 1 holds 7.
  p = PlaceGang(TwoRacks(), Gang(7));
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"a", "a", "a", "a", "b", "b", "b"}));
}

TEST(DomainPlacementTest, WithinADomainTheTightestHostThatHoldsTheRest) {
  // Rack 2 is the tightest rack for 3 ranks; no host of it holds 3, so 2
  // go on one host and the last on another, leaving a host of it free.
  auto p = PlaceGang(TwoRacks(), Gang(3));
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"c", "c", "d"}));
  // A host holds 2: one host.
  p = PlaceGang(TwoRacks(), Gang(2));
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"c", "c"}));
}

TEST(DomainPlacementTest, RanksAreNumberedDomainByDomain) {
  // Workers registered in an order that alternates racks: rank order
  // follows the racks, then the hosts, not the registration.
  std::vector<WorkerCapacity> workers = {On("r1-h1", 1, {1, 10}), On("r2-h1", 1, {2, 20}),
                                         On("r1-h2", 1, {1, 11}), On("r2-h2", 1, {2, 21})};
  auto p = PlaceGang(workers, Gang(4));
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"r1-h1", "r1-h2", "r2-h1", "r2-h2"}));
  for (int r = 0; r < 4; ++r) EXPECT_EQ((*p)[r].rank, r);
  // Two workers on one host (two GPU boxes' workers, say): its ranks are
  // consecutive.
  workers = {On("h1-w1", 2, {1, 10}), On("h2-w1", 2, {1, 11}), On("h1-w2", 2, {1, 10})};
  p = PlaceGang(workers, Gang(6));
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p),
            (std::vector<std::string>{"h1-w1", "h1-w1", "h1-w2", "h1-w2", "h2-w1", "h2-w1"}));
}

TEST(DomainPlacementTest, PackRequiredWaitsWhenNoDomainHoldsTheGangAndSaysWhy) {
  // 9 ranks: neither rack holds them (8 and 6).
  auto p = PlaceGang(TwoRacks(), Gang(9, kRack, /*required=*/true));
  EXPECT_THAT(p.status(), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(p.status().message(), "no rack with 9 free slots; the largest has 8");
  // Preferred: across racks, fewest racks, roomiest first.
  p = PlaceGang(TwoRacks(), Gang(9, kRack, /*required=*/false));
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"a", "a", "a", "a", "b", "b", "b", "b", "c"}));
  // Packed where it can be, required or not: rack 2 holds 5 (6 free), and
  // is the tighter fit.
  for (bool required : {true, false}) {
    p = PlaceGang(TwoRacks(), Gang(5, kRack, required));
    ASSERT_OK(p) << p.status();
    EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"c", "c", "d", "d", "e"}));
  }
}

TEST(DomainPlacementTest, PackRequiredLooksAtTheLevelItNamesNotTheOneAbove) {
  // Levels block, rack, host. Block 1 is the tighter block for 4 ranks (5
  // free) but its racks hold 3 and 2; block 2's rack 3 holds 4.
  std::vector<WorkerCapacity> workers = {On("b1-r1", 3, {1, 1, 10}), On("b1-r2", 2, {1, 2, 20}),
                                         On("b2-r3-a", 2, {2, 3, 30}), On("b2-r3-b", 2, {2, 3, 31}),
                                         On("b2-r4", 2, {2, 4, 40})};
  GangRequest gang = Gang(4);
  gang.placement.pack_level = 1;
  gang.placement.pack_name = "rack";
  auto p = PlaceGang(workers, gang);
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"b2-r3-a", "b2-r3-a", "b2-r3-b", "b2-r3-b"}));
  // Without pack, the best fit from the top: block 1, across its racks.
  p = PlaceGang(workers, Gang(4));
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"b1-r1", "b1-r1", "b1-r1", "b1-r2"}));
}

TEST(DomainPlacementTest, SpreadPutsOneRankPerDomain) {
  // Hosts 10 and 11 have two workers each.
  std::vector<WorkerCapacity> workers = {On("h10-a", 2, {1, 10}), On("h10-b", 2, {1, 10}),
                                         On("h11-a", 2, {1, 11}), On("h11-b", 2, {1, 11}),
                                         On("h12", 2, {2, 12})};
  auto p = PlaceGang(workers, Gang(2, -1, true, kHost));
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"h10-a", "h11-a"}));
  p = PlaceGang(workers, Gang(4, -1, true, kHost));
  EXPECT_THAT(p.status(), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(p.status().message(), "needs 4 free slots; room for 3 ranks at one per host");
  // With pack: one per host within one rack.
  p = PlaceGang(workers, Gang(2, kRack, true, kHost));
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"h10-a", "h11-a"}));
  p = PlaceGang(workers, Gang(3, kRack, true, kHost));
  EXPECT_EQ(p.status().message(), "no rack with 3 free slots; the largest has 2");
}

TEST(DomainPlacementTest, ASelectorComposesWithPlacement) {
  // Rack 1: 3 workers, 1 labelled gpu=h100; rack 2: 5 workers, 3 labelled.
  // A gang of 3, one rank per worker, packed by rack: rack 1 is the
  // tighter fit of all workers, rack 2 the only one with 3 matching.
  std::vector<WorkerCapacity> workers = {On("r1-a", 1, {1, 10}, {{"gpu", "h100"}}),
                                         On("r1-b", 1, {1, 11}),
                                         On("r1-c", 1, {1, 12}),
                                         On("r2-a", 1, {2, 20}, {{"gpu", "h100"}}),
                                         On("r2-b", 1, {2, 21}, {{"gpu", "h100"}}),
                                         On("r2-c", 1, {2, 22}, {{"gpu", "h100"}}),
                                         On("r2-d", 1, {2, 23}),
                                         On("r2-e", 1, {2, 24})};
  GangRequest gang = Gang(3, kRack);
  gang.ranks_per_worker = 1;
  auto p = PlaceGang(workers, gang);
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"r1-a", "r1-b", "r1-c"}));
  gang.selector = {{"gpu", "h100"}};
  p = PlaceGang(workers, gang);
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"r2-a", "r2-b", "r2-c"}));
  gang.ranks = 4;
  EXPECT_EQ(PlaceGang(workers, gang).status().message(),
            "no rack with 4 free slots; the largest has 3");
}

TEST(DomainPlacementTest, AnElasticPackedGangWaitsInARackThatCanHoldIt) {
  // Rack 1 has 20 slots, 4 free; rack 2 has 10, all free. A reservation
  // (an elastic gang of 16) takes rack 1's 4: rack 2, roomier now, can
  // never hold 16.
  std::vector<WorkerCapacity> workers = {Busy("r1-a", 4, 4, {1, 10}), Busy("r1-b", 4, 0, {1, 11}),
                                         Busy("r1-c", 4, 0, {1, 12}), Busy("r1-d", 4, 0, {1, 13}),
                                         Busy("r1-e", 4, 0, {1, 14}), Busy("r2-a", 5, 5, {2, 20}),
                                         Busy("r2-b", 5, 5, {2, 21})};
  GangRequest gang = Gang(16, kRack);
  gang.min_ranks = 1;
  auto p = PlaceGang(workers, gang);
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"r1-a", "r1-a", "r1-a", "r1-a"}));
  // No rack could hold 24: the roomiest now.
  gang.ranks = 24;
  p = PlaceGang(workers, gang);
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(p->size(), 10u);
  EXPECT_EQ((*p)[0].worker_id, "r2-a");
}

TEST(DomainPlacementTest, AnElasticGangPackedByRackTakesWhatTheRoomiestRackHolds) {
  GangRequest gang = Gang(12, kRack);
  gang.min_ranks = 4;
  auto p = PlaceGang(TwoRacks(), gang);
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"a", "a", "a", "a", "b", "b", "b", "b"}));
  gang.min_ranks = 9;
  EXPECT_THAT(PlaceGang(TwoRacks(), gang).status(), StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(DomainPlacementTest, AWorkerWithoutTheLevelsValueTakesNoPackedGang) {
  // "lone" has no rack label: it is in no rack, and a gang packed by rack
  // does not go there, however roomy.
  std::vector<WorkerCapacity> workers = {On("lone", 8, {-1, 10}), On("r1", 2, {1, 11})};
  auto p = PlaceGang(workers, Gang(2, kRack));
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"r1", "r1"}));
  EXPECT_EQ(PlaceGang(workers, Gang(3, kRack)).status().message(),
            "no rack with 3 free slots; the largest has 2");
  // Unpacked, it is a domain of its own.
  p = PlaceGang(workers, Gang(3));
  ASSERT_OK(p) << p.status();
  EXPECT_EQ(WorkersOf(*p), (std::vector<std::string>{"lone", "lone", "lone"}));
}

}  // namespace
}  // namespace ringmaster
