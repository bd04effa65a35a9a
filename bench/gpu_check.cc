// What `./dev gpu-check` measures on this machine's GPUs, one rank per GPU
// as threads of this process:
//
// - NCCL all-reduce bus bandwidth from 1 MB to 1 GB, by the formula of
//   nccl-tests (busbw = bytes / time x 2(n-1)/n), beside the link the GPUs
//   reach each other through (NVML) and its bandwidth in one direction, the
//   most a ring can reach; the sums are checked exact;
// - the built-in trainer's throughput on an MLP at 1, 2, 4 ... N GPUs and the
//   scaling efficiency against N x one GPU.
//
// Ends with one "check:" line per check; exits 1 when one failed, 2 when
// there is no GPU.
//
//   gpu_check [--max-mb 1024] [--iterations 20] [--steps 30] [--batch 1024]
#include <gloo/rendezvous/hash_store.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_spec.h"
#include "common/cuda/cuda_check.h"
#include "trainer/cuda/gpu_runner.h"
#include "trainer/cuda/nccl_collective.h"
#include "trainer/trainer.h"
#include "worker/nvml.h"

namespace ringmaster {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int max_mb = 1024;
  int iterations = 20;
  int steps = 30;
  int warmup = 10;
  int batch = 1024;
  int features = 512;
  int classes = 1000;
  std::string hidden = "8192,8192,8192,8192";
  double min_link_fraction = 0.6;  // of the link's bandwidth, at the largest size
  double min_scaling = 0.9;
};

struct Check {
  std::string what;
  std::string result;  // PASS, FAIL, SKIP
};

// Prints every GPU; returns the slowest link among them, what bounds a
// ring through all of them (an error when one GPU's link is unknown).
absl::StatusOr<GpuLink> SlowestLink(int gpus) {
  const absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Load("libnvidia-ml.so.1");
  absl::StatusOr<GpuLink> slowest = absl::NotFoundError("no GPU");
  absl::Status unknown;
  for (int d = 0; d < gpus; ++d) {
    char bus[32] = {};
    CUDA_RETURN_IF_ERROR(cudaDeviceGetPCIBusId(bus, sizeof(bus), d));
    cudaDeviceProp props{};
    CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, d));
    const absl::StatusOr<GpuLink> link =
        nvml.ok() ? (*nvml)->Link(bus) : absl::StatusOr<GpuLink>(nvml.status());
    std::printf(
        "GPU %d: %s at %s, %s\n", d, props.name, bus,
        link.ok()
            ? absl::StrFormat("%s, %.0f GB/s each way", link->kind, link->gb_per_second).c_str()
            : std::string(link.status().message()).c_str());
    if (!link.ok()) {
      unknown = link.status();
    } else if (!slowest.ok() || link->gb_per_second < slowest->gb_per_second) {
      slowest = link;
    }
  }
  if (!unknown.ok()) return unknown;
  return slowest;
}

// Runs `body(rank)` on one thread per GPU, each on its own device.
template <typename Body>
void OnEveryGpu(int world, Body body) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) threads.emplace_back(body, rank);
  for (std::thread& t : threads) t.join();
}

struct AllReduceRow {
  size_t bytes = 0;
  double seconds = 0;  // one all-reduce, waited for, as the trainer waits
};

// Times NCCL all-reduce of 1 MB, 2 MB ... max_bytes on `world` GPUs; `exact`
// tells whether a sum of every rank's (rank + 1) came out exact everywhere.
absl::StatusOr<std::vector<AllReduceRow>> MeasureAllReduce(int world, size_t max_bytes,
                                                           int iterations, bool* exact) {
  std::vector<size_t> sizes;
  for (size_t bytes = 1 << 20; bytes <= max_bytes; bytes *= 2) sizes.push_back(bytes);
  std::vector<AllReduceRow> rows(sizes.size());
  std::vector<absl::Status> errors(world);
  std::vector<int> exact_ranks(world, 0);
  gloo::rendezvous::HashStore store;
  OnEveryGpu(world, [&](int rank) {
    auto fail = [&](absl::Status s) { errors[rank] = std::move(s); };
    absl::StatusOr<std::unique_ptr<NcclCollective>> nccl =
        NcclCollective::Connect(store, rank, world, rank, NcclOptions{});
    if (!nccl.ok()) return fail(nccl.status());
    float* data = nullptr;
    if (absl::Status s = CudaStatus(cudaMalloc(&data, max_bytes), "cudaMalloc", __FILE__, __LINE__);
        !s.ok()) {
      return fail(s);
    }
    // The check: 16 MB of (rank + 1) sum to n(n+1)/2 in every element.
    const size_t n = std::min<size_t>(max_bytes, 16 << 20) / sizeof(float);
    std::vector<float> host(n, rank + 1.0f);
    absl::Status s =
        CudaStatus(cudaMemcpy(data, host.data(), n * sizeof(float), cudaMemcpyHostToDevice),
                   "cudaMemcpy", __FILE__, __LINE__);
    if (s.ok()) s = (*nccl)->AllReduceSum(data, n);
    if (s.ok()) {
      s = CudaStatus(cudaMemcpy(host.data(), data, n * sizeof(float), cudaMemcpyDeviceToHost),
                     "cudaMemcpy", __FILE__, __LINE__);
    }
    const float want = world * (world + 1) / 2.0f;
    exact_ranks[rank] =
        s.ok() && std::all_of(host.begin(), host.end(), [&](float v) { return v == want; });
    for (size_t i = 0; s.ok() && i < sizes.size(); ++i) {
      const size_t count = sizes[i] / sizeof(float);
      for (int w = 0; s.ok() && w < 3; ++w) s = (*nccl)->AllReduceSum(data, count);
      if (s.ok()) s = (*nccl)->Barrier();
      const Clock::time_point start = Clock::now();
      for (int it = 0; s.ok() && it < iterations; ++it) s = (*nccl)->AllReduceSum(data, count);
      if (rank == 0) {
        rows[i] = {sizes[i],
                   std::chrono::duration<double>(Clock::now() - start).count() / iterations};
      }
    }
    cudaFree(data);
    if (!s.ok()) fail(s);
  });
  for (const absl::Status& s : errors) {
    if (!s.ok()) return s;
  }
  *exact = std::all_of(exact_ranks.begin(), exact_ranks.end(), [](int e) { return e == 1; });
  return rows;
}

// The trainer on `world` GPUs: samples per second of all ranks together,
// from the end of warm-up to the last step.
absl::StatusOr<double> TrainerThroughput(const Options& o, int world) {
  const v1::TrainerSpec spec = BenchTrainerSpec(o.hidden, o.batch);
  absl::StatusOr<TrainTestSplit> data =
      BenchData(static_cast<int64_t>(o.steps) * o.batch * world, o.features, o.classes);
  if (!data.ok()) return data.status();
  std::vector<double> rates(world, 0);
  std::vector<absl::Status> errors(world);
  gloo::rendezvous::HashStore store;
  OnEveryGpu(world, [&](int rank) {
    absl::StatusOr<std::unique_ptr<NcclCollective>> nccl =
        NcclCollective::Connect(store, rank, world, rank, NcclOptions{});
    if (!nccl.ok()) {
      errors[rank] = nccl.status();
      return;
    }
    std::vector<Clock::time_point> step_times;
    TrainerContext context;
    context.comm = nccl->get();
    context.stop_after_step = o.steps;
    context.progress_interval_seconds = 0;  // a callback after every step
    context.on_progress = [&](const v1::Progress&) { step_times.push_back(Clock::now()); };
    cudaStream_t comm_stream = (*nccl)->stream();
    context.make_runner = [comm_stream](const v1::TrainerSpec& s, const std::vector<int>& w) {
      return MakeGpuRunner(s, w, comm_stream);
    };
    absl::StatusOr<TrainResult> result = Train(spec, *data, context);
    if (!result.ok()) {
      errors[rank] = result.status();
      return;
    }
    // Step k's time is taken after its update (an epoch's end may report
    // once more); the timed window runs from the end of warm-up to the
    // last step.
    const int first = o.warmup - 1;
    const int last = o.steps - 1;
    if (first < 0 || last <= first || static_cast<int>(step_times.size()) <= last) {
      errors[rank] = absl::InvalidArgumentError(
          absl::StrCat("need 1 <= warm-up < steps and a time per step; got warm-up ", o.warmup,
                       ", steps ", o.steps, ", ", step_times.size(), " times"));
      return;
    }
    rates[rank] = (last - first) * static_cast<double>(o.batch) /
                  std::chrono::duration<double>(step_times[last] - step_times[first]).count();
  });
  for (const absl::Status& s : errors) {
    if (!s.ok()) return s;
  }
  double total = 0;
  for (double r : rates) total += r;
  return total;
}

void AllReduceChecks(const Options& o, int gpus, const absl::StatusOr<GpuLink>& link,
                     std::vector<Check>* checks) {
  bool exact = false;
  absl::StatusOr<std::vector<AllReduceRow>> rows =
      MeasureAllReduce(gpus, static_cast<size_t>(o.max_mb) << 20, o.iterations, &exact);
  if (!rows.ok()) {
    std::printf("all-reduce failed: %s\n", rows.status().ToString().c_str());
    checks->push_back({"NCCL all-reduce runs", "FAIL"});
    return;
  }
  checks->push_back(
      {absl::StrCat("NCCL all-reduce sums are exact on ", gpus, " GPUs"), exact ? "PASS" : "FAIL"});
  const double link_gbps = link.ok() ? link->gb_per_second : 0;
  std::printf("\nNCCL all-reduce, %d GPUs, float32 sum, %d iterations (each waited for)\n", gpus,
              o.iterations);
  std::printf("%10s %12s %14s %14s %12s\n", "size", "time (us)", "algbw (GB/s)", "busbw (GB/s)",
              "of link");
  double last_busbw = 0;
  for (const AllReduceRow& r : *rows) {
    const double algbw = r.bytes / r.seconds / 1e9;
    last_busbw = algbw * 2.0 * (gpus - 1) / gpus;
    std::printf(
        "%8zuMB %12.1f %14.2f %14.2f %11s\n", r.bytes >> 20, r.seconds * 1e6, algbw, last_busbw,
        link_gbps > 0 ? absl::StrFormat("%.0f%%", 100 * last_busbw / link_gbps).c_str() : "-");
  }
  std::printf("link: %s\n",
              link.ok() ? absl::StrFormat("%s, %.0f GB/s each way", link->kind, link_gbps).c_str()
                        : std::string(link.status().message()).c_str());
  const std::string what = absl::StrFormat("busbw at %d MB %.1f GB/s >= %.0f%% of the link",
                                           o.max_mb, last_busbw, 100 * o.min_link_fraction);
  if (link_gbps <= 0) {
    checks->push_back({what, "SKIP (link unknown)"});
  } else {
    checks->push_back({what, last_busbw >= o.min_link_fraction * link_gbps ? "PASS" : "FAIL"});
  }
}

void ScalingChecks(const Options& o, int gpus, std::vector<Check>* checks) {
  std::vector<int> worlds;
  for (int w = 1; w < gpus; w *= 2) worlds.push_back(w);
  worlds.push_back(gpus);
  std::printf("\ntrainer, MLP %d->%s->%d, batch %d per GPU, fp32, SGD\n", o.features,
              o.hidden.c_str(), o.classes, o.batch);
  std::printf("%6s %16s %12s\n", "GPUs", "samples/s", "scaling");
  double one = 0, efficiency = 0;
  for (int world : worlds) {
    absl::StatusOr<double> rate = TrainerThroughput(o, world);
    if (!rate.ok()) {
      std::printf("%6d failed: %s\n", world, rate.status().ToString().c_str());
      checks->push_back({absl::StrCat("trainer runs on ", world, " GPUs"), "FAIL"});
      return;
    }
    if (world == 1) one = *rate;
    efficiency = *rate / (world * one);
    std::printf("%6d %16.0f %11.1f%%\n", world, *rate, 100 * efficiency);
  }
  if (gpus == 1) {
    checks->push_back({"trainer scaling", "SKIP (one GPU)"});
    return;
  }
  const std::string what = absl::StrFormat("trainer scaling 1 -> %d GPUs %.1f%% >= %.0f%%", gpus,
                                           100 * efficiency, 100 * o.min_scaling);
  checks->push_back({what, efficiency >= o.min_scaling ? "PASS" : "FAIL"});
}

int Main(int argc, char** argv) {
  Options o;
  CLI::App app{"GPU checks: NCCL bus bandwidth and the trainer's scaling"};
  app.add_option("--max-mb", o.max_mb, "largest all-reduce, MB");
  app.add_option("--iterations", o.iterations, "timed all-reduces per size");
  app.add_option("--steps", o.steps, "trainer steps per run");
  app.add_option("--warmup", o.warmup, "untimed trainer steps");
  app.add_option("--batch", o.batch, "trainer batch per GPU");
  app.add_option("--hidden", o.hidden, "the MLP's hidden widths");
  CLI11_PARSE(app, argc, argv);

  int gpus = 0;
  if (absl::Status s = CudaDeviceCount(&gpus); !s.ok() || gpus == 0) {
    std::printf("no GPU: %s\n", s.ok() ? "CUDA sees none" : std::string(s.message()).c_str());
    return 2;
  }
  const absl::StatusOr<GpuLink> link = SlowestLink(gpus);
  std::vector<Check> checks;
  if (gpus == 1) {
    checks.push_back({"NCCL all-reduce", "SKIP (one GPU)"});
  } else {
    AllReduceChecks(o, gpus, link, &checks);
  }
  ScalingChecks(o, gpus, &checks);

  bool failed = false;
  std::printf("\n");
  for (const Check& c : checks) {
    std::printf("check: %-5s %s\n", c.result.c_str(), c.what.c_str());
    failed |= c.result == "FAIL";
  }
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace ringmaster

int main(int argc, char** argv) { return ringmaster::Main(argc, argv); }
