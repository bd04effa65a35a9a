// The one mapping between absl::Status and grpc::Status, used at every RPC
// edge. Canonical codes map 1:1; messages pass through unchanged.
#ifndef RINGMASTER_COMMON_GRPC_STATUS_H_
#define RINGMASTER_COMMON_GRPC_STATUS_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "common/grpc_handoff.h"

namespace ringmaster {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// Finishes a unary callback-API call with `status`; what a handler returns.
inline grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                             const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Stream reactors that end at once with `status`: what a streaming handler
// returns for a call it refuses.
template <typename Response>
class RefusedWriteReactor final : public grpc::ServerWriteReactor<Response> {
 public:
  explicit RefusedWriteReactor(const grpc::Status& status) {
    HandToGrpc(this);
    this->Finish(status);
  }
  void OnDone() override {
    BackFromGrpc(this);
    delete this;
  }
};

template <typename Request>
class RefusedReadReactor final : public grpc::ServerReadReactor<Request> {
 public:
  explicit RefusedReadReactor(const grpc::Status& status) {
    HandToGrpc(this);
    this->Finish(status);
  }
  void OnDone() override {
    BackFromGrpc(this);
    delete this;
  }
};

template <typename Request, typename Response>
class RefusedBidiReactor final : public grpc::ServerBidiReactor<Request, Response> {
 public:
  explicit RefusedBidiReactor(const grpc::Status& status) {
    HandToGrpc(this);
    this->Finish(status);
  }
  void OnDone() override {
    BackFromGrpc(this);
    delete this;
  }
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_GRPC_STATUS_H_
