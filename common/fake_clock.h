// A Clock that moves only when told to; for tests of timeouts and backoff.
#ifndef RINGMASTER_COMMON_FAKE_CLOCK_H_
#define RINGMASTER_COMMON_FAKE_CLOCK_H_

#include "common/clock.h"
#include "common/mutex.h"

namespace ringmaster {

// Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'000'000'000)) : now_(start) {}

  absl::Time Now() const override {
    MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_FAKE_CLOCK_H_
