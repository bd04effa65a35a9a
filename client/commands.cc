#include "client/commands.h"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <google/protobuf/struct.pb.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/client.h"
#include "client/code_package.h"
#include "client/output.h"
#include "client/top.h"
#include "common/labels.h"
#include "common/net.h"
#include "common/status_macros.h"
#include "domain/job_spec_yaml.h"
#include "domain/spec_validation.h"

namespace ringmaster {
namespace {

constexpr int kOk = 0;
constexpr int kFailed = 1;
constexpr int kUsage = 2;

// Bad usage is the client's own finding; whatever the coordinator refuses
// is a refused request.
int Fail(const absl::Status& status) {
  std::cerr << "ringmaster: " << status.message() << std::endl;
  return status.code() == absl::StatusCode::kInvalidArgument && !FromCoordinator(status) ? kUsage
                                                                                         : kFailed;
}

Client MakeClient(const GlobalOptions& global) {
  return Client(global.coordinator, global.token, global.tls);
}

std::string CurrentUser() {
  const passwd* user = getpwuid(geteuid());
  return user != nullptr ? user->pw_name : "";
}

// `up` and `demo`: the local cluster, and the CLI's view of it.
absl::StatusOr<LocalCluster> Up(GlobalOptions* global, LocalClusterOptions options) {
  options.coordinator_address = global->coordinator;
  options.token = global->token;
  if (!options.rank_user.empty() && !options.rank_uid_range.empty()) {
    return absl::InvalidArgumentError("--rank-user and --rank-uid-range: give one");
  }
  // As torchrun's, ranks run as the user who starts the cluster; as root,
  // as the installed worker's, each job as a uid of its own.
  if (options.rank_user.empty() && options.rank_uid_range.empty() && geteuid() != 0) {
    options.rank_user = CurrentUser();
  }
  ASSIGN_OR_RETURN(LocalCluster cluster, StartLocalCluster(options));
  if (options.tls) {
    ASSIGN_OR_RETURN(global->tls, LoadClientTls(TlsDirOf(options.state_dir)));
  }
  return cluster;
}

// A bar for terminals: "[#######.............]  35%".
std::string Bar(const v1::Progress& p) {
  if (p.total_steps() <= 0) return "";
  constexpr int kWidth = 24;
  const double done = std::min(1.0, static_cast<double>(p.step()) / p.total_steps());
  const int filled = static_cast<int>(done * kWidth);
  return absl::StrFormat("[%s%s] %3.0f%%  ", std::string(filled, '#'),
                         std::string(kWidth - filled, '.'), done * 100);
}

// Follows a job to its end; prints state changes, and progress as a bar
// on a terminal or a line every few seconds otherwise.
int Follow(Client& client, const std::string& job_id, OutputFormat format) {
  const bool tty = isatty(STDOUT_FILENO);
  v1::JobState last_state = v1::JOB_STATE_UNSPECIFIED;
  int last_attempt = -1;
  absl::Time last_progress_print = absl::InfinitePast();
  bool bar_shown = false;
  v1::Job final_job;
  absl::Status status = client.WatchJob(job_id, [&](const v1::Job& job) {
    final_job = job;
    if (format != OutputFormat::kTable) {
      std::cout << Render(job, format, /*stream=*/true) << std::flush;
      return true;
    }
    if (job.state() != last_state || job.attempt() != last_attempt) {
      if (bar_shown) std::cout << "\n";
      bar_shown = false;
      std::string message = job.history_size() ? job.history().rbegin()->message() : "";
      if (job.state() == v1::PENDING && !job.pending_reason().empty()) {
        message = job.pending_reason();
      }
      std::cout << absl::StrFormat("%s  %-10s %s", job.id(), JobStateLabel(job.state()), message)
                << std::endl;
      last_state = job.state();
      last_attempt = job.attempt();
    }
    const std::string progress = ProgressLine(job.progress());
    if (!progress.empty()) {
      if (tty) {
        std::cout << "\r" << Bar(job.progress()) << progress << "   " << std::flush;
        bar_shown = true;
      } else if (absl::Now() - last_progress_print > absl::Seconds(5)) {
        std::cout << progress << std::endl;
        last_progress_print = absl::Now();
      }
    }
    return true;
  });
  if (bar_shown) std::cout << "\n";
  if (!status.ok()) return Fail(status);
  return final_job.state() == v1::SUCCEEDED ? kOk : kFailed;
}

}  // namespace

int RunUp(const GlobalOptions& global, LocalClusterOptions options) {
  GlobalOptions cli = global;
  absl::StatusOr<LocalCluster> cluster = Up(&cli, options);
  if (!cluster.ok()) return Fail(cluster.status());
  if (!global.table()) {
    google::protobuf::Struct up;
    auto& fields = *up.mutable_fields();
    fields["coordinator"].set_string_value(cluster->coordinator_address);
    fields["workers"].set_number_value(cluster->workers);
    fields["state_dir"].set_string_value(options.state_dir);
    fields["already_running"].set_bool_value(cluster->already_running);
    fields["http"].set_string_value(cluster->http_url);
    for (const std::string& address : cluster->metrics_addresses) {
      fields["metrics"].mutable_list_value()->add_values()->set_string_value(address);
    }
    std::cout << Render(up, global.output) << std::flush;
  } else {
    std::cout << (cluster->already_running ? "already running: "
                  : cluster->restarted     ? "cluster restarted (part of it had stopped): "
                                           : "cluster up: ")
              << "coordinator " << cluster->coordinator_address << ", " << cluster->workers
              << " workers (state in " << options.state_dir << ")" << std::endl;
    if (!cluster->http_url.empty()) std::cout << "HTTP API: " << cluster->http_url << "/api/v1\n";
    if (!cluster->metrics_addresses.empty()) {
      std::cout << "metrics: coordinator " << cluster->metrics_addresses[0] << ", workers "
                << absl::StrJoin(cluster->metrics_addresses.begin() + 1,
                                 cluster->metrics_addresses.end(), " ")
                << std::endl;
    }
    if (options.state_dir != DefaultStateDir()) {
      std::cout << "for later commands: export RINGMASTER_STATE_DIR=" << options.state_dir
                << std::endl;
    }
  }
  return kOk;
}

namespace {

int PrintIssued(const absl::StatusOr<std::vector<IssuedCertificate>>& issued,
                const std::string& dir) {
  if (!issued.ok()) return Fail(issued.status());
  for (const IssuedCertificate& c : *issued) {
    std::cout << "wrote " << c.path << " (" << c.reason << "; valid until " << c.expires << ")"
              << std::endl;
  }
  if (issued->empty()) {
    std::cout << "nothing to do: " << dir << " has every certificate asked for" << std::endl;
  }
  return kOk;
}

}  // namespace

int RunCertsInit(const std::string& dir, const CertsOptions& options) {
  return PrintIssued(InitCertificates(dir, options), dir);
}

int RunCertsRenew(const std::string& dir, int valid_days) {
  return PrintIssued(RenewCertificates(dir, valid_days), dir);
}

int RunDown(const GlobalOptions&, const std::string& state_dir) {
  absl::Status status = StopLocalCluster(state_dir);
  if (!status.ok()) return Fail(status);
  std::cout << "cluster down" << std::endl;
  return kOk;
}

// The demo job: a real data set (scikit-learn's handwritten digits) on two
// ranks of the built-in trainer.
constexpr char kDemoSpec[] = R"(
name: demo-digits
ranks: 2
trainer:
  model: {type: mlp, hidden: [256, 256]}
  data: {path: digits, test_fraction: 0.2}
  epochs: 20
  batch_size: 64
  optimizer: {type: adamw, lr: 0.001, weight_decay: 0.01}
  lr_scaling: linear
  warmup_steps: 20
  checkpoint_every_steps: 100
  seed: 1
)";

int RunDemo(const GlobalOptions& global, LocalClusterOptions options) {
  absl::StatusOr<std::string> trainer = FindProgram("ringmaster-trainer");
  if (!trainer.ok()) return Fail(trainer.status());
  GlobalOptions cli = global;
  absl::StatusOr<LocalCluster> cluster = Up(&cli, options);
  if (!cluster.ok()) return Fail(cluster.status());
  std::cout << (cluster->already_running ? "using the running cluster at "
                                         : "started a local cluster at ")
            << cluster->coordinator_address << " (" << cluster->workers << " workers)" << std::endl;
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(kDemoSpec);
  if (!spec.ok()) return Fail(spec.status());
  Client client = MakeClient(cli);
  absl::StatusOr<std::string> id = client.Submit(*spec);
  int code = id.ok() ? Follow(client, *id, global.output) : Fail(id.status());
  if (id.ok()) {
    absl::StatusOr<v1::Job> job = client.GetJob(*id);
    if (job.ok() && job->state() == v1::SUCCEEDED) {
      const v1::Progress& p = job->progress();
      std::cout << absl::StrFormat(
                       "demo: digits, %d ranks, %d steps: test accuracy %.4f, "
                       "throughput %.0f samples/s",
                       job->world_size(), p.step(), p.eval_accuracy(), p.samples_per_second())
                << std::endl;
    } else {
      std::cerr << "ringmaster: the demo job did not succeed; see `ringmaster logs " << *id << "`"
                << std::endl;
      code = kFailed;
    }
  }
  if (!cluster->already_running) {
    absl::Status down = StopLocalCluster(options.state_dir);
    if (!down.ok()) return Fail(down);
  }
  return code;
}

namespace {

// Whether the job's ranks read the directory it is submitted from: any
// command, and the built-in trainer only for data at a relative path (not
// digits, synthetic data or an absolute path).
bool ReadsItsDirectory(const v1::JobSpec& spec) {
  if (!spec.has_trainer()) return true;
  const std::string& path = spec.trainer().data().path();
  return !(path == "digits" || absl::StartsWith(path, "synthetic:") || absl::StartsWith(path, "/"));
}

// Ships `dir` with the job: packs it, uploads it unless the coordinator has
// it, and names it in the spec.
absl::Status ShipWorkingDirectory(Client& client, const std::string& dir, int64_t limit_bytes,
                                  v1::JobSpec* spec) {
  std::string archive =
      (std::filesystem::temp_directory_path() / "ringmaster-code.XXXXXX").string();
  const int fd = mkstemp(archive.data());
  if (fd < 0) return absl::InternalError(absl::StrCat("mkstemp: ", strerror(errno)));
  close(fd);
  absl::Cleanup remove_archive = [&archive] { unlink(archive.c_str()); };
  ASSIGN_OR_RETURN(PackedDirectory packed, PackDirectory(dir, limit_bytes, archive));
  ASSIGN_OR_RETURN(bool already, client.UploadCode(archive, packed.sha256, packed.archive_bytes));
  std::cerr << (already ? "code already on the coordinator: " : "uploaded ") << dir << " ("
            << packed.files << " files, " << absl::StrFormat("%.1f", packed.file_bytes / 1048576.0)
            << " MiB; " << packed.sha256.substr(0, 12) << ")" << std::endl;
  v1::CodePackage* code = spec->mutable_code();
  code->set_sha256(packed.sha256);
  code->set_archive_bytes(packed.archive_bytes);
  code->set_source(absl::StrCat(Hostname(), ":", dir));
  return absl::OkStatus();
}

}  // namespace

int RunSubmit(const GlobalOptions& global, const SubmitOptions& options) {
  const std::string& file = options.file;
  std::stringstream text;
  if (file == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(file);
    if (!in) return Fail(absl::InvalidArgumentError(absl::StrCat("cannot read ", file)));
    text << in.rdbuf();
  }
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(text.str());
  if (!spec.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(file, ": ", spec.status().message())));
  }
  if (!options.resume_from.empty()) spec->set_resume_from(options.resume_from);
  if (!options.image.empty()) spec->set_image(options.image);
  std::error_code error;
  const std::string here = std::filesystem::current_path(error).string();
  const bool needs_here = spec->working_dir().empty() && ReadsItsDirectory(*spec);
  {
    // Checked here first, so that an invalid spec is bad usage and ships
    // no code; the coordinator checks again, against its own limits.
    v1::JobSpec shipped = *spec;
    if (needs_here && !shipped.has_code()) shipped.set_working_dir(here);
    if (absl::Status valid = ValidateJobSpec(shipped); !valid.ok()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(file, ": ", valid.message())));
    }
  }
  Client client = MakeClient(global);
  if (needs_here) {
    if (!options.upload) {
      spec->set_working_dir(here);
    } else if (absl::Status s =
                   ShipWorkingDirectory(client, here, options.upload_limit_bytes, &*spec);
               !s.ok()) {
      return Fail(s);
    }
  }
  absl::StatusOr<std::string> id = client.Submit(*spec, options.request_id);
  if (!id.ok()) {
    // The spec as given is refused (a field, a queue or priority class the
    // coordinator does not have; a queue, priority or preemptible: false
    // the user may not use): bad usage.
    const absl::StatusCode code = id.status().code();
    const absl::string_view message = id.status().message();
    const int exit_code = Fail(id.status());
    const bool spec_denied =
        code == absl::StatusCode::kPermissionDenied &&
        (absl::StartsWith(message, "queue: ") || absl::StartsWith(message, "priority: ") ||
         absl::StartsWith(message, "preemptible: "));
    return code == absl::StatusCode::kInvalidArgument || spec_denied ? kUsage : exit_code;
  }
  if (global.table()) {
    std::cout << *id << std::endl;
  } else if (!options.follow) {  // following, the first object names the job
    v1::SubmitJobResponse response;
    response.set_job_id(*id);
    std::cout << Render(response, global.output) << std::flush;
  }
  return options.follow ? Follow(client, *id, global.output) : kOk;
}

int RunJobs(const GlobalOptions& global, const JobsOptions& options) {
  v1::ListJobsRequest request;
  for (const std::string& name : options.states) {
    v1::JobState state;
    if (!v1::JobState_Parse(absl::AsciiStrToUpper(name), &state)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--state ", name, ": no such state")));
    }
    request.add_states(state);
  }
  for (const std::string& text : options.labels) {
    absl::StatusOr<std::pair<std::string, std::string>> label = ParseLabel(text);
    if (!label.ok()) return Fail(label.status());
    (*request.mutable_labels())[label->first] = label->second;
  }
  if (options.limit < 1) return Fail(absl::InvalidArgumentError("--limit must be >= 1"));
  Client client = MakeClient(global);
  v1::ListJobsResponse shown;
  do {
    const int room = options.limit - shown.jobs_size();
    request.set_page_size(options.all ? 0 : std::min(room, 500));
    absl::StatusOr<v1::ListJobsResponse> page = client.ListJobsPage(request);
    if (!page.ok()) return Fail(page.status());
    for (v1::Job& job : *page->mutable_jobs()) *shown.add_jobs() = std::move(job);
    shown.set_next_page_token(page->next_page_token());
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty() && (options.all || shown.jobs_size() < options.limit));
  if (!global.table()) {
    std::cout << Render(shown, global.output) << std::flush;
    return kOk;
  }
  PrintJobsTable(std::cout, {shown.jobs().begin(), shown.jobs().end()}, absl::Now());
  if (!shown.next_page_token().empty()) {
    std::cerr << "the newest " << shown.jobs_size() << " jobs; --all shows every one" << std::endl;
  }
  return kOk;
}

int RunDelete(const GlobalOptions& global, const std::string& job_id) {
  Client client = MakeClient(global);
  if (absl::Status s = client.DeleteJob(job_id); !s.ok()) return Fail(s);
  if (!global.table()) {
    google::protobuf::Struct deleted;
    (*deleted.mutable_fields())["deleted"].set_string_value(job_id);
    std::cout << Render(deleted, global.output) << std::flush;
  } else {
    std::cout << "deleted " << job_id << std::endl;
  }
  return kOk;
}

int RunStatus(const GlobalOptions& global, const std::string& job_id) {
  Client client = MakeClient(global);
  absl::StatusOr<v1::Job> job = client.GetJob(job_id);
  if (!job.ok()) return Fail(job.status());
  if (!global.table()) {
    std::cout << Render(*job, global.output) << std::flush;
  } else {
    PrintJobDetail(std::cout, *job, absl::Now());
  }
  return kOk;
}

int RunLogs(const GlobalOptions& global, const std::string& job_id, const LogsOptions& options) {
  Client client = MakeClient(global);
  v1::StreamLogsRequest request;
  request.set_job_id(job_id);
  request.set_all_ranks(!options.rank.has_value());
  request.set_rank(options.rank.value_or(0));
  if (options.attempt) request.set_attempt(*options.attempt);
  request.set_tail_lines(options.tail);
  request.set_timestamps(options.timestamps);
  request.set_follow(options.follow);
  const OutputFormat format = global.output;
  std::optional<int> attempt;  // of the lines printed last
  absl::Status status = client.StreamLogs(request, [&](const v1::LogChunk& chunk) {
    std::string out;
    // Following a job through a restart: where the next attempt begins.
    if (format == OutputFormat::kTable && attempt && *attempt != chunk.attempt()) {
      absl::StrAppend(&out, "--- attempt ", chunk.attempt(), " ---\n");
    }
    attempt = chunk.attempt();
    absl::string_view data = chunk.data();
    while (!data.empty()) {
      const size_t end = data.find('\n');
      absl::string_view line = data.substr(0, end);
      data.remove_prefix(end == absl::string_view::npos ? data.size() : end + 1);
      if (format == OutputFormat::kTable) {
        absl::StrAppend(&out, "[rank ", chunk.rank(), "] ", line, "\n");
        continue;
      }
      // One object per line: {"rank": R, "attempt": A, "time": "...", "line": "..."}.
      google::protobuf::Struct object;
      auto& fields = *object.mutable_fields();
      fields["rank"].set_number_value(chunk.rank());
      fields["attempt"].set_number_value(chunk.attempt());
      if (options.timestamps) {
        const size_t space = line.find(' ');
        fields["time"].set_string_value(std::string(line.substr(0, space)));
        line.remove_prefix(space == absl::string_view::npos ? line.size() : space + 1);
      }
      fields["line"].set_string_value(std::string(line));
      absl::StrAppend(&out, Render(object, format, /*stream=*/true));
    }
    std::cout << out << std::flush;
  });
  return status.ok() ? kOk : Fail(status);
}

int RunCancel(const GlobalOptions& global, const std::string& job_id) {
  Client client = MakeClient(global);
  absl::StatusOr<v1::Job> job = client.CancelJob(job_id);
  if (!job.ok()) return Fail(job.status());
  if (!global.table()) {
    std::cout << Render(*job, global.output) << std::flush;
  } else {
    std::cout << job->id() << " " << JobStateLabel(job->state()) << std::endl;
  }
  return kOk;
}

int RunChangeJob(const GlobalOptions& global, JobChange change, const std::string& job_id,
                 const std::string& priority) {
  Client client = MakeClient(global);
  absl::StatusOr<v1::Job> job = change == JobChange::kHold      ? client.HoldJob(job_id)
                                : change == JobChange::kRelease ? client.ReleaseJob(job_id)
                                : change == JobChange::kRequeue
                                    ? client.RequeueJob(job_id)
                                    : client.SetJobPriority(job_id, priority);
  if (!job.ok()) return Fail(job.status());
  if (!global.table()) {
    std::cout << Render(*job, global.output) << std::flush;
    return kOk;
  }
  std::cout << job->id() << " " << JobStateLabel(job->state());
  if (!job->held_by().empty()) std::cout << ", held by " << job->held_by();
  if (change == JobChange::kSetPriority) std::cout << ", priority " << job->priority();
  if (change == JobChange::kRequeue) std::cout << ", attempt " << job->attempt();
  std::cout << std::endl;
  return kOk;
}

int RunWorkers(const GlobalOptions& global) {
  Client client = MakeClient(global);
  absl::StatusOr<v1::ListWorkersResponse> workers = client.Workers();
  if (!workers.ok()) return Fail(workers.status());
  if (!global.table()) {
    std::cout << Render(*workers, global.output) << std::flush;
  } else {
    PrintWorkersTable(std::cout, *workers, absl::Now());
  }
  return kOk;
}

int RunImages(const GlobalOptions& global) {
  Client client = MakeClient(global);
  absl::StatusOr<std::vector<v1::Worker>> workers = client.ListWorkers();
  if (!workers.ok()) return Fail(workers.status());
  if (global.table()) {
    PrintImagesTable(std::cout, *workers, absl::Now());
    return kOk;
  }
  v1::ListWorkersResponse response;
  for (const v1::Worker& w : *workers) {
    v1::Worker* listed = response.add_workers();
    listed->set_id(w.id());
    *listed->mutable_images() = w.images();
  }
  std::cout << Render(response, global.output) << std::flush;
  return kOk;
}

int RunQueues(const GlobalOptions& global) {
  Client client = MakeClient(global);
  absl::StatusOr<v1::ListQueuesResponse> queues = client.ListQueues();
  if (!queues.ok()) return Fail(queues.status());
  if (!global.table()) {
    std::cout << Render(*queues, global.output) << std::flush;
  } else {
    PrintQueuesTable(std::cout, *queues);
  }
  return kOk;
}

namespace {

// "worker w1 CORDONED: cordoned by admin since ...: new NIC".
std::string WorkerLine(const v1::Worker& worker) {
  const std::string detail = CordonDetail(worker, absl::Now());
  return absl::StrCat("worker ", worker.id(), " ", WorkerSchedulingLabel(worker),
                      detail.empty() ? "" : ": ", detail);
}

// The worker's line, or the worker as -o asks.
int PrintWorker(const GlobalOptions& global, const absl::StatusOr<v1::Worker>& worker) {
  if (!worker.ok()) return Fail(worker.status());
  if (!global.table()) {
    std::cout << Render(*worker, global.output) << std::flush;
  } else {
    std::cout << WorkerLine(*worker) << std::endl;
  }
  return kOk;
}

}  // namespace

int RunStacks(const GlobalOptions& global, const std::string& job_id) {
  absl::StatusOr<v1::StacksReport> report = MakeClient(global).DumpStacks(job_id);
  if (!report.ok()) return Fail(report.status());
  if (!global.table()) {
    std::cout << Render(*report, global.output) << std::flush;
    return kOk;
  }
  PrintStacks(std::cout, *report);
  std::cout << "the stacks are in the ranks' logs: ringmaster logs " << job_id << " --attempt "
            << report->attempt() << "\n";
  return kOk;
}

int RunCordon(const GlobalOptions& global, const std::string& worker_id,
              const std::string& reason) {
  v1::CordonWorkerRequest request;
  request.set_worker_id(worker_id);
  request.set_reason(reason);
  return PrintWorker(global, MakeClient(global).CordonWorker(request));
}

int RunUncordon(const GlobalOptions& global, const std::string& worker_id) {
  return PrintWorker(global, MakeClient(global).UncordonWorker(worker_id));
}

int RunDrain(const GlobalOptions& global, const std::string& worker_id, const std::string& reason,
             absl::Duration grace) {
  v1::DrainWorkerRequest request;
  request.set_worker_id(worker_id);
  request.set_reason(reason);
  request.set_grace_s(static_cast<int32_t>(absl::ToInt64Seconds(grace)));
  absl::StatusOr<v1::DrainWorkerResponse> drained = MakeClient(global).DrainWorker(request);
  if (!drained.ok()) return Fail(drained.status());
  if (!global.table()) {
    std::cout << Render(*drained, global.output) << std::flush;
    return kOk;
  }
  std::cout << WorkerLine(drained->worker()) << "\n";
  if (drained->stopped_jobs().empty()) {
    std::cout << "no job ran there" << std::endl;
  } else {
    std::cout << "stopping " << absl::StrJoin(drained->stopped_jobs(), ", ") << " with a "
              << absl::FormatDuration(grace) << " grace: they resume elsewhere" << std::endl;
  }
  return kOk;
}

int RunTop(const GlobalOptions& global, int iterations, bool all) {
  Client client = MakeClient(global);
  return ringmaster::RunTop(client, {iterations, all, global.output});
}

}  // namespace ringmaster
