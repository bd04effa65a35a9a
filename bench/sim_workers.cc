#include "bench/sim_workers.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringmaster {

void SimWorker::Start(v1::WorkerService::Stub* stub) {
  stub->async()->Connect(&context_, this);
  v1::WorkerMessage hello;
  v1::RegisterWorker* reg = hello.mutable_register_();
  reg->set_worker_id(id_);
  reg->set_address("127.0.0.1:9");  // never called: no log is read
  reg->set_hostname(id_);
  reg->set_slots(slots_);
  reg->set_incarnation(absl::StrCat(id_, "-", absl::ToUnixNanos(absl::Now())));
  for (int p = 0; p < 16; ++p) reg->add_free_ports(30000 + p);
  {
    MutexLock lock(&mu_);
    Queue(std::move(hello));
  }
  StartRead(&incoming_);
  StartCall();
}

void SimWorker::Queue(v1::WorkerMessage message) {
  if (closed_) return;
  outgoing_.push_back(std::move(message));
  if (outgoing_.size() == 1) StartWrite(&outgoing_.front());
}

void SimWorker::QueueEvent(v1::WorkerMessage message) {
  message.set_seq(++seq_);
  Queue(std::move(message));
}

void SimWorker::OnWriteDone(bool ok) {
  MutexLock lock(&mu_);
  outgoing_.pop_front();
  if (!ok) {
    closed_ = true;
    outgoing_.clear();
    return;
  }
  if (!outgoing_.empty()) StartWrite(&outgoing_.front());
}

void SimWorker::OnReadDone(bool ok) {
  if (!ok) return;  // OnDone follows
  {
    MutexLock lock(&mu_);
    Handle(incoming_);
  }
  StartRead(&incoming_);
}

void SimWorker::Handle(const v1::CoordinatorMessage& message) {
  const absl::Time now = absl::Now();
  if (message.has_registered() && !registered_) {
    registered_ = true;
    counters_->registered.fetch_add(1);
  }
  if (message.has_start_rank()) {
    ranks_.push_back({message.start_rank().rank(), message.start_rank().slot(), now});
    v1::WorkerMessage started;
    *started.mutable_rank_started()->mutable_rank() = message.start_rank().rank();
    started.mutable_rank_started()->set_pid(100000 + seq_);
    QueueEvent(std::move(started));
    counters_->ranks_started.fetch_add(1);
  }
  if (message.has_stop_job()) {
    const v1::StopJob& stop = message.stop_job();
    for (auto it = ranks_.begin(); it != ranks_.end();) {
      if (it->ref.job_id() != stop.job_id() || it->ref.attempt() != stop.attempt()) {
        ++it;
        continue;
      }
      v1::WorkerMessage exited;
      *exited.mutable_rank_exited()->mutable_rank() = it->ref;
      exited.mutable_rank_exited()->set_signal(15);
      exited.mutable_rank_exited()->set_stopped(true);
      QueueEvent(std::move(exited));
      it = ranks_.erase(it);
    }
  }
}

void SimWorker::Beat(absl::Time now) {
  MutexLock lock(&mu_);
  if (!registered_ || closed_) return;
  for (auto it = ranks_.begin(); it != ranks_.end();) {
    if (now - it->started < rank_runtime_) {
      ++it;
      continue;
    }
    v1::WorkerMessage exited;
    *exited.mutable_rank_exited()->mutable_rank() = it->ref;
    QueueEvent(std::move(exited));
    counters_->ranks_exited.fetch_add(1);
    it = ranks_.erase(it);
  }
  v1::WorkerMessage beat;
  v1::Heartbeat* heartbeat = beat.mutable_heartbeat();
  for (int p = 0; p < 16; ++p) heartbeat->add_free_ports(30000 + p);
  heartbeat->set_cpu_utilization_ratio(0.5);
  output_bytes_ += 100;
  for (const Rank& rank : ranks_) {
    v1::RunningRank* running = heartbeat->add_running();
    *running->mutable_rank() = rank.ref;
    running->set_slot(rank.slot);
    running->set_output_bytes(output_bytes_);
    v1::RankProgress* progress = heartbeat->add_progress();
    *progress->mutable_rank() = rank.ref;
    progress->mutable_progress()->set_step(absl::ToInt64Seconds(now - rank.started));
  }
  Queue(std::move(beat));
  counters_->heartbeats.fetch_add(1);
}

void SimWorker::OnDone(const grpc::Status& status) {
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    counters_->streams_failed.fetch_add(1);
  }
  done_.Notify();
}

SimFleet::SimFleet(FleetOptions options) : options_(std::move(options)) {
  for (int c = 0; c < options_.channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("ringmaster.bench.connection", c);  // a connection of its own
    channels_.push_back(
        grpc::CreateCustomChannel(options_.target, grpc::InsecureChannelCredentials(), args));
    stubs_.push_back(v1::WorkerService::NewStub(channels_.back()));
  }
  for (int w = 0; w < options_.workers; ++w) {
    auto* worker =
        new SimWorker(absl::StrCat("sim-", w), options_.slots, options_.rank_runtime, &counters_);
    workers_.push_back(worker);
    worker->Start(stubs_[w % stubs_.size()].get());
  }
  beater_ = std::thread([this] { HeartbeatLoop(); });
}

SimFleet::~SimFleet() {
  stop_ = true;
  beater_.join();
  for (SimWorker* worker : workers_) worker->Cancel();
  for (SimWorker* worker : workers_) {
    worker->WaitDone();
    delete worker;
  }
}

bool SimFleet::WaitRegistered(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (counters_.registered.load() < options_.workers) {
    if (absl::Now() > deadline || counters_.streams_failed.load() > 0) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return true;
}

void SimFleet::HeartbeatLoop() {
  const absl::Duration spacing = options_.heartbeat_interval / options_.workers;
  absl::Time next = absl::Now();
  while (!stop_) {
    for (SimWorker* worker : workers_) {
      next += spacing;
      const absl::Duration wait = next - absl::Now();
      if (wait > absl::ZeroDuration()) absl::SleepFor(wait);
      if (stop_) return;
      worker->Beat(absl::Now());
    }
  }
}

}  // namespace ringmaster
