// Time source seam: production code reads time through Clock so that
// timeouts, heartbeats and backoff are tested with FakeClock.
#ifndef RINGMASTER_COMMON_CLOCK_H_
#define RINGMASTER_COMMON_CLOCK_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ringmaster {

// Thread-safe: implementations may be called from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  // A process-wide instance; never destroyed.
  static RealClock* Get() {
    static RealClock* clock = new RealClock;
    return clock;
  }
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_CLOCK_H_
