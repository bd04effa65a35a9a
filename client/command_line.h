// The CLI's command line, parsed into what to run without running it (so
// that parsing is tested and fuzzed on its own).
#ifndef RINGMASTER_CLIENT_COMMAND_LINE_H_
#define RINGMASTER_CLIENT_COMMAND_LINE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/certs.h"
#include "client/commands.h"
#include "client/local_cluster.h"
#include "client/ui.h"

namespace ringmaster {

enum class Command {
  kUp,
  kDown,
  kDemo,
  kCertsInit,
  kCertsRenew,
  kSubmit,
  kJobs,
  kStatus,
  kLogs,
  kCancel,
  kHold,
  kRelease,
  kSetPriority,
  kRequeue,
  kDelete,
  kWorkers,
  kImages,
  kQueues,
  kTop,
  kStacks,
  kCordon,
  kUncordon,
  kDrain,
  kUi,
};

// One run of the CLI: the command and every option given or defaulted.
struct Invocation {
  Command command = Command::kWorkers;
  std::string coordinator;  // --coordinator, else RINGMASTER_COORDINATOR, else 127.0.0.1:7070
  std::string token_file;
  std::optional<std::string> tls_dir;  // --tls-dir, else RINGMASTER_TLS_DIR
  std::string cert;                    // --cert: a client certificate of the TLS dir
  bool insecure = false;               // --insecure: a token may go over plaintext beyond loopback
  OutputFormat output = OutputFormat::kTable;  // -o/--output
  LocalClusterOptions cluster;                 // up
  bool no_tls = false;                         // up --no-tls
  std::string down_state_dir;                  // down
  LocalClusterOptions demo_cluster;            // demo
  std::string certs_dir;                       // certs init
  CertsOptions certs;
  SubmitOptions submit;
  LogsOptions logs;
  JobsOptions jobs;
  std::string job_id;                        // status, logs, cancel, delete, stacks, ...
  std::string priority;                      // set-priority
  std::string worker_id;                     // cordon, uncordon, drain
  std::string reason;                        // cordon, drain
  absl::Duration grace = absl::Seconds(30);  // drain
  int iterations = 0;                        // top
  bool all = false;                          // top
  UiOptions ui;                              // ui
};

// What parsing ended with: an invocation to run, or an exit code with what
// to print (help on stdout with 0; a one-line error on stderr with 2).
struct ParsedCommandLine {
  std::optional<Invocation> invocation;
  int exit_code = 0;
  std::string out;
  std::string err;
};

// `args` without the program name. Reads RINGMASTER_COORDINATOR and
// RINGMASTER_TLS_DIR for their defaults. Global options may stand anywhere
// on the line, as kubectl's do. `--version` and `completion bash|zsh` are
// answered here, in `out`.
ParsedCommandLine ParseCommandLine(const std::vector<std::string>& args);

}  // namespace ringmaster

#endif  // RINGMASTER_CLIENT_COMMAND_LINE_H_
