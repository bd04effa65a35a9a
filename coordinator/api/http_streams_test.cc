// The streams' shared events and their ids.
#include "coordinator/api/http_streams.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

std::shared_ptr<const JobEventCache::Event> EventOf(const std::string& text) {
  auto event = std::make_shared<JobEventCache::Event>();
  event->text = text;
  return event;
}

TEST(JobEventCacheTest, AnEventIsFoundByItsTypeAndExactBytes) {
  JobEventCache cache;
  v1::JobsEvent change;
  change.mutable_job()->set_id("job-1");
  change.set_resume_token("t1");
  const std::string bytes = change.SerializeAsString();
  EXPECT_EQ(cache.Find(v1::JobsEvent::descriptor(), bytes), nullptr);
  cache.Keep(v1::JobsEvent::descriptor(), bytes, EventOf("data: one\n\n"));
  const auto found = cache.Find(v1::JobsEvent::descriptor(), bytes);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->text, "data: one\n\n");
  // The same bytes as another message are another event; other bytes too.
  EXPECT_EQ(cache.Find(v1::JobEvent::descriptor(), bytes), nullptr);
  change.set_resume_token("t2");
  EXPECT_EQ(cache.Find(v1::JobsEvent::descriptor(), change.SerializeAsString()), nullptr);
}

TEST(JobEventCacheTest, ItKeepsTheLastEventsAndNoneTooLarge) {
  JobEventCache cache;
  const auto* type = v1::JobsEvent::descriptor();
  for (size_t i = 0; i < JobEventCache::kEventsKept + 10; ++i) {
    cache.Keep(type, absl::StrCat("bytes-", i), EventOf(absl::StrCat("data: ", i, "\n\n")));
  }
  EXPECT_EQ(cache.size(), JobEventCache::kEventsKept);
  EXPECT_EQ(cache.Find(type, "bytes-0"), nullptr) << "the oldest went first";
  EXPECT_EQ(cache.Find(type, "bytes-9"), nullptr);
  EXPECT_NE(cache.Find(type, "bytes-10"), nullptr);
  EXPECT_NE(cache.Find(type, absl::StrCat("bytes-", JobEventCache::kEventsKept + 9)), nullptr);
  const std::string large(JobEventCache::kMaxEventBytes + 1, 'x');
  cache.Keep(type, large, EventOf("data: large\n\n"));
  EXPECT_EQ(cache.Find(type, large), nullptr);
  EXPECT_EQ(cache.size(), JobEventCache::kEventsKept);
}

TEST(EventIdAfterTest, AJobsEventsIdIsItsResumeToken) {
  v1::JobsEvent change;
  change.set_resume_token("abc");
  LogPositions positions;
  EXPECT_EQ(EventIdAfter(change, &positions), "abc");
  EXPECT_EQ(EventIdAfter(v1::JobEvent(), &positions), "");
}

}  // namespace
}  // namespace ringmaster
