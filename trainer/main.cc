// ringmaster-trainer: the built-in rank process. It reads its job's
// trainer spec from RINGMASTER_TRAINER_SPEC (JSON) or --spec FILE, joins
// the job's Gloo world through the coordinator's rendezvous store, and
// trains.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/client.h"
#include "client/job_spec_yaml.h"
#include "trainer/coordinator_gloo_store.h"
#include "trainer/dataset.h"
#include "trainer/gloo_collective.h"
#include "trainer/progress_reporter.h"
#include "trainer/trainer.h"
#ifdef RINGMASTER_WITH_CUDA
#include "common/cuda/cuda_check.h"
#include "trainer/cuda/gpu_runner.h"
#include "trainer/cuda/nccl_collective.h"
#endif

namespace ringmaster {
namespace {

std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

int EnvInt(const char* name, int fallback) {
  int v;
  return absl::SimpleAtoi(Env(name), &v) ? v : fallback;
}

void Log(const std::string& line) { std::cout << line << std::endl; }

int Fail(const absl::Status& status) {
  std::cerr << "ringmaster-trainer: " << status.message() << std::endl;
  return 1;
}

absl::StatusOr<v1::TrainerSpec> ReadSpec(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--spec") {
    std::ifstream in(argv[2]);
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<v1::JobSpec> job = ParseJobSpecYaml(text.str());
    if (!job.ok()) return job.status();
    return job->trainer();
  }
  const std::string json = Env("RINGMASTER_TRAINER_SPEC");
  if (json.empty()) {
    return absl::InvalidArgumentError(
        "no trainer spec: set RINGMASTER_TRAINER_SPEC (as the worker does) or pass "
        "--spec FILE.yaml");
  }
  v1::TrainerSpec spec;
  auto status = google::protobuf::util::JsonStringToMessage(json, &spec);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RINGMASTER_TRAINER_SPEC: ", status.message().as_string()));
  }
  return spec;
}

int Run(int argc, char** argv) {
  absl::StatusOr<v1::TrainerSpec> spec = ReadSpec(argc, argv);
  if (!spec.ok()) return Fail(spec.status());
  const int rank = EnvInt("RANK", 0);
  const int world = EnvInt("WORLD_SIZE", 1);

  absl::StatusOr<Dataset> all = LoadDataset(spec->data());
  if (!all.ok()) return Fail(all.status());
  const double test_fraction =
      spec->data().test_fraction() > 0 ? spec->data().test_fraction() : 0.2;
  TrainTestSplit data =
      SplitAndStandardize(*all, test_fraction, static_cast<uint64_t>(spec->seed()));
  if (rank == 0) {
    Log(absl::StrFormat("data %s: %d train rows, %d test rows, %d features, %d classes",
                        spec->data().path(), data.train.rows, data.test.rows,
                        data.train.features, data.train.classes));
  }

  std::unique_ptr<Collective> comm;
  std::unique_ptr<RendezvousClient> rendezvous;
  std::unique_ptr<CoordinatorGlooStore> store;
  TrainerContext context;
  absl::StatusOr<std::unique_ptr<RendezvousClient>> client = RendezvousClient::FromEnvironment();
  if (!client.ok()) return Fail(client.status());
  rendezvous = *std::move(client);
  store = std::make_unique<CoordinatorGlooStore>(rendezvous.get());
  // A rank given GPUs (CUDA_VISIBLE_DEVICES) trains on its first one with
  // NCCL; a CPU slot gets an empty list and trains with Gloo.
  const bool gpu = !Env("CUDA_VISIBLE_DEVICES").empty();
#ifdef RINGMASTER_WITH_CUDA
  if (gpu) {
    int devices = 0;
    if (absl::Status s = CudaDeviceCount(&devices); !s.ok() || devices == 0) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          "CUDA_VISIBLE_DEVICES=", Env("CUDA_VISIBLE_DEVICES"), " but no usable GPU: ",
          s.ok() ? "none seen" : std::string(s.message()))));
    }
    absl::StatusOr<std::unique_ptr<NcclCollective>> nccl =
        NcclCollective::Connect(*store, rank, world, /*device=*/0, NcclOptions{});
    if (!nccl.ok()) return Fail(nccl.status());
    cudaStream_t comm_stream = (*nccl)->stream();
    context.make_runner = [comm_stream](const v1::TrainerSpec& s, const std::vector<int>& w) {
      return MakeGpuRunner(s, w, comm_stream);
    };
    if (rank == 0) Log(absl::StrCat("collectives: nccl, ", world, " ranks"));
    comm = *std::move(nccl);
  }
#else
  if (gpu) {
    return Fail(absl::FailedPreconditionError(
        "this rank was given GPUs but the trainer was built without CUDA; build it with "
        "bazel build --config=cuda //trainer:ringmaster-trainer"));
  }
#endif
  if (!gpu) {
    GlooOptions options;
    options.hostname = Env("RINGMASTER_HOST", "127.0.0.1");
    absl::StatusOr<std::unique_ptr<GlooCollective>> gloo =
        GlooCollective::Connect(*store, rank, world, options);
    if (!gloo.ok()) return Fail(gloo.status());
    if (rank == 0) {
      Log(absl::StrCat("collectives: gloo, ", world, " ranks, all-reduce over ",
                       (*gloo)->transport()));
    }
    comm = *std::move(gloo);
  }

  std::unique_ptr<ProgressReporter> reporter;
  if (const std::string worker = Env("RINGMASTER_WORKER_ADDRESS"); !worker.empty()) {
    v1::RankRef ref;
    ref.set_job_id(Env("RINGMASTER_JOB_ID"));
    ref.set_attempt(EnvInt("TORCHELASTIC_RESTART_COUNT", 0));
    ref.set_rank(rank);
    reporter = std::make_unique<ProgressReporter>(worker, ref);
  }
  context.comm = comm.get();
  context.checkpoint_dir = Env("RINGMASTER_CHECKPOINT_DIR");
  if (reporter) context.on_progress = [&](const v1::Progress& p) { reporter->Report(p); };
  if (rank == 0) context.log = Log;
  absl::StatusOr<TrainResult> result = Train(*spec, data, context);
  if (!result.ok()) return Fail(result.status());

  // World throughput: every rank's samples per second, summed.
  float throughput = static_cast<float>(result->samples_per_second);
  if (absl::Status s = comm->AllReduceSum(&throughput, 1); !s.ok()) return Fail(s);
  if (rank == 0) {
    Log(absl::StrFormat(
        "final: test accuracy %.4f  test loss %.4f  throughput %.0f samples/s  "
        "all-reduce %.1f MB in %.2f s",
        result->eval_accuracy, result->eval_loss, throughput, result->allreduce_bytes / 1e6,
        result->allreduce_seconds));
    if (const std::string path = Env("RINGMASTER_TRAINER_SAVE_WEIGHTS"); !path.empty()) {
      std::ofstream out(path, std::ios::binary);
      out.write(reinterpret_cast<const char*>(result->params.data()),
                result->params.size() * sizeof(float));
    }
  }
  return 0;
}

}  // namespace
}  // namespace ringmaster

int main(int argc, char** argv) { return ringmaster::Run(argc, argv); }
