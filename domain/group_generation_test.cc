#include "domain/group_generation.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(GroupGenerationTest, EachGroupHasItsOwnKeysAndTheFirstTheBackendsOwn) {
  EXPECT_EQ(GroupKey(2), "group/2");
  EXPECT_EQ(GroupPrefix(0), "");
  EXPECT_EQ(GroupPrefix(2), "group/2");
}

TEST(GroupGenerationTest, AGroupsMembersReadBackAndNothingElseDoes) {
  EXPECT_EQ(GroupValue({0, 2, 3}), "0,2,3");
  std::vector<int> members;
  ASSERT_TRUE(ParseGroupValue("0,2,3", &members));
  EXPECT_EQ(members, std::vector<int>({0, 2, 3}));
  ASSERT_TRUE(ParseGroupValue("5", &members));
  EXPECT_EQ(members, std::vector<int>({5}));
  for (const char* bad : {"", "3,", "0,,1", "1,0", "1,1", "-1", "a", "0 1"}) {
    EXPECT_FALSE(ParseGroupValue(bad, &members)) << bad;
  }
}

TEST(GroupGenerationTest, ALostPeerKeyReadsBackAndNoOtherKeyDoes) {
  int generation = -1, rank = -1;
  ASSERT_TRUE(ParseLostPeerKey(LostPeerKey(3, 12), &generation, &rank));
  EXPECT_EQ(generation, 3);
  EXPECT_EQ(rank, 12);
  for (const char* other : {"group/3", "group/3/lost", "group/x/lost/1", "group/3/lost/1/2",
                            "gloo/group/3/lost/1", "group/3/found/1", "group/3/lost/"}) {
    EXPECT_FALSE(ParseLostPeerKey(other, &generation, &rank)) << other;
  }
}

}  // namespace
}  // namespace ringmaster
