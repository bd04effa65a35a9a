#include "coordinator/worker_service.h"

#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

// Reads worker messages one at a time and hands each to `inbox`, which
// runs it into the JobManager off gRPC's threads (the manager may wait for
// its mutex and for the store's sync); the next read starts once it is
// handled. Writes queued commands one at a time, in order, at most
// `max_queued` of them: a worker that falls that far behind is cut off and
// resynchronizes when it registers again. The first message must register;
// the session it opens goes with every later message.
class WorkerStream final
    : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>,
      public WorkerLink {
 public:
  WorkerStream(JobManager* manager, WorkerMembership* membership, const AccessPolicy* access,
               SerialExecutor* inbox, int max_queued, Caller caller)
      : manager_(manager),
        membership_(membership),
        access_(access),
        inbox_(inbox),
        max_queued_(max_queued),
        caller_(std::move(caller)) {
    StartRead(&in_);
  }

  void Send(const v1::CoordinatorMessage& message) override {
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    if (static_cast<int>(queue_.size()) >= max_queued_) {
      FinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                absl::StrCat("more than ", max_queued_,
                                             " messages queued for this worker (it reads too "
                                             "slowly); register again")));
      return;
    }
    queue_.push_back(message);
    MaybeWrite();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      absl::MutexLock lock(&mu_);
      FinishLocked(grpc::Status::OK);
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      handling_ = true;
    }
    inbox_->Post([this] { HandleAndReadOn(); });
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      finishing_ = true;
      queue_.clear();
    }
    if (finishing_ && !finished_) {
      finished_ = true;
      Finish(final_status_);
      return;
    }
    MaybeWrite();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    bool handling = false;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      handling = handling_;
    }
    membership_->Disconnect(this);
    if (!handling) delete this;  // else the inbox deletes it
  }

 private:
  // On the inbox's thread.
  void HandleAndReadOn() {
    const absl::Status status = Handle(in_);
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      handling_ = false;
      done = done_;
      if (!done && !status.ok()) FinishLocked(ToGrpcStatus(status));
      if (!done && !finishing_) StartRead(&in_);
    }
    if (done) {
      membership_->Disconnect(this);  // a registration may have come meanwhile
      delete this;
    }
  }

  // Only the one message being handled calls it, so session_ needs no lock.
  absl::Status Handle(const v1::WorkerMessage& message) {
    int64_t ack = 0;
    if (session_.epoch == 0) {
      if (!message.has_register_()) {
        return absl::FailedPreconditionError(
            "the first message on a worker stream must be register");
      }
      RETURN_IF_ERROR(access_->RequireWorkerId(caller_, message.register_().worker_id()));
      absl::StatusOr<WorkerSession> session =
          manager_->RegisterWorker(this, message.register_(), &ack);
      if (!session.ok()) return session.status();
      session_ = *session;
    } else if (message.has_heartbeat()) {
      if (!manager_->OnHeartbeat(session_, message.heartbeat())) {
        return absl::AbortedError("this worker session has ended; register again");
      }
    } else if (message.has_rank_started() || message.has_rank_exited()) {
      ack = manager_->OnRankEvent(session_, message);
    } else {
      return absl::InvalidArgumentError("unexpected worker message");
    }
    if (ack > 0) {
      v1::CoordinatorMessage out;
      out.mutable_acknowledged()->set_seq(ack);
      Send(out);
    }
    return absl::OkStatus();
  }

  void MaybeWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || queue_.empty()) return;
    out_ = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    StartWrite(&out_);
  }

  // Finishes now, or after the write in flight completes.
  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    final_status_ = std::move(status);
    queue_.clear();
    if (!writing_) {
      finished_ = true;
      Finish(final_status_);
    }
  }

  JobManager* const manager_;
  WorkerMembership* const membership_;
  const AccessPolicy* const access_;
  SerialExecutor* const inbox_;
  const int max_queued_;
  const Caller caller_;    // who opened the stream
  WorkerSession session_;  // epoch 0 until registered; the inbox's
  v1::WorkerMessage in_;   // the one read, then handled, at a time
  absl::Mutex mu_;
  std::deque<v1::CoordinatorMessage> queue_ ABSL_GUARDED_BY(mu_);
  v1::CoordinatorMessage out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool handling_ ABSL_GUARDED_BY(mu_) = false;  // in_ is with the inbox
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>*
WorkerServiceImpl::Connect(grpc::CallbackServerContext* context) {
  Caller caller;
  if (absl::Status s = access_->RequireWorker(*context, &caller); !s.ok()) {
    return new RefusedBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>(ToGrpcStatus(s));
  }
  return new WorkerStream(manager_, membership_, access_, &inbox_, max_queued_,
                          std::move(caller));
}

}  // namespace ringmaster
