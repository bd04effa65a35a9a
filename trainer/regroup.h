// A rank that keeps its process when a peer fails. Its collective in
// flight fails (a peer's connection closes, or its process is seen gone),
// and instead of exiting the rank closes its own connections, waits for the
// coordinator to announce the attempt's next group (domain/group_generation.h),
// joins it (with the failed rank's replacement, or without the failed rank
// when an elastic job shrinks), and trains on from its own newest snapshot
// in memory. Past the wait's deadline it exits as before,
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

// A rank's place in a group: its rank in the group's collectives, and how
// many ranks the group has. A group that shrank (an elastic job going on
// without a rank) numbers its members anew.
struct GroupPlace {
  int rank = 0;
  int size = 1;
};

struct GroupHooks {
  int generation = 0;  // the group the rank is in at first
  GroupPlace place;    // its place there
  // How long it waits for the next group once a peer is lost; zero: a lost
  // peer ends the rank, as any failure does.
  absl::Duration regroup_timeout = absl::ZeroDuration();
  // Connects the rank to group `generation` of its attempt at `place`, and
  // sets in `context` what depends on the group's communicator (the GPU
  // runner, which works on its stream).
  std::function<absl::StatusOr<std::unique_ptr<Collective>>(int generation, GroupPlace place,
                                                            TrainerContext* context)>
      connect;
  // Returns the rank's place in group `generation` once it is announced; an
  // error when it is not within `timeout`, the rank may not wait (asked to
  // stop, the attempt over), or the group goes on without it.
  std::function<absl::StatusOr<GroupPlace>(int generation, absl::Duration timeout)> await;
  // Where the first rank of each group logs (TrainerContext::log, set for
  // it and cleared for the others); empty: `context.log` as given.
  std::function<void(const std::string&)> log;
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
