#include "worker/coordinator_link.h"

#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/net.h"

namespace ringmaster {

constexpr int kFreePortsReported = 4;

CoordinatorLink::CoordinatorLink(CoordinatorLinkOptions options, Hooks hooks)
    : options_(std::move(options)), hooks_(std::move(hooks)) {}

void CoordinatorLink::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
  if (context_ != nullptr) context_->TryCancel();
}

void CoordinatorLink::Send(const v1::WorkerMessage& message) {
  absl::MutexLock lock(&mu_);
  if (stream_ == nullptr || !WriteLocked(message)) unsent_.push_back(message);
}

bool CoordinatorLink::WriteLocked(const v1::WorkerMessage& message) {
  return stream_ != nullptr && stream_->Write(message);
}

void CoordinatorLink::Run() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Reconnect promptly after a coordinator restart.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  auto channel = grpc::CreateCustomChannel(options_.coordinator_address,
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = v1::WorkerService::NewStub(channel);
  absl::Duration backoff = options_.reconnect_initial;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (shutdown_) return;
    }
    const absl::Time started = absl::Now();
    Serve(stub.get());
    // A long healthy connection resets the back-off.
    if (absl::Now() - started > absl::Seconds(10)) backoff = options_.reconnect_initial;
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&shutdown_), backoff)) return;
    backoff = std::min(backoff * 2, options_.reconnect_max);
  }
}

void CoordinatorLink::Serve(v1::WorkerService::Stub* stub) {
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  if (!options_.token.empty()) context.AddMetadata("authorization", "Bearer " + options_.token);
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>>
      stream;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    context_ = &context;
  }
  stream = stub->Connect(&context);
  {
    absl::MutexLock lock(&mu_);
    // Ranks whose exit is not delivered yet still count as running, so the
    // coordinator hears the exit itself rather than a lost rank.
    v1::WorkerMessage hello;
    *hello.mutable_register_() = options_.identity;
    for (const v1::RankRef& ref : hooks_.running_ranks()) {
      *hello.mutable_register_()->add_running() = ref;
    }
    for (const v1::WorkerMessage& m : unsent_) {
      if (m.has_rank_exited()) {
        *hello.mutable_register_()->add_running() = m.rank_exited().rank();
      }
    }
    for (int port : PickFreePorts(kFreePortsReported)) {
      hello.mutable_register_()->add_free_ports(port);
    }
    if (stream->Write(hello)) {
      stream_ = stream.get();
      while (!unsent_.empty() && stream_->Write(unsent_.front())) unsent_.pop_front();
    }
    heartbeat_stop_ = false;
  }
  std::thread heartbeat([this] { HeartbeatLoop(); });
  v1::CoordinatorMessage command;
  bool registered = false;
  while (stream->Read(&command)) {
    if (command.has_registered()) {
      if (!registered) {
        spdlog::info("registered with coordinator {}", options_.coordinator_address);
      }
      registered = true;
      absl::MutexLock lock(&mu_);
      heartbeat_interval_ =
          absl::Milliseconds(std::max<int64_t>(50, command.registered().heartbeat_interval_ms()));
      continue;
    }
    hooks_.on_command(command);
  }
  {
    absl::MutexLock lock(&mu_);
    stream_ = nullptr;
    context_ = nullptr;
    heartbeat_stop_ = true;
  }
  heartbeat.join();
  grpc::Status status = stream->Finish();
  spdlog::warn("coordinator stream ended: {}",
               status.ok() ? "closed" : status.error_message());
}

void CoordinatorLink::HeartbeatLoop() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    if (mu_.AwaitWithTimeout(absl::Condition(&heartbeat_stop_), heartbeat_interval_)) {
      return;
    }
    v1::WorkerMessage beat;
    for (int port : PickFreePorts(kFreePortsReported)) {
      beat.mutable_heartbeat()->add_free_ports(port);
    }
    if (hooks_.progress) {
      for (auto& p : hooks_.progress()) *beat.mutable_heartbeat()->add_progress() = p;
    }
    if (hooks_.usage) hooks_.usage(beat.mutable_heartbeat());
    WriteLocked(beat);
  }
}

}  // namespace ringmaster
