#include "worker/rank_supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint_roots.h"
#include "common/credentials.h"
#include "common/job_id.h"
#include "common/net.h"
#include "common/private_dir.h"
#include "common/status_macros.h"
#include "worker/checkpoint_copy.h"
#include "worker/error_file.h"
#include "worker/gpu_discovery.h"
#include "worker/rank_dir.h"

namespace ringmaster {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(50);
constexpr char kTrainerName[] = "ringmaster-trainer";

v1::RankRef RefOf(const v1::StartRank& start) { return start.rank(); }

// What the rank needs of its job's checkpoint directory, <root>/<job id>:
// rank 0 writes in it (or creates it in the root, unless the worker makes
// it), the others read it.
PathAccess CheckpointAccess(const std::string& root, const v1::RankRef& ref, bool worker_makes_it) {
  const std::string job_dir = absl::StrCat(root, "/", ref.job_id());
  std::error_code error;
  const std::string path =
      worker_makes_it || std::filesystem::is_directory(job_dir, error) ? job_dir : root;
  return {"checkpoint_dir", path, ref.rank() == 0 ? W_OK | X_OK : R_OK | X_OK};
}

// <root>/<job>, made by the worker for a job with a uid of its own (given
// to it, so that its ranks need no write access to the root) or one that
// resumes from an earlier job's checkpoints (`resume_from`, the earlier
// job's directory, copied in first). It is made whole under another name
// and renamed into place, so that a rank of the same job starting beside
// this one (or on another host of shared storage) never sees it half made.
// One that exists must be the job's, and is kept as it is. `root_fd` is
// the root, opened and checked (OpenCheckpointDir); `job` null: the
// worker's own user's; `earlier`: whose files `resume_from`'s are.
absl::Status MakeJobCheckpointDir(int root_fd, const std::string& root, const std::string& job_id,
                                  const std::optional<RunAs>& job, const CheckpointDir* resume_from,
                                  const std::optional<RunAs>& earlier) {
  static std::atomic<int> made{0};
  // The worker makes the directory in the root and renames it into place;
  // what goes into it once it is the job's is done as the job's uid
  // (FsIdentity), so that a worker without CAP_DAC_OVERRIDE can.
  const std::optional<RunAs> inside = resume_from != nullptr ? job : std::nullopt;
  const std::string dir = absl::StrCat(root, "/", job_id);
  const uid_t uid = job ? job->uid : geteuid();
  struct stat st {};
  if (fstatat(root_fd, job_id.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
      st.st_uid == uid) {
    return absl::OkStatus();  // made before (an earlier rank or attempt)
  }
  const std::string temp = absl::StrCat(".", job_id, ".", Hostname(), ".", getpid(), ".", made++);
  if (mkdirat(root_fd, temp.c_str(), 0700) != 0) {
    return ErrnoError(absl::StrCat("checkpoint_dir ", root));
  }
  auto undo = [&](absl::Status error) {
    if (inside) {  // what it holds is the job's; the directory, the worker's to remove
      FsIdentity as(inside);
      RemoveTreeAt(root_fd, temp);
    }
    RemoveTreeAt(root_fd, temp);
    return error;
  };
  if (job && fchownat(root_fd, temp.c_str(), job->uid, job->gid, AT_SYMLINK_NOFOLLOW) != 0) {
    return undo(ErrnoError(absl::StrCat("checkpoint_dir ", dir, ": chown")));
  }
  if (resume_from != nullptr) {
    UniqueFd into;
    {
      FsIdentity as(inside);
      into =
          UniqueFd(openat(root_fd, temp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    absl::StatusOr<CheckpointCopied> copied =
        into.get() < 0 ? ErrnoError(absl::StrCat("checkpoint_dir ", dir))
                       : CopyCheckpointTree(resume_from->fd.get(), into.get(), job, earlier);
    if (!copied.ok()) {
      return undo(absl::Status(copied.status().code(),
                               absl::StrCat("resume_from: ", copied.status().message())));
    }
    spdlog::info("job {}: copied {} files ({} bytes) of the job it resumes from into {}{}", job_id,
                 copied->files, copied->bytes, dir,
                 copied->passed_over > 0
                     ? absl::StrCat(", passing over ", copied->passed_over,
                                    " links, special files or files of another owner")
                     : "");
  }
  if (renameat2(root_fd, temp.c_str(), root_fd, job_id.c_str(), RENAME_NOREPLACE) == 0) {
    return absl::OkStatus();
  }
  const int rename_errno = errno;
  undo(absl::OkStatus()).IgnoreError();
  if (rename_errno != EEXIST) {
    errno = rename_errno;
    return ErrnoError(absl::StrCat("checkpoint_dir ", dir));
  }
  if (fstatat(root_fd, job_id.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
      st.st_uid != uid) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint_dir ", dir, " is not a directory of ", job ? job->name : "the worker's user",
        " (its owner is uid ", st.st_uid, "); remove it or give it to uid ", uid));
  }
  return absl::OkStatus();
}

// What a rank in an image that cannot start would meet at a restart too:
// no such image, tag or command, refused credentials, no room, a
// checkpoint_dir it may not bind. Not an unreachable registry, nor a
// worker without images (another may have).
bool NeverRetried(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kInvalidArgument:
      return true;
    default:
      return false;
  }
}

}  // namespace

RankSupervisor::RankSupervisor(ProcessLauncher* launcher, RankSupervisorOptions options,
                               Callbacks callbacks)
    : launcher_(launcher), options_(std::move(options)), callbacks_(std::move(callbacks)) {}

RankSupervisor::~RankSupervisor() {
  StopAll(absl::ZeroDuration());
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mu_);
    for (auto& [key, rank] : ranks_) {
      if (rank->thread.joinable()) threads.push_back(std::move(rank->thread));
    }
    for (auto& rank : replaced_) {
      if (rank->thread.joinable()) threads.push_back(std::move(rank->thread));
    }
  }
  for (auto& t : threads) t.join();
}

std::string RankSupervisor::LogPath(const std::string& job_id, int attempt, int rank) const {
  return absl::StrCat(options_.log_dir, "/", job_id, "/attempt-", attempt, ".rank-", rank, ".log");
}

void RankSupervisor::Start(const v1::StartRank& start) {
  Key key{start.rank().job_id(), start.rank().attempt(), start.rank().rank()};
  MutexLock lock(&mu_);
  ReapFinishedThreads();
  auto& slot = ranks_[key];
  if (slot != nullptr) {
    // A repeated command, unless it starts the rank again in a newer group
    // of its attempt once its process has exited.
    if (!slot->exited || start.generation() <= slot->start.generation()) return;
    replaced_.push_back(std::move(slot));
  }
  slot = std::make_unique<Rank>();
  slot->start = start;
  Rank* self = slot.get();
  slot->thread = std::thread([this, self] { Supervise(self); });
}

std::string RankSupervisor::RankDirPath(const v1::RankRef& ref) const {
  return absl::StrCat(options_.jobs_dir, "/", ref.job_id(), "/rank-", ref.rank(), ".error");
}

absl::StatusOr<LaunchSpec> RankSupervisor::LaunchSpecFor(const v1::StartRank& start) const {
  const v1::RankRef& ref = start.rank();
  LaunchSpec spec;
  spec.argv.assign(start.argv().begin(), start.argv().end());
  if (!spec.argv.empty() && spec.argv[0] == kTrainerName) {
    spec.argv[0] = options_.trainer_program;
  } else if (start.preflight_prelude()) {
    // The trainer checks the job's links, then becomes the program.
    spec.argv.insert(spec.argv.begin(), {options_.trainer_program, "--preflight", "--"});
  }
  spec.env = options_.base_env;
  for (const auto& [k, v] : start.env()) spec.env[k] = v;
  // The job's own PYTHONPATH first, then the worker's ringmaster package.
  auto ours = options_.base_env.find("PYTHONPATH");
  auto theirs = start.env().find("PYTHONPATH");
  if (ours != options_.base_env.end() && theirs != start.env().end() && !theirs->second.empty()) {
    spec.env["PYTHONPATH"] = absl::StrCat(theirs->second, ":", ours->second);
  }
  ASSIGN_OR_RETURN(spec.env["CUDA_VISIBLE_DEVICES"],
                   VisibleDevices(options_.gpus, {start.gpus().begin(), start.gpus().end()}));
  ASSIGN_OR_RETURN(spec.run_as, options_.identities.ForJob(ref.job_id()));
  if (options_.identities.per_job()) {
    spec.env["HOME"] = spec.env["TMPDIR"] = spec.run_as->home;
    spec.env.erase("USER");
    spec.hide_other_users_processes = options_.hide_other_jobs_processes;
  }
  spec.env["TORCHELASTIC_ERROR_FILE"] = absl::StrCat(RankDirPath(ref), "/", kErrorFile);
  // Where the worker reads a hung rank's whereabouts (StackCapture).
  spec.env["RINGMASTER_FLIGHT_RECORD"] = absl::StrCat(RankDirPath(ref), "/", kFlightRecordFile);
  spec.env["RINGMASTER_STACKS_FILE"] = absl::StrCat(RankDirPath(ref), "/", kPythonStacksFile);
  spec.working_dir = start.working_dir();
  spec.log_path = LogPath(ref.job_id(), ref.attempt(), ref.rank());
  spec.name = absl::StrCat(ref.job_id(), ".", ref.attempt(), ".", ref.rank());
  spec.memory_bytes = start.memory_bytes();
  return spec;
}

absl::Status RankSupervisor::PrepareFiles(const v1::StartRank& start, LaunchSpec* spec) {
  // A failure shows as the launcher's when it opens the log.
  (void)MakePrivateDir(std::filesystem::path(spec->log_path).parent_path().string(), 0750);
  // The ranks' user passes through the jobs' directories to its own.
  const std::filesystem::path error_dir = RankDirPath(start.rank());
  RETURN_IF_ERROR(MakePrivateDir(options_.jobs_dir, 0711));
  RETURN_IF_ERROR(MakePrivateDir(error_dir.parent_path().string(), 0711));
  RETURN_IF_ERROR(PrepareErrorDir(error_dir.string(), spec->run_as));
  if (options_.identities.per_job()) {
    RETURN_IF_ERROR(MakeRankDir(spec->run_as->home, spec->run_as));  // the job's scratch
  }
  if (!start.checkpoint_dir().empty()) {
    // Only where the operator allows. The worker makes the job's directory
    // for a uid of its own in a root itself, not in a directory below one,
    // which may be someone's: there rank 0 makes it, if its user may.
    ASSIGN_OR_RETURN(CheckpointDir dir,
                     OpenCheckpointDir(start.checkpoint_dir(), CheckpointRoots()));
    std::optional<CheckpointDir> resume_from;
    std::optional<RunAs> earlier;  // whose files those are
    if (!start.resume_from_dir().empty()) {
      if (!dir.is_root) {
        return absl::FailedPreconditionError(absl::StrCat(
            "resume_from: the job's checkpoint_dir ", start.checkpoint_dir(),
            " is not one of this worker's checkpoint roots, where it copies the checkpoints of "
            "the job it resumes from"));
      }
      // Opened, and read, as the earlier job's uid: its directory is its
      // own, mode 0700.
      absl::StatusOr<std::optional<RunAs>> earlier_as = options_.identities.ForJob(
          std::filesystem::path(start.resume_from_dir()).filename().string());
      if (!earlier_as.ok()) {
        return absl::Status(earlier_as.status().code(),
                            absl::StrCat("resume_from: whose files ", start.resume_from_dir(),
                                         " are: ", earlier_as.status().message()));
      }
      earlier = *std::move(earlier_as);
      absl::StatusOr<CheckpointDir> from = [&] {
        FsIdentity as(earlier);
        return OpenCheckpointDir(start.resume_from_dir(), CheckpointRoots());
      }();
      if (!from.ok()) {
        return absl::Status(from.status().code(),
                            absl::StrCat("resume_from: ", from.status().message()));
      }
      resume_from = *std::move(from);
    }
    const bool worker_makes_it = (options_.identities.per_job() || resume_from) && dir.is_root;
    if (worker_makes_it) {
      RETURN_IF_ERROR(MakeJobCheckpointDir(dir.fd.get(), start.checkpoint_dir(),
                                           start.rank().job_id(), spec->run_as,
                                           resume_from ? &*resume_from : nullptr, earlier));
    }
    spec->required_access.push_back(
        CheckpointAccess(start.checkpoint_dir(), start.rank(), worker_makes_it));
  }
  if (start.has_code()) {
    if (options_.code == nullptr) return absl::FailedPreconditionError("this worker takes no code");
    // The rank's thread may wait: the first rank of the job fetches.
    absl::StatusOr<std::string> dir =
        options_.code->Prepare(start.rank().job_id(), start.code(), spec->run_as);
    if (!dir.ok()) return dir.status();
    spec->working_dir = *dir;
  }
  // Last, so that nothing fails once it is held: Supervise releases it. A
  // rank in an image gets its job's even as the worker's own user: its
  // container would otherwise have one of its own, not shared with the
  // job's other ranks here.
  const bool in_image = !start.image().empty();
  if (options_.shm != nullptr && ((spec->hide_other_users_processes && spec->run_as) || in_image)) {
    const RunAs owner = spec->run_as ? *spec->run_as : RunAs{"", "", geteuid(), getegid(), {}};
    ASSIGN_OR_RETURN(spec->private_shm, options_.shm->Acquire(start.rank().job_id(), owner));
  }
  return absl::OkStatus();
}

void RankSupervisor::Supervise(Rank* self) {
  v1::StartRank start;
  {
    MutexLock lock(&mu_);
    start = self->start;
  }
  const v1::RankRef& ref = start.rank();
  absl::StatusOr<LaunchSpec> spec = LaunchSpecFor(start);
  if (spec.ok()) {
    if (absl::Status ready = PrepareFiles(start, &*spec); !ready.ok()) spec = ready;
  }
  // The job's /dev/shm, held from here on (a container takes it in its
  // own way, and a start that fails after this still lets it go).
  const bool holds_shm = spec.ok() && !spec->private_shm.empty();

  // Held until the rank exits: its segment stays the job's either way.
  std::shared_ptr<SnapshotStore::Lease> snapshot;
  if (spec.ok()) snapshot = HandSnapshotSegment(start, &*spec);
  std::unique_ptr<SnapshotPeers::Registration> replicas;
  if (snapshot != nullptr && options_.snapshot_peers != nullptr) {
    replicas = options_.snapshot_peers->Replicate(start, snapshot);
  }
  // Whose the rank's files are: a rank in an image is started by the
  // runtime, as the worker.
  const std::optional<RunAs> job_user = spec.ok() ? spec->run_as : std::nullopt;
  std::optional<Contained> image;
  bool never_retry = false;  // its image, tag or command does not exist...
  if (spec.ok() && !start.image().empty()) {
    absl::StatusOr<Contained> held = EnterImage(self, start, &*spec);
    if (held.ok()) {
      image = *std::move(held);
    } else {
      never_retry = NeverRetried(held.status());
      spec = held.status();
    }
  }
  v1::RankExited exited;
  *exited.mutable_rank() = ref;
  exited.set_generation(start.generation());
  absl::StatusOr<pid_t> pid = spec.ok() ? launcher_->Spawn(*spec) : spec.status();
  if (!pid.ok()) {
    spdlog::warn("job {} rank {}: cannot start: {}", ref.job_id(), ref.rank(),
                 pid.status().ToString());
    exited.set_start_failed(true);
    exited.set_message(std::string(pid.status().message()));
    exited.set_never_retry(never_retry);
  } else {
    RunToExit(self, ref, *pid, job_user, image.has_value(), &exited);
    if (exited.exit_code() != 0 || exited.signal() != 0) {
      exited.set_error(ReadRankError(RankDirPath(ref), job_user ? job_user->uid : geteuid()));
    }
  }
  // The container first: the job's /dev/shm is bound in it.
  if (image) {
    RemoveContainer(options_.container, image->container);
    options_.images->Release(image->image);
  }
  if (holds_shm) options_.shm->Release(ref.job_id());
  {
    MutexLock lock(&mu_);
    exited.set_stopped(self->stop_requested);
    self->exited = true;
  }
  callbacks_.exited(exited);
  MutexLock lock(&mu_);
  self->reported = true;
}

std::shared_ptr<SnapshotStore::Lease> RankSupervisor::HandSnapshotSegment(
    const v1::StartRank& start, LaunchSpec* spec) const {
  if (options_.snapshots == nullptr || !start.snapshot_segment()) return nullptr;
  absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> lease =
      options_.snapshots->Acquire(start.rank().job_id(), start.rank().rank());
  if (!lease.ok()) {
    // Not a failure to start: the rank's snapshots go to disk, and it says so.
    spdlog::warn("job {} rank {}: no snapshot segment: {}", start.rank().job_id(),
                 start.rank().rank(), std::string(lease.status().message()));
    spec->env["RINGMASTER_SNAPSHOT_REFUSED"] = std::string(lease.status().message());
    return nullptr;
  }
  spec->inherit_fd = (*lease)->fd();
  spec->env["RINGMASTER_SNAPSHOT_FD"] = std::to_string((*lease)->fd());
  if (options_.snapshot_peers != nullptr) {
    // The rank's thread may wait: a fetch from a peer.
    std::string fetched = options_.snapshot_peers->Restore(start, **lease);
    if (!fetched.empty()) spec->env["RINGMASTER_SNAPSHOT_FETCHED"] = std::move(fetched);
  }
  return *std::move(lease);
}

void RankSupervisor::RunToExit(Rank* self, const v1::RankRef& ref, pid_t pid,
                               const std::optional<RunAs>& run_as, bool in_image,
                               v1::RankExited* exited) {
  {
    MutexLock lock(&mu_);
    Rank& rank = *self;
    rank.pid = pid;
    rank.run_as = run_as;
    rank.in_image = in_image;
    // A stop that came before the process: deliver it now.
    if (rank.stop_requested) {
      launcher_->SignalGroup(rank.pid, rank.kill_at > absl::Now() ? SIGTERM : SIGKILL);
    }
  }
  spdlog::info("job {} rank {}: started pid {}", ref.job_id(), ref.rank(), pid);
  v1::RankStarted started;
  *started.mutable_rank() = ref;
  started.set_pid(pid);
  started.set_generation(exited->generation());
  callbacks_.started(started);

  ExitStatus status;
  while (!launcher_->WaitExit(pid, kPollInterval, &status)) {
    MutexLock lock(&mu_);
    Rank& rank = *self;
    if (absl::Now() >= rank.kill_at) {
      launcher_->SignalGroup(pid, SIGKILL);
      rank.kill_at = absl::InfiniteFuture();
    }
  }
  exited->set_oom_killed(launcher_->OomKilled(pid));
  if (!launcher_->ClearGroup(pid, options_.clear_group_timeout)) {
    spdlog::error("job {} rank {}: process group {} survived SIGKILL", ref.job_id(), ref.rank(),
                  pid);
  }
  exited->set_exit_code(status.exit_code);
  exited->set_signal(status.signal);
  spdlog::info("job {} rank {}: exited (code {}, signal {})", ref.job_id(), ref.rank(),
               status.exit_code, status.signal);
}

void RankSupervisor::RequestStop(Rank& rank, absl::Duration grace) {
  const bool repeated = rank.stop_requested;
  rank.stop_requested = true;
  const absl::Time kill_at = absl::Now() + std::max(grace, absl::ZeroDuration());
  if (repeated && kill_at >= rank.kill_at) return;  // already asked, as soon or sooner
  rank.kill_at = std::min(rank.kill_at, kill_at);
  if (rank.pid == 0 || rank.exited) return;
  launcher_->SignalGroup(rank.pid, grace > absl::ZeroDuration() ? SIGTERM : SIGKILL);
}

void RankSupervisor::StopJob(const std::string& job_id, int attempt, absl::Duration grace) {
  MutexLock lock(&mu_);
  for (auto& [key, rank] : ranks_) {
    if (std::get<0>(key) != job_id) continue;
    if (attempt >= 0 && std::get<1>(key) != attempt) continue;
    if (!rank->exited) RequestStop(*rank, grace);
  }
}

void RankSupervisor::StopAll(absl::Duration grace) {
  MutexLock lock(&mu_);
  for (auto& [key, rank] : ranks_) {
    if (!rank->exited) RequestStop(*rank, grace);
  }
}

void RankSupervisor::SetCoordinatorCheckpointRoots(std::vector<std::string> roots) {
  MutexLock lock(&mu_);
  coordinator_checkpoint_roots_ = std::move(roots);
}

std::vector<std::string> RankSupervisor::CheckpointRoots() const {
  if (!options_.checkpoint_roots.empty()) return options_.checkpoint_roots;
  MutexLock lock(&mu_);
  return coordinator_checkpoint_roots_;
}

bool RankSupervisor::WaitAllExited(absl::Duration timeout) {
  MutexLock lock(&mu_);
  auto none_running = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto& [key, rank] : ranks_) {
      if (!rank->exited) return false;
    }
    return true;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&none_running), timeout);
}

std::vector<RankSupervisor::Process> RankSupervisor::RunningProcesses() {
  MutexLock lock(&mu_);
  std::vector<Process> out;
  for (auto& [key, rank] : ranks_) {
    if (!rank->exited && rank->pid != 0) {
      out.push_back({RefOf(rank->start),
                     rank->pid,
                     rank->start.slot(),
                     {rank->start.gpus().begin(), rank->start.gpus().end()},
                     rank->start.cpus(),
                     rank->start.memory_bytes() >> 20,
                     rank->run_as,
                     rank->in_image});
    }
  }
  return out;
}

bool RankSupervisor::DeleteLogs(const std::string& job_id) {
  if (!ValidateJobId(job_id).ok()) return false;
  {
    MutexLock lock(&mu_);
    for (const auto& [key, rank] : ranks_) {
      if (std::get<0>(key) == job_id && !rank->reported) return false;
    }
    for (const auto& rank : replaced_) {
      if (rank->start.rank().job_id() == job_id && !rank->reported) return false;
    }
  }
  if (options_.code != nullptr) options_.code->Delete(job_id);
  std::error_code error;
  std::filesystem::remove_all(std::filesystem::path(options_.log_dir) / job_id, error);
  if (error) spdlog::warn("job {}: cannot remove its logs: {}", job_id, error.message());
  return !error;
}

std::vector<std::string> RankSupervisor::LoggedJobs() const {
  std::vector<std::string> jobs;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(options_.log_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && ValidateJobId(name).ok()) jobs.push_back(name);
  }
  std::sort(jobs.begin(), jobs.end());
  return jobs;
}

std::optional<v1::RankRef> RankSupervisor::RankOfJobToken(const std::string& token) const {
  MutexLock lock(&mu_);
  for (const auto& [key, rank] : ranks_) {
    auto it = rank->start.env().find("RINGMASTER_JOB_TOKEN");
    if (!rank->exited && it != rank->start.env().end() && SameSecret(it->second, token)) {
      return RefOf(rank->start);
    }
  }
  return std::nullopt;
}

void RankSupervisor::ReapFinishedThreads() {
  for (auto it = ranks_.begin(); it != ranks_.end();) {
    Rank& rank = *it->second;
    // A reported rank's thread holds nothing and is about to end.
    if (rank.reported && rank.thread.get_id() != std::this_thread::get_id()) {
      rank.thread.join();
      it = ranks_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = replaced_.begin(); it != replaced_.end();) {
    if ((*it)->reported && (*it)->thread.get_id() != std::this_thread::get_id()) {
      (*it)->thread.join();
      it = replaced_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<v1::ImagePull> RankSupervisor::Pulls() const {
  MutexLock lock(&mu_);
  std::vector<v1::ImagePull> pulls;
  for (const auto& [key, pull] : pulls_) pulls.push_back(pull);
  return pulls;
}

}  // namespace ringmaster
