// The writing half of a gRPC server stream, for the callback API's
// reactors (ServerWriteReactor, ServerBidiReactor): messages are queued, at
// most `max_queued` of them, and written one at a time in order; the stream
// finishes exactly once, and never while a write is in flight. WatchJob,
// StreamLogs and the worker stream use it, each with its overflow rule.
#ifndef RINGMASTER_COMMON_STREAM_WRITER_H_
#define RINGMASTER_COMMON_STREAM_WRITER_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_handoff.h"
#include "common/mutex.h"

namespace ringmaster {

// What Write does with a full queue.
enum class Overflow {
  kEnd,     // finish the stream RESOURCE_EXHAUSTED: the peer must resynchronize
  kRefuse,  // return false; the producer waits for room (HasRoom)
};

// Thread-safe. `start_write` and `finish` are the reactor's StartWrite and
// Finish; they are called under the writer's mutex (both only queue work).
// `coalesce`, when given, says whether a new message replaces the newest
// queued one (a later snapshot of the same kind) instead of queuing.
template <typename Message>
class StreamWriter {
 public:
  using Coalesce = std::function<bool(const Message& queued, const Message& next)>;

  StreamWriter(std::function<void(const Message*)> start_write,
               std::function<void(const grpc::Status&)> finish, size_t max_queued,
               Overflow overflow, Coalesce coalesce = nullptr)
      : start_write_(std::move(start_write)),
        finish_(std::move(finish)),
        max_queued_(max_queued),
        overflow_(overflow),
        coalesce_(std::move(coalesce)) {}
  // For `reactor` itself: its StartWrite and Finish, each marked as handed
  // to gRPC (common/grpc_handoff.h).
  template <typename Reactor>
  StreamWriter(Reactor* reactor, size_t max_queued, Overflow overflow, Coalesce coalesce = nullptr)
      : StreamWriter(
            [reactor](const Message* message) {
              HandToGrpc(reactor);
              reactor->StartWrite(message);
            },
            [reactor](const grpc::Status& status) {
              HandToGrpc(reactor);
              reactor->Finish(status);
            },
            max_queued, overflow, std::move(coalesce)) {}

  // Queues `message`. False when the stream is finishing, or when the queue
  // is full and the rule is kRefuse (or kEnd, which also ends the stream).
  bool Write(Message message) {
    MutexLock lock(&mu_);
    if (finishing_) return false;
    if (coalesce_ && !queue_.empty() && coalesce_(queue_.back(), message)) {
      queue_.back() = std::move(message);
      return true;
    }
    if (queue_.size() >= max_queued_) {
      if (overflow_ == Overflow::kEnd) {
        FinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                  absl::StrCat("more than ", max_queued_,
                                               " messages waiting to be written: the reader "
                                               "is too slow")),
                     /*drain=*/false);
      }
      return false;
    }
    queue_.push_back(std::move(message));
    MaybeWriteLocked();
    return true;
  }

  // Finishes with `status`: after every queued message is written when
  // `drain`, else at once, dropping them. Later calls change nothing.
  void Finish(grpc::Status status, bool drain) {
    MutexLock lock(&mu_);
    FinishLocked(std::move(status), drain);
  }

  // Whether a Write would be queued now (kRefuse producers poll this).
  bool HasRoom() {
    MutexLock lock(&mu_);
    return !finishing_ && queue_.size() < max_queued_;
  }
  bool finishing() {
    MutexLock lock(&mu_);
    return finishing_;
  }

  // The reactor's OnWriteDone and OnCancel.
  void OnWriteDone(bool ok) {
    MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"), false);
    MaybeWriteLocked();
  }
  void OnCancel() { Finish(grpc::Status::CANCELLED, /*drain=*/false); }

 private:
  void FinishLocked(grpc::Status status, bool drain) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    status_ = std::move(status);
    if (!drain) queue_.clear();
    MaybeWriteLocked();
  }

  // Starts the next write, or the Finish once nothing is left to write.
  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (!queue_.empty()) {
      out_ = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      start_write_(&out_);
      return;
    }
    if (finishing_) {
      finished_ = true;
      finish_(status_);
    }
  }

  const std::function<void(const Message*)> start_write_;
  const std::function<void(const grpc::Status&)> finish_;
  const size_t max_queued_;
  const Overflow overflow_;
  const Coalesce coalesce_;

  Mutex mu_;
  std::deque<Message> queue_ ABSL_GUARDED_BY(mu_);
  Message out_ ABSL_GUARDED_BY(mu_);  // the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

// A server stream's reactor that writes through a StreamWriter, `writer_`:
// `Reactor` is grpc::ServerWriteReactor<Message> or a ServerBidiReactor
// writing Message. OnWriteDone and OnCancel go to the writer; OnDone, once
// gRPC is done with the reactor, to Ended, which deletes it or leaves that
// to whoever still runs it. A class that has other bases lists this first,
// so that the reactor's address is the one handed to gRPC.
template <typename Reactor, typename Message>
class WritingReactor : public Reactor {
 public:
  void OnWriteDone(bool ok) override {
    GrpcCallback callback(this);
    writer_.OnWriteDone(ok);
  }
  void OnCancel() override {
    GrpcCallback callback(this);
    writer_.OnCancel();
  }
  void OnDone() override {
    BackFromGrpc(this);
    Ended();
  }

 protected:
  WritingReactor(size_t max_queued, Overflow overflow,
                 typename StreamWriter<Message>::Coalesce coalesce = nullptr)
      : writer_(this, max_queued, overflow, std::move(coalesce)) {}
  // gRPC is done with the reactor (OnDone).
  virtual void Ended() = 0;

  StreamWriter<Message> writer_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_STREAM_WRITER_H_
