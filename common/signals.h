// Orderly shutdown on SIGTERM/SIGINT, and SIGHUP to reread configuration,
// without async signal handlers: block the signals in every thread, then
// wait for them in main().
#ifndef RINGMASTER_COMMON_SIGNALS_H_
#define RINGMASTER_COMMON_SIGNALS_H_

#include <functional>

#include "absl/time/time.h"

namespace ringmaster {

// Call first in main(), before any thread starts, so threads inherit the mask.
void BlockTerminationSignals();
// Returns the signal number once SIGTERM or SIGINT arrives. Each SIGHUP
// before it calls `on_hangup` (when given) and is otherwise ignored.
int WaitForTerminationSignal(const std::function<void()>& on_hangup = nullptr);
// As above, and calls `on_tick` every `tick` while it waits; when it
// returns false, returns 0.
int WaitForTerminationSignal(const std::function<void()>& on_hangup,
                             const std::function<bool()>& on_tick, absl::Duration tick);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_SIGNALS_H_
