// The CLI's verbs. Each returns the process exit code: 0 success, 1 a
// failed job or refused request, 2 bad usage; errors are one line on stderr.
#ifndef RINGMASTER_CLIENT_COMMANDS_H_
#define RINGMASTER_CLIENT_COMMANDS_H_

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "client/certs.h"
#include "client/local_cluster.h"
#include "client/output.h"
#include "common/tls.h"

namespace ringmaster {

struct GlobalOptions {
  std::string coordinator = "127.0.0.1:7070";
  std::string token;
  Tls tls;  // the admin certificate or only the CA; nullopt: plaintext
  OutputFormat output = OutputFormat::kTable;
  bool table() const { return output == OutputFormat::kTable; }
};

int RunUp(const GlobalOptions& global, LocalClusterOptions options);
int RunCertsInit(const std::string& dir, const CertsOptions& options);
int RunCertsRenew(const std::string& dir, int valid_days);
int RunDown(const GlobalOptions& global, const std::string& state_dir);
int RunDemo(const GlobalOptions& global, LocalClusterOptions options);
// `submit`: a spec without working_dir ships the current directory with the
// job (client/code_package.h) unless `upload` is false; then its ranks
// start in the same path on their hosts.
struct SubmitOptions {
  std::string file;  // "-": stdin
  bool follow = false;
  bool upload = true;
  int64_t upload_limit_bytes = int64_t{100} << 20;
  std::string request_id;   // a retry with the same id returns the same job
  std::string resume_from;  // the spec's resume_from, replaced
  std::string image;        // the spec's image, replaced
};
int RunSubmit(const GlobalOptions& global, const SubmitOptions& options);
// `jobs`: the newest `limit` jobs (every one with `all`), of `states` if any.
struct JobsOptions {
  int limit = 50;
  bool all = false;
  std::vector<std::string> states;  // names, as JobState spells them or lower case
  std::vector<std::string> labels;  // "key=value": jobs with every one of them
};
int RunJobs(const GlobalOptions& global, const JobsOptions& options);
int RunStatus(const GlobalOptions& global, const std::string& job_id);
struct LogsOptions {
  std::optional<int> rank;     // empty: every rank
  std::optional<int> attempt;  // empty: the latest (and, following, each later one)
  int tail = 0;                // > 0: each rank's last this many lines
  bool timestamps = false;
  bool follow = false;
};
int RunLogs(const GlobalOptions& global, const std::string& job_id, const LogsOptions& options);
int RunCancel(const GlobalOptions& global, const std::string& job_id);
// hold, release, set-priority (to `priority`), requeue: prints the job's
// state after it ("train-3 PENDING, held by alice").
enum class JobChange { kHold, kRelease, kSetPriority, kRequeue };
int RunChangeJob(const GlobalOptions& global, JobChange change, const std::string& job_id,
                 const std::string& priority);
int RunDelete(const GlobalOptions& global, const std::string& job_id);
int RunWorkers(const GlobalOptions& global);
// Each worker's cached images; -o json/yaml: the workers' ids and images.
int RunImages(const GlobalOptions& global);
int RunQueues(const GlobalOptions& global);
// `stacks`: where each rank of the job's running attempt is.
int RunStacks(const GlobalOptions& global, const std::string& job_id);
// `cordon`, `uncordon`, `drain`: admin only.
int RunCordon(const GlobalOptions& global, const std::string& worker_id, const std::string& reason);
int RunUncordon(const GlobalOptions& global, const std::string& worker_id);
int RunDrain(const GlobalOptions& global, const std::string& worker_id, const std::string& reason,
             absl::Duration grace);
// `top`: active jobs (and finished ones with `all`) and the workers.
int RunTop(const GlobalOptions& global, int iterations, bool all);

}  // namespace ringmaster

#endif  // RINGMASTER_CLIENT_COMMANDS_H_
