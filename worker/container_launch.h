// A rank's launch moved into its job's image: the same command, user,
// environment and output, started by an OCI runtime (runc or crun) from a
// bundle (worker/oci_bundle.h) whose root is the image's file system. The
// host paths the rank needs are bound in at the same paths, so that
// nothing in its environment changes meaning.
#ifndef RINGMASTER_WORKER_CONTAINER_LAUNCH_H_
#define RINGMASTER_WORKER_CONTAINER_LAUNCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/oci_bundle.h"
#include "worker/process_launcher.h"

namespace ringmaster {

struct ContainerOptions {
  std::string runtime = "runc";  // --container-runtime
  std::string bundles_dir;       // <state-dir>/bundles
  // Bound at the same path, writable: the rank's working directory,
  // checkpoint roots, its rank directory.
  std::vector<std::string> writable;
  // Bound at the same path, read-only: the Python package, its hooks.
  std::vector<std::string> read_only;
  std::string cgroups_path;  // the rank's cgroup, for the runtime to keep it in
  std::vector<std::string> devices;
};

// The launch of `spec` in the image whose root file system is `rootfs`
// (`image` names it in errors), as container `id` (unique on the worker;
// its bundle is <bundles_dir>/<id>). NOT_FOUND naming the command and the
// image when the command is not in the image.
absl::StatusOr<LaunchSpec> InImage(const LaunchSpec& spec, const std::string& rootfs,
                                   const std::string& image, const std::string& id,
                                   const ContainerOptions& options);

// Where `program` is in the file system at `rootfs`, looked up on `path`
// (a PATH value) as the image would, symbolic links resolved inside it;
// NOT_FOUND when it is not there as an executable file.
absl::StatusOr<std::string> FindInImage(const std::string& rootfs, const std::string& program,
                                        const std::string& path);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_CONTAINER_LAUNCH_H_
