// The collective layer over several simulated hosts: ranks are threads, and
// each rank's host is the identity its options name, so the hierarchical
// all-reduce (shared memory within a host, rings between hosts) runs here
// exactly as across machines.
#include "trainer/gloo_collective.h"
#include "testing/status_matchers.h"

#include <gloo/rendezvous/hash_store.h>

#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

struct Shape {
  std::vector<int> host_of_rank;
  std::string transport;  // what transport() must say
};

// Runs `body` on one thread per rank of `shape`.
void RunHosts(const Shape& shape, const std::function<void(int rank, GlooCollective& comm)>& body) {
  gloo::rendezvous::HashStore store;
  const int world = static_cast<int>(shape.host_of_rank.size());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      GlooOptions options;
      options.timeout = std::chrono::seconds(60);
      options.host_identity = "host" + std::to_string(shape.host_of_rank[rank]);
      auto comm = GlooCollective::Connect(store, rank, world, options);
      ASSERT_OK(comm) << comm.status();
      EXPECT_EQ((*comm)->transport(), shape.transport);
      body(rank, **comm);
    });
  }
  for (auto& t : threads) t.join();
}

float ValueOf(int rank, size_t i) {
  return static_cast<float>((rank + 1) * ((i * 7) % 101)) * 0.25f;
}

class HierarchyTest : public ::testing::TestWithParam<Shape> {};

// Sums are exact (small integers times 0.25), and every rank must hold the
// same bits, for sizes that do and do not divide among hosts and ranks,
// one larger than a shared-memory chunk, and a single float.
TEST_P(HierarchyTest, EveryRankGetsTheExactSum) {
  const Shape& shape = GetParam();
  const int world = static_cast<int>(shape.host_of_rank.size());
  const std::vector<size_t> sizes = {1, 3, 1000, 65537, ShmAllReduce::kChunkFloats + 4099};
  std::vector<std::vector<std::vector<float>>> results(world);
  RunHosts(shape, [&](int rank, GlooCollective& comm) {
    for (size_t n : sizes) {
      std::vector<float> data(n);
      for (size_t i = 0; i < n; ++i) data[i] = ValueOf(rank, i);
      const absl::Status status = comm.AllReduceSum(data.data(), n);
      ASSERT_OK(status) << "n " << n << ": " << status;
      results[rank].push_back(std::move(data));
    }
  });
  const float ranks_sum = world * (world + 1) / 2.0f;
  for (size_t s = 0; s < sizes.size(); ++s) {
    for (size_t i = 0; i < sizes[s]; ++i) {
      ASSERT_EQ(results[0][s][i], ranks_sum * ((i * 7) % 101) * 0.25f)
          << "n " << sizes[s] << " i " << i;
    }
    for (int rank = 1; rank < world; ++rank) {
      ASSERT_EQ(
          0, std::memcmp(results[rank][s].data(), results[0][s].data(), sizes[s] * sizeof(float)))
          << "rank " << rank << " differs from rank 0 at n " << sizes[s];
    }
  }
}

// Gradients in the memory the ranks of a host share are reduced in place,
// a bucket at a time, across hosts too.
TEST_P(HierarchyTest, SharedBuffersReduceInPlace) {
  const Shape& shape = GetParam();
  const int world = static_cast<int>(shape.host_of_rank.size());
  const size_t n = 30011;
  RunHosts(shape, [&](int rank, GlooCollective& comm) {
    float* shared = comm.SharedBuffer(n);
    std::vector<float> own;
    if (shared == nullptr) {  // no host shares memory: any buffer will do
      own.resize(n);
      shared = own.data();
    }
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < n; ++i) shared[i] = ValueOf(rank, i) + round;
      ASSERT_OK(comm.AllReduceSum(shared + 20000, n - 20000));
      ASSERT_OK(comm.AllReduceSum(shared, 20000));
      const float ranks_sum = world * (world + 1) / 2.0f;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(shared[i], ranks_sum * ((i * 7) % 101) * 0.25f + world * round)
            << "rank " << rank << " i " << i;
      }
      ASSERT_OK(comm.Barrier());  // all check before the next round writes
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, HierarchyTest,
    ::testing::Values(
        Shape{{0, 0, 0}, "shared memory"}, Shape{{0, 1}, "a tcp ring over 2 hosts"},
        Shape{{0, 1, 2}, "a tcp ring over 3 hosts"},
        Shape{{0, 0, 1, 1},
              "shared memory within each of 2 hosts (2 ranks each) and 2 tcp rings between "
              "them"},
        // Ranks need not be placed host by host.
        Shape{{0, 1, 2, 0, 1, 2},
              "shared memory within each of 3 hosts (2 ranks each) and 2 tcp rings between "
              "them"},
        Shape{{0, 0, 1}, "a tcp ring over all ranks (2 hosts with different numbers of ranks)"}),
    [](const ::testing::TestParamInfo<Shape>& info) {
      std::string name = "ranks_on_hosts";
      for (int h : info.param.host_of_rank) name += "_" + std::to_string(h);
      return name;
    });

// A rank whose peer on another host is gone fails, and says so, within the
// timeout.
TEST(GlooCollectiveTest, PeerOnAnotherHostThatNeverComesTimesOut) {
  gloo::rendezvous::HashStore store;
  std::unique_ptr<GlooCollective> comms[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      GlooOptions options;
      options.timeout = std::chrono::milliseconds(500);
      options.host_identity = "host" + std::to_string(rank);
      auto comm = GlooCollective::Connect(store, rank, 2, options);
      ASSERT_OK(comm) << comm.status();
      comms[rank] = *std::move(comm);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(comms[0] && comms[1]);
  std::vector<float> data(1000, 1.0f);
  absl::Status status = comms[0]->AllReduceSum(data.data(), data.size());
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDeadlineExceeded)) << status;
  EXPECT_NE(status.message().find("ring all-reduce"), std::string::npos) << status;
  // The streams are out of step: later calls fail at once.
  EXPECT_THAT(comms[0]->AllReduceSum(data.data(), data.size()), IsError());
}

}  // namespace
}  // namespace ringmaster
