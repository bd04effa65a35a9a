// Sends a rank's training progress to the worker that runs it.
#ifndef RINGMASTER_TRAINER_PROGRESS_REPORTER_H_
#define RINGMASTER_TRAINER_PROGRESS_REPORTER_H_

#include <memory>
#include <string>

#include "proto/worker.grpc.pb.h"

namespace ringmaster {

// Thread-compatible. Reports are best effort: a worker that does not
// answer within a short deadline is skipped, never waited for.
class ProgressReporter {
 public:
  ProgressReporter(const std::string& worker_address, v1::RankRef rank);
  void Report(const v1::Progress& progress);

 private:
  std::unique_ptr<v1::WorkerAgentService::Stub> stub_;
  v1::RankRef rank_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_PROGRESS_REPORTER_H_
