// The stacks of a rank's process, taken when its job hangs or on demand,
// without stopping or killing it:
//   - the built-in trainer: its flight record (domain/flight_recorder.h)
//     says the step, the phase and the bucket in flight;
//   - a Python rank: every thread's Python stack, which the `ringmaster`
//     package's sitecustomize has faulthandler write to a file of the
//     rank's own when the worker sends PythonStacksSignal() (only to a
//     process that catches it);
//   - any rank: every thread's native stack, from eu-stack (elfutils),
//     which reads a stopped process too.
#ifndef RINGMASTER_WORKER_STACK_CAPTURE_H_
#define RINGMASTER_WORKER_STACK_CAPTURE_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "domain/flight_recorder.h"

namespace ringmaster {

struct StackCaptureOptions {
  // The rank's own directory, with kFlightRecordFile and kPythonStacksFile
  // (empty: none). A rank may put anything in their place: they are read
  // only as rank_dir.h says, and must be the rank's user's.
  std::string rank_dir;
  // Who the rank runs as (nullopt: as the worker): its files must be
  // that user's. eu-stack runs as the worker, not as that user: a process
  // of the rank's uid outside the rank's mount namespace and cgroup would
  // be the rank's to read and trace.
  std::optional<RunAs> rank_user;
  std::string eu_stack = "eu-stack";
  // How long a Python rank has to write its stacks once signalled.
  absl::Duration python_wait = absl::Seconds(3);
  absl::Duration native_timeout = absl::Seconds(10);
};

struct RankStackCapture {
  char state = 0;  // of /proc/<pid>/stat: 'R', 'S', 'D', 'T', 'Z'...; 0: gone
  std::optional<FlightState> flight;
  std::string python;  // as faulthandler wrote them
  std::string native;  // as eu-stack wrote them, or why there are none
};

// The real-time signal on which a rank's Python writes its stacks.
int PythonStacksSignal();

// "running", "sleeping", "stopped", ...; "gone" for 0.
std::string ProcessStateName(char state);

// Whether `pid` catches `signal` (its SigCgt).
bool CatchesSignal(pid_t pid, int signal);

RankStackCapture CaptureStacks(pid_t pid, const StackCaptureOptions& options);

// The innermost frame of faulthandler's "Current thread" (else its first
// thread): 'File "/job/train.py", line 12 in main'; empty when there is none.
std::string PythonSummary(const std::string& faulthandler_text);
// The first thread's innermost frames that name a function, innermost
// first: "__GI___poll < gloo::transport::tcp::Pair::waitRecv < ..." (up to
// three); empty when there is none.
std::string NativeSummary(const std::string& eu_stack_text);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_STACK_CAPTURE_H_
