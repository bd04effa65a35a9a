// Sends a rank's training progress to the worker that runs it, from a
// thread of its own so the training thread never waits on the network.
#ifndef RINGMASTER_TRAINER_PROGRESS_REPORTER_H_
#define RINGMASTER_TRAINER_PROGRESS_REPORTER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "proto/worker.grpc.pb.h"

namespace ringmaster {

// Thread-safe. Report() hands the newest progress to the sender thread and
// returns at once; a report not yet sent is replaced by a newer one, so at
// most one waits. When the trainer reports nothing for `keepalive` (a long
// evaluation, a collective blocked on a peer) the sender repeats the last
// progress without its step durations: the worker, and through it the
// coordinator, keep seeing a rank that is alive but not advancing, which is
// how a hang is pinned on the peer that stopped rather than on its waiters.
class ProgressReporter {
 public:
  using Send = std::function<void(const v1::RankProgress&)>;

  // Reports to the worker agent on `agent`, each call given a deadline of
  // 2 s: a worker that does not answer is skipped (on the sender thread;
  // training never waits for it).
  // `token` (the attempt's job credential), when not empty, goes with each.
  ProgressReporter(std::shared_ptr<grpc::Channel> agent, const std::string& token, v1::RankRef rank,
                   absl::Duration keepalive = absl::Seconds(1));
  // Tests: `send` instead of the worker agent.
  ProgressReporter(Send send, v1::RankRef rank, absl::Duration keepalive);
  // Sends what is pending, then stops the sender.
  ~ProgressReporter();

  void Report(const v1::Progress& progress);

 private:
  void Run();

  const Send send_;
  const v1::RankRef rank_;
  const absl::Duration keepalive_;
  Mutex mu_;
  std::optional<v1::Progress> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sender_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_PROGRESS_REPORTER_H_
