// What running a rank in an image costs, against the same work without:
//
//   start-up  a rank's launch to its exit, for a program that does nothing
//             (busybox true): in a cached image under runc (the worker's
//             path: the cache's hold, bundle, runtime, init) against the
//             same launch on the host, side by side, interleaved;
//   pull      an image of one incompressible layer from a local registry
//             (docker-registry, TLS) into a worker's cache (skopeo copy,
//             umoci unpack, index) against skopeo copy alone, the tool it
//             is built on.
//
// Needs root, runc, skopeo, umoci, docker-registry and buildah (./dev test
// installs them):
//
//   bazel build -c opt //bench:image_startup //worker:ringmaster-container-init
//   bazel-bin/bench/image_startup [--launches 30] [--layer-mb 256] [--pulls 3]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"
#include "domain/image_reference.h"
#include "testing/registry_server.h"
#include "testing/test_util.h"
#include "worker/container_launch.h"
#include "worker/image_store.h"
#include "worker/process_launcher.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

struct Figures {
  double median_ms = 0;
  double mean_ms = 0;
};

Figures Summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  Figures f;
  f.median_ms = ms[ms.size() / 2];
  for (double m : ms) f.mean_ms += m / ms.size();
  return f;
}

// Milliseconds from Spawn to the exit of `spec`'s process.
double LaunchMs(PosixProcessLauncher* launcher, const LaunchSpec& spec) {
  const absl::Time start = absl::Now();
  absl::StatusOr<pid_t> pid = launcher->Spawn(spec);
  if (!pid.ok()) {
    std::fprintf(stderr, "launch failed: %s\n", pid.status().ToString().c_str());
    std::exit(1);
  }
  ExitStatus status;
  if (!launcher->WaitExit(*pid, absl::Minutes(1), &status) || status.exit_code != 0) {
    std::fprintf(stderr, "the launch did not exit 0 (%d)\n", status.exit_code);
    std::exit(1);
  }
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  launcher->ClearGroup(*pid, absl::Seconds(5));
  return ms;
}

std::string Noise(size_t bytes) {
  std::mt19937_64 rng(42);
  std::string s(bytes, '\0');
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  return s;
}

// The worker's path for a rank whose image is cached: the cache's hold on
// it, the bundle, the runtime, the init; against the same launch on the
// host.
void StartUp(const std::string& dir, ImageStore* store, const ImageReference& ref, int launches) {
  const std::string init = (fs::read_symlink("/proc/self/exe").parent_path().parent_path() /
                            "worker" / "ringmaster-container-init")
                               .string();
  if (!fs::exists(init)) {
    std::fprintf(stderr, "no %s: bazel build //worker:ringmaster-container-init\n", init.c_str());
    std::exit(1);
  }
  ContainerOptions options;
  options.bundles_dir = dir + "/bundles";
  options.state_dir = dir + "/containers";
  options.init = init;
  PosixProcessLauncher launcher;
  LaunchSpec host;
  host.argv = {"/bin/busybox", "true"};
  host.env = {{"PATH", "/bin"}};
  host.log_path = dir + "/rank.log";
  host.name = "bench";
  std::vector<double> on_host, in_image;
  for (int i = 0; i < launches; ++i) {
    on_host.push_back(LaunchMs(&launcher, host));
    LaunchSpec rank = host;
    rank.argv = {"true"};
    const std::string id = absl::StrCat("bench-", getpid(), "-", i);
    const absl::Time start = absl::Now();
    absl::StatusOr<ImageStore::Held> held = store->Acquire(ref, false);
    absl::StatusOr<LaunchSpec> contained =
        held.ok() ? InImage(rank, held->rootfs, "bench image", id, options) : held.status();
    if (!contained.ok()) {
      std::fprintf(stderr, "%s\n", contained.status().ToString().c_str());
      std::exit(1);
    }
    const double set_up_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    in_image.push_back(set_up_ms + LaunchMs(&launcher, *contained));
    RemoveContainer(options, id);
    store->Release(*held);
  }
  const Figures h = Summarize(on_host), c = Summarize(in_image);
  std::printf("start-up of a rank (%d launches each, interleaved; busybox true)\n", launches);
  std::printf("  %-24s median %8.1f ms  mean %8.1f ms\n", "on the host", h.median_ms, h.mean_ms);
  std::printf("  %-24s median %8.1f ms  mean %8.1f ms\n", "in a cached image (runc)", c.median_ms,
              c.mean_ms);
  const double added_ms = c.median_ms - h.median_ms;
  std::printf(
      "  the image adds %.1f ms (median), %.2fx the host's; goal: at most 300 ms more (%s)\n",
      added_ms, c.median_ms / h.median_ms, added_ms <= 300 ? "met" : "missed");
}

void Pulls(const testing::RegistryServer& registry, const std::string& dir, int layer_mb,
           int pulls) {
  const std::string name = "bench/pull:1.0";
  if (absl::Status pushed = registry.Push(name, {{"/data/noise", Noise(size_t(layer_mb) << 20)}});
      !pushed.ok()) {
    std::fprintf(stderr, "%s\n", pushed.ToString().c_str());
    std::exit(1);
  }
  absl::StatusOr<ImageReference> ref = ParseImageReference(registry.address() + "/" + name);
  const std::string auth = registry.WriteAuthFile(dir + "/auth.json", "bench", "secret");
  std::vector<double> ours, skopeo;
  for (int i = 0; i < pulls; ++i) {
    ImageStoreOptions options;
    options.dir = absl::StrCat(dir, "/images-", i);
    options.auth_file = auth;
    options.certs_dir = registry.certs_dir();
    auto store = ImageStore::Open(options);
    const absl::Time start = absl::Now();
    absl::StatusOr<ImageStore::Held> held = (*store)->Acquire(*ref, true);
    if (!held.ok()) {
      std::fprintf(stderr, "%s\n", held.status().ToString().c_str());
      std::exit(1);
    }
    ours.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    fs::remove_all(options.dir);

    const std::string copy_dir = absl::StrCat(dir, "/skopeo-", i);
    const absl::Time copy_start = absl::Now();
    absl::StatusOr<ToolRun> run = RunToCompletion(
        {"skopeo", "copy", "--quiet", "--authfile", auth, "--src-cert-dir",
         registry.certs_dir() + "/" + registry.address(), ref->Transport(), "oci:" + copy_dir},
        {}, absl::Minutes(10));
    if (!run.ok() || run->exit_code != 0) {
      std::fprintf(stderr, "skopeo copy: %s\n", run.ok() ? run->output.c_str() : "did not run");
      std::exit(1);
    }
    skopeo.push_back(absl::ToDoubleMilliseconds(absl::Now() - copy_start));
    fs::remove_all(copy_dir);
  }
  const Figures o = Summarize(ours), s = Summarize(skopeo);
  std::printf("pull of a %d MiB layer from a local registry (%d pulls each, interleaved)\n",
              layer_mb, pulls);
  std::printf("  %-36s median %8.0f ms  %7.1f MiB/s\n", "into the worker's cache (ours)",
              o.median_ms, layer_mb / (o.median_ms / 1000));
  std::printf("  %-36s median %8.0f ms  %7.1f MiB/s\n", "skopeo copy alone (no unpack)",
              s.median_ms, layer_mb / (s.median_ms / 1000));
  std::printf("  ours takes %.2fx the time of skopeo copy alone\n", o.median_ms / s.median_ms);
}

}  // namespace
}  // namespace ringmaster

int main(int argc, char** argv) {
  int launches = 30, layer_mb = 256, pulls = 3;
  CLI::App app{"start-up and pull costs of ranks in images"};
  app.add_option("--launches", launches, "launches of each kind")->capture_default_str();
  app.add_option("--layer-mb", layer_mb, "the pulled image's layer")->capture_default_str();
  app.add_option("--pulls", pulls, "pulls of each kind")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (std::string why = ringmaster::testing::RegistryServer::Unavailable(); !why.empty()) {
    std::fprintf(stderr, "cannot run: %s\n", why.c_str());
    return 1;
  }
  const std::string dir = ringmaster::testing::MakeTempDir("image-bench");
  auto registry = ringmaster::testing::RegistryServer::Start(dir + "/registry", "bench", "secret");
  if (!registry.ok()) {
    std::fprintf(stderr, "%s\n", registry.status().ToString().c_str());
    return 1;
  }
  // A cached image: busybox, pulled once.
  if (absl::Status pushed = (*registry)->Push(
          "bench/busybox:1.0", {{"/bin/busybox*", "/bin/busybox"}, {"/bin/true*", "/bin/busybox"}});
      !pushed.ok()) {
    std::fprintf(stderr, "%s\n", pushed.ToString().c_str());
    return 1;
  }
  ringmaster::ImageStoreOptions options;
  options.dir = dir + "/images";
  options.auth_file = (*registry)->WriteAuthFile(dir + "/auth.json", "bench", "secret");
  options.certs_dir = (*registry)->certs_dir();
  auto store = ringmaster::ImageStore::Open(options);
  auto ref = ringmaster::ParseImageReference((*registry)->address() + "/bench/busybox:1.0");
  absl::StatusOr<ringmaster::ImageStore::Held> held = (*store)->Acquire(*ref, false);
  if (!held.ok()) {
    std::fprintf(stderr, "%s\n", held.status().ToString().c_str());
    return 1;
  }
  (*store)->Release(*held);
  ringmaster::StartUp(dir, store->get(), *ref, launches);
  ringmaster::Pulls(**registry, dir, layer_mb, pulls);
  std::filesystem::remove_all(dir);
  return 0;
}
