// When and whether a failed attempt is restarted: exponential back-off with
// jitter, which of several failures explains an attempt's end, and
// fail-fast when a rank fails the same way twice with no progress between.
#ifndef RINGMASTER_COORDINATOR_CORE_RESTART_POLICY_H_
#define RINGMASTER_COORDINATOR_CORE_RESTART_POLICY_H_

#include <string>

#include "absl/time/time.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace ringmaster {

struct BackoffOptions {
  absl::Duration base = absl::Seconds(1);
  absl::Duration max = absl::Seconds(60);
};

// The wait before restart number `restarts` (0 for the first): base x 2^n,
// capped at max, then jittered uniformly into [d/2, d] by `unit` in [0, 1)
// so that jobs failing together do not restart in lockstep.
absl::Duration RestartBackoff(const BackoffOptions& options, int restarts, double unit);

// One rank's failure, or a lost worker, as a cause of an attempt's end.
struct FailureCause {
  v1::Reason reason = v1::REASON_UNSPECIFIED;
  std::string message;  // for people: "rank 1 exited with code 3"
  int rank = -1;
  int exit_code = 0;
  int signal = 0;
  std::string error;        // the rank's TORCHELASTIC_ERROR_FILE message
  bool progressed = false;  // the attempt made progress before it
  bool stopped = false;     // the rank was stopped on purpose (StopJob)
};

// What a rank's exit says: a start failure, an OOM kill, a signal, or its
// exit code (RANKS_SUCCEEDED for 0).
FailureCause CauseOfExit(const v1::RankExited& exited, int rank);

// Whether `candidate` explains the attempt's end better than `current`:
// a lost worker over an OOM kill over a hang over a signal over a start
// failure over a plain non-zero exit (which is often a peer's symptom);
// between two of a kind, one the rank explained in its error file.
bool MoreTelling(const FailureCause& candidate, const FailureCause& current);

// True for causes that are evidence enough to end the attempt at once; a
// plain non-zero exit waits briefly for a better cause from its peers.
bool Decisive(const FailureCause& cause);

// Why the job's spec forbids restarting after this attempt: its
// restart_policy is "never", or one of its ranks exited with a code in
// never_retry_exit_codes (a peer's symptom may be the attempt's cause, so
// every rank is looked at). Empty when a restart is allowed.
std::string RestartRefusal(const v1::Job& job);

// Fail-fast: `current` repeats `previous` (same rank, same reason, same
// exit code or signal) and the attempt in between made no progress. Lost
// workers never count: the rank did not fail.
bool RepeatsWithoutProgress(const FailureCause& previous, const FailureCause& current);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_RESTART_POLICY_H_
