// All-reduce time of Ringmaster's collective layer against raw Gloo, in N
// rank processes (fork), for sizes from 1 to 64 MB. The layer is measured
// as the trainer uses it (shared memory between local ranks, rings between
// hosts) and over TCP like Gloo; raw Gloo is gloo::allreduce on its own
// context. Prints one JSON line per size (from rank 0);
// bench/allreduce_bandwidth.py and bench/multihost.py add the peers and
// the tables.
//
// Across hosts, each host runs its own ranks of the world (bench/host_share.h).
#include <sys/wait.h>
#include <unistd.h>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/host_share.h"
#include "trainer/gloo_collective.h"

namespace ringmaster {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int RunRank(int rank, const HostShare& share, int iterations) {
  const int world = share.world;
  gloo::rendezvous::FileStore store(share.store);
  GlooOptions shm_options;
  shm_options.prefix = "shm";
  shm_options.hostname = share.host;
  GlooOptions tcp_options;
  tcp_options.prefix = "tcp";
  tcp_options.hostname = share.host;
  tcp_options.shared_memory = false;
  auto ours_shm = GlooCollective::Connect(store, rank, world, shm_options);
  auto ours_tcp = GlooCollective::Connect(store, rank, world, tcp_options);
  if (!ours_shm.ok() || !ours_tcp.ok()) return 1;

  auto raw = std::make_shared<gloo::rendezvous::Context>(rank, world);
  gloo::rendezvous::PrefixStore raw_store("raw", store);
  auto device = gloo::transport::tcp::CreateDevice(gloo::transport::tcp::attr(share.host.c_str()));
  raw->connectFullMesh(raw_store, device);

  // Gradients as the trainer holds them: in memory every local rank maps,
  // or (a rank alone on its host) its own.
  std::vector<float> own;
  float* shared = (*ours_shm)->SharedBuffer(size_t{64} << 18);
  if (shared == nullptr) {
    own.resize(size_t{64} << 18);
    shared = own.data();
  }
  for (int mb : {1, 2, 4, 8, 16, 32, 64}) {
    const size_t n = static_cast<size_t>(mb) << 18;  // floats
    std::vector<float> data(n, 1.0f);
    std::vector<double> shared_s, shm_s, tcp_s, raw_s;
    uint32_t tag = 1000;
    auto run = [&](int which) -> bool {
      std::fill(data.begin(), data.end(), 1.0f);  // values stay finite
      if (which == 3) std::fill(shared, shared + n, 1.0f);
      // Every rank starts the timed operation together.
      if (!(*ours_tcp)->Barrier().ok()) return false;
      const auto start = Clock::now();
      if (which == 3 && !(*ours_shm)->AllReduceSum(shared, n).ok()) return false;
      if (which == 0 && !(*ours_shm)->AllReduceSum(data.data(), n).ok()) return false;
      if (which == 1 && !(*ours_tcp)->AllReduceSum(data.data(), n).ok()) return false;
      if (which == 2) {
        gloo::AllreduceOptions opts(raw);
        opts.setOutput(data.data(), n);
        opts.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        opts.setTag(tag++);
        gloo::allreduce(opts);
      }
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      std::vector<double>* out[] = {&shm_s, &tcp_s, &raw_s, &shared_s};
      out[which]->push_back(seconds);
      return true;
    };
    for (int it = -2; it < iterations; ++it) {  // two warm-up rounds
      // The order rotates, so no variant always runs first or last.
      for (int k = 0; k < 4; ++k) {
        if (!run((it + 4 + k) % 4)) return 1;
      }
      if (it < 0) {
        shared_s.clear();
        shm_s.clear();
        tcp_s.clear();
        raw_s.clear();
      }
    }
    if (rank == 0) {
      std::printf(
          "{\"bytes\": %zu, \"ours_shared_seconds\": %.6f, \"ours_shm_seconds\": %.6f, "
          "\"ours_tcp_seconds\": %.6f, \"raw_gloo_seconds\": %.6f}\n",
          n * sizeof(float), Median(shared_s), Median(shm_s), Median(tcp_s), Median(raw_s));
      std::fflush(stdout);
    }
  }
  return 0;
}

int Main(int argc, char** argv) {
  HostShare share;
  int iterations = 10;
  CLI::App app{"All-reduce time: Ringmaster's collective layer and raw Gloo"};
  share.AddOptions(app);
  app.add_option("--iterations", iterations);
  CLI11_PARSE(app, argc, argv);
  share.Resolve();

  std::vector<pid_t> pids;
  for (int rank = share.first_rank; rank < share.first_rank + share.ranks; ++rank) {
    pid_t pid = fork();
    if (pid == 0) _exit(RunRank(rank, share, iterations));
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : pids) {
    int status;
    waitpid(pid, &status, 0);
    ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace ringmaster

int main(int argc, char** argv) { return ringmaster::Main(argc, argv); }
