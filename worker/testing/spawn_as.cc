// spawn_as RANK_USER OUTPUT COMMAND...: starts COMMAND as a worker with
// --rank-user=RANK_USER starts its ranks (the same identity, no_new_privs
// and capability clearing), its output to OUTPUT, and exits with its
// status; 3 when the worker would refuse RANK_USER. rank_identity_test runs
// it under setpriv as a non-root user with and without capabilities.
#include <sys/wait.h>

#include <iostream>

#include "common/subprocess.h"
#include "worker/rank_identity.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: spawn_as RANK_USER OUTPUT COMMAND..." << std::endl;
    return 2;
  }
  absl::StatusOr<std::optional<ringmaster::RunAs>> identity = ringmaster::RankIdentity(argv[1]);
  if (!identity.ok()) {
    std::cerr << identity.status().message() << std::endl;
    return 3;
  }
  ringmaster::SubprocessSpec spec;
  spec.argv.assign(argv + 3, argv + argc);
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  spec.output_path = argv[2];
  spec.run_as = *identity;
  spec.no_new_privs = true;
  absl::StatusOr<pid_t> pid = ringmaster::SpawnProcess(spec);
  if (!pid.ok()) {
    std::cerr << pid.status().message() << std::endl;
    return 1;
  }
  int status = 0;
  waitpid(*pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
