#include "coordinator/api/http_streams.h"

#include <civetweb.h>
#include <grpcpp/generic/generic_stub.h>

#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/grpc_status.h"
#include "common/mutex.h"
#include "coordinator/api/http_routes.h"

namespace ringmaster {
namespace {

namespace pb = google::protobuf;

// A quiet stream sends a comment this often, so that proxies keep it.
constexpr absl::Duration kKeepalive = absl::Seconds(15);
// How long an error may take to come before the stream's headers go.
constexpr absl::Duration kFirstEventWait = absl::Seconds(1);

// One server stream read message by message from the calling thread: a
// read is asked for only once the last one was taken, so nothing queues.
class StreamReader final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamReader(grpc::Channel* channel, const std::string& method, const std::string& request,
               const char* authorization)
      : stub_(std::shared_ptr<grpc::Channel>(channel, [](grpc::Channel*) {})) {
    if (authorization != nullptr) context_.AddMetadata("authorization", authorization);
    grpc::Slice slice(request);
    request_ = grpc::ByteBuffer(&slice, 1);
    stub_.PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(), this);
    AddHold();  // until Stop: reads are started from outside the reactor
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&incoming_);
    StartCall();
  }
  ~StreamReader() override {
    Stop();
    MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  enum class Got { kMessage, kEnd, kNothing };
  // Waits up to `wait` for the next message, into `bytes`.
  Got Next(absl::Duration wait, std::string* bytes) {
    {
      MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(this, &StreamReader::Ready), wait);
      if (!has_message_) return read_ended_ || done_ ? Got::kEnd : Got::kNothing;
      has_message_ = false;
      (void)BytesOf(incoming_, bytes);
    }
    StartRead(&incoming_);
    return Got::kMessage;
  }
  // No more reads: the call is cancelled if it still runs.
  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    context_.TryCancel();
    RemoveHold();
  }
  grpc::Status Finish() {
    Stop();
    MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return status_;
  }

  void OnReadDone(bool ok) override {
    MutexLock lock(&mu_);
    (ok ? has_message_ : read_ended_) = true;
  }
  void OnDone(const grpc::Status& status) override {
    MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

 private:
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return has_message_ || read_ended_ || done_;
  }

  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer incoming_;
  bool stopped_ = false;  // the calling thread's
  Mutex mu_;
  bool has_message_ ABSL_GUARDED_BY(mu_) = false;
  bool read_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

bool Write(mg_connection* connection, const std::string& text) {
  return mg_write(connection, text.data(), text.size()) == static_cast<int>(text.size());
}

bool SendHeaders(mg_connection* connection) {
  return Write(connection,
               "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
               "X-Accel-Buffering: no\r\nX-Content-Type-Options: nosniff\r\n"
               "Connection: close\r\n\r\n");
}

std::string LogPositionsId(const LogPositions& positions) {
  std::vector<std::string> parts;
  for (const auto& [key, p] : positions) {
    parts.push_back(
        absl::StrCat(p.attempt(), ".", p.rank(), ".", p.offset(), ".", p.mid_line() ? 1 : 0));
  }
  return absl::StrJoin(parts, "_");
}

}  // namespace

void Respond(mg_connection* connection, int status, const std::string& body) {
  RespondWith(connection, status, "application/json", body, "");
}

void RespondWith(mg_connection* connection, int status, absl::string_view content_type,
                 absl::string_view body, absl::string_view headers) {
  const std::string head =
      absl::StrCat("HTTP/1.1 ", status, " ", mg_get_response_code_text(connection, status),
                   "\r\nContent-Type: ", content_type, "\r\nContent-Length: ", body.size(),
                   "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n", headers,
                   "Connection: close\r\n\r\n");
  mg_write(connection, head.data(), head.size());
  mg_write(connection, body.data(), body.size());
}

void RespondError(mg_connection* connection, const absl::Status& status) {
  Respond(connection, HttpStatusOf(status.code()), ErrorJson(status));
}

std::unique_ptr<pb::Message> NewMessage(const pb::Descriptor* type) {
  return std::unique_ptr<pb::Message>(
      pb::MessageFactory::generated_factory()->GetPrototype(type)->New());
}

bool BytesOf(const grpc::ByteBuffer& buffer, std::string* bytes) {
  std::vector<grpc::Slice> slices;
  bytes->clear();
  if (!buffer.Dump(&slices).ok()) return false;
  for (const grpc::Slice& s : slices)
    bytes->append(reinterpret_cast<const char*>(s.begin()), s.size());
  return true;
}

std::string EventIdAfter(const pb::Message& message, LogPositions* positions) {
  if (const auto* event = dynamic_cast<const v1::JobsEvent*>(&message)) {
    return event->resume_token();
  }
  const auto* chunk = dynamic_cast<const v1::LogChunk*>(&message);
  if (chunk == nullptr) return "";
  if (chunk->has_next()) {
    const v1::LogPosition& next = chunk->next();
    // A resume is of one attempt: a newer one's positions replace the rest.
    if (!positions->empty() && positions->rbegin()->first.first < next.attempt()) {
      positions->clear();
    }
    (*positions)[{next.attempt(), next.rank()}] = next;
  }
  return LogPositionsId(*positions);
}

absl::Status ResumeFrom(const std::string& last_event_id, pb::Message* request,
                        LogPositions* positions) {
  if (last_event_id.empty()) return absl::OkStatus();
  if (auto* watch = dynamic_cast<v1::WatchJobsRequest*>(request)) {
    watch->set_resume_token(last_event_id);
    return absl::OkStatus();
  }
  auto* logs = dynamic_cast<v1::StreamLogsRequest*>(request);
  if (logs == nullptr) return absl::OkStatus();  // WatchJob begins with the job as it is
  for (absl::string_view part : absl::StrSplit(last_event_id, '_')) {
    const std::vector<absl::string_view> fields = absl::StrSplit(part, '.');
    int attempt = 0, rank = 0, mid = 0;
    int64_t offset = 0;
    if (fields.size() != 4 || !absl::SimpleAtoi(fields[0], &attempt) ||
        !absl::SimpleAtoi(fields[1], &rank) || !absl::SimpleAtoi(fields[2], &offset) ||
        !absl::SimpleAtoi(fields[3], &mid)) {
      return absl::InvalidArgumentError(absl::StrCat("Last-Event-ID \"", last_event_id,
                                                     "\" is not an id of this API's log events"));
    }
    v1::LogPosition* p = logs->add_resume();
    p->set_attempt(attempt);
    p->set_rank(rank);
    p->set_offset(offset);
    p->set_mid_line(mid != 0);
    (*positions)[{attempt, rank}] = *p;
  }
  return absl::OkStatus();
}

std::shared_ptr<const JobEventCache::Event> JobEventCache::Find(const pb::Descriptor* type,
                                                                const std::string& bytes) {
  MutexLock lock(&mu_);
  auto of_type = events_.find(type);
  if (of_type == events_.end()) return nullptr;
  auto it = of_type->second.find(absl::string_view(bytes.data(), bytes.size()));
  return it == of_type->second.end() ? nullptr : it->second;
}

void JobEventCache::Keep(const pb::Descriptor* type, const std::string& bytes,
                         std::shared_ptr<const Event> event) {
  if (bytes.size() > kMaxEventBytes) return;
  MutexLock lock(&mu_);
  auto [it, added] = events_[type].try_emplace(bytes, std::move(event));
  if (!added) return;
  order_.emplace_back(type, &it->first);
  if (order_.size() > kEventsKept) {
    const auto [oldest_type, oldest] = order_.front();
    order_.pop_front();
    events_[oldest_type].erase(*oldest);
  }
}

size_t JobEventCache::size() const {
  MutexLock lock(&mu_);
  return order_.size();
}

namespace {

// The SSE text of `message`, with the stream's `id` after it.
std::string EventText(const std::string& id, const pb::Message& message) {
  return absl::StrCat(id.empty() ? "" : absl::StrCat("id: ", id, "\n"), "data: ", ToJson(message),
                      "\n\n");
}

}  // namespace

void ServeEventStream(mg_connection* connection, grpc::Channel* channel,
                      const pb::MethodDescriptor& method, const pb::Message& request,
                      const char* authorization, LogPositions positions, JobEventCache* cache) {
  // A job event's id and text follow from its bytes alone, and are shared;
  // a log chunk's id from the stream's positions too.
  const pb::Descriptor* type = method.output_type();
  JobEventCache* const shared =
      type == v1::JobsEvent::descriptor() || type == v1::JobEvent::descriptor() ? cache : nullptr;
  StreamReader reader(channel, absl::StrCat("/", method.service()->full_name(), "/", method.name()),
                      request.SerializeAsString(), authorization);
  std::unique_ptr<pb::Message> message = NewMessage(type);
  bool headers = false;
  const absl::Time first_by = absl::Now() + kFirstEventWait;
  for (;;) {
    std::string bytes;
    const StreamReader::Got got =
        reader.Next(headers ? kKeepalive : first_by - absl::Now(), &bytes);
    if (got == StreamReader::Got::kEnd) break;
    if (!headers && !(headers = SendHeaders(connection))) break;
    if (got == StreamReader::Got::kNothing) {
      if (!Write(connection, ": keepalive\n\n")) break;  // the client went
      continue;
    }
    std::shared_ptr<const JobEventCache::Event> event;
    if (shared != nullptr) event = shared->Find(type, bytes);
    if (event == nullptr) {
      message->ParseFromString(bytes);
      auto made = std::make_shared<JobEventCache::Event>();
      made->id = EventIdAfter(*message, &positions);
      made->text = EventText(made->id, *message);
      event = std::move(made);
      if (shared != nullptr) shared->Keep(type, bytes, event);
    }
    if (!Write(connection, event->text)) break;
  }
  const absl::Status status = FromGrpcStatus(reader.Finish());
  if (!headers) {
    if (!status.ok()) {
      RespondError(connection, status);
      return;
    }
    // Ended before any event (the logs of an ended job that printed
    // nothing): still a stream that says it ended.
    if (!SendHeaders(connection)) return;
    headers = true;
  }
  if (status.ok()) {
    // Said, so that a browser's EventSource stops rather than reconnects.
    Write(connection, "event: end\ndata: {}\n\n");
  } else if (status.code() != absl::StatusCode::kCancelled) {
    Write(connection, absl::StrCat("event: error\ndata: ", ErrorJson(status), "\n\n"));
  }
}

}  // namespace ringmaster
