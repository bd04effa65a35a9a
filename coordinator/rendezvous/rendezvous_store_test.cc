#include "coordinator/rendezvous/rendezvous_store.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/fake_clock.h"
#include "coordinator/rendezvous/fake_rendezvous_journal.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

const ScopeId kScope{"job-1", 0};

class RendezvousStoreTest : public ::testing::Test {
 protected:
  RendezvousStoreTest() : store_(&clock_) { store_.OpenScope(kScope); }
  FakeClock clock_;
  RendezvousStore store_;
};

TEST_F(RendezvousStoreTest, SetThenGet) {
  ASSERT_OK(store_.Set(kScope, "k", "v"));
  auto v = store_.Get(kScope, "k");
  ASSERT_OK(v);
  EXPECT_EQ(*v, "v");
  EXPECT_THAT(store_.Get(kScope, "missing").status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(RendezvousStoreTest, WaitWakesWhenTheLastKeyIsSet) {
  absl::Status result = absl::UnknownError("not called");
  int calls = 0;
  store_.Wait(kScope, {"a", "b"}, clock_.Now() + absl::Seconds(30), [&](absl::Status s) {
    result = s;
    ++calls;
  });
  ASSERT_OK(store_.Set(kScope, "a", "1"));
  EXPECT_EQ(calls, 0) << "one of two keys must not wake the waiter";
  ASSERT_OK(store_.Set(kScope, "b", "2"));
  EXPECT_EQ(calls, 1);
  EXPECT_OK(result);
  ASSERT_OK(store_.Set(kScope, "b", "3"));
  EXPECT_EQ(calls, 1) << "a waiter is called exactly once";
}

TEST_F(RendezvousStoreTest, WaitWakesAcrossThreads) {
  std::thread setter([&] { ASSERT_OK(store_.Set(kScope, "x", "1")); });
  absl::Status s = store_.WaitBlocking(kScope, {"x"}, clock_.Now() + absl::Hours(1));
  setter.join();
  EXPECT_OK(s) << s;
}

TEST_F(RendezvousStoreTest, DeadlineExpiresOnTheClock) {
  absl::Status result;
  int calls = 0;
  store_.Wait(kScope, {"never", "set"}, clock_.Now() + absl::Seconds(10), [&](absl::Status s) {
    result = s;
    ++calls;
  });
  ASSERT_OK(store_.Set(kScope, "set", "1"));
  clock_.Advance(absl::Seconds(9));
  store_.ExpireWaiters();
  EXPECT_EQ(calls, 0);
  clock_.Advance(absl::Seconds(1));
  store_.ExpireWaiters();
  ASSERT_EQ(calls, 1);
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_NE(result.message().find("never"), std::string::npos) << result;
  EXPECT_EQ(result.message().find("set,"), std::string::npos) << result;
}

TEST_F(RendezvousStoreTest, AddIsAtomicUnderConcurrentCallers) {
  constexpr int kThreads = 8;
  constexpr int kAddsPerThread = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kAddsPerThread; ++i) {
        ASSERT_OK(store_.Add(kScope, "counter", 1));
      }
    });
  }
  for (auto& t : threads) t.join();
  auto v = store_.Get(kScope, "counter");
  ASSERT_OK(v);
  EXPECT_EQ(*v, std::to_string(kThreads * kAddsPerThread));
}

TEST_F(RendezvousStoreTest, AddRefusesNonIntegers) {
  ASSERT_OK(store_.Set(kScope, "k", "abc"));
  EXPECT_THAT(store_.Add(kScope, "k", 1).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(RendezvousStoreTest, ScopesAreIsolatedAndDroppingAbortsWaiters) {
  const ScopeId next{"job-1", 1};
  store_.OpenScope(next);
  ASSERT_OK(store_.Set(kScope, "k", "old"));
  EXPECT_THAT(store_.Get(next, "k").status(), StatusIs(absl::StatusCode::kNotFound));

  absl::Status result;
  store_.Wait(kScope, {"other"}, clock_.Now() + absl::Hours(1),
              [&](absl::Status s) { result = s; });
  store_.DropScope(kScope);
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(store_.Set(kScope, "k", "v"), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// Shutdown: a waiter an hour from its deadline ends now, once; so does a
// Wait that arrives after.
TEST_F(RendezvousStoreTest, CloseEndsEveryWaiterNowAndLaterOnesAtOnce) {
  std::vector<absl::Status> results;
  store_.Wait(kScope, {"never"}, clock_.Now() + absl::Hours(1),
              [&](absl::Status s) { results.push_back(s); });
  EXPECT_TRUE(results.empty());
  store_.Close();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_THAT(results[0], StatusIs(absl::StatusCode::kUnavailable));
  store_.Wait(kScope, {"never"}, clock_.Now() + absl::Hours(1),
              [&](absl::Status s) { results.push_back(s); });
  ASSERT_EQ(results.size(), 2u);
  EXPECT_THAT(results[1], StatusIs(absl::StatusCode::kUnavailable));
  clock_.Advance(absl::Hours(2));
  store_.ExpireWaiters();
  EXPECT_EQ(results.size(), 2u) << "each waiter is called exactly once";
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

TEST(RendezvousLimitsTest, ValuesAndScopesAreBoundedAndRefusalsNameTheLimit) {
  FakeClock clock;
  RendezvousStore store(&clock, {/*max_value_bytes=*/100, /*max_scope_bytes=*/250});
  store.OpenScope(kScope);
  absl::Status big = store.Set(kScope, "k", std::string(101, 'x'));
  EXPECT_THAT(big, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(big.message(),
            "a value of 101 bytes for key \"k\"; the limit is 100 "
            "(coordinator --max-rendezvous-value-bytes)");
  EXPECT_THAT(store.Get(kScope, "k").status(), StatusIs(absl::StatusCode::kNotFound))
      << "nothing stored";
  ASSERT_OK(store.Set(kScope, "a", std::string(100, 'a')));  // 101 bytes
  ASSERT_OK(store.Set(kScope, "b", std::string(100, 'b')));  // 202
  absl::Status full = store.Set(kScope, "c", std::string(100, 'c'));
  EXPECT_THAT(full, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(full.message().find("the limit is 250 (coordinator --max-rendezvous-scope-bytes)"),
            absl::string_view::npos)
      << full;
  // Replacing a value counts its new size, not both.
  EXPECT_OK(store.Set(kScope, "a", std::string(40, 'a')));
  EXPECT_OK(store.Set(kScope, "c", std::string(40, 'c')));        // 41 + 101 + 41 = 183
  EXPECT_OK(store.Add(kScope, "n", 1));                           // 185
  EXPECT_EQ(store.Set(kScope, "d", std::string(65, 'd')).code(),  // 251
            absl::StatusCode::kResourceExhausted);
  EXPECT_OK(store.Set(kScope, "d", std::string(64, 'd')));  // 250
}

class JournaledRendezvousTest : public ::testing::Test {
 protected:
  JournaledRendezvousTest() : store_(&clock_, {}, &journal_) { store_.OpenScope(kScope); }
  FakeClock clock_;
  FakeRendezvousJournal journal_;
  RendezvousStore store_;
};

TEST_F(JournaledRendezvousTest, ASetIsAnsweredOnceItsKeyIsDurable) {
  journal_.Hold(true);
  std::atomic<bool> answered{false};
  std::thread setter([&] {
    EXPECT_OK(store_.Set(kScope, "addr", "10.0.0.1:5000"));
    answered = true;
  });
  ASSERT_TRUE(testing::WaitFor([&] { return !journal_.waited().empty(); }, absl::Seconds(10)));
  EXPECT_FALSE(answered) << "answered before the journal made it durable";
  EXPECT_EQ(journal_.scopes()[kScope]["addr"], "10.0.0.1:5000");
  journal_.Hold(false);
  setter.join();
  EXPECT_TRUE(answered);
}

TEST_F(JournaledRendezvousTest, TheJournalKeepsConcurrentAddsInTheirOrder) {
  std::vector<std::thread> adders;
  for (int t = 0; t < 8; ++t) {
    adders.emplace_back([&] {
      for (int i = 0; i < 100; ++i) ASSERT_OK(store_.Add(kScope, "count", 1));
    });
  }
  for (std::thread& t : adders) t.join();
  EXPECT_EQ(*store_.Get(kScope, "count"), "800");
  EXPECT_EQ(journal_.scopes()[kScope]["count"], "800");
}

TEST_F(JournaledRendezvousTest, TheNextLeaderRestoresTheScopesOfRunningAttemptsAlone) {
  ASSERT_OK(store_.Set(kScope, "rank0", "a"));
  const ScopeId ended{"job-2", 3};
  store_.OpenScope(ended);
  ASSERT_OK(store_.Set(ended, "rank0", "b"));

  RendezvousStore next(&clock_, {}, &journal_);
  ASSERT_OK(next.Restore());
  next.OpenScope(kScope);  // the attempt found running
  next.EndRestore();
  EXPECT_EQ(*next.Get(kScope, "rank0"), "a");
  absl::Status waited = next.WaitBlocking(kScope, {"rank0"}, clock_.Now() + absl::Seconds(1));
  EXPECT_OK(waited);
  EXPECT_THAT(next.Get(ended, "rank0").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(journal_.scopes().count(ended), 0u) << "an ended attempt's keys are forgotten";
  // The restored scope's bytes count against its limit as before.
  ASSERT_OK(next.Set(kScope, "rank1", "c"));
  next.DropScope(kScope);
  EXPECT_TRUE(journal_.scopes().empty());
}

TEST_F(JournaledRendezvousTest, AKeyTheJournalCannotKeepIsRefusedButSetHere) {
  absl::Status woken = absl::UnknownError("not called");
  store_.Wait(kScope, {"k"}, clock_.Now() + absl::Seconds(30), [&](absl::Status s) { woken = s; });
  journal_.SetDown(absl::UnavailableError("the database is away"));
  absl::Status set = store_.Set(kScope, "k", "v");
  EXPECT_THAT(set, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(set.message(),
            "the coordinator could not keep key \"k\" durably; set it again: the database is "
            "away");
  EXPECT_OK(woken);
  EXPECT_EQ(*store_.Get(kScope, "k"), "v");
  EXPECT_THAT(store_.Add(kScope, "n", 1).status(), StatusIs(absl::StatusCode::kUnavailable));
  journal_.SetDown(absl::OkStatus());
  ASSERT_OK(store_.Set(kScope, "k", "v"));
  EXPECT_EQ(journal_.scopes()[kScope]["k"], "v");
}

}  // namespace
}  // namespace ringmaster
