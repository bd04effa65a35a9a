// gRPC edge of RendezvousService over the RendezvousStore. Wait does not
// hold a thread: the reactor finishes from the store's callback.
#ifndef RINGMASTER_COORDINATOR_API_RENDEZVOUS_SERVICE_H_
#define RINGMASTER_COORDINATOR_API_RENDEZVOUS_SERVICE_H_

#include <functional>
#include <string>

#include "common/clock.h"
#include "coordinator/api/access_policy.h"
#include "coordinator/rendezvous/rendezvous_store.h"
#include "proto/rendezvous.grpc.pb.h"

namespace ringmaster {

class RendezvousServiceImpl final : public v1::RendezvousService::CallbackService {
 public:
  // A rank said it lost a peer (domain/group_generation.h's LostPeerKey).
  using LostPeer =
      std::function<void(const ScopeId& scope, int generation, int rank, const std::string& why)>;
  RendezvousServiceImpl(RendezvousStore* store, const Clock* clock, const AccessPolicy* access,
                        LostPeer on_lost_peer = nullptr)
      : store_(store), clock_(clock), access_(access), on_lost_peer_(std::move(on_lost_peer)) {}

  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* context, const v1::SetRequest* request,
                                v1::SetResponse* response) override;
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context, const v1::GetRequest* request,
                                v1::GetResponse* response) override;
  grpc::ServerUnaryReactor* Wait(grpc::CallbackServerContext* context,
                                 const v1::WaitRequest* request,
                                 v1::WaitResponse* response) override;
  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context, const v1::AddRequest* request,
                                v1::AddResponse* response) override;

 private:
  RendezvousStore* const store_;
  const Clock* const clock_;
  const AccessPolicy* const access_;
  const LostPeer on_lost_peer_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_RENDEZVOUS_SERVICE_H_
