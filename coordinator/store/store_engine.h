// Where the coordinator keeps its state, for one --store engine: the jobs
// (JobStore), the rendezvous keys of attempts being started
// (RendezvousJournal), uploaded code (SharedCodeArchives), the election
// among coordinators that share the store (Lease), and the key that signs
// credentials. OpenStoreEngine (store_factory.h) picks the engine by the
// --store URI's scheme; nothing else in the coordinator names one.
#ifndef RINGMASTER_COORDINATOR_STORE_STORE_ENGINE_H_
#define RINGMASTER_COORDINATOR_STORE_STORE_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/code/code_store.h"
#include "coordinator/core/job_store.h"
#include "coordinator/ha/lease.h"
#include "coordinator/rendezvous/rendezvous_store.h"

namespace ringmaster {

// Each method opens something new (a connection, a file): the caller owns
// what it returns.
class StoreEngine {
 public:
  virtual ~StoreEngine() = default;

  // For people and logs: "sqlite:///var/lib/ringmaster/coordinator.db".
  virtual std::string label() const = 0;
  // Whether several coordinators share the store: each then joins the
  // election (OpenLease) and writes only while it leads, fenced by its
  // term; a standby reads (OpenJobReader).
  virtual bool shared() const = 0;

  // The jobs, written by the leader of `term` (0: a coordinator alone).
  virtual absl::StatusOr<std::unique_ptr<JobStore>> OpenJobStore(int64_t term) = 0;
  // A standby's view of the jobs: reads alone. UNIMPLEMENTED unless shared.
  virtual absl::StatusOr<std::unique_ptr<JobStore>> OpenJobReader() = 0;
  // Where the leader of `term` keeps the rendezvous keys, so that the next
  // leader has them; null when they stay in the coordinator's memory.
  virtual absl::StatusOr<std::unique_ptr<RendezvousJournal>> OpenRendezvousJournal(
      int64_t term) = 0;
  // Where uploaded code is kept for every coordinator; null when the state
  // directory's copy is the only one.
  virtual std::unique_ptr<SharedCodeArchives> OpenCodeArchives(int64_t term) = 0;
  // This coordinator's part in the election. UNIMPLEMENTED unless shared.
  virtual absl::StatusOr<std::unique_ptr<Lease>> OpenLease(LeaseOptions options) = 0;
  // The key that signs credentials when the store is shared: the one every
  // coordinator sharing it uses (the first to ask stores `local`, its state
  // directory's). UNIMPLEMENTED unless shared: the state directory's file
  // is the key.
  virtual absl::StatusOr<std::string> SharedCredentialKey(const std::string& local) = 0;
  // Makes `next` the shared key. UNIMPLEMENTED unless shared.
  virtual absl::Status RotateSharedCredentialKey(const std::string& next) = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_STORE_ENGINE_H_
