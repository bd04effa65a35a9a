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
  return set;
}

}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal() {
  sigset_t set = TerminationSignals();
  int signal = 0;
  sigwait(&set, &signal);
  return signal;
}

}  // namespace ringmaster
