// Training throughput of the built-in trainer's engine: N rank processes
// (fork) joined by Gloo through a file store, the trainer loop exactly as a
// job runs it, on synthetic data. Prints one JSON line; bench/ddp_throughput.py
// runs it beside PyTorch DDP.
//
//   trainer_throughput --world 2 --steps 30 --warmup 5
//
// Across hosts, each host runs its own ranks of the world
// (bench/host_share.h) and prints their summed rate.
#include <sys/wait.h>
#include <unistd.h>

#include <gloo/rendezvous/file_store.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <atomic>
#include <thread>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "bench/bench_spec.h"
#include "bench/host_share.h"
#include "common/metrics.h"
#include "common/unique_fd.h"
#include "domain/snapshot_segment.h"
#include "trainer/dataset.h"
#include "trainer/gloo_collective.h"
#include "trainer/trainer.h"
#include "worker/worker_metrics.h"

namespace ringmaster {
namespace {

struct Config {
  HostShare share;  // --world and the ranks this host runs
  int steps = 30;
  int warmup = 5;
  int batch = 256;
  int features = 256;
  int classes = 10;
  std::string hidden = "2048,2048,2048";
  double bucket_mb = 25;
  std::string compression = "none";
  bool metrics = false;  // the progress relay and 1 Hz scrapes of a metrics registry
  // Snapshots after every step into a segment as a worker would hold it:
  // "off", "staged" or "bucketed" (trainer/snapshotter.h).
  std::string snapshots = "off";
  int checkpoint_every = 0;  // rank 0 writes a checkpoint to disk every this many steps
};

// The machine's CPU time in a window, as shares of its total.
struct CpuShares {
  double user = 0, system = 0, softirq = 0, idle = 0;
};

CpuShares SharesBetween(const MachineCpuTicks& a, const MachineCpuTicks& b) {
  const double total = static_cast<double>(b.total() - a.total());
  if (total <= 0) return {};
  auto share = [total](uint64_t from, uint64_t to) { return (to - from) / total; };
  return {share(a.user, b.user), share(a.system, b.system), share(a.softirq, b.softirq),
          share(a.idle, b.idle)};
}

// What one rank measured over the timed steps: its samples per second and
// the machine's CPU time in that window, as shares.
struct RankResult {
  double samples_per_second = -1;
  CpuShares cpu;
  SnapshotStats snapshots;  // the whole run's
  CheckpointWriterStats checkpoints;
};

// What a rank keeps beside its training, as --snapshots and
// --checkpoint-every ask: a snapshot segment as a worker would hold it
// (sparse: only the pages snapshots touch are taken), and a temporary
// checkpoint directory, removed with it.
struct Persistence {
  UniqueFd segment_fd;
  std::unique_ptr<SnapshotSegment> segment;
  std::string checkpoint_dir;

  absl::Status SetUp(const Config& c, v1::TrainerSpec* spec, TrainerContext* context) {
    if (c.snapshots != "off") {
      absl::StatusOr<UniqueFd> fd = SnapshotSegment::Create(uint64_t{4} << 30);
      if (!fd.ok()) return fd.status();
      segment_fd = *std::move(fd);
      absl::StatusOr<std::unique_ptr<SnapshotSegment>> mapped =
          SnapshotSegment::Map(segment_fd.get(), 0, "segment");
      if (!mapped.ok()) return mapped.status();
      segment = *std::move(mapped);
      context->snapshots = segment.get();
      context->snapshot_copy =
          c.snapshots == "staged" ? SnapshotCopy::kStaged : SnapshotCopy::kBucketed;
    }
    if (c.checkpoint_every > 0) {
      spec->set_checkpoint_every_steps(c.checkpoint_every);
      char dir[] = "/tmp/trainer-throughput-XXXXXX";
      if (mkdtemp(dir) == nullptr) return absl::InternalError("mkdtemp in /tmp failed");
      checkpoint_dir = context->checkpoint_dir = dir;
    }
    return absl::OkStatus();
  }
  ~Persistence() {
    if (!checkpoint_dir.empty()) std::filesystem::remove_all(checkpoint_dir);
  }
};

// One rank's run; samples_per_second is negative when it failed.
RankResult RunRank(const Config& c, int rank) {
  gloo::rendezvous::FileStore store(c.share.store);
  GlooOptions options;
  options.hostname = c.share.host;
  auto comm = GlooCollective::Connect(store, rank, c.share.world, options);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, comm.status().ToString().c_str());
    return {};
  }
  v1::TrainerSpec spec = BenchTrainerSpec(c.hidden, c.batch);
  spec.set_bucket_mb(c.bucket_mb);
  spec.set_grad_compression(c.compression);
  absl::StatusOr<TrainTestSplit> data =
      BenchData(static_cast<int64_t>(c.steps) * c.batch * c.share.world, c.features, c.classes);
  if (!data.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, data.status().ToString().c_str());
    return {};
  }

  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> step_times;
  // With metrics: every half second (as the trainer reports to its worker)
  // the progress goes into a worker's metrics, which a thread scrapes every
  // second (as Prometheus does).
  metrics::Registry registry;
  WorkerMetrics worker_metrics(&registry, "bench", nullptr,
                               [] { return std::vector<RankProcess>{}; });
  std::atomic<bool> done{false};
  std::thread scraper;
  if (c.metrics) {
    scraper = std::thread([&] {
      while (!done) {
        for (int i = 0; i < 20 && !done; ++i) usleep(50000);
        registry.Serialize();
      }
    });
  }
  // The timed window runs from the end of warm-up to the last step.
  const size_t first = c.warmup - 1, last = c.steps - 1;
  MachineCpuTicks cpu_at_first, cpu_at_last;
  Clock::time_point last_report = Clock::now();
  TrainerContext context;
  context.comm = comm->get();
  Persistence persistence;
  if (absl::Status s = persistence.SetUp(c, &spec, &context); !s.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, s.ToString().c_str());
    return {};
  }
  context.progress_interval_seconds = 0;  // a callback after every step, for the timing
  context.on_progress = [&](const v1::Progress& p) {
    step_times.push_back(Clock::now());
    if (step_times.size() == first + 1) cpu_at_first = ReadMachineCpuTicks();
    if (step_times.size() == last + 1) cpu_at_last = ReadMachineCpuTicks();
    if (c.metrics && step_times.back() - last_report > std::chrono::milliseconds(500)) {
      v1::RankProgress report;
      report.mutable_rank()->set_job_id("bench");
      report.mutable_rank()->set_rank(rank);
      *report.mutable_progress() = p;
      worker_metrics.OnProgress(report);
      last_report = step_times.back();
    }
  };
  auto result = Train(spec, *data, context);
  done = true;
  if (scraper.joinable()) scraper.join();
  if (!result.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, result.status().ToString().c_str());
    return {};
  }
  // Step k's time is taken after its optimizer update.
  const double seconds =
      std::chrono::duration<double>(step_times[last] - step_times[first]).count();
  return {static_cast<double>(last - first) * c.batch / seconds,
          SharesBetween(cpu_at_first, cpu_at_last), result->snapshots, result->checkpoints};
}

int Main(int argc, char** argv) {
  Config c;
  CLI::App app{"Trainer throughput, N rank processes over Gloo"};
  c.share.AddOptions(app);
  app.add_option("--steps", c.steps);
  app.add_option("--warmup", c.warmup);
  app.add_option("--batch", c.batch);
  app.add_option("--features", c.features);
  app.add_option("--classes", c.classes);
  app.add_option("--hidden", c.hidden);
  app.add_option("--bucket-mb", c.bucket_mb);
  app.add_option("--compression", c.compression);
  app.add_flag("--metrics", c.metrics, "relay progress into metrics and scrape them");
  app.add_option("--checkpoint-every", c.checkpoint_every,
                 "rank 0 checkpoints to a temporary directory every this many steps");
  app.add_option("--snapshots", c.snapshots, "off, staged or bucketed: a snapshot every step")
      ->check(CLI::IsMember({"off", "staged", "bucketed"}));
  CLI11_PARSE(app, argc, argv);
  c.share.Resolve();

  std::vector<int> pipes;
  std::vector<pid_t> pids;
  for (int rank = c.share.first_rank; rank < c.share.first_rank + c.share.ranks; ++rank) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const RankResult result = RunRank(c, rank);
      (void)!write(fds[1], &result, sizeof(result));
      _exit(result.samples_per_second > 0 ? 0 : 1);
    }
    close(fds[1]);
    pipes.push_back(fds[0]);
    pids.push_back(pid);
  }
  double total = 0;
  CpuShares cpu;            // as this host's first rank saw them
  SnapshotStats snapshots;  // this host's first rank's
  CheckpointWriterStats checkpoints;
  bool ok = true;
  for (size_t i = 0; i < pids.size(); ++i) {
    RankResult result;
    if (read(pipes[i], &result, sizeof(result)) != sizeof(result)) result = {};
    int status;
    waitpid(pids[i], &status, 0);
    ok &= result.samples_per_second > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    total += result.samples_per_second;
    if (i == 0) {
      cpu = result.cpu;
      snapshots = result.snapshots;
      checkpoints = result.checkpoints;
    }
  }
  if (!ok) return 1;
  std::printf(
      "{\"world\": %d, \"ranks\": %d, \"samples_per_second\": %.1f, \"batch_per_rank\": "
      "%d, \"cpu\": {\"user\": %.4f, \"system\": %.4f, \"softirq\": %.4f, \"idle\": %.4f}, "
      "\"snapshots\": {\"committed\": %lld, \"bytes\": %lld, \"copy_seconds\": %.6f, "
      "\"commit_seconds\": %.6f, \"wait_seconds\": %.6f}, \"checkpoints\": {\"written\": %lld, "
      "\"stage_seconds\": %.6f, \"write_seconds\": %.6f, \"wait_seconds\": %.6f}}\n",
      c.share.world, c.share.ranks, total, c.batch, cpu.user, cpu.system, cpu.softirq, cpu.idle,
      static_cast<long long>(snapshots.committed), static_cast<long long>(snapshots.bytes),
      snapshots.copy_seconds, snapshots.commit_seconds, snapshots.wait_seconds,
      static_cast<long long>(checkpoints.written), checkpoints.stage_seconds,
      checkpoints.write_seconds, checkpoints.wait_seconds);
  return 0;
}

}  // namespace
}  // namespace ringmaster

int main(int argc, char** argv) { return ringmaster::Main(argc, argv); }
