#include "trainer/shm_allreduce.h"

#include <gloo/rendezvous/hash_store.h>

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

// Ranks as threads: they share the segment exactly as processes would.
TEST(ShmAllReduceTest, SumsAcrossRanksInChunks) {
  constexpr int kWorld = 3;
  // Over two chunks, and not a multiple of the world size.
  const size_t n = ShmAllReduce::kChunkFloats + 1001;
  gloo::rendezvous::HashStore store;
  std::vector<std::vector<float>> data(kWorld, std::vector<float>(n));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      auto local = AllRanksOnThisHost(store, "t", rank, kWorld);
      ASSERT_TRUE(local.ok() && *local);
      auto shm = ShmAllReduce::Create(store, "t", rank, kWorld, std::chrono::seconds(30));
      ASSERT_TRUE(shm.ok()) << shm.status();
      for (int round = 0; round < 2; ++round) {
        for (size_t i = 0; i < n; ++i) data[rank][i] = (rank + 1) * float(i % 97) + round;
        ASSERT_TRUE((*shm)->AllReduceSum(data[rank].data(), n).ok());
        for (size_t i = 0; i < n; i += 7) {
          ASSERT_EQ(data[rank][i], 6 * float(i % 97) + 3 * round) << "rank " << rank << " i " << i;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
}

TEST(ShmAllReduceTest, MissingPeerTimesOut) {
  gloo::rendezvous::HashStore store;
  std::unique_ptr<ShmAllReduce> shm0, shm1;
  std::thread t1([&] {
    auto s = ShmAllReduce::Create(store, "m", 1, 2, std::chrono::milliseconds(300));
    ASSERT_TRUE(s.ok());
    shm1 = *std::move(s);
  });
  auto s = ShmAllReduce::Create(store, "m", 0, 2, std::chrono::milliseconds(300));
  t1.join();
  ASSERT_TRUE(s.ok()) << s.status();
  float x[4] = {1, 2, 3, 4};
  // Rank 1 never calls: rank 0 must give up, not hang.
  absl::Status status = (*s)->AllReduceSum(x, 4);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
}


TEST(ShmAllReduceTest, ReducesSharedBuffersInPlace) {
  constexpr int kWorld = 3;
  const size_t n = 10007;
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      auto shm = ShmAllReduce::Create(store, "b", rank, kWorld, std::chrono::seconds(30));
      ASSERT_TRUE(shm.ok()) << shm.status();
      auto buffer = (*shm)->MapBuffers(store, "b/buffers", n);
      ASSERT_TRUE(buffer.ok()) << buffer.status();
      float* mine = *buffer;
      for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < n; ++i) mine[i] = (rank + 1) * float(i % 31) + round;
        // Two ranges, as two buckets would be.
        ASSERT_TRUE((*shm)->AllReduceSum(mine + 5000, n - 5000).ok());
        ASSERT_TRUE((*shm)->AllReduceSum(mine, 5000).ok());
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(mine[i], 6 * float(i % 31) + 3 * round) << "rank " << rank << " i " << i;
        }
        // Everyone checks before the next round rewrites the buffers.
        float barrier = 0;
        ASSERT_TRUE((*shm)->AllReduceSum(&barrier, 1).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace ringmaster
