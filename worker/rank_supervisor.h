// Starts and supervises this worker's rank processes: one thread per rank
// spawns it, waits for it, escalates SIGTERM to SIGKILL when it is being
// stopped, and clears its process group before reporting the exit.
#ifndef RINGMASTER_WORKER_RANK_SUPERVISOR_H_
#define RINGMASTER_WORKER_RANK_SUPERVISOR_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "proto/worker.pb.h"
#include "worker/container_launch.h"
#include "worker/image_store.h"
#include "worker/job_code.h"
#include "worker/job_shm.h"
#include "worker/process_launcher.h"
#include "worker/rank_identity.h"
#include "worker/snapshot_peers.h"
#include "worker/snapshot_store.h"

namespace ringmaster {

struct RankSupervisorOptions {
  std::string log_dir;  // <log_dir>/<job>/attempt-<A>.rank-<R>.log
  // <jobs_dir>/<job>/rank-<R>.error/error.json is the rank's
  // TORCHELASTIC_ERROR_FILE (the job's directory, mode 0711, holds its code
  // too).
  std::string jobs_dir;
  std::string trainer_program;                  // run for argv[0] == "ringmaster-trainer"
  std::map<std::string, std::string> base_env;  // PATH and HOME of the worker
  // Who each job's ranks run as: with an identity per job, HOME and TMPDIR
  // are the job's own <jobs_dir>/<job>/home (0700, the job's).
  RankIdentities identities = RankIdentities::Shared(std::nullopt);
  // Ranks of a job with an identity of its own see only its processes.
  bool hide_other_jobs_processes = false;
  absl::Duration clear_group_timeout = absl::Seconds(10);
  // Unpacks the code of jobs that come with it (StartRank.code); not owned.
  JobCode* code = nullptr;
  // With hide_other_jobs_processes: each job's own /dev/shm; not owned.
  // Null: ranks see the host's.
  JobShm* shm = nullptr;
  // The GPUs this worker offers: a rank's CUDA_VISIBLE_DEVICES names its
  // own (StartRank.gpus) by UUID, and nothing for a rank without any.
  std::vector<v1::Gpu> gpus;
  // Where a job's checkpoint directory may lie (--checkpoint-roots); empty:
  // where the coordinator says (SetCoordinatorCheckpointRoots).
  std::vector<std::string> checkpoint_roots;
  // Where ranks that ask for one (StartRank.snapshot_segment) get their
  // snapshot segment; not owned. Null: no rank gets one.
  SnapshotStore* snapshots = nullptr;
  // Fills a rank's segment from a replica before it starts, and pushes its
  // snapshots to the peer its StartRank names while it runs; not owned.
  // Null: neither.
  SnapshotPeers* snapshot_peers = nullptr;
  // The images ranks of jobs with one (StartRank.image) run in; not owned.
  // Null: such a rank does not start, and says that this worker runs none.
  ImageStore* images = nullptr;
  // How they run: the OCI runtime, and where their bundles go.
  ContainerOptions container;
  int image_pulls = 2;  // --image-pulls, for what a waiting rank says
  // CDI specs giving what a rank in an image needs to use its GPUs.
  std::vector<std::string> cdi_spec_dirs;
  // A registry that cannot be reached is tried again after this, doubled
  // each time up to the limit, while the rank waits (until cleared).
  absl::Duration image_pull_backoff = absl::Seconds(2);
  absl::Duration image_pull_backoff_limit = absl::Minutes(5);
};

// Thread-safe. The callbacks run on the rank threads, never under the
// supervisor's mutex.
class RankSupervisor {
 public:
  struct Callbacks {
    std::function<void(const v1::RankStarted&)> started;
    std::function<void(const v1::RankExited&)> exited;
  };

  RankSupervisor(ProcessLauncher* launcher, RankSupervisorOptions options, Callbacks callbacks);
  // Stops every rank (no grace) and waits for the rank threads.
  ~RankSupervisor();

  // Starts the rank asynchronously; reports started, or exited with
  // start_failed. A rank already running under the same ref is left alone.
  void Start(const v1::StartRank& start);
  // SIGTERM to every rank of the job attempt (attempt < 0: all attempts),
  // SIGKILL after `grace`; each reports exited with stopped = true.
  void StopJob(const std::string& job_id, int attempt, absl::Duration grace);
  void StopAll(absl::Duration grace);
  // Blocks until no rank is running or `timeout` passes; true when none is.
  bool WaitAllExited(absl::Duration timeout);
  // The coordinator's checkpoint roots (Registered.checkpoint_roots), used
  // unless options.checkpoint_roots are given.
  void SetCoordinatorCheckpointRoots(std::vector<std::string> roots);

  // Running ranks with their process and slot.
  struct Process {
    v1::RankRef rank;
    pid_t pid = 0;
    int slot = 0;
    std::vector<int> gpus;
    int cpus = 0;  // reserved by its StartRank
    int64_t memory_mb = 0;
    std::optional<RunAs> run_as;  // nullopt: as the worker
    // pid is the OCI runtime's; the job's command runs below it
    // (ContainedCommand).
    bool in_image = false;
  };
  std::vector<Process> RunningProcesses();
  // The running rank whose job credential (RINGMASTER_JOB_TOKEN) is `token`.
  std::optional<v1::RankRef> RankOfJobToken(const std::string& token) const;
  std::string LogPath(const std::string& job_id, int attempt, int rank) const;
  // The rank's own directory, where it leaves files for the worker: its
  // error file, the trainer's flight record, Python's stacks. The rank
  // writes in it; the worker reads them only through RankDir.
  std::string RankDirPath(const v1::RankRef& ref) const;
  // Removes the job's log directory (and its code), unless a rank of it still runs (or
  // `job_id` is not a valid id); false when it did not.
  bool DeleteLogs(const std::string& job_id);
  // The jobs that have a log directory here.
  std::vector<std::string> LoggedJobs() const;
  // The ranks waiting for their image's pull, and how far it is.
  std::vector<v1::ImagePull> Pulls() const;

 private:
  using Key = std::tuple<std::string, int, int>;  // job, attempt, rank
  struct Rank {
    v1::StartRank start;
    pid_t pid = 0;                // 0 until spawned
    std::optional<RunAs> run_as;  // once spawned; nullopt: as the worker
    bool in_image = false;        // pid is the OCI runtime's
    bool stop_requested = false;
    absl::Time kill_at = absl::InfiniteFuture();
    bool exited = false;    // the process is gone
    bool reported = false;  // and the exit callback has returned
    std::thread thread;
  };

  // A rank thread's life: prepare, start, wait for the exit, report it.
  void Supervise(Rank* self);
  absl::StatusOr<LaunchSpec> LaunchSpecFor(const v1::StartRank& start) const;
  // The log directory, and the job's code when it comes with some (this
  // may wait for another rank's fetch).
  absl::Status PrepareFiles(const v1::StartRank& start, LaunchSpec* spec);
  // Moves `spec` into the rank's image (pulled if need be: the rank's
  // thread waits, until the rank is cleared), which it holds until
  // Supervise releases it and removes the container.
  struct Contained {
    ImageStore::Held image;
    std::string container;  // its id in the runtime
  };
  absl::StatusOr<Contained> EnterImage(Rank* self, const v1::StartRank& start, LaunchSpec* spec);
  // What the rank's GPUs need in its container, from their CDI spec;
  // FAILED_PRECONDITION when no spec names them (a device node alone
  // would need the GPU's minor number and a driver in the image).
  absl::StatusOr<ContainerEdits> GpuEdits(const v1::StartRank& start) const;
  // The image's pull; one that cannot reach the registry is tried again
  // with back-off, saying so in Pulls(), until it is reached or the rank
  // is cleared (CANCELLED).
  absl::StatusOr<ImageStore::Held> AcquireImage(Rank* self, const v1::StartRank& start,
                                                const ImageReference& ref,
                                                const ImageStore::ProgressFn& progress);
  // The rank's snapshot segment, named in its environment, when it asks
  // for one; its refusal, said there too, when there is no room.
  std::shared_ptr<SnapshotStore::Lease> HandSnapshotSegment(const v1::StartRank& start,
                                                            LaunchSpec* spec) const;
  // From a started process to its exit, stops delivered.
  void RunToExit(Rank* self, const v1::RankRef& ref, pid_t pid, const std::optional<RunAs>& run_as,
                 bool in_image, v1::RankExited* exited);
  // Sends SIGTERM now and SIGKILL at `grace` from now.
  void RequestStop(Rank& rank, absl::Duration grace) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReapFinishedThreads() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ProcessLauncher* const launcher_;
  const RankSupervisorOptions options_;
  const Callbacks callbacks_;

  // options_.checkpoint_roots, else the coordinator's.
  std::vector<std::string> CheckpointRoots() const;

  mutable Mutex mu_;
  std::map<Key, std::unique_ptr<Rank>> ranks_ ABSL_GUARDED_BY(mu_);
  // Set by the ranks' threads while they pull (EnterImage).
  std::map<Key, v1::ImagePull> pulls_ ABSL_GUARDED_BY(mu_);
  // Ranks whose exited process a newer group of their attempt replaced
  // (StartRank.generation), until their thread has reported the exit.
  std::vector<std::unique_ptr<Rank>> replaced_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> coordinator_checkpoint_roots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_RANK_SUPERVISOR_H_
