// ringmaster: the command-line interface of a Ringmaster cluster.

#include <iostream>
#include <optional>

#include <grpc/grpc.h>
#include <grpc/support/log.h>

#include "client/command_line.h"
#include "client/commands.h"
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
  if (!LoadTls(run, &global)) return 2;
  switch (run.command) {
    case Command::kSubmit:
      return ringmaster::RunSubmit(global, run.submit);
    case Command::kStatus:
      return ringmaster::RunStatus(global, run.job_id);
    case Command::kLogs:
      return ringmaster::RunLogs(global, run.job_id, run.logs);
    case Command::kCancel:
      return ringmaster::RunCancel(global, run.job_id);
    case Command::kDelete:
      return ringmaster::RunDelete(global, run.job_id);
    case Command::kJobs:
      return ringmaster::RunJobs(global, run.jobs);
    case Command::kWorkers:
      return ringmaster::RunWorkers(global);
    case Command::kQueues:
      return ringmaster::RunQueues(global);
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
