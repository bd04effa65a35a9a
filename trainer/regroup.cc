#include "trainer/regroup.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster {

bool LostPeer(const absl::Status& error) {
  // UNAVAILABLE: Gloo's errors (a connection closed); ABORTED: the shared
  // memory all-reduce saw a peer's process end; DEADLINE_EXCEEDED: a peer
  // that never came.
  return absl::IsUnavailable(error) || absl::IsAborted(error) || absl::IsDeadlineExceeded(error);
}

absl::StatusOr<TrainResult> TrainInGroups(const v1::TrainerSpec& spec, const TrainTestSplit& data,
                                          TrainerContext context, const GroupHooks& hooks,
                                          std::unique_ptr<Collective>* comm) {
  GroupPlace place = hooks.place;
  for (int generation = hooks.generation;; ++generation) {
    if (*comm == nullptr) {
      ASSIGN_OR_RETURN(*comm, hooks.connect(generation, place, &context));
    }
    context.comm = comm->get();
    context.group_generation = generation;
    if (hooks.log) context.log = place.rank == 0 ? hooks.log : nullptr;
    absl::StatusOr<TrainResult> result = Train(spec, data, context);
    const bool stopping = context.stop_requested && context.stop_requested();
    if (result.ok() || stopping || hooks.regroup_timeout <= absl::ZeroDuration() ||
        !LostPeer(result.status())) {
      return result;
    }
    const int64_t step = context.steps_done ? context.steps_done->load() : -1;
    if (hooks.warn) {
      hooks.warn(absl::StrCat("lost a peer after step ", step, " (", result.status().message(),
                              "): keeping this process, waiting up to ",
                              absl::FormatDuration(hooks.regroup_timeout),
                              " for the group to form again"));
    }
    // Its connections close: a peer still waiting on this rank fails now.
    comm->reset();
    if (hooks.lost) hooks.lost(generation, result.status());
    absl::StatusOr<GroupPlace> next = hooks.await(generation + 1, hooks.regroup_timeout);
    if (!next.ok()) {
      return absl::Status(result.status().code(),
                          absl::StrCat(result.status().message(), "; the group did not form again",
                                       absl::IsFailedPrecondition(next.status()) ? " with it" : "",
                                       ": ", next.status().message()));
    }
    if (hooks.warn) {
      hooks.warn(absl::StrCat("joining group ", generation + 1, " of the attempt",
                              next->size == place.size
                                  ? std::string()
                                  : absl::StrCat(" as rank ", next->rank, " of ", next->size)));
    }
    place = *next;
    // What its worker fetched was for the first group.
    context.snapshot_fetched_step = -1;
  }
}

}  // namespace ringmaster
