#include "worker/stacks_dump.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"
#include "domain/stacks_summary.h"

namespace ringmaster {
namespace {

// Appends `text` to the rank's log, a file of the worker's own in a
// directory of its own, never through a link or to anything but a
// regular file.
void AppendToLog(const std::string& path, const std::string& text) {
  UniqueFd fd(open(path.c_str(),
                   O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0640));
  struct stat st;
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    spdlog::warn("cannot write the stacks to {}: not a log of this worker's ({})", path,
                 fd.valid() ? "not a regular file of its own" : std::strerror(errno));
    return;
  }
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      spdlog::warn("cannot write the stacks to {}: {}", path, std::strerror(errno));
      return;
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

v1::StacksDumped DumpStacks(const std::string& job_id, int attempt,
                            const std::vector<DumpTarget>& ranks, const std::string& worker_id,
                            const std::string& why, const StackCaptureOptions& base) {
  v1::StacksDumped dumped;
  dumped.set_job_id(job_id);
  dumped.set_attempt(attempt);
  for (const DumpTarget& target : ranks) {
    StackCaptureOptions options = base;
    options.rank_dir = target.rank_dir;
    options.rank_user = target.rank_user;
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

    std::ostringstream log;
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
    AppendToLog(target.log_path, log.str());
  }
  return dumped;
}

}  // namespace ringmaster
