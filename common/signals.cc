#include "common/signals.h"

#include <pthread.h>
#include <signal.h>

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

}  // namespace ringmaster
