#include "coordinator/log_relay.h"

#include <deque>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/credentials.h"
#include "common/grpc_status.h"
#include "coordinator/job_state.h"

namespace ringmaster {
namespace {

constexpr int kReadBytes = 256 * 1024;
constexpr size_t kMaxQueued = 16;
constexpr absl::Duration kPollInterval = absl::Milliseconds(200);

class LogStream final : public grpc::ServerWriteReactor<v1::LogChunk> {
 public:
  LogStream(LogRelay* relay, v1::StreamLogsRequest request)
      : relay_(relay), request_(std::move(request)) {
    thread_ = std::thread([this] { Run(); });
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) stopped_ = true;
    MaybeWriteOrFinish();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    MaybeWriteOrFinish();
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&mu_);
      stopped_ = true;
    }
    thread_.join();
    delete this;
  }

 private:
  struct Source {
    int64_t offset = 0;
    std::string partial;  // bytes after the last newline
  };

  void Run() {
    absl::Status status = Relay();
    absl::MutexLock lock(&mu_);
    producer_done_ = true;
    final_status_ = ToGrpcStatus(status);
    MaybeWriteOrFinish();
  }

  absl::Status Relay() {
    std::map<std::pair<int, std::string>, Source> sources;
    for (;;) {
      absl::StatusOr<v1::Job> job = relay_->manager()->Get(request_.job_id());
      if (!job.ok()) return job.status();
      const bool ended = IsTerminal(job->state());
      auto ranks = relay_->manager()->LogSources(request_.job_id());
      if (!ranks.ok()) return ranks.status();
      bool got_data = false;
      for (const RankLogSource& rank : *ranks) {
        if (!request_.all_ranks() && rank.rank != request_.rank()) continue;
        Source& source = sources[{rank.rank, rank.worker_address}];
        if (ReadMore(rank, &source)) got_data = true;
      }
      if (Stopped()) return absl::CancelledError("client went away");
      if (got_data) continue;
      if (ended || !request_.follow()) break;
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopped_), kPollInterval);
    }
    for (auto& [key, source] : sources) {
      if (!source.partial.empty()) Emit(key.first, source.partial + "\n");
    }
    return absl::OkStatus();
  }

  // Reads what is new in one rank's log; emits whole lines. False when
  // there was nothing new (or the worker could not be reached).
  bool ReadMore(const RankLogSource& rank, Source* source) {
    v1::ReadLogRequest read;
    read.set_job_id(request_.job_id());
    read.set_rank(rank.rank);
    read.set_offset(source->offset);
    read.set_max_bytes(kReadBytes);
    v1::ReadLogResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    AddBearerToken(&context, relay_->signer().Agent(rank.worker_id));
    grpc::Status status =
        relay_->AgentFor(rank.worker_address, rank.worker_id)->ReadLog(&context, read, &response);
    if (!status.ok() || response.data().empty()) return false;
    source->offset = response.next_offset();
    source->partial += response.data();
    const size_t end = source->partial.rfind('\n');
    if (end != std::string::npos) {
      Emit(rank.rank, source->partial.substr(0, end + 1));
      source->partial.erase(0, end + 1);
    }
    // A line without an end (a progress bar redrawn with \r) is split, so
    // what is held stays under the limit plus one read.
    const size_t max_line = static_cast<size_t>(relay_->max_line_bytes());
    while (source->partial.size() >= max_line) {
      Emit(rank.rank, source->partial.substr(0, max_line) + "\n");
      source->partial.erase(0, max_line);
    }
    return true;
  }

  bool Stopped() {
    absl::MutexLock lock(&mu_);
    return stopped_;
  }

  // Queues a chunk, waiting while the client is behind.
  void Emit(int rank, std::string data) {
    absl::MutexLock lock(&mu_);
    auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopped_ || queue_.size() < kMaxQueued;
    };
    mu_.Await(absl::Condition(&room));
    if (stopped_) return;
    v1::LogChunk chunk;
    chunk.set_rank(rank);
    chunk.set_data(std::move(data));
    queue_.push_back(std::move(chunk));
    MaybeWriteOrFinish();
  }

  void MaybeWriteOrFinish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (!queue_.empty() && !stopped_) {
      out_ = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      StartWrite(&out_);
      return;
    }
    if (producer_done_ || stopped_) {
      finished_ = true;
      Finish(stopped_ && !producer_done_ ? grpc::Status::CANCELLED : final_status_);
    }
  }

  LogRelay* const relay_;
  const v1::StreamLogsRequest request_;
  std::thread thread_;
  absl::Mutex mu_;
  std::deque<v1::LogChunk> queue_ ABSL_GUARDED_BY(mu_);
  v1::LogChunk out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool producer_done_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerWriteReactor<v1::LogChunk>* LogRelay::Stream(
    const v1::StreamLogsRequest& request) {
  return new LogStream(this, request);
}

v1::WorkerAgentService::Stub* LogRelay::AgentFor(const std::string& address,
                                                 const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto& stub = agents_[{address, worker_id}];
  if (stub == nullptr) {
    stub = v1::WorkerAgentService::NewStub(MakeChannel(address, tls_, worker_id));
  }
  return stub.get();
}

}  // namespace ringmaster
