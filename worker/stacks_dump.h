// Takes the stacks of a job attempt's ranks on this worker (StackCapture)
// into each rank's log, between marker lines, and says where each rank is,
// for the coordinator to name the rank a hung job waits for.
#ifndef RINGMASTER_WORKER_STACKS_DUMP_H_
#define RINGMASTER_WORKER_STACKS_DUMP_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "proto/worker.pb.h"
#include "worker/stack_capture.h"

namespace ringmaster {

struct DumpTarget {
  v1::RankRef rank;
  pid_t pid = 0;
  std::string log_path;
  std::string rank_dir;            // its own, with its flight record and Python stacks
  std::optional<RunAs> rank_user;  // who it runs as (nullopt: as the worker)
  // pid is its OCI runtime's: the stacks are its command's, found below
  // (ContainedCommand) when the dump is taken.
  bool in_image = false;
};

// Marks each log "----- ringmaster: stacks of rank 2 (pid 1234, stopped):
// <why> -----", writes the flight record, the Python and the native stacks,
// and "----- ringmaster: end of the stacks of rank 2 -----".
v1::StacksDumped DumpStacks(const std::string& job_id, int attempt,
                            const std::vector<DumpTarget>& ranks, const std::string& worker_id,
                            const std::string& why, const StackCaptureOptions& base = {});

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_STACKS_DUMP_H_
