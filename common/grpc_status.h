// The one mapping between absl::Status and grpc::Status, used at every RPC
// edge. Canonical codes map 1:1; messages pass through unchanged.
#ifndef RINGMASTER_COMMON_GRPC_STATUS_H_
#define RINGMASTER_COMMON_GRPC_STATUS_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace ringmaster {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

// Finishes a unary callback-API call with `status`; what a handler returns.
inline grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                            const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_GRPC_STATUS_H_
