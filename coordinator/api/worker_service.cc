#include "coordinator/api/worker_service.h"

#include "common/grpc_handoff.h"
#include "common/grpc_status.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "common/stream_writer.h"

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
    : public WritingReactor<grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>,
                            v1::CoordinatorMessage>,
      public WorkerLink {
 public:
  WorkerStream(JobManager* manager, WorkerMembership* membership, const AccessPolicy* access,
               TaskPool* inbox, int max_queued, Caller caller)
      : WritingReactor(max_queued, Overflow::kEnd),
        manager_(manager),
        membership_(membership),
        access_(access),
        inbox_(inbox),
        caller_(std::move(caller)) {
    HandToGrpc(this);
    StartRead(&in_);
  }

  void Send(const v1::CoordinatorMessage& message) override { writer_.Write(message); }

  void OnReadDone(bool ok) override {
    GrpcCallback callback(this);
    if (!ok) {
      // gRPC ends a read that does not parse as it ends the stream. Before
      // the registration, neither is a worker's way to close.
      writer_.Finish(session_.epoch == 0
                         ? grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                        "cannot parse WorkerMessage, or the stream ended "
                                        "before the worker registered")
                         : grpc::Status::OK,
                     /*drain=*/false);
      return;
    }
    {
      MutexLock lock(&mu_);
      handling_ = true;
    }
    inbox_->Post([this] { HandleAndReadOn(); });
  }

  void Ended() override {
    bool handling = false;
    {
      MutexLock lock(&mu_);
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
    if (!status.ok()) writer_.Finish(ToGrpcStatus(status), /*drain=*/false);
    bool done = false;
    {
      MutexLock lock(&mu_);
      handling_ = false;
      done = done_;
      if (!done && !writer_.finishing()) {
        HandToGrpc(this);
        StartRead(&in_);
      }
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
    } else if (message.has_rank_started() || message.has_rank_exited() || message.has_gpu_error() ||
               message.has_stacks_dumped()) {
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

  JobManager* const manager_;
  WorkerMembership* const membership_;
  const AccessPolicy* const access_;
  TaskPool* const inbox_;
  const Caller caller_;    // who opened the stream
  WorkerSession session_;  // epoch 0 until registered; the inbox's
  v1::WorkerMessage in_;   // the one read, then handled, at a time
  Mutex mu_;
  bool handling_ ABSL_GUARDED_BY(mu_) = false;  // in_ is with the inbox
  bool done_ ABSL_GUARDED_BY(mu_) = false;      // OnDone has run
};

}  // namespace

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* WorkerServiceImpl::Connect(
    grpc::CallbackServerContext* context) {
  Caller caller;
  if (absl::Status s = access_->RequireWorker(*context, &caller); !s.ok()) {
    return new RefusedBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>(ToGrpcStatus(s));
  }
  return new WorkerStream(manager_, membership_, access_, &inbox_, max_queued_, std::move(caller));
}

grpc::ServerUnaryReactor* WorkerServiceImpl::ReadCode(grpc::CallbackServerContext* context,
                                                      const v1::ReadCodeRequest* request,
                                                      v1::ReadCodeResponse* response) {
  Caller caller;
  if (absl::Status s = access_->RequireWorker(*context, &caller); !s.ok()) {
    return FinishUnary(context, s);
  }
  int64_t archive_bytes = 0;
  absl::StatusOr<std::string> data =
      code_->Read(request->sha256(), request->offset(), request->max_bytes(), &archive_bytes);
  if (data.ok()) {
    response->set_data(*std::move(data));
    response->set_archive_bytes(archive_bytes);
  }
  return FinishUnary(context, data.status());
}

}  // namespace ringmaster
