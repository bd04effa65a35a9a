#include "trainer/preflight_check.h"

#include <map>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "coordinator/health/preflight.h"

#include "testing/status_matchers.h"
#include "trainer/test_world.h"

namespace ringmaster {
namespace {

// A Gloo group of `n` ranks through `store`, its keys under `prefix`.
absl::StatusOr<std::unique_ptr<Collective>> ConnectGloo(gloo::rendezvous::Store& store,
                                                        const std::string& prefix, int r, int n) {
  GlooOptions gloo;
  gloo.prefix = prefix;
  gloo.timeout = std::chrono::seconds(60);
  auto comm = GlooCollective::Connect(store, r, n, gloo);
  if (!comm.ok()) return comm.status();
  return std::unique_ptr<Collective>(*std::move(comm));
}

TEST(PreflightCheckTest, EveryRankMeasuresTheSameAllReduce) {
  constexpr size_t kFloats = (size_t{8} << 20) / sizeof(float);  // 8 MB: quick on a test machine
  std::vector<double> busbw(3, -1);
  std::vector<float> first(3, 0);
  RunWorld(3, [&](int rank, Collective* comm) {
    std::vector<float> buffer(kFloats, static_cast<float>(rank + 1));
    absl::StatusOr<double> measured = PreflightBusBandwidth(comm, buffer.data(), buffer.size());
    ASSERT_OK(measured);
    busbw[rank] = *measured;
    first[rank] = buffer[0];
  });
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_GT(busbw[rank], 0) << rank;
    // The warm-up sums 1+2+3 = 6 on every rank, the timed one 6+6+6.
    EXPECT_FLOAT_EQ(first[rank], 18) << "a real all-reduce";
  }
}

TEST(PreflightCheckTest, PairRoundsMeetEveryRankWithTwoPeersFromThreeRanksOn) {
  for (int size = 1; size <= 9; ++size) {
    for (int rank = 0; rank < size; ++rank) {
      std::set<int> peers;
      for (int round = 0; round < kPreflightRounds; ++round) {
        const int peer = PreflightPartner(rank, size, round);
        if (peer < 0) continue;
        ASSERT_LT(peer, size);
        ASSERT_NE(peer, rank);
        EXPECT_EQ(PreflightPartner(peer, size, round), rank) << "pairs are mutual";
        peers.insert(peer);
      }
      // From 3 ranks on, every rank is timed against 2 different peers.
      EXPECT_EQ(peers.size(), size == 1 ? 0u : size == 2 ? 1u : 2u) << size << " " << rank;
    }
  }
  EXPECT_EQ(PreflightPartner(2, 3, 0), -1);
  EXPECT_EQ(PreflightPartner(1, 3, 1), 2);
  EXPECT_EQ(PreflightPartner(0, 3, 1), -1);
  EXPECT_EQ(PreflightPartner(0, 3, 2), 2);
  EXPECT_EQ(PreflightPartner(1, 3, 2), -1);
  EXPECT_EQ(PreflightPartner(0, 4, 2), -1);
  EXPECT_EQ(PreflightPartner(3, 4, 1), 0);
  EXPECT_EQ(PreflightPartner(0, 2, 1), -1);
}

TEST(PreflightCheckTest, AcrossHostsLocalRankMeetsTheSameLocalRankOfAnotherHost) {
  // Three hosts of two ranks: ranks 0,1 on host 0, 2,3 on host 1, 4,5 on 2.
  std::vector<PreflightPlace> places;
  for (int group = 0; group < 3; ++group) {
    for (int local = 0; local < 2; ++local) places.push_back({group, local});
  }
  EXPECT_EQ(PreflightPeers(places, 0), (std::vector<int>{2, 3, 0, 1, -1, -1}));
  EXPECT_EQ(PreflightPeers(places, 1), (std::vector<int>{-1, -1, 4, 5, 2, 3}));
  EXPECT_EQ(PreflightPeers(places, 2), (std::vector<int>{4, 5, -1, -1, 0, 1}));
  // A host with fewer ranks: its missing local rank's peers sit out.
  std::vector<PreflightPlace> uneven = {{0, 0}, {0, 1}, {1, 0}};
  EXPECT_EQ(PreflightPeers(uneven, 0), (std::vector<int>{2, -1, 0}));
  // One host: rank meets rank.
  std::vector<PreflightPlace> one = {{0, 0}, {0, 1}, {0, 2}};
  EXPECT_EQ(PreflightPeers(one, 0), (std::vector<int>{1, 0, -1}));
  EXPECT_EQ(PreflightPeers(one, 2), (std::vector<int>{2, -1, 0}));
}

TEST(PreflightCheckTest, RanksLearnEachOthersPlacesAndPairAcrossHosts) {
  constexpr size_t kFloats = (size_t{1} << 20) / sizeof(float);
  gloo::rendezvous::HashStore pairs;
  absl::Mutex mu;
  std::map<std::string, std::set<int>> members;  // pair prefix -> world ranks
  // RunWorld's host r % 2: ranks 0 and 2 on host 0, 1 and 3 on host 1.
  RunWorld(
      4,
      [&](int rank, Collective* world) {
        ConnectGroup connect = [&, rank](const std::string& prefix, int r,
                                         int n) -> absl::StatusOr<std::unique_ptr<Collective>> {
          {
            absl::MutexLock lock(&mu);
            members[prefix].insert(rank);
          }
          return ConnectGloo(pairs, prefix, r, n);
        };
        std::vector<float> buffer(kFloats, 1.0f);
        ASSERT_OK(MeasurePreflight(world, {rank % 2, rank / 2}, connect, "pairs", buffer.data(),
                                   buffer.size()));
      },
      /*hosts=*/2);
  absl::MutexLock lock(&mu);
  EXPECT_EQ(members, (std::map<std::string, std::set<int>>{{"pairs/round-0/0-1", {0, 1}},
                                                           {"pairs/round-0/2-3", {2, 3}}}));
}

// The coordinator's side of the scope, in memory: the verdict is given
// once every rank has posted.
class FakeBoard : public PreflightBoard {
 public:
  explicit FakeBoard(int ranks, std::string verdict) : ranks_(ranks), verdict_(verdict) {}
  absl::Status Post(const std::string& key, const std::string& value) override {
    absl::MutexLock lock(&mu_);
    posted_[key] = value;
    if (static_cast<int>(posted_.size()) == ranks_ && !verdict_.empty()) {
      posted_[kPreflightVerdictKey] = verdict_;
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Await(const std::string& key, absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    auto set = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return posted_.count(key) > 0; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&set), timeout)) {
      return absl::DeadlineExceededError("not yet");
    }
    return posted_[key];
  }
  std::map<std::string, std::string> posted() {
    absl::MutexLock lock(&mu_);
    return posted_;
  }

 private:
  const int ranks_;
  const std::string verdict_;
  absl::Mutex mu_;
  std::map<std::string, std::string> posted_ ABSL_GUARDED_BY(mu_);
};

// Every rank of a 3-rank world runs the whole check: pairs connect on
// their own prefixes of the same store, and the verdict decides.
void RunThree(FakeBoard* board, std::vector<absl::Status>* results,
              const PreflightOptions& options = {}) {
  constexpr size_t kFloats = (size_t{4} << 20) / sizeof(float);
  gloo::rendezvous::HashStore pairs;
  RunWorld(3, [&](int rank, Collective* world) {
    ConnectGroup connect = [&](const std::string& prefix, int r,
                               int n) -> absl::StatusOr<std::unique_ptr<Collective>> {
      return ConnectGloo(pairs, prefix, r, n);
    };
    std::vector<float> buffer(kFloats, 1.0f);
    (*results)[rank] =
        RunPreflight(world, {0, rank}, connect, board, buffer.data(), buffer.size(), options);
  });
}

// A collective whose all-reduces start `delay` late: a slow host's.
class SlowCollective : public Collective {
 public:
  SlowCollective(std::unique_ptr<Collective> inner, absl::Duration delay)
      : inner_(std::move(inner)), delay_(delay) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override { return inner_->backend(); }
  absl::Status AllReduceSum(float* data, size_t n) override {
    absl::SleepFor(delay_);
    return inner_->AllReduceSum(data, n);
  }
  absl::Status AllReduceSumBf16(uint16_t* data, size_t n) override {
    return inner_->AllReduceSumBf16(data, n);
  }
  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    return inner_->Broadcast(data, bytes, root);
  }
  absl::Status Barrier() override { return inner_->Barrier(); }

 private:
  std::unique_ptr<Collective> inner_;
  const absl::Duration delay_;
};

TEST(PreflightCheckTest, PairsNameTheSlowRankThatOneAllReduceCannot) {
  constexpr size_t kFloats = (size_t{1} << 20) / sizeof(float);
  gloo::rendezvous::HashStore pairs;
  std::vector<PreflightReport> reports(3);
  RunWorld(3, [&](int rank, Collective* world) {
    // Every pair rank 1 is in waits 300 ms for it.
    ConnectGroup connect = [&, rank](const std::string& prefix, int r,
                                     int n) -> absl::StatusOr<std::unique_ptr<Collective>> {
      absl::StatusOr<std::unique_ptr<Collective>> comm = ConnectGloo(pairs, prefix, r, n);
      if (!comm.ok() || rank != 1) return comm;
      return std::unique_ptr<Collective>(
          std::make_unique<SlowCollective>(*std::move(comm), absl::Milliseconds(300)));
    };
    std::vector<float> buffer(kFloats, 1.0f);
    absl::StatusOr<PreflightReport> report =
        MeasurePreflight(world, {0, rank}, connect, "pairs", buffer.data(), buffer.size());
    ASSERT_OK(report);
    reports[rank] = *report;
  });
  std::map<int, PreflightReport> by_rank;
  for (int rank = 0; rank < 3; ++rank) {
    by_rank[rank] = reports[rank];
    EXPECT_GT(reports[rank].world_gb_per_s, 0);
  }
  EXPECT_GT(reports[0].bus_gb_per_s, 2 * reports[1].bus_gb_per_s);
  EXPECT_GT(reports[2].bus_gb_per_s, 2 * reports[1].bus_gb_per_s);
  std::vector<PreflightExclusion> excluded = JudgePreflight(by_rank);
  ASSERT_EQ(excluded.size(), 1u);
  EXPECT_EQ(excluded[0].rank, 1);
}

TEST(PreflightCheckTest, EveryRankPostsItsPairFigureAndGoesOnAVerdictOfGo) {
  FakeBoard board(3, kPreflightGo);
  std::vector<absl::Status> results(3);
  RunThree(&board, &results);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_OK(results[rank]) << rank;
    absl::StatusOr<PreflightReport> report =
        DecodePreflightReport(board.posted()[PreflightReportKey(rank)]);
    ASSERT_OK(report) << rank;
    EXPECT_TRUE(report->error.empty()) << report->error;
    EXPECT_GT(report->bus_gb_per_s, 0) << rank;
    EXPECT_GT(report->world_gb_per_s, 0) << rank;
  }
}

TEST(PreflightCheckTest, AnotherVerdictEndsTheCheckWithIt) {
  FakeBoard board(3, "rank 2 excluded");
  std::vector<absl::Status> results(3);
  RunThree(&board, &results);
  for (const absl::Status& s : results) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition));
    EXPECT_EQ(s.message(), "pre-flight: rank 2 excluded");
  }
}

TEST(PreflightCheckTest, NoVerdictEndsByTheDeadlineOrAStop) {
  FakeBoard board(3, "");
  std::vector<absl::Status> results(3);
  PreflightOptions options;
  options.verdict_timeout = absl::Milliseconds(300);
  options.poll = absl::Milliseconds(50);
  RunThree(&board, &results, options);
  for (const absl::Status& s : results)
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kDeadlineExceeded));

  FakeBoard stopped(3, "");
  options.verdict_timeout = absl::Minutes(5);
  options.stop_requested = [] { return true; };
  RunThree(&stopped, &results, options);
  for (const absl::Status& s : results) EXPECT_THAT(s, StatusIs(absl::StatusCode::kCancelled));
}

}  // namespace
}  // namespace ringmaster
