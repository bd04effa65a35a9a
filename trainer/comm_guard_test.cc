#include "trainer/comm_guard.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "common/fake_clock.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

// Counts what the guard does to it; its asynchronous error is set by the
// test.
class FakeComm final : public GuardedComm {
 public:
  absl::Status AsyncError() override {
    MutexLock lock(&mu_);
    return async_error_;
  }
  void Abort() override {
    MutexLock lock(&mu_);
    ++aborts_;
  }
  void Destroy() override {
    MutexLock lock(&mu_);
    ++destroys_;
  }
  void SetAsyncError(absl::Status error) {
    MutexLock lock(&mu_);
    async_error_ = std::move(error);
  }
  int aborts() const {
    MutexLock lock(&mu_);
    return aborts_;
  }
  int destroys() const {
    MutexLock lock(&mu_);
    return destroys_;
  }

 private:
  mutable Mutex mu_;
  absl::Status async_error_ ABSL_GUARDED_BY(mu_);
  int aborts_ ABSL_GUARDED_BY(mu_) = 0;
  int destroys_ ABSL_GUARDED_BY(mu_) = 0;
};

class CommGuardTest : public ::testing::Test {
 protected:
  FakeComm comm_;
  FakeClock clock_;
  CommGuard guard_{&comm_, &clock_, absl::Seconds(300), /*rank=*/3};
};

TEST_F(CommGuardTest, OperationsRunWhileNothingFails) {
  int launched = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(guard_
                    .Enqueue("all-reduce",
                             [&] {
                               ++launched;
                               return absl::OkStatus();
                             })
                    .ok());
    clock_.Advance(absl::Seconds(299));
    EXPECT_FALSE(guard_.Check()) << "within the timeout";
    EXPECT_OK(guard_.Complete(absl::OkStatus()));
  }
  EXPECT_EQ(launched, 3);
  clock_.Advance(absl::Hours(1));
  EXPECT_FALSE(guard_.Check()) << "nothing in flight: no timeout";
  guard_.Destroy();
  EXPECT_EQ(comm_.destroys(), 1);
  EXPECT_EQ(comm_.aborts(), 0);
}

// An operation a dead peer holds up: the watchdog aborts it at the timeout;
// the waiting caller gets the watchdog's reason, and no later call touches
// the communicator.
TEST_F(CommGuardTest, AnOperationPastTheTimeoutIsAbortedAndEveryLaterCallFails) {
  ASSERT_OK(guard_.Enqueue("ncclAllReduce", [] { return absl::OkStatus(); }));
  clock_.Advance(absl::Seconds(301));
  EXPECT_TRUE(guard_.Check());
  EXPECT_EQ(comm_.aborts(), 1);
  // The wait returns once the abort ended the kernels; what it says is not
  // the reason.
  const absl::Status pending = guard_.Complete(absl::UnknownError("stream error"));
  EXPECT_THAT(pending, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(pending.message(), "ncclAllReduce on rank 3 exceeded 5m; a peer is gone or stuck");
  bool touched = false;
  const absl::Status later = guard_.Enqueue("ncclBroadcast", [&] {
    touched = true;
    return absl::OkStatus();
  });
  EXPECT_FALSE(touched) << "an aborted communicator is never used again";
  EXPECT_EQ(later, pending);
  EXPECT_FALSE(guard_.Check()) << "aborted once";
  guard_.Destroy();
  EXPECT_EQ(comm_.aborts(), 1);
  EXPECT_EQ(comm_.destroys(), 0) << "an aborted communicator is already freed";
}

TEST_F(CommGuardTest, AnAsynchronousErrorAbortsEvenWithNothingInFlight) {
  comm_.SetAsyncError(absl::UnavailableError("ncclRemoteError: a peer closed its connection"));
  EXPECT_TRUE(guard_.Check());
  EXPECT_TRUE(guard_.aborted());
  EXPECT_THAT(guard_.error(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(guard_.error().message(),
            "asynchronous communicator error: ncclRemoteError: a peer closed its connection");
  EXPECT_EQ(guard_.Enqueue("ncclAllReduce", [] { return absl::OkStatus(); }), guard_.error());
}

// The watchdog's abort waits for an enqueue in progress: it never frees
// the communicator under a launch (the defect c10d's communicator mutex
// prevents).
TEST_F(CommGuardTest, AbortWaitsForAnEnqueueInProgress) {
  Notification launching, release;
  std::atomic<int> aborts_during_launch{-1};
  std::thread user([&] {
    EXPECT_TRUE(guard_
                    .Enqueue("ncclAllReduce",
                             [&] {
                               launching.Notify();
                               release.WaitForNotification();
                               aborts_during_launch = comm_.aborts();
                               return absl::OkStatus();
                             })
                    .ok());
  });
  launching.WaitForNotification();
  comm_.SetAsyncError(absl::InternalError("ncclSystemError"));
  std::thread watchdog([&] { EXPECT_TRUE(guard_.Check()); });
  // Give the watchdog every chance to (wrongly) abort during the launch.
  absl::SleepFor(absl::Milliseconds(50));
  release.Notify();
  user.join();
  watchdog.join();
  EXPECT_EQ(aborts_during_launch, 0);
  EXPECT_EQ(comm_.aborts(), 1);
  EXPECT_THAT(guard_.Complete(absl::OkStatus()), StatusIs(absl::StatusCode::kInternal));
}

// A launch that fails (a bad argument, an unhandled CUDA error) fails the
// communicator: later calls say why, and teardown aborts it rather than
// waiting in a destroy for peers that may be gone.
TEST_F(CommGuardTest, AFailedLaunchFailsTheCommunicatorForGood) {
  const absl::Status failed = guard_.Enqueue(
      "ncclAllReduce", [] { return absl::InvalidArgumentError("ncclInvalidArgument"); });
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kInvalidArgument));
  int launched = 0;
  EXPECT_EQ(guard_.Enqueue("ncclAllReduce",
                           [&] {
                             ++launched;
                             return absl::OkStatus();
                           }),
            failed);
  EXPECT_EQ(launched, 0);
  guard_.Destroy();
  EXPECT_EQ(comm_.destroys(), 0);
  EXPECT_EQ(comm_.aborts(), 1);
  EXPECT_FALSE(guard_.Check());
}

TEST_F(CommGuardTest, AFailedWaitFailsLaterCalls) {
  ASSERT_OK(guard_.Enqueue("ncclAllReduce", [] { return absl::OkStatus(); }));
  const absl::Status waited =
      absl::InternalError("cudaStreamSynchronize: an illegal memory access");
  EXPECT_EQ(guard_.Complete(waited), waited);
  EXPECT_EQ(guard_.Enqueue("ncclAllReduce", [] { return absl::OkStatus(); }), waited);
}

}  // namespace
}  // namespace ringmaster
