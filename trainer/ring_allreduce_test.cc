#include "trainer/ring_allreduce.h"
#include "testing/status_matchers.h"

#include <arpa/inet.h>
#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace ringmaster {
namespace {

using std::chrono::milliseconds;

// Plays rank 1 of a ring of 2 by hand: publishes a listening socket, then
// connects to rank 0 saying it is `claimed_rank`.
class FakePeer {
 public:
  explicit FakePeer(gloo::rendezvous::Store& store) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(listener_, 1);
    socklen_t length = sizeof(address);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    const std::string mine = "127.0.0.1 " + std::to_string(ntohs(address.sin_port));
    store.set("ring/1", std::vector<char>(mine.begin(), mine.end()));
  }
  ~FakePeer() {
    if (out_ >= 0) close(out_);
    if (in_ >= 0) close(in_);
    close(listener_);
  }

  // Connects to rank 0 with this hello, and accepts its connection.
  void Join(gloo::rendezvous::Store& store, uint32_t claimed_rank) {
    store.wait({"ring/0"});
    const std::vector<char> theirs = store.get("ring/0");
    const std::string text(theirs.begin(), theirs.end());
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(std::stoi(text.substr(text.find(' ') + 1)));
    out_ = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(0, connect(out_, reinterpret_cast<sockaddr*>(&address), sizeof(address)));
    const uint32_t hello[3] = {0x524d5231, 2, claimed_rank};
    ASSERT_EQ(static_cast<ssize_t>(sizeof(hello)), send(out_, hello, sizeof(hello), 0));
    in_ = accept(listener_, nullptr, nullptr);
  }

  int out() const { return out_; }

 private:
  int listener_ = -1;
  int out_ = -1;
  int in_ = -1;
};

// Rank 0 of a ring of 2 whose rank 1 is `peer`, claiming `claimed_rank`.
absl::StatusOr<std::unique_ptr<RingAllReduce>> JoinWith(FakePeer& peer,
                                                        gloo::rendezvous::Store& store,
                                                        uint32_t claimed_rank) {
  std::thread fake([&] { peer.Join(store, claimed_rank); });
  auto ring = RingAllReduce::Connect(store, "ring", 0, 2, "127.0.0.1", milliseconds(5000));
  fake.join();
  return ring;
}

TEST(RingAllReduceTest, AConnectionClaimingAnotherRankIsRefused) {
  gloo::rendezvous::HashStore store;
  FakePeer peer(store);
  auto ring = JoinWith(peer, store, 5);
  ASSERT_THAT(ring, IsError());
  EXPECT_THAT(ring.status(), StatusIs(absl::StatusCode::kFailedPrecondition)) << ring.status();
  EXPECT_NE(ring.status().message().find("claims rank 5 of 2; expected rank 1 of 2"),
            std::string::npos)
      << ring.status();
}

TEST(RingAllReduceTest, APeerThatClosesMidwayFailsTheCallAndEveryLaterOne) {
  gloo::rendezvous::HashStore store;
  FakePeer peer(store);
  auto ring = JoinWith(peer, store, 1);
  ASSERT_OK(ring) << ring.status();
  // Half of rank 1's share of the reduce-scatter, then it is gone.
  std::vector<float> half(1000, 1.0f);
  ASSERT_EQ(static_cast<ssize_t>(half.size() * sizeof(float)),
            send(peer.out(), half.data(), half.size() * sizeof(float), 0));
  shutdown(peer.out(), SHUT_WR);
  std::vector<float> data(4000, 1.0f);
  absl::Status status = (*ring)->AllReduceSum(data.data(), data.size());
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable)) << status;
  EXPECT_NE(status.message().find("peer rank 1 closed its connection"), std::string::npos)
      << status;
  EXPECT_EQ((*ring)->AllReduceSum(data.data(), data.size()), status);
}

TEST(RingAllReduceTest, AnAddressThatDoesNotResolveIsNamed) {
  gloo::rendezvous::HashStore store;
  auto ring =
      RingAllReduce::Connect(store, "ring", 0, 2, "no-such-host.invalid", milliseconds(1000));
  ASSERT_THAT(ring, IsError());
  EXPECT_NE(ring.status().message().find("no-such-host.invalid"), std::string::npos)
      << ring.status();
}

}  // namespace
}  // namespace ringmaster
