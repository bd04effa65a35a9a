// ringmaster: the command-line interface of a Ringmaster cluster.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>
#include <grpc/support/log.h>

#include "client/commands.h"
#include "common/token_file.h"

namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

// Parses the command line; an exit code when that already ends the run
// (help printed, or a parse error).
std::optional<int> Parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "ringmaster: " << e.what() << " (see ringmaster --help)" << std::endl;
    return 2;
  }
  return std::nullopt;
}

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

// TLS from --tls-dir (RINGMASTER_TLS_DIR; by default the local cluster's of
// `up`, when it has one); false, said on stderr, when a file will not do.
bool LoadTls(const std::optional<std::string>& tls_dir, ringmaster::GlobalOptions* global) {
  std::string dir = ringmaster::TlsDirOf(ringmaster::DefaultStateDir());
  if (tls_dir) {
    dir = *tls_dir;
  } else if (access((dir + "/ca.crt").c_str(), F_OK) != 0) {
    dir.clear();
  }
  absl::StatusOr<ringmaster::Tls> tls = ringmaster::LoadClientTls(dir);
  if (!tls.ok()) {
    std::cerr << "ringmaster: " << tls.status().message() << std::endl;
    return false;
  }
  global->tls = *std::move(tls);
  return true;
}

// `certs init`: its options, and whether it was asked for.
struct CertsCommand {
  CLI::App* init = nullptr;
  std::string dir;
  ringmaster::CertsOptions options;
};

void AddCerts(CLI::App& app, CertsCommand* certs) {
  auto* group = app.add_subcommand("certs", "TLS certificates of a cluster");
  group->require_subcommand(1);
  certs->init = group->add_subcommand(
      "init", "make a CA and the coordinator's, admin's and workers' certificates "
              "(keeps what exists, so it also adds workers)");
  certs->init->add_option("--dir", certs->dir, "where to write them")->required();
  certs->init->add_option("--host", certs->options.hosts,
                          "a name or IP peers dial the coordinator and workers at (repeat)");
  certs->init->add_option("--worker", certs->options.worker_ids,
                          "a worker id to make a certificate for (repeat)");
}

// `up`, `down` and `demo`: their options, and which was asked for.
struct LocalClusterCommands {
  ringmaster::LocalClusterOptions cluster;
  bool no_tls = false;
  std::string down_state_dir;
  ringmaster::LocalClusterOptions demo_cluster;
  CLI::App* up = nullptr;
  CLI::App* down = nullptr;
  CLI::App* demo = nullptr;
};

void AddLocalClusterCommands(CLI::App& app, LocalClusterCommands* local) {
  ringmaster::LocalClusterOptions& cluster = local->cluster;
  cluster.state_dir = ringmaster::DefaultStateDir();
  local->up = app.add_subcommand("up", "start a local cluster in the background");
  local->up->add_option("--workers", cluster.workers, "number of workers")->capture_default_str();
  local->up->add_option("--slots", cluster.slots, "slots per worker")->capture_default_str();
  local->up->add_option("--state-dir", cluster.state_dir, "where the cluster keeps its state")
      ->capture_default_str();
  local->up->add_option("--rank-user", cluster.rank_user,
                        "user[:group] ranks run as (default: you)");
  local->up->add_flag("--no-tls", local->no_tls, "plaintext on loopback, without certificates");

  local->down_state_dir = cluster.state_dir;
  local->down = app.add_subcommand("down", "stop the local cluster started by up");
  local->down->add_option("--state-dir", local->down_state_dir, "the state dir given to up")
      ->capture_default_str();

  local->demo_cluster = cluster;
  local->demo_cluster.workers = 2;
  local->demo = app.add_subcommand("demo", "train on a real data set on a local cluster");
  local->demo
      ->add_option("--state-dir", local->demo_cluster.state_dir,
                   "where the cluster keeps its state")
      ->capture_default_str();
}

// The exit code of `up`, `down` or `demo` when one was asked for.
std::optional<int> RunLocalCluster(LocalClusterCommands& local,
                                   const ringmaster::GlobalOptions& global) {
  local.cluster.tls = !local.no_tls;
  if (local.up->parsed()) return ringmaster::RunUp(global, local.cluster);
  if (local.down->parsed()) return ringmaster::RunDown(global, local.down_state_dir);
  if (local.demo->parsed()) return ringmaster::RunDemo(global, local.demo_cluster);
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  // Errors reach the user as one line of ours, not as gRPC's own log.
  gpr_set_log_function([](gpr_log_func_args*) {});
  ringmaster::GlobalOptions global;
  global.coordinator = EnvOr("RINGMASTER_COORDINATOR", "127.0.0.1:7070");
  std::string output = "table";

  CLI::App app{"ringmaster: run distributed data-parallel training jobs"};
  app.require_subcommand(1);
  app.add_option("--coordinator", global.coordinator,
                 "coordinator HOST:PORT (env RINGMASTER_COORDINATOR)")
      ->capture_default_str();
  std::string token_file;
  app.add_option("--token-file", token_file,
                 "access token, in a file of mode 600 (else env RINGMASTER_TOKEN)");
  std::optional<std::string> tls_dir;
  if (const char* env = std::getenv("RINGMASTER_TLS_DIR")) tls_dir = env;
  app.add_option("--tls-dir", tls_dir,
                 "TLS files of the cluster (env RINGMASTER_TLS_DIR; default: those of `up`; "
                 "\"\" for plaintext)");
  app.add_option("--output", output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();

  LocalClusterCommands local;
  AddLocalClusterCommands(app, &local);

  std::string file;
  bool follow = false;
  auto* submit = app.add_subcommand("submit", "submit a job spec (YAML or JSON; - = stdin)");
  submit->add_option("FILE", file, "job spec file")->required();
  submit->add_flag("--follow,-f", follow, "stream progress until the job ends");

  ringmaster::JobsOptions jobs_options;
  auto* jobs = app.add_subcommand("jobs", "list jobs, newest first");
  jobs->add_option("--limit", jobs_options.limit, "how many")->capture_default_str();
  jobs->add_flag("--all", jobs_options.all, "every job");
  jobs->add_option("--state", jobs_options.states, "only jobs in this state (repeat)");
  std::string job_id;
  auto* status = app.add_subcommand("status", "show one job");
  status->add_option("JOB", job_id, "job id")->required();

  std::optional<int> rank;
  bool follow_logs = false;
  auto* logs = app.add_subcommand("logs", "print a job's output, each line [rank R]");
  logs->add_option("JOB", job_id, "job id")->required();
  logs->add_option("--rank", rank, "only this rank");
  logs->add_flag("--follow,-f", follow_logs, "keep printing until the job ends");

  auto* cancel = app.add_subcommand("cancel", "stop every rank of a job");
  cancel->add_option("JOB", job_id, "job id")->required();

  auto* remove = app.add_subcommand("delete", "forget an ended job: history, keys and logs");
  remove->add_option("JOB", job_id, "job id")->required();

  app.add_subcommand("workers", "list workers");

  CertsCommand certs;
  AddCerts(app, &certs);

  int iterations = 0;
  auto* top = app.add_subcommand("top", "live view of jobs and workers (q to quit)");
  top->add_option("--iterations", iterations, "stop after this many frames (0: until q)");

  if (std::optional<int> done = Parse(app, argc, argv)) return *done;
  global.json = output == "json";
  if (certs.init->parsed()) return ringmaster::RunCertsInit(certs.dir, certs.options);
  if (!LoadToken(token_file, &global)) return 2;
  // A local cluster's commands make and use its own certificates.
  if (std::optional<int> done = RunLocalCluster(local, global)) return *done;
  if (!LoadTls(tls_dir, &global)) return 2;
  if (submit->parsed()) return ringmaster::RunSubmit(global, file, follow);
  if (status->parsed()) return ringmaster::RunStatus(global, job_id);
  if (logs->parsed()) return ringmaster::RunLogs(global, job_id, rank, follow_logs);
  if (cancel->parsed()) return ringmaster::RunCancel(global, job_id);
  if (remove->parsed()) return ringmaster::RunDelete(global, job_id);
  if (jobs->parsed()) return ringmaster::RunJobs(global, jobs_options);
  if (app.got_subcommand("workers")) return ringmaster::RunWorkers(global);
  if (top->parsed()) return ringmaster::RunTop(global, iterations);
  return 2;
}
