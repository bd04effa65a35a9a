#include "trainer/reducer.h"

#include <numeric>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "trainer/test_world.h"

namespace ringmaster {
namespace {

std::vector<ParamSpan> Spans(const std::vector<size_t>& sizes) {
  std::vector<ParamSpan> spans;
  size_t offset = 0;
  for (size_t s : sizes) {
    spans.push_back({offset, s});
    offset += s;
  }
  return spans;
}

TEST(AssignBucketsTest, BackwardOrderWithASmallFirstBucket) {
  // 4-byte floats: sizes in bytes are 400, 40, 4000, 40, 400, 40.
  auto buckets = AssignBuckets(Spans({100, 10, 1000, 10, 100, 10}), 4400, 500);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].params, (std::vector<int>{5, 4, 3}));  // 480 B <= 500 B
  EXPECT_EQ(buckets[1].params, (std::vector<int>{2, 1}));     // 4040 B <= 4400 B
  EXPECT_EQ(buckets[2].params, (std::vector<int>{0}));        // 4440 B would not fit
  EXPECT_EQ(buckets[0].offset, 1110u);
  EXPECT_EQ(buckets[0].size, 120u);
  EXPECT_EQ(buckets[1].offset, 100u);
  EXPECT_EQ(buckets[1].size, 1010u);
  EXPECT_EQ(buckets[2].offset, 0u);
  // A parameter larger than the cap gets a bucket of its own.
  auto big = AssignBuckets(Spans({10, 5000, 10}), 400, 400);
  ASSERT_EQ(big.size(), 3u);
  EXPECT_EQ(big[1].params, std::vector<int>{1});
}

TEST(ReducerTest, AveragesEveryBucketAcrossRanks) {
  const auto spans = Spans({300, 7, 5000, 7, 300, 7});
  const size_t n = 5621;
  for (bool bf16 : {false, true}) {
    RunWorld(3, [&](int rank, Collective* comm) {
      std::vector<float> grads(n);
      ReducerOptions options;
      options.bucket_bytes = 8000;
      options.first_bucket_bytes = 1000;
      options.bf16_compression = bf16;
      Reducer reducer(comm, spans, grads.data(), options);
      EXPECT_EQ(reducer.buckets().size(), 4u);
      for (int round = 0; round < 2; ++round) {
        // Rank r holds (r + 1) * (i % 13 + round): the mean is 2x that of rank 0.
        for (size_t i = 0; i < n; ++i) grads[i] = (rank + 1.0f) * (i % 13 + round);
        reducer.Prepare(3.0f);
        for (int p = 5; p >= 0; --p) reducer.MarkReady(p);
        ASSERT_OK(reducer.Finish());
        for (size_t i = 0; i < n; ++i) {
          const float want = 2.0f * (i % 13 + round);
          ASSERT_NEAR(grads[i] * reducer.grad_scale(), want, bf16 ? want / 64 : 1e-5) << i;
        }
      }
      EXPECT_GT(reducer.bytes_total(), 0);
    });
  }
}

// The setup runs once, on the reducer's own thread, before any collective
// (a GPU rank's device is set there); when it fails, every pass fails with
// its error and nothing is reduced.
TEST(ReducerTest, SetsUpItsThreadBeforeAnyCollective) {
  const auto spans = Spans({100, 100});
  for (bool fails : {false, true}) {
    RunWorld(1, [&](int, Collective* comm) {
      std::vector<float> grads(200, 1.0f);
      ReducerOptions options;
      options.bucket_bytes = 400;
      options.first_bucket_bytes = 400;
      Mutex mu;
      std::vector<std::thread::id> setups;
      options.thread_setup = [&] {
        MutexLock lock(&mu);
        setups.push_back(std::this_thread::get_id());
        return fails ? absl::InternalError("cudaSetDevice: invalid device ordinal")
                     : absl::OkStatus();
      };
      int before_reduce = 0;
      options.before_reduce = [&](const Bucket&) {
        ++before_reduce;
        return absl::OkStatus();
      };
      Reducer reducer(comm, spans, grads.data(), options);
      for (int round = 0; round < 2; ++round) {
        reducer.Prepare(1.0f);
        reducer.MarkReady(1);
        reducer.MarkReady(0);
        const absl::Status finished = reducer.Finish();
        EXPECT_EQ(finished.ok(), !fails) << finished;
        if (fails) EXPECT_EQ(finished.message(), "cudaSetDevice: invalid device ordinal");
      }
      EXPECT_EQ(before_reduce, fails ? 0 : 4) << "2 buckets, 2 passes";
      MutexLock lock(&mu);
      ASSERT_EQ(setups.size(), 1u);
      EXPECT_NE(setups[0], std::this_thread::get_id());
    });
  }
}

}  // namespace
}  // namespace ringmaster
