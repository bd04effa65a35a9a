// What leading means among coordinators that share one store, whatever the
// store: a lease that one of them holds at a time, whose term grows at each
// takeover. The leader's writes are fenced by its term in the store, so a
// deposed leader commits nothing once the next one has written. A store
// engine that several coordinators can share gives a Lease
// (store/store_engine.h); Leadership steps it.
#ifndef RINGMASTER_COORDINATOR_HA_LEASE_H_
#define RINGMASTER_COORDINATOR_HA_LEASE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster {

struct LeaseOptions {
  std::string id;       // this coordinator's, unique among them
  std::string address;  // where clients reach it
  absl::Duration timeout = absl::Seconds(5);
};

struct LeaseState {
  bool leader = false;  // this coordinator leads
  int64_t term = 0;     // the lease's, as last seen
  std::string leader_id;
  std::string leader_address;  // empty: no leader
};

// Thread-compatible: Leadership steps it from one thread.
class Lease {
 public:
  virtual ~Lease() = default;
  // One round of the election: renews when leading, else watches the
  // lease and takes it over once it has gone unrenewed for the timeout by
  // this coordinator's own clock. Reconnects to the store first when the
  // connection was lost. An error when the store could not be asked.
  virtual absl::StatusOr<LeaseState> Step() = 0;
  virtual const LeaseState& state() const = 0;
  // Gives up leading at once (a clean shutdown).
  virtual absl::Status Release() = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_HA_LEASE_H_
