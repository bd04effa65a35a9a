#include "coordinator/core/goodput.h"

#include <algorithm>

namespace ringmaster {
namespace {

using Phase = v1::Goodput::Phase;

// Failures restart a job; a preemption, a drain or an elastic regrowth
// stops it on purpose, and its wait is pending time.
bool IsFailure(v1::Reason reason) {
  return reason != v1::PREEMPTED && reason != v1::WORKER_DRAINED && reason != v1::SCALING_UP;
}

bool Terminal(v1::JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

// Counts the stretch since phase_since into its bucket, up to `now`.
void Close(v1::Goodput* g, absl::Time now) {
  const double seconds =
      std::max(0.0, absl::ToDoubleSeconds(now - absl::FromUnixMillis(g->phase_since_unix_ms())));
  g->set_phase_since_unix_ms(absl::ToUnixMillis(now));
  auto lose = [&](const char* cause) { (*g->mutable_lost_seconds())[cause] += seconds; };
  switch (g->phase()) {
    case v1::Goodput::RUNNING:
      g->set_productive_seconds(g->productive_seconds() + seconds);
      g->set_attempt_productive_seconds(g->attempt_productive_seconds() + seconds);
      break;
    case v1::Goodput::STARTUP:
      lose(kLostStartup);
      break;
    case v1::Goodput::RESTART:
      lose(kLostRestart);
      break;
    case v1::Goodput::PENDING:
      lose(kLostPending);
      break;
    default:
      return;  // not started, or ended: no wall time
  }
  g->set_wall_seconds(g->wall_seconds() + seconds);
  g->set_ratio(g->wall_seconds() > 0 ? std::max(0.0, g->productive_seconds()) / g->wall_seconds()
                                     : 0);
}

void Enter(v1::Goodput* g, Phase phase, absl::Time now) {
  Close(g, now);
  g->set_phase(phase);
}

// Moves up to `seconds` of productive time to `cause`.
void Move(v1::Goodput* g, const char* cause, double seconds) {
  seconds = std::max(0.0, std::min(seconds, g->productive_seconds()));
  g->set_productive_seconds(g->productive_seconds() - seconds);
  (*g->mutable_lost_seconds())[cause] += seconds;
  if (g->wall_seconds() > 0) g->set_ratio(g->productive_seconds() / g->wall_seconds());
}

}  // namespace

void GoodputOnTransition(v1::Job* job, v1::JobState to, v1::Reason reason, absl::Time now) {
  // A job that never started has no goodput (nor the field).
  if (!job->has_goodput() && to != v1::STARTING && to != v1::RUNNING) return;
  v1::Goodput* g = job->mutable_goodput();
  const Phase phase = g->phase();
  if (Terminal(to)) {
    if (phase != v1::Goodput::NOT_STARTED) Enter(g, v1::Goodput::ENDED, now);
    return;
  }
  switch (to) {
    case v1::STARTING:
    case v1::RUNNING:
      // Placed: until its first step, a start-up, or the rest of a restart.
      if (phase == v1::Goodput::NOT_STARTED) {
        g->set_phase(v1::Goodput::STARTUP);
        g->set_phase_since_unix_ms(absl::ToUnixMillis(now));
      } else if (phase == v1::Goodput::PENDING) {
        Enter(g, v1::Goodput::STARTUP, now);
      }
      // A program may never report a step: its ranks all running is the
      // best sign of work the coordinator has.
      if (to == v1::RUNNING && !job->spec().has_trainer() && g->phase() != v1::Goodput::RUNNING) {
        Enter(g, v1::Goodput::RUNNING, now);
      }
      break;
    case v1::RESTARTING:
      if (phase != v1::Goodput::NOT_STARTED) {
        Enter(g, IsFailure(reason) ? v1::Goodput::RESTART : v1::Goodput::PENDING, now);
      }
      break;
    default:
      break;  // PENDING again: the stretch goes on as it was
  }
}

void GoodputOnFirstStep(v1::Job* job, int64_t step, absl::Time now) {
  if (!job->has_goodput()) return;
  v1::Goodput* g = job->mutable_goodput();
  if (g->phase() == v1::Goodput::NOT_STARTED || g->phase() == v1::Goodput::ENDED) return;
  Enter(g, v1::Goodput::RUNNING, now);
  g->set_attempt_productive_seconds(0);
  g->set_attempt_first_step(step);
  g->set_attempt_stall_seconds(0);
}

void GoodputOnResume(v1::Job* job, int64_t steps_redone, int64_t reached) {
  if (!job->has_goodput() || steps_redone <= 0) return;
  v1::Goodput* g = job->mutable_goodput();
  const int64_t steps = std::max<int64_t>(1, reached - g->attempt_first_step());
  Move(g, kLostRedone, g->attempt_productive_seconds() / steps * steps_redone);
}

void GoodputOnStall(v1::Job* job, double stall_seconds, absl::Time now) {
  if (!job->has_goodput()) return;
  v1::Goodput* g = job->mutable_goodput();
  const double added = stall_seconds - g->attempt_stall_seconds();
  if (added <= 0 || g->phase() != v1::Goodput::RUNNING) return;
  Close(g, now);  // the stall lies in the stretch run so far
  g->set_attempt_stall_seconds(stall_seconds);
  Move(g, kLostCheckpointStall, added);
}

v1::Goodput GoodputAt(const v1::Job& job, absl::Time now) {
  v1::Goodput g = job.goodput();
  Close(&g, now);
  return g;
}

}  // namespace ringmaster
