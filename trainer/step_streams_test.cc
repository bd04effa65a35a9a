#include "trainer/step_streams.h"

#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "testing/status_matchers.h"
#include "trainer/fake_gpu.h"

namespace ringmaster {
namespace {

// A rank on `device` of a FakeGpu, with its two streams, made the way the
// GPU runner makes them: on the training thread, the device set first.
struct FakeRank {
  FakeRank(FakeGpu* gpu, int device, int params) : gpu(gpu) {
    EXPECT_OK(gpu->SetDevice(device));
    compute = gpu->NewStream();
    comm = gpu->NewStream();
    EXPECT_OK(gpu->SetDevice(0));  // as a thread that moved on
    auto made = StepStreams::Create(gpu, device, compute, comm, params);
    EXPECT_OK(made) << made.status();
    if (made.ok()) streams = *std::move(made);
  }
  FakeGpu* gpu;
  StreamApi::Stream compute = nullptr;
  StreamApi::Stream comm = nullptr;
  std::unique_ptr<StepStreams> streams;
};

// Buckets of six parameters in backward order, as AssignBuckets makes them.
const std::vector<Bucket> kBuckets = {{0, 0, {5, 4}}, {0, 0, {3, 2}}, {0, 0, {1, 0}}};

// One step as the trainer issues it: backward writes gradients 5..0 on the
// training stream; each bucket, once complete, is reduced and applied on
// the communication stream (here on the training thread, in the order the
// reducer's thread would issue them); then the next forward.
void Step(FakeRank& rank) {
  size_t next = 0;
  for (int p = 5; p >= 0; --p) {
    ASSERT_OK(rank.gpu->Launch(rank.compute, absl::StrCat("grad ", p)));
    ASSERT_OK(rank.streams->GradientReady(p));
    if (kBuckets[next].params.back() != p) continue;
    ASSERT_OK(rank.streams->BeforeReduce(kBuckets[next]));
    ASSERT_OK(rank.gpu->Launch(rank.comm, absl::StrCat("allreduce ", next)));
    ASSERT_OK(rank.gpu->Launch(rank.comm, absl::StrCat("update ", next)));
    ++next;
  }
  ASSERT_OK(rank.streams->AfterStep());
  ASSERT_OK(rank.gpu->Launch(rank.compute, "next forward"));
}

TEST(StepStreamsTest, ABucketsCollectiveWaitsForItsGradientsAndNothingLater) {
  FakeGpu gpu(1);
  FakeRank rank(&gpu, 0, 6);
  ASSERT_NE(rank.streams, nullptr);
  Step(rank);
  for (size_t b = 0; b < kBuckets.size(); ++b) {
    for (int p : kBuckets[b].params) {
      EXPECT_TRUE(gpu.Ordered(absl::StrCat("grad ", p), absl::StrCat("allreduce ", b)))
          << "bucket " << b << " reduced before gradient " << p << " was written";
    }
  }
  // Overlap: a bucket's collective does not wait for the rest of backward.
  EXPECT_FALSE(gpu.Ordered("grad 3", "allreduce 0"));
  EXPECT_FALSE(gpu.Ordered("grad 0", "allreduce 1"));
  for (size_t b = 0; b < kBuckets.size(); ++b) {
    EXPECT_TRUE(gpu.Ordered(absl::StrCat("update ", b), "next forward"))
        << "the next forward may read parameters before update " << b;
  }
}

// The reducer's thread issues the rank's collectives: on device 1, a thread
// that never set its device would launch them from device 0, which CUDA
// refuses (invalid resource handle). The check says so before any launch.
TEST(StepStreamsTest, AThreadMustEnterTheRanksDeviceBeforeIssuingWork) {
  FakeGpu gpu(2);
  FakeRank rank(&gpu, 1, 6);
  ASSERT_NE(rank.streams, nullptr);
  ASSERT_OK(gpu.Launch(rank.compute, "grad 5")) << "Create set the training thread's device";
  ASSERT_OK(rank.streams->GradientReady(5)) << "the events are of device 1";
  ASSERT_OK(rank.streams->GradientReady(4));

  absl::Status unentered, unentered_launch, entered, entered_launch;
  std::thread([&] {
    unentered = rank.streams->BeforeReduce(kBuckets[0]);
    unentered_launch = gpu.Launch(rank.comm, "allreduce from device 0");
  }).join();
  std::thread([&] {
    ASSERT_OK(rank.streams->EnterThread());
    entered = rank.streams->BeforeReduce(kBuckets[0]);
    entered_launch = gpu.Launch(rank.comm, "allreduce 0");
  }).join();

  EXPECT_THAT(unentered, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(unentered.message(),
            "CUDA work for device 1 issued from a thread on device 0; the thread must call "
            "EnterThread first");
  EXPECT_NE(unentered_launch.message().find("invalid resource handle"), std::string::npos)
      << "the fake keeps CUDA's rule: " << unentered_launch;
  EXPECT_OK(entered) << entered;
  EXPECT_OK(entered_launch) << entered_launch;
  EXPECT_TRUE(gpu.Ordered("grad 5", "allreduce 0"));
}

// Two ranks of one process (device = rank, as gpu_training_test runs them):
// each one's events and streams stay on its own device.
TEST(StepStreamsTest, RanksOnTwoDevicesKeepToTheirOwn) {
  FakeGpu gpu(2);
  FakeRank rank0(&gpu, 0, 6);
  FakeRank rank1(&gpu, 1, 6);
  ASSERT_NE(rank0.streams, nullptr);
  ASSERT_NE(rank1.streams, nullptr);
  EXPECT_OK(rank1.streams->GradientReady(0));
  EXPECT_THAT(rank0.streams->GradientReady(0), StatusIs(absl::StatusCode::kFailedPrecondition))
      << "the thread is on device 1 since rank 1 was made";
  ASSERT_OK(rank0.streams->EnterThread());
  EXPECT_OK(rank0.streams->GradientReady(0));
  EXPECT_THAT(rank1.streams->GradientReady(0), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(StepStreamsTest, EventsAreDestroyedWithTheStreams) {
  FakeGpu gpu(1);
  {
    FakeRank rank(&gpu, 0, 6);
    EXPECT_EQ(gpu.live_events(), 7) << "one per parameter and the step's";
  }
  EXPECT_EQ(gpu.live_events(), 0);
}

// The fake itself: CUDA's rule for events, which the bookkeeping relies on.
TEST(FakeGpuTest, AnEventRecordsOnlyOnAStreamOfItsDevice) {
  FakeGpu gpu(2);
  StreamApi::Stream on0 = gpu.NewStream();
  absl::StatusOr<StreamApi::Event> event = gpu.CreateEvent();
  ASSERT_OK(event);
  ASSERT_OK(gpu.SetDevice(1));
  StreamApi::Stream on1 = gpu.NewStream();
  EXPECT_OK(gpu.Record(*event, on0)) << "recording does not depend on the thread";
  EXPECT_NE(gpu.Record(*event, on1).message().find("invalid resource handle"), std::string::npos);
  EXPECT_OK(gpu.Wait(on1, *event)) << "waiting across devices is allowed";
  EXPECT_EQ(gpu.SetDevice(2).message(), "invalid device ordinal 2");
  gpu.DestroyEvent(*event);
}

}  // namespace
}  // namespace ringmaster
