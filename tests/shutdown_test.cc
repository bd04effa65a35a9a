// A coordinator asked to stop (SIGTERM) stops within 5 s whatever its
// callers are waiting for: a rendezvous Wait with an hour to go, a job
// watch, a worker's stream.
#include <signal.h>
#include <sys/wait.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <iostream>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "common/mutex.h"
#include "common/net.h"
#include "common/subprocess.h"
#include "domain/rendezvous_client.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

// A coordinator and one worker as processes on a free port; killed when
// the test ends, unless the coordinator was reaped already.
struct Daemons {
  Daemons() {
    state = testing::MakeTempDir("shutdown");
    absl::StatusOr<int> port = PickFreePort("127.0.0.1");
    EXPECT_OK(port);
    address = absl::StrCat("127.0.0.1:", port.value_or(0));
    SubprocessSpec spec;
    spec.argv = {testing::Runfile("coordinator/ringmaster-coordinator"),
                 "--port",
                 absl::StrCat(port.value_or(0)),
                 "--metrics-port",
                 "0",
                 "--http-port",
                 "0",
                 "--state-dir",
                 state + "/c"};
    spec.env = CurrentEnvironment();
    spec.output_path = state + "/log";
    coordinator = SpawnProcess(spec).value_or(0);
    spec.argv = {testing::Runfile("worker/ringmaster-worker"),
                 "--coordinator",
                 address,
                 "--port",
                 "0",
                 "--metrics-port",
                 "0",
                 "--state-dir",
                 state + "/w"};
    spec.output_path = state + "/worker.log";
    worker = SpawnProcess(spec).value_or(0);
  }
  ~Daemons() {
    for (pid_t pid : {worker, reaped ? 0 : coordinator}) testing::KillAndReap(pid);
  }
  std::string Log() const { return testing::Shell("tail -n 20 " + state + "/log").out; }

  std::string state;
  std::string address;
  pid_t coordinator = 0;
  pid_t worker = 0;
  bool reaped = false;
};

// A running one-rank job: its attempt's rendezvous scope is open.
absl::StatusOr<std::string> StartSleeper(Client& client) {
  if (!testing::WaitFor(
          [&] {
            auto workers = client.ListWorkers();
            return workers.ok() && workers->size() == 1;
          },
          absl::Seconds(20))) {
    return absl::DeadlineExceededError("the worker did not register");
  }
  v1::JobSpec spec;
  spec.set_name("waits");
  spec.set_ranks(1);
  spec.set_working_dir("/");
  spec.add_command("sleep");
  spec.add_command("300");
  absl::StatusOr<std::string> job = client.Submit(spec);
  if (!job.ok()) return job;
  if (!testing::WaitFor(
          [&] {
            auto j = client.GetJob(*job);
            return j.ok() && j->state() == v1::RUNNING;
          },
          absl::Seconds(20))) {
    return absl::DeadlineExceededError("the job did not start");
  }
  return job;
}

TEST(ShutdownTest, SigtermEndsPendingWaitsWatchesAndLogStreamsWithinFiveSeconds) {
  Daemons daemons;
  ASSERT_GT(daemons.coordinator, 0);
  ASSERT_GT(daemons.worker, 0);
  const std::string& address = daemons.address;
  Client client(address);
  absl::StatusOr<std::string> job = StartSleeper(client);
  ASSERT_OK(job) << job.status() << "\n" << daemons.Log();
  absl::Status wait_status;
  Notification waited;
  std::thread waiter([&] {
    RendezvousClient store(address, *job, 0);
    wait_status = store.Wait({"never-set"}, absl::Hours(1));
    waited.Notify();
  });
  absl::Status watch_status;
  Notification watched;
  std::thread watcher([&] {
    watch_status = client.WatchJob(*job, [](const v1::Job&) { return true; });
    watched.Notify();
  });
  absl::Status logs_status;
  Notification followed;
  std::thread follower([&] {
    logs_status =
        client.StreamLogs(*job, std::nullopt, /*follow=*/true, [](const v1::LogChunk&) {});
    followed.Notify();
  });
  // The Wait, the watch and the log stream are pending in the server.
  EXPECT_FALSE(waited.WaitForNotificationWithTimeout(absl::Milliseconds(500)));
  EXPECT_FALSE(followed.HasBeenNotified());

  const absl::Time signalled = absl::Now();
  EXPECT_EQ(kill(daemons.coordinator, SIGTERM), 0);
  int status = 0;
  const bool stopped = testing::WaitFor(
      [&] { return waitpid(daemons.coordinator, &status, WNOHANG) == daemons.coordinator; },
      absl::Seconds(10));
  EXPECT_TRUE(stopped) << "the coordinator did not stop within 10 s of SIGTERM\n" << daemons.Log();
  // So that the calls end and the threads can be joined.
  if (!stopped) testing::KillAndReap(daemons.coordinator);
  daemons.reaped = true;
  const absl::Duration took = absl::Now() - signalled;
  std::cout << "stopped " << absl::FormatDuration(took) << " after SIGTERM" << std::endl;
  EXPECT_LT(took, absl::Seconds(5)) << daemons.Log();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(waited.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(watched.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(followed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  waiter.join();
  watcher.join();
  follower.join();
  EXPECT_THAT(wait_status, StatusIs(absl::StatusCode::kUnavailable)) << wait_status;
  EXPECT_THAT(watch_status, IsError());
  EXPECT_THAT(logs_status, IsError()) << "a following log stream ends with the coordinator";
}

}  // namespace
}  // namespace ringmaster
