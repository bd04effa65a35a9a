#include "worker/code_fetch.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/credentials.h"
#include "common/grpc_status.h"
#include "common/limits.h"
#include "proto/worker.grpc.pb.h"

namespace ringmaster {

JobCode::Fetch CoordinatorCodeFetch(std::shared_ptr<CoordinatorTargets> coordinators,
                                    std::string token, absl::Duration call_timeout) {
  return [coordinators, token, call_timeout](const std::string& sha256,
                                             const std::string& path) -> absl::Status {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) return absl::InternalError("cannot create a file for the archive");
    v1::ReadCodeRequest request;
    request.set_sha256(sha256);
    request.set_max_bytes(kMaxCodeChunkBytes);
    for (;;) {
      v1::ReadCodeResponse response;
      grpc::Status status =
          coordinators->Call(absl::Now() + call_timeout, /*idempotent=*/true,
                             [&](const CoordinatorTargets::Target& target) {
                               grpc::ClientContext context;
                               context.set_deadline(absl::ToChronoTime(absl::Now() + call_timeout));
                               AddBearerToken(&context, token);
                               return v1::WorkerService::NewStub(target.channel)
                                   ->ReadCode(&context, request, &response);
                             });
      if (!status.ok()) {
        return absl::Status(
            FromGrpcStatus(status).code(),
            absl::StrCat("fetching it from the coordinator: ", status.error_message()));
      }
      if (response.data().empty()) break;
      out.write(response.data().data(), static_cast<std::streamsize>(response.data().size()));
      request.set_offset(request.offset() + static_cast<int64_t>(response.data().size()));
      if (request.offset() > response.archive_bytes()) {
        return absl::DataLossError("the coordinator sent more than the archive holds");
      }
    }
    out.close();
    if (!out) return absl::InternalError("cannot write the archive");
    return absl::OkStatus();
  };
}

}  // namespace ringmaster
