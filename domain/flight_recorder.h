// What a trainer rank is doing now, kept in a small file that its worker
// maps: the step, what the training thread is in (forward, backward, the
// wait for the all-reduce...), and the bucket whose all-reduce is in flight.
// The worker reads it when the rank's job is declared hung, even while the
// rank is stopped, and so names exactly where each rank waits. Writers
// store with relaxed atomics into shared memory: nothing waits, nothing is
// written to disk on the training path.
#ifndef RINGMASTER_DOMAIN_FLIGHT_RECORDER_H_
#define RINGMASTER_DOMAIN_FLIGHT_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

enum class TrainPhase : int32_t {
  kStarting = 0,
  kData = 1,
  kForward = 2,
  kBackward = 3,
  kAllReduce = 4,  // waiting for the step's gradient all-reduce
  kOptimizer = 5,
  kCheckpoint = 6,
  kEvaluate = 7,
  kDone = 8,
};

// "forward", "all-reduce", ...
const char* PhaseName(TrainPhase phase);

struct FlightState {
  int64_t step = 0;  // the step it is on: 1 for the first
  TrainPhase phase = TrainPhase::kStarting;
  int32_t bucket = -1;        // whose all-reduce is in flight; -1: none
  int64_t since_unix_ms = 0;  // when the phase began
};

// Thread-safe: the training thread sets the step and phase, the reducer's
// thread the bucket.
class FlightRecorder {
 public:
  // Creates (or truncates) and maps `path`, mode 0600.
  static absl::StatusOr<std::unique_ptr<FlightRecorder>> Open(const std::string& path);
  ~FlightRecorder();

  void Step(int64_t step);
  void Phase(TrainPhase phase);
  void Bucket(int32_t bucket);

  // The layout of the file, shared with ReadFlightRecord.
  struct Shared {
    static constexpr uint32_t kMagic = 0x52464d52;  // "RMFR"
    uint32_t magic;
    uint32_t version;
    std::atomic<int64_t> step;
    std::atomic<int32_t> phase;
    std::atomic<int32_t> bucket;
    std::atomic<int64_t> since_unix_ms;
  };

 private:
  explicit FlightRecorder(Shared* shared) : shared_(shared) {}
  Shared* const shared_;
};

// What the rank last wrote at `path` (never through a link, never waiting
// on a FIFO). NOT_FOUND when there is no record, DATA_LOSS when the file is
// not one.
absl::StatusOr<FlightState> ReadFlightRecord(const std::string& path);
// The same from an open file; `what` names it in errors.
absl::StatusOr<FlightState> ReadFlightRecord(int fd, const std::string& what);

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_FLIGHT_RECORDER_H_
