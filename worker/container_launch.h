// A rank's launch moved into its job's image: the same command, user,
// environment and output, started by an OCI runtime (runc or crun) from a
// bundle (worker/oci_bundle.h) whose root is the image's file system. The
// host paths the rank needs are bound in at the same paths, so that
// nothing in its environment changes meaning.
#ifndef RINGMASTER_WORKER_CONTAINER_LAUNCH_H_
#define RINGMASTER_WORKER_CONTAINER_LAUNCH_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/cdi.h"
#include "worker/oci_bundle.h"
#include "worker/process_launcher.h"

namespace ringmaster {

struct ContainerOptions {
  std::string runtime = "runc";  // --container-runtime
  std::string state_dir;         // the runtime's own (--root): this worker's containers
  std::string bundles_dir;       // <state-dir>/bundles
  // The container's PID 1 (ringmaster-container-init), on the host.
  std::string init;
  // Empty tmpfs mounts made first, over host directories the binds lie in
  // (the worker's jobs directory, a checkpoint root), so that the runtime
  // makes the binds' mount points there and not in the image's root file
  // system, which every job of the image shares.
  std::vector<std::string> masks;
  // Host directories bound at the same path: the job's directory, its
  // checkpoints (writable), the Python package (read-only). The runtime
  // resolves their paths as root: only paths no job can change belong here.
  std::vector<BindMount> binds;
  // The worker's environment that ranks on the host get, which the image's
  // own replaces (PATH, LANG), unless the job set it.
  std::vector<std::string> host_env;
  std::string cgroups_path;  // the rank's cgroup, for the runtime to keep it in
  // The rank's GPUs: device nodes, and what their CDI spec adds (the
  // driver's libraries bound in, environment, hooks).
  ContainerEdits gpus;
};

// `runtime` (--container-runtime) as the worker runs it: looked up on a
// fixed PATH (never the job's or the worker's own), FAILED_PRECONDITION
// naming the flag when it is not there.
absl::StatusOr<std::string> ResolveRuntime(const std::string& runtime);

// The launch of `spec` in the image whose root file system is `rootfs`
// (`image` names it in errors), as container `id` (unique on the worker;
// its bundle is <bundles_dir>/<id>): the job's command under the init, in
// its working directory in the image (the image's own when it has none),
// with the image's environment (umoci's <rootfs>/../config.json) under the
// rank's. NOT_FOUND naming the command and the image when the command is
// not in the image.
absl::StatusOr<LaunchSpec> InImage(const LaunchSpec& spec, const std::string& rootfs,
                                   const std::string& image, const std::string& id,
                                   const ContainerOptions& options);

// What else than the image a program may be found in: host directories
// bound into the container (the job's code), read as the job's user, and
// the directory a relative path starts from.
struct FoundThrough {
  std::vector<BindMount> binds;
  std::string cwd = "/";
  std::optional<RunAs> user;
};

// Where `program` is in the container whose image's root is `rootfs`,
// looked up on `path` (a PATH value) as exec would there: in the image,
// symbolic links resolved inside it, or in a bind. NOT_FOUND when it is
// not there as an executable file.
absl::StatusOr<std::string> FindInImage(const std::string& rootfs, const std::string& program,
                                        const std::string& path, const FoundThrough& binds = {});

// The container's root file system at <bundle>/rootfs: an overlay of the
// image's (`image_rootfs`, shared by every container of the image and
// never written) under a writable layer of its own in a tmpfs at
// <bundle>/rw, nosuid and nodev. The runtime makes the container's mount
// points and working directory there, and the container sees the root
// read-only. RemoveContainer unmounts both.
absl::Status MountRootfs(const std::string& image_rootfs, const std::string& bundle);

// OK when no one but root can change what `path` leads to: an absolute
// path without links, "." or "..", every directory on it root's, and each
// above the last writable by root alone (or sticky). The runtime resolves
// binds as root: a path a job could change could lead it to any directory
// of the host. PERMISSION_DENIED naming `what`, the path and the part that
// fails otherwise.
absl::Status OnlyRootCanChange(const std::string& path, const std::string& what);

// The one of `roots` (as they resolve here) that `path` is or lies in;
// empty when none.
std::string RootHolding(const std::string& path, const std::vector<std::string>& roots);

// The job's command in the container whose runtime (`runc run`) is
// `runtime_pid`: the child of the container's init, as the host numbers
// it; 0 when there is none (yet, or any more).
pid_t ContainedCommand(pid_t runtime_pid);

// Removes container `id`'s runtime state and bundle, once it has ended.
void RemoveContainer(const ContainerOptions& options, const std::string& id);

// Removes every container an earlier life of this worker left.
void SweepContainers(const ContainerOptions& options);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_CONTAINER_LAUNCH_H_
