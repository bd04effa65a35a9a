// The seam by which whoever leads keeps its writes its own: a check run
// first inside each of the store's write transactions on PostgreSQL. An
// error rolls the transaction back and is what its writers get. The store
// knows nothing of leases; the leadership package makes the fence
// (LeaderLease::FenceOf) and the store runs it.
#ifndef RINGMASTER_COORDINATOR_STORE_PG_FENCE_H_
#define RINGMASTER_COORDINATOR_STORE_PG_FENCE_H_

#include <functional>

#include "absl/status/status.h"
#include "coordinator/store/pg_db.h"

namespace ringmaster {

// Empty: writes are not fenced.
using PgFence = std::function<absl::Status(PgDb* db)>;

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_PG_FENCE_H_
