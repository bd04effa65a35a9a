#include "common/signals.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>

#include "absl/time/clock.h"

namespace ringmaster {
namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal(const std::function<void()>& on_hangup) {
  sigset_t set = TerminationSignals();
  for (;;) {
    int signal = 0;
    sigwait(&set, &signal);
    if (signal != SIGHUP) return signal;
    if (on_hangup) on_hangup();
  }
}

int WaitForTerminationSignal(const std::function<void()>& on_hangup,
                             const std::function<bool()>& on_tick, absl::Duration tick) {
  sigset_t set = TerminationSignals();
  absl::Time next = absl::Now() + tick;
  for (;;) {
    const timespec wait = absl::ToTimespec(std::max(next - absl::Now(), absl::ZeroDuration()));
    const int signal = sigtimedwait(&set, nullptr, &wait);
    if (signal == SIGHUP) {
      if (on_hangup) on_hangup();
    } else if (signal > 0) {
      return signal;
    } else if (errno == EAGAIN) {
      if (!on_tick()) return 0;
      next = absl::Now() + tick;
    }  // EINTR: wait again
  }
}

}  // namespace ringmaster
