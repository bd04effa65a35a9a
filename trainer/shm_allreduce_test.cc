#include "trainer/shm_allreduce.h"
#include "testing/status_matchers.h"

#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

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
      auto shm = ShmAllReduce::Create(store, "t", rank, kWorld, std::chrono::seconds(30));
      ASSERT_OK(shm) << shm.status();
      for (int round = 0; round < 2; ++round) {
        for (size_t i = 0; i < n; ++i) data[rank][i] = (rank + 1) * float(i % 97) + round;
        ASSERT_OK((*shm)->AllReduceSum(data[rank].data(), n));
        for (size_t i = 0; i < n; i += 7) {
          ASSERT_EQ(data[rank][i], 6 * float(i % 97) + 3 * round) << "rank " << rank << " i " << i;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
}

// The hierarchical form hands each rank's share of every chunk to
// `across` once, after the host's sum and before the copy out: here it
// plays a second host holding the same values (doubling the share).
TEST(ShmAllReduceTest, AcrossSeesEachShareOnceBeforeTheCopyOut) {
  constexpr int kWorld = 3;
  const size_t n = ShmAllReduce::kChunkFloats + 7;
  gloo::rendezvous::HashStore store;
  std::vector<std::vector<float>> data(kWorld, std::vector<float>(n));
  std::vector<size_t> floats_across(kWorld, 0);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      auto shm = ShmAllReduce::Create(store, "h", rank, kWorld, std::chrono::seconds(30));
      ASSERT_OK(shm) << shm.status();
      for (size_t i = 0; i < n; ++i) data[rank][i] = float(i % 13);
      absl::Status status = (*shm)->AllReduceSum(data[rank].data(), n, [&](float* share, size_t k) {
        for (size_t i = 0; i < k; ++i) share[i] *= 2;
        floats_across[rank] += k;
        return absl::OkStatus();
      });
      ASSERT_OK(status) << status;
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(data[rank][i], 6 * float(i % 13)) << i;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(floats_across[0] + floats_across[1] + floats_across[2], n);
  EXPECT_GT(floats_across[2], 0u);
}

// An error from `across` ends the all-reduce with that error.
TEST(ShmAllReduceTest, AcrossErrorIsReturned) {
  gloo::rendezvous::HashStore store;
  auto shm = ShmAllReduce::Create(store, "e", 0, 1, std::chrono::seconds(30));
  ASSERT_OK(shm) << shm.status();
  float x[3] = {1, 2, 3};
  absl::Status status = (*shm)->AllReduceSum(
      x, 3, [](float*, size_t) { return absl::UnavailableError("link down"); });
  EXPECT_EQ(status, absl::UnavailableError("link down"));
}

TEST(ShmAllReduceTest, MissingPeerTimesOut) {
  gloo::rendezvous::HashStore store;
  std::unique_ptr<ShmAllReduce> shm0, shm1;
  std::thread t1([&] {
    auto s = ShmAllReduce::Create(store, "m", 1, 2, std::chrono::milliseconds(300));
    ASSERT_OK(s);
    shm1 = *std::move(s);
  });
  auto s = ShmAllReduce::Create(store, "m", 0, 2, std::chrono::milliseconds(300));
  t1.join();
  ASSERT_OK(s) << s.status();
  float x[4] = {1, 2, 3, 4};
  // Rank 1 never calls: rank 0 must give up, not hang.
  absl::Status status = (*s)->AllReduceSum(x, 4);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDeadlineExceeded)) << status;
}

// A peer that ends (its collective destroyed) fails the others' next
// all-reduce at once, not after the timeout.
TEST(ShmAllReduceTest, PeerThatLeftAbortsTheOthersAtOnce) {
  gloo::rendezvous::HashStore store;
  std::unique_ptr<ShmAllReduce> shm1;
  std::thread t1([&] {
    auto s = ShmAllReduce::Create(store, "l", 1, 2, std::chrono::seconds(60));
    ASSERT_OK(s);
    shm1 = *std::move(s);
  });
  auto shm0 = ShmAllReduce::Create(store, "l", 0, 2, std::chrono::seconds(60));
  t1.join();
  ASSERT_OK(shm0) << shm0.status();
  shm1.reset();
  float x[4] = {1, 2, 3, 4};
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = (*shm0)->AllReduceSum(x, 4);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kAborted)) << status;
  EXPECT_NE(status.message().find("rank 1"), std::string::npos) << status;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30))
      << "waited for the timeout";
}

// A peer process killed with SIGKILL (no destructor runs) is seen through
// its pidfd within a wait slice.
TEST(ShmAllReduceTest, KilledPeerProcessAbortsTheOthers) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/killed-peer";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    gloo::rendezvous::FileStore store(dir);
    auto s = ShmAllReduce::Create(store, "k", 1, 2, std::chrono::seconds(60));
    if (!s.ok()) _exit(1);
    pause();  // until killed
    _exit(0);
  }
  gloo::rendezvous::FileStore store(dir);
  auto shm = ShmAllReduce::Create(store, "k", 0, 2, std::chrono::seconds(60));
  ASSERT_OK(shm) << shm.status();
  kill(child, SIGKILL);
  float x[4] = {1, 2, 3, 4};
  absl::Status status = (*shm)->AllReduceSum(x, 4);
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kAborted)) << status;
  EXPECT_NE(status.message().find("process of peer rank 1 ended"), std::string::npos) << status;
  EXPECT_TRUE(WIFSIGNALED(wstatus)) << "the child must have been killed, not failed";
}

TEST(ShmAllReduceTest, ReducesSharedBuffersInPlace) {
  constexpr int kWorld = 3;
  const size_t n = 10007;
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      auto shm = ShmAllReduce::Create(store, "b", rank, kWorld, std::chrono::seconds(30));
      ASSERT_OK(shm) << shm.status();
      auto buffer = (*shm)->MapBuffers(store, "b/buffers", n);
      ASSERT_OK(buffer) << buffer.status();
      float* mine = *buffer;
      for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < n; ++i) mine[i] = (rank + 1) * float(i % 31) + round;
        // Two ranges, as two buckets would be.
        ASSERT_OK((*shm)->AllReduceSum(mine + 5000, n - 5000));
        ASSERT_OK((*shm)->AllReduceSum(mine, 5000));
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(mine[i], 6 * float(i % 31) + 3 * round) << "rank " << rank << " i " << i;
        }
        // Everyone checks before the next round rewrites the buffers.
        float barrier = 0;
        ASSERT_OK((*shm)->AllReduceSum(&barrier, 1));
      }
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace ringmaster
