#include "worker/coordinator_link.h"

#include <algorithm>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/coordinator_targets.h"
#include "common/credentials.h"
#include "common/net.h"

namespace ringmaster {

constexpr int kFreePortsReported = 4;

CoordinatorLink::CoordinatorLink(CoordinatorLinkOptions options, Hooks hooks)
    : options_(std::move(options)), hooks_(std::move(hooks)) {}

void CoordinatorLink::Shutdown() {
  MutexLock lock(&mu_);
  shutdown_ = true;
  if (context_ != nullptr) context_->TryCancel();
}

void CoordinatorLink::Send(v1::WorkerMessage event) {
  // Numbered and queued under one lock: the coordinator applies each number
  // once and takes a lower number after a higher one for a duplicate.
  MutexLock lock(&mu_);
  v1::WorkerMessage numbered = outbox_.Add(std::move(event));
  if (options_.on_numbered) options_.on_numbered();
  QueueLocked(std::move(numbered));  // if not now, then inside the next registration
}

void CoordinatorLink::AnswerQuery(const v1::QueryRank& query) {
  std::optional<v1::WorkerMessage> exit = outbox_.FindExit(query.rank());
  spdlog::warn("the coordinator asks again for the exit of rank {} of job {} (attempt {}): {}",
               query.rank().rank(), query.rank().job_id(), query.rank().attempt(),
               exit ? "sent again" : "none is kept here");
  if (exit) Send(*std::move(exit));
}

bool CoordinatorLink::QueueLocked(v1::WorkerMessage message) {
  if (!writable_) return false;
  if (message.has_heartbeat()) {
    for (v1::WorkerMessage& queued : queued_) {
      if (queued.has_heartbeat()) {
        queued = std::move(message);
        return true;
      }
    }
  } else if (queued_.size() >= kMaxQueuedEvents) {
    spdlog::warn("more than {} rank events waiting to be written: reconnecting", kMaxQueuedEvents);
    writable_ = false;
    queued_.clear();
    if (context_ != nullptr) context_->TryCancel();
    return false;
  }
  queued_.push_back(std::move(message));
  return true;
}

void CoordinatorLink::WriteLoop(
    grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>* stream) {
  for (;;) {
    v1::WorkerMessage message;
    {
      MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &CoordinatorLink::WriterHasWork));
      if (!writable_) return;
      message = std::move(queued_.front());
      queued_.pop_front();
    }
    if (!stream->Write(message)) {
      MutexLock lock(&mu_);
      writable_ = false;
      queued_.clear();
      return;
    }
  }
}

absl::Status CoordinatorLink::Run() {
  grpc::ChannelArguments args;  // set below, before the first channel is made
  CoordinatorTargets targets(
      options_.coordinator_address, options_.tls, [&](const std::string& address) {
        return grpc::CreateCustomChannel(address, ChannelCredentials(options_.tls), args);
      });
  // Among several coordinators, a leader that stopped answering (paused,
  // cut off) is left within about 5 s, before the next one would count
  // this worker lost; alone, it may come back.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, targets.several() ? 2000 : 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, targets.several() ? 3000 : 20000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Reconnect promptly after a coordinator restart.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  ExpectServerName(options_.tls, kCoordinatorName, &args);
  absl::Duration backoff = options_.reconnect_initial;
  bool ever_registered = false;
  std::string unreachable_why;  // last said, and when
  absl::Time unreachable_said = absl::InfinitePast();
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (shutdown_) return absl::OkStatus();
    }
    const absl::Time started = absl::Now();
    bool registered = false;
    CoordinatorTargets::Target target = targets.Current(absl::Seconds(3));
    auto stub = v1::WorkerService::NewStub(target.channel);
    grpc::Status status = Serve(stub.get(), &registered);
    ever_registered |= registered;
    // To the leader a standby names, or the next coordinator; at once.
    if (targets.Follow(status, target.address, absl::InfiniteFuture()) &&
        (registered || !LeaderNamedIn(status.error_message()).empty())) {
      backoff = options_.reconnect_initial;
      continue;
    }
    if (status.error_code() == grpc::StatusCode::ALREADY_EXISTS) {
      // Before this process ever registered, the id belongs to another
      // worker; later, it may be our own old stream not yet seen closed.
      if (!ever_registered) return absl::AlreadyExistsError(status.error_message());
      spdlog::warn("registration refused, retrying: {}", status.error_message());
    }
    absl::Duration wait = backoff;
    const bool unavailable = status.error_code() == grpc::StatusCode::UNAVAILABLE;
    if (!registered && !status.ok() && status.error_code() != grpc::StatusCode::ALREADY_EXISTS) {
      // Down, refused at TLS or refused this worker: said once a minute,
      // or when the reason changes.
      if (status.error_message() != unreachable_why ||
          absl::Now() - unreachable_said > absl::Minutes(1)) {
        unreachable_why = status.error_message();
        unreachable_said = absl::Now();
        const std::string tls_why =
            unavailable
                ? ExplainTlsFailure(target.address, options_.tls.has_value(), unreachable_why)
                : "";
        spdlog::warn("cannot register with the coordinator at {}: {}", target.address,
                     tls_why.empty() ? unreachable_why : tls_why);
      }
      // The channel redials on its own back-off.
      if (unavailable) wait = std::min(wait, absl::Seconds(1));
    }
    // A long healthy connection resets the back-off.
    if (absl::Now() - started > absl::Seconds(10)) backoff = options_.reconnect_initial;
    MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&shutdown_), wait)) return absl::OkStatus();
    backoff = std::min(backoff * 2, options_.reconnect_max);
  }
}

grpc::Status CoordinatorLink::Serve(v1::WorkerService::Stub* stub, bool* registered) {
  grpc::ClientContext context;
  AddBearerToken(&context, options_.token);
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>> stream;
  {
    MutexLock lock(&mu_);
    if (shutdown_) return grpc::Status::CANCELLED;
    context_ = &context;
  }
  v1::WorkerMessage hello;
  v1::RegisterWorker* r = hello.mutable_register_();
  *r = options_.identity;
  for (v1::RunningRank& rank : hooks_.running_ranks()) *r->add_running() = std::move(rank);
  for (int port : PickFreePorts(kFreePortsReported)) r->add_free_ports(port);
  if (hooks_.logged_jobs) {
    for (std::string& job_id : hooks_.logged_jobs()) r->add_logs_of(std::move(job_id));
  }
  stream = stub->Connect(&context);
  {
    // The events the coordinator has not acknowledged travel inside the
    // registration, so it applies them before it judges which ranks it
    // placed here are gone. Taken under the lock: an event added later is
    // queued by Send, and written after the registration.
    MutexLock lock(&mu_);
    for (v1::WorkerMessage& event : outbox_.Unacknowledged()) {
      *r->add_unacked() = std::move(event);
    }
    queued_.clear();
    queued_.push_back(std::move(hello));
    writable_ = true;
    heartbeat_stop_ = false;
  }
  std::thread writer([this, s = stream.get()] { WriteLoop(s); });
  std::thread heartbeat([this] { HeartbeatLoop(); });
  v1::CoordinatorMessage command;
  while (stream->Read(&command)) {
    if (command.has_registered()) {
      spdlog::info("registered with coordinator {} (session {})", options_.coordinator_address,
                   command.registered().session());
      *registered = true;
      if (hooks_.registered) hooks_.registered(command.registered());
      MutexLock lock(&mu_);
      heartbeat_interval_ =
          absl::Milliseconds(std::max<int64_t>(50, command.registered().heartbeat_interval_ms()));
      continue;
    }
    if (command.has_acknowledged()) {
      outbox_.Acknowledge(command.acknowledged().seq());
      continue;
    }
    if (command.has_query_rank()) {
      AnswerQuery(command.query_rank());
      continue;
    }
    hooks_.on_command(command);
  }
  {
    MutexLock lock(&mu_);
    writable_ = false;
    queued_.clear();
    context_ = nullptr;
    heartbeat_stop_ = true;
  }
  heartbeat.join();
  writer.join();
  grpc::Status status = stream->Finish();
  if (*registered) {
    spdlog::warn("coordinator stream ended: {}", status.ok() ? "closed" : status.error_message());
  }
  return status;
}

void CoordinatorLink::HeartbeatLoop() {
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&heartbeat_stop_), heartbeat_interval_)) {
        return;
      }
    }
    // Sampled without the lock: NVML, /proc and the ranks' logs.
    v1::WorkerMessage message;
    v1::Heartbeat* beat = message.mutable_heartbeat();
    for (int port : PickFreePorts(kFreePortsReported)) beat->add_free_ports(port);
    if (hooks_.progress) {
      for (auto& p : hooks_.progress()) *beat->add_progress() = std::move(p);
    }
    if (hooks_.usage) hooks_.usage(beat);
    for (v1::RunningRank& rank : hooks_.running_ranks()) *beat->add_running() = std::move(rank);
    MutexLock lock(&mu_);
    if (heartbeat_stop_) return;
    QueueLocked(std::move(message));
  }
}

}  // namespace ringmaster
