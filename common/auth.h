// Bearer-token access control for the coordinator's services: with a
// token configured, every call must carry "authorization: Bearer <token>".
#ifndef RINGMASTER_COMMON_AUTH_H_
#define RINGMASTER_COMMON_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/status.h"

namespace ringmaster {

// Thread-safe (immutable).
class TokenCheck {
 public:
  // An empty token lets every call through.
  explicit TokenCheck(std::string token) : token_(std::move(token)) {}

  // OK, or UNAUTHENTICATED saying what to do.
  absl::Status Check(const grpc::CallbackServerContext* context) const;
  bool enabled() const { return !token_.empty(); }

 private:
  const std::string token_;
};

// The client side: makes `context` carry `token` as TokenCheck expects it
// (nothing when the token is empty).
void AddBearerToken(grpc::ClientContext* context, const std::string& token);

// A stream reactor that ends at once with `status`: what a streaming
// handler returns for a call it refuses.
template <typename Response>
class RefusedWriteReactor final : public grpc::ServerWriteReactor<Response> {
 public:
  explicit RefusedWriteReactor(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

template <typename Request, typename Response>
class RefusedBidiReactor final : public grpc::ServerBidiReactor<Request, Response> {
 public:
  explicit RefusedBidiReactor(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_AUTH_H_
