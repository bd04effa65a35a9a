#include "coordinator/core/outbox.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "common/mutex.h"

namespace ringmaster {
namespace {

v1::Job JobIn(v1::JobState state) {
  v1::Job job;
  job.set_id("a-1");
  job.set_state(state);
  return job;
}

v1::CoordinatorMessage Stop(const std::string& job_id) {
  v1::CoordinatorMessage message;
  message.mutable_stop_job()->set_job_id(job_id);
  return message;
}

// Records what reached workers and watchers, and when the store synced.
struct Recorder {
  Mutex mu;
  std::vector<std::string> events ABSL_GUARDED_BY(mu);

  void Add(std::string event) {
    MutexLock lock(&mu);
    events.push_back(std::move(event));
  }
  std::vector<std::string> Events() {
    MutexLock lock(&mu);
    return events;
  }
};

class OutboxTest : public ::testing::Test {
 protected:
  Recorder recorder_;
  Outbox outbox_{[this] {
                   recorder_.Add("sync");
                   return absl::OkStatus();
                 },
                 [] { return false; },
                 [this](const std::string& worker, const v1::CoordinatorMessage& m) {
                   recorder_.Add(worker + " stop " + m.stop_job().job_id());
                 }};
  Outbox::Observer Watcher(const std::string& name) {
    return [this, name](const v1::Job& job) {
      recorder_.Add(name + " sees " + v1::JobState_Name(job.state()));
    };
  }
};

TEST_F(OutboxTest, NothingIsDeliveredBeforeTheSyncAndAllInOrderAfter) {
  outbox_.Send("w1", Stop("a-1"));
  const int64_t watch = outbox_.Watch(JobIn(v1::RUNNING), Watcher("watcher"));
  outbox_.Notify(JobIn(v1::CANCELLED));
  outbox_.Send("w2", Stop("a-1"));
  EXPECT_TRUE(recorder_.Events().empty());
  outbox_.Flush();
  EXPECT_EQ(recorder_.Events(),
            (std::vector<std::string>{"sync", "w1 stop a-1", "watcher sees RUNNING",
                                      "watcher sees CANCELLED", "w2 stop a-1"}));
  outbox_.Unwatch(watch);
}

TEST_F(OutboxTest, AWatcherSeesNoChangeQueuedBeforeItsFirstSnapshot) {
  const int64_t early = outbox_.Watch(JobIn(v1::PENDING), Watcher("early"));
  outbox_.Notify(JobIn(v1::STARTING));  // queued before `late` watched
  const int64_t late = outbox_.Watch(JobIn(v1::STARTING), Watcher("late"));
  outbox_.Notify(JobIn(v1::RUNNING));
  outbox_.Flush();
  EXPECT_EQ(
      recorder_.Events(),
      (std::vector<std::string>{"sync", "early sees PENDING", "early sees STARTING",
                                "late sees STARTING", "early sees RUNNING", "late sees RUNNING"}));
  outbox_.Unwatch(early);
  outbox_.Unwatch(late);
}

TEST_F(OutboxTest, NoCallAfterUnwatchAndNoSnapshotWithoutWatchers) {
  const int64_t watch = outbox_.Watch(JobIn(v1::RUNNING), Watcher("watcher"));
  outbox_.Flush();
  outbox_.Notify(JobIn(v1::SUCCEEDED));
  outbox_.Unwatch(watch);
  outbox_.Flush();
  outbox_.Notify(JobIn(v1::FAILED));  // nobody watches: not even queued
  outbox_.Flush();
  EXPECT_EQ(recorder_.Events(),
            (std::vector<std::string>{"sync", "watcher sees RUNNING", "sync", "sync"}));
}

TEST_F(OutboxTest, AWatcherOfEveryJobSeesItsListingThenEveryJobsChanges) {
  v1::Job other = JobIn(v1::PENDING);
  other.set_id("b-2");
  outbox_.Notify(JobIn(v1::STARTING));  // before the watch: not seen
  const int64_t all = outbox_.WatchAll({JobIn(v1::STARTING), other}, Watcher("all"));
  const int64_t one = outbox_.Watch(JobIn(v1::STARTING), Watcher("one"));
  outbox_.Notify(JobIn(v1::RUNNING));
  other.set_state(v1::STARTING);
  outbox_.Notify(other);
  outbox_.Flush();
  EXPECT_EQ(recorder_.Events(),
            (std::vector<std::string>{"sync", "all sees STARTING", "all sees PENDING",
                                      "one sees STARTING", "one sees RUNNING", "all sees RUNNING",
                                      "all sees STARTING"}));
  outbox_.Unwatch(all);
  outbox_.Unwatch(one);
  outbox_.Notify(JobIn(v1::SUCCEEDED));  // nobody watches
  outbox_.Flush();
  EXPECT_EQ(recorder_.Events().size(), 8u);
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// Watchers called on the outbox's own thread: in order, after the sync;
// a watcher gone before its changes were handed over is not called.
TEST(OutboxBackgroundTest, WatchersAreCalledInOrderOnTheirOwnThread) {
  Recorder workers, watchers;
  auto outbox = std::make_unique<Outbox>(
      [&] {
        workers.Add("sync");
        watchers.Add("sync");
        return absl::OkStatus();
      },
      [] { return false; },
      [&](const std::string& worker, const v1::CoordinatorMessage& m) {
        workers.Add(worker + " stop " + m.stop_job().job_id());
      },
      nullptr, /*in_background=*/true);
  Mutex mu;
  const std::thread::id flushed_on = std::this_thread::get_id();
  std::vector<std::thread::id> called_on;
  outbox->Watch(JobIn(v1::PENDING), [&](const v1::Job& job) {
    MutexLock lock(&mu);
    called_on.push_back(std::this_thread::get_id());
    watchers.Add("watcher sees " + v1::JobState_Name(job.state()));
  });
  const int64_t gone = outbox->WatchAll(
      {}, [&](const v1::Job& job) { watchers.Add("gone sees " + v1::JobState_Name(job.state())); });
  for (v1::JobState state : {v1::STARTING, v1::RUNNING, v1::SUCCEEDED}) {
    outbox->Notify(JobIn(state));
  }
  outbox->Send("w1", Stop("a-1"));
  outbox->Unwatch(gone);  // its changes are queued, not yet handed over
  outbox->Flush();
  EXPECT_EQ(workers.Events(), (std::vector<std::string>{"sync", "w1 stop a-1"}));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (;;) {
    {
      MutexLock lock(&mu);
      if (called_on.size() == 4 || absl::Now() > deadline) break;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  // What was handed over before the outbox ends is delivered.
  outbox.reset();
  EXPECT_EQ(watchers.Events(),
            (std::vector<std::string>{"sync", "watcher sees PENDING", "watcher sees STARTING",
                                      "watcher sees RUNNING", "watcher sees SUCCEEDED"}));
  MutexLock lock(&mu);
  ASSERT_EQ(called_on.size(), 4u);
  for (std::thread::id id : called_on) EXPECT_NE(id, flushed_on);
}

}  // namespace
}  // namespace ringmaster
