#include "worker/stacks_dump.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "coordinator/stacks_summary.h"

namespace ringmaster {

v1::StacksDumped DumpStacks(const std::string& job_id, int attempt,
                            const std::vector<DumpTarget>& ranks, const std::string& worker_id,
                            const std::string& why, const StackCaptureOptions& base) {
  v1::StacksDumped dumped;
  dumped.set_job_id(job_id);
  dumped.set_attempt(attempt);
  for (const DumpTarget& target : ranks) {
    StackCaptureOptions options = base;
    options.flight_record = target.flight_record;
    options.python_stacks = target.python_stacks;
    const RankStackCapture capture = CaptureStacks(target.pid, options);
    v1::RankStacks& r = *dumped.add_ranks();
    r.set_rank(target.rank.rank());
    r.set_worker_id(worker_id);
    r.set_process(ProcessStateName(capture.state));
    r.set_bucket(-1);
    if (capture.flight) {
      r.set_step(capture.flight->step);
      r.set_phase(PhaseName(capture.flight->phase));
      r.set_bucket(capture.flight->bucket);
    }
    r.set_python(PythonSummary(capture.python));
    r.set_native(NativeSummary(capture.native));
    r.set_summary(RankStacksLine(r));

    std::ofstream log(target.log_path, std::ios::app);
    const int rank = target.rank.rank();
    log << "----- ringmaster: stacks of rank " << rank << " (pid " << target.pid << ", "
        << r.process() << "): " << why << " -----\n"
        << "where: " << r.summary() << "\n";
    if (capture.flight) {
      log << "flight record: step " << r.step() << ", " << r.phase();
      if (r.bucket() >= 0) log << ", bucket " << r.bucket() << " in flight";
      log << "\n";
    }
    if (!capture.python.empty()) log << "python stacks:\n" << capture.python << "\n";
    log << "native stacks:\n"
        << capture.native << "\n----- ringmaster: end of the stacks of rank " << rank << " -----\n";
  }
  return dumped;
}

}  // namespace ringmaster
