#include "coordinator/worker_service.h"

#include <deque>

#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

// Reads worker messages into the JobManager one at a time; writes queued
// commands one at a time, in order. The first message must register; the
// session it opens goes with every later message.
class WorkerStream final
    : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>,
      public WorkerLink {
 public:
  WorkerStream(JobManager* manager, WorkerMembership* membership, const AccessPolicy* access,
               Caller caller)
      : manager_(manager), membership_(membership), access_(access), caller_(std::move(caller)) {
    StartRead(&in_);
  }

  void Send(const v1::CoordinatorMessage& message) override {
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    queue_.push_back(message);
    MaybeWrite();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      FinishOnce(grpc::Status::OK);
      return;
    }
    absl::Status status = Handle(in_);
    if (!status.ok()) {
      FinishOnce(ToGrpcStatus(status));
      return;
    }
    StartRead(&in_);
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

  void OnCancel() override { FinishOnce(grpc::Status::CANCELLED); }

  void OnDone() override {
    membership_->Disconnect(this);
    delete this;
  }

 private:
  // Only the one outstanding read calls it, so session_ needs no lock.
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
  void FinishOnce(grpc::Status status) {
    absl::MutexLock lock(&mu_);
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
  const Caller caller_;    // who opened the stream
  WorkerSession session_;  // epoch 0 until registered
  v1::WorkerMessage in_;  // used by the one outstanding read
  absl::Mutex mu_;
  std::deque<v1::CoordinatorMessage> queue_ ABSL_GUARDED_BY(mu_);
  v1::CoordinatorMessage out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>*
WorkerServiceImpl::Connect(grpc::CallbackServerContext* context) {
  Caller caller;
  if (absl::Status s = access_->RequireWorker(*context, &caller); !s.ok()) {
    return new RefusedBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>(ToGrpcStatus(s));
  }
  return new WorkerStream(manager_, membership_, access_, std::move(caller));
}

}  // namespace ringmaster
