// A rank that keeps its process when a peer fails. Its collective in
// flight fails (a peer's connection closes, or its process is seen gone),
// and instead of exiting the rank closes its own connections, waits for the
// coordinator to announce the attempt's next group (domain/group_generation.h),
// joins it with the failed rank's replacement, and trains on from its own
// newest snapshot in memory. Past the wait's deadline it exits as before,
// and the coordinator restarts every rank.
#ifndef RINGMASTER_TRAINER_REGROUP_H_
#define RINGMASTER_TRAINER_REGROUP_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/job.pb.h"
#include "trainer/collective.h"
#include "trainer/dataset.h"
#include "trainer/trainer.h"

namespace ringmaster {

// Whether training failed for a collective that lost a peer (its
// connection closed, its process ended, or it did not come within the
// timeout): what forming the group again may cure.
bool LostPeer(const absl::Status& error);

struct GroupHooks {
  int generation = 0;  // the group the rank is in at first
  // How long it waits for the next group once a peer is lost; zero: a lost
  // peer ends the rank, as any failure does.
  absl::Duration regroup_timeout = absl::ZeroDuration();
  // Connects the rank to group `generation` of its attempt, and sets in
  // `context` what depends on the group's communicator (the GPU runner,
  // which works on its stream).
  std::function<absl::StatusOr<std::unique_ptr<Collective>>(int generation,
                                                            TrainerContext* context)>
      connect;
  // Returns once group `generation` is announced; an error when it is not
  // within `timeout` or the rank may not wait (asked to stop, the attempt
  // over).
  std::function<absl::Status(int generation, absl::Duration timeout)> await;
  // Says, before the wait, that the rank lost a peer in group `generation`
  // and why; may be empty.
  std::function<void(int generation, const absl::Status& why)> lost;
  std::function<void(const std::string&)> warn;  // may be empty
};

// Trains in `*comm`'s group (connected with hooks.connect when null), and
// in each next one after a lost peer, until training ends, fails otherwise,
// or a group does not form in time. `*comm` is the last group's on return.
absl::StatusOr<TrainResult> TrainInGroups(const v1::TrainerSpec& spec, const TrainTestSplit& data,
                                          TrainerContext context, const GroupHooks& hooks,
                                          std::unique_ptr<Collective>* comm);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_REGROUP_H_
