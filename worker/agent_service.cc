#include "worker/agent_service.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/job_id.h"
#include "worker/rank_log.h"

namespace ringmaster {

constexpr int kMaxReadBytes = 1 << 20;
// Room for the longest record, so that every read can make progress.
constexpr int kMinReadBytes = kMaxRecordText + kRecordPrefixBytes + 1;

absl::StatusOr<v1::ReadLogResponse> ReadLogFile(const std::string& path, const std::string& what,
                                                const v1::ReadLogRequest& request) {
  // A log is the worker's own file; never read through a link, or wait on a FIFO.
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no log of ", what));
    return absl::InternalError(
        absl::StrCat("cannot open the log of ", what, ": ", strerror(errno)));
  }
  absl::Cleanup close_fd = [fd] { close(fd); };
  auto failed = [&what](const char* step) {
    return absl::InternalError(
        absl::StrCat("cannot ", step, " the log of ", what, ": ", strerror(errno)));
  };
  struct stat st;
  if (fstat(fd, &st) != 0) return failed("stat");
  if (!S_ISREG(st.st_mode)) {
    return absl::InternalError(absl::StrCat("the log of ", what, " is not a regular file"));
  }
  int64_t offset = std::max<int64_t>(request.offset(), 0);
  bool mid_line = request.mid_line();
  if (request.tail_lines() > 0 && offset == 0) {
    absl::StatusOr<int64_t> tail = TailOffset(fd, st.st_size, request.tail_lines());
    if (!tail.ok()) {
      return absl::InternalError(
          absl::StrCat("cannot read the log of ", what, ": ", tail.status().message()));
    }
    offset = *tail;
    mid_line = false;
  }
  std::string records(std::clamp(request.max_bytes(), kMinReadBytes, kMaxReadBytes), '\0');
  const ssize_t n = pread(fd, records.data(), records.size(), offset);
  if (n < 0) return failed("read");
  records.resize(n);
  v1::ReadLogResponse response;
  const size_t used =
      RenderRecords(records, request.timestamps(), &mid_line, response.mutable_data());
  response.set_next_offset(offset + static_cast<int64_t>(used));
  response.set_mid_line(mid_line);
  return response;
}

grpc::ServerUnaryReactor* AgentServiceImpl::ReadLog(grpc::CallbackServerContext* context,
                                                    const v1::ReadLogRequest* request,
                                                    v1::ReadLogResponse* response) {
  if (absl::Status s = access_->RequireCoordinator(*context); !s.ok()) {
    return FinishUnary(context, s);
  }
  // The path is built from the request only once its parts are checked.
  if (absl::Status valid = ValidateRankRef(request->job_id(), request->rank()); !valid.ok()) {
    return FinishUnary(context, valid);
  }
  absl::StatusOr<v1::ReadLogResponse> read =
      ReadLogFile(supervisor_->LogPath(request->job_id(), request->attempt(), request->rank()),
                  absl::StrCat("job ", request->job_id(), " attempt ", request->attempt(), " rank ",
                               request->rank()),
                  *request);
  if (read.ok()) *response = *std::move(read);
  return FinishUnary(context, read.status());
}

}  // namespace ringmaster

namespace ringmaster {

grpc::ServerUnaryReactor* AgentServiceImpl::ReportProgress(grpc::CallbackServerContext* context,
                                                           const v1::RankProgress* request,
                                                           v1::ReportProgressResponse*) {
  if (absl::Status s = access_->RequireRank(*context, request->rank()); !s.ok()) {
    return FinishUnary(context, s);
  }
  if (absl::Status valid = ValidateRankRef(request->rank().job_id(), request->rank().rank());
      !valid.ok()) {
    return FinishUnary(context, valid);
  }
  progress_->Report(*request);
  if (on_progress_) on_progress_(*request);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* AgentServiceImpl::PushReplica(grpc::CallbackServerContext* context,
                                                        const v1::PushReplicaRequest* request,
                                                        v1::PushReplicaResponse*) {
  const v1::SnapshotHeader& header = request->header();
  absl::StatusOr<int> attempt = access_->RequirePeer(*context, header.job_id());
  if (!attempt.ok()) return FinishUnary(context, attempt.status());
  if (absl::Status valid = ValidateRankRef(header.job_id(), header.rank()); !valid.ok()) {
    return FinishUnary(context, valid);
  }
  if (header.attempt() != *attempt) {
    return FinishUnary(context,
                       absl::FailedPreconditionError(absl::StrCat(
                           "a replica from attempt ", header.attempt(), " of job ", header.job_id(),
                           ", which runs attempt ", *attempt, " here: refused")));
  }
  if (request->data().size() > kMaxReadBytes || request->offset() < 0) {
    return FinishUnary(context, absl::InvalidArgumentError(absl::StrCat(
                                    "a replica piece is at most ", kMaxReadBytes, " bytes")));
  }
  return FinishUnary(context, snapshots_->WriteReplica(header, request->offset(), request->data()));
}

grpc::ServerUnaryReactor* AgentServiceImpl::FetchSnapshot(grpc::CallbackServerContext* context,
                                                          const v1::FetchSnapshotRequest* request,
                                                          v1::FetchSnapshotResponse* response) {
  if (absl::StatusOr<int> attempt = access_->RequirePeer(*context, request->job_id());
      !attempt.ok()) {
    return FinishUnary(context, attempt.status());
  }
  if (absl::Status valid = ValidateRankRef(request->job_id(), request->rank()); !valid.ok()) {
    return FinishUnary(context, valid);
  }
  absl::StatusOr<v1::FetchSnapshotResponse> piece = snapshots_->ReadNewest(
      request->job_id(), request->rank(), request->step(), std::max<int64_t>(0, request->offset()),
      std::clamp(request->max_bytes(), 1, kMaxReadBytes));
  if (piece.ok()) *response = *std::move(piece);
  return FinishUnary(context, piece.status());
}

}  // namespace ringmaster
