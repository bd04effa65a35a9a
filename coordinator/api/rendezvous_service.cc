#include "coordinator/api/rendezvous_service.h"

#include <algorithm>

#include "common/grpc_status.h"
#include "common/job_id.h"
#include "common/status_macros.h"
#include "domain/group_generation.h"

namespace ringmaster {
namespace {

constexpr absl::Duration kDefaultWait = absl::Minutes(5);
constexpr absl::Duration kMaxWait = absl::Hours(1);

ScopeId Scope(const v1::RendezvousScope& scope) { return {scope.job_id(), scope.attempt()}; }

// The scope's job id, then the caller's credential for that scope.
absl::Status Admit(const AccessPolicy& access, const grpc::CallbackServerContext* context,
                   const v1::RendezvousScope& scope) {
  RETURN_IF_ERROR(ValidateJobId(scope.job_id()));
  return access.RequireJob(*context, scope.job_id(), scope.attempt());
}

}  // namespace

grpc::ServerUnaryReactor* RendezvousServiceImpl::Set(grpc::CallbackServerContext* context,
                                                     const v1::SetRequest* request,
                                                     v1::SetResponse*) {
  if (absl::Status s = Admit(*access_, context, request->scope()); !s.ok()) {
    return FinishUnary(context, s);
  }
  const ScopeId scope = Scope(request->scope());
  absl::Status set = store_->Set(scope, request->key(), request->value());
  int generation = 0, rank = 0;
  if (set.ok() && on_lost_peer_ && ParseLostPeerKey(request->key(), &generation, &rank)) {
    on_lost_peer_(scope, generation, rank, request->value());
  }
  return FinishUnary(context, set);
}

grpc::ServerUnaryReactor* RendezvousServiceImpl::Get(grpc::CallbackServerContext* context,
                                                     const v1::GetRequest* request,
                                                     v1::GetResponse* response) {
  if (absl::Status s = Admit(*access_, context, request->scope()); !s.ok()) {
    return FinishUnary(context, s);
  }
  absl::StatusOr<std::string> value = store_->Get(Scope(request->scope()), request->key());
  if (value.ok()) response->set_value(*std::move(value));
  return FinishUnary(context, value.status());
}

grpc::ServerUnaryReactor* RendezvousServiceImpl::Wait(grpc::CallbackServerContext* context,
                                                      const v1::WaitRequest* request,
                                                      v1::WaitResponse*) {
  if (absl::Status s = Admit(*access_, context, request->scope()); !s.ok()) {
    return FinishUnary(context, s);
  }
  absl::Duration timeout =
      request->timeout_ms() > 0 ? absl::Milliseconds(request->timeout_ms()) : kDefaultWait;
  timeout = std::min(timeout, kMaxWait);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();  // finished by the store
  store_->Wait(Scope(request->scope()), {request->keys().begin(), request->keys().end()},
               clock_->Now() + timeout,
               [reactor](absl::Status status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

grpc::ServerUnaryReactor* RendezvousServiceImpl::Add(grpc::CallbackServerContext* context,
                                                     const v1::AddRequest* request,
                                                     v1::AddResponse* response) {
  if (absl::Status s = Admit(*access_, context, request->scope()); !s.ok()) {
    return FinishUnary(context, s);
  }
  absl::StatusOr<int64_t> sum =
      store_->Add(Scope(request->scope()), request->key(), request->delta());
  if (sum.ok()) response->set_value(*sum);
  return FinishUnary(context, sum.status());
}

}  // namespace ringmaster
