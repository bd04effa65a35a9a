// The HTTP/JSON API's streams (WatchJob, WatchJobs, StreamLogs) as
// Server-Sent Events: each message of the gRPC stream is one event, its
// data the message in JSON, its id where the stream goes on from, so that
// a client that reconnects with Last-Event-ID misses nothing and sees
// nothing twice: WatchJobs' resume token, or for StreamLogs the position
// of each rank's log after the chunks sent so far.
#ifndef RINGMASTER_COORDINATOR_API_HTTP_STREAMS_H_
#define RINGMASTER_COORDINATOR_API_HTTP_STREAMS_H_

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/channel.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "common/mutex.h"
#include "proto/job.pb.h"

struct mg_connection;

namespace ringmaster {

// A JSON reply of `status` (the gateway's and a stream's that fails before
// its first event); an error as ErrorJson with its HTTP status.
void Respond(mg_connection* connection, int status, const std::string& body);
// A reply of `status` with `content_type` and `headers` ("Name: value\r\n"
// each) besides those every reply has.
void RespondWith(mg_connection* connection, int status, absl::string_view content_type,
                 absl::string_view body, absl::string_view headers);
void RespondError(mg_connection* connection, const absl::Status& status);

// A new message of the generated `type`.
std::unique_ptr<google::protobuf::Message> NewMessage(const google::protobuf::Descriptor* type);

// The bytes of a gRPC message buffer; false when they cannot be read.
bool BytesOf(const grpc::ByteBuffer& buffer, std::string* bytes);

// What a stream's events say of where it is: each rank's log position
// (StreamLogs), by (attempt, rank).
using LogPositions = std::map<std::pair<int, int>, v1::LogPosition>;

// The event id after `message` of the stream: the resume token of a
// JobsEvent; for a LogChunk, `positions` with its `next`, as
// "attempt.rank.offset.mid_line" per rank joined by '_' (empty while
// none); empty for a JobEvent.
std::string EventIdAfter(const google::protobuf::Message& message, LogPositions* positions);

// Sets where the stream's `request` goes on from, from a Last-Event-ID
// that EventIdAfter made; INVALID_ARGUMENT naming it when it is not one.
// `positions` gets the log positions it holds.
absl::Status ResumeFrom(const std::string& last_event_id, google::protobuf::Message* request,
                        LogPositions* positions);

// The events of job watches (WatchJobs, WatchJob) as sent, by the bytes
// of their message: the jobs lists open in many browsers each get every
// change of a job as the same bytes (all but its owner's see it redacted
// alike), and protobuf's conversion of a whole job to JSON, the costly
// part, is made once for those that come after the first. Thread-safe; it
// keeps the last kEventsKept events of at most kMaxEventBytes each.
class JobEventCache {
 public:
  struct Event {
    std::string id;    // EventIdAfter's
    std::string text;  // "id: ...\ndata: {...}\n\n"
  };
  static constexpr size_t kEventsKept = 64;
  static constexpr size_t kMaxEventBytes = 64 << 10;

  // The event of `bytes`, a message of `type`; null when not kept.
  std::shared_ptr<const Event> Find(const google::protobuf::Descriptor* type,
                                    const std::string& bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void Keep(const google::protobuf::Descriptor* type, const std::string& bytes,
            std::shared_ptr<const Event> event) ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // By type, then bytes (looked up without a copy); node-based, so that
  // order_ may point at the keys.
  using ByBytes = absl::node_hash_map<std::string, std::shared_ptr<const Event>>;
  mutable Mutex mu_;
  absl::flat_hash_map<const google::protobuf::Descriptor*, ByBytes> events_ ABSL_GUARDED_BY(mu_);
  // Oldest first.
  std::deque<std::pair<const google::protobuf::Descriptor*, const std::string*>> order_
      ABSL_GUARDED_BY(mu_);
};

// Serves the server stream `method` with `request` on `channel`, as the
// holder of `authorization`, as Server-Sent Events on `connection` until
// the stream ends or the client goes. An error before the first event is
// the HTTP error; after it, an `error` event. Job events go through
// `cache`.
void ServeEventStream(mg_connection* connection, grpc::Channel* channel,
                      const google::protobuf::MethodDescriptor& method,
                      const google::protobuf::Message& request, const char* authorization,
                      LogPositions positions, JobEventCache* cache);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_HTTP_STREAMS_H_
