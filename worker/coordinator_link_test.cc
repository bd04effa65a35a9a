#include "worker/coordinator_link.h"

#include <atomic>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/mutex.h"

namespace ringmaster {
namespace {

// A coordinator's end of the stream: acknowledges every rank event and
// keeps their numbers in the order they arrived.
class FakeCoordinator final : public v1::WorkerService::Service {
 public:
  // When set, an exit is answered by asking for it again (QueryRank).
  std::atomic<bool> query_exits{false};

  grpc::Status Connect(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>* stream) override {
    v1::WorkerMessage message;
    if (!stream->Read(&message) || !message.has_register_()) return grpc::Status::CANCELLED;
    v1::CoordinatorMessage registered;
    registered.mutable_registered()->set_heartbeat_interval_ms(3600 * 1000);
    stream->Write(registered);
    {
      MutexLock lock(&mu_);
      registrations_++;
      for (const v1::WorkerMessage& event : message.register_().unacked()) events_.push_back(event);
    }
    while (stream->Read(&message)) {
      if (message.seq() == 0) continue;  // a heartbeat
      {
        MutexLock lock(&mu_);
        events_.push_back(message);
      }
      v1::CoordinatorMessage ack;
      ack.mutable_acknowledged()->set_seq(message.seq());
      stream->Write(ack);
      if (query_exits && message.has_rank_exited()) {
        v1::CoordinatorMessage query;
        *query.mutable_query_rank()->mutable_rank() = message.rank_exited().rank();
        query_exits = false;
        stream->Write(query);
      }
    }
    return grpc::Status::OK;
  }

  // Polls until `n` events have arrived or 30 s pass.
  std::vector<v1::WorkerMessage> AwaitEvents(size_t n) {
    MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return events_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30));
    return events_;
  }
  bool AwaitRegistered() {
    MutexLock lock(&mu_);
    auto registered = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return registrations_ > 0; };
    return mu_.AwaitWithTimeout(absl::Condition(&registered), absl::Seconds(30));
  }

 private:
  Mutex mu_;
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::WorkerMessage> events_ ABSL_GUARDED_BY(mu_);
};

class CoordinatorLinkTest : public testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&coordinator_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    options_.coordinator_address = "127.0.0.1:" + std::to_string(port);
    options_.tls = Tls{};
    options_.identity.set_worker_id("w1");
  }

  void Start() {
    link_ = std::make_unique<CoordinatorLink>(
        options_, CoordinatorLink::Hooks{[](const v1::CoordinatorMessage&) {},
                                         [] { return std::vector<v1::RunningRank>{}; }});
    runner_ = std::thread([this] { link_->Run().IgnoreError(); });
    ASSERT_TRUE(coordinator_.AwaitRegistered());
  }

  void TearDown() override {
    if (link_ != nullptr) link_->Shutdown();
    if (runner_.joinable()) runner_.join();
    server_->Shutdown();
  }

  static v1::WorkerMessage Exit(int thread, int i) {
    v1::WorkerMessage m;
    v1::RankExited* exited = m.mutable_rank_exited();
    exited->mutable_rank()->set_job_id("job-" + std::to_string(thread));
    exited->mutable_rank()->set_rank(i);
    return m;
  }

  FakeCoordinator coordinator_;
  std::unique_ptr<grpc::Server> server_;
  CoordinatorLinkOptions options_;
  std::unique_ptr<CoordinatorLink> link_;
  std::thread runner_;
};

TEST_F(CoordinatorLinkTest, EventsFromManyThreadsArriveInTheOrderOfTheirNumbers) {
  // Every other event pauses between being numbered and being queued, so
  // that another thread's later event would pass it if the two steps were
  // not one.
  std::atomic<int> numbered{0};
  options_.on_numbered = [&numbered] {
    if (numbered++ % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  };
  Start();
  constexpr int kThreads = 8;
  constexpr int kEach = 100;
  std::vector<std::thread> senders;
  for (int t = 0; t < kThreads; ++t) {
    senders.emplace_back([this, t] {
      for (int i = 0; i < kEach; ++i) link_->Send(Exit(t, i));
    });
  }
  for (std::thread& s : senders) s.join();
  const std::vector<v1::WorkerMessage> events = coordinator_.AwaitEvents(kThreads * kEach);
  ASSERT_EQ(events.size(), static_cast<size_t>(kThreads * kEach));
  for (size_t i = 0; i < events.size(); ++i) {
    ASSERT_EQ(events[i].seq(), static_cast<int64_t>(i + 1))
        << "event " << i << " arrived out of order: the coordinator would take it for a "
        << "duplicate and lose it";
  }
}

TEST_F(CoordinatorLinkTest, AnExitAskedForAgainIsSentUnderANewNumber) {
  coordinator_.query_exits = true;
  Start();
  v1::WorkerMessage exit = Exit(0, 3);
  exit.mutable_rank_exited()->set_exit_code(7);
  link_->Send(exit);
  const std::vector<v1::WorkerMessage> events = coordinator_.AwaitEvents(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].seq(), 1);
  EXPECT_EQ(events[1].seq(), 2);
  EXPECT_EQ(events[1].rank_exited().rank().job_id(), "job-0");
  EXPECT_EQ(events[1].rank_exited().rank().rank(), 3);
  EXPECT_EQ(events[1].rank_exited().exit_code(), 7);
}

}  // namespace
}  // namespace ringmaster
