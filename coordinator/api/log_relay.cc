#include "coordinator/api/log_relay.h"

#include <algorithm>
#include <deque>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/credentials.h"
#include "common/grpc_handoff.h"
#include "common/grpc_status.h"
#include "common/job_id.h"
#include "common/status_macros.h"
#include "common/stream_writer.h"
#include "coordinator/api/access_policy.h"
#include "coordinator/core/attempt_placement.h"
#include "domain/job_state.h"

namespace ringmaster {
namespace {

constexpr int kReadBytes = 256 * 1024;
constexpr size_t kMaxQueued = 16;
constexpr absl::Duration kPollInterval = absl::Milliseconds(200);
constexpr absl::Duration kRoomInterval = absl::Milliseconds(20);

// Relays one StreamLogs call in rounds on the relay's shared pool: a round
// reads what is new in each rank's log (while the client has room for it)
// and queues whole lines; the next round follows at once when there was
// data, after kPollInterval when there was none, and after kRoomInterval
// when the client is behind. No thread waits for a stream between rounds.
class LogStream final
    : public WritingReactor<grpc::ServerWriteReactor<v1::LogChunk>, v1::LogChunk> {
 public:
  LogStream(LogRelay* relay, v1::StreamLogsRequest request)
      : WritingReactor(kMaxQueued, Overflow::kRefuse), relay_(relay), request_(std::move(request)) {
    for (const v1::LogPosition& position : request_.resume()) {
      attempt_ = position.attempt();
      tail_ = false;
      Source& source = sources_[position.rank()];
      source.offset = position.offset();
      source.mid_line = position.mid_line();
      source.read_once = true;
    }
    HandToGrpc(this);
    relay_->pool()->Post([this] { Round(); });
  }

  void Ended() override {
    bool in_pool = false;
    {
      MutexLock lock(&mu_);
      done_ = true;
      in_pool = in_pool_;
    }
    if (!in_pool) delete this;  // else the pool's next round deletes it
  }

 private:
  enum class Next { kAgain, kPoll, kWaitForRoom, kEnd };

  struct Source {
    int64_t offset = 0;
    bool read_once = false;  // the tail, if asked, is behind
    bool mid_line = false;   // what the worker sent ends inside a line
    std::string partial;     // bytes after the last newline
  };

  // On a pool thread.
  void Round() {
    bool done = false;
    {
      MutexLock lock(&mu_);
      done = done_;
      if (done) in_pool_ = false;
    }
    if (done) {
      delete this;
      return;
    }
    Next next = Next::kEnd;
    if (!writer_.finishing()) {
      absl::StatusOr<Next> read = Read();
      if (!read.ok()) writer_.Finish(ToGrpcStatus(read.status()), /*drain=*/true);
      next = read.value_or(Next::kEnd);
    }
    if (next == Next::kEnd) {
      {
        MutexLock lock(&mu_);
        in_pool_ = false;
        done = done_;
      }
      if (done) delete this;
      return;
    }
    const absl::Duration delay = next == Next::kAgain  ? absl::ZeroDuration()
                                 : next == Next::kPoll ? kPollInterval
                                                       : kRoomInterval;
    relay_->pool()->PostAfter(delay, [this] { Round(); });
  }

  // Queues what is new; kEnd once everything of an ended (or, without
  // follow, any) job is relayed and the stream is finishing. Without an
  // attempt asked for, it relays the latest attempt that placed its ranks
  // and, following, each later one in turn.
  absl::StatusOr<Next> Read() {
    while (!unsent_.empty()) {
      if (!writer_.Write(unsent_.front())) return Next::kWaitForRoom;
      unsent_.pop_front();
    }
    ASSIGN_OR_RETURN(v1::Job job, relay_->jobs()->Get(request_.job_id()));
    const std::vector<int> placed = PlacedAttempts(job);
    if (attempt_ < 0) {
      attempt_ = request_.has_attempt() ? request_.attempt() : placed.empty() ? -1 : placed.back();
    }
    bool got_data = false;
    absl::StatusOr<std::vector<RankLogSource>> ranks = relay_->jobs()->LogSources(job, attempt_);
    for (const RankLogSource& rank : ranks.value_or(std::vector<RankLogSource>())) {
      if (!request_.all_ranks() && rank.rank != request_.rank()) continue;
      if (!writer_.HasRoom()) return Next::kWaitForRoom;
      if (ReadMore(rank, &sources_[rank.rank])) got_data = true;
    }
    if (got_data) return Next::kAgain;
    const bool ended = IsTerminal(job.state());
    if (request_.follow() && !ended && job.attempt() == attempt_) return Next::kPoll;
    if (request_.follow() && !request_.has_attempt()) {
      // The job went on to a later attempt: its output follows this one's.
      auto later = std::upper_bound(placed.begin(), placed.end(), attempt_);
      if (later != placed.end()) {
        EmitPartials();
        sources_.clear();
        attempt_ = *later;
        tail_ = false;
        return Next::kAgain;
      }
      if (!ended) return Next::kPoll;
    }
    EmitPartials();
    for (const v1::LogChunk& chunk : unsent_) writer_.Write(chunk);  // room or not: the end
    writer_.Finish(grpc::Status::OK, /*drain=*/true);
    return Next::kEnd;
  }

  void EmitPartials() {
    for (auto& [rank, source] : sources_) {
      if (!source.partial.empty()) Emit(rank, source.partial + "\n", &source);
      source.partial.clear();
    }
  }

  // Reads what is new in one rank's log; queues whole lines. False when
  // there was nothing new (or the worker could not be reached).
  bool ReadMore(const RankLogSource& rank, Source* source) {
    v1::ReadLogRequest read;
    read.set_job_id(request_.job_id());
    read.set_attempt(attempt_);
    read.set_rank(rank.rank);
    read.set_offset(source->offset);
    read.set_max_bytes(kReadBytes);
    if (tail_ && !source->read_once) read.set_tail_lines(request_.tail_lines());
    read.set_timestamps(request_.timestamps());
    read.set_mid_line(source->mid_line);
    v1::ReadLogResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    AddBearerToken(&context, relay_->signer().Agent(rank.worker_id));
    grpc::Status status =
        relay_->AgentFor(rank.worker_address, rank.worker_id)->ReadLog(&context, read, &response);
    if (!status.ok()) return false;
    source->read_once = true;
    if (response.next_offset() == source->offset) return false;
    source->offset = response.next_offset();
    source->mid_line = response.mid_line();
    source->partial += response.data();
    const size_t end = source->partial.rfind('\n');
    if (end != std::string::npos) {
      std::string lines = source->partial.substr(0, end + 1);
      source->partial.erase(0, end + 1);
      Emit(rank.rank, std::move(lines), source->partial.empty() ? source : nullptr);
    }
    // A line without an end (a progress bar redrawn with \r) is split, so
    // what is held stays under the limit plus one read.
    const size_t max_line = static_cast<size_t>(relay_->max_line_bytes());
    while (source->partial.size() >= max_line) {
      Emit(rank.rank, source->partial.substr(0, max_line) + "\n", nullptr);
      source->partial.erase(0, max_line);
    }
    return true;
  }

  // Queues a chunk, or keeps it for the next round when the client is
  // behind (at most one read's worth: rounds read only when there is room).
  // `read` is the rank's source when everything read of it is in `data`
  // (where the log goes on after it is known), else null.
  void Emit(int rank, std::string data, const Source* read) {
    v1::LogChunk chunk;
    chunk.set_rank(rank);
    chunk.set_attempt(attempt_);
    chunk.set_data(std::move(data));
    if (read != nullptr) {
      v1::LogPosition* next = chunk.mutable_next();
      next->set_attempt(attempt_);
      next->set_rank(rank);
      next->set_offset(read->offset);
      next->set_mid_line(read->mid_line);
    }
    if (!unsent_.empty() || !writer_.Write(chunk)) unsent_.push_back(std::move(chunk));
  }

  LogRelay* const relay_;
  const v1::StreamLogsRequest request_;
  // Used by one round at a time.
  int attempt_ = -1;               // whose output is relayed; -1: not chosen yet
  bool tail_ = true;               // the request's tail applies (to the first attempt relayed)
  std::map<int, Source> sources_;  // by rank
  std::deque<v1::LogChunk> unsent_;
  Mutex mu_;
  bool in_pool_ ABSL_GUARDED_BY(mu_) = true;  // a round is queued or running
  bool done_ ABSL_GUARDED_BY(mu_) = false;    // OnDone has run
};

}  // namespace

grpc::ServerWriteReactor<v1::LogChunk>* LogRelay::Stream(const std::string& user,
                                                         const v1::StreamLogsRequest& request) {
  if (absl::Status s = Check(user, request); !s.ok()) {
    return new RefusedWriteReactor<v1::LogChunk>(ToGrpcStatus(s));
  }
  return new LogStream(this, request);
}

absl::Status LogRelay::Check(const std::string& user, const v1::StreamLogsRequest& request) {
  RETURN_IF_ERROR(ValidateRankRef(request.job_id(), request.all_ranks() ? 0 : request.rank()));
  if (request.tail_lines() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tail_lines must not be negative, got ", request.tail_lines()));
  }
  // A rank or attempt the job never had would stream nothing, and look
  // like silence.
  ASSIGN_OR_RETURN(const v1::Job job, jobs_->Get(request.job_id()));
  RETURN_IF_ERROR(AccessPolicy::RequireOwner(user, job, "read the logs of"));
  if (const int ranks = std::max(job.spec().ranks(), job.world_size());
      !request.all_ranks() && request.rank() >= ranks) {
    return absl::NotFoundError(absl::StrCat("job ", request.job_id(), " has no rank ",
                                            request.rank(), ": its ranks are 0..", ranks - 1));
  }
  if (request.has_attempt() && !(request.attempt() == job.attempt() && request.follow())) {
    RETURN_IF_ERROR(AttemptRanks(job, request.attempt()).status());
  }
  return CheckResume(job, request);
}

absl::Status LogRelay::CheckResume(const v1::Job& job, const v1::StreamLogsRequest& request) {
  if (request.resume().empty()) return absl::OkStatus();
  const int attempt = request.resume(0).attempt();
  if (request.has_attempt() && request.attempt() != attempt) {
    return absl::InvalidArgumentError(absl::StrCat("resume is at attempt ", attempt,
                                                   ", but the request asks for attempt ",
                                                   request.attempt()));
  }
  ASSIGN_OR_RETURN(const std::vector<RankLogSource> ranks, AttemptRanks(job, attempt));
  std::set<int> seen;
  for (const v1::LogPosition& position : request.resume()) {
    const bool known = std::any_of(ranks.begin(), ranks.end(), [&](const RankLogSource& r) {
      return r.rank == position.rank();
    });
    if (position.attempt() != attempt || !known || position.offset() < 0 ||
        !seen.insert(position.rank()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "resume: position ", position.ShortDebugString(),
          " is not one of this job's; pass back the `next` of the last chunk of each rank, "
          "all of one attempt"));
    }
  }
  return absl::OkStatus();
}

v1::WorkerAgentService::Stub* LogRelay::AgentFor(const std::string& address,
                                                 const std::string& worker_id) {
  MutexLock lock(&mu_);
  auto& stub = agents_[{address, worker_id}];
  if (stub == nullptr) {
    stub = v1::WorkerAgentService::NewStub(MakeChannel(address, tls_, worker_id));
  }
  return stub.get();
}

}  // namespace ringmaster
