// What a standby coordinator serves while another one leads: job reads
// (GetJob, ListJobs) from the shared store, and for every other call
// UNAVAILABLE naming the leader, so that clients, workers and ranks go
// there. Registered as the server's generic service, it answers every
// method of the API without a handler of its own for each.
#ifndef RINGMASTER_COORDINATOR_STANDBY_SERVICE_H_
#define RINGMASTER_COORDINATOR_STANDBY_SERVICE_H_

#include <functional>
#include <string>

#include <grpcpp/generic/async_generic_service.h>

#include "absl/status/status.h"
#include "common/coordinator_targets.h"
#include "coordinator/access_policy.h"
#include "coordinator/job_store.h"

namespace ringmaster {

// UNAVAILABLE "not the leader: the leader is at ADDRESS" (or that none
// leads now), which clients follow (common/coordinator_targets.h).
absl::Status NotLeaderError(const std::string& leader_address);

// Thread-safe.
class StandbyService final : public grpc::CallbackGenericService {
 public:
  // `leader` gives the leader's address as last seen (empty: none).
  StandbyService(JobStore* store, const AccessPolicy* access, std::function<std::string()> leader)
      : store_(store), access_(access), leader_(std::move(leader)) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

  // Whether the standby answers `method` ("/ringmaster.v1.JobService/GetJob").
  static bool Reads(const std::string& method);
  // The answer to a call of a method it Reads.
  absl::Status Answer(const grpc::GenericCallbackServerContext& context,
                      const grpc::ByteBuffer& request, grpc::ByteBuffer* response) const;
  absl::Status NotLeader() const { return NotLeaderError(leader_()); }

 private:
  JobStore* const store_;
  const AccessPolicy* const access_;
  const std::function<std::string()> leader_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STANDBY_SERVICE_H_
