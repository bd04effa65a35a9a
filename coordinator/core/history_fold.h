// A job's history, kept short when it goes round in circles. A job
// preempted again and again, or restarted after the same failure, adds the
// same few changes each round (RESTARTING, PENDING, STARTING, RUNNING): a
// loop of an hour would leave thousands of entries. From the third round
// of the same changes on, the middle rounds fold into one HISTORY_FOLDED
// entry that counts them, as Kubernetes counts a repeated event: the first
// round and the latest one stay whole.
#ifndef RINGMASTER_COORDINATOR_CORE_HISTORY_FOLD_H_
#define RINGMASTER_COORDINATOR_CORE_HISTORY_FOLD_H_

#include <google/protobuf/repeated_ptr_field.h>

#include "proto/job.pb.h"

namespace ringmaster {

// The longest round of changes that folds.
inline constexpr int kMaxFoldPeriod = 8;

using History = google::protobuf::RepeatedPtrField<v1::StateChange>;

// Appends `change` to `history`. Where that completes a third round of the
// same changes (the same states and reasons, in order, up to
// kMaxFoldPeriod of them), the round before it becomes a HISTORY_FOLDED
// entry; where a folded entry is already there, the round before the new
// one is counted into it instead. Returns how many entries at the front of
// `history` are as they were: the rest is new.
int AppendToHistory(const v1::StateChange& change, History* history);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_HISTORY_FOLD_H_
