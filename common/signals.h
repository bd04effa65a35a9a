// Orderly shutdown on SIGTERM/SIGINT without async signal handlers: block
// the signals in every thread, then wait for one in main().
#ifndef RINGMASTER_COMMON_SIGNALS_H_
#define RINGMASTER_COMMON_SIGNALS_H_

namespace ringmaster {

// Call first in main(), before any thread starts, so threads inherit the mask.
void BlockTerminationSignals();
// Returns the signal number once SIGTERM or SIGINT arrives.
int WaitForTerminationSignal();

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_SIGNALS_H_
