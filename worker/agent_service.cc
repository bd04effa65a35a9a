#include "worker/agent_service.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/job_id.h"

namespace ringmaster {

constexpr int kMaxReadBytes = 1 << 20;

absl::StatusOr<v1::ReadLogResponse> ReadLogFile(const std::string& path,
                                                const std::string& what, int64_t offset,
                                                int max_bytes) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no log of ", what));
    return absl::InternalError(
        absl::StrCat("cannot open the log of ", what, ": ", strerror(errno)));
  }
  std::string data(std::clamp(max_bytes, 1, kMaxReadBytes), '\0');
  ssize_t n = pread(fd, data.data(), data.size(), std::max<int64_t>(offset, 0));
  int saved = errno;
  close(fd);
  if (n < 0) {
    return absl::InternalError(
        absl::StrCat("cannot read the log of ", what, ": ", strerror(saved)));
  }
  data.resize(n);
  v1::ReadLogResponse response;
  response.set_next_offset(std::max<int64_t>(offset, 0) + n);
  response.set_data(std::move(data));
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
      ReadLogFile(supervisor_->LogPath(request->job_id(), request->rank()),
                  absl::StrCat("job ", request->job_id(), " rank ", request->rank()),
                  request->offset(), request->max_bytes());
  if (read.ok()) *response = *std::move(read);
  return FinishUnary(context, read.status());
}

}  // namespace ringmaster

namespace ringmaster {

grpc::ServerUnaryReactor* AgentServiceImpl::ReportProgress(
    grpc::CallbackServerContext* context, const v1::RankProgress* request,
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

}  // namespace ringmaster
