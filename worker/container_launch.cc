#include "worker/container_launch.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"

namespace ringmaster {
namespace {

// What an image's programs are looked up on when the rank's environment
// gives no PATH.
constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Where the OCI runtime is looked for, and the PATH it runs with.
constexpr char kRuntimePath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// An executable regular file at `path` inside `root`: every link, absolute
// or not, resolved as if `root` were "/".
bool ExecutableInRoot(int root, const std::string& path) {
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const int fd = static_cast<int>(syscall(SYS_openat2, root, path.c_str(), &how, sizeof(how)));
  if (fd < 0) return false;
  struct stat st {};
  const bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
  close(fd);
  return ok;
}

}  // namespace

absl::StatusOr<std::string> FindInImage(const std::string& rootfs, const std::string& program,
                                        const std::string& path) {
  UniqueFd root(open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the image's root ", rootfs, ": ", strerror(errno)));
  }
  if (absl::StrContains(program, '/')) {
    if (ExecutableInRoot(root.get(), program)) return program;
  } else {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      const std::string candidate = absl::StrCat(dir, "/", program);
      if (ExecutableInRoot(root.get(), candidate)) return candidate;
    }
  }
  return absl::NotFoundError(absl::StrCat("no program ", program, " on PATH=", path));
}

absl::StatusOr<LaunchSpec> InImage(const LaunchSpec& spec, const std::string& rootfs,
                                   const std::string& image, const std::string& id,
                                   const ContainerOptions& options) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("a launch without a command");
  auto path = spec.env.find("PATH");
  absl::StatusOr<std::string> program =
      FindInImage(rootfs, spec.argv[0], path == spec.env.end() ? kDefaultPath : path->second);
  if (!program.ok()) {
    return absl::NotFoundError(absl::StrCat("the command ", spec.argv[0], " is not in the image ",
                                            image, ": ", program.status().message()));
  }
  ContainerSpec container;
  container.rootfs = rootfs;
  container.argv = spec.argv;
  container.argv[0] = *program;
  container.env = spec.env;
  if (path == spec.env.end()) container.env["PATH"] = kDefaultPath;
  if (spec.inherit_fd >= 3) container.env["RINGMASTER_SNAPSHOT_FD"] = "3";
  container.working_dir = spec.working_dir;
  if (spec.run_as) {
    container.uid = spec.run_as->uid;
    container.gid = spec.run_as->gid;
    container.groups = spec.run_as->groups;
  } else {
    container.uid = geteuid();
    container.gid = getegid();
  }
  std::vector<std::string> writable = options.writable;
  if (!spec.working_dir.empty()) writable.push_back(spec.working_dir);
  for (const std::string& dir : writable) container.binds.push_back({dir, dir, false});
  for (const std::string& dir : options.read_only) container.binds.push_back({dir, dir, true});
  container.shm = spec.private_shm;
  container.devices = options.devices;
  container.cgroups_path = options.cgroups_path;
  const std::string bundle = absl::StrCat(options.bundles_dir, "/", id);
  if (absl::Status written = WriteBundle(bundle, container); !written.ok()) return written;

  // The runtime runs as the worker: nothing of the job's environment
  // (PATH, LD_PRELOAD) reaches it; the job's goes to config.json only.
  absl::StatusOr<std::string> runtime = ResolveProgram(options.runtime, kRuntimePath);
  if (!runtime.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this worker's --container-runtime ", options.runtime, ": ", runtime.status().message()));
  }
  LaunchSpec launch = spec;
  launch.env = {{"PATH", kRuntimePath}};
  launch.argv = {*runtime, "run", "--bundle", bundle};
  if (spec.inherit_fd >= 3) {
    // The runtime passes descriptors 3 to 3 + n - 1 on: the snapshot
    // segment's is 3.
    launch.argv.insert(launch.argv.end(), {"--preserve-fds", "1"});
    launch.inherit_fd_as = 3;
  }
  launch.argv.push_back(id);
  // The runtime runs as the worker; the rank, as the job (config.json).
  launch.run_as.reset();
  launch.working_dir.clear();
  launch.required_access.clear();
  // Its own pid namespace and /dev/shm come with the container.
  launch.hide_other_users_processes = false;
  launch.private_shm.clear();
  return launch;
}

}  // namespace ringmaster
