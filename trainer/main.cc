// ringmaster-trainer: the built-in rank process. It reads its job's
// trainer spec from RINGMASTER_TRAINER_SPEC (JSON) or --spec FILE, joins
// the job's Gloo world through the coordinator's rendezvous store, and
// trains.
#include <linux/close_range.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/subprocess.h"
#include "common/tls.h"
#include "domain/flight_recorder.h"
#include "domain/group_generation.h"
#include "domain/job_spec_yaml.h"
#include "domain/rendezvous_client.h"
#include "domain/snapshot_segment.h"
#include "trainer/coordinator_gloo_store.h"
#include "trainer/dataset.h"
#include "trainer/gloo_collective.h"
#include "trainer/preflight_check.h"
#include "trainer/progress_reporter.h"
#include "trainer/regroup.h"
#include "trainer/stop_signal.h"
#include "trainer/trainer.h"
#include "trainer/trainer_env.h"
#ifdef RINGMASTER_WITH_CUDA
#include "common/cuda/cuda_check.h"
#include "trainer/cuda/gpu_runner.h"
#include "trainer/cuda/nccl_collective.h"
#endif

namespace ringmaster {
namespace {

void Log(const std::string& line) { std::cout << line << std::endl; }

// The error in torchrun's error file (TORCHELASTIC_ERROR_FILE), which the
// worker reads into the job's root cause: a collective's error names the
// peer it lost ("peer rank 2"), whose worker the coordinator then blames.
void WriteErrorFile(const absl::Status& status) {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0') return;
  google::protobuf::Struct root;
  (*root.mutable_fields())["message"].set_string_value(std::string(status.message()));
  std::string json;
  if (google::protobuf::util::MessageToJsonString(root, &json).ok()) std::ofstream(path) << json;
}

// The flight record the worker asked for (RINGMASTER_FLIGHT_RECORD); null
// when it asked for none or it cannot be made (the rank runs on without).
std::unique_ptr<FlightRecorder> OpenFlightRecord() {
  const char* path = std::getenv("RINGMASTER_FLIGHT_RECORD");
  if (path == nullptr || *path == '\0') return nullptr;
  absl::StatusOr<std::unique_ptr<FlightRecorder>> opened = FlightRecorder::Open(path);
  if (opened.ok()) return *std::move(opened);
  std::cerr << "ringmaster-trainer: " << opened.status().message() << std::endl;
  return nullptr;
}

int Fail(const absl::Status& status) {
  std::cerr << "ringmaster-trainer: " << status.message() << std::endl;
  WriteErrorFile(status);
  return 1;
}

absl::StatusOr<v1::TrainerSpec> ReadSpec(int argc, char** argv, const TrainerEnv& env) {
  if (argc == 3 && std::string(argv[1]) == "--spec") {
    std::ifstream in(argv[2]);
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<v1::JobSpec> job = ParseJobSpecYaml(text.str());
    if (!job.ok()) return job.status();
    return job->trainer();
  }
  if (env.spec_json.empty()) {
    return absl::InvalidArgumentError(
        "no trainer spec: set RINGMASTER_TRAINER_SPEC (as the worker does) or pass "
        "--spec FILE.yaml");
  }
  v1::TrainerSpec spec;
  auto status = google::protobuf::util::JsonStringToMessage(env.spec_json, &spec);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RINGMASTER_TRAINER_SPEC: ", status.message().as_string()));
  }
  return spec;
}

// A group of the job's ranks on its transport: NCCL on the rank's GPU when
// it was given one (CUDA builds), else Gloo. Bootstrap keys go under
// `prefix` (empty: the backend's own).
absl::StatusOr<std::unique_ptr<Collective>> ConnectGroupOn(const TrainerEnv& env,
                                                           gloo::rendezvous::Store& store,
                                                           const std::string& prefix, int rank,
                                                           int size) {
  const bool gpu = !env.visible_gpus.empty();
#ifdef RINGMASTER_WITH_CUDA
  if (gpu) {
    int devices = 0;
    if (absl::Status s = CudaDeviceCount(&devices); !s.ok() || devices == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("CUDA_VISIBLE_DEVICES=", env.visible_gpus,
                       " but no usable GPU: ", s.ok() ? "none seen" : std::string(s.message())));
    }
    NcclOptions options;
    if (!prefix.empty()) options.prefix = prefix;
    options.timeout = absl::ToChronoMilliseconds(env.collective_timeout);
    absl::StatusOr<std::unique_ptr<NcclCollective>> nccl =
        NcclCollective::Connect(store, rank, size, /*device=*/0, options);
    if (!nccl.ok()) return nccl.status();
    return std::unique_ptr<Collective>(*std::move(nccl));
  }
#else
  if (gpu) {
    return absl::FailedPreconditionError(
        "this rank was given GPUs but the trainer was built without CUDA; build it with "
        "bazel build --config=cuda //trainer:ringmaster-trainer");
  }
#endif
  GlooOptions options;
  if (!prefix.empty()) options.prefix = prefix;
  options.hostname = env.host;
  options.timeout = absl::ToChronoMilliseconds(env.collective_timeout);
  absl::StatusOr<std::unique_ptr<GlooCollective>> gloo =
      GlooCollective::Connect(store, rank, size, options);
  if (!gloo.ok()) return gloo.status();
  return std::unique_ptr<Collective>(*std::move(gloo));
}

// The job's world, in group `generation` of its attempt, for training. Sets
// context->make_runner for the GPU.
absl::StatusOr<std::unique_ptr<Collective>> Connect(const TrainerEnv& env,
                                                    gloo::rendezvous::Store& store, int generation,
                                                    GroupPlace place, TrainerContext* context) {
  absl::StatusOr<std::unique_ptr<Collective>> comm =
      ConnectGroupOn(env, store, GroupPrefix(generation), place.rank, place.size);
  if (!comm.ok()) return comm.status();
#ifdef RINGMASTER_WITH_CUDA
  if ((*comm)->backend() == "nccl") {
    cudaStream_t comm_stream = static_cast<NcclCollective*>(comm->get())->stream();
    context->make_runner = [comm_stream](const v1::TrainerSpec& s, const std::vector<int>& w) {
      return MakeGpuRunner(s, w, comm_stream);
    };
  }
#endif
  if (place.rank != 0) return comm;
  if ((*comm)->backend() == "nccl") {
    Log(absl::StrCat("collectives: nccl, ", place.size, " ranks"));
  } else {
    Log(absl::StrCat("collectives: gloo, ", place.size, " ranks, all-reduce over ",
                     static_cast<GlooCollective*>(comm->get())->transport()));
  }
  return comm;
}

// The pre-flight all-reduce's buffer, where `comm` reduces: device memory
// for NCCL.
using PreflightBuffer = std::unique_ptr<float, void (*)(float*)>;
absl::StatusOr<PreflightBuffer> MakePreflightBuffer(const Collective& comm) {
  constexpr size_t kFloats = kPreflightBytes / sizeof(float);
#ifdef RINGMASTER_WITH_CUDA
  if (comm.backend() == "nccl") {
    void* device = nullptr;
    CUDA_RETURN_IF_ERROR(cudaMalloc(&device, kPreflightBytes));
    PreflightBuffer buffer(static_cast<float*>(device), [](float* p) { cudaFree(p); });
    CUDA_RETURN_IF_ERROR(cudaMemset(device, 0, kPreflightBytes));
    return buffer;
  }
#endif
  return PreflightBuffer(new float[kFloats](), [](float* p) { delete[] p; });
}

// The attempt's rendezvous scope, where ranks post pre-flight reports and
// the coordinator its verdict.
class RendezvousBoard final : public PreflightBoard {
 public:
  explicit RendezvousBoard(RendezvousClient* client) : client_(client) {}
  absl::Status Post(const std::string& key, const std::string& value) override {
    return client_->Set(key, value);
  }
  absl::StatusOr<std::string> Await(const std::string& key, absl::Duration timeout) override {
    if (absl::Status s = client_->Wait({key}, timeout); !s.ok()) return s;
    return client_->Get(key);
  }

 private:
  RendezvousClient* const client_;
};

// The pre-flight check (trainer/preflight_check.h) on `world`, its pairs
// connected through `store` the same way.
absl::Status Preflight(const TrainerEnv& env, gloo::rendezvous::Store& store,
                       RendezvousClient* rendezvous, Collective* world,
                       std::function<bool()> stop_requested) {
  absl::StatusOr<PreflightBuffer> buffer = MakePreflightBuffer(*world);
  if (!buffer.ok()) return buffer.status();
  RendezvousBoard board(rendezvous);
  ConnectGroup pairs = [&](const std::string& prefix, int rank, int size) {
    return ConnectGroupOn(env, store, prefix, rank, size);
  };
  PreflightOptions options;
  options.verdict_timeout = env.collective_timeout;
  options.stop_requested = std::move(stop_requested);
  options.on_measured = [](const PreflightReport& report) {
    if (!report.error.empty()) {
      Log(absl::StrCat("pre-flight: failed: ", report.error));
      return;
    }
    Log(absl::StrFormat(
        "pre-flight: %d MB all-reduce, bus bandwidth %.2f GB/s with its best peer, %.2f GB/s "
        "across the job; waiting for the verdict",
        kPreflightBytes >> 20, report.bus_gb_per_s, report.world_gb_per_s));
  };
  if (absl::Status s = RunPreflight(world, {env.group_rank, env.local_rank}, pairs, &board,
                                    buffer->get(), kPreflightBytes / sizeof(float), options);
      !s.ok()) {
    return s;
  }
  Log("pre-flight: passed");
  return absl::OkStatus();
}

// Rank 0 prints the run's figures (world throughput: every rank's samples
// per second, summed) and saves the weights when asked to.
absl::Status Finish(const TrainerEnv& env, Collective& comm, const TrainResult& result) {
  float throughput = static_cast<float>(result.samples_per_second);
  if (absl::Status s = comm.AllReduceSum(&throughput, 1); !s.ok()) return s;
  if (comm.rank() != 0) return absl::OkStatus();
  Log(
      absl::StrFormat("final: test accuracy %.4f  test loss %.4f  throughput %.0f samples/s  "
                      "all-reduce %.1f MB in %.2f s",
                      result.eval_accuracy, result.eval_loss, throughput,
                      result.allreduce_bytes / 1e6, result.allreduce_seconds));
  if (!env.save_weights.empty()) {
    std::ofstream out(env.save_weights, std::ios::binary);
    out.write(reinterpret_cast<const char*>(result.params.data()),
              result.params.size() * sizeof(float));
  }
  return absl::OkStatus();
}

// `ringmaster-trainer --preflight -- PROGRAM ARGS...`: a command job's
// prelude. The check runs on the job's transport, its keys apart from
// anything the program may put in the scope; on "go" the process becomes
// the program (same pid, environment and log), so nothing else changes for
// the worker. SIGTERM keeps its default action here: a stop ends it at once.
int RunPrelude(int argc, char** argv) {
  if (argc < 4 || std::string(argv[2]) != "--") {
    return Fail(absl::InvalidArgumentError("usage: ringmaster-trainer --preflight -- PROGRAM ..."));
  }
  absl::StatusOr<TrainerEnv> env = ReadTrainerEnv(std::getenv);
  if (!env.ok()) return Fail(env.status());
  absl::StatusOr<std::string> program = ResolveProgram(
      argv[3], std::getenv("PATH") != nullptr ? std::getenv("PATH") : "/usr/bin:/bin");
  if (!program.ok()) return Fail(program.status());
  {
    absl::StatusOr<std::unique_ptr<RendezvousClient>> rendezvous =
        RendezvousClient::FromEnvironment();
    if (!rendezvous.ok()) return Fail(rendezvous.status());
    CoordinatorGlooStore store(rendezvous->get());
    absl::StatusOr<std::unique_ptr<Collective>> world =
        ConnectGroupOn(*env, store, "preflight/world", env->rank, env->world_size);
    if (!world.ok()) return Fail(world.status());
    absl::Status checked =
        Preflight(*env, store, rendezvous->get(), world->get(), [] { return false; });
    if (!checked.ok()) return Fail(checked);
  }  // the job's connections are closed before the program starts
  std::cout.flush();
  // Nothing of this process but stdio reaches the program.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  execv(program->c_str(), argv + 3);
  return Fail(absl::FailedPreconditionError(
      absl::StrCat("cannot run ", *program, ": ", std::strerror(errno))));
}

// The spec's data set, split and standardized; rank 0 says what it holds.
absl::StatusOr<TrainTestSplit> LoadData(const v1::TrainerSpec& spec, int rank) {
  absl::StatusOr<Dataset> all = LoadDataset(spec.data());
  if (!all.ok()) return all.status();
  const double test_fraction = spec.data().test_fraction() > 0 ? spec.data().test_fraction() : 0.2;
  TrainTestSplit data =
      SplitAndStandardize(*all, test_fraction, static_cast<uint64_t>(spec.seed()));
  if (rank == 0) {
    Log(absl::StrFormat("data %s: %d train rows, %d test rows, %d features, %d classes",
                        spec.data().path(), data.train.rows, data.test.rows, data.train.features,
                        data.train.classes));
  }
  return data;
}

// The segment the worker holds for this rank's snapshots, in `context`
// (with why there is none, if the worker said or it cannot be mapped).
std::unique_ptr<SnapshotSegment> MapSnapshotSegment(const TrainerEnv& env,
                                                    TrainerContext* context) {
  context->snapshots_refused = env.snapshot_refused;
  context->snapshot_fetched_step = env.snapshot_fetched_step;
  if (env.snapshot_fd < 0) return nullptr;
  absl::StatusOr<std::unique_ptr<SnapshotSegment>> mapped =
      SnapshotSegment::Map(env.snapshot_fd, 0, "the worker's snapshot segment");
  if (!mapped.ok()) {
    context->snapshots_refused = std::string(mapped.status().message());
    return nullptr;
  }
  context->snapshots = mapped->get();
  return *std::move(mapped);
}

// Where `rank` (as its process started) is in announced group `generation`:
// its index among the members. FAILED_PRECONDITION when the group goes on
// without it.
absl::StatusOr<GroupPlace> PlaceIn(RendezvousClient* rendezvous, int generation, int rank) {
  absl::StatusOr<std::string> announced = rendezvous->Get(GroupKey(generation));
  if (!announced.ok()) return announced.status();
  const std::string& value = *announced;
  std::vector<int> members;
  if (!ParseGroupValue(value, &members)) {
    return absl::InternalError(
        absl::StrCat("group ", generation, " was announced as \"", value, "\", not a rank list"));
  }
  const auto at = std::find(members.begin(), members.end(), rank);
  if (at == members.end()) {
    return absl::FailedPreconditionError(absl::StrCat("group ", generation, " of the attempt is ",
                                                      "ranks ", value, ", without rank ", rank));
  }
  return GroupPlace{static_cast<int>(at - members.begin()), static_cast<int>(members.size())};
}

// How the rank forms its attempt's group again when a peer fails: waiting
// for the coordinator's announcement in slices, so that a stop ends the
// wait. With the rank's place in its first group: a replacement's, from its
// group's announcement.
absl::StatusOr<GroupHooks> Regroups(const TrainerEnv& env, gloo::rendezvous::Store& store,
                                    RendezvousClient* rendezvous, const StopSignal& stop) {
  GroupHooks hooks;
  hooks.generation = env.group_generation;
  hooks.regroup_timeout = env.regroup_timeout;
  hooks.place = {env.rank, env.world_size};
  hooks.connect = [&env, &store](int generation, GroupPlace place, TrainerContext* context) {
    return Connect(env, store, generation, place, context);
  };
  hooks.await = [rendezvous, &stop, rank = env.rank](
                    int generation, absl::Duration timeout) -> absl::StatusOr<GroupPlace> {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      if (stop.requested()) return absl::CancelledError("asked to stop");
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError(
            absl::StrCat("no group ", generation, " within ", absl::FormatDuration(timeout)));
      }
      absl::Status s = rendezvous->Wait({GroupKey(generation)}, std::min(left, absl::Seconds(1)));
      if (s.ok()) return PlaceIn(rendezvous, generation, rank);
      // UNAVAILABLE: a coordinator failing over, which the wait outlasts.
      // Any other error: the attempt's scope is gone (it ended).
      if (!absl::IsDeadlineExceeded(s) && !absl::IsUnavailable(s)) return s;
    }
  };
  hooks.log = Log;
  hooks.lost = [rendezvous, rank = env.rank](int generation, const absl::Status& why) {
    // Best effort: without it the coordinator learns of a lost worker later.
    if (absl::Status s = rendezvous->Set(LostPeerKey(generation, rank), std::string(why.message()));
        !s.ok()) {
      std::cerr << "cannot tell the coordinator of the lost peer: " << s.message() << std::endl;
    }
  };
  hooks.warn = [](const std::string& line) { std::cerr << line << std::endl; };
  if (env.group_generation > 0) {
    absl::StatusOr<GroupPlace> place =
        hooks.await(env.group_generation, std::max(env.regroup_timeout, absl::Seconds(1)));
    if (!place.ok()) return place.status();
    hooks.place = *place;
  }
  return hooks;
}

int Run(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << "ringmaster-trainer: the built-in rank process of Ringmaster's trainer jobs.\n"
                 "Usage: ringmaster-trainer [--spec FILE.yaml]\n"
                 "       ringmaster-trainer --preflight -- PROGRAM [ARGS...]\n"
                 "A worker starts it with the rank environment (docs/reference.md) and the\n"
                 "job's trainer spec in RINGMASTER_TRAINER_SPEC; --spec reads a job spec's\n"
                 "trainer: section from FILE instead. --preflight runs the job's pre-flight\n"
                 "check (docs/health.md) and, when it passes, becomes PROGRAM.\n";
    return 0;
  }
  if (argc >= 2 && std::string(argv[1]) == "--preflight") return RunPrelude(argc, argv);
  absl::StatusOr<TrainerEnv> env = ReadTrainerEnv(std::getenv);
  if (!env.ok()) return Fail(env.status());
  // Before any thread starts, so that every thread leaves SIGTERM to it.
  std::unique_ptr<StopSignal> stop_signal = StopSignal::Install(env->stop_grace);
  const StopSignal& stop = *stop_signal;
  absl::StatusOr<v1::TrainerSpec> spec = ReadSpec(argc, argv, *env);
  if (!spec.ok()) return Fail(spec.status());

  absl::StatusOr<TrainTestSplit> data = LoadData(*spec, env->rank);
  if (!data.ok()) return Fail(data.status());

  absl::StatusOr<std::unique_ptr<RendezvousClient>> rendezvous =
      RendezvousClient::FromEnvironment();
  if (!rendezvous.ok()) return Fail(rendezvous.status());
  CoordinatorGlooStore store(rendezvous->get());
  TrainerContext context;
  absl::StatusOr<GroupHooks> groups = Regroups(*env, store, rendezvous->get(), stop);
  if (!groups.ok()) return Fail(groups.status());
  absl::StatusOr<std::unique_ptr<Collective>> comm =
      Connect(*env, store, env->group_generation, groups->place, &context);
  if (!comm.ok()) return Fail(comm.status());
  // A replacement joins a group already checked.
  if (env->preflight && env->group_generation == 0) {
    absl::Status checked = Preflight(*env, store, rendezvous->get(), comm->get(),
                                     [&stop] { return stop.requested(); });
    if (!checked.ok()) return stop.requested() ? 128 + stop.signal() : Fail(checked);
  }

  std::unique_ptr<ProgressReporter> reporter;
  if (!env->worker_address.empty()) {
    v1::RankRef ref;
    ref.set_job_id(env->job_id);
    ref.set_attempt(env->attempt);
    ref.set_rank(env->rank);
    reporter = std::make_unique<ProgressReporter>(
        MakeChannel(env->worker_address, CaOnly(env->tls_ca), env->worker_id), env->token, ref);
    context.on_progress = [&](const v1::Progress& p) { reporter->Report(p); };
  }
  // Where this rank is, for its worker to read should the job hang.
  std::unique_ptr<FlightRecorder> flight = OpenFlightRecord();
  context.flight = flight.get();
  context.comm = comm->get();
  context.checkpoint_dir = env->checkpoint_dir;
  context.stop_requested = [&stop] { return stop.requested(); };
  std::atomic<int64_t> steps_done{0};
  context.steps_done = &steps_done;
  context.warn = [](const std::string& line) { std::cerr << line << std::endl; };
  context.attempt = env->attempt;
  context.snapshot_rank = env->rank;
  const std::unique_ptr<SnapshotSegment> snapshots = MapSnapshotSegment(*env, &context);
  absl::StatusOr<TrainResult> result = TrainInGroups(*spec, *data, context, *groups, &*comm);
  // Asked to stop, a rank ends as the signal would have ended it: rank 0
  // after its checkpoint, the others when rank 0 is gone.
  const int stopped_code = 128 + stop.signal();
  if (!result.ok()) {
    std::cerr << "ringmaster-trainer: " << (stop.requested() ? "stopped" : "failed")
              << " after step " << steps_done.load() << ": " << result.status().message()
              << std::endl;
    if (!stop.requested()) WriteErrorFile(result.status());
    return stop.requested() ? stopped_code : 1;
  }
  if (result->stopped) return stopped_code;
  if (absl::Status s = Finish(*env, **comm, *result); !s.ok()) return Fail(s);
  return 0;
}

}  // namespace
}  // namespace ringmaster

int main(int argc, char** argv) { return ringmaster::Run(argc, argv); }
