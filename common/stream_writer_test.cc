#include "common/stream_writer.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

// A reactor's side of the writer: what was started and how it finished.
struct FakeStream {
  std::vector<std::string> started;
  std::vector<grpc::StatusCode> finished;
  StreamWriter<std::string> Writer(size_t max_queued, Overflow overflow,
                                   StreamWriter<std::string>::Coalesce coalesce = nullptr) {
    return StreamWriter<std::string>(
        [this](const std::string* m) { started.push_back(*m); },
        [this](const grpc::Status& s) { finished.push_back(s.error_code()); }, max_queued, overflow,
        std::move(coalesce));
  }
};

TEST(StreamWriterTest, WritesOneAtATimeInOrder) {
  FakeStream stream;
  auto writer = stream.Writer(8, Overflow::kEnd);
  EXPECT_TRUE(writer.Write("a"));
  EXPECT_TRUE(writer.Write("b"));
  EXPECT_EQ(stream.started, (std::vector<std::string>{"a"})) << "b waits for a's write";
  writer.OnWriteDone(true);
  EXPECT_EQ(stream.started, (std::vector<std::string>{"a", "b"}));
}

// A cancel while a write is in flight finishes only once that write is
// done (gRPC forbids Finish with a write outstanding), and only once.
TEST(StreamWriterTest, CancelDuringAWriteFinishesAfterItOnce) {
  FakeStream stream;
  auto writer = stream.Writer(8, Overflow::kEnd);
  writer.Write("a");
  writer.Write("b");
  writer.OnCancel();
  EXPECT_TRUE(stream.finished.empty());
  EXPECT_FALSE(writer.Write("c")) << "nothing is queued once finishing";
  writer.OnWriteDone(false);
  EXPECT_EQ(stream.finished, (std::vector<grpc::StatusCode>{grpc::StatusCode::CANCELLED}));
  writer.Finish(grpc::Status::OK, true);
  EXPECT_EQ(stream.finished.size(), 1u);
  EXPECT_EQ(stream.started, (std::vector<std::string>{"a"})) << "b was dropped";
}

TEST(StreamWriterTest, DrainingFinishWritesWhatIsQueuedFirst) {
  FakeStream stream;
  auto writer = stream.Writer(8, Overflow::kEnd);
  writer.Write("a");
  writer.Write("b");
  writer.Finish(grpc::Status::OK, /*drain=*/true);
  writer.OnWriteDone(true);
  EXPECT_TRUE(stream.finished.empty());
  writer.OnWriteDone(true);
  EXPECT_EQ(stream.started, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(stream.finished, (std::vector<grpc::StatusCode>{grpc::StatusCode::OK}));
}

TEST(StreamWriterTest, AFullQueueEndsTheStreamOrRefuses) {
  FakeStream ended;
  auto end = ended.Writer(2, Overflow::kEnd);
  for (const char* m : {"a", "b", "c"}) EXPECT_TRUE(end.Write(m));  // a in flight
  EXPECT_FALSE(end.Write("d"));
  end.OnWriteDone(true);
  EXPECT_EQ(ended.finished, (std::vector<grpc::StatusCode>{grpc::StatusCode::RESOURCE_EXHAUSTED}));

  FakeStream refused;
  auto refuse = refused.Writer(2, Overflow::kRefuse);
  for (const char* m : {"a", "b", "c"}) EXPECT_TRUE(refuse.Write(m));
  EXPECT_FALSE(refuse.HasRoom());
  EXPECT_FALSE(refuse.Write("d"));
  refuse.OnWriteDone(true);
  EXPECT_TRUE(refuse.HasRoom());
  EXPECT_TRUE(refuse.Write("d"));
  EXPECT_TRUE(refused.finished.empty());
}

TEST(StreamWriterTest, CoalescedMessagesReplaceTheNewestQueued) {
  FakeStream stream;
  auto writer =
      stream.Writer(2, Overflow::kEnd, [](const std::string& queued, const std::string& next) {
        return queued[0] == next[0];  // same kind: the later replaces
      });
  writer.Write("a1");  // in flight
  writer.Write("b1");
  writer.Write("b2");
  writer.Write("b3");
  writer.Write("c1");
  writer.OnWriteDone(true);
  writer.OnWriteDone(true);
  EXPECT_EQ(stream.started, (std::vector<std::string>{"a1", "b3", "c1"}));
  EXPECT_TRUE(stream.finished.empty());
}

}  // namespace
}  // namespace ringmaster
