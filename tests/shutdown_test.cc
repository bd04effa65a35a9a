// A coordinator asked to stop (SIGTERM) stops within 5 s whatever its
// callers are waiting for: a rendezvous Wait with an hour to go, a job
// watch, a worker's stream.
#include <signal.h>
#include <sys/wait.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <iostream>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/client.h"
#include "common/net.h"
#include "common/subprocess.h"
#include "tests/test_util.h"

namespace ringmaster {
namespace {

TEST(ShutdownTest, SigtermEndsPendingWaitsAndStopsWithinFiveSeconds) {
  const std::string state = testing::MakeTempDir("shutdown");
  absl::StatusOr<int> port = PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok());
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  SubprocessSpec spec;
  spec.argv = {testing::Runfile("coordinator/ringmaster-coordinator"), "--port",
               absl::StrCat(*port), "--metrics-port", "0", "--state-dir", state + "/c"};
  spec.env = CurrentEnvironment();
  spec.output_path = state + "/log";
  absl::StatusOr<pid_t> pid = SpawnProcess(spec);
  ASSERT_TRUE(pid.ok()) << pid.status();
  bool reaped = false;
  SubprocessSpec worker_spec = spec;
  worker_spec.argv = {testing::Runfile("worker/ringmaster-worker"), "--coordinator", address,
                      "--port", "0", "--metrics-port", "0", "--state-dir", state + "/w"};
  worker_spec.output_path = state + "/worker.log";
  absl::StatusOr<pid_t> worker = SpawnProcess(worker_spec);
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::Cleanup stop = [&] {
    kill(*worker, SIGKILL);
    waitpid(*worker, nullptr, 0);
    if (!reaped) {
      kill(*pid, SIGKILL);
      waitpid(*pid, nullptr, 0);
    }
  };
  Client client(address);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto workers = client.ListWorkers();
        return workers.ok() && workers->size() == 1;
      },
      absl::Seconds(20)));
  absl::StatusOr<std::string> job = client.Submit([] {
    v1::JobSpec s;
    s.set_name("waits");
    s.set_ranks(1);
    s.set_working_dir("/");
    s.add_command("sleep");
    s.add_command("300");
    return s;
  }());
  ASSERT_TRUE(job.ok()) << job.status();
  // Running: its attempt's rendezvous scope is open, so a Wait there pends.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto j = client.GetJob(*job);
        return j.ok() && j->state() == v1::RUNNING;
      },
      absl::Seconds(20)));
  absl::Status wait_status;
  absl::Notification waited;
  std::thread waiter([&] {
    RendezvousClient store(address, *job, 0);
    wait_status = store.Wait({"never-set"}, absl::Hours(1));
    waited.Notify();
  });
  absl::Status watch_status;
  absl::Notification watched;
  std::thread watcher([&] {
    watch_status = client.WatchJob(*job, [](const v1::Job&) { return true; });
    watched.Notify();
  });
  // Both calls are in the server: the Wait has not ended, the watch has
  // had its first snapshot.
  EXPECT_FALSE(waited.WaitForNotificationWithTimeout(absl::Milliseconds(500)));

  const absl::Time signalled = absl::Now();
  ASSERT_EQ(kill(*pid, SIGTERM), 0);
  int status = 0;
  ASSERT_TRUE(testing::WaitFor([&] { return waitpid(*pid, &status, WNOHANG) == *pid; },
                               absl::Seconds(10)))
      << "the coordinator did not stop within 10 s of SIGTERM\n"
      << testing::Shell("tail -n 20 " + state + "/log").out;
  reaped = true;
  const absl::Duration took = absl::Now() - signalled;
  std::cout << "stopped " << absl::FormatDuration(took) << " after SIGTERM" << std::endl;
  EXPECT_LT(took, absl::Seconds(5)) << testing::Shell("tail -n 20 " + state + "/log").out;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(waited.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(watched.WaitForNotificationWithTimeout(absl::Seconds(10)));
  waiter.join();
  watcher.join();
  EXPECT_EQ(wait_status.code(), absl::StatusCode::kUnavailable) << wait_status;
  EXPECT_FALSE(watch_status.ok());
}

}  // namespace
}  // namespace ringmaster
