#include "client/command_line.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/daemon_flags.h"
#include "common/version.h"

namespace ringmaster {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

void AddGlobalOptions(CLI::App& app, Invocation* run, std::string* output) {
  run->coordinator = EnvOr("RINGMASTER_COORDINATOR", "127.0.0.1:7070");
  if (const char* env = std::getenv("RINGMASTER_TLS_DIR")) run->tls_dir = env;
  app.require_subcommand(1);
  // Subcommands made after this pass options they do not know to this app:
  // global options work after the verb too.
  app.fallthrough();
  app.set_version_flag("--version", "ringmaster " RINGMASTER_VERSION);
  app.add_option("--coordinator", run->coordinator,
                 "coordinator HOST:PORT (env RINGMASTER_COORDINATOR)")
      ->capture_default_str();
  app.add_option("--token-file", run->token_file,
                 "access token, in a file of mode 600 (else env RINGMASTER_TOKEN)");
  app.add_option("--tls-dir", run->tls_dir,
                 "TLS files of the cluster (env RINGMASTER_TLS_DIR; default: those of `up`, "
                 "for its coordinator; \"\" for plaintext)");
  app.add_flag("--insecure", run->insecure,
               "send the token in plaintext to a coordinator beyond loopback (no TLS dir; "
               "anyone on the way may read it)");
  app.add_option("--cert", run->cert,
                 "present this client certificate of the TLS dir: NAME.crt, or a user's "
                 "user-NAME.crt (default: admin.crt, unless a token is given)");
  app.add_option("-o,--output", *output, "table, json or yaml")
      ->check(CLI::Validator(
          [](const std::string& name) {
            return ParseOutputFormat(name) ? "" : name + " is not table, json or yaml";
          },
          "table|json|yaml"))
      ->capture_default_str();
}

void AddLocalClusterCommands(CLI::App& app, Invocation* run,
                             std::map<Command, CLI::App*>* commands) {
  LocalClusterOptions& cluster = run->cluster;
  cluster.state_dir = DefaultStateDir();
  CLI::App* up = app.add_subcommand("up", "start a local cluster in the background");
  up->add_option("--workers", cluster.workers, "number of workers")->capture_default_str();
  up->add_option("--slots", cluster.slots, "slots per worker")->capture_default_str();
  up->add_option("--state-dir", cluster.state_dir, "where the cluster keeps its state")
      ->capture_default_str();
  up->add_option("--rank-user", cluster.rank_user, "user[:group] ranks run as (default: you)");
  up->add_option("--rank-uid-range", cluster.rank_uid_range,
                 "give each job's ranks a uid of its own from FIRST-LAST instead (as root)");
  up->add_flag("--no-tls", run->no_tls, "plaintext on loopback, without certificates");
  up->add_option("--queues", cluster.queues_file,
                 "the coordinator's queues, quotas and priority classes (YAML)");
  up->add_option("--max-quarantined", cluster.max_quarantined,
                 "most workers quarantined at once: a share (\"20%\", the default) or a number");
  up->add_option("--regroup-timeout", cluster.regroup_timeout,
                 "when a trainer rank fails, how long the others keep their processes waiting "
                 "for its replacement (\"60s\", the default; 0: every rank restarts)");
  up->add_option("--store", cluster.store,
                 "where the coordinator keeps jobs: sqlite:///PATH (default: in the state dir) "
                 "or postgresql://USER@HOST[:PORT]/DB");
  up->add_option("--container-runtime", cluster.container_runtime,
                 "the workers run ranks of jobs with an image under this OCI runtime (runc, crun)");
  up->add_option("--registry-auth", cluster.registry_auth,
                 "the workers' image registry credentials (auth.json)");
  up->add_option("--registry-certs", cluster.registry_certs,
                 "DIR with <host:port>/ca.crt of image registries, for the workers");
  up->add_option("--image-cache-limit", cluster.image_cache_limit,
                 "each worker's image cache, at most (\"20GiB\", the workers' default)");
  up->add_option("--store-password-file", cluster.store_password_file,
                 "the PostgreSQL password, in a file only you can read");
  (*commands)[Command::kUp] = up;

  run->down_state_dir = cluster.state_dir;
  CLI::App* down = app.add_subcommand("down", "stop the local cluster started by up");
  down->add_option("--state-dir", run->down_state_dir, "the state dir given to up")
      ->capture_default_str();
  (*commands)[Command::kDown] = down;

  run->demo_cluster = cluster;
  run->demo_cluster.workers = 2;
  CLI::App* demo = app.add_subcommand("demo", "train on a real data set on a local cluster");
  demo->add_option("--state-dir", run->demo_cluster.state_dir, "where the cluster keeps its state")
      ->capture_default_str();
  (*commands)[Command::kDemo] = demo;

  CLI::App* certs = app.add_subcommand("certs", "TLS certificates of a cluster");
  certs->require_subcommand(1);
  CLI::App* init =
      certs->add_subcommand("init",
                            "make a CA and the coordinator's, admin's and workers' certificates "
                            "(keeps what exists, so it also adds workers)");
  init->add_option("--dir", run->certs_dir, "where to write them")->required();
  init->add_option("--host", run->certs.hosts,
                   "a name or IP the coordinator is dialed at by other tools, added to its "
                   "certificate (repeat)");
  init->add_option("--worker", run->certs.worker_ids,
                   "a worker id to make a certificate for, naming only that worker (repeat)");
  init->add_option("--user", run->certs.users,
                   "a user to make a client certificate for, user-NAME.crt; the user owns the "
                   "jobs it submits (repeat)");
  init->add_option("--days", run->certs.valid_days, "days the certificates are valid")
      ->capture_default_str();
  (*commands)[Command::kCertsInit] = init;
  CLI::App* renew = certs->add_subcommand(
      "renew",
      "make every certificate in --dir again, with the same names and new keys "
      "(not the CA); restart the daemons to load them");
  renew->add_option("--dir", run->certs_dir, "the directory of certs init")->required();
  renew->add_option("--days", run->certs.valid_days, "days the new certificates are valid")
      ->capture_default_str();
  (*commands)[Command::kCertsRenew] = renew;
}

void AddJobCommands(CLI::App& app, Invocation* run, std::map<Command, CLI::App*>* commands) {
  CLI::App* submit = app.add_subcommand("submit", "submit a job spec (YAML or JSON; - = stdin)");
  submit->add_option("FILE", run->submit.file, "job spec file")->required();
  submit->add_flag("--follow,-f", run->submit.follow, "stream progress until the job ends");
  submit->add_flag(
      "--no-upload", [run](int64_t) { run->submit.upload = false; },
      "do not ship the current directory: without working_dir in the spec, "
      "ranks start in this same path on their hosts (shared storage)");
  submit
      ->add_option_function<int64_t>(
          "--upload-limit-mb", [run](int64_t mb) { run->submit.upload_limit_bytes = mb << 20; },
          "most MiB of files the shipped directory may hold (default 100)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  submit->add_option("--request-id", run->submit.request_id,
                     "submitting again with the same id (and spec) returns the same job");
  submit->add_option("--resume-from", run->submit.resume_from,
                     "start from the checkpoints of this ended job of yours (the spec's "
                     "resume_from)");
  submit->add_option("--image", run->submit.image,
                     "run the ranks in this OCI image (the spec's image), e.g. "
                     "registry.example:5000/team/train:1.2");
  (*commands)[Command::kSubmit] = submit;

  CLI::App* jobs = app.add_subcommand("jobs", "list jobs, newest first");
  jobs->add_option("--limit", run->jobs.limit, "how many")->capture_default_str();
  jobs->add_flag("--all", run->jobs.all, "every job");
  jobs->add_option("--state", run->jobs.states, "only jobs in this state (repeat)");
  jobs->add_option("--label,-l", run->jobs.labels,
                   "only jobs with this label, key=value (repeat: all of them)");
  (*commands)[Command::kJobs] = jobs;

  CLI::App* status = app.add_subcommand("status", "show one job");
  status->add_option("JOB", run->job_id, "job id")->required();
  (*commands)[Command::kStatus] = status;

  CLI::App* logs = app.add_subcommand(
      "logs", "print a job's output, each line [rank R]: its latest attempt's, or --attempt N's");
  logs->add_option("JOB", run->job_id, "job id")->required();
  logs->add_option("--rank", run->logs.rank, "only this rank");
  logs->add_option("--attempt", run->logs.attempt,
                   "only this attempt (0 is the first; `status` shows the current one)");
  logs->add_option("--tail", run->logs.tail, "begin at each rank's last N lines")
      ->check(CLI::NonNegativeNumber);
  logs->add_flag("--timestamps", run->logs.timestamps,
                 "begin each line with when the worker read it (RFC 3339, UTC)");
  logs->add_flag("--follow,-f", run->logs.follow,
                 "keep printing until the job ends, through its restarts");
  (*commands)[Command::kLogs] = logs;

  (*commands)[Command::kWorkers] = app.add_subcommand("workers", "list workers");
  (*commands)[Command::kImages] = app.add_subcommand(
      "images", "the images each worker has cached: size, ranks in them, last use");
  (*commands)[Command::kQueues] = app.add_subcommand(
      "queues", "list queues: weight, quota, limit, in use, borrowed, running and pending jobs");

  CLI::App* stacks = app.add_subcommand(
      "stacks", "take every rank's stacks into its log, and say where each rank is");
  stacks->add_option("JOB", run->job_id, "job id")->required();
  (*commands)[Command::kStacks] = stacks;

  CLI::App* top = app.add_subcommand("top", "live view of jobs and workers (q to quit)");
  top->add_option("--iterations", run->iterations, "stop after this many frames (0: until q)");
  top->add_flag("--all", run->all, "finished jobs too (the newest 100 jobs)");
  (*commands)[Command::kTop] = top;

  CLI::App* ui = app.add_subcommand(
      "ui", "print a URL that signs a browser in to the web console, once, as this credential");
  ui->add_flag("--open", run->ui.open, "open it in the desktop's browser ($BROWSER, xdg-open)");
  ui->add_flag("--proxy", run->ui.proxy,
               "serve the console on 127.0.0.1 through TLS to the coordinator until Ctrl-C, so "
               "that the browser needs no CA");
  ui->add_option("--proxy-port", run->ui.proxy_port, "the proxy's port (0: a free one)")
      ->check(CLI::Range(0, 65535));
  ui->add_option("--url", run->ui.url,
                 "the console's base URL, when it is not the coordinator's host and HTTP port");
  (*commands)[Command::kUi] = ui;
}

// The admin's verbs on workers.
// What an owner changes of one job: stop, hold, release, priority,
// requeue, delete.
void AddJobChangeCommands(CLI::App& app, Invocation* run, std::map<Command, CLI::App*>* commands) {
  CLI::App* cancel = app.add_subcommand("cancel", "stop every rank of a job");
  cancel->add_option("JOB", run->job_id, "job id")->required();
  (*commands)[Command::kCancel] = cancel;

  CLI::App* hold = app.add_subcommand("hold", "keep a pending job from being scheduled");
  hold->add_option("JOB", run->job_id, "job id")->required();
  (*commands)[Command::kHold] = hold;
  CLI::App* release = app.add_subcommand("release", "let a held job be scheduled again");
  release->add_option("JOB", run->job_id, "job id")->required();
  (*commands)[Command::kRelease] = release;
  CLI::App* set_priority = app.add_subcommand(
      "set-priority", "give a pending job another priority (a class of the queues, or a number)");
  set_priority->add_option("JOB", run->job_id, "job id")->required();
  set_priority->add_option("PRIORITY", run->priority, "low, normal, high... or an integer")
      ->required();
  (*commands)[Command::kSetPriority] = set_priority;
  CLI::App* requeue = app.add_subcommand(
      "requeue", "run an ended job again: a new attempt of the same job, from its checkpoints");
  requeue->add_option("JOB", run->job_id, "job id")->required();
  (*commands)[Command::kRequeue] = requeue;

  CLI::App* remove = app.add_subcommand("delete", "forget an ended job: history, keys and logs");
  remove->add_option("JOB", run->job_id, "job id")->required();
  (*commands)[Command::kDelete] = remove;
}

void AddWorkerCommands(CLI::App& app, Invocation* run, std::map<Command, CLI::App*>* commands) {
  CLI::App* cordon = app.add_subcommand("cordon", "give a worker no new ranks (admin)");
  cordon->add_option("WORKER", run->worker_id, "worker id")->required();
  cordon->add_option("--reason", run->reason, "why, for `workers` to show");
  (*commands)[Command::kCordon] = cordon;
  CLI::App* uncordon =
      app.add_subcommand("uncordon", "make a cordoned or quarantined worker schedulable (admin)");
  uncordon->add_option("WORKER", run->worker_id, "worker id")->required();
  (*commands)[Command::kUncordon] = uncordon;
  CLI::App* drain = app.add_subcommand(
      "drain", "cordon a worker and move its jobs elsewhere, from a checkpoint (admin)");
  drain->add_option("WORKER", run->worker_id, "worker id")->required();
  drain->add_option("--reason", run->reason, "why, for `workers` to show");
  AddDurationOption(*drain, "--grace", &run->grace,
                    "SIGTERM to SIGKILL for its ranks, to checkpoint in (default 30s)");
  (*commands)[Command::kDrain] = drain;
}

// The options of `app`, long and short, as a shell completes them.
std::vector<std::string> OptionWords(const CLI::App& app) {
  std::vector<std::string> words;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) words.push_back("--" + name);
    for (const std::string& name : option->get_snames()) words.push_back("-" + name);
  }
  return words;
}

// A bash completion function built from the command line itself, so it
// knows every verb and option; zsh loads it through bashcompinit.
std::string CompletionScript(const CLI::App& app, const std::string& shell) {
  // The global options, without --help and --version: a verb's come after it.
  std::vector<std::string> global;
  for (const std::string& word : OptionWords(app)) {
    if (word != "--help" && word != "-h" && word != "--version") global.push_back(word);
  }
  std::vector<std::string> verbs;
  std::string cases;
  for (const CLI::App* sub : app.get_subcommands({})) {
    verbs.push_back(sub->get_name());
    std::vector<std::string> words = OptionWords(*sub);
    for (const CLI::App* nested : sub->get_subcommands({})) words.push_back(nested->get_name());
    if (sub->get_name() == "completion") words = {"bash", "zsh"};
    words.insert(words.end(), global.begin(), global.end());
    absl::StrAppend(&cases, "    ", sub->get_name(), ") words=\"", absl::StrJoin(words, " "),
                    "\" ;;\n");
  }
  std::vector<std::string> first = verbs;
  first.insert(first.end(), {"--help", "-h", "--version"});
  first.insert(first.end(), global.begin(), global.end());
  std::string script = absl::StrCat("# ringmaster ", shell,
                                    " completion: source <(ringmaster completion ", shell, ")\n");
  if (shell == "zsh") {
    absl::StrAppend(
        &script,
        "if ! whence compdef >/dev/null; then autoload -U +X compinit && compinit -u; fi\n"
        "autoload -U +X bashcompinit && bashcompinit\n");
  }
  absl::StrAppend(
      &script,
      "_ringmaster() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
      "  local verb=\"\" words=\"\" i\n"
      "  case \"$prev\" in\n"
      "    -o|--output) COMPREPLY=($(compgen -W \"table json yaml\" -- \"$cur\")); return ;;\n"
      "  esac\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    case \"${COMP_WORDS[i]}\" in\n"
      "      ",
      absl::StrJoin(verbs, "|"),
      ") verb=\"${COMP_WORDS[i]}\"; break ;;\n"
      "    esac\n"
      "  done\n"
      "  case \"$verb\" in\n"
      "    \"\") words=\"",
      absl::StrJoin(first, " "), "\" ;;\n", cases,
      "  esac\n"
      "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
      "}\n"
      "complete -o default -F _ringmaster ringmaster\n");
  return script;
}

// The text with control characters (a newline, an escape sequence from a
// pasted argument) shown as \xNN, so that an error is one plain line.
std::string Printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      out += absl::StrFormat("\\x%02x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace

ParsedCommandLine ParseCommandLine(const std::vector<std::string>& args) {
  Invocation run;
  std::string output = "table";
  std::map<Command, CLI::App*> commands;
  CLI::App app{"ringmaster: run distributed data-parallel training jobs", "ringmaster"};
  AddGlobalOptions(app, &run, &output);
  AddLocalClusterCommands(app, &run, &commands);
  AddJobCommands(app, &run, &commands);
  AddJobChangeCommands(app, &run, &commands);
  AddWorkerCommands(app, &run, &commands);
  std::string shell;
  CLI::App* completion =
      app.add_subcommand("completion", "print a shell completion script (bash or zsh)");
  completion->add_option("SHELL", shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));

  ParsedCommandLine parsed;
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 reads from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    parsed.out = app.help();
    return parsed;
  } catch (const CLI::CallForAllHelp&) {
    parsed.out = app.help("", CLI::AppFormatMode::All);
    return parsed;
  } catch (const CLI::CallForVersion& version) {
    parsed.out = std::string(version.what()) + "\n";
    return parsed;
  } catch (const CLI::ParseError& e) {
    parsed.exit_code = 2;
    parsed.err = "ringmaster: " + Printable(e.what()) + " (see ringmaster --help)\n";
    return parsed;
  }
  if (completion->parsed()) {
    parsed.out = CompletionScript(app, shell);
    return parsed;
  }
  run.output = *ParseOutputFormat(output);
  run.cluster.tls = !run.no_tls;
  for (const auto& [command, sub] : commands) {
    if (sub->parsed()) run.command = command;
  }
  parsed.invocation = std::move(run);
  return parsed;
}

}  // namespace ringmaster
