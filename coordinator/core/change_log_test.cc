#include "coordinator/core/change_log.h"
#include "testing/status_matchers.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

using Changes = std::vector<std::pair<std::string, int64_t>>;

TEST(ChangeLogTest, TellsEachJobChangedSinceARevisionOnceWithItsLatestRevision) {
  ChangeLog log(10);
  EXPECT_EQ(log.Record("a-1"), 1);
  EXPECT_EQ(log.Record("b-2"), 2);
  EXPECT_EQ(log.Record("a-1"), 3);
  EXPECT_EQ(log.Record("c-3"), 4);
  EXPECT_EQ(log.ChangedSince(0).value(), (Changes{{"b-2", 2}, {"a-1", 3}, {"c-3", 4}}));
  EXPECT_EQ(log.ChangedSince(2).value(), (Changes{{"a-1", 3}, {"c-3", 4}}));
  EXPECT_EQ(log.ChangedSince(4).value(), Changes{}) << "up to date";
}

TEST(ChangeLogTest, ARevisionOlderThanWhatIsKeptOrNeverGivenIsOutOfRange) {
  ChangeLog log(3);
  for (int i = 0; i < 5; ++i) log.Record("j-" + std::to_string(i));  // keeps revisions 3..5
  EXPECT_EQ(log.ChangedSince(2).value(), (Changes{{"j-2", 3}, {"j-3", 4}, {"j-4", 5}}))
      << "every change after 2 is still known";
  absl::Status old = log.ChangedSince(1).status();
  EXPECT_THAT(old, StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_EQ(old.message(),
            "revision 1 is too old: only the 3 latest changes are kept (from "
            "revision 3); watch again from the start");
  EXPECT_THAT(log.ChangedSince(6).status(), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(log.ChangedSince(-1).status(), StatusIs(absl::StatusCode::kOutOfRange));
}

TEST(ChangeLogTest, NumbersOnFromWhereItStartsAndCannotTellWhatCameBefore) {
  ChangeLog log(3);
  log.StartAfter(1000);
  EXPECT_EQ(log.Record("a-1"), 1001);
  EXPECT_EQ(log.ChangedSince(1000).value(), (Changes{{"a-1", 1001}}));
  EXPECT_THAT(log.ChangedSince(999).status(), StatusIs(absl::StatusCode::kOutOfRange));
  log.StartAfter(5000);
  EXPECT_EQ(log.Record("a-1"), 1002) << "only before the first change";
}

}  // namespace
}  // namespace ringmaster
