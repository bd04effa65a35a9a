// ringmaster: the command-line interface of a Ringmaster cluster.

#include <iostream>
#include <optional>

#include <grpc/grpc.h>
#include <grpc/support/log.h>

#include "absl/strings/str_join.h"
#include "client/command_line.h"
#include "client/commands.h"
#include "client/ui.h"
#include "common/coordinator_targets.h"
#include "common/daemon_flags.h"
#include "common/net.h"
#include "common/token_file.h"

namespace {

// The token from --token-file or RINGMASTER_TOKEN; false, said on stderr,
// when the file will not do.
bool LoadToken(const std::string& file, ringmaster::GlobalOptions* global) {
  absl::StatusOr<std::string> token = ringmaster::ReadToken(file);
  if (!token.ok()) {
    std::cerr << "ringmaster: " << token.status().message() << std::endl;
    return false;
  }
  global->token = *token;
  return true;
}

// TLS from --tls-dir (RINGMASTER_TLS_DIR), for any coordinator; without
// it, the files of the local cluster of `up` for that cluster's coordinator
// only; false, said on stderr, when a file will not do. One credential is
// presented: --cert, else the token already loaded, else the admin
// certificate of the TLS dir.
bool LoadTls(const ringmaster::Invocation& run, ringmaster::GlobalOptions* global) {
  const std::string dir =
      run.tls_dir ? *run.tls_dir
                  : ringmaster::TlsDirFor(ringmaster::DefaultStateDir(), global->coordinator);
  ringmaster::ClientCertificate which;
  which.name = run.cert;
  which.none = run.cert.empty() && !global->token.empty();
  if (!run.cert.empty()) global->token.clear();
  absl::StatusOr<ringmaster::Tls> tls = ringmaster::LoadClientTls(dir, which);
  if (!tls.ok()) {
    std::cerr << "ringmaster: " << tls.status().message() << std::endl;
    return false;
  }
  global->tls = *std::move(tls);
  return true;
}

// A token goes in plaintext only to loopback, unless the user said so:
// --insecure, or --tls-dir "" (or RINGMASTER_TLS_DIR="") given on purpose,
// and then with a warning. False, said on stderr, when it may not go.
bool MayUseCredential(const ringmaster::Invocation& run, const ringmaster::GlobalOptions& global) {
  if (global.tls || global.token.empty()) return true;
  std::vector<std::string> beyond;
  for (const std::string& address : ringmaster::SplitAddresses(global.coordinator)) {
    if (!ringmaster::IsLoopbackHost(ringmaster::HostOfAddress(address))) {
      beyond.push_back(address);
    }
  }
  if (beyond.empty()) return true;
  const std::string where = absl::StrJoin(beyond, ", ");
  if (!run.insecure && !(run.tls_dir && run.tls_dir->empty())) {
    std::cerr << "ringmaster: not sending the token in plaintext to " << where
              << ", beyond loopback: give --tls-dir with the cluster's CA (ca.crt), or "
                 "--insecure to send it anyway"
              << std::endl;
    return false;
  }
  std::cerr << "ringmaster: warning: the token goes in plaintext to " << where
            << ": anyone on the way can read it and act as you" << std::endl;
  return true;
}

// Runs what the command line asked for.
int Run(const ringmaster::Invocation& run) {
  using ringmaster::Command;
  ringmaster::GlobalOptions global;
  global.coordinator = run.coordinator;
  global.output = run.output;
  if (run.command == Command::kCertsInit) return ringmaster::RunCertsInit(run.certs_dir, run.certs);
  if (run.command == Command::kCertsRenew) {
    return ringmaster::RunCertsRenew(run.certs_dir, run.certs.valid_days);
  }
  if (!LoadToken(run.token_file, &global)) return 2;
  // A local cluster's commands make and use its own certificates.
  switch (run.command) {
    case Command::kUp:
      return ringmaster::RunUp(global, run.cluster);
    case Command::kDown:
      return ringmaster::RunDown(global, run.down_state_dir);
    case Command::kDemo:
      return ringmaster::RunDemo(global, run.demo_cluster);
    default:
      break;
  }
  if (!LoadTls(run, &global) || !MayUseCredential(run, global)) return 2;
  switch (run.command) {
    case Command::kSubmit:
      return ringmaster::RunSubmit(global, run.submit);
    case Command::kStatus:
      return ringmaster::RunStatus(global, run.job_id);
    case Command::kLogs:
      return ringmaster::RunLogs(global, run.job_id, run.logs);
    case Command::kCancel:
      return ringmaster::RunCancel(global, run.job_id);
    case Command::kHold:
      return ringmaster::RunChangeJob(global, ringmaster::JobChange::kHold, run.job_id, "");
    case Command::kRelease:
      return ringmaster::RunChangeJob(global, ringmaster::JobChange::kRelease, run.job_id, "");
    case Command::kSetPriority:
      return ringmaster::RunChangeJob(global, ringmaster::JobChange::kSetPriority, run.job_id,
                                      run.priority);
    case Command::kRequeue:
      return ringmaster::RunChangeJob(global, ringmaster::JobChange::kRequeue, run.job_id, "");
    case Command::kDelete:
      return ringmaster::RunDelete(global, run.job_id);
    case Command::kJobs:
      return ringmaster::RunJobs(global, run.jobs);
    case Command::kWorkers:
      return ringmaster::RunWorkers(global);
    case Command::kImages:
      return ringmaster::RunImages(global);
    case Command::kQueues:
      return ringmaster::RunQueues(global);
    case Command::kUi:
      return ringmaster::RunUi(global, run.ui);
    case Command::kTop:
      return ringmaster::RunTop(global, run.iterations, run.all);
    case Command::kStacks:
      return ringmaster::RunStacks(global, run.job_id);
    case Command::kCordon:
      return ringmaster::RunCordon(global, run.worker_id, run.reason);
    case Command::kUncordon:
      return ringmaster::RunUncordon(global, run.worker_id);
    case Command::kDrain:
      return ringmaster::RunDrain(global, run.worker_id, run.reason, run.grace);
    default:
      return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Errors reach the user as one line of ours, not as gRPC's own log.
  gpr_set_log_function([](gpr_log_func_args*) {});
  const ringmaster::ParsedCommandLine parsed =
      ringmaster::ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc));
  std::cout << parsed.out;
  std::cerr << parsed.err;
  if (!parsed.invocation) return parsed.exit_code;
  // The last channel's clean-up may run on a gRPC thread of its own; with
  // this reference the main thread does it, and waits for it, so that no
  // gRPC thread is still at work (in a TLS handshake) when the process ends.
  grpc_init();
  const int code = Run(*parsed.invocation);
  grpc_shutdown_blocking();
  return code;
}
