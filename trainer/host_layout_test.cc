#include "trainer/host_layout.h"
#include "testing/status_matchers.h"

#include <gloo/rendezvous/hash_store.h>

#include <thread>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(HostLayoutTest, NumbersHostsByTheirLowestRankAndRanksWithinThem) {
  // Ranks 0 and 2 on host a, 1 and 3 on host b: placement need not be
  // contiguous.
  const std::vector<std::string> ids = {"a", "b", "a", "b"};
  const HostLayout r2 = LayoutOf(ids, 2);
  EXPECT_EQ(r2.host, 0);
  EXPECT_EQ(r2.hosts, 2);
  EXPECT_EQ(r2.local_rank, 1);
  EXPECT_EQ(r2.local_size, 2);
  EXPECT_TRUE(r2.uniform);
  const HostLayout r1 = LayoutOf(ids, 1);
  EXPECT_EQ(r1.host, 1);
  EXPECT_EQ(r1.local_rank, 0);
}

TEST(HostLayoutTest, OneRankPerHost) {
  const HostLayout l = LayoutOf({"a", "b", "c"}, 2);
  EXPECT_EQ(l.host, 2);
  EXPECT_EQ(l.hosts, 3);
  EXPECT_EQ(l.local_rank, 0);
  EXPECT_EQ(l.local_size, 1);
  EXPECT_TRUE(l.uniform);
}

TEST(HostLayoutTest, HostsOfDifferentSizesAreNotUniform) {
  const HostLayout l = LayoutOf({"a", "a", "b"}, 2);
  EXPECT_EQ(l.hosts, 2);
  EXPECT_EQ(l.local_size, 1);
  EXPECT_FALSE(l.uniform);
  EXPECT_FALSE(LayoutOf({"a", "a", "b"}, 0).uniform);
}

TEST(HostLayoutTest, ExchangeGivesEveryRankTheSameView) {
  gloo::rendezvous::HashStore store;
  const std::vector<std::string> ids = {"x", "y", "x", "y", "x", "y"};
  std::vector<HostLayout> layouts(ids.size());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < static_cast<int>(ids.size()); ++rank) {
    threads.emplace_back([&, rank] {
      auto layout = ExchangeHostLayout(store, "k", rank, ids.size(), ids[rank]);
      ASSERT_OK(layout) << layout.status();
      layouts[rank] = *layout;
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < static_cast<int>(ids.size()); ++rank) {
    EXPECT_EQ(layouts[rank].host, rank % 2);
    EXPECT_EQ(layouts[rank].local_rank, rank / 2);
    EXPECT_EQ(layouts[rank].local_size, 3);
    EXPECT_EQ(layouts[rank].hosts, 2);
  }
}

TEST(HostLayoutTest, ThisHostHasAnIdentity) {
  EXPECT_FALSE(HostIdentity().empty());
  EXPECT_EQ(HostIdentity(), HostIdentity());
}

}  // namespace
}  // namespace ringmaster
