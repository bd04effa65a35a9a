// SIGTERM and SIGINT as a request to stop that the training loop asks at
// step boundaries, with a deadline after which the process exits anyway.
#ifndef RINGMASTER_TRAINER_STOP_SIGNAL_H_
#define RINGMASTER_TRAINER_STOP_SIGNAL_H_

#include <signal.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/time/time.h"
#include "common/mutex.h"

namespace ringmaster {

class StopSignal {
 public:
  // Blocks SIGTERM and SIGINT in the calling thread, so call it before any
  // other thread starts (they inherit the mask), and starts the thread that
  // takes them. After the first one, requested() is true; if the process is
  // still alive `grace` later (blocked in a collective, say), that thread
  // ends it with _exit(128 + signal), as the signal itself would have.
  static std::unique_ptr<StopSignal> Install(absl::Duration grace);
  ~StopSignal();

  bool requested() const { return signal_.load(std::memory_order_relaxed) != 0; }
  // The signal received, 0 before one.
  int signal() const { return signal_.load(std::memory_order_relaxed); }

 private:
  StopSignal(const sigset_t& set, absl::Duration grace);
  void Run();

  const sigset_t set_;
  const absl::Duration grace_;
  std::atomic<int> signal_{0};
  Notification done_;
  std::thread thread_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_STOP_SIGNAL_H_
